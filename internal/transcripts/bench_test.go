package transcripts

import (
	"os"
	"testing"

	"github.com/condense-dev/condense/internal/testutil/corpus"
)

// benchFiles are the largest corpus file of each format.
var benchFiles = []string{
	"ccspot_fa812bfe-b295-4cca-9c2f-fdf01028cb46.jsonl",
	"pi_before-compaction.jsonl",
	"msa_psf__requests-1142.traj.json",
	"codex_rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl",
	"sweagent_marshmallow-code__marshmallow-1867.traj",
}

// BenchmarkImport measures parsing a whole file into a Session (no request materialised).
func BenchmarkImport(b *testing.B) {
	for _, name := range benchFiles {
		b.Run(name, func(b *testing.B) {
			data, err := os.ReadFile(corpus.File(b, name))
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Import(name, data, FormatAuto); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkLargestRequest measures building the largest request of a file into a reused
// buffer (what a replay does per request).
func BenchmarkLargestRequest(b *testing.B) {
	for _, name := range benchFiles[:3] {
		b.Run(name, func(b *testing.B) {
			s, err := ImportFile(corpus.File(b, name), FormatAuto)
			if err != nil {
				b.Fatal(err)
			}
			p := s.Native
			best, bestLen := 0, 0
			for k := 0; k < s.Len(); k++ {
				body, _ := s.Request(k, p)
				if len(body) > bestLen {
					best, bestLen = k, len(body)
				}
			}
			buf := make([]byte, 0, bestLen+4096)
			b.SetBytes(int64(bestLen))
			b.ReportAllocs()
			for b.Loop() {
				buf, err = s.AppendRequest(buf[:0], best, p)
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAllEnvelopes measures import plus every envelope line of a file (what
// `condense import` does, minus the write).
func BenchmarkAllEnvelopes(b *testing.B) {
	name := "pi_before-compaction.jsonl"
	data, err := os.ReadFile(corpus.File(b, name))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var total int64
	var buf []byte
	for b.Loop() {
		s, err := Import(name, data, FormatAuto)
		if err != nil {
			b.Fatal(err)
		}
		total = 0
		for k := 0; k < s.Len(); k++ {
			buf, err = AppendEnvelope(buf[:0], s, k, s.Native)
			if err != nil {
				b.Fatal(err)
			}
			total += int64(len(buf)) + 1
		}
	}
	b.SetBytes(total)
}
