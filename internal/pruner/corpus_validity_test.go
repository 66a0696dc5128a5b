package pruner

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/condense-dev/condense/internal/testutil/corpus"
	"github.com/condense-dev/condense/internal/transcripts"
	"github.com/condense-dev/condense/internal/wire"
)

// TestCorpusRenderValidity replays sampled requests of every non-pi corpus session (Claude
// Code, Codex, SWE-agent, mini-SWE-agent) in each provider form the importer offers, flushing
// after each: every render of a valid request must stay valid and never fall back.
func TestCorpusRenderValidity(t *testing.T) {
	for _, path := range corpus.Files(t) {
		name := filepath.Base(path)
		if strings.HasPrefix(name, "pi_") || strings.HasSuffix(name, ".md") {
			continue
		}
		t.Run(name, func(t *testing.T) {
			s, err := transcripts.ImportFile(path, transcripts.FormatAuto)
			if err != nil {
				t.Fatal(err)
			}
			for _, prov := range s.Providers() {
				for _, k := range []int{3, 0} {
					f := wire.Anthropic
					switch prov {
					case transcripts.OpenAI:
						f = wire.OpenAI
					case transcripts.Responses:
						f = wire.Responses
					}
					st := NewState()
					pol := DefaultPolicy()
					pol.Chain.RollingWindow = k
					samples := 60
					if testing.Short() {
						samples = 10
					}
					step := 1 + s.Len()/samples
					for k := 0; k < s.Len(); k += step {
						body, err := s.Request(k, prov)
						if err != nil {
							t.Fatal(err)
						}
						req, err := wire.Parse(f, body)
						if err != nil {
							t.Fatal(err)
						}
						res := Render(req, st, pol)
						if res.Fallback != "" {
							t.Errorf("%s req %d: fallback %s", prov, k, res.Fallback)
						}
						if wire.Validate(req) == nil && wire.Validate(res.Request) != nil {
							t.Errorf("%s req %d: invalid %v", prov, k, wire.Validate(res.Request))
						}
						st, _ = st.WithDiagnostics(res.Diagnostics)
						st = flush(t, req, st, pol)
					}
					t.Logf("%s K=%d: records=%d chains=%d diags=%v", prov, k, len(st.Records), len(st.Chains), st.Diagnostics.Counts)
					// docs/engine.md "Diagnostics on the corpus": these sessions have no
					// compaction that cuts a compressed range, valid inputs never need an
					// orphan sweep, every chain's middles pair with results.
					for kind, n := range st.Diagnostics.Counts {
						if n > 0 {
							t.Errorf("%s K=%d: %d %s diagnostic(s)", prov, k, n, kind)
						}
					}
				}
			}
		})
	}
}
