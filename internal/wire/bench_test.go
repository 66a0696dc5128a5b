package wire

import (
	"testing"
)

// benchRequest returns the largest Claude Code corpus request (about 2-3 MB).
func benchRequest(b *testing.B) []byte {
	body, _ := largestClaudeCodeRequest(b)
	return body
}

// BenchmarkParseAnthropic parses the largest corpus request.
func BenchmarkParseAnthropic(b *testing.B) {
	body := benchRequest(b)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
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
