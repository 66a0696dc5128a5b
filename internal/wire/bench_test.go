package wire

import (
	"encoding/json"
	"os"
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

// benchRequest returns a 2 MB Anthropic request built from the Claude Code corpus.
func benchRequest(b *testing.B) []byte {
	return twoMBRequest(b)
}

// BenchmarkParseAnthropic parses the largest corpus request.
func BenchmarkParseAnthropic(b *testing.B) {
	body := benchRequest(b)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	start := cpuTime()
	defer func() { reportCPU(b, start) }()
	for b.Loop() {
		if _, err := Parse(Anthropic, body); err != nil {
			b.Fatal(err)
		}
	}
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
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	start := cpuTime()
	defer func() { reportCPU(b, start) }()
	for b.Loop() {
		m := r.Messages[mi]
		blocks := append([]*Block(nil), m.Blocks...)
		blocks[bi] = blocks[bi].WithResultText("[pruned]")
		msgs := append([]*Message(nil), r.Messages...)
		msgs[mi] = m.WithBlocks(blocks)
		out := r.WithMessages(msgs).Bytes()
		if len(out) == 0 {
			b.Fatal("empty")
		}
	}
}

// BenchmarkParseOpenAI parses the largest OpenAI-native corpus conversation (the
// mini-SWE-agent psf__requests-1142 messages, about 2 MB) as a Chat Completions request.
func BenchmarkParseOpenAI(b *testing.B) {
	data, err := os.ReadFile(corpus.File(b, "msa_psf__requests-1142.traj.json"))
	if err != nil {
		b.Fatal(err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		b.Fatal(err)
	}
	body := append(append([]byte(`{"model":"gpt-4o","messages":`), doc["messages"]...), '}')
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	start := cpuTime()
	defer func() { reportCPU(b, start) }()
	for b.Loop() {
		if _, err := Parse(OpenAI, body); err != nil {
			b.Fatal(err)
		}
	}
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
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	start := cpuTime()
	defer func() { reportCPU(b, start) }()
	for b.Loop() {
		r, err := ParseReusing(Anthropic, body, prev)
		if err != nil {
			b.Fatal(err)
		}
		if r.ReusedMessages() != len(full.Messages)-2 {
			b.Fatalf("reused %d of %d", r.ReusedMessages(), len(full.Messages))
		}
	}
}
