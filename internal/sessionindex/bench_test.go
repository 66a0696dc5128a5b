package sessionindex

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/condense-dev/condense/internal/testutil/redistest"
)

// BenchmarkSessionIndexRefresh measures one listing of a real Redis store holding 1000
// sessions plus the change detection against the previous listing (what each rate-limited
// notification or resync costs the operator).
func BenchmarkSessionIndexRefresh(b *testing.B) {
	rds := redistest.Start(b, nil)
	st, err := OpenRedis(context.Background(), rds.URL())
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	for i := 0; i < 1000; i++ {
		id := fmt.Sprintf("session-%04d", i)
		if _, err := st.Commit(ctx, id, 0, []byte("state"), 0); err != nil {
			b.Fatal(err)
		}
		if err := st.IncrStats(ctx, id, map[string]int64{"requests": int64(i), "bytesBefore": 1000, "bytesAfter": 400}); err != nil {
			b.Fatal(err)
		}
	}
	x := &Index{}
	key := types.NamespacedName{Namespace: "ns", Name: "bench"}
	p := &policyStore{st: st, sessions: nil}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		x.refresh(ctx, key, p)
	}
	b.StopTimer()
	if len(p.sessions) != 1000 || p.err != nil {
		b.Fatalf("listed %d sessions, err %v", len(p.sessions), p.err)
	}
}
