package pruner

import (
	"bytes"
	"strings"
	"testing"

	"github.com/condense-dev/condense/internal/testutil/codexrollout"
	"github.com/condense-dev/condense/internal/wire"
)

// TestGoldenResponsesReplay replays the corpus Codex sessions as the Responses requests
// Codex sent, as the golden replay does for the pi sessions.
func TestGoldenResponsesReplay(t *testing.T) {
	for _, path := range codexrollout.Files(t) {
		ro := codexrollout.Require(t, path)
		t.Run(ro.Name, func(t *testing.T) {
			rep := replayBodies(t, wire.Responses, ro.Len(), ro.Request)
			if rep.Changed == 0 || rep.BytesAfter >= rep.BytesBefore || rep.InvalidInput != 0 {
				t.Fatalf("engine never pruned, or an input was invalid: %+v", rep)
			}
			checkGolden(t, strings.TrimSuffix(ro.Name, ".jsonl")+".responses.json", rep)
		})
	}
}

// TestCorpusResponsesRenderValidity replays every request of the corpus Codex sessions
// through the engine as the proxy would (flush at each final answer and every ten requests,
// like a budget trigger; rolling windows 3 and 0): every render is valid and never falls back; between two flushes consecutive requests
// render to the same leading messages (a stable cache prefix); no diagnostic is recorded;
// the last request is pruned; every record's original output and arguments are kept
// byte-exact in blobs.
func TestCorpusResponsesRenderValidity(t *testing.T) {
	for _, path := range codexrollout.Files(t) {
		ro := codexrollout.Require(t, path)
		for _, k := range []int{3, 0} {
			t.Run(ro.Name+"/K="+string(rune('0'+k)), func(t *testing.T) {
				pol := DefaultPolicy()
				pol.Chain.RollingWindow = k
				st := NewState()
				blobs := blobStore{}
				originals := map[string]string{} // occurrence key -> result text
				var prev *Result
				flushed := false
				var last *Result
				for i := 0; i < ro.Len(); i++ {
					req := mustParse(t, wire.Responses, ro.Request(i))
					if err := wire.Validate(req); err != nil {
						t.Fatalf("request %d: input invalid: %v", i, err)
					}
					res := Render(req, st, pol)
					mustValid(t, req, res)
					if again := Render(req, st, pol); !bytes.Equal(again.Body, res.Body) {
						t.Fatalf("request %d: render not deterministic", i)
					}
					if prev != nil && !flushed {
						checkPrefix(t, i, prev.Request, res.Request)
					}
					prev, flushed, last = res, false, res
					for _, o := range occurrences(req) {
						originals[o.key] = o.text
					}
					st, _ = st.WithDiagnostics(res.Diagnostics)
					if endsWithReply(req) || i%10 == 9 {
						st = flushBlobs(t, req, st, pol, blobs)
						flushed = true
					}
				}
				for kind, n := range st.Diagnostics.Counts {
					if n > 0 {
						t.Errorf("%d %s diagnostic(s)", n, kind)
					}
				}
				if last.Unchanged || last.BytesAfter >= last.BytesBefore {
					t.Fatalf("last request not pruned: %d -> %d bytes", last.BytesBefore, last.BytesAfter)
				}
				for key, rec := range st.Records {
					want, ok := originals[rec.Key]
					got, found := blobs.lookup(BlobKeyResult(rec.Key))
					if !ok || !found || string(got) != want {
						t.Fatalf("record %s (%s): original not recoverable byte-exact", key, rec.Key)
					}
				}
				t.Logf("%d requests, last %d -> %d bytes (%.0f%%), %d records, %d chains", ro.Len(), last.BytesBefore, last.BytesAfter,
					100*float64(last.BytesAfter)/float64(last.BytesBefore), len(st.Records), len(st.Chains))
			})
		}
	}
}

// occurrence is a paired tool result of a request.
type occurrence struct{ key, text string }

// occurrences returns the occurrence key and result text of every paired result of req.
func occurrences(req *wire.Request) []occurrence {
	v := newAnalysis(req.Format, req.Messages)
	var out []occurrence
	for _, r := range v.results {
		if k := r.occKey(); k != "" {
			out = append(out, occurrence{k, r.b.ResultText()})
		}
	}
	return out
}

// checkPrefix asserts that the rendered request cur starts with the messages of the rendered
// request prev (the one before it, with the same state) up to the summaries prev placed at
// its end, byte for byte.
func checkPrefix(t *testing.T, i int, prev, cur *wire.Request) {
	t.Helper()
	n := len(prev.Messages)
	for n > 0 && prev.Messages[n-1].Raw() == nil {
		n-- // a summary placed at the end: it moves once its turn gets a host
	}
	if len(cur.Messages) < n {
		t.Fatalf("request %d: %d messages, the previous rendered %d", i, len(cur.Messages), n)
	}
	for j := 0; j < n; j++ {
		if !bytes.Equal(prev.Messages[j].Bytes(), cur.Messages[j].Bytes()) {
			t.Fatalf("request %d: rendered message %d differs from the previous request's", i, j)
		}
	}
}
