package pruner

import (
	"slices"
	"strings"
	"testing"

	"github.com/condense-dev/condense/internal/wire"
)

// TestAliasInUncoveredChain: a duplicate output that one flush both aliases to the indexed
// original (dedup) and backfills as a record (the compression of an uncovered chain it sits
// in) is one occurrence: its bare id resolves to it, context_tree_query answers it by id and by
// the ref the chain lists, and that ref is the record's own.
func TestAliasInUncoveredChain(t *testing.T) {
	out := big("SAME", 1500)
	x := newTx(wire.Anthropic).user("task a").turn("c1", "read", `{"path":"a"}`, out).asst("", "done a").user("task b")
	bs := blobStore{}
	st := flushBlobs(t, x.req(t), NewState(), kPolicy(100), bs)
	// c2 repeats c1's output; c3 is too small to summarize, so no summary covers chain b.
	x.turn("c2", "read", `{"path":"a"}`, out).turn("c3", "bash", `{"cmd":"ls"}`, "two").asst("", "done b").user("task c")
	st = flushBlobs(t, x.req(t), st, kPolicy(0), bs)
	ks := st.KeysForID("c2")
	if len(ks) != 1 {
		t.Fatalf("bare id c2 lists keys %v", ks)
	}
	rec := st.Records[ks[0]]
	if rec == nil || !rec.Backfilled || st.Aliases[ks[0]] == "" {
		t.Fatalf("the case under test: record %+v, alias %q", rec, st.Aliases[ks[0]])
	}
	if st.RefOf(ks[0]) != rec.Ref {
		t.Fatalf("ref %q, the record's own %q", st.RefOf(ks[0]), rec.Ref)
	}
	if last := st.Chains[len(st.Chains)-1]; !slices.Contains(last.ToolRefs, rec.Ref) {
		t.Fatalf("chain b lists %v, not %s", last.ToolRefs, rec.Ref)
	}
	for _, q := range []string{"c2", ks[0], rec.Ref} {
		if got := Query(st, q, bs.lookup); !strings.Contains(got, "SAME") {
			t.Fatalf("query %s: %s", q, got)
		}
	}
}
