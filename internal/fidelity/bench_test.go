package fidelity

import (
	"testing"

	"github.com/condense-dev/condense/internal/testutil/corpus"
	"github.com/condense-dev/condense/internal/transcripts"
	"github.com/condense-dev/condense/internal/wire"
)

// BenchmarkFollowSession follows a corpus session request by request as the replay's first
// pass does: parse, find the uses of the previous response, update the index. Bytes are the
// request bodies read.
func BenchmarkFollowSession(b *testing.B) {
	s, err := transcripts.ImportFile(corpus.File(b, "cccodemie_session-624a4a58.jsonl"), transcripts.FormatAuto)
	if err != nil {
		b.Fatal(err)
	}
	var bodies [][]byte
	size := 0
	for k := 0; k < s.Len(); k++ {
		body, err := s.Request(k, s.Native)
		if err != nil {
			b.Fatal(err)
		}
		bodies = append(bodies, body)
		size += len(body)
	}
	b.SetBytes(int64(size))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		x := NewIndex(nil)
		var prev *wire.Request
		for _, body := range bodies {
			r, err := wire.Parse(wire.Anthropic, body)
			if err != nil {
				b.Fatal(err)
			}
			if prev != nil {
				x.Uses(Response(prev, r))
			}
			x.Update(r)
			prev = r
		}
	}
}
