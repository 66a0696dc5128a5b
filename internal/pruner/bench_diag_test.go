package pruner

import (
	"testing"

	"github.com/condense-dev/condense/internal/wire"
)

// BenchmarkRenderAfterCompaction renders the last three tasks of the reference workload (as
// a client sends them after a compaction dropped tasks 0-16) with the workload's state, whose
// 12 compressed chains are all gone from the request ("12-absent-chains"), and with the same
// state without chain entries ("no-chains"): the cost of keeping retired entries in the state.
func BenchmarkRenderAfterCompaction(b *testing.B) {
	_, st, pol := workload(b, wire.Anthropic)
	x := workloadTx(wire.Anthropic, -1, -1)
	x.msgs = x.msgs[17*20:]
	req := x.req(b)
	bare := st.clone()
	bare.Chains = nil
	bare.rebuild()
	for _, c := range []struct {
		name string
		st   *State
	}{{"12-absent-chains", st}, {"no-chains", bare}} {
		b.Run(c.name, func(b *testing.B) {
			res := Render(req, c.st, pol)
			if res.Stats.Chains != 0 || len(res.Diagnostics) != 0 || res.Stats.AbsentRanges != len(c.st.Chains) {
				b.Fatalf("%+v %+v", res.Stats, res.Diagnostics)
			}
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				Render(req, c.st, pol)
			}
		})
	}
}
