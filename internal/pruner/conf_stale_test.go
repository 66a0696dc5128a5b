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
