package pruner

import (
	"strings"
	"testing"

	"github.com/condense-dev/condense/internal/wire"
)

// compacted starts a transcript the way a client does after a compaction: a user message
// carrying the summary of everything before it.
func compacted(f wire.Format) *tx {
	return newTx(f).user("The conversation history before this point was compacted into the following summary: …")
}

// TestDiagnosticsOnTheCorpus reproduces, on minimal transcripts, every cause of a chain
// diagnostic found by replaying the corpus (docs/engine.md, "Diagnostics on the corpus"), plus
// the client edits the diagnostic exists for. The state holds chains b1..b3 compressed from
// chainTx(3) ("task a|b|c", calls ca1 ca2, cb1 cb2, cc1 cc2, replies "done a|b|c").
func TestDiagnosticsOnTheCorpus(t *testing.T) {
	cases := []struct {
		name string
		tx   func(f wire.Format) *tx
		// want: reported unresolved-range keys, silently retired ranges, applied ranges.
		unresolved []string
		absent     int
		applied    int
		keep       string // a text the rendered request must still hold
		detail     string // the first diagnostic's detail must contain it
	}{
		{
			// cccodemie_session-624a4a58 request 37, pi_before-compaction 173 and 303, 22 of
			// pi_compact's 25 at request 333: both boundaries and every recorded call are gone.
			name: "a compaction that removed whole ranges retires them silently",
			tx: func(f wire.Format) *tx {
				return compacted(f).turn("cz1", "read", `{"path":"z"}`, big("Rz1", 1500)).asst("", "done z").user("next")
			},
			absent: 3,
		},
		{
			// The same with a provider that restarts tool-call ids per response: a new call
			// after the compaction has a compressed chain's id (ca1) but other content. The
			// range is gone all the same; matching the bare id kept reporting it unresolved.
			name: "a compaction that removed whole ranges retires them silently when new calls reuse their ids",
			tx: func(f wire.Format) *tx {
				return compacted(f).turn("ca1", "read", `{"path":"z"}`, big("Rz1", 1500)).asst("", "done z").user("next")
			},
			absent: 3,
			keep:   "R(ca1):Rz1",
		},
		{
			// pi_compact b11/b16: after the compaction the agent gave a reply identical to a
			// compressed chain's final ("done a" at the same ordinal among final replies), so
			// the final fingerprint matched a new message while the start and calls were gone.
			name: "a new reply identical to a compacted final does not keep the range alive",
			tx: func(f wire.Format) *tx {
				return compacted(f).turn("cz1", "read", `{"path":"z"}`, big("Rz1", 1500)).asst("", "done a").user("next")
			},
			absent: 3,
		},
		{
			// pi_compact b25: the compaction kept messages from inside the chain (its last
			// call and final reply) but dropped its opening prompt. Part of the range is in
			// the request and cannot be compressed as recorded: fail closed and report.
			name: "a compaction that cut a range in half reports unresolved-range",
			tx: func(f wire.Format) *tx {
				return compacted(f).turn("cc2", "bash", `{"cmd":"c2"}`, big("Rc2", 1500)).asst("", "done c").user("open task")
			},
			unresolved: []string{"b3"},
			absent:     2,
			detail:     "(start: no match; final: message 3; 1/2 recorded calls present)",
		},
		{
			// Found while studying pi_compact b11/b16: a fingerprint's ordinal counts only the
			// messages still in the request, so after a compaction a repeated prompt and a
			// repeated reply take over a compacted chain's boundaries. Applying the range would
			// drop the new task's live calls; it fails closed instead.
			name: "a repeated prompt and reply after a compaction do not resolve the old range",
			tx: func(f wire.Format) *tx {
				return compacted(f).asst("", "ok").user("task a").turn("cn1", "read", `{"path":"n"}`, big("Rn1", 1500)).asst("", "done a").user("next")
			},
			unresolved: []string{"b1"},
			absent:     2,
			keep:       "R(cn1):Rn1",
			detail:     "resolved to messages 2..5 holding none of its 2 tool call(s)",
		},
		{
			name: "a rewind to a compressed chain's prompt retires what followed it",
			tx: func(f wire.Format) *tx {
				return newTx(f).user("task a")
			},
			absent: 3,
		},
		{
			name: "an edited final reply with the range still present reports unresolved-range",
			tx: func(f wire.Format) *tx {
				x := chainTx(f, 3)
				for _, m := range x.msgs {
					if m["role"] != "assistant" {
						continue
					}
					if f == wire.OpenAI && m["content"] == "done b" {
						m["content"] = "done b (edited)"
					}
					if c, ok := m["content"].([]any); ok && len(c) == 1 {
						if b := c[0].(map[string]any); b["text"] == "done b" {
							b["text"] = "done b (edited)"
						}
					}
				}
				return x
			},
			unresolved: []string{"b2"},
			applied:    2,
			detail:     "(start: message 6; final: no match; 2/2 recorded calls present)",
		},
		{
			name: "the original transcript applies every range",
			tx: func(f wire.Format) *tx {
				return chainTx(f, 3)
			},
			applied: 3,
		},
	}
	eachFormat(t, func(t *testing.T, f wire.Format) {
		pol := kPolicy(0)
		st := flush(t, chainTx(f, 3).req(t), NewState(), pol)
		if len(st.Chains) != 3 {
			t.Fatalf("setup: %d chains", len(st.Chains))
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				req := tc.tx(f).req(t)
				res := Render(req, st, pol)
				mustValid(t, req, res)
				var got []string
				for _, d := range res.Diagnostics {
					if d.Kind != DiagUnresolvedRange {
						t.Fatalf("unexpected diagnostic %+v", d)
					}
					got = append(got, d.Key)
				}
				if len(got) != len(tc.unresolved) || (len(got) > 0 && got[0] != tc.unresolved[0]) {
					t.Fatalf("unresolved %v, want %v (%+v)", got, tc.unresolved, res.Diagnostics)
				}
				if tc.detail != "" && !strings.Contains(res.Diagnostics[0].Detail, tc.detail) {
					t.Fatalf("detail %q, want it to contain %q", res.Diagnostics[0].Detail, tc.detail)
				}
				if tc.keep != "" && !strings.Contains(strings.Join(texts(res.Request), "\n"), tc.keep) {
					t.Fatalf("%q dropped:\n%s", tc.keep, strings.Join(texts(res.Request), "\n"))
				}
				if res.Stats.AbsentRanges != tc.absent || res.Stats.Chains != tc.applied {
					t.Fatalf("absent %d applied %d, want %d %d", res.Stats.AbsentRanges, res.Stats.Chains, tc.absent, tc.applied)
				}
			})
		}
	})
}
