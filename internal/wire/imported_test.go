package wire_test

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"github.com/condense-dev/condense/internal/sessions"
	"github.com/condense-dev/condense/internal/testutil/corpus"
	"github.com/condense-dev/condense/internal/wire"
)

// reusedIDFile is the corpus file whose agent reused tool-call ids.
const reusedIDFile = "sweagent_marshmallow-code__marshmallow-1867.traj"

// TestImportedRequestsRoundTripAndValidate parses requests produced by the session
// importer from every corpus file (every ⌈n/8⌉-th and the last request, in every provider form
// the session offers): byte-identical round trip, and Validate accepts them — the importer
// promises provider-valid requests, so a rejection is a bug on one side.
func TestImportedRequestsRoundTripAndValidate(t *testing.T) {
	checked, reusedSeen := 0, 0
	for _, path := range corpus.Files(t) {
		base := filepath.Base(path)
		s, err := sessions.ImportFile(path, sessions.FormatAuto)
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
			if p == sessions.OpenAI {
				f = wire.OpenAI
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
				err = wire.Validate(r)
				var ve *wire.ValidationError
				switch {
				case base == reusedIDFile && f == wire.Anthropic && errors.As(err, &ve) && ve.Rule == wire.RuleDuplicateCallID:
					// The importer keeps the agent's reused ids (docs/formats.md); Anthropic
					// rejects them, and Validate must say so.
					reusedSeen++
				case err != nil:
					t.Errorf("%s %s request %d/%d: %v", base, p, k, n, err)
				}
				checked++
			}
		}
	}
	if checked > 0 && reusedSeen == 0 {
		t.Errorf("%s: Validate did not report the reused tool_use ids in Anthropic form", reusedIDFile)
	}
	t.Logf("%d imported requests parsed, round-tripped and validated (%d with the expected reused-id report)", checked, reusedSeen)
}
