//go:build linux

package flush

import (
	"context"
	"syscall"
	"testing"

	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/summarize"
	"github.com/condense-dev/condense/internal/wire"
)

// priorityPlanner is the engine planner that also records the kernel priority of the thread
// it plans on.
type priorityPlanner struct {
	EnginePlanner
	prio chan int
}

func (p priorityPlanner) Plan(ctx context.Context, job *Job, snap *store.Snapshot) (Plan, error) {
	notePriority(p.prio)
	return p.EnginePlanner.Plan(ctx, job, snap)
}

// notePriority sends the calling thread's kernel priority to ch unless ch is full.
func notePriority(ch chan int) {
	if prio, err := syscall.Getpriority(syscall.PRIO_PROCESS, syscall.Gettid()); err == nil {
		select {
		case ch <- prio:
		default:
		}
	}
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
	tk, err := p.Enqueue(context.Background(), &Job{Queued: Queued{Session: "nice", Format: wire.Anthropic, Body: transcript("nice", 3)}})
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

// priorityStore is a store that records the kernel priority of the thread of every call the
// orchestrator makes to it.
type priorityStore struct {
	store.Store
	prio chan int
}

func (s priorityStore) note() { notePriority(s.prio) }

func (s priorityStore) Load(ctx context.Context, session string) (*store.Snapshot, error) {
	s.note()
	return s.Store.Load(ctx, session)
}

func (s priorityStore) Commit(ctx context.Context, session string, expect uint64, state []byte, fence uint64) (uint64, error) {
	s.note()
	return s.Store.Commit(ctx, session, expect, state, fence)
}

func (s priorityStore) PutBlob(ctx context.Context, session, key string, data []byte) error {
	s.note()
	return s.Store.PutBlob(ctx, session, key, data)
}

func (s priorityStore) IncrStats(ctx context.Context, session string, delta map[string]int64) error {
	s.note()
	return s.Store.IncrStats(ctx, session, delta)
}

// TestInProcessNiceStoreCallsAtNormalPriority checks that a flush running on a lowered-priority
// thread makes its store calls (load, blobs, commit, stats) from normal-priority threads, so a
// store lock is never held by a low-priority thread.
func TestInProcessNiceStoreCallsAtNormalPriority(t *testing.T) {
	mem := store.NewMemory(0)
	defer mem.Close()
	st := priorityStore{Store: mem, prio: make(chan int, 64)}
	pl := priorityPlanner{EnginePlanner: EnginePlanner{Policy: testPolicy()}, prio: make(chan int, 8)}
	p := &InProcess{MaxConcurrent: 1, Nice: 5, Orch: &Orchestrator{Store: st, Planner: pl, Summarizer: summarize.Extractive{}, Log: quiet}}
	defer p.Close(context.Background())
	normal, err := syscall.Getpriority(syscall.PRIO_PROCESS, syscall.Gettid())
	if err != nil {
		t.Skipf("getpriority: %v", err)
	}
	tk, err := p.Enqueue(context.Background(), &Job{Queued: Queued{Session: "nice-store", Format: wire.Anthropic, Body: transcript("nice-store", 3)}})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := tk.Wait(context.Background()); err != nil || res.Outcome != OutcomeFlushed {
		t.Fatalf("flush: %+v %v", res, err)
	}
	if got := <-pl.prio; got != normal-5 {
		t.Fatalf("planning ran at priority %d, want the lowered %d", got, normal-5)
	}
	calls := len(st.prio)
	if calls < 3 {
		t.Fatalf("%d store calls recorded", calls)
	}
	for i := 0; i < calls; i++ {
		if got := <-st.prio; got != normal {
			t.Fatalf("a store call ran at priority %d, want the normal %d", got, normal)
		}
	}
}
