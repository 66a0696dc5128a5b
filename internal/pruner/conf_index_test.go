package pruner

import (
	"strings"
	"testing"

	"github.com/condense-dev/condense/internal/wire"
)

// Reference catalogue: src/recovery-grace.test.ts and pruner.test.ts 13-19, 31-32.
func TestConformanceRecoveryGrace(t *testing.T) {
	// One recovery in user turn 1, then `after` more user turns, flushed with pol (the end of
	// grace is decided at flush time).
	build := func(after int, tool string, pol Policy) (*wire.Request, *State) {
		x := newTx(wire.OpenAI).user("u1").turn("q1", tool, `{"toolCallIds":["t9"]}`, big("RECOVERED", 2000)).asst("", "ok")
		for i := 0; i < after; i++ {
			x.user("more").asst("", "ok")
		}
		x.user("now")
		req := x.req(t)
		return req, flush(t, req, NewState(), pol)
	}
	for _, c := range []struct {
		name    string
		after   int
		grace   int
		tool    string
		stubbed bool
	}{
		{"recovery output in the current user turn is kept", 0, 3, QueryToolName, false},
		{"exactly K old is kept", 2, 3, QueryToolName, false},
		{"older than K is stubbed", 3, 3, QueryToolName, true},
		{"K=0 stubs at once", 0, 0, QueryToolName, true},
		{"grace applies only to context_tree_query results", 0, 3, "read", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			pol := stubPolicy()
			pol.RecoveryGraceTurns = c.grace
			req, st := build(c.after, c.tool, pol)
			res := Render(req, st, pol)
			if (res.Stats.Stubbed == 1) != c.stubbed {
				t.Fatalf("stubbed=%d", res.Stats.Stubbed)
			}
		})
	}
	t.Run("protection beats grace", func(t *testing.T) {
		pol := stubPolicy()
		pol.RecoveryGraceTurns = 0
		req, st := build(5, QueryToolName, pol)
		pol.ProtectedTools = []string{QueryToolName}
		if Render(req, st, pol).Stats.Stubbed != 0 {
			t.Fatal()
		}
	})
	t.Run("spilled recovery output verbatim within grace and spill-stubbed after", func(t *testing.T) {
		x := newTx(wire.OpenAI).user("u1").turn("q1", QueryToolName, `{}`, big("R", 70000)).asst("", "ok").user("n")
		req := x.req(t)
		st := flush(t, req, NewState(), stubPolicy())
		if Render(req, st, stubPolicy()).Stats.SpillStubs != 0 {
			t.Fatal("stubbed within grace")
		}
		pol := stubPolicy()
		pol.RecoveryGraceTurns = 0
		if Render(req, flush(t, req, st, pol), pol).Stats.SpillStubs != 1 {
			t.Fatal("not stubbed after grace")
		}
	})
	t.Run("a graced occurrence does not protect another occurrence of the same id", func(t *testing.T) {
		x := newTx(wire.OpenAI).user("u1").turn("q1", QueryToolName, `{"toolCallIds":["a"]}`, big("OLD", 2000)).asst("", "ok")
		for i := 0; i < 4; i++ {
			x.user("more").asst("", "ok")
		}
		x.user("u2").turn("q1", QueryToolName, `{"toolCallIds":["b"]}`, big("NEW", 2000)).asst("", "ok").user("now")
		req := x.req(t)
		st := flush(t, req, NewState(), stubPolicy())
		res := Render(req, st, stubPolicy())
		got := joined(res.Request)
		if res.Stats.Stubbed != 1 || !strings.Contains(got, "R(q1):NEW") || strings.Contains(got, "R(q1):OLD") {
			t.Fatal(got)
		}
	})
}

// Reference catalogue: src/orphan-sweep.test.ts. Anthropic cannot express a barrier
// between a call and its result (results live in the next user message), so barrier cases
// use OpenAI.
func TestConformanceOrphanSweep(t *testing.T) {
	nonEmpty := flush(t, newTx(wire.OpenAI).user("x").turn("z9", "read", `{}`, big("Q", 2000)).asst("", "ok").user("y").req(t), NewState(), stubPolicy())
	cases := []struct {
		name  string
		build func() *tx
		swept int
		kept  []string
	}{
		{"no orphan renders unchanged", func() *tx {
			return newTx(wire.OpenAI).user("a").turn("c1", "read", `{}`, "x")
		}, 0, nil},
		{"removes a result whose call was never opened", func() *tx {
			return newTx(wire.OpenAI).user("a").asst("", "", tcall{"c1", "read", `{}`}).results(tres{id: "c1", text: "x"}, tres{id: "ghost", text: "y"})
		}, 1, []string{"R(c1):x"}},
		{"a validly used id does not license a later orphan", func() *tx {
			return newTx(wire.OpenAI).user("a").turn("c1", "read", `{}`, "x").asst("", "", tcall{"c2", "read", `{}`}).results(tres{id: "c2", text: "y"}, tres{id: "c1", text: "late"})
		}, 1, []string{"R(c1):x", "R(c2):y"}},
		{"legitimate reuse of one id across turns is kept", func() *tx {
			return newTx(wire.OpenAI).user("a").turn("c1", "read", `{}`, "x").turn("c1", "read", `{}`, "y")
		}, 0, []string{"R(c1):x", "R(c1):y"}},
		{"duplicate result for one call is swept", func() *tx {
			return newTx(wire.OpenAI).user("a").asst("", "", tcall{"c1", "read", `{}`}).results(tres{id: "c1", text: "x"}, tres{id: "c1", text: "again"})
		}, 1, []string{"R(c1):x"}},
		{"all results of a multi-call turn kept", func() *tx {
			return newTx(wire.OpenAI).user("a").asst("", "", tcall{"c1", "read", `{}`}, tcall{"c2", "read", `{}`}).results(tres{id: "c1", text: "x"}, tres{id: "c2", text: "y"})
		}, 0, nil},
		{"a user message between call and result is a barrier", func() *tx {
			return newTx(wire.OpenAI).user("a").asst("", "", tcall{"c1", "read", `{}`}).user("interjection").results(tres{id: "c1", text: "x"})
		}, 1, nil},
		{"a system message between call and result is a barrier", func() *tx {
			return newTx(wire.OpenAI).user("a").asst("", "", tcall{"c1", "read", `{}`}).system("notice").results(tres{id: "c1", text: "x"})
		}, 1, nil},
		{"multi-call turn: a barrier sweeps only the not-yet-consumed result", func() *tx {
			return newTx(wire.OpenAI).user("a").asst("", "", tcall{"c1", "read", `{}`}, tcall{"c2", "read", `{}`}).results(tres{id: "c1", text: "x"}).system("notice").results(tres{id: "c2", text: "y"})
		}, 1, []string{"R(c1):x"}},
		{"trailing barrier after a completed cycle is a no-op", func() *tx {
			return newTx(wire.OpenAI).user("a").turn("c1", "read", `{}`, "x").system("notice")
		}, 0, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := c.build().req(t)
			res := Render(req, nonEmpty, stubPolicy())
			if res.Stats.Swept != c.swept {
				t.Fatalf("swept %d want %d", res.Stats.Swept, c.swept)
			}
			if c.swept == 0 && !res.Unchanged {
				t.Fatal("changed without sweep")
			}
			if c.swept > 0 {
				if len(res.Diagnostics) != 1 || res.Diagnostics[0].Kind != DiagOrphanSweep || len(res.Diagnostics[0].Key) != 16 {
					t.Fatalf("%+v", res.Diagnostics)
				}
			}
			got := joined(res.Request)
			for _, k := range c.kept {
				if !strings.Contains(got, k) {
					t.Fatalf("missing %q in\n%s", k, got)
				}
			}
		})
	}
	t.Run("Anthropic mixed message: text after results is a barrier only after them", func(t *testing.T) {
		x := newTx(wire.Anthropic).user("a").asst("", "", tcall{"c1", "read", `{}`})
		x.msgs = append(x.msgs, map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "tool_result", "tool_use_id": "c1", "content": "x"},
			map[string]any{"type": "text", "text": "<system-reminder>hi</system-reminder>"},
		}})
		req := x.req(t)
		if res := Render(req, nonEmpty, stubPolicy()); res.Stats.Swept != 0 {
			t.Fatal("swept a valid result")
		}
	})
	t.Run("twelve orphans: detail lists five and the rest as a count; reported once", func(t *testing.T) {
		x := newTx(wire.OpenAI).user("a").asst("", "", tcall{"c1", "read", `{}`}).results(tres{id: "c1", text: "x"})
		for i := 0; i < 12; i++ {
			x.results(tres{id: "g" + string(rune('a'+i)), text: "y"})
		}
		req := x.req(t)
		res := Render(req, nonEmpty, stubPolicy())
		d := res.Diagnostics[0]
		if !strings.HasPrefix(d.Detail, "swept 12 orphan toolResult(s): ga, gb, gc, gd, ge ... +7 more") {
			t.Fatal(d.Detail)
		}
		st2, fresh := nonEmpty.WithDiagnostics(res.Diagnostics)
		if len(fresh) != 1 || st2.Diagnostics.Counts[DiagOrphanSweep] != 1 {
			t.Fatal("not recorded")
		}
		if again := Render(req, st2, stubPolicy()); len(again.Diagnostics) != 0 {
			t.Fatal("diagnostic reported twice")
		}
	})
}

// Reference catalogue: src/diagnostics.test.ts.
func TestConformanceDiagnostics(t *testing.T) {
	st := NewState()
	d1 := Diagnostic{Kind: DiagUnresolvedRange, Key: "b1", Detail: "x"}
	t.Run("one entry per distinct kind and key; repeats deduped", func(t *testing.T) {
		s2, fresh := st.WithDiagnostics([]Diagnostic{d1, d1})
		if len(fresh) != 1 || s2.Diagnostics.Counts[DiagUnresolvedRange] != 1 {
			t.Fatal(fresh)
		}
		s3, fresh := s2.WithDiagnostics([]Diagnostic{d1})
		if len(fresh) != 0 || s3 != s2 {
			t.Fatal("repeat reported")
		}
	})
	t.Run("different key same kind and same key different kind both reported", func(t *testing.T) {
		_, fresh := st.WithDiagnostics([]Diagnostic{d1, {Kind: DiagUnresolvedRange, Key: "b2"}, {Kind: DiagRangeIDMismatch, Key: "b1"}, {Kind: DiagBackfillEmpty, Key: "b1"}})
		if len(fresh) != 4 {
			t.Fatal(len(fresh))
		}
	})
	t.Run("counters start at zero and the receiver is not modified", func(t *testing.T) {
		st.WithDiagnostics([]Diagnostic{d1})
		if st.Diagnostics.Counts[DiagUnresolvedRange] != 0 || len(st.Diagnostics.Seen) != 0 {
			t.Fatal("receiver modified")
		}
	})
}

// Reference catalogue: src/indexer.test.ts, src/id-collision.integration.test.ts,
// src/batch-capture.test.ts 5-8.
func TestConformanceIndexer(t *testing.T) {
	collide := func() *tx {
		return newTx(wire.OpenAI).user("a").turn("bash_23", "bash", `{"cmd":"a"}`, big("first", 2000)).asst("", "ok").
			user("b").turn("bash_23", "bash", `{"cmd":"b"}`, big("second", 2000)).asst("", "ok").user("c")
	}
	t.Run("two batches reusing one provider id keep both records", func(t *testing.T) {
		st := flush(t, collide().req(t), NewState(), stubPolicy())
		if len(st.KeysForID("bash_23")) != 2 || st.Record("t1").Key == st.Record("t2").Key {
			t.Fatal(st.KeysForID("bash_23"))
		}
	})
	t.Run("bare id with two occurrences is ambiguous; refs and keys resolve one each", func(t *testing.T) {
		st := flush(t, collide().req(t), NewState(), stubPolicy())
		if _, ok := st.Resolve("bash_23"); ok {
			t.Fatal("ambiguous bare id resolved")
		}
		k := st.KeysForID("bash_23")[0]
		if r, ok := st.Resolve(k); !ok || r != k {
			t.Fatal()
		}
		if st.IsSummarized("bash_23") {
			t.Fatal("isSummarized fell back to bare id")
		}
	})
	t.Run("single occurrence: bare id resolves but is not summarized", func(t *testing.T) {
		st := flush(t, newTx(wire.OpenAI).user("a").turn("c1", "bash", `{}`, big("x", 2000)).asst("", "ok").user("b").req(t), NewState(), stubPolicy())
		if st.IsSummarized("c1") || st.Record("c1") == nil {
			t.Fatal()
		}
	})
	t.Run("per-turn pairing: each assistant pairs with results of its own turn", func(t *testing.T) {
		req := collide().req(t)
		v := newAnalysis(req.Format, req.Messages)
		if v.calls[0].res.b.ResultText()[:5] != "first" || v.calls[1].res.b.ResultText()[:6] != "second" {
			t.Fatal("mis-paired")
		}
	})
	t.Run("capture skips a call whose result has not arrived yet", func(t *testing.T) {
		x := newTx(wire.OpenAI).user("a").asst("", "", tcall{"c1", "read", `{}`}, tcall{"c2", "read", `{}`}).results(tres{id: "c1", text: big("x", 2000)})
		p, _ := PlanFlush(x.req(t), NewState(), stubPolicy(), t0)
		if p.Captured != 1 || len(p.Batches) != 1 || len(p.Batches[0].Calls) != 1 {
			t.Fatal(p.Captured)
		}
	})
	t.Run("a live colliding batch is captured, not filtered as summarized", func(t *testing.T) {
		x := newTx(wire.OpenAI).user("a").turn("bash_23", "bash", `{"cmd":"a"}`, big("first", 2000)).asst("", "ok").user("b")
		st := flush(t, x.req(t), NewState(), stubPolicy())
		x.turn("bash_23", "bash", `{"cmd":"b"}`, big("LIVE 24", 2000)).asst("", "ok").user("c")
		p, _ := PlanFlush(x.req(t), st, stubPolicy(), t0)
		if p.Captured != 1 {
			t.Fatal(p.Captured)
		}
	})
	t.Run("content dedup does not alias across batches that merely share an id", func(t *testing.T) {
		st := flush(t, collide().req(t), NewState(), stubPolicy())
		if len(st.Aliases) != 0 {
			t.Fatal(st.Aliases)
		}
	})
	t.Run("dedup alias reuses the original's ref and query on either id returns the original body", func(t *testing.T) {
		x := newTx(wire.OpenAI).user("a").turn("c1", "read", `{"path":"f"}`, big("SAME", 2000)).asst("", "ok").user("b")
		bs := blobStore{}
		st := flushBlobs(t, x.req(t), NewState(), stubPolicy(), bs)
		x.turn("c2", "read", `{"path":"f"}`, big("SAME", 2000)).asst("", "ok").user("c")
		req := x.req(t)
		p, _ := PlanFlush(req, st, stubPolicy(), t0)
		if len(p.Batches) != 0 {
			t.Fatal("fully deduped batch went to the summarizer")
		}
		st, _ = p.Apply(nil)
		dup := st.KeysForID("c2")[0]
		if st.RefOf(dup) != "t1" || st.Frontier.Outcome != "skipped-deduped" {
			t.Fatalf("%q %+v", st.RefOf(dup), st.Frontier)
		}
		res := Render(req, st, stubPolicy())
		if strings.Count(joined(res.Request), StubText("t1")) != 2 {
			t.Fatal(joined(res.Request))
		}
		q := Query(st, "c2", bs.lookup)
		if !strings.Contains(q, "## toolRef: c2\n") || !strings.Contains(q, "SAME xxx") {
			t.Fatal(q)
		}
	})
	t.Run("two identical outputs in one flush both go to the summarizer", func(t *testing.T) {
		x := newTx(wire.OpenAI).user("a").turn("c1", "read", `{}`, big("SAME", 2000)).turn("c2", "read", `{}`, big("SAME", 2000)).asst("", "ok").user("b")
		p, _ := PlanFlush(x.req(t), NewState(), stubPolicy(), t0)
		if len(p.Batches) != 2 {
			t.Fatal(len(p.Batches))
		}
	})
	t.Run("dedup disabled summarizes duplicates", func(t *testing.T) {
		x := newTx(wire.OpenAI).user("a").turn("c1", "read", `{}`, big("SAME", 2000)).asst("", "ok").user("b")
		pol := stubPolicy()
		pol.Dedup = false
		st := flush(t, x.req(t), NewState(), pol)
		x.turn("c2", "read", `{}`, big("SAME", 2000)).asst("", "ok").user("c")
		p, _ := PlanFlush(x.req(t), st, pol, t0)
		if len(p.Batches) != 1 {
			t.Fatal()
		}
	})
	t.Run("restart round trip reproduces refs, aliases and render bytes", func(t *testing.T) {
		req := collide().req(t)
		st := flush(t, req, NewState(), kPolicy(1))
		b, err := st.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var st2 State
		if err := st2.UnmarshalBinary(b); err != nil {
			t.Fatal(err)
		}
		if string(Render(req, st, kPolicy(1)).Body) != string(Render(req, &st2, kPolicy(1)).Body) {
			t.Fatal("render differs after round trip")
		}
		if st2.Record("t2") == nil || st2.NextRef != st.NextRef {
			t.Fatal()
		}
	})
}

// Reference catalogue: src/query-tool.test.ts.
func TestConformanceQuery(t *testing.T) {
	x := newTx(wire.OpenAI).user("a").turn("bash_23", "bash", `{"cmd":"a"}`, big("first", 2000)).asst("", "ok").
		user("b").turn("bash_23", "bash", `{"cmd":"b"}`, big("second", 2000)).asst("", "ok").user("c")
	bs := blobStore{}
	st := flushBlobs(t, x.req(t), NewState(), stubPolicy(), bs)
	t.Run("bare id with two occurrences returns both blocks labelled by occurrence key", func(t *testing.T) {
		q := Query(st, "bash_23", bs.lookup)
		keys := st.KeysForID("bash_23")
		if strings.Count(q, "## toolRef: bash_23#") != 2 || !strings.Contains(q, "## toolRef: "+keys[0]+"\n") || !strings.Contains(q, "\n\n---\n\n") {
			t.Fatal(q)
		}
	})
	t.Run("occurrence key returns exactly one block", func(t *testing.T) {
		k := st.KeysForID("bash_23")[1]
		if q := Query(st, k, bs.lookup); strings.Count(q, "## toolRef:") != 1 {
			t.Fatal(q)
		}
	})
	t.Run("unknown id says so and names the valid range", func(t *testing.T) {
		q := Query(st, "t99", bs.lookup)
		if q != "## toolRef: t99\n(not found in index — may not have been summarized yet)\nValid refs: t1–t2 (some numbers may be unused)." {
			t.Fatal(q)
		}
	})
	t.Run("single match labelled with the caller's input", func(t *testing.T) {
		q := Query(st, "t1", bs.lookup)
		want := "## toolRef: t1\nTool: bash\nArgs: {\n  \"cmd\": \"a\"\n}\nStatus: OK\nTurn: 1\n\nfirst "
		if !strings.HasPrefix(q, want) {
			t.Fatalf("%q", q[:80])
		}
	})
	t.Run("colliding short refs each resolve to their own batch", func(t *testing.T) {
		if !strings.Contains(Query(st, "t2", bs.lookup), "second") || strings.Contains(Query(st, "t2", bs.lookup), "first ") {
			t.Fatal()
		}
	})
	t.Run("spilled record returns its full body", func(t *testing.T) {
		y := newTx(wire.OpenAI).user("a").turn("s1", "bash", `{}`, big("HUGE", 70000)).asst("", "ok").user("b")
		bs2 := blobStore{}
		st2 := flushBlobs(t, y.req(t), NewState(), stubPolicy(), bs2)
		// a single 70000-byte line exceeds the byte cap: its head is kept
		if q := Query(st2, "s1", bs2.lookup); !strings.Contains(q, "\n\nHUGE xxx") || !strings.Contains(q, "[Output truncated: first line cut at 51200 of 70000 bytes; 1 lines in total]") {
			t.Fatal(q[len(q)-100:])
		}
		z := newTx(wire.OpenAI).user("a").turn("s1", "bash", `{}`, strings.Repeat("line\n", 14000)).asst("", "ok").user("b")
		bs3 := blobStore{}
		st3 := flushBlobs(t, z.req(t), NewState(), stubPolicy(), bs3)
		q := Query(st3, "s1", bs3.lookup)
		if !strings.Contains(q, "[Output truncated: 2000/14001 lines shown]") {
			t.Fatal(q[len(q)-80:])
		}
	})
	t.Run("missing blob falls back to the preview or says so", func(t *testing.T) {
		q := Query(st, "t1", nil)
		if !strings.Contains(q, "(output unavailable — blob missing)") || !strings.Contains(q, `Args: {"cmd":"a"}`) {
			t.Fatal(q)
		}
	})
	t.Run("backfilled record renders Turn -1", func(t *testing.T) {
		y := newTx(wire.OpenAI).user("a").turn("c1", "bash", `{}`, "tiny").asst("", "ok").user("b")
		st2 := flush(t, y.req(t), NewState(), kPolicy(0))
		if !strings.Contains(Query(st2, "t1", nil), "Turn: -1") {
			t.Fatal()
		}
	})
	t.Run("query input and schema", func(t *testing.T) {
		ids, err := ParseQueryInput([]byte(`{"toolCallIds":["t1","x"]}`))
		if err != nil || len(ids) != 2 {
			t.Fatal(err)
		}
		if _, err := ParseQueryInput([]byte(`{`)); err == nil {
			t.Fatal("no error")
		}
		for _, f := range formats {
			if _, err := wire.NewTool(f, QueryToolSchema(f)); err != nil {
				t.Fatal(err)
			}
		}
		if !strings.Contains(QueryAll(st, []string{"t1", "t2"}, bs.lookup), "\n\n---\n\n## toolRef: t2") {
			t.Fatal()
		}
	})
}
