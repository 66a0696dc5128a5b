package pruner

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/condense-dev/condense/internal/wire"
)

// genTextTx generates a text-protocol transcript in format f: tasks of mini-swe-agent and
// SWE-agent turns, observations of both harnesses (some failed, some large, some
// identical), format errors, replies without an action and user prompts between tasks.
func genTextTx(r *rand.Rand, f wire.Format) *tx {
	x := newTx(f)
	state := "\n(Open file: a.py)\n(Current directory: /r)\nbash-$"
	for task := 0; task < 1+r.IntN(3); task++ {
		x.user(fmt.Sprintf("task %d", task))
		for turn := 0; turn < 1+r.IntN(6); turn++ {
			out := strings.Repeat(fmt.Sprintf("out %d %d\n", task, turn), 1+r.IntN(300))
			if r.IntN(5) == 0 {
				out = "same output\n"
			}
			switch r.IntN(6) {
			case 0:
				x.asst("", msaAction("two", "ls")+"\n```bash\npwd\n```").user("Please always provide EXACTLY ONE action in triple backticks, found 2 actions.")
			case 1:
				x.asst("", "Look.\n```\nopen a.py\n```").user(out + state)
			case 2:
				x.asst("", "Run.\n```\npython a.py\n```").user("OBSERVATION:\n" + out)
			default:
				x.asst("", msaAction("step", fmt.Sprintf("cat f%d", turn))).user(msaObs(r.IntN(3)-1, out))
			}
		}
		if r.IntN(2) == 0 {
			x.asst("", "Done with this task.")
		}
	}
	return x
}

// FuzzRenderObservations renders generated text-protocol transcripts against states flushed
// over prefixes of them, with observations on: renders stay valid and deterministic, and a
// prefix flush never makes the full transcript invalid.
func FuzzRenderObservations(f *testing.F) {
	for _, s := range []uint64{1, 2, 3, 42, 1234} {
		for fm := range 3 {
			f.Add(s, uint8(fm))
		}
	}
	f.Fuzz(func(t *testing.T, seed uint64, fm uint8) {
		r := rand.New(rand.NewPCG(seed, 11))
		format := obsFormats[int(fm)%len(obsFormats)]
		x := genTextTx(r, format)
		pol := DefaultPolicy()
		pol.MinBatchChars = []int{0, 1000}[r.IntN(2)]
		pol.Chain.RollingWindow = r.IntN(3)
		pol.SpillThreshold = []int{0, 2000}[r.IntN(2)]
		pol.Observations = ObservationPolicy{Enabled: true, Harness: []string{"", HarnessMiniSWEAgent, HarnessSWEAgent}[r.IntN(3)]}
		if r.IntN(2) == 0 {
			pol.BatchingMode = BatchAgentMessage
		}
		st := NewState()
		for i := 0; i < 1+r.IntN(3); i++ {
			cut := 1 + r.IntN(len(x.msgs))
			st = flush(t, (&tx{f: format, msgs: x.msgs[:cut]}).req(t), st, pol)
		}
		req := x.req(t)
		checkRender(t, req, st, pol)
		res := Render(req, st, pol)
		if !bytes.Equal(res.Body, Render(req, st, pol).Body) {
			t.Fatal("not deterministic")
		}
	})
}

// FuzzRenderBodyObservations renders arbitrary bodies against a state that indexed text
// observations: no panic, a valid input stays valid.
func FuzzRenderBodyObservations(f *testing.F) {
	pol := obsPolicy("")
	out := strings.Repeat("line\n", 300)
	seed := newTx(wire.OpenAI).user("task").asst("", msaAction("a", "cat a")).user(msaObs(0, out)).
		asst("", msaAction("b", "false")).user(msaObs(1, out)).asst("", msaAction("c", "ls")).user(msaObs(0, "x\n")).body()
	f.Add(seed, false)
	f.Add(bytes.Replace(seed, []byte(`"messages"`), []byte(`"max_tokens":1,"messages"`), 1), true)
	f.Add([]byte(`{"messages":[{"role":"assistant","content":"x"},{"role":"user","content":"<returncode>0</returncode>\n"}]}`), false)
	st := flush(f, mustParse(f, wire.OpenAI, seed), NewState(), pol)
	f.Fuzz(func(t *testing.T, body []byte, anthropic bool) {
		fm := wire.OpenAI
		if anthropic {
			fm = wire.Anthropic
		}
		renderBody(t, fm, body, st, pol)
		if req, err := wire.Parse(fm, body); err == nil {
			ToolTurns(req, pol)
			observations(req, pol)
		}
	})
}

// FuzzTextRecovery: TextRecoveryRequest never panics, returns only refs of the allowed
// characters without repeats, and finds the refs of a request line written around any text.
func FuzzTextRecovery(f *testing.F) {
	for _, s := range []string{"context_tree_query t3", "THOUGHT\n```bash\ncontext_tree_query t1 t2\n```", "context_tree_query", "x"} {
		f.Add(s, "t7")
	}
	f.Fuzz(func(t *testing.T, reply, ref string) {
		seen := map[string]bool{}
		for _, id := range TextRecoveryRequest(reply) {
			if id == "" || seen[id] || strings.ContainsFunc(id, func(r rune) bool { return !strings.ContainsRune(refChars, r) }) {
				t.Fatalf("bad ref %q from %q", id, reply)
			}
			seen[id] = true
		}
		if ref == "" || len(ref) > 200 || strings.ContainsFunc(ref, func(r rune) bool { return !strings.ContainsRune(refChars, r) }) {
			return
		}
		got := TextRecoveryRequest(strings.ReplaceAll(reply, "\n", " ") + "\n" + TextRecoveryCommand + " " + ref + "\n")
		found := false
		for _, id := range got {
			found = found || id == ref
		}
		if !found {
			t.Fatalf("ref %q not found in %v", ref, got)
		}
	})
}

// refChars are the characters of a ref, an occurrence key or a bare id in a text recovery.
const refChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_#.:-"
