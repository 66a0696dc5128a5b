package wire

import (
	"encoding/json"
	"syscall"
	"testing"
	"time"

	"github.com/condense-dev/condense/internal/testutil/corpus"
)

// cpuTime returns the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU adds a cpu-ns/op metric: the CPU time the process spent per operation
// (including GC work), which unlike wall time does not grow when other jobs compete for
// the machine's two cores.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}

// benchLoop runs op b.N times over an input of n bytes, reporting allocations and CPU
// time per operation.
func benchLoop(b *testing.B, n int, op func()) {
	b.SetBytes(int64(n))
	b.ReportAllocs()
	b.ResetTimer()
	start := cpuTime()
	defer func() { reportCPU(b, start) }()
	for b.Loop() {
		op()
	}
}

// benchRequest returns a 2 MB Anthropic request built from the Claude Code corpus.
func benchRequest(b *testing.B) []byte {
	return twoMBRequest(b)
}

// BenchmarkParseAnthropic parses the largest corpus request.
func BenchmarkParseAnthropic(b *testing.B) {
	body := benchRequest(b)
	benchLoop(b, len(body), func() {
		if _, err := Parse(Anthropic, body); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkParseSmall parses a one-message body, as the proxy parses a response's
// assistant message (and a hidden exchange's blocks) on their own: the slabs must be sized
// for the body, not for a transcript.
func BenchmarkParseSmall(b *testing.B) {
	body := []byte(`{"model":"x","messages":[{"role":"assistant","content":[{"type":"text","text":"Done."}]}]}`)
	benchLoop(b, len(body), func() {
		if _, err := Parse(Anthropic, body); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkBytesUnmodified measures serializing an unmodified request (no copy).
func BenchmarkBytesUnmodified(b *testing.B) {
	body := benchRequest(b)
	r, err := Parse(Anthropic, body)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := cpuTime()
	defer func() { reportCPU(b, start) }()
	for b.Loop() {
		if out := r.Bytes(); len(out) != len(body) {
			b.Fatal("length")
		}
	}
}

// BenchmarkSerializeOneBlockChanged replaces one tool result in the middle of the largest
// request and serializes it.
func BenchmarkSerializeOneBlockChanged(b *testing.B) {
	body := benchRequest(b)
	r, err := Parse(Anthropic, body)
	if err != nil {
		b.Fatal(err)
	}
	mi, bi := -1, -1
	for i := len(r.Messages) / 2; i < len(r.Messages) && mi < 0; i++ {
		for j, blk := range r.Messages[i].Blocks {
			if blk.Kind == KindToolResult {
				mi, bi = i, j
				break
			}
		}
	}
	if mi < 0 {
		b.Skip("no tool result")
	}
	benchLoop(b, len(body), func() {
		m := r.Messages[mi]
		blocks := append([]*Block(nil), m.Blocks...)
		blocks[bi] = blocks[bi].WithResultText("[pruned]")
		msgs := append([]*Message(nil), r.Messages...)
		msgs[mi] = m.WithBlocks(blocks)
		out := r.WithMessages(msgs).Bytes()
		if len(out) == 0 {
			b.Fatal("empty")
		}
	})
}

// BenchmarkParseOpenAI parses the largest OpenAI-native corpus conversation (the
// mini-SWE-agent psf__requests-1142 messages, about 2 MB) as a Chat Completions request.
func BenchmarkParseOpenAI(b *testing.B) {
	body := corpus.TrajectoryChatRequest(b, "msa_psf__requests-1142.traj.json")
	benchLoop(b, len(body), func() {
		if _, err := Parse(OpenAI, body); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkParseReusing is the proxy's steady state: the 2 MB request parsed with
// ParseReusing when the previous request was the same conversation minus its last two
// messages (the assistant turn and the tool result the agent added since).
func BenchmarkParseReusing(b *testing.B) {
	body := benchRequest(b)
	full, err := Parse(Anthropic, body)
	if err != nil {
		b.Fatal(err)
	}
	raws := make([]json.RawMessage, 0, len(full.Messages))
	for _, m := range full.Messages[:len(full.Messages)-2] {
		raws = append(raws, m.Raw())
	}
	prev, err := Parse(Anthropic, wrapMessages(raws))
	if err != nil {
		b.Fatal(err)
	}
	body = append([]byte(nil), body...)
	benchLoop(b, len(body), func() {
		r, err := ParseReusing(Anthropic, body, prev)
		if err != nil {
			b.Fatal(err)
		}
		if r.ReusedMessages() != len(full.Messages)-2 {
			b.Fatalf("reused %d of %d", r.ReusedMessages(), len(full.Messages))
		}
	})
}

// stringOffsets returns the offsets of every string literal (keys included) in body, a
// valid JSON document.
func stringOffsets(tb testing.TB, body []byte) []int {
	var offs []int
	for i := 0; i < len(body); i++ {
		if body[i] == '"' {
			end, _, err := scanString(body, i)
			if err != nil {
				tb.Fatal(err)
			}
			offs = append(offs, i)
			i = end - 1
		}
	}
	return offs
}

// BenchmarkStringsDecode validates every string of the 2 MB request and decodes it as
// Block.Text does (shared body bytes without escapes, a string of its own with), without the
// rest of the parse: the string kernels' work when every text is read.
func BenchmarkStringsDecode(b *testing.B) {
	body := benchRequest(b)
	offs := stringOffsets(b, body)
	benchLoop(b, len(body), func() {
		for _, off := range offs {
			end, esc, err := scanString(body, off)
			if err != nil {
				b.Fatal(err)
			}
			if esc {
				_ = decoded(bodyString(body[off+1 : end-1]))
			}
		}
	})
}

// BenchmarkStringsScan validates every string of the 2 MB request with scanString.
func BenchmarkStringsScan(b *testing.B) {
	body := benchRequest(b)
	offs := stringOffsets(b, body)
	benchLoop(b, len(body), func() {
		for _, off := range offs {
			if _, _, err := scanString(body, off); err != nil {
				b.Fatal(err)
			}
		}
	})
}
