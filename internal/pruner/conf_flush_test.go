package pruner

import (
	"errors"
	"strings"
	"testing"

	"github.com/condense-dev/condense/internal/wire"
)

// Flush planning: reference §5, §7, §9 and src/spill.test.ts, src/frontier.test.ts.
func TestConformanceFlushPlanning(t *testing.T) {
	three := func() *tx {
		return newTx(wire.OpenAI).user("a").turn("c1", "read", `{}`, big("A", 1500)).turn("c2", "read", `{"x":2}`, big("B", 1500)).turn("c3", "read", `{"x":3}`, big("C", 1500)).asst("", "ok").user("b")
	}
	t.Run("turn batching makes one batch per tool-using turn", func(t *testing.T) {
		p, _ := PlanFlush(three().req(t), NewState(), stubPolicy(), t0)
		if len(p.Batches) != 3 {
			t.Fatal(len(p.Batches))
		}
	})
	t.Run("agent-message batching merges turns of one user turn", func(t *testing.T) {
		pol := stubPolicy()
		pol.BatchingMode = BatchAgentMessage
		x := three()
		x.turn("c4", "read", `{"x":4}`, big("D", 1500)).asst("", "ok").user("c")
		p, _ := PlanFlush(x.req(t), NewState(), pol, t0)
		if len(p.Batches) != 2 || len(p.Batches[0].Calls) != 3 || p.Batches[0].Calls[2].Label != 3 {
			t.Fatalf("%d", len(p.Batches))
		}
	})
	t.Run("unknown batching mode behaves as turn", func(t *testing.T) {
		pol := stubPolicy()
		pol.BatchingMode = "weird"
		p, _ := PlanFlush(three().req(t), NewState(), pol, t0)
		if len(p.Batches) != 3 {
			t.Fatal()
		}
	})
	t.Run("refs allocated in batch order and labels decorated", func(t *testing.T) {
		st := flush(t, three().req(t), NewState(), stubPolicy())
		for i, s := range st.Summaries {
			ref := "t" + string(rune('1'+i))
			if s.Refs[0] != ref || !strings.HasPrefix(s.Text, "- `"+ref+"` read returned") || !strings.HasSuffix(s.Text, "retrieve the original full outputs.") {
				t.Fatalf("%+v", s)
			}
		}
		if st.NextRef != 4 || st.Stats.BatchesSummarized != 3 || st.Frontier.Outcome != "summarized" {
			t.Fatalf("%+v", st.Stats)
		}
	})
	t.Run("a missing output stops processing; later batches wait for the next flush", func(t *testing.T) {
		req := three().req(t)
		p, _ := PlanFlush(req, NewState(), stubPolicy(), t0)
		st, err := p.Apply(map[string]string{p.Batches[0].ID: testSummarizer(p.Batches[0]), p.Batches[2].ID: testSummarizer(p.Batches[2])})
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Summaries) != 1 || st.NextRef != 2 {
			t.Fatalf("summaries=%d", len(st.Summaries))
		}
		p2, _ := PlanFlush(req, st, stubPolicy(), t0)
		if len(p2.Batches) != 2 {
			t.Fatalf("retry batches %d", len(p2.Batches))
		}
	})
	t.Run("a blank output is unusable", func(t *testing.T) {
		p, _ := PlanFlush(three().req(t), NewState(), stubPolicy(), t0)
		st, _ := p.Apply(map[string]string{p.Batches[0].ID: "  \n"})
		if len(st.Summaries) != 0 || st.Frontier != nil {
			t.Fatal()
		}
	})
	t.Run("output for an unknown batch is a typed error", func(t *testing.T) {
		p, _ := PlanFlush(three().req(t), NewState(), stubPolicy(), t0)
		_, err := p.Apply(map[string]string{"nope": "x"})
		var ub *UnknownBatchError
		if !errors.As(err, &ub) || ub.ID != "nope" {
			t.Fatal(err)
		}
	})
	t.Run("trivial batch skipped without a summarizer call and never reconsidered", func(t *testing.T) {
		x := newTx(wire.OpenAI).user("a").turn("c1", "read", `{}`, "short").asst("", "ok").user("b")
		pol := stubPolicy()
		p, _ := PlanFlush(x.req(t), NewState(), pol, t0)
		if len(p.Batches) != 0 {
			t.Fatal("trivial batch sent")
		}
		st, _ := p.Apply(nil)
		if st.Stats.SkippedTrivial != 1 || st.Frontier.Outcome != "skipped-trivial" || !st.Skipped[st.Frontier.LastKey] {
			t.Fatalf("%+v", st.Frontier)
		}
		p2, _ := PlanFlush(x.req(t), st, pol, t0)
		if p2.Captured != 0 {
			t.Fatal("reconsidered")
		}
		if Render(x.req(t), st, pol).Stats.Stubbed != 0 {
			t.Fatal("trivial result stubbed")
		}
	})
	t.Run("minBatchChars 0 disables the trivial skip", func(t *testing.T) {
		x := newTx(wire.OpenAI).user("a").turn("c1", "read", `{}`, "short").asst("", "ok").user("b")
		pol := stubPolicy()
		pol.MinBatchChars = 0
		p, _ := PlanFlush(x.req(t), NewState(), pol, t0)
		if len(p.Batches) != 1 {
			t.Fatal()
		}
	})
	t.Run("oversized summary skipped, refs burned, frontier advanced", func(t *testing.T) {
		x := newTx(wire.OpenAI).user("a").turn("c1", "read", `{}`, big("A", 1200)).turn("c2", "read", `{"b":1}`, big("B", 1200)).asst("", "ok").user("b")
		req := x.req(t)
		p, _ := PlanFlush(req, NewState(), stubPolicy(), t0)
		st, _ := p.Apply(map[string]string{p.Batches[0].ID: strings.Repeat("long ", 400), p.Batches[1].ID: testSummarizer(p.Batches[1])})
		if st.Stats.SkippedOversized != 1 || len(st.Summaries) != 1 || st.Summaries[0].Refs[0] != "t2" {
			t.Fatalf("%+v %v", st.Stats, st.Summaries)
		}
		if p2, _ := PlanFlush(req, st, stubPolicy(), t0); p2.Captured != 0 {
			t.Fatal("oversized range reconsidered")
		}
	})
	t.Run("protected calls never enter a batch", func(t *testing.T) {
		pol := stubPolicy()
		pol.ProtectedTools = []string{"read"}
		p, _ := PlanFlush(three().req(t), NewState(), pol, t0)
		if p.Captured != 0 {
			t.Fatal()
		}
	})
	t.Run("oversized result spilled: indexed at once without ref, preview kept, blobs planned", func(t *testing.T) {
		body := "first line\nsecond\n" + strings.Repeat("z", 70000)
		x := newTx(wire.OpenAI).user("a").turn("s1", "bash", `{"cmd":"cat"}`, body).asst("", "ok").user("b")
		p, _ := PlanFlush(x.req(t), NewState(), stubPolicy(), t0)
		if p.Spilled != 1 || len(p.Batches) != 0 || len(p.Blobs) != 2 {
			t.Fatalf("%d %d %d", p.Spilled, len(p.Batches), len(p.Blobs))
		}
		st, _ := p.Apply(nil)
		r := st.Record("s1")
		if r == nil || !r.Spilled || r.Ref != "" || r.Preview != "first line\nsecond" || r.Bytes != len(body) {
			t.Fatalf("%+v", r)
		}
		if len(st.Hashes) != 1 {
			t.Fatal("spill did not seed dedup")
		}
	})
	t.Run("small result is not spilled", func(t *testing.T) {
		p, _ := PlanFlush(three().req(t), NewState(), stubPolicy(), t0)
		if p.Spilled != 0 {
			t.Fatal()
		}
	})
	t.Run("oversized duplicate aliased to the original without a second blob", func(t *testing.T) {
		body := strings.Repeat("q", 70000)
		x := newTx(wire.OpenAI).user("a").turn("s1", "bash", `{}`, body).asst("", "ok").user("b")
		st := flush(t, x.req(t), NewState(), stubPolicy())
		x.turn("s2", "bash", `{}`, body).asst("", "ok").user("c")
		p, _ := PlanFlush(x.req(t), st, stubPolicy(), t0)
		if p.Spilled != 0 || len(p.Blobs) != 0 {
			t.Fatal("duplicate spilled again")
		}
		st, _ = p.Apply(nil)
		if st.Aliases[st.KeysForID("s2")[0]] != st.KeysForID("s1")[0] {
			t.Fatal(st.Aliases)
		}
	})
	t.Run("two occurrences of one id spill to distinct blobs", func(t *testing.T) {
		x := newTx(wire.OpenAI).user("a").turn("s1", "bash", `{}`, strings.Repeat("q", 70000)).turn("s1", "bash", `{}`, strings.Repeat("r", 70000)).asst("", "ok").user("b")
		p, _ := PlanFlush(x.req(t), NewState(), stubPolicy(), t0)
		if p.Spilled != 2 || p.Blobs[0].Key == p.Blobs[2].Key {
			t.Fatal()
		}
	})
	t.Run("frontier trims calls at or before it in the same turn", func(t *testing.T) {
		x := newTx(wire.OpenAI).user("a").asst("", "", tcall{"c1", "read", `{}`}, tcall{"c2", "read", `{"b":1}`}).
			results(tres{id: "c1", text: big("A", 1500)}, tres{id: "c2", text: big("B", 1500)}).asst("", "ok").user("b")
		req := x.req(t)
		v := newAnalysis(req.Format, req.Messages)
		key1 := v.calls[0].res.occKey()
		st := NewState()
		st.Frontier = &Frontier{Assistant: v.fingerprints(v.assistants)[0], LastKey: key1}
		p, _ := PlanFlush(req, st, stubPolicy(), t0)
		if p.Captured != 2 || len(p.Batches) != 1 || len(p.Batches[0].Calls) != 1 || p.Batches[0].Calls[0].Key == key1 {
			t.Fatalf("%+v", p.Batches)
		}
		st.Frontier.LastKey = "unknown#00000000"
		if p, _ := PlanFlush(req, st, stubPolicy(), t0); len(p.Batches[0].Calls) != 2 {
			t.Fatal("frontier id not in turn should keep all")
		}
	})
	t.Run("frontier drops turns before it and fails open when unresolvable", func(t *testing.T) {
		req := three().req(t)
		v := newAnalysis(req.Format, req.Messages)
		st := NewState()
		st.Frontier = &Frontier{Assistant: v.fingerprints(v.assistants)[1], LastKey: v.calls[1].res.occKey()}
		if p, _ := PlanFlush(req, st, stubPolicy(), t0); len(p.Batches) != 1 {
			t.Fatal(len(p.Batches))
		}
		// A turn that does not hold the frontier's last call took its fingerprint over.
		st.Frontier.LastKey = "none"
		if p, _ := PlanFlush(req, st, stubPolicy(), t0); len(p.Batches) != 3 {
			t.Fatal("frontier whose turn lacks its call must not drop")
		}
		st.Frontier.Assistant = Fingerprint{Hash: "gone"}
		if p, _ := PlanFlush(req, st, stubPolicy(), t0); len(p.Batches) != 3 {
			t.Fatal("unresolvable frontier must not drop")
		}
	})
	t.Run("frontier records the last processed call and totals", func(t *testing.T) {
		st := flush(t, three().req(t), NewState(), stubPolicy())
		f := st.Frontier
		if f.Batches != 3 || f.Calls != 3 || f.RawChars != 4500 || f.LastTool != "read" || !strings.HasPrefix(f.LastKey, "c3#") || f.Turn != 3 {
			t.Fatalf("%+v", f)
		}
	})
	t.Run("nil request is a typed error", func(t *testing.T) {
		if _, err := PlanFlush(nil, nil, stubPolicy(), t0); !errors.Is(err, ErrNilRequest) {
			t.Fatal(err)
		}
	})
	t.Run("plan never modifies the state", func(t *testing.T) {
		st := flush(t, three().req(t), NewState(), stubPolicy())
		before, _ := st.MarshalBinary()
		x := three()
		x.turn("c9", "read", `{}`, big("Z", 2000)).asst("", "ok").user("z")
		p, _ := PlanFlush(x.req(t), st, kPolicy(0), t0)
		p.Apply(map[string]string{})
		after, _ := st.MarshalBinary()
		if string(before) != string(after) {
			t.Fatal("state mutated")
		}
	})
}

// Summary placement (docs/engine.md).
func TestSummaryPlacement(t *testing.T) {
	t.Run("anthropic summary follows the tool results in the next user message", func(t *testing.T) {
		// Flush mid-turn: the transcript ends with tool results.
		x := newTx(wire.Anthropic).user("a").turn("c1", "read", `{}`, big("A", 2000))
		st := flush(t, x.req(t), NewState(), stubPolicy())
		x.asst("", "done").user("b")
		req := x.req(t)
		res := Render(req, st, stubPolicy())
		mustValid(t, req, res)
		m := res.Request.Messages[2]
		if len(m.Blocks) != 2 || m.Blocks[0].Kind != wire.KindToolResult || !strings.HasPrefix(m.Blocks[1].Text(), "- `t1`") {
			t.Fatal(joined(res.Request))
		}
	})
	t.Run("a flush after the reply still anchors the summary on its batch's turn", func(t *testing.T) {
		eachFormat(t, func(t *testing.T, f wire.Format) {
			x := newTx(f).user("a").turn("c1", "read", `{}`, big("A", 2000)).asst("", "done").user("b")
			req := x.req(t)
			st := flush(t, req, NewState(), stubPolicy())
			res := Render(req, st, stubPolicy())
			mustValid(t, req, res)
			want := []string{"user|a", "assistant|C(c1)", "user|R(c1):" + StubText("t1"), "assistant|done", "user|b"}
			if f == wire.Anthropic {
				want[2] += "|- `t1`"
			} else {
				want[2] = "tool|R(c1):" + StubText("t1")
				want = append(want[:3], append([]string{"user|- `t1`"}, want[3:]...)...)
			}
			got := texts(res.Request)
			for i, w := range want {
				if i >= len(got) || !strings.HasPrefix(got[i], w) {
					t.Fatalf("message %d: want prefix %q\n%s", i, w, strings.Join(got, "\n"))
				}
			}
		})
	})
	t.Run("anthropic summary of an older state precedes the user's text in the next prompt", func(t *testing.T) {
		// States written before summaries were anchored on their own batch anchored them on
		// the last assistant of the flush's transcript.
		x := newTx(wire.Anthropic).user("a").turn("c1", "read", `{}`, big("A", 2000)).asst("", "done").user("b")
		req := x.req(t)
		st := flush(t, req, NewState(), stubPolicy())
		v := newAnalysis(req.Format, req.Messages)
		old := *st.Summaries[0]
		old.Anchor = v.fingerprints(v.assistants)[1]
		st.Summaries[0] = &old
		res := Render(req, st, stubPolicy())
		m := res.Request.Messages[4]
		if len(m.Blocks) != 2 || !strings.HasPrefix(m.Blocks[0].Text(), "- `t1`") || m.Blocks[1].Text() != "b" {
			t.Fatal(joined(res.Request))
		}
	})
	t.Run("openai summary is a user message after the anchor's tool messages", func(t *testing.T) {
		x := newTx(wire.OpenAI).user("a").asst("", "", tcall{"c1", "read", `{}`}, tcall{"c2", "read", `{"b":1}`}).results(tres{id: "c1", text: big("A", 2000)}, tres{id: "c2", text: big("B", 2000)})
		st := flush(t, x.req(t), NewState(), stubPolicy())
		req := x.req(t)
		res := Render(req, st, stubPolicy())
		mustValid(t, req, res)
		got := texts(res.Request)
		if len(got) != 5 || !strings.HasPrefix(got[4], "user|- `t1`") {
			t.Fatal(strings.Join(got, "\n"))
		}
		x.asst("", "done").user("b")
		req = x.req(t)
		res2 := Render(req, st, stubPolicy())
		got2 := texts(res2.Request)
		if !strings.HasPrefix(got2[4], "user|- `t1`") || got2[5] != "assistant|done" {
			t.Fatal(strings.Join(got2, "\n"))
		}
		// The placement is prefix-stable: the first render is a prefix of the second.
		if !strings.HasPrefix(strings.Join(got2, "\n"), strings.Join(got, "\n")) {
			t.Fatal("placement moved")
		}
	})
	t.Run("anthropic prefill: the summary is shown with its stubbed result", func(t *testing.T) {
		// Before, the summary was anchored on the prefill and waited for a user message after
		// it while the stub was already shown (TestStubNeedsItsSummary).
		x := newTx(wire.Anthropic).user("a").turn("c1", "read", `{}`, big("A", 2000)).asst("", "prefill")
		req := x.req(t)
		st := flush(t, req, NewState(), stubPolicy())
		res := Render(req, st, stubPolicy())
		mustValid(t, req, res)
		if res.Stats.Summaries != 1 || res.Stats.Stubbed != 1 || !strings.Contains(texts(res.Request)[2], "|- `t1`") {
			t.Fatalf("%+v\n%s", res.Stats, joined(res.Request))
		}
	})
	t.Run("cache marker inside replaced result content moves onto the result block", func(t *testing.T) {
		x := newTx(wire.Anthropic).user("a").asst("", "", tcall{"c1", "read", `{}`})
		x.msgs = append(x.msgs, map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "c1",
			"content": []any{map[string]any{"type": "text", "text": big("A", 2000), "cache_control": map[string]any{"type": "ephemeral"}}}}}})
		x.asst("", "ok").user("b")
		req := x.req(t)
		st := flush(t, req, NewState(), stubPolicy())
		res := Render(req, st, stubPolicy())
		mustValid(t, req, res)
		if strings.Count(string(res.Body), "cache_control") != 1 || res.Request.Messages[2].Blocks[0].CacheControl == nil {
			t.Fatal(string(res.Body))
		}
	})
}

// State encoding: docs/state.md.
func TestStateEncoding(t *testing.T) {
	t.Run("empty input yields an empty state", func(t *testing.T) {
		var s State
		if err := s.UnmarshalBinary(nil); err != nil || !s.Empty() || s.NextRef != 1 {
			t.Fatal(err)
		}
	})
	t.Run("malformed and unknown versions are typed errors", func(t *testing.T) {
		var s State
		var se *StateError
		if err := s.UnmarshalBinary([]byte("{")); !errors.As(err, &se) {
			t.Fatal(err)
		}
		if err := s.UnmarshalBinary([]byte(`{"version":99}`)); !errors.As(err, &se) || !strings.Contains(err.Error(), "version 99") {
			t.Fatal(err)
		}
		if err := s.UnmarshalBinary([]byte(`{"version":1,"records":{"k":null}}`)); !errors.As(err, &se) {
			t.Fatal(err)
		}
	})
	t.Run("round trip is byte-stable", func(t *testing.T) {
		st := flush(t, chainTx(wire.OpenAI, 3).req(t), NewState(), kPolicy(1))
		a, _ := st.MarshalBinary()
		var s2 State
		if err := s2.UnmarshalBinary(a); err != nil {
			t.Fatal(err)
		}
		b, _ := s2.MarshalBinary()
		if string(a) != string(b) {
			t.Fatal("not stable")
		}
	})
}
