package pruner

import (
	"strings"
	"testing"

	"github.com/condense-dev/condense/internal/wire"
)

var formats = []wire.Format{wire.Anthropic, wire.OpenAI, wire.Responses}

func eachFormat(t *testing.T, fn func(t *testing.T, f wire.Format)) {
	for _, f := range formats {
		t.Run(f.String(), func(t *testing.T) { fn(t, f) })
	}
}

// chainPolicy keeps every closed chain raw (K large) so only stubs apply.
func stubPolicy() Policy {
	p := DefaultPolicy()
	p.Chain.RollingWindow = 100
	return p
}

func joined(r *wire.Request) string { return strings.Join(texts(r), "\n") }

// Reference catalogue: src/pruner.test.ts.
func TestConformancePruner(t *testing.T) {
	t.Run("stub-replaces a summarized result with its ref and the query tool", func(t *testing.T) {
		eachFormat(t, func(t *testing.T, f wire.Format) {
			x := newTx(f).user("go").turn("c1", "read", `{"path":"a.go"}`, big("A", 2000)).asst("", "done").user("next")
			req := x.req(t)
			st := flush(t, req, NewState(), stubPolicy())
			res := Render(req, st, stubPolicy())
			mustValid(t, req, res)
			got := joined(res.Request)
			if !strings.Contains(got, "R(c1):"+StubText("t1")) || !strings.Contains(got, "context_tree_query") {
				t.Fatalf("no stub:\n%s", got)
			}
		})
	})
	t.Run("nothing summarized or compressed renders unchanged", func(t *testing.T) {
		eachFormat(t, func(t *testing.T, f wire.Format) {
			req := newTx(f).user("go").turn("c1", "read", `{}`, "x").req(t)
			res := Render(req, NewState(), DefaultPolicy())
			if !res.Unchanged || &res.Body[0] != &req.Raw()[0] || res.BytesBefore != 0 || res.BytesAfter != 0 {
				t.Fatalf("not unchanged: %+v", res.Stats)
			}
		})
	})
	t.Run("chain compression after stub-replace drops the interior and inserts the synthetic", func(t *testing.T) {
		eachFormat(t, func(t *testing.T, f wire.Format) {
			x := newTx(f).user("task").turn("c1", "read", `{}`, big("A", 2000)).asst("", "done").user("next")
			req := x.req(t)
			pol := DefaultPolicy()
			pol.Chain.RollingWindow = 0
			st := flush(t, req, NewState(), pol)
			res := Render(req, st, pol)
			mustValid(t, req, res)
			got := texts(res.Request)
			if strings.Contains(strings.Join(got, "\n"), "C(c1)") {
				t.Fatalf("interior kept:\n%s", strings.Join(got, "\n"))
			}
			if !strings.Contains(got[0]+strings.Join(got, ""), `<compressed-chain id="b1" tools="t1">`) {
				t.Fatalf("no synthetic:\n%s", strings.Join(got, "\n"))
			}
			last := got[len(got)-2]
			if !strings.HasPrefix(last, "assistant|done") {
				t.Fatalf("final assistant not kept after synthetic: %q", last)
			}
		})
	})
	t.Run("range summary text preferred over per-batch concatenation", func(t *testing.T) {
		x := newTx(wire.Anthropic).user("task").turn("c1", "read", `{}`, big("A", 2000)).turn("c2", "read", `{"p":1}`, big("B", 2000)).asst("", "done").user("next")
		req := x.req(t)
		pol := DefaultPolicy()
		pol.Chain.RollingWindow = 0
		st := flush(t, req, NewState(), pol)
		if !strings.HasPrefix(st.Chains[0].RangeSummary, "Fused: ") {
			t.Fatalf("no fused summary: %q", st.Chains[0].RangeSummary)
		}
		got := joined(Render(req, st, pol).Request)
		if !strings.Contains(got, "Fused: ") {
			t.Fatal(got)
		}
	})
	t.Run("final assistant thinking stripped when configured and kept otherwise", func(t *testing.T) {
		x := newTx(wire.Anthropic).user("task").turn("c1", "read", `{}`, big("A", 2000)).asst("deep thought", "done").user("next")
		req := x.req(t)
		pol := DefaultPolicy()
		pol.Chain.RollingWindow = 0
		st := flush(t, req, NewState(), pol)
		res := Render(req, st, pol)
		mustValid(t, req, res)
		if strings.Contains(joined(res.Request), "T:deep thought") || res.Stats.ThinkingStripped != 1 {
			t.Fatal("thinking kept")
		}
		pol.Chain.StripFinalAssistantThinking = false
		res = Render(req, st, pol)
		if !strings.Contains(joined(res.Request), "T:deep thought") {
			t.Fatal("thinking stripped though disabled")
		}
	})
	t.Run("thinking kept on every other assistant", func(t *testing.T) {
		x := newTx(wire.Anthropic).user("go").asst("plan", "", tcall{"c1", "read", `{}`}).results(tres{id: "c1", text: big("A", 2000)}).asst("more", "done").user("next")
		req := x.req(t)
		st := flush(t, req, NewState(), stubPolicy())
		res := Render(req, st, stubPolicy())
		mustValid(t, req, res)
		got := joined(res.Request)
		if !strings.Contains(got, "T:plan") || !strings.Contains(got, "T:more") {
			t.Fatal(got)
		}
		// signatures kept byte-for-byte
		if !strings.Contains(string(res.Body), `"signature":"sig-1"`) {
			t.Fatal("signature lost")
		}
	})
	t.Run("spill stub contains tool, preview and byte count but no summary text", func(t *testing.T) {
		eachFormat(t, func(t *testing.T, f wire.Format) {
			body := "head line\n" + big("S", 70000)
			req := newTx(f).user("go").turn("c1", "bash", `{"cmd":"cat"}`, body).asst("", "ok").user("n").req(t)
			st := flush(t, req, NewState(), stubPolicy())
			res := Render(req, st, stubPolicy())
			mustValid(t, req, res)
			got := joined(res.Request)
			if !strings.Contains(got, "spilled out of context — 70010 bytes.]\nTool: bash\nPreview (head):\nhead line") || strings.Contains(got, "Summarized in pruner summary") {
				t.Fatalf("bad spill stub:\n%s", got[:min(len(got), 600)])
			}
			if res.Stats.SpillStubs != 1 {
				t.Fatal("spill stub not counted")
			}
		})
	})
	t.Run("spill stub tolerates a missing byte count", func(t *testing.T) {
		if !strings.Contains(SpillStubText("bash", "k", 0, ""), "— ? bytes") {
			t.Fatal("no ?")
		}
	})
	t.Run("chain compression disabled skips chains", func(t *testing.T) {
		x := newTx(wire.Anthropic).user("task").turn("c1", "read", `{}`, big("A", 2000)).asst("", "done").user("next")
		req := x.req(t)
		pol := DefaultPolicy()
		pol.Chain.Enabled = false
		pol.Chain.RollingWindow = 0
		st := flush(t, req, NewState(), pol)
		if len(st.Chains) != 0 {
			t.Fatal("chain compressed although disabled")
		}
	})
	t.Run("summarized record left verbatim once its path becomes protected", func(t *testing.T) {
		req := newTx(wire.Anthropic).user("go").turn("c1", "read", `{"path":"x/skills/a/SKILL.md"}`, big("A", 2000)).asst("", "ok").user("n").req(t)
		pol := stubPolicy()
		pol.ProtectedPaths = nil
		st := flush(t, req, NewState(), pol)
		if Render(req, st, pol).Stats.Stubbed != 1 {
			t.Fatal("no protection config should still stub")
		}
		pol.ProtectedPaths = DefaultPolicy().ProtectedPaths
		if res := Render(req, st, pol); res.Stats.Stubbed != 0 {
			t.Fatal("protected record stubbed")
		}
	})
	t.Run("stubs the summarized occurrence and leaves a live reuse of the id verbatim", func(t *testing.T) {
		eachFormat(t, func(t *testing.T, f wire.Format) {
			x := newTx(f).user("go").turn("bash_1", "bash", `{"cmd":"ls"}`, big("old", 2000)).asst("", "ok").user("again")
			st := flush(t, x.req(t), NewState(), stubPolicy())
			x.turn("bash_1", "bash", `{"cmd":"ls -la"}`, big("new", 2000))
			req := x.req(t)
			res := Render(req, st, stubPolicy())
			mustValid(t, req, res)
			got := joined(res.Request)
			if !strings.Contains(got, "R(bash_1):"+StubText("t1")) || !strings.Contains(got, "R(bash_1):new") {
				t.Fatalf("collision mishandled:\n%s", got)
			}
		})
	})
	t.Run("fail closed: a result with no occurrence record is never stubbed", func(t *testing.T) {
		x := newTx(wire.Anthropic).user("go").turn("c1", "bash", `{}`, big("A", 2000)).asst("", "ok").user("n")
		st := flush(t, x.req(t), NewState(), stubPolicy())
		// Same id, same tool, same input, different output: a different occurrence.
		y := newTx(wire.Anthropic).user("go").turn("c1", "bash", `{}`, big("Z", 2000)).asst("", "ok").user("n")
		if res := Render(y.req(t), st, stubPolicy()); res.Stats.Stubbed != 0 {
			t.Fatal("stubbed an unknown occurrence")
		}
	})
	t.Run("clean render of a non-empty state with nothing applicable is unchanged", func(t *testing.T) {
		x := newTx(wire.Anthropic).user("go").turn("c1", "bash", `{}`, big("A", 2000)).asst("", "ok").user("n")
		st := flush(t, x.req(t), NewState(), stubPolicy())
		other := newTx(wire.Anthropic).user("unrelated").asst("", "hi").user("n").req(t)
		res := Render(other, st, stubPolicy())
		if !res.Unchanged || res.BytesBefore != 0 {
			t.Fatal("changed")
		}
	})
	t.Run("pruning path reports bytes before greater than after", func(t *testing.T) {
		x := newTx(wire.OpenAI).user("go").turn("c1", "bash", `{}`, big("A", 5000)).asst("", "ok").user("n")
		req := x.req(t)
		st := flush(t, req, NewState(), stubPolicy())
		res := Render(req, st, stubPolicy())
		if res.BytesBefore != len(req.Raw()) || res.BytesAfter != len(res.Body) || res.BytesAfter >= res.BytesBefore {
			t.Fatalf("%d -> %d", res.BytesBefore, res.BytesAfter)
		}
	})
	t.Run("no orphan sweeps through the full pipeline", func(t *testing.T) {
		eachFormat(t, func(t *testing.T, f wire.Format) {
			x := newTx(f).user("a").turn("c1", "bash", `{}`, big("A", 2000)).turn("c1", "bash", `{"x":1}`, big("B", 2000)).asst("", "ok")
			x.user("b").turn("c2", "read", `{}`, big("C", 70000)).asst("", "ok")
			x.user("c").asst("", "", tcall{"e1", "bash", `{"cmd":"` + strings.Repeat("y", 600) + `"}`}).results(tres{id: "e1", text: "boom", isErr: true})
			x.asst("", "", tcall{"c3", "read", `{}`}).results(tres{id: "c3", text: big("D", 2000)}).asst("", "", tcall{"c4", "read", `{}`}).results(tres{id: "c4", text: "x"}).asst("", "done").user("d")
			req := x.req(t)
			pol := DefaultPolicy()
			pol.Chain.RollingWindow = 1
			st := flush(t, req, NewState(), pol)
			res := Render(req, st, pol)
			mustValid(t, req, res)
			if res.Stats.Swept != 0 || len(res.Diagnostics) != 0 {
				t.Fatalf("sweeps=%d diags=%v", res.Stats.Swept, res.Diagnostics)
			}
		})
	})
}

// Reference catalogue: src/error-purge.test.ts.
func TestConformanceErrorPurge(t *testing.T) {
	long := `{"cmd":"` + strings.Repeat("y", 600) + `"}`
	build := func(f wire.Format, errd bool, args string, after int) *wire.Request {
		x := newTx(f).user("go").asst("", "", tcall{"e1", "bash", args}).results(tres{id: "e1", text: "failed", isErr: errd})
		for i := 0; i < after; i++ {
			x.asst("", "", tcall{"k" + string(rune('a'+i)), "read", `{}`}).results(tres{id: "k" + string(rune('a'+i)), text: "ok"})
		}
		return x.req(t)
	}
	// The purge is decided at flush time: each case flushes its transcript over a non-empty
	// state (so Render runs its phases) and renders it.
	st := flush(t, newTx(wire.Anthropic).user("x").turn("z9", "read", `{}`, big("Q", 2000)).asst("", "ok").user("y").req(t), NewState(), stubPolicy())
	cases := []struct {
		name   string
		errd   bool
		args   string
		after  int
		purged bool
	}{
		{"no errored results renders unchanged", false, long, 3, false},
		{"within cooldown not purged", true, long, 0, false},
		{"age equal to cooldown minus one not purged", true, long, 1, false},
		{"age equal to cooldown purged", true, long, 2, true},
		{"after cooldown with large args purged", true, long, 4, true},
		{"args below minArgChars kept", true, `{"cmd":"ls"}`, 4, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// OpenAI tool messages carry no error flag, so only Anthropic and Responses (whose
			// output text says the command failed) can purge.
			eachFormat(t, func(t *testing.T, f wire.Format) {
				purged := c.purged && f != wire.OpenAI
				req := build(f, c.errd, c.args, c.after)
				before := string(req.Raw())
				res := Render(req, flush(t, req, st, stubPolicy()), stubPolicy())
				if (res.Stats.Purged == 1) != purged {
					t.Fatalf("purged=%d", res.Stats.Purged)
				}
				if purged {
					mustValid(t, req, res)
					marker := `{"_purged":"<purged-errored-args size=\"610\"/>"}`
					if f == wire.Responses {
						marker = `"arguments":"{\"_purged\":\"<purged-errored-args size=\\\"610\\\"/>\"}"`
					}
					if !strings.Contains(string(res.Body), marker) {
						t.Fatalf("no purge marker: %s", res.Body)
					}
					text := "failed"
					if f == wire.Responses {
						text = responsesFailure + text
					}
					if !strings.Contains(joined(res.Request), "R(e1):"+text) {
						t.Fatal("errored result text must stay")
					}
				}
				if string(req.Raw()) != before {
					t.Fatal("input mutated")
				}
			})
		})
	}
	t.Run("only the errored call of a multi-call assistant is purged", func(t *testing.T) {
		x := newTx(wire.Anthropic).user("go").asst("", "", tcall{"a", "bash", long}, tcall{"b", "bash", long}).
			results(tres{id: "a", text: "ok"}, tres{id: "b", text: "bad", isErr: true}).
			turn("k1", "read", `{}`, "1").turn("k2", "read", `{}`, "2")
		res := Render(x.req(t), flush(t, x.req(t), st, stubPolicy()), stubPolicy())
		if res.Stats.Purged != 1 {
			t.Fatal(res.Stats.Purged)
		}
		for _, m := range res.Request.Messages {
			for _, b := range m.Blocks {
				if b.Kind == wire.KindToolUse && b.ID == "a" && strings.Contains(string(b.Input), "_purged") {
					t.Fatal("wrong call purged")
				}
			}
		}
	})
	t.Run("a reused id does not purge an unrelated call", func(t *testing.T) {
		x := newTx(wire.Anthropic).user("go").asst("", "", tcall{"r1", "bash", long}).results(tres{id: "r1", text: "bad", isErr: true}).
			asst("", "", tcall{"r1", "bash", long}).results(tres{id: "r1", text: "fine"}).turn("k1", "read", `{}`, "1").turn("k2", "read", `{}`, "2")
		res := Render(x.req(t), flush(t, x.req(t), st, stubPolicy()), stubPolicy())
		if res.Stats.Purged != 1 {
			t.Fatalf("purged %d", res.Stats.Purged)
		}
		m := res.Request.Messages[3]
		if strings.Contains(string(m.Blocks[0].Input), "_purged") {
			t.Fatal("successful reuse purged")
		}
	})
	t.Run("an errored result that was summarized still gets its args purged", func(t *testing.T) {
		x := newTx(wire.Anthropic).user("go").asst("", "", tcall{"e1", "bash", long}).results(tres{id: "e1", text: big("E", 2000), isErr: true}).asst("", "done").user("more").turn("k1", "read", `{}`, "1").turn("k2", "read", `{}`, "2")
		req := x.req(t)
		st2 := flush(t, req, NewState(), stubPolicy())
		res := Render(req, st2, stubPolicy())
		if res.Stats.Stubbed < 1 || res.Stats.Purged != 1 {
			t.Fatalf("stubbed=%d purged=%d", res.Stats.Stubbed, res.Stats.Purged)
		}
	})
}
