package pruner

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/condense-dev/condense/internal/wire"
)

var obsFormats = []wire.Format{wire.Anthropic, wire.OpenAI, wire.Responses}

// msaAction is a mini-swe-agent assistant turn with one bash action.
func msaAction(thought, cmd string) string {
	return "THOUGHT: " + thought + "\n\n```bash\n" + cmd + "\n```"
}

// msaObs is a mini-swe-agent observation.
func msaObs(rc int, out string) string {
	return fmt.Sprintf("<returncode>%d</returncode>\n<output>\n%s</output>", rc, out)
}

// obsPolicy is noSpillPolicy with observations on for harness.
func obsPolicy(harness string) Policy {
	p := noSpillPolicy()
	p.Observations = ObservationPolicy{Enabled: true, Harness: harness}
	return p
}

// observations returns req's text observations under pol by message index (ObservationOf of
// each message after its predecessor).
func observations(req *wire.Request, pol Policy) map[int]Observation {
	out := map[int]Observation{}
	for i, m := range req.Messages {
		var prev *wire.Message
		if i > 0 {
			prev = req.Messages[i-1]
		}
		if o, ok := ObservationOf(prev, m, pol.Observations); ok {
			out[i] = o
		}
	}
	return out
}

// TestObservationRecognition: which user messages are observations, in every format, for the
// built-in patterns, a custom one, a harness that does not match and observations off; an
// observation's turn is a tool-using one, by ToolTurns and ToolTurnFunc alike.
func TestObservationRecognition(t *testing.T) {
	swe := "\n(Open file: /r/a.py)\n(Current directory: /r)\nbash-$"
	cases := []struct {
		name string
		pol  Policy
		msgs []string // alternating from a user task: assistant, user, assistant, user …
		want []int    // indices of the observations (the task is message 0)
	}{
		{"mini-swe-agent returncode", obsPolicy(""), []string{msaAction("a", "ls"), msaObs(0, "x\n"), msaAction("b", "false"), msaObs(1, "")}, []int{2, 4}},
		{"mini-swe-agent timeout", obsPolicy(HarnessMiniSWEAgent), []string{msaAction("a", "sleep 99"),
			"The last command <command>sleep 99</command> timed out and has been killed.\nThe output of the command was:\n <output>\n\n</output>\nPlease try another command."}, []int{2}},
		{"a format error is no observation", obsPolicy(""), []string{msaAction("a", "ls") + "\n```bash\npwd\n```",
			"Please always provide EXACTLY ONE action in triple backticks, found 2 actions.", msaAction("b", "ls"), msaObs(0, "x\n")}, []int{4}},
		{"SWE-agent state trailer", obsPolicy(HarnessSWEAgent), []string{"Look.\n```\nopen a.py\n```", "[File: /r/a.py (3 lines total)]\n1:x" + swe}, []int{2}},
		{"SWE-agent OBSERVATION prefix", obsPolicy(""), []string{"Run it.\n```\npython a.py\n```", "OBSERVATION:\nTraceback (most recent call last):\n"}, []int{2}},
		{"another harness's observations are not recognised", obsPolicy(HarnessSWEAgent), []string{msaAction("a", "ls"), msaObs(0, "x\n")}, nil},
		{"observations off", noSpillPolicy(), []string{msaAction("a", "ls"), msaObs(0, "x\n")}, nil},
		{"a custom pattern", func() Policy {
			p := noSpillPolicy()
			p.Observations = ObservationPolicy{Enabled: true, Patterns: []ObservationPattern{{Match: `\AResult \((?P<rc>\d+)\):\n`, Stub: "Result (${rc}):\n${stub}", Action: `(?m)^> (.*)$`, Tool: "sh"}}}
			return p
		}(), []string{"> ls", "Result (0):\nx", "> pwd", msaObs(0, "y\n")}, []int{2}},
	}
	for _, c := range cases {
		for _, f := range obsFormats {
			t.Run(c.name+"/"+f.String(), func(t *testing.T) {
				x := newTx(f).user("the task")
				for i, m := range c.msgs {
					if i%2 == 0 {
						x.asst("", m)
					} else {
						x.user(m)
					}
				}
				req := x.req(t)
				var got []int
				for i, o := range observations(req, c.pol) {
					got = append(got, i)
					if o.Call.ID != o.Result.ID || o.Call.Kind != wire.KindToolUse || o.Result.Kind != wire.KindToolResult ||
						o.Result.ResultText() != req.Messages[i].Blocks[0].Text() {
						t.Fatalf("observation %d: call %+v, result %+v", i, o.Call, o.Result)
					}
				}
				slices.Sort(got)
				if fmt.Sprint(got) != fmt.Sprint(c.want) {
					t.Fatalf("observations %v, want %v", got, c.want)
				}
				turns := ToolTurns(req, c.pol)
				one := ToolTurnFunc(c.pol)
				for i := range req.Messages {
					if one(req.Messages, i) != turns[i] {
						t.Fatalf("ToolTurnFunc at %d is %v, ToolTurns %v", i, !turns[i], turns)
					}
				}
				for _, i := range c.want {
					if !turns[i-1] {
						t.Fatalf("turn %d answered by an observation is not tool-using: %v", i-1, turns)
					}
				}
				if len(c.want) == 0 && strings.Contains(fmt.Sprint(turns), "true") {
					t.Fatalf("tool turns %v without observations", turns)
				}
			})
		}
	}
}

// TestToolTurnFuncWithCalls: ToolTurnFunc agrees with ToolTurns on a transcript mixing real
// tool calls, observations and a reply no observation answers.
func TestToolTurnFuncWithCalls(t *testing.T) {
	for _, f := range obsFormats {
		req := newTx(f).user("task").asst("", "read", tcall{id: "c1", name: "bash", input: `{"command":"ls"}`}).results(tres{id: "c1", text: "a\n"}).
			asst("", msaAction("b", "cat a")).user(msaObs(0, "x\n")).asst("", "no action").user("a format error").req(t)
		turns, one := ToolTurns(req, obsPolicy("")), ToolTurnFunc(obsPolicy(""))
		if fmt.Sprint(turns) != "[false true false true false false false]" {
			t.Fatalf("%s: ToolTurns %v", f, turns)
		}
		for i := range req.Messages {
			if one(req.Messages, i) != turns[i] {
				t.Fatalf("%s: ToolTurnFunc at %d disagrees with %v", f, i, turns)
			}
		}
	}
}

// TestObservationRecords: a flush indexes an observation like a tool result: the call's tool
// and input are the pattern's tool and the action, the result is the whole observation text,
// failed when its return code is not 0 (or the pattern always fails); the blobs hold both.
func TestObservationRecords(t *testing.T) {
	out := strings.Repeat("line\n", 300)
	for _, f := range obsFormats {
		t.Run(f.String(), func(t *testing.T) {
			req := newTx(f).user("task").asst("", msaAction("read", "cat a.py")).user(msaObs(0, out)).
				asst("", msaAction("test", "pytest -q")).user(msaObs(2, out+"FAILED")).asst("", msaAction("done", "echo ok")).req(t)
			pol := obsPolicy("")
			p, err := PlanFlush(req, NewState(), pol, t0)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Batches) != 2 || p.Captured != 2 {
				t.Fatalf("%d batches, %d captured", len(p.Batches), p.Captured)
			}
			c0, c1 := p.Batches[0].Calls[0], p.Batches[1].Calls[0]
			if c0.Tool != "bash" || string(c0.Args) != `{"command":"cat a.py"}` || c0.Result != msaObs(0, out) || c0.IsError {
				t.Fatalf("first call %+v", c0)
			}
			if string(c1.Args) != `{"command":"pytest -q"}` || !c1.IsError || !strings.HasPrefix(c0.Key, "obs_") {
				t.Fatalf("second call %+v", c1)
			}
			blobs := map[string]string{}
			for _, b := range p.Blobs {
				blobs[b.Key] = string(b.Data)
			}
			if blobs[BlobKeyResult(c1.Key)] != msaObs(2, out+"FAILED") || blobs[BlobKeyArgs(c1.Key)] != `{"command":"pytest -q"}` {
				t.Fatalf("blobs %v", blobs)
			}
			if !strings.Contains(p.Batches[0].Prompt, "Assistant said: THOUGHT: read") {
				t.Fatalf("the batch prompt lacks the assistant's text:\n%s", p.Batches[0].Prompt)
			}
			// The committed records are found under the ids Observations gives.
			st, err := p.Apply(map[string]string{p.Batches[0].ID: "- read a.py", p.Batches[1].ID: "- pytest failed"})
			if err != nil {
				t.Fatal(err)
			}
			obs := observations(req, pol)
			if len(obs) != 2 {
				t.Fatalf("%d observations", len(obs))
			}
			for i, o := range obs {
				if len(st.KeysForID(o.Result.ID)) == 0 {
					t.Fatalf("no record under observation %d's id %s", i, o.Result.ID)
				}
			}
		})
	}
}

// TestObservationRender: a summarized observation renders as its pattern's framing around
// the stub, in its message's own content form; the summary (with the text recovery footer)
// follows the observation; everything else keeps its bytes; the render is deterministic and
// valid, and the unpruned input renders unchanged without a state; only a state that
// indexed observations reports them (HasObservations).
func TestObservationRender(t *testing.T) {
	out := strings.Repeat("line\n", 300)
	for _, f := range obsFormats {
		t.Run(f.String(), func(t *testing.T) {
			x := newTx(f).user("task").asst("", msaAction("read", "cat a.py")).user(msaObs(0, out)).
				asst("", msaAction("test", "pytest")).user(msaObs(1, out)).asst("", msaAction("next", "ls")).user(msaObs(0, "a\n"))
			req := x.req(t)
			pol := obsPolicy("")
			if res := Render(req, NewState(), pol); !res.Unchanged {
				t.Fatal("empty state changed the request")
			}
			st := flush(t, req, NewState(), pol)
			if !st.HasObservations() || NewState().HasObservations() || flush(t, req, NewState(), noSpillPolicy()).HasObservations() {
				t.Fatal("HasObservations: want true only for the state that indexed observations")
			}
			res := Render(req, st, pol)
			mustValid(t, req, res)
			if again := Render(req, st, pol); !bytes.Equal(again.Body, res.Body) {
				t.Fatal("render not deterministic")
			}
			if res.Stats.Stubbed != 2 || res.Stats.Summaries != 2 || res.Stats.Purged != 0 {
				t.Fatalf("stats %+v", res.Stats)
			}
			got := texts(res.Request)
			stub := func(rc int, ref string) string {
				return fmt.Sprintf("<returncode>%d</returncode>\n<output>\n[Output summarized in pruner summary, ref `%s`. To see it in full, reply with exactly: context_tree_query %s]\n</output>", rc, ref, ref)
			}
			summary := func(ref string) string {
				return "- `" + ref + "` bash returned 1545 chars\n\n---\n**Summarized outputs**: `" + ref + "`\n" +
					"To see an original output in full, reply with exactly: context_tree_query " + ref + " (one ref or several, separated by spaces)."
			}
			want := []string{"user|task", "assistant|" + msaAction("read", "cat a.py"), "user|" + stub(0, "t1"), "user|" + summary("t1"),
				"assistant|" + msaAction("test", "pytest"), "user|" + stub(1, "t2"), "user|" + summary("t2"),
				"assistant|" + msaAction("next", "ls"), "user|" + msaObs(0, "a\n")}
			if f == wire.Anthropic { // the summary is a block of the observation's message
				want = append(append(append(want[:2:2], want[2]+"|"+summary("t1")), want[4], want[5]+"|"+summary("t2")), want[7:]...)
			}
			if strings.Join(got, "\n~\n") != strings.Join(want, "\n~\n") {
				t.Fatalf("rendered\n%s\nwant\n%s", strings.Join(got, "\n~\n"), strings.Join(want, "\n~\n"))
			}
			// The messages before the first stub and the last observation keep their bytes.
			if !bytes.Equal(res.Request.Messages[1].Bytes(), req.Messages[1].Bytes()) ||
				!bytes.Equal(res.Request.Messages[len(res.Request.Messages)-1].Bytes(), req.Messages[len(req.Messages)-1].Bytes()) {
				t.Fatal("untouched messages changed bytes")
			}
			if f == wire.OpenAI && !bytes.Contains(res.Body, []byte(`"content":"<returncode>1</returncode>\n<output>\n[Output summarized`)) {
				t.Fatalf("a string-content observation is no longer a string:\n%s", res.Body)
			}
		})
	}
}

// TestObservationErrorPurgeDoesNotApply: the error purge leaves a failed observation's action
// alone (it is the assistant's own text), however large and old; the record and the
// recovery say it failed.
func TestObservationErrorPurgeDoesNotApply(t *testing.T) {
	script := "cat > x.py <<'EOF'\n" + strings.Repeat("print(1)\n", 200) + "EOF\npython x.py"
	x := newTx(wire.OpenAI).user("task").asst("", msaAction("write", script)).user(msaObs(1, strings.Repeat("Error\n", 300)))
	for i := 0; i < 4; i++ {
		x.asst("", msaAction("more", "ls")).user(msaObs(0, "a\n"))
	}
	req := x.req(t)
	pol := obsPolicy("")
	bs := blobStore{}
	st := flushBlobs(t, req, NewState(), pol, bs)
	if len(st.Purged) != 0 {
		t.Fatalf("purged %v", st.Purged)
	}
	res := Render(req, st, pol)
	mustValid(t, req, res)
	if res.Stats.Purged != 0 || !strings.Contains(texts(res.Request)[1], "print(1)") {
		t.Fatalf("the action was purged: %+v", res.Stats)
	}
	if q := Query(st, "t1", bs.lookup); !strings.Contains(q, "Status: ERROR") || !strings.Contains(q, "Error\nError") {
		t.Fatalf("query:\n%s", q)
	}
}

// TestObservationDedupAndSpill: an observation identical to an earlier one (another action,
// the same output) is stubbed with the earlier one's ref; one over the spill threshold is
// spilled, its framed spill stub offering the text recovery by key.
func TestObservationDedupAndSpill(t *testing.T) {
	out := strings.Repeat("same output\n", 200)
	huge := strings.Repeat("x", 70000)
	req := newTx(wire.Anthropic).user("task").asst("", msaAction("a", "cat a")).user(msaObs(0, out)).
		asst("", msaAction("b", "cat b")).user(msaObs(0, out)).asst("", msaAction("c", "cat big")).user(msaObs(0, huge)).
		asst("", msaAction("d", "ls")).user(msaObs(0, "a\n")).req(t)
	pol := obsPolicy("")
	pol.SpillThreshold = 65536
	st := NewState()
	// Flush the first observation alone, then the rest: the second is a dedup alias of it.
	st = flush(t, req.WithMessages(req.Messages[:3]), st, pol)
	st = flush(t, req, st, pol)
	if st.Stats.Deduped != 1 || st.Stats.Spilled != 1 {
		t.Fatalf("stats %+v", st.Stats)
	}
	res := Render(req, st, pol)
	mustValid(t, req, res)
	got := texts(res.Request)
	if !strings.Contains(got[2], "ref `t1`") || !strings.Contains(got[4], "ref `t1`") {
		t.Fatalf("dedup:\n%s\n%s", got[2], got[4])
	}
	if !strings.HasPrefix(got[6], "user|<returncode>0</returncode>\n<output>\n[Oversized output spilled out of context — 70045 bytes.]\nTool: bash\nPreview (head):\n") ||
		!strings.Contains(got[6], "\nFull output — reply with exactly: context_tree_query obs_") || !strings.HasSuffix(got[6], "\n</output>") {
		t.Fatalf("spill stub: %.300s … %.200s", got[6], got[6][len(got[6])-200:])
	}
}

// TestObservationChain: a chain over action/observation turns — from the task to a reply the
// next user message does not answer — is compressed like a tool chain: its turns dropped, the
// <compressed-chain> after the task, the reply kept; the result stays valid.
func TestObservationChain(t *testing.T) {
	for _, f := range obsFormats {
		t.Run(f.String(), func(t *testing.T) {
			x := newTx(f)
			for task := 0; task < 2; task++ {
				x.user(fmt.Sprintf("task %d", task))
				for i := 0; i < 3; i++ {
					x.asst("", msaAction("step", fmt.Sprintf("cat f%d_%d", task, i))).user(msaObs(0, big(fmt.Sprintf("out %d %d", task, i), 1500)))
				}
				x.asst("", "All done, no action.")
			}
			x.user("task 2")
			req := x.req(t)
			pol := obsPolicy("")
			pol.Chain.RollingWindow = 0
			st := flush(t, req, NewState(), pol)
			if len(st.Chains) != 2 {
				t.Fatalf("%d chains", len(st.Chains))
			}
			res := Render(req, st, pol)
			mustValid(t, req, res)
			if res.Stats.Chains != 2 || res.Stats.Dropped != 12 {
				t.Fatalf("stats %+v", res.Stats)
			}
			got := strings.Join(texts(res.Request), "\n")
			if !strings.Contains(got, `<compressed-chain id="b1"`) || strings.Contains(got, "cat f0_1") || !strings.Contains(got, "All done, no action.") {
				t.Fatalf("rendered:\n%s", got)
			}
		})
	}
}

// TestObservationFailClosed: a state stubs only the observations it indexed — an observation
// whose text changed (the agent's own history processor rewrote it) or whose action differs
// has another occurrence key and stays verbatim.
func TestObservationFailClosed(t *testing.T) {
	out := strings.Repeat("line\n", 300)
	mk := func(obs, cmd string) *wire.Request {
		return newTx(wire.OpenAI).user("task").asst("", msaAction("a", cmd)).user(obs).asst("", msaAction("b", "ls")).user(msaObs(0, "x\n")).req(t)
	}
	pol := obsPolicy("")
	st := flush(t, mk(msaObs(0, out), "cat a"), NewState(), pol)
	for _, req := range []*wire.Request{mk(msaObs(0, out+"more"), "cat a"), mk(msaObs(0, out), "cat b"), mk("Old environment output: (300 lines omitted)", "cat a")} {
		if res := Render(req, st, pol); !res.Unchanged {
			t.Fatalf("a changed observation was stubbed:\n%s", res.Body)
		}
	}
	if res := Render(mk(msaObs(0, out), "cat a"), st, noSpillPolicy()); !res.Unchanged {
		t.Fatal("observations off still stubs")
	}
}

// TestTextRecovery: the recovery request a text-protocol agent can make, in the forms a model
// writes it, and the answer with the original output byte-exact.
func TestTextRecovery(t *testing.T) {
	for _, c := range []struct {
		reply string
		want  []string
	}{
		{"context_tree_query t3", []string{"t3"}},
		{"  context_tree_query t3 t7\n", []string{"t3", "t7"}},
		{"THOUGHT: I need the full output.\n\n```bash\ncontext_tree_query t12\n```", []string{"t12"}},
		{"`context_tree_query t1, t2`", []string{"t1", "t2"}},
		{"> context_tree_query obs_1a2b#deadbeef\r\n", []string{"obs_1a2b#deadbeef"}},
		{"context_tree_query t1\ncontext_tree_query t1 t4", []string{"t1", "t4"}},
		{"run context_tree_query t3 for me", nil},
		{"context_tree_query", nil},
		{"context_tree_query t3; rm -rf /", nil},
		{"THOUGHT: ls\n\n```bash\nls\n```", nil},
	} {
		if got := TextRecoveryRequest(c.reply); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%q: %v, want %v", c.reply, got, c.want)
		}
	}
	out := "line one\n\ttabbed \"quoted\" \u00e9\n" + strings.Repeat("more\n", 300)
	req := newTx(wire.Anthropic).user("task").asst("", msaAction("a", "cat a")).user(msaObs(0, out)).asst("", msaAction("b", "ls")).user(msaObs(0, "x\n")).req(t)
	bs := blobStore{}
	st := flushBlobs(t, req, NewState(), obsPolicy(""), bs)
	ans, ok := AnswerTextRecovery(st, "THOUGHT: need it\n```bash\ncontext_tree_query t1\n```", bs.lookup)
	if !ok || !strings.HasSuffix(ans, "\n\n"+msaObs(0, out)) || !strings.HasPrefix(ans, "## toolRef: t1\nTool: bash\nArgs: {\n  \"command\": \"cat a\"\n}\nStatus: OK\n") {
		t.Fatalf("answer %v:\n%s", ok, ans)
	}
	if _, ok := AnswerTextRecovery(st, "THOUGHT: ls\n```bash\nls\n```", bs.lookup); ok {
		t.Fatal("a plain action answered as a recovery")
	}
}

// TestValidateObservations: unknown harnesses and broken patterns are named.
func TestValidateObservations(t *testing.T) {
	for _, o := range []ObservationPolicy{{}, {Enabled: true}, {Harness: HarnessSWEAgent}, {Patterns: []ObservationPattern{{Match: `\Aok`}}}} {
		if err := ValidateObservations(o); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
	for _, c := range []struct {
		o    ObservationPolicy
		want string
	}{
		{ObservationPolicy{Harness: "openhands"}, `harness "openhands"`},
		{ObservationPolicy{Patterns: []ObservationPattern{{Match: ""}}}, "patterns[0]: match is empty"},
		{ObservationPolicy{Patterns: []ObservationPattern{{Match: `(`}}}, "patterns[0]: match:"},
		{ObservationPolicy{Patterns: []ObservationPattern{{Match: `x`, Action: `[`}}}, "patterns[0]: action:"},
		{ObservationPolicy{Patterns: []ObservationPattern{{Match: `x`, Action: `no group`}}}, "action has no group"},
		{ObservationPolicy{Patterns: []ObservationPattern{{Match: `x`, Stub: "[pruned]"}}}, "stub does not contain ${stub}"},
	} {
		err := ValidateObservations(c.o)
		if !errors.Is(err, ErrObservationPolicy) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.o, err, c.want)
		}
	}
}
