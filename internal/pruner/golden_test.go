package pruner

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/condense-dev/condense/internal/testutil/corpus"
	"github.com/condense-dev/condense/internal/transcripts"
	"github.com/condense-dev/condense/internal/wire"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the current engine")

// goldenReport is what a corpus replay checks in.
type goldenReport struct {
	Requests     int            `json:"requests"`
	Changed      int            `json:"changed"`
	Flushes      int            `json:"flushes"`
	BytesBefore  int64          `json:"bytesBefore"`
	BytesAfter   int64          `json:"bytesAfter"`
	LastBefore   int            `json:"lastBytesBefore"`
	LastAfter    int            `json:"lastBytesAfter"`
	Records      int            `json:"records"`
	Summaries    int            `json:"summaries"`
	Chains       int            `json:"chains"`
	Aliases      int            `json:"aliases"`
	Spilled      int64          `json:"spilled"`
	Stubbed      int            `json:"stubbedInLastRequest"`
	Diagnostics  map[string]int `json:"diagnostics"`
	NextRef      int            `json:"nextRef"`
	NextBlock    int            `json:"nextBlock"`
	Fallbacks    int            `json:"fallbacks"`
	InvalidInput int            `json:"invalidInputs"`
}

// endsWithReply reports a transcript whose last message is a user prompt right after a
// text-only assistant reply: the agent-message trigger point as a proxy sees it.
func endsWithReply(req *wire.Request) bool { return endsWithReplyUnder(req, DefaultPolicy()) }

// endsWithReplyUnder is endsWithReply under pol: an observation is no prompt, and the
// assistant message it answers is a tool-using turn (ToolTurns).
func endsWithReplyUnder(req *wire.Request, pol Policy) bool {
	n := len(req.Messages)
	if n < 2 {
		return false
	}
	last, prev := req.Messages[n-1], req.Messages[n-2]
	if last.Role != wire.RoleUser || hasToolResult(last) || prev.Role != wire.RoleAssistant {
		return false
	}
	return !ToolTurns(req, pol)[n-2]
}

// replay runs a session through the engine as the proxy would: render every request, flush
// with the deterministic test summarizer at every agent reply (and every 40 requests, like a
// budget trigger), record diagnostics as the proxy does.
func replay(t *testing.T, s *transcripts.Session) goldenReport {
	var buf []byte
	return replayBodies(t, wire.Anthropic, s.Len(), func(k int) []byte {
		var err error
		buf, err = s.AppendRequest(buf[:0], k, transcripts.Anthropic)
		if err != nil {
			t.Fatal(err)
		}
		return append([]byte(nil), buf...)
	})
}

// replayBodies is replay over the n request bodies body(0) … body(n-1) of format f.
func replayBodies(t *testing.T, f wire.Format, n int, request func(k int) []byte) goldenReport {
	return replayUnder(t, DefaultPolicy(), 40, f, n, request)
}

// replayUnder is replayBodies under pol, with the budget-like flush every every requests.
func replayUnder(t *testing.T, pol Policy, every int, f wire.Format, n int, request func(k int) []byte) goldenReport {
	st := NewState()
	rep := goldenReport{Diagnostics: map[string]int{}}
	for k := 0; k < n; k++ {
		body := request(k)
		req, err := wire.Parse(f, body)
		if err != nil {
			t.Fatalf("request %d: %v", k, err)
		}
		rep.Requests++
		inputValid := wire.Validate(req) == nil
		if !inputValid {
			rep.InvalidInput++
		}
		res := Render(req, st, pol)
		if res.Fallback != "" {
			rep.Fallbacks++
			t.Errorf("request %d: render fell back: %s", k, res.Fallback)
		}
		if inputValid {
			if err := wire.Validate(res.Request); err != nil {
				t.Fatalf("request %d: invalid render: %v", k, err)
			}
		}
		if !res.Unchanged {
			rep.Changed++
			rep.BytesBefore += int64(res.BytesBefore)
			rep.BytesAfter += int64(res.BytesAfter)
		} else {
			rep.BytesBefore += int64(len(body))
			rep.BytesAfter += int64(len(body))
		}
		rep.LastBefore, rep.LastAfter = len(body), len(res.Body)
		rep.Stubbed = res.Stats.Stubbed
		st, _ = st.WithDiagnostics(res.Diagnostics)
		if endsWithReplyUnder(req, pol) || k%every == every-1 {
			rep.Flushes++
			st = flush(t, req, st, pol)
		}
	}
	for kind, n := range st.Diagnostics.Counts {
		rep.Diagnostics[string(kind)] = n
	}
	rep.Records, rep.Summaries, rep.Chains, rep.Aliases = len(st.Records), len(st.Summaries), len(st.Chains), len(st.Aliases)
	rep.Spilled, rep.NextRef, rep.NextBlock = st.Stats.Spilled, st.NextRef, st.NextBlock
	return rep
}

// checkGolden compares rep with the golden file name (rewritten with -update).
func checkGolden(t *testing.T, name string, rep goldenReport) {
	t.Helper()
	got, _ := json.MarshalIndent(rep, "", "  ")
	got = append(got, '\n')
	golden := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run Golden -update)", err)
	}
	if string(want) != string(got) {
		t.Fatalf("golden mismatch for %s\ngot:\n%s\nwant:\n%s", name, got, want)
	}
}

func TestGoldenCorpusReplay(t *testing.T) {
	var files []string
	for _, f := range corpus.Files(t) {
		if strings.HasPrefix(filepath.Base(f), "pi_") {
			files = append(files, f)
		}
	}
	if testing.Short() && len(files) > 1 {
		files = files[:1]
	}
	for _, path := range files {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			s, err := transcripts.ImportFile(path, transcripts.FormatAuto)
			if err != nil {
				t.Fatal(err)
			}
			rep := replay(t, s)
			if rep.Changed == 0 || rep.BytesAfter >= rep.BytesBefore {
				t.Fatalf("engine never pruned: %+v", rep)
			}
			checkGolden(t, strings.TrimSuffix(name, ".jsonl")+".json", rep)
		})
	}
}
