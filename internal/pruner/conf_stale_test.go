package pruner

import (
	"strings"
	"testing"

	"github.com/condense-dev/condense/internal/wire"
)

// TestStaleChainEntry: after a client compaction or rewind, a chain entry's fingerprints can
// resolve to new messages (ordinals count only the messages still present). The range applies
// only when the span holds at least one of the chain's recorded occurrences (DroppedKeys), not
// a bare provider id: OpenAI providers restart ids per response (call_0), so an id match says
// nothing. The state holds b1 compressed from [P:"continue", A:call_0 ls, T, F:"Done."].
func TestStaleChainEntry(t *testing.T) {
	recorded := func(f wire.Format) *tx {
		return newTx(f).user("continue").turn("call_0", "bash", `{"cmd":"ls"}`, "a.go b.go").asst("", "Done.").user("next")
	}
	log := big("FAIL make test", 20000)
	cases := []struct {
		name    string
		tx      func(f wire.Format) *tx
		noKeys  bool // strip the entry's DroppedKeys (a state written before they existed)
		applied int
		diag    string // the unresolved-range detail must contain it ("" = no diagnostic)
		keep    string // a text the render must still hold
	}{
		{
			name: "the recorded transcript applies the range",
			tx:   recorded, applied: 1,
		},
		{
			name: "a compaction followed by a repeated prompt, reused id and repeated reply fails closed",
			tx: func(f wire.Format) *tx {
				return compacted(f).asst("", "ok").user("continue").turn("call_0", "bash", `{"cmd":"make test"}`, log).asst("", "Done.").user("next")
			},
			diag: "holding none of its 1 tool call(s)",
			keep: "R(call_0):" + log,
		},
		{
			name:   "an entry without occurrence keys falls back to ids",
			tx:     recorded,
			noKeys: true, applied: 1,
		},
	}
	eachFormat(t, func(t *testing.T, f wire.Format) {
		pol := kPolicy(0)
		pol.MinBatchChars = 0
		st := flush(t, recorded(f).req(t), NewState(), pol)
		if len(st.Chains) != 1 || len(st.Chains[0].DroppedKeys) != 1 {
			t.Fatalf("setup: %+v", st.Chains)
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				s := st
				if tc.noKeys {
					s = st.clone()
					c := *s.Chains[0]
					c.DroppedKeys = nil
					s.Chains[0] = &c
				}
				req := tc.tx(f).req(t)
				res := Render(req, s, pol)
				mustValid(t, req, res)
				if res.Stats.Chains != tc.applied {
					t.Fatalf("applied %d, want %d:\n%s", res.Stats.Chains, tc.applied, joined(res.Request))
				}
				if tc.diag == "" && len(res.Diagnostics) != 0 {
					t.Fatalf("unexpected %+v", res.Diagnostics)
				}
				if tc.diag != "" && (len(res.Diagnostics) != 1 || res.Diagnostics[0].Kind != DiagUnresolvedRange ||
					!strings.Contains(res.Diagnostics[0].Detail, tc.diag)) {
					t.Fatalf("diagnostics %+v, want unresolved-range %q", res.Diagnostics, tc.diag)
				}
				if tc.keep != "" && !strings.Contains(joined(res.Request), tc.keep) {
					t.Fatalf("live result dropped:\n%s", joined(res.Request))
				}
			})
		}
	})
}

// TestCoveredChainBackfill: a covered chain (one of its batches was summarized) drops every
// tool result of its range, so a member that no record covers — its batch was skipped as
// trivial or oversized — is backfilled as on the uncovered path: a record with a tN, its
// result and arguments kept as blobs (context_tree_query returns it), its ref listed in the
// synthetic's tools attribute.
func TestCoveredChainBackfill(t *testing.T) {
	small := big("On branch main, nothing to commit", 300)
	cases := []struct {
		name     string
		minBatch int
		member   string // the result text of the unindexed member c2
		skipped  string // the Stats counter the member's batch bumped
	}{
		{"a trivial batch's result is backfilled", 1000, small, "trivial"},
		{"an oversized batch's result is backfilled", 0, "M a.go", "oversized"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			eachFormat(t, func(t *testing.T, f wire.Format) {
				pol := kPolicy(0)
				pol.MinBatchChars = tc.minBatch
				x := newTx(f).user("task").turn("c1", "read", `{"path":"a.go"}`, big("A", 2000)).
					turn("c2", "bash", `{"cmd":"git status"}`, tc.member).asst("", "done").user("next")
				req := x.req(t)
				bs := blobStore{}
				st := flushBlobs(t, req, NewState(), pol, bs)
				if tc.skipped == "trivial" && st.Stats.SkippedTrivial != 1 || tc.skipped == "oversized" && st.Stats.SkippedOversized != 1 {
					t.Fatalf("setup: %+v", st.Stats)
				}
				if len(st.Chains) != 1 || st.Chains[0].BodySource != "" {
					t.Fatalf("setup: not a covered chain: %+v", st.Chains)
				}
				rec := st.Record("c2")
				if rec == nil || !rec.Backfilled || rec.Ref == "" {
					t.Fatalf("member not backfilled: %+v", rec)
				}
				if got := strings.Join(st.Chains[0].ToolRefs, ","); got != "t1,"+rec.Ref {
					t.Fatalf("tools=%s, want t1,%s", got, rec.Ref)
				}
				res := Render(req, st, pol)
				mustValid(t, req, res)
				got := joined(res.Request)
				if res.Stats.Chains != 1 || strings.Contains(got, tc.member) || !strings.Contains(got, `tools="t1,`+rec.Ref+`"`) {
					t.Fatalf("%+v\n%s", res.Stats, got)
				}
				for _, q := range []string{"c2", rec.Ref} {
					if out := Query(st, q, bs.lookup); !strings.Contains(out, tc.member) {
						t.Fatalf("query %s: %s", q, out)
					}
				}
			})
		})
	}
}

// TestStubNeedsItsSummary: a summary stub ("[Summarized in pruner summary, ref `tN`…]") is
// shown only when the text it points to is in the request — its per-batch summary, or the
// compressed chain that lists tN. A summary is anchored on its own batch's last assistant turn
// (which exists whenever its stubbed results do); a summary whose anchor does not place it (an
// older state anchored on the flush's last reply, since regenerated, or an Anthropic prefill)
// is shown right after the turn of its first stubbed result. A backfilled record has no
// summary of its own: outside an applied chain its result stays verbatim.
func TestStubNeedsItsSummary(t *testing.T) {
	flushed := func(f wire.Format) *tx {
		return newTx(f).user("go").turn("c1", "read", `{"path":"a.go"}`, big("A", 5000)).asst("", "done")
	}
	cases := []struct {
		name     string
		flush    func(f wire.Format) *tx // the transcript the flush is planned on
		pol      Policy
		oldState bool // anchor the summaries on the flush transcript's last assistant (as states written before this change)
		render   func(f wire.Format) *tx
		stubbed  int
		keep     string // a text the render must still hold
	}{
		{
			name: "the flush's last reply is regenerated", flush: flushed, pol: stubPolicy(),
			render: func(f wire.Format) *tx {
				return newTx(f).user("go").turn("c1", "read", `{"path":"a.go"}`, big("A", 5000)).asst("", "done, regenerated").user("next")
			},
			stubbed: 1,
		},
		{
			name: "an older state anchored on the regenerated reply", flush: flushed, pol: stubPolicy(), oldState: true,
			render: func(f wire.Format) *tx {
				return newTx(f).user("go").turn("c1", "read", `{"path":"a.go"}`, big("A", 5000)).asst("", "done, regenerated").user("next")
			},
			stubbed: 1,
		},
		{
			name: "an older state rendered on a request that ends with its anchor (prefill)", flush: flushed, pol: stubPolicy(), oldState: true,
			render:  flushed,
			stubbed: 1,
		},
		{
			name: "a backfilled result outside its (unresolved) chain stays verbatim",
			flush: func(f wire.Format) *tx {
				return newTx(f).user("task").turn("c1", "bash", `{"cmd":"ls"}`, "a.go b.go").asst("", "ok").user("next")
			},
			pol: kPolicy(0),
			render: func(f wire.Format) *tx {
				return compacted(f).turn("c1", "bash", `{"cmd":"ls"}`, "a.go b.go").asst("", "ok").user("next")
			},
			keep: "R(c1):a.go b.go",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			eachFormat(t, func(t *testing.T, f wire.Format) {
				freq := tc.flush(f).req(t)
				st := flush(t, freq, NewState(), tc.pol)
				if len(st.Records) == 0 {
					t.Fatal("setup: nothing indexed")
				}
				if tc.oldState {
					v := newAnalysis(freq.Format, freq.Messages)
					last := v.fingerprints(v.assistants)[len(v.assistants)-1]
					st = st.clone()
					for i, s := range st.Summaries {
						c := *s
						c.Anchor = last
						st.Summaries[i] = &c
					}
				}
				req := tc.render(f).req(t)
				res := Render(req, st, tc.pol)
				mustValid(t, req, res)
				got := joined(res.Request)
				if res.Stats.Stubbed != tc.stubbed {
					t.Fatalf("stubbed %d, want %d:\n%s", res.Stats.Stubbed, tc.stubbed, got)
				}
				if ref := unreachableStubRef(res.Request); ref != "" {
					t.Fatalf("stub %s shown without its summary:\n%s", ref, got)
				}
				if tc.keep != "" && !strings.Contains(got, tc.keep) {
					t.Fatalf("%q not kept:\n%s", tc.keep, got)
				}
			})
		})
	}
}

// TestFingerprintTakeover: ordinals count only the messages still in the request, so after a
// compaction or rewind a repeated message takes over a stored fingerprint. Planning and
// rendering check what a fingerprint resolves to before trusting it.
func TestFingerprintTakeover(t *testing.T) {
	log := big("FAIL make test", 3000)
	t.Run("a repeated prompt and reply do not mark a new chain as compressed", func(t *testing.T) {
		eachFormat(t, func(t *testing.T, f wire.Format) {
			pol := kPolicy(0)
			pol.MinBatchChars = 0
			old := newTx(f).user("continue").turn("call_0", "bash", `{"cmd":"ls"}`, "a.go b.go").asst("", "Done.").user("next")
			st := flush(t, old.req(t), NewState(), pol)
			if len(st.Chains) != 1 {
				t.Fatalf("setup: %d chains", len(st.Chains))
			}
			req := compacted(f).asst("", "ok").user("continue").turn("call_0", "bash", `{"cmd":"make test"}`, log).asst("", "Done.").user("next").req(t)
			st = flush(t, req, st, pol)
			if len(st.Chains) != 2 {
				t.Fatalf("the new chain was taken for b1: %d chains", len(st.Chains))
			}
			res := Render(req, st, pol)
			mustValid(t, req, res)
			if res.Stats.Chains != 1 || strings.Contains(joined(res.Request), log) || !strings.Contains(joined(res.Request), `id="b2"`) {
				t.Fatalf("%+v\n%s", res.Stats, joined(res.Request))
			}
		})
	})
	t.Run("a frontier taken over by a repeated turn is not trusted", func(t *testing.T) {
		eachFormat(t, func(t *testing.T, f wire.Format) {
			pol := stubPolicy()
			old := newTx(f).user("go").turn("call_0", "read", `{"path":"a.go"}`, big("A", 2000)).asst("", "ok").user("next")
			st := flush(t, old.req(t), NewState(), pol)
			if st.Frontier == nil {
				t.Fatal("setup: no frontier")
			}
			// After a compaction, a new turn, then a turn identical to the frontier's (same id
			// and input, another result): the frontier resolves to the second one.
			req := compacted(f).turn("call_5", "read", `{"path":"b.go"}`, big("B", 2000)).
				turn("call_0", "read", `{"path":"a.go"}`, big("A2", 2000)).asst("", "ok").user("next").req(t)
			st = flush(t, req, st, pol)
			if r := st.Record("call_5"); r == nil || r.Summary == "" {
				t.Fatalf("the turn before the taken-over frontier was not captured: %+v", r)
			}
		})
	})
	t.Run("an anchor taken over by an earlier repeated reply does not place the summary before its stub", func(t *testing.T) {
		eachFormat(t, func(t *testing.T, f wire.Format) {
			pol := stubPolicy()
			st := doneAnchored(t, f, pol)
			req := compacted(f).asst("", "Done.").user("go").turn("c1", "read", `{"path":"a.go"}`, big("A", 2000)).asst("", "Done.").user("next").req(t)
			res := Render(req, st, pol)
			mustValid(t, req, res)
			got := joined(res.Request)
			stub, sum := strings.Index(got, StubText("t1")), strings.Index(got, "- `t1`")
			if stub < 0 || sum < stub {
				t.Fatalf("summary at %d, stub at %d:\n%s", sum, stub, got)
			}
		})
	})
	t.Run("a later dedup alias does not move its original's summary", func(t *testing.T) {
		eachFormat(t, func(t *testing.T, f wire.Format) {
			pol := stubPolicy()
			x := newTx(f).user("a").turn("c1", "read", `{"path":"f"}`, big("SAME", 2000)).asst("", "ok").user("b")
			st := flush(t, x.req(t), NewState(), pol)
			before := Render(x.req(t), st, pol)
			x.turn("c2", "read", `{"path":"f"}`, big("SAME", 2000)).asst("", "ok").user("c")
			req := x.req(t)
			st = flush(t, req, st, pol)
			if len(st.Aliases) != 1 {
				t.Fatalf("setup: %d aliases", len(st.Aliases))
			}
			res := Render(req, st, pol)
			mustValid(t, req, res)
			for i := 0; i < len(before.Request.Messages)-1; i++ {
				if a, b := before.Request.Messages[i].Bytes(), res.Request.Messages[i].Bytes(); string(a) != string(b) {
					t.Fatalf("message %d changed:\n%s\n%s", i, a, b)
				}
			}
			if got := joined(res.Request); strings.Count(got, "- `t1`") != 1 || strings.Count(got, StubText("t1")) != 2 {
				t.Fatal(got)
			}
		})
	})
	t.Run("a summary whose results are gone is not shown at a taken-over anchor", func(t *testing.T) {
		eachFormat(t, func(t *testing.T, f wire.Format) {
			pol := stubPolicy()
			st := doneAnchored(t, f, pol)
			req := compacted(f).asst("", "Done.").user("next").req(t)
			res := Render(req, st, pol)
			if res.Stats.Summaries != 0 || strings.Contains(joined(res.Request), "- `t1`") {
				t.Fatalf("%+v\n%s", res.Stats, joined(res.Request))
			}
		})
	})
}

// doneAnchored flushes [go, c1 read a.go, "Done.", next] and anchors its summary as states
// written before summaries were anchored on their batch: on the flush's last reply "Done.".
func doneAnchored(t *testing.T, f wire.Format, pol Policy) *State {
	t.Helper()
	req := newTx(f).user("go").turn("c1", "read", `{"path":"a.go"}`, big("A", 2000)).asst("", "Done.").user("next").req(t)
	st := flush(t, req, NewState(), pol)
	v := newAnalysis(req.Format, req.Messages)
	s := *st.Summaries[0]
	s.Anchor = v.fingerprints(v.assistants)[1]
	st.Summaries[0] = &s
	return st
}

// TestDecidedAtFlush: the prompt cache holds the bytes a request shares with the one before
// it, so a render changes already-sent messages only when a flush changes the state. The
// error purge (an errored call's arguments, CooldownTurns assistant turns old) and the end of
// recovery grace (a context_tree_query result, RecoveryGraceTurns user turns old) are
// decided at flush time and stored in the state; between flushes a longer request renders
// the shorter one's messages unchanged.
func TestDecidedAtFlush(t *testing.T) {
	long := `{"cmd":"` + strings.Repeat("y", 600) + `"}`
	cases := []struct {
		name  string
		short func(x *tx) *tx // the transcript flushed, then rendered
		more  func(x *tx) *tx // what the next requests append
		stat  func(s RenderStats) int
	}{
		{
			name: "error purge",
			short: func(x *tx) *tx {
				return x.user("go").asst("", "", tcall{"e1", "bash", long}).results(tres{id: "e1", text: "failed", isErr: true}).
					turn("r1", "read", `{"path":"a.go"}`, big("A", 2000))
			},
			more: func(x *tx) *tx { return x.turn("k1", "read", `{}`, "1").turn("k2", "read", `{}`, "2") },
			stat: func(s RenderStats) int { return s.Purged },
		},
		{
			name: "end of recovery grace",
			short: func(x *tx) *tx {
				return x.user("u1").turn("q1", QueryToolName, `{"toolCallIds":["t9"]}`, big("RECOVERED", 2000)).asst("", "ok").user("u2")
			},
			more: func(x *tx) *tx {
				return x.asst("", "ok").user("u3").asst("", "ok").user("u4").asst("", "ok").user("u5")
			},
			stat: func(s RenderStats) int { return s.Stubbed },
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// OpenAI tool messages carry no error flag: only Anthropic purges.
			f := wire.Anthropic
			pol := stubPolicy()
			short := tc.short(newTx(f)).req(t)
			st := flush(t, short, NewState(), pol)
			r1 := Render(short, st, pol)
			if tc.stat(r1.Stats) != 0 {
				t.Fatalf("setup: already applied %+v", r1.Stats)
			}
			long := tc.more(tc.short(newTx(f))).req(t)
			r2 := Render(long, st, pol)
			mustValid(t, long, r2)
			for i := 0; i < len(r1.Request.Messages)-1; i++ {
				if a, b := r1.Request.Messages[i].Bytes(), r2.Request.Messages[i].Bytes(); string(a) != string(b) {
					t.Fatalf("message %d changed without a flush:\n%s\n%s", i, a, b)
				}
			}
			if tc.stat(r2.Stats) != 0 {
				t.Fatalf("applied without a flush: %+v", r2.Stats)
			}
			st = flush(t, long, st, pol)
			if r3 := Render(long, st, pol); tc.stat(r3.Stats) != 1 {
				t.Fatalf("not applied after the flush: %+v", r3.Stats)
			}
		})
	}
}
