package wire_test

import (
	"bytes"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/condense-dev/condense/internal/testutil/corpus"
	"github.com/condense-dev/condense/internal/transcripts"
	"github.com/condense-dev/condense/internal/wire"
)

// reusedIDFile is the corpus file whose agent reused tool-call ids.
const reusedIDFile = "sweagent_marshmallow-code__marshmallow-1867.traj"

// TestImportedRequestsRoundTripAndValidate parses requests produced by the session
// importer from every corpus file (every ⌈n/8⌉-th and the last request, in every provider form
// the session offers): byte-identical round trip, and Validate accepts them — the importer
// promises provider-valid requests, so a rejection is a bug on one side.
func TestImportedRequestsRoundTripAndValidate(t *testing.T) {
	checked := 0
	for _, path := range corpus.Files(t) {
		base := filepath.Base(path)
		s, err := transcripts.ImportFile(path, transcripts.FormatAuto)
		if err != nil {
			t.Logf("%s: not importable here: %v", base, err)
			continue
		}
		n := s.Len()
		if n == 0 {
			continue
		}
		for _, p := range s.Providers() {
			f := wire.Anthropic
			switch p {
			case transcripts.OpenAI:
				f = wire.OpenAI
			case transcripts.Responses:
				f = wire.Responses
			}
			ks := []int{n - 1}
			for k := 0; k < n-1; k += max(1, n/8) {
				ks = append(ks, k)
			}
			for _, k := range ks {
				body, err := s.Request(k, p)
				if err != nil {
					t.Fatalf("%s %s request %d: %v", base, p, k, err)
				}
				r, err := wire.Parse(f, body)
				if err != nil {
					t.Fatalf("%s %s request %d: %v", base, p, k, err)
				}
				if !bytes.Equal(r.Bytes(), body) {
					t.Fatalf("%s %s request %d: round trip differs", base, p, k)
				}
				if k == n-1 {
					replaceOneResult(t, base, r, body)
				}
				err = wire.Validate(r)
				if err != nil {
					t.Errorf("%s %s request %d/%d: %v", base, p, k, n, err)
				}
				checked++
			}
		}
	}
	t.Logf("%d imported requests parsed, round-tripped and validated", checked)
}

// replaceOneResult replaces the middle tool result of r and checks that exactly that
// block's bytes changed in the serialized request.
func replaceOneResult(t *testing.T, name string, r *wire.Request, body []byte) {
	t.Helper()
	type loc struct{ mi, bi int }
	var all []loc
	for mi, m := range r.Messages {
		for bi, b := range m.Blocks {
			if b.Kind == wire.KindToolResult {
				all = append(all, loc{mi, bi})
			}
		}
	}
	if len(all) == 0 {
		return
	}
	at := all[len(all)/2]
	m := r.Messages[at.mi]
	old := m.Blocks[at.bi]
	nb := old.WithResultText("[condensed]")
	blocks := append([]*wire.Block(nil), m.Blocks...)
	blocks[at.bi] = nb
	msgs := append([]*wire.Message(nil), r.Messages...)
	msgs[at.mi] = m.WithBlocks(blocks)
	got := r.WithMessages(msgs).Bytes()
	off := offsetIn(body, old.Raw())
	if off < 0 {
		t.Fatalf("%s: block bytes not found in body", name)
	}
	want := append(append(append([]byte(nil), body[:off]...), nb.Raw()...), body[off+len(old.Raw()):]...)
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: replacing message %d block %d changed other bytes", name, at.mi, at.bi)
	}
	if nb.ResultText() != "[condensed]" || nb.ID != old.ID || nb.IsError != old.IsError {
		t.Fatalf("%s: replaced block fields %+v", name, nb)
	}
}

// offsetIn returns the offset of sub inside body when sub is a subslice of body (by
// address), or -1.
func offsetIn(body, sub []byte) int {
	if len(sub) == 0 || len(body) == 0 {
		return -1
	}
	off := int(uintptr(unsafe.Pointer(unsafe.SliceData(sub))) - uintptr(unsafe.Pointer(unsafe.SliceData(body))))
	if off < 0 || off+len(sub) > len(body) {
		return -1
	}
	return off
}

// BenchmarkValidateImported validates the largest request the session importer builds
// from the corpus (a valid request, so every rule runs over every message).
func BenchmarkValidateImported(b *testing.B) {
	var best []byte
	for _, path := range corpus.Files(b) {
		s, err := transcripts.ImportFile(path, transcripts.FormatAuto)
		if err != nil || s.Len() == 0 || filepath.Base(path) == reusedIDFile {
			continue
		}
		body, err := s.Request(s.Len()-1, transcripts.Anthropic)
		if err == nil && len(body) > len(best) {
			best = body
		}
	}
	r, err := wire.Parse(wire.Anthropic, best)
	if err != nil {
		b.Fatal(err)
	}
	if err := wire.Validate(r); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(best)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := wire.Validate(r); err != nil {
			b.Fatal(err)
		}
	}
}
