//go:build linux

package flush

import (
	"context"
	"syscall"
	"testing"

	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/summarize"
)

// priorityPlanner is the engine planner that also records the kernel priority of the thread
// it plans on.
type priorityPlanner struct {
	EnginePlanner
	prio chan int
}

func (p priorityPlanner) Plan(ctx context.Context, job *Job, snap *store.Snapshot) (Plan, error) {
	prio, err := syscall.Getpriority(syscall.PRIO_PROCESS, syscall.Gettid())
	if err == nil {
		p.prio <- prio
	}
	return p.EnginePlanner.Plan(ctx, job, snap)
}

// TestInProcessNiceLowersFlushThreadOnly runs a flush with Nice set and checks that it ran on
// a thread with the lowered priority, committed normally, and left the caller's thread alone.
func TestInProcessNiceLowersFlushThreadOnly(t *testing.T) {
	st := store.NewMemory(0)
	defer st.Close()
	pl := priorityPlanner{EnginePlanner: EnginePlanner{Policy: testPolicy()}, prio: make(chan int, 8)}
	p := &InProcess{MaxConcurrent: 1, Nice: 5, Orch: &Orchestrator{Store: st, Planner: pl, Summarizer: summarize.Extractive{}, Log: quiet}}
	defer p.Close(context.Background())
	// The kernel's getpriority reports 20 − nice.
	before, err := syscall.Getpriority(syscall.PRIO_PROCESS, syscall.Gettid())
	if err != nil {
		t.Skipf("getpriority: %v", err)
	}
	tk, err := p.Enqueue(context.Background(), &Job{Session: "nice", Format: "anthropic", Body: transcript("nice", 3)})
	if err != nil {
		t.Fatal(err)
	}
	res, err := tk.Wait(context.Background())
	if err != nil || res.Outcome != OutcomeFlushed {
		t.Fatalf("flush: %+v %v", res, err)
	}
	got := <-pl.prio
	if got != before-5 {
		t.Fatalf("flush thread priority %d (20 − nice), want %d", got, before-5)
	}
	if after, _ := syscall.Getpriority(syscall.PRIO_PROCESS, syscall.Gettid()); after != before {
		t.Fatalf("caller thread priority changed from %d to %d", before, after)
	}
}
