package fidelity

import (
	"slices"
	"strings"
	"testing"

	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/wire"
)

// msa is a hand-made mini-swe-agent (text protocol) session in which every use is known. Its
// observations are user messages; the format error m6 is a user message too, but no
// observation:
//
//	m0 user       the task
//	m1 assistant  grep -rn parse_header src
//	m2 user       observation a: src/httpkit/headers.py:88:def parse_header(line):
//	m3 assistant  "It is at src/httpkit/headers.py:88", sed -n 85,95p src/httpkit/headers.py
//	m4 user       observation b: the function, with name, value = line.split(':', 1)
//	m5 assistant  "`name, value = line.split(':', 1)` fails …", two actions
//	m6 user       format error: one action only; use `make check_headers`
//	m7 assistant  "Running check_headers as asked", make check_headers
//	m8 user       observation c: a traceback, line 89, ValueError
//	m9 assistant  "parse_header raises ValueError at line 89 of headers.py", submit
//	m10 user      observation d
//
// Request k holds the messages before the (k+1)-th assistant message: R0 = m0, R1 = m0..m2,
// R2 = m0..m4, R3 = m0..m6, R4 = m0..m8, R5 = m0..m10.
var msa = []string{
	"Fix the header parsing bug in httpkit. Answer with one bash block.",
	"THOUGHT: Find the parser.\n\n```bash\ngrep -rn parse_header src\n```",
	"<returncode>0</returncode>\n<output>\nsrc/httpkit/headers.py:88:def parse_header(line):\n</output>",
	"THOUGHT: It is at src/httpkit/headers.py:88, reading it.\n\n```bash\nsed -n 85,95p src/httpkit/headers.py\n```",
	"<returncode>0</returncode>\n<output>\ndef parse_header(line):\n    name, value = line.split(':', 1)\n    return name.strip(), value.strip()\n</output>",
	"THOUGHT: `name, value = line.split(':', 1)` fails on a line without a colon.\n\n```bash\npython -m pytest tests/test_headers.py\n```\n\n```bash\nmake check\n```",
	"Please always provide EXACTLY ONE action in triple backticks, found 2 actions.\nTo run the tests, use `make check_headers`.",
	"THOUGHT: Running check_headers as asked.\n\n```bash\nmake check_headers\n```",
	"<returncode>1</returncode>\n<output>\nTraceback (most recent call last):\n  File \"src/httpkit/headers.py\", line 89, in parse_header\n" +
		"ValueError: not enough values to unpack (expected 2, got 1)\n</output>",
	"THOUGHT: parse_header raises ValueError at line 89 of headers.py.\n\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```",
	"<returncode>0</returncode>\n<output>\nCOMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n</output>",
}

// msaObs is the observation policy the replay uses for mini-swe-agent sessions.
var msaObs = pruner.ObservationPolicy{Enabled: true, Harness: pruner.HarnessMiniSWEAgent}

// msaMessages returns the JSON messages of texts, alternating from a user message.
func msaMessages(texts []string) []string {
	out := make([]string, len(texts))
	for i, s := range texts {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		out[i] = `{"role":"` + role + `","content":` + js(s) + `}`
	}
	return out
}

func requestIn(t *testing.T, f wire.Format, msgs []string) *wire.Request {
	t.Helper()
	r, err := wire.Parse(f, []byte(`{"model":"m","messages":[`+strings.Join(msgs, ",")+`]}`))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// msaRequests returns R0..R5 in format f.
func msaRequests(t *testing.T, f wire.Format) []*wire.Request {
	msgs := msaMessages(msa)
	var out []*wire.Request
	for n := 1; n <= len(msgs); n += 2 {
		out = append(out, requestIn(t, f, msgs[:n]))
	}
	return out
}

// observationIDs returns the engine's call id of each observation of r, by message index.
func observationIDs(r *wire.Request) map[int]string {
	ids := map[int]string{}
	for i := 1; i < len(r.Messages); i++ {
		if o, ok := pruner.ObservationOf(r.Messages[i-1], r.Messages[i], msaObs); ok {
			ids[i] = o.Result.ID
		}
	}
	return ids
}

// TestUsesOfObservations: with the engine's observations on, the uses of each response are
// the salient tokens it wrote that the request showed only inside observations, with the
// observations' call ids as sources; a user message that is no observation (the format error)
// is no source. With observations off there are none: every token is in user text.
func TestUsesOfObservations(t *testing.T) {
	for _, f := range []wire.Format{wire.Anthropic, wire.OpenAI} {
		t.Run(f.String(), func(t *testing.T) {
			rs := msaRequests(t, f)
			ids := observationIDs(rs[len(rs)-1])
			if len(ids) != 4 || ids[2] == "" || ids[4] == "" || ids[8] == "" || ids[10] == "" {
				t.Fatalf("observations %v, want messages 2, 4, 8, 10", ids)
			}
			want := []struct {
				uses []string
				msg  int // the observation that shows them
			}{
				{nil, 0}, // parse_header is nowhere in R0
				{[]string{"src/httpkit/headers.py:88", "src/httpkit/headers.py"}, 2},
				// The quoted fragment and the dotted name; the response's own line is nowhere.
				{[]string{"line.split", "name, value = line.split(':', 1)"}, 4},
				{nil, 0}, // check_headers is in the format error, a user message
				// parse_header is in the agent's own action m1, headers.py in m3's.
				{[]string{"ValueError", "line 89"}, 8},
			}
			for k := 0; k+1 < len(rs); k++ {
				x := NewIndex(nil)
				x.Observe(msaObs)
				x.Update(rs[k])
				var got []string
				for _, u := range x.Uses(Response(rs[k], rs[k+1])) {
					got = append(got, u.Text)
					if !slices.Equal(u.Sources, []string{ids[want[k].msg]}) {
						t.Errorf("R%d use %q: sources %v, want [%s]", k, u.Text, u.Sources, ids[want[k].msg])
					}
				}
				if !slices.Equal(distinct(got), distinct(append([]string(nil), want[k].uses...))) {
					t.Errorf("uses of R%d = %q, want %q", k, got, want[k].uses)
				}
				off := NewIndex(nil)
				off.Update(rs[k])
				if uses := off.Uses(Response(rs[k], rs[k+1])); len(uses) != 0 {
					t.Errorf("R%d with observations off: uses %v", k, uses)
				}
			}
		})
	}
}

// TestClassifyObservationRenderings judges R1's uses against what three strategies send for
// it: the session unchanged, observation a stubbed by the engine (its framing around the
// text recovery stub) with a summary naming the path, and a masked.
func TestClassifyObservationRenderings(t *testing.T) {
	for _, f := range []wire.Format{wire.Anthropic, wire.OpenAI} {
		t.Run(f.String(), func(t *testing.T) {
			rs := msaRequests(t, f)
			original, response := rs[1], Response(rs[1], rs[2])
			a := observationIDs(original)[2]
			stubbed := append([]string(nil), msa[:3]...)
			stubbed[2] = "<returncode>0</returncode>\n<output>\n" + pruner.ObservationStubText("t1") + "\n</output>\n\n" +
				"- `t1` bash command=\"grep -rn parse_header src\" → 1 line(s), src/httpkit/headers.py"
			masked := append([]string(nil), msa[:3]...)
			masked[2] = "[earlier tool output omitted]"
			recoverA := func(id string) bool { return id == a }
			for _, tc := range []struct {
				name        string
				rendered    []string
				recoverable func(string) bool
				want        map[string]Outcome
			}{
				{"unchanged", msa[:3], nil, map[string]Outcome{"src/httpkit/headers.py:88": Kept, "src/httpkit/headers.py": Kept}},
				{"stubbed, original recoverable", stubbed, recoverA,
					map[string]Outcome{"src/httpkit/headers.py:88": Recoverable, "src/httpkit/headers.py": Kept}},
				{"stubbed, original gone", stubbed, nil, map[string]Outcome{"src/httpkit/headers.py:88": Lost, "src/httpkit/headers.py": Kept}},
				{"masked", masked, nil, map[string]Outcome{"src/httpkit/headers.py:88": Lost, "src/httpkit/headers.py": Lost}},
			} {
				vs := measure(original, requestIn(t, f, msaMessages(tc.rendered)), response, msaObs, tc.recoverable)
				got := texts(vs)
				if len(got) != len(tc.want) {
					t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
				}
				for k, o := range tc.want {
					if got[k] != o {
						t.Errorf("%s: %q is %s, want %s", tc.name, k, got[k], o)
					}
				}
				for _, v := range vs {
					if (v.Outcome == Kept) != (v.Source == "") || (v.Outcome != Kept && v.Source != a) {
						t.Errorf("%s: %q (%s) source %q, want %q", tc.name, v.Text, v.Outcome, v.Source, a)
					}
				}
			}
			if vs := measure(original, original, response, pruner.ObservationPolicy{}, nil); len(vs) != 0 {
				t.Errorf("observations off: verdicts %v", vs)
			}
		})
	}
}

// TestIndexFollowsObservations: an index moved through the text session (as the replay does,
// including a rewrite of the action an observation answers, which changes its call id, and a
// masked observation) answers as a fresh index of each request, sources included.
func TestIndexFollowsObservations(t *testing.T) {
	msgs := msaMessages(msa)
	otherAction := append([]string(nil), msgs[:5]...)
	otherAction[1] = msaMessages([]string{"", "THOUGHT: Search again.\n\n```bash\ngrep -rn 'def parse_header' src\n```"})[1]
	masked := append([]string(nil), msgs[:9]...)
	masked[4] = msaMessages([]string{"[earlier tool output omitted]"})[0]
	seq := [][]string{msgs[:1], msgs[:3], msgs[:5], otherAction, msgs[:7], masked, msgs[:9], msgs[:11], msgs[:3]}
	probe := []string{"src/httpkit/headers.py:88", "src/httpkit/headers.py", "line.split", "name, value = line.split(':', 1)",
		"check_headers", "ValueError", "line 89", "parse_header"}
	follow := NewIndex(nil)
	follow.Observe(msaObs)
	for i, ms := range seq {
		r := requestIn(t, wire.OpenAI, ms)
		follow.Update(r)
		fresh := NewIndex(nil)
		fresh.Observe(msaObs)
		fresh.Update(r)
		for _, p := range probe {
			tk := TokenOf(p)
			if follow.Shows(tk) != fresh.Shows(tk) || follow.OnlyInToolResults(tk) != fresh.OnlyInToolResults(tk) ||
				!slices.Equal(follow.sources(tk), fresh.sources(tk)) {
				t.Errorf("step %d, %q: following %v/%v %v, fresh %v/%v %v", i, p, follow.Shows(tk), follow.OnlyInToolResults(tk), follow.sources(tk),
					fresh.Shows(tk), fresh.OnlyInToolResults(tk), fresh.sources(tk))
			}
		}
	}
	r := requestIn(t, wire.OpenAI, otherAction)
	follow.Update(r)
	ids := observationIDs(r)
	if got := follow.sources(TokenOf("src/httpkit/headers.py:88")); !slices.Equal(got, []string{ids[2]}) {
		t.Errorf("after the action changed: sources %v, want [%s]", got, ids[2])
	}
	for i, id := range ids {
		if got := follow.ObservationMessage(id); got != i {
			t.Errorf("observation %s is message %d, want %d", id, got, i)
		}
	}
	if got := follow.ObservationMessage("nope"); got != -1 {
		t.Errorf("an unknown id is message %d", got)
	}
}
