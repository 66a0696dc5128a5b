package strategies

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"

	"github.com/condense-dev/condense/internal/cost"
	"github.com/condense-dev/condense/internal/replay"
	"github.com/condense-dev/condense/internal/wire"
)

// lenEst counts one token per byte and no overheads, so expected numbers can be computed by
// hand.
type lenEst struct{}

func (lenEst) Text(s string) int           { return len(s) }
func (lenEst) Image(string, string) int    { return 0 }
func (lenEst) Document(string, string) int { return 0 }
func (lenEst) Overhead(string) int         { return 0 }
func (lenEst) String() string              { return "len" }
func toolUseMsg(id, name, input string) string {
	return `{"role":"assistant","content":[{"type":"tool_use","id":"` + id + `","name":"` + name + `","input":` + input + `}]}`
}
func resultMsg(id, text string) string {
	return `{"role":"user","content":[{"type":"tool_result","tool_use_id":"` + id + `","content":"` + text + `","citations_extra":{"keep":"me"}}]}`
}

// session builds the synthetic four-request session used below (claude-sonnet-4-5, no times):
//
//	m0 user "U"×100                         100 tokens
//	m1 assistant tool_use t1 read {}          6 (name 4 + input 2)
//	m2 user tool_result t1 "A"×3000        3000
//	m3 assistant tool_use t2 <name2> {}       6
//	m4 user tool_result t2 "B"×3000        3000
//	m5 assistant tool_use t3 bash {}          6
//	m6 user tool_result t3 "C"×3000        3000
//
// Request k holds m0..m(2k): R0 = 100, R1 = 3106, R2 = 6112, R3 = 9118 tokens.
func session(name2 string) *replay.Requests {
	msgs := []string{
		`{"role":"user","content":"` + strings.Repeat("U", 100) + `"}`,
		toolUseMsg("t1", "read", "{}"), resultMsg("t1", strings.Repeat("A", 3000)),
		toolUseMsg("t2", name2, "{}"), resultMsg("t2", strings.Repeat("B", 3000)),
		toolUseMsg("t3", "bash", "{}"), resultMsg("t3", strings.Repeat("C", 3000)),
	}
	r := &replay.Requests{File: "synthetic"}
	for k := 0; k < 4; k++ {
		body := `{"model":"claude-sonnet-4-5","max_tokens":1000,"metadata":{"user_id":"x"},"messages":[` + strings.Join(msgs[:2*k+1], ",") + `]}`
		r.Bodies = append(r.Bodies, []byte(body))
	}
	return r
}

func run(t *testing.T, tr replay.Transcript, st replay.Strategy) replay.StrategyReport {
	t.Helper()
	rep, err := replay.Run(context.Background(), tr, replay.Options{
		Strategies: []replay.Strategy{st}, Estimator: lenEst{},
	})
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Strategies[0]
	if s.Invalid != 0 || s.Errors != 0 {
		t.Fatalf("%s: invalid %d errors %d: %+v", s.Name, s.Invalid, s.Errors, s.Diagnostics)
	}
	return s
}

func check(t *testing.T, s replay.StrategyReport, input, read, write int64, costUSD float64, peak int64, busts int) {
	t.Helper()
	u := s.Usage
	if u.Input != input || u.CacheRead != read || u.CacheWrite() != write {
		t.Fatalf("%s: input %d read %d write %d, want %d %d %d", s.Name, u.Input, u.CacheRead, u.CacheWrite(), input, read, write)
	}
	if math.Abs(s.Cost-costUSD) > 1e-12 {
		t.Fatalf("%s: cost %.10f, want %.10f", s.Name, s.Cost, costUSD)
	}
	if s.PeakContext != peak || s.CacheBusts != busts {
		t.Fatalf("%s: peak %d busts %d, want %d %d", s.Name, s.PeakContext, s.CacheBusts, peak, busts)
	}
}

// TestNone: only the last message block carries the (auto) breakpoint.
//
//	R0 100 < 1024 minimum: input 100
//	R1 write 3106
//	R2 read 3106 (lookback finds R1's entry), write 3006
//	R3 read 6112, write 3006
//	cost = (100×3 + 9218×0.30 + 9118×3.75)/1e6 = (300 + 2765.4 + 34192.5)/1e6 = 0.0372579
func TestNone(t *testing.T) {
	s := run(t, session("grep"), None{})
	check(t, s, 100, 9218, 9118, 0.0372579, 9118, 0)
}

// TestObservationMask with window 1 (placeholder "[earlier tool output omitted]", 29 bytes):
//
//	R0 input 100; R1 write 3106
//	R2 masks t1: 100+6+29+6+3000 = 3141, R1's entry is gone (bust): write 3141
//	R3 masks t1,t2: 100+6+29+6+29+6+3000 = 3176, bust again: write 3176
//	cost = (300 + (3106+3141+3176)×3.75)/1e6 = (300 + 35336.25)/1e6 = 0.03563625
func TestObservationMask(t *testing.T) {
	if len(MaskedPlaceholder) != 29 {
		t.Fatalf("placeholder length %d changed: update the hand computation", len(MaskedPlaceholder))
	}
	s := run(t, session("grep"), ObservationMask{Window: 1})
	check(t, s, 100, 0, 9423, 0.03563625, 3176, 2)
}

// TestClearToolUses with trigger 5000 and keep 1 (placeholder 37 bytes):
//
//	R0 100, R1 3106: under the trigger, unchanged (input 100, write 3106)
//	R2 6112 > 5000: clear t1 → 100+6+37+6+3000 = 3149, bust, write 3149
//	R3 9118 > 5000: clear t1,t2 → 3192, bust, write 3192
//	cost = (300 + 9447×3.75)/1e6 = 0.03572625
func TestClearToolUses(t *testing.T) {
	if len(ClearedPlaceholder) != 37 {
		t.Fatalf("placeholder length %d changed: update the hand computation", len(ClearedPlaceholder))
	}
	s := run(t, session("grep"), ClearToolUses{Trigger: 5000, Keep: 1})
	check(t, s, 100, 0, 9447, 0.03572625, 3192, 2)
}

// TestClearToolUsesClearAtLeast: R2 would clear 3000-37 = 2963 and R3 5926 tokens, both under
// clear_at_least 6000, so nothing is cleared: the bill equals None's.
func TestClearToolUsesClearAtLeast(t *testing.T) {
	s := run(t, session("grep"), ClearToolUses{Trigger: 5000, Keep: 1, ClearAtLeast: 6000})
	check(t, s, 100, 9218, 9118, 0.0372579, 9118, 0)
	if s.DiagnosticCounts["clear-below-minimum"] != 2 {
		t.Fatalf("diagnostics %v", s.DiagnosticCounts)
	}
}

// TestClearToolUsesExclude: keep 0, "read" excluded, so t1 always stays:
//
//	R2 clears t2 (grep): 100+6+3000+6+37 = 3149; R1's entry (3106) still a prefix:
//	   read 3106, write 43
//	R3 clears t2, t3: 3192; R2's entry (3149) is a prefix: read 3149, write 43
//	totals: input 100, read 6255, write 3106+43+43 = 3192
//	cost = (300 + 6255×0.30 + 3192×3.75)/1e6 = (300 + 1876.5 + 11970)/1e6 = 0.0141465
func TestClearToolUsesExclude(t *testing.T) {
	s := run(t, session("grep"), ClearToolUses{Trigger: 5000, Keep: 0, ExcludeTools: []string{"read"}})
	check(t, s, 100, 6255, 3192, 0.0141465, 3192, 0)
}

// TestClearToolInputsAndPassThrough checks the rewritten bytes: cleared inputs become {},
// results the placeholder, and every member the strategy does not edit (unknown top-level
// fields, unknown block members) is kept byte-for-byte.
func TestClearToolInputsAndPassThrough(t *testing.T) {
	tr := session("grep")
	body := bytes.Replace(tr.Bodies[3], []byte(`"name":"read","input":{}`), []byte(`"name":"read","input":{"path":"/x"}`), 1)
	r, _ := ClearToolUses{Trigger: 10, Keep: 1, ClearToolInputs: true}.New(context.Background(), tr)
	res, err := r.Rewrite(context.Background(), &replay.Request{Body: body, Estimator: lenEst{},
		Prompt: func(b []byte) (cost.Prompt, error) { return cost.FromBody(b, cost.PromptOptions{Estimator: lenEst{}}) }})
	if err != nil {
		t.Fatal(err)
	}
	out := string(res.Body)
	for _, want := range []string{
		`"name":"read","input":{}`,
		`"tool_use_id":"t1","content":"` + ClearedPlaceholder + `","citations_extra":{"keep":"me"}`,
		`"tool_use_id":"t2","content":"` + ClearedPlaceholder + `"`,
		`"tool_use_id":"t3","content":"` + strings.Repeat("C", 3000) + `"`,
		`"max_tokens":1000,"metadata":{"user_id":"x"}`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("rewritten body lacks %s", want)
		}
	}
	if err := replay.Validate(wire.Anthropic, res.Body); err != nil {
		t.Fatal(err)
	}
}

// TestObservationMaskOpenAI masks OpenAI tool messages the same way.
func TestObservationMaskOpenAI(t *testing.T) {
	body := `{"model":"gpt-5","messages":[{"role":"user","content":"go"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"ls","arguments":"{}"}},{"id":"b","type":"function","function":{"name":"cat","arguments":"{}"}}]},` +
		`{"role":"tool","tool_call_id":"a","content":"one"},{"role":"tool","tool_call_id":"b","content":"two"}]}`
	tr := &replay.Requests{File: "oa", Format: wire.OpenAI, Bodies: [][]byte{[]byte(body)}}
	r, _ := ObservationMask{Window: 1}.New(context.Background(), tr)
	res, err := r.Rewrite(context.Background(), &replay.Request{Body: []byte(body), Format: wire.OpenAI})
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(body, `"content":"one"`, `"content":"`+MaskedPlaceholder+`"`, 1)
	if string(res.Body) != want {
		t.Fatalf("got  %s\nwant %s", res.Body, want)
	}
	if err := replay.Validate(wire.OpenAI, res.Body); err != nil {
		t.Fatal(err)
	}
}

// TestResponsesMaskAndClear masks and clears Responses output items by call_id (a custom
// tool's output too), clears a function call's arguments and a custom tool's input, leaves a
// local shell call's action, and keeps every other item and member byte-for-byte.
func TestResponsesMaskAndClear(t *testing.T) {
	body := `{"model":"gpt-5","instructions":"i","input":[{"type":"message","role":"user","content":"go"},` +
		`{"type":"reasoning","summary":[],"encrypted_content":"E"},{"type":"function_call","call_id":"a","name":"ls","arguments":"{\"d\":1}"},` +
		`{"type":"custom_tool_call","call_id":"b","name":"apply_patch","input":"patch"},{"type":"local_shell_call","call_id":"c","action":{"type":"exec","command":["ls"]}},` +
		`{"type":"function_call_output","call_id":"a","output":"one"},{"type":"custom_tool_call_output","call_id":"b","output":"two"},` +
		`{"type":"function_call_output","call_id":"c","output":"three"}],"store":false}`
	tr := &replay.Requests{File: "r", Format: wire.Responses, Bodies: [][]byte{[]byte(body)}}
	r, _ := ObservationMask{Window: 1}.New(context.Background(), tr)
	res, err := r.Rewrite(context.Background(), &replay.Request{Body: []byte(body), Format: wire.Responses})
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(strings.Replace(body, `"output":"one"`, `"output":"`+MaskedPlaceholder+`"`, 1), `"output":"two"`, `"output":"`+MaskedPlaceholder+`"`, 1)
	if string(res.Body) != want {
		t.Fatalf("masked:\n got %s\nwant %s", res.Body, want)
	}
	if err := replay.Validate(wire.Responses, res.Body); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 100)
	body = strings.NewReplacer(`"output":"one"`, `"output":"`+long+`"`, `"output":"two"`, `"output":"`+long+`"`, `"output":"three"`, `"output":"`+long+`"`).Replace(body)
	c, _ := ClearToolUses{Trigger: 1, Keep: 0, ClearToolInputs: true}.New(context.Background(), tr)
	res, err = c.Rewrite(context.Background(), &replay.Request{Body: []byte(body), Format: wire.Responses, Estimator: lenEst{},
		Prompt: func(b []byte) (cost.Prompt, error) {
			return cost.FromBody(b, cost.PromptOptions{Format: wire.Responses, Estimator: lenEst{}})
		}})
	if err != nil {
		t.Fatal(err)
	}
	out := string(res.Body)
	for _, frag := range []string{`"arguments":"{}"`, `"input":""`, `"action":{"type":"exec","command":["ls"]}`,
		`"call_id":"c","output":"` + ClearedPlaceholder + `"`, `{"type":"reasoning","summary":[],"encrypted_content":"E"}`, `],"store":false}`} {
		if !strings.Contains(out, frag) {
			t.Errorf("cleared body lacks %s:\n%s", frag, out)
		}
	}
	if err := replay.Validate(wire.Responses, res.Body); err != nil {
		t.Fatal(err)
	}
}

// textTranscript is a request log of a text-protocol agent (replay.TextObservations).
type textTranscript struct {
	*replay.Requests
	harness string
}

func (t textTranscript) ObservationHarness() string { return t.harness }

// TestObservationMaskText masks a text-protocol agent's observations: every observation
// message but the last Window ones gets the placeholder as its content; actions, the task
// and a format error stay, and the request stays valid. Without the harness nothing is masked.
func TestObservationMaskText(t *testing.T) {
	body := `{"model":"gpt-5","messages":[{"role":"system","content":"sys"},{"role":"user","content":"task"},` +
		`{"role":"assistant","content":"THOUGHT: a\n\n` + "```bash\\nls\\n```" + `"},{"role":"user","content":"<returncode>0</returncode>\n<output>\na\n</output>"},` +
		`{"role":"assistant","content":"two actions"},{"role":"user","content":"Please always provide EXACTLY ONE action in triple backticks, found 2 actions."},` +
		`{"role":"assistant","content":"THOUGHT: b\n\n` + "```bash\\ncat a\\n```" + `"},{"role":"user","content":"<returncode>1</returncode>\n<output>\nno\n</output>"},` +
		`{"role":"assistant","content":"THOUGHT: c\n\n` + "```bash\\npwd\\n```" + `"},{"role":"user","content":"<returncode>0</returncode>\n<output>\n/r\n</output>"}]}`
	reqs := &replay.Requests{File: "t", Format: wire.OpenAI, Bodies: [][]byte{[]byte(body)}}
	for _, c := range []struct {
		tr     replay.Transcript
		masked int
	}{{textTranscript{reqs, "mini-swe-agent"}, 2}, {reqs, 0}} {
		r, err := ObservationMask{Window: 1}.New(context.Background(), c.tr)
		if err != nil {
			t.Fatal(err)
		}
		res, err := r.Rewrite(context.Background(), &replay.Request{Body: []byte(body), Format: wire.OpenAI})
		if err != nil {
			t.Fatal(err)
		}
		out := string(res.Body)
		if n := strings.Count(out, `"content":"`+MaskedPlaceholder+`"`); n != c.masked {
			t.Fatalf("%d masked, want %d:\n%s", n, c.masked, out)
		}
		if c.masked > 0 && (!strings.Contains(out, `<output>\n/r\n</output>`) || !strings.Contains(out, "found 2 actions") || !strings.Contains(out, "cat a")) {
			t.Fatalf("masked too much:\n%s", out)
		}
		if err := replay.Validate(wire.OpenAI, res.Body); err != nil {
			t.Fatal(err)
		}
	}
}
