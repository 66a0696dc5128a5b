package pruner

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/condense-dev/condense/internal/testutil/corpus"
	"github.com/condense-dev/condense/internal/transcripts"
	"github.com/condense-dev/condense/internal/wire"
)

// textSessions returns the corpus sessions of text-protocol agents, imported, with the
// policy that recognises their observations.
func textSessions(t *testing.T) map[string]*transcripts.Session {
	out := map[string]*transcripts.Session{}
	for _, path := range corpus.Files(t) {
		name := filepath.Base(path)
		if !strings.HasPrefix(name, "msa_") && !strings.HasPrefix(name, "sweagent_") {
			continue
		}
		s, err := transcripts.ImportFile(path, transcripts.FormatAuto)
		if err != nil {
			t.Fatal(err)
		}
		if s.Observations != "" {
			out[name] = s
		}
	}
	if len(out) < 4 {
		t.Fatalf("%d text-protocol sessions in the corpus, want the three mini-swe-agent and the text-mode SWE-agent one", len(out))
	}
	return out
}

// TestGoldenObservationReplay replays the corpus's text-protocol sessions (mini-swe-agent
// 1.x, SWE-agent without function calling) with their observations recognised, as the
// golden replay does for the pi sessions (the budget-like flush every ten requests: these
// agents rarely reply without an action): every session is pruned.
func TestGoldenObservationReplay(t *testing.T) {
	for name, s := range textSessions(t) {
		t.Run(name, func(t *testing.T) {
			pol := DefaultPolicy()
			pol.Observations = ObservationPolicy{Enabled: true, Harness: s.Observations}
			var buf []byte
			rep := replayUnder(t, pol, 10, wire.OpenAI, s.Len(), func(k int) []byte {
				var err error
				if buf, err = s.AppendRequest(buf[:0], k, transcripts.OpenAI); err != nil {
					t.Fatal(err)
				}
				return append([]byte(nil), buf...)
			})
			if rep.Changed == 0 || rep.BytesAfter >= rep.BytesBefore || rep.InvalidInput != 0 {
				t.Fatalf("engine never pruned, or an input was invalid: %+v", rep)
			}
			checkGolden(t, strings.TrimSuffix(strings.TrimSuffix(name, ".json"), ".traj")+".observations.json", rep)
		})
	}
}

// TestCorpusObservationRecovery replays the text-protocol sessions in both request forms,
// flushing at every reply and every ten requests: every render is valid and deterministic,
// consecutive requests between two flushes share their rendered messages (a stable cache
// prefix), the last request is pruned, and every indexed observation comes back byte-exact
// through the text recovery request its stub offers.
func TestCorpusObservationRecovery(t *testing.T) {
	for name, s := range textSessions(t) {
		for _, prov := range []transcripts.Provider{transcripts.OpenAI, transcripts.Anthropic} {
			t.Run(name+"/"+string(prov), func(t *testing.T) {
				f := wire.OpenAI
				if prov == transcripts.Anthropic {
					f = wire.Anthropic
				}
				pol := DefaultPolicy()
				pol.Observations = ObservationPolicy{Enabled: true, Harness: s.Observations}
				st, blobs := NewState(), blobStore{}
				originals := map[string]string{}
				var prev, last *Result
				flushed := false
				for k := 0; k < s.Len(); k++ {
					body, err := s.Request(k, prov)
					if err != nil {
						t.Fatal(err)
					}
					req := mustParse(t, f, body)
					res := Render(req, st, pol)
					mustValid(t, req, res)
					if again := Render(req, st, pol); !bytes.Equal(again.Body, res.Body) {
						t.Fatalf("request %d: render not deterministic", k)
					}
					if prev != nil && !flushed {
						checkPrefix(t, k, prev.Request, res.Request)
					}
					prev, last, flushed = res, res, false
					v := analyse(req.Format, req.Messages, &pol)
					for _, r := range v.results {
						if r.obs != nil {
							originals[r.occKey()] = r.b.ResultText()
						}
					}
					st, _ = st.WithDiagnostics(res.Diagnostics)
					if endsWithReplyUnder(req, pol) || k%10 == 9 {
						st = flushBlobs(t, req, st, pol, blobs)
						flushed = true
					}
				}
				if last.Unchanged || last.BytesAfter >= last.BytesBefore {
					t.Fatalf("last request not pruned: %d -> %d bytes", last.BytesBefore, last.BytesAfter)
				}
				for key, rec := range st.Records {
					want, ok := originals[key]
					ref := rec.Ref
					if ref == "" {
						ref = key
					}
					ans, asked := AnswerTextRecovery(st, "THOUGHT: I need it.\n\n```bash\n"+TextRecoveryCommand+" "+ref+"\n```", blobs.lookup)
					if !ok || !asked || !strings.HasSuffix(ans, "\n\n"+want) {
						t.Fatalf("record %s (%s): the original does not come back byte-exact", key, ref)
					}
				}
				t.Logf("%d requests, last %d -> %d bytes (%.0f%%), %d records, %d summaries, %d chains", s.Len(), last.BytesBefore,
					last.BytesAfter, 100*float64(last.BytesAfter)/float64(last.BytesBefore), len(st.Records), len(st.Summaries), len(st.Chains))
			})
		}
	}
}
