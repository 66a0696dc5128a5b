package pruner

import (
	"strings"
	"testing"

	"github.com/condense-dev/condense/internal/wire"
)

// chainTx builds n closed chains of two summarizable turns each, then an open prompt.
func chainTx(f wire.Format, n int) *tx {
	x := newTx(f)
	for i := 0; i < n; i++ {
		p := string(rune('a' + i))
		x.user("task " + p)
		x.turn("c"+p+"1", "read", `{"path":"`+p+`1"}`, big("R"+p+"1", 1500))
		x.turn("c"+p+"2", "bash", `{"cmd":"`+p+`2"}`, big("R"+p+"2", 1500))
		x.asst("", "done "+p)
	}
	return x.user("open task")
}

func kPolicy(k int) Policy {
	p := DefaultPolicy()
	p.Chain.RollingWindow = k
	return p
}

// Reference catalogue: src/chain-detector.test.ts.
func TestConformanceChainDetector(t *testing.T) {
	pol := DefaultPolicy()
	detect := func(x *tx) []*chainRange {
		r := x.req(t)
		return newAnalysis(r.Format, r.Messages).detectChains(&pol)
	}
	t.Run("empty transcript has no chains", func(t *testing.T) {
		if len(detect(newTx(wire.Anthropic))) != 0 {
			t.Fatal()
		}
	})
	t.Run("one complete chain yields one range", func(t *testing.T) {
		if got := detect(chainTx(wire.Anthropic, 1)); len(got) != 1 || got[0].end < 0 {
			t.Fatalf("%+v", got)
		}
	})
	t.Run("multiple chains in order", func(t *testing.T) {
		got := detect(chainTx(wire.Anthropic, 3))
		if len(got) != 3 || !(got[0].start < got[1].start && got[1].start < got[2].start) {
			t.Fatal(len(got))
		}
	})
	t.Run("open chain at the end not emitted", func(t *testing.T) {
		x := chainTx(wire.Anthropic, 1).turn("z", "read", `{}`, "q")
		if len(detect(x)) != 1 {
			t.Fatal()
		}
	})
	t.Run("synthetic chain message is not a chain start", func(t *testing.T) {
		x := newTx(wire.OpenAI).user("task").turn("c1", "read", `{}`, "x").user(`<compressed-chain id="b1" tools="">x</compressed-chain>`).turn("c2", "read", `{}`, "y").asst("", "done")
		got := detect(x)
		if len(got) != 1 || len(got[0].ids) != 2 {
			t.Fatalf("%+v", got)
		}
	})
	t.Run("user interrupting before a text-only close emits an interrupted chain", func(t *testing.T) {
		x := newTx(wire.Anthropic).user("a").turn("c1", "read", `{}`, "x").user("b").asst("", "done")
		got := detect(x)
		if len(got) != 2 || got[0].end != -1 || got[1].end < 0 {
			t.Fatalf("%+v", got)
		}
	})
	t.Run("middle ids collected from calls and results", func(t *testing.T) {
		got := detect(chainTx(wire.Anthropic, 1))
		if strings.Join(got[0].ids, ",") != "ca1,ca2" || len(got[0].keys) != 2 {
			t.Fatalf("%v %v", got[0].ids, got[0].keys)
		}
	})
	t.Run("protected ids by name and by path, not leaking across chains", func(t *testing.T) {
		pol.ProtectedTools = []string{"todowrite"}
		defer func() { pol.ProtectedTools = nil }()
		x := newTx(wire.Anthropic).user("a").turn("p1", "todowrite", `{}`, "t").turn("p2", "read", `{"path":"s/skills/x/a.md"}`, "s").turn("n1", "read", `{}`, "n").asst("", "ok")
		x.user("b").turn("n2", "read", `{}`, "n").asst("", "ok")
		got := detect(x)
		if strings.Join(got[0].protected, ",") != "p1,p2" || len(got[1].protected) != 0 {
			t.Fatalf("%v %v", got[0].protected, got[1].protected)
		}
	})
	t.Run("call without result contributes no occurrence key", func(t *testing.T) {
		x := newTx(wire.OpenAI).user("a").asst("", "", tcall{"c1", "read", `{}`}, tcall{"c2", "read", `{}`}).results(tres{id: "c1", text: "x"}).asst("", "ok")
		got := detect(x)
		if len(got[0].keys) != 1 {
			t.Fatal(got[0].keys)
		}
	})
	t.Run("two chains reusing one id get distinct occurrence keys", func(t *testing.T) {
		x := newTx(wire.Anthropic).user("a").turn("bash_1", "bash", `{}`, "one").asst("", "ok").user("b").turn("bash_1", "bash", `{}`, "two").asst("", "ok")
		got := detect(x)
		if got[0].keys[0] == got[1].keys[0] {
			t.Fatal("keys conflated")
		}
	})
}

// Reference catalogue: src/chain-compressor.test.ts (selection and compression).
func TestConformanceChainCompressor(t *testing.T) {
	count := func(st *State) int { return len(st.Chains) }
	for _, c := range []struct {
		name      string
		chains, k int
		want      int
	}{
		{"fewer than K closed chains compress none", 2, 3, 0},
		{"exactly K compress none", 3, 3, 0},
		{"K+1 compresses the oldest one", 4, 3, 1},
		{"K+3 compresses the three oldest", 6, 3, 3},
		{"K=0 compresses every closed chain", 3, 0, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := chainTx(wire.Anthropic, c.chains).req(t)
			st := flush(t, req, NewState(), kPolicy(c.k))
			if got := count(st); got != c.want {
				t.Fatalf("compressed %d, want %d", got, c.want)
			}
			for i, ch := range st.Chains {
				if ch.Block != "b"+string(rune('1'+i)) {
					t.Fatalf("block ids %s", ch.Block)
				}
			}
			if c.want > 0 {
				v := newAnalysis(req.Format, req.Messages)
				if st.Chains[0].Start != v.fingerprints(v.prompts)[0] {
					t.Fatal("oldest chain not first")
				}
			}
		})
	}
	t.Run("open chains never selected", func(t *testing.T) {
		x := newTx(wire.Anthropic).user("a").turn("c1", "read", `{}`, big("x", 2000))
		if count(flush(t, x.req(t), NewState(), kPolicy(0))) != 0 {
			t.Fatal()
		}
	})
	t.Run("already-compressed chains excluded and not counted in the window", func(t *testing.T) {
		x := chainTx(wire.Anthropic, 2)
		st := flush(t, x.req(t), NewState(), kPolicy(1))
		if count(st) != 1 {
			t.Fatal(count(st))
		}
		st2 := flush(t, x.req(t), st, kPolicy(1))
		if count(st2) != 1 {
			t.Fatal("recompressed or window shifted", count(st2))
		}
		y := newTx(wire.Anthropic)
		y.msgs = append(y.msgs, x.msgs[:len(x.msgs)-1]...)
		y.user("c").turn("cc1", "read", `{}`, big("z", 1500)).asst("", "done c").user("open")
		st3 := flush(t, y.req(t), st2, kPolicy(1))
		if count(st3) != 2 || st3.Chains[1].Block != "b2" {
			t.Fatal(count(st3))
		}
	})
	t.Run("empty-middle chains never selected", func(t *testing.T) {
		x := newTx(wire.Anthropic).user("a").asst("", "hi").user("b").asst("", "hi").user("c")
		if count(flush(t, x.req(t), NewState(), kPolicy(0))) != 0 {
			t.Fatal()
		}
	})
	t.Run("covered entry shape pinned without body source", func(t *testing.T) {
		st := flush(t, chainTx(wire.Anthropic, 1).req(t), NewState(), kPolicy(0))
		c := st.Chains[0]
		if c.BodySource != "" || strings.Join(c.ToolRefs, ",") != "t1,t2" || strings.Join(c.DroppedIDs, ",") != "ca1,ca2" || len(c.DroppedKeys) != 2 || !c.CompressedAt.Equal(t0) {
			t.Fatalf("%+v", c)
		}
	})
	t.Run("single summary is not fused", func(t *testing.T) {
		pol := kPolicy(0)
		pol.BatchingMode = BatchAgentMessage
		st := flush(t, chainTx(wire.Anthropic, 1).req(t), NewState(), pol)
		if len(st.Summaries) != 1 || st.Chains[0].RangeSummary != "" {
			t.Fatalf("%d %q", len(st.Summaries), st.Chains[0].RangeSummary)
		}
	})
	t.Run("fusion disabled leaves no range summary", func(t *testing.T) {
		pol := kPolicy(0)
		pol.Chain.FuseRangeSummary = false
		st := flush(t, chainTx(wire.Anthropic, 1).req(t), NewState(), pol)
		if st.Chains[0].RangeSummary != "" {
			t.Fatal()
		}
	})
	t.Run("missing fusion output still compresses without range summary", func(t *testing.T) {
		req := chainTx(wire.Anthropic, 1).req(t)
		st := flush(t, req, NewState(), kPolicy(100))
		p, _ := PlanFlush(req, st, kPolicy(0), t0)
		if len(p.Batches) != 1 || p.Batches[0].Kind != KindRangeFusion {
			t.Fatalf("%+v", p.Batches)
		}
		st2, err := p.Apply(nil)
		if err != nil || len(st2.Chains) != 1 || st2.Chains[0].RangeSummary != "" {
			t.Fatal(err)
		}
		if !strings.Contains(joined(Render(req, st2, kPolicy(0)).Request), "`t1` read returned") {
			t.Fatal("per-batch concatenation missing")
		}
	})
	t.Run("protected ids copied when present and omitted when empty", func(t *testing.T) {
		pol := kPolicy(0)
		pol.ProtectedTools = []string{"todowrite"}
		x := newTx(wire.Anthropic).user("a").turn("p1", "todowrite", `{}`, "todo list").turn("n1", "read", `{}`, big("n", 2000)).asst("", "ok").user("b").turn("n2", "read", `{}`, big("m", 2000)).asst("", "ok").user("c")
		st := flush(t, x.req(t), NewState(), pol)
		if strings.Join(st.Chains[0].ProtectedIDs, ",") != "p1" || st.Chains[1].ProtectedIDs != nil {
			t.Fatalf("%v %v", st.Chains[0].ProtectedIDs, st.Chains[1].ProtectedIDs)
		}
		b, _ := st.MarshalBinary()
		if strings.Count(string(b), `"protectedIds"`) != 1 {
			t.Fatal("empty protected ids serialized")
		}
	})
	t.Run("chain holding an in-grace recovery is deferred without shrinking the window", func(t *testing.T) {
		x := newTx(wire.Anthropic).user("a").turn("q1", QueryToolName, `{"toolCallIds":["t1"]}`, big("recovered", 2000)).asst("", "ok")
		x.user("b").turn("n1", "read", `{}`, big("n", 2000)).asst("", "ok")
		x.user("c").turn("n2", "read", `{}`, big("m", 2000)).asst("", "ok").user("d")
		st := flush(t, x.req(t), NewState(), kPolicy(1))
		if count(st) != 1 {
			t.Fatalf("compressed %d", count(st))
		}
		v := newAnalysis(wire.Anthropic, x.req(t).Messages)
		if st.Chains[0].Start != v.fingerprints(v.prompts)[1] {
			t.Fatal("wrong chain compressed")
		}
		pol := kPolicy(1)
		pol.RecoveryGraceTurns = 0
		if count(flush(t, x.req(t), NewState(), pol)) != 2 {
			t.Fatal("grace 0 should not defer")
		}
	})
	t.Run("uncovered chain compresses deterministically and never fuses", func(t *testing.T) {
		// Results below MinBatchChars are skipped as trivial: no per-batch summary exists.
		x := newTx(wire.Anthropic).user("a").turn("c1", "bash", `{"cmd":"ls"}`, "one").turn("c2", "read", `{"path":"f"}`, "two").asst("", "ok").user("b")
		req := x.req(t)
		bs := blobStore{}
		st := flushBlobs(t, req, NewState(), kPolicy(0), bs)
		if len(st.Summaries) != 0 || count(st) != 1 {
			t.Fatalf("summaries=%d chains=%d", len(st.Summaries), count(st))
		}
		c := st.Chains[0]
		if c.BodySource != "deterministic" || !strings.HasPrefix(c.RangeSummary, "Deterministic chain compression") || !strings.Contains(c.RangeSummary, "Refs: t1, t2") {
			t.Fatalf("%+v", c)
		}
		r := st.Record("t1")
		if r == nil || !r.Backfilled || r.Turn != -1 {
			t.Fatalf("%+v", r)
		}
		if _, ok := st.Hashes[r.Hash]; ok {
			t.Fatal("backfilled record seeded dedup")
		}
		if q := Query(st, "t2", bs.lookup); !strings.Contains(q, "\n\ntwo") || !strings.Contains(q, "Turn: -1") {
			t.Fatalf("raw output not recoverable: %s", q)
		}
	})
	t.Run("fully protected uncovered chain is a plain skip without diagnostic", func(t *testing.T) {
		pol := kPolicy(0)
		pol.ProtectedTools = []string{"todowrite"}
		x := newTx(wire.Anthropic).user("a").turn("p1", "todowrite", `{}`, "x").asst("", "ok").user("b")
		p, _ := PlanFlush(x.req(t), NewState(), pol, t0)
		if len(p.Diagnostics) != 0 || len(p.chains) != 0 {
			t.Fatal(p.Diagnostics)
		}
	})
	t.Run("span without any result reports backfill-empty keyed by the chain start", func(t *testing.T) {
		x := newTx(wire.OpenAI).user("a").asst("", "", tcall{"c1", "read", `{}`}).user("interjection").asst("", "ok")
		x2 := newTx(wire.OpenAI).user("a").asst("", "", tcall{"c1", "read", `{}`}).asst("", "ok").user("b")
		_ = x
		p, _ := PlanFlush(x2.req(t), NewState(), kPolicy(0), t0)
		if len(p.Diagnostics) != 1 || p.Diagnostics[0].Kind != DiagBackfillEmpty || p.Diagnostics[0].Detail != "middles=1" {
			t.Fatalf("%+v", p.Diagnostics)
		}
		st, _ := p.Apply(nil)
		if st.Diagnostics.Counts[DiagBackfillEmpty] != 1 {
			t.Fatal("not counted")
		}
	})
	t.Run("retry converges from already indexed members", func(t *testing.T) {
		x := newTx(wire.Anthropic).user("a").turn("c1", "bash", `{}`, "one").asst("", "ok").user("b")
		req := x.req(t)
		st := flush(t, req, NewState(), kPolicy(0))
		// Simulate a lost chain entry: records exist, chain does not.
		st2 := st.clone()
		st2.Chains = nil
		st2.rebuild()
		p, _ := PlanFlush(req, st2, kPolicy(0), t0)
		if len(p.chains) != 1 || len(p.chains[0].backfill) != 0 {
			t.Fatal("should compose from index without backfill")
		}
		st3, _ := p.Apply(nil)
		if len(st3.Records) != len(st.Records) || !strings.Contains(st3.Chains[0].RangeSummary, "Refs: t1") {
			t.Fatal(st3.Chains[0].RangeSummary)
		}
	})
	t.Run("protected member of an uncovered chain excluded from backfill and relocated verbatim", func(t *testing.T) {
		pol := kPolicy(0)
		pol.ProtectedTools = []string{"todowrite"}
		x := newTx(wire.Anthropic).user("a").turn("p1", "todowrite", `{}`, "KEEP ME").turn("c1", "bash", `{}`, "small").asst("", "ok").user("b")
		req := x.req(t)
		st := flush(t, req, NewState(), pol)
		if st.Record("p1") != nil || st.Record("c1") == nil {
			t.Fatal("protected backfilled")
		}
		res := Render(req, st, pol)
		mustValid(t, req, res)
		got := joined(res.Request)
		if !strings.Contains(got, "<protected-output tool=\"todowrite\">\nKEEP ME\n</protected-output>") || strings.Contains(got, "R(c1)") {
			t.Fatal(got)
		}
	})
	t.Run("mixed flush compresses covered and uncovered chains in one call", func(t *testing.T) {
		x := newTx(wire.OpenAI).user("a").turn("c1", "read", `{}`, big("A", 2000)).asst("", "ok")
		x.user("b").turn("c2", "read", `{}`, "tiny").asst("", "ok").user("c")
		req := x.req(t)
		st := flush(t, req, NewState(), kPolicy(0))
		if count(st) != 2 || st.Chains[0].BodySource != "" || st.Chains[1].BodySource != "deterministic" {
			t.Fatalf("%d", count(st))
		}
		res := Render(req, st, kPolicy(0))
		mustValid(t, req, res)
		if res.Stats.Swept != 0 || res.Stats.Chains != 2 {
			t.Fatal(res.Stats)
		}
	})
	t.Run("fully deduped chain is backfilled via index membership and aliases still resolve", func(t *testing.T) {
		x := newTx(wire.Anthropic).user("a").turn("c1", "read", `{"path":"f"}`, big("SAME", 2000)).asst("", "ok").user("b")
		st := flush(t, x.req(t), NewState(), kPolicy(100))
		x.turn("c2", "read", `{"path":"f"}`, big("SAME", 2000)).asst("", "ok").user("c")
		req := x.req(t)
		st = flush(t, req, st, kPolicy(100))
		if st.Stats.Deduped != 1 {
			t.Fatal("not deduped")
		}
		st = flush(t, req, st, kPolicy(0))
		if count(st) != 2 || st.Chains[1].BodySource != "deterministic" {
			t.Fatalf("chains %d", count(st))
		}
		if st.Record("t1") == nil || st.Record(st.Chains[1].ToolRefs[0]) == nil {
			t.Fatal("refs do not resolve")
		}
	})
}

// Reference catalogue: src/chain-range-prune.test.ts.
func TestConformanceChainRangePrune(t *testing.T) {
	t.Run("synthetic is user role with id tools and summary; multiple refs comma-joined", func(t *testing.T) {
		eachFormat(t, func(t *testing.T, f wire.Format) {
			req := chainTx(f, 1).req(t)
			st := flush(t, req, NewState(), kPolicy(0))
			res := Render(req, st, kPolicy(0))
			mustValid(t, req, res)
			var syn string
			for _, m := range res.Request.Messages {
				for _, b := range m.Blocks {
					if strings.HasPrefix(b.Text(), "<compressed-chain") {
						if m.Role != wire.RoleUser {
							t.Fatal("synthetic not user role")
						}
						syn = b.Text()
					}
				}
			}
			if !strings.HasPrefix(syn, `<compressed-chain id="b1" tools="t1,t2">`+"\n") || !strings.HasSuffix(syn, "\n</compressed-chain>") {
				t.Fatalf("%q", syn)
			}
		})
	})
	t.Run("drops in-range results and tool-using assistants; survivors keep order", func(t *testing.T) {
		eachFormat(t, func(t *testing.T, f wire.Format) {
			req := chainTx(f, 2).req(t)
			st := flush(t, req, NewState(), kPolicy(1))
			res := Render(req, st, kPolicy(1))
			mustValid(t, req, res)
			got := texts(res.Request)
			want := []string{"user|task a", "done a", "user|task b", "C(cb1)", "C(cb2)", "done b", "open task"}
			j := 0
			all := strings.Join(got, "\n")
			for _, w := range want {
				k := strings.Index(all[j:], w)
				if k < 0 {
					t.Fatalf("missing %q after %d:\n%s", w, j, all)
				}
				j += k
			}
			if strings.Contains(all, "C(ca1)") || strings.Contains(all, "R(ca2)") {
				t.Fatal("interior kept")
			}
		})
	})
	t.Run("per-batch summary overlapping the dropped set is suppressed, others kept", func(t *testing.T) {
		eachFormat(t, func(t *testing.T, f wire.Format) {
			req := chainTx(f, 2).req(t)
			st := flush(t, req, NewState(), kPolicy(1))
			res := Render(req, st, kPolicy(1))
			if res.Stats.Suppressed != 2 || res.Stats.Summaries != 2 {
				t.Fatalf("%+v", res.Stats)
			}
		})
	})
	t.Run("a live turn's summary survives when it reuses a compressed chain's id", func(t *testing.T) {
		x := newTx(wire.Anthropic).user("a").turn("bash_23", "bash", `{"cmd":"a"}`, big("first", 2000)).asst("", "ok")
		x.user("b").turn("bash_23", "bash", `{"cmd":"b"}`, big("LIVE 23", 2000)).asst("", "ok").user("c")
		req := x.req(t)
		st := flush(t, req, NewState(), kPolicy(1))
		res := Render(req, st, kPolicy(1))
		mustValid(t, req, res)
		got := joined(res.Request)
		if res.Stats.Summaries != 1 || !strings.Contains(got, "`t2` bash returned") || !strings.Contains(got, "R(bash_23):"+StubText("t2")) {
			t.Fatalf("%+v\n%s", res.Stats, got)
		}
	})
	t.Run("unresolved entry drops nothing and reports unresolved-range", func(t *testing.T) {
		req := chainTx(wire.Anthropic, 1).req(t)
		st := flush(t, req, NewState(), kPolicy(0))
		st.Chains[0] = &Chain{Block: "b1", Start: Fingerprint{Hash: "nope"}, Final: st.Chains[0].Final, DroppedIDs: st.Chains[0].DroppedIDs}
		res := Render(req, st, kPolicy(0))
		if res.Stats.Chains != 0 || len(res.Diagnostics) != 1 || res.Diagnostics[0].Kind != DiagUnresolvedRange || res.Diagnostics[0].Key != "b1" {
			t.Fatalf("%+v", res.Diagnostics)
		}
	})
	t.Run("start fingerprint matching two prompts fails closed", func(t *testing.T) {
		m := fpIndex{}
		v := newAnalysis(wire.Anthropic, newTx(wire.Anthropic).user("same").user("same").req(t).Messages)
		fps := v.fingerprints(v.prompts)
		for i, fp := range fps {
			if _, ok := m[fp]; ok {
				m[fp] = -1
			} else {
				m[fp] = i
			}
		}
		dup := fpIndex{fps[0]: -1}
		if dup.resolve(fps[0]) != -1 {
			t.Fatal()
		}
	})
	t.Run("end before start fails closed", func(t *testing.T) {
		x := chainTx(wire.Anthropic, 2)
		req := x.req(t)
		st := flush(t, req, NewState(), kPolicy(0))
		st.Chains[0].Final = st.Chains[1].Final
		st.Chains[1].Final = st.Chains[0].Final
		bad := *st.Chains[1]
		bad.Start = st.Chains[1].Start
		v := newAnalysis(req.Format, req.Messages)
		var finals []int
		for _, ai := range v.assistants {
			if !v.toolUsing(ai) {
				finals = append(finals, ai)
			}
		}
		bad.Final = v.fingerprints(finals)[0]
		st.Chains = []*Chain{&bad}
		res := Render(req, st, kPolicy(0))
		if res.Stats.Chains != 0 || len(res.Diagnostics) != 1 {
			t.Fatalf("%+v", res.Diagnostics)
		}
	})
	t.Run("range with a different id set reports range-id-mismatch and still applies", func(t *testing.T) {
		req := chainTx(wire.Anthropic, 1).req(t)
		st := flush(t, req, NewState(), kPolicy(0))
		st.Chains[0].DroppedIDs = []string{"ca1"}
		res := Render(req, st, kPolicy(0))
		if res.Stats.Chains != 1 || len(res.Diagnostics) != 1 || res.Diagnostics[0].Kind != DiagRangeIDMismatch || res.Diagnostics[0].Detail != "blockId=b1 recorded=1 actual=2" {
			t.Fatalf("%+v", res.Diagnostics)
		}
	})
	t.Run("nested and duplicate starts skipped with overlap keys", func(t *testing.T) {
		req := chainTx(wire.Anthropic, 1).req(t)
		st := flush(t, req, NewState(), kPolicy(0))
		dup := *st.Chains[0]
		dup.Block = "b2"
		st.Chains = append(st.Chains, &dup)
		res := Render(req, st, kPolicy(0))
		if res.Stats.Chains != 1 || len(res.Diagnostics) != 1 || res.Diagnostics[0].Key != "overlap:b2" || !strings.Contains(res.Diagnostics[0].Detail, "duplicates startIndex") {
			t.Fatalf("%+v", res.Diagnostics)
		}
		mustValid(t, req, res)
	})
	t.Run("system message inside a range survives", func(t *testing.T) {
		x := newTx(wire.OpenAI).user("a").turn("c1", "read", `{}`, big("A", 2000)).system("note from harness").turn("c2", "read", `{"x":1}`, big("B", 2000)).asst("", "ok").user("b")
		req := x.req(t)
		st := flush(t, req, NewState(), kPolicy(0))
		res := Render(req, st, kPolicy(0))
		mustValid(t, req, res)
		if !strings.Contains(joined(res.Request), "system|note from harness") {
			t.Fatal("system message dropped")
		}
	})
	t.Run("agent-message summary after the range is still suppressed", func(t *testing.T) {
		pol := kPolicy(0)
		pol.BatchingMode = BatchAgentMessage
		req := chainTx(wire.Anthropic, 1).req(t)
		st := flush(t, req, NewState(), pol)
		res := Render(req, st, pol)
		if res.Stats.Suppressed != 1 || res.Stats.Summaries != 0 {
			t.Fatalf("%+v", res.Stats)
		}
	})
	t.Run("placeholders in a body are substituted from other chains", func(t *testing.T) {
		req := chainTx(wire.Anthropic, 2).req(t)
		st := flush(t, req, NewState(), kPolicy(0))
		st.Chains[1].RangeSummary = "continues {b1}"
		st.Chains[0].RangeSummary = "FIRST BODY"
		got := joined(Render(req, st, kPolicy(0)).Request)
		if !strings.Contains(got, "continues FIRST BODY") {
			t.Fatal(got)
		}
	})
	t.Run("multiple protected outputs relocated in message order", func(t *testing.T) {
		pol := kPolicy(0)
		pol.ProtectedTools = []string{"todowrite"}
		x := newTx(wire.Anthropic).user("a").turn("p1", "todowrite", `{}`, "ONE").turn("c1", "read", `{}`, big("A", 2000)).turn("p2", "todowrite", `{"v":2}`, "TWO").asst("", "ok").user("b")
		req := x.req(t)
		st := flush(t, req, NewState(), pol)
		got := joined(Render(req, st, pol).Request)
		i, j := strings.Index(got, ">\nONE\n<"), strings.Index(got, ">\nTWO\n<")
		if i < 0 || j < i {
			t.Fatal(got)
		}
	})
	t.Run("protected id whose result is absent is skipped and the rest compresses", func(t *testing.T) {
		req := chainTx(wire.Anthropic, 1).req(t)
		st := flush(t, req, NewState(), kPolicy(0))
		st.Chains[0].ProtectedIDs = []string{"ghost"}
		res := Render(req, st, kPolicy(0))
		if res.Stats.Chains != 1 || strings.Contains(joined(res.Request), "protected-output") {
			t.Fatal()
		}
	})
	t.Run("without protected ids the synthetic has no protected block", func(t *testing.T) {
		req := chainTx(wire.Anthropic, 1).req(t)
		st := flush(t, req, NewState(), kPolicy(0))
		if strings.Contains(joined(Render(req, st, kPolicy(0)).Request), "<protected-output") {
			t.Fatal()
		}
	})
	t.Run("cache marker on a dropped block moves to the synthetic", func(t *testing.T) {
		x := chainTx(wire.Anthropic, 1)
		// put a cache_control marker on the first tool result
		res0 := x.msgs[2]["content"].([]any)[0].(map[string]any)
		res0["cache_control"] = map[string]any{"type": "ephemeral"}
		req := x.req(t)
		st := flush(t, req, NewState(), kPolicy(0))
		res := Render(req, st, kPolicy(0))
		mustValid(t, req, res)
		if strings.Count(string(res.Body), `"cache_control"`) != 1 || res.Stats.CacheMarkersMoved != 1 {
			t.Fatalf("marker lost or duplicated: %s", res.Body)
		}
		for _, b := range res.Request.Messages[0].Blocks {
			if strings.HasPrefix(b.Text(), "<compressed-chain") && b.CacheControl == nil {
				t.Fatal("marker not on synthetic")
			}
		}
	})
}

// Reference catalogue: src/chain-range-prune.test.ts 51-52 (nested range).
func TestConformanceNestedRange(t *testing.T) {
	req := chainTx(wire.Anthropic, 2).req(t)
	st := flush(t, req, NewState(), kPolicy(0))
	if len(st.Chains) != 2 {
		t.Fatal(len(st.Chains))
	}
	outer := *st.Chains[0]
	outer.Final = st.Chains[1].Final // spans both chains: chain b's start lies inside it
	st.Chains = []*Chain{&outer, st.Chains[1]}
	res := Render(req, st, kPolicy(0))
	mustValid(t, req, res)
	// b1 now also spans chain b: its recorded ids differ from the range (informational) and
	// the summaries of everything it drops are suppressed.
	if res.Stats.Chains != 1 || len(res.Diagnostics) != 2 || res.Diagnostics[0].Key != "overlap:b2" ||
		res.Diagnostics[0].Detail != "blockId=b2 skipped: range nests inside blockId=b1" ||
		res.Diagnostics[1].Kind != DiagRangeIDMismatch || res.Stats.Summaries != 0 {
		t.Fatalf("%+v %+v", res.Stats, res.Diagnostics)
	}
	if strings.Contains(joined(res.Request), `id="b2"`) {
		t.Fatal("nested synthetic inserted")
	}
}

// A summary whose host message is dropped by a chain range moves to the chain's prompt. New
// states anchor a summary on its own batch's turn, which a range dropping the host would
// drop too (the summary is then suppressed); states written before that anchored it on the
// last assistant of the flush's transcript, which can lie inside a later chain's range.
func TestSummaryHostInsideDroppedRange(t *testing.T) {
	// Chain a is flushed mid-chain b (budget-like flush), then chain b is compressed while
	// chain a stays: with the older anchoring, a's summary is anchored inside b's range.
	x := newTx(wire.Anthropic).user("task a").turn("a1", "read", `{}`, big("A", 2000)).asst("", "done a")
	x.user("task b").turn("b1", "read", `{"p":1}`, big("B", 2000))
	mid := x.req(t)
	x.turn("b2", "read", `{"p":2}`, big("C", 2000)).asst("", "done b").user("task c")
	req := x.req(t)
	pol := stubPolicy()
	st := flush(t, mid, NewState(), pol) // summarizes a1 and b1
	if got := texts(Render(req, st, pol).Request)[2]; !strings.Contains(got, "`t1` read returned") {
		t.Fatalf("a new state shows a1's summary right after its result: %s", got)
	}
	v := newAnalysis(mid.Format, mid.Messages)
	st = st.clone()
	for i, s := range st.Summaries { // the older anchoring: b1's assistant, mid's last
		c := *s
		c.Anchor = v.fingerprints(v.assistants)[len(v.assistants)-1]
		st.Summaries[i] = &c
	}
	st = flush(t, req, st, pol) // summarizes b2
	// Compress only chain b by hand: reuse the planner on chain b alone.
	p, _ := PlanFlush(req, st, kPolicy(0), t0)
	st2, _ := p.Apply(map[string]string{})
	var keep []*Chain
	for _, c := range st2.Chains {
		if strings.Contains(strings.Join(c.DroppedIDs, ","), "b1") {
			keep = append(keep, c)
		}
	}
	st2.Chains = keep
	if len(keep) != 1 {
		t.Fatal("chain b not compressed")
	}
	res := Render(req, st2, kPolicy(0))
	mustValid(t, req, res)
	got := joined(res.Request)
	if !strings.Contains(got, "`t1` read returned") {
		t.Fatalf("summary of chain a lost:\n%s", got)
	}
	// It sits in chain b's opening prompt, after the synthetic.
	b := texts(res.Request)[4]
	if !strings.HasPrefix(b, "user|task b|<compressed-chain") || !strings.Contains(b, "`t1` read returned") {
		t.Fatalf("misplaced: %s", b)
	}
}

// Protected outputs are matched by occurrence key: a reused id does not relocate an
// unprotected result of the same chain.
func TestProtectedRelocationByOccurrence(t *testing.T) {
	pol := kPolicy(0)
	pol.ProtectedTools = []string{"todowrite"}
	x := newTx(wire.OpenAI).user("a").turn("call_0", "todowrite", `{}`, "PLAN ITEMS").turn("call_0", "read", `{"p":1}`, big("FILE BODY", 2000)).asst("", "ok").user("b")
	req := x.req(t)
	st := flush(t, req, NewState(), pol)
	if len(st.Chains) != 1 || len(st.Chains[0].ProtectedKeys) != 1 {
		t.Fatalf("%+v", st.Chains)
	}
	got := joined(Render(req, st, pol).Request)
	if !strings.Contains(got, "<protected-output tool=\"todowrite\">\nPLAN ITEMS\n") || strings.Contains(got, "FILE BODY") {
		t.Fatal(got)
	}
	for _, r := range st.Records {
		if r.Tool == "read" && r.Summary == "" {
			t.Fatal("summarized record without summary id")
		}
	}
}
