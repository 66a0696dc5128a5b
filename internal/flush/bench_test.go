package flush

import (
	"context"
	"fmt"
	"testing"

	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/summarize"
)

// BenchmarkFlushExtractiveMemory measures one whole flush (lease, load, plan, extractive
// summaries of 5 batches, blobs, commit, stats, release) on the in-memory store.
func BenchmarkFlushExtractiveMemory(b *testing.B) {
	st := store.NewMemory(0)
	defer st.Close()
	o := &Orchestrator{Store: st, Planner: EnginePlanner{Policy: testPolicy()}, Summarizer: summarize.Extractive{}, Owner: "bench", Log: quiet}
	body := transcript("bench", 5)
	ctx := context.Background()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := o.Flush(ctx, &Job{Session: fmt.Sprintf("s%d", i), Format: "anthropic", Body: body})
		if err != nil || res.Outcome != OutcomeFlushed {
			b.Fatalf("res %+v err %v", res, err)
		}
	}
}
