package pruner

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/condense-dev/condense/internal/wire"
)

// genTx builds a random valid transcript driven by r: several user turns, each with tool
// turns (one or more calls, sometimes errored, sometimes huge, sometimes protected or
// recovery calls, OpenAI and Responses ids sometimes reused) and usually a closing text reply.
func genTx(r *rand.Rand, f wire.Format) *tx {
	x := newTx(f)
	if f != wire.Anthropic && r.IntN(3) == 0 {
		x.system("you are a coding agent")
	}
	tools := []string{"read", "bash", "edit", "todowrite", QueryToolName}
	users := 1 + r.IntN(6)
	n := 0
	for u := 0; u < users; u++ {
		x.user(fmt.Sprintf("task %d", r.IntN(4))) // repeated prompts exercise ordinals
		turns := r.IntN(5)
		for k := 0; k < turns; k++ {
			var calls []tcall
			var res []tres
			for c := 0; c < 1+r.IntN(3); c++ {
				n++
				id := fmt.Sprintf("call_%d", n)
				if f != wire.Anthropic && r.IntN(4) == 0 {
					id = fmt.Sprintf("call_%d", r.IntN(3)) // reused across turns
				}
				dup := false
				for _, o := range calls {
					dup = dup || o.id == id
				}
				if dup {
					continue
				}
				tool := tools[r.IntN(len(tools))]
				input := fmt.Sprintf(`{"path":"src/f%d.go"}`, r.IntN(5))
				if r.IntN(5) == 0 {
					input = `{"path":"a/skills/b/SKILL.md"}`
				}
				if r.IntN(6) == 0 {
					input = `{"cmd":"` + strings.Repeat("y", 600) + `"}`
				}
				size := []int{10, 300, 1500, 3000, 70000}[r.IntN(5)]
				text := big(fmt.Sprintf("out-%d", r.IntN(6)), size)
				calls = append(calls, tcall{id, tool, input})
				res = append(res, tres{id: id, text: text, isErr: r.IntN(5) == 0})
			}
			thinking := ""
			if f != wire.OpenAI && r.IntN(2) == 0 {
				thinking = "thinking about it"
			}
			x.asst(thinking, "", calls...)
			x.results(res...)
		}
		if u < users-1 || r.IntN(2) == 0 {
			th := ""
			if f != wire.OpenAI && r.IntN(2) == 0 {
				th = "final thoughts"
			}
			x.asst(th, fmt.Sprintf("reply %d", r.IntN(3)))
		}
	}
	if len(x.msgs) > 0 && x.msgs[len(x.msgs)-1]["role"] == "assistant" {
		x.user("next")
	}
	// Up to four cache_control markers on array-content blocks (Anthropic).
	if f == wire.Anthropic {
		for k := r.IntN(5); k > 0; k-- {
			m := x.msgs[r.IntN(len(x.msgs))]
			if c, ok := m["content"].([]any); ok && len(c) > 0 {
				b := c[len(c)-1].(map[string]any)
				if b["type"] != "thinking" {
					b["cache_control"] = map[string]any{"type": "ephemeral"}
				}
			}
		}
	}
	return x
}

// genState flushes random prefixes of the transcript with random policies and randomly
// missing outputs.
func genState(tb testing.TB, r *rand.Rand, x *tx) (*State, Policy) {
	pol := DefaultPolicy()
	pol.Chain.RollingWindow = r.IntN(3)
	if r.IntN(2) == 0 {
		pol.BatchingMode = BatchAgentMessage
	}
	pol.MinBatchChars = []int{0, 1000}[r.IntN(2)]
	pol.RecoveryGraceTurns = r.IntN(3)
	pol.Chain.StripFinalAssistantThinking = r.IntN(4) != 0
	if r.IntN(2) == 0 {
		pol.ProtectedTools = []string{"todowrite"}
	}
	pol.Chain.FuseRangeSummary = r.IntN(3) != 0
	st := NewState()
	full := x.msgs
	for i := 0; i < 1+r.IntN(3); i++ {
		cut := 1 + r.IntN(len(full))
		for cut < len(full) && opensTurn(x.f, full, cut) {
			cut++
		}
		y := &tx{f: x.f, msgs: full[:cut]}
		req, err := wire.Parse(x.f, y.body())
		if err != nil {
			tb.Fatal(err)
		}
		p, err := PlanFlush(req, st, pol, t0)
		if err != nil {
			tb.Fatal(err)
		}
		outs := map[string]string{}
		for _, b := range p.Batches {
			if r.IntN(6) != 0 {
				outs[b.ID] = testSummarizer(b)
			}
		}
		st, err = p.Apply(outs)
		if err != nil {
			tb.Fatal(err)
		}
	}
	return st, pol
}

// opensTurn reports whether a flushed prefix may not end before full[cut]: after an assistant
// message with tool calls; for Responses inside a run of model-produced items or after its
// calls (a request is sent before a model response, never in the middle of one).
func opensTurn(f wire.Format, full []map[string]any, cut int) bool {
	if f == wire.Responses {
		model := func(m map[string]any) bool {
			return m["role"] == "assistant" || m["type"] == "function_call" || m["type"] == "reasoning"
		}
		return model(full[cut-1]) && (full[cut-1]["type"] != "message" || model(full[cut]))
	}
	return full[cut-1]["role"] == "assistant" && hasCalls(full[cut-1])
}

func hasCalls(m map[string]any) bool {
	if _, ok := m["tool_calls"]; ok {
		return true
	}
	c, _ := m["content"].([]any)
	for _, b := range c {
		if bm, ok := b.(map[string]any); ok && bm["type"] == "tool_use" {
			return true
		}
	}
	return false
}

// checkRender asserts the render properties for one transcript and state.
func checkRender(tb testing.TB, req *wire.Request, st *State, pol Policy) {
	tb.Helper()
	res := Render(req, st, pol)
	if res.Fallback != "" {
		tb.Fatalf("fallback: %s", res.Fallback)
	}
	if wire.Validate(req) == nil {
		if err := wire.Validate(res.Request); err != nil {
			tb.Fatalf("invalid render: %v\n%s", err, res.Body)
		}
		// The earlier phases never create orphans: on a valid input the sweep never fires.
		if res.Stats.Swept != 0 {
			tb.Fatalf("orphan sweep fired on the engine's own output: %+v", res.Diagnostics)
		}
	}
	// Thinking blocks (and Responses reasoning items) that stay are the original blocks,
	// signatures included; a reasoning item always stays with the item after it.
	thinking := func(b *wire.Block) bool {
		return b.Kind == wire.KindThinking || b.Kind == wire.KindRedactedThinking || b.Kind == wire.KindReasoning
	}
	orig := map[string]bool{}
	for _, m := range req.Messages {
		for _, b := range m.Blocks {
			if thinking(b) {
				orig[string(b.Raw())] = true
			}
		}
	}
	for _, m := range res.Request.Messages {
		for _, b := range m.Blocks {
			if thinking(b) && !orig[string(b.Raw())] {
				tb.Fatalf("thinking block altered: %s", b.Raw())
			}
		}
	}
	if req.Format == wire.Responses {
		checkReasoningKept(tb, req, res.Request)
	}
	// Cache markers are never added and never all lost.
	in, out := countCC(req), countCC(res.Request)
	if out > in || (in > 0 && out == 0) {
		tb.Fatalf("cache markers %d -> %d", in, out)
	}
	if res.Unchanged && !bytes.Equal(res.Body, req.Raw()) {
		tb.Fatal("unchanged but body differs")
	}
	if ref := unreachableStubRef(res.Request); ref != "" {
		tb.Fatalf("stub ref %s shown without its summary or chain:\n%s", ref, joined(res.Request))
	}
	again := Render(req, st, pol)
	if !bytes.Equal(res.Body, again.Body) {
		tb.Fatal("render not deterministic")
	}
	enc, _ := st.MarshalBinary()
	var st2 State
	if err := st2.UnmarshalBinary(enc); err != nil {
		tb.Fatal(err)
	}
	if !bytes.Equal(Render(req, &st2, pol).Body, res.Body) {
		tb.Fatal("render differs after state round trip")
	}
	if empty := Render(req, NewState(), pol); !empty.Unchanged {
		tb.Fatal("empty state changed the request")
	}
	if _, err := wire.Parse(req.Format, res.Body); err != nil {
		tb.Fatalf("rendered body does not parse: %v", err)
	}
}

func TestPropertyRender(t *testing.T) {
	n := 200
	if testing.Short() {
		n = 30
	}
	for i := 0; i < n; i++ {
		for _, f := range formats {
			r := rand.New(rand.NewPCG(uint64(i), uint64(f)))
			x := genTx(r, f)
			req := x.req(t)
			if err := wire.Validate(req); err != nil {
				t.Fatalf("generator produced an invalid transcript: %v", err)
			}
			st, pol := genState(t, r, x)
			checkRender(t, req, st, pol)
		}
	}
}

// FuzzRenderGenerated drives the transcript and state generator with fuzz input.
func FuzzRenderGenerated(f *testing.F) {
	for _, s := range []uint64{1, 2, 3, 42, 1234} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, seed uint64, anthropic bool) {
		fm := wire.OpenAI
		if anthropic {
			fm = wire.Anthropic
		}
		r := rand.New(rand.NewPCG(seed, 7))
		x := genTx(r, fm)
		st, pol := genState(t, r, x)
		checkRender(t, x.req(t), st, pol)
	})
}

// FuzzRenderBody renders arbitrary request bodies against a non-empty state: no panic, and a
// valid input stays valid.
func FuzzRenderBody(f *testing.F) {
	seedA, seedO := smallBody(wire.Anthropic), smallBody(wire.OpenAI)
	pol := kPolicy(1)
	pol.MinBatchChars = 0
	f.Add(seedA, true)
	f.Add(seedO, false)
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`), true)
	f.Add([]byte(`{"messages":[{"role":"tool","tool_call_id":"x","content":"y"}]}`), false)
	f.Add([]byte(`{`), true)
	stA := flush(f, mustParse(f, wire.Anthropic, append([]byte(nil), seedA...)), NewState(), pol)
	stO := flush(f, mustParse(f, wire.OpenAI, append([]byte(nil), seedO...)), NewState(), pol)
	f.Fuzz(func(t *testing.T, body []byte, anthropic bool) {
		fm, st := wire.OpenAI, stO
		if anthropic {
			fm, st = wire.Anthropic, stA
		}
		renderBody(t, fm, body, st, pol)
	})
}

// FuzzRenderBodyResponses is FuzzRenderBody for Responses request bodies.
func FuzzRenderBodyResponses(f *testing.F) {
	seed := smallBody(wire.Responses)
	pol := kPolicy(1)
	pol.MinBatchChars = 0
	f.Add(seed)
	f.Add([]byte(`{"model":"m","input":"hi"}`))
	f.Add([]byte(`{"input":[{"type":"reasoning","summary":[]},{"type":"function_call","call_id":"a0","name":"read","arguments":"{}"},{"type":"function_call_output","call_id":"a0","output":"out0"}]}`))
	f.Add([]byte(`{"input":[{"type":"function_call_output","call_id":"x","output":"y"},{"type":"compaction","encrypted_content":"e"}]}`))
	st := flush(f, mustParse(f, wire.Responses, append([]byte(nil), seed...)), NewState(), pol)
	f.Fuzz(func(t *testing.T, body []byte) { renderBody(t, wire.Responses, body, st, pol) })
}

// FuzzRenderGeneratedResponses is FuzzRenderGenerated for Responses transcripts.
func FuzzRenderGeneratedResponses(f *testing.F) {
	for _, s := range []uint64{1, 2, 3, 42, 1234} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		r := rand.New(rand.NewPCG(seed, 7))
		x := genTx(r, wire.Responses)
		st, pol := genState(t, r, x)
		checkRender(t, x.req(t), st, pol)
	})
}

// smallBody is a small transcript of three tasks in format f: the fuzz engine slows down
// sharply on inputs of tens of kilobytes.
func smallBody(f wire.Format) []byte {
	x := newTx(f)
	for i := 0; i < 3; i++ {
		x.user(fmt.Sprint("t", i)).turn(fmt.Sprint("a", i), "read", `{"path":"p"}`, fmt.Sprint("out", i)).turn(fmt.Sprint("b", i), "bash", `{}`, "o").asst("", "ok")
	}
	return x.user("n").body()
}

// renderBody renders an arbitrary body against st: no panic, a valid input stays valid, the
// render is deterministic and a flush can be planned.
func renderBody(t *testing.T, f wire.Format, body []byte, st *State, pol Policy) {
	req, err := wire.Parse(f, body)
	if err != nil {
		return
	}
	res := Render(req, st, pol)
	if wire.Validate(req) == nil && wire.Validate(res.Request) != nil {
		t.Fatalf("valid input rendered invalid: %v", wire.Validate(res.Request))
	}
	if !bytes.Equal(res.Body, Render(req, st, pol).Body) {
		t.Fatal("not deterministic")
	}
	if _, err := PlanFlush(req, st, kPolicy(0), t0); err != nil {
		t.Fatal(err)
	}
}

// checkReasoningKept: every reasoning item of the rendered request is followed by the same
// item that followed it in the original (reasoning is never separated from what it precedes).
func checkReasoningKept(tb testing.TB, req, out *wire.Request) {
	tb.Helper()
	next := map[string]string{}
	for _, m := range req.Messages {
		for i, b := range m.Blocks {
			if b.Kind == wire.KindReasoning && i+1 < len(m.Blocks) {
				next[string(b.Raw())] = string(m.Blocks[i+1].Raw())
			}
		}
	}
	for _, m := range out.Messages {
		for i, b := range m.Blocks {
			if b.Kind != wire.KindReasoning {
				continue
			}
			want, ok := next[string(b.Raw())]
			if !ok {
				continue // last of its message in the original too
			}
			if i+1 >= len(m.Blocks) {
				tb.Fatalf("reasoning item separated from its following item %s", want)
			}
			if got := string(m.Blocks[i+1].Raw()); got != want {
				// Only a purge rewrites the following item (a call's arguments): same call id.
				if m.Blocks[i+1].Kind != wire.KindToolUse || !strings.Contains(want, `"call_id":"`+m.Blocks[i+1].ID+`"`) {
					tb.Fatalf("reasoning item now followed by %s, was %s", got, want)
				}
			}
		}
	}
}

func mustParse(tb testing.TB, f wire.Format, body []byte) *wire.Request {
	r, err := wire.Parse(f, body)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

func countCC(r *wire.Request) int {
	n := 0
	for _, m := range r.Messages {
		for _, b := range m.Blocks {
			if b.CacheControl != nil {
				n++
			}
			for _, c := range b.Content {
				if c.CacheControl != nil {
					n++
				}
			}
		}
	}
	return n
}

// unreachableStubRef returns the ref of a summary stub whose summary text is not in the
// request: no other text names it (a per-batch summary's inline ref or footer) and no
// compressed chain lists it in its tools attribute. "" when every stub is reachable.
func unreachableStubRef(r *wire.Request) string {
	var stubs []string
	var other strings.Builder
	for _, m := range r.Messages {
		for _, b := range m.Blocks {
			if b.Kind != wire.KindToolResult {
				other.WriteString(b.Text() + "\n")
				continue
			}
			t := b.ResultText()
			if i := strings.Index(t, "[Summarized in pruner summary, ref `"); i >= 0 {
				rest := t[i+len("[Summarized in pruner summary, ref `"):]
				stubs = append(stubs, rest[:strings.IndexByte(rest, '`')])
			}
		}
	}
	all := other.String()
	tools := regexp.MustCompile(`<compressed-chain id="[^"]*" tools="([^"]*)">`)
	listed := map[string]bool{}
	for _, m := range tools.FindAllStringSubmatch(all, -1) {
		for _, ref := range strings.Split(m[1], ",") {
			listed[ref] = true
		}
	}
	for _, ref := range stubs {
		if !listed[ref] && !strings.Contains(all, "`"+ref+"`") {
			return ref
		}
	}
	return ""
}
