package strategies

import (
	"context"
	"testing"

	"github.com/condense-dev/condense/internal/replay"
)

// BenchmarkStrategyRequest measures one strategy over the five-request engine session (cost
// per session replay, including billing and validation).
func BenchmarkStrategyRequest(b *testing.B) {
	cond, _ := NewCondense(CondenseOptions{CacheAware: true, MidRun: true})
	for _, st := range []replay.Strategy{None{}, ClearToolUses{Trigger: 1000, Keep: 1}, ObservationMask{Window: 1}, Reference(), cond} {
		b.Run(st.Name(), func(b *testing.B) {
			tr := engineSession()
			n := 0
			for _, body := range tr.Bodies {
				n += len(body)
			}
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := replay.Run(context.Background(), tr, replay.Options{Strategies: []replay.Strategy{st}}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
