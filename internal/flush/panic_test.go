package flush

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/summarize"
)

// panicPlanner stands in for a planner bug: every Plan panics.
type panicPlanner struct{}

// Plan implements Planner.
func (panicPlanner) Plan(context.Context, *Job, *store.Snapshot) (Plan, error) {
	panic("planner bug")
}

// panicSummarizer stands in for a summarizer bug: every call panics (on Run's goroutine).
type panicSummarizer struct{}

// Summarize implements summarize.Summarizer.
func (panicSummarizer) Summarize(context.Context, *summarize.Request) (*summarize.Result, error) {
	panic("summarizer bug")
}

// panicFirst stands in for a summarizer bug that strikes once: its first call panics (on
// Run's goroutine), later calls summarize with next.
type panicFirst struct {
	struck atomic.Bool
	next   summarize.Summarizer
}

// Summarize implements summarize.Summarizer.
func (p *panicFirst) Summarize(ctx context.Context, req *summarize.Request) (*summarize.Result, error) {
	if p.struck.CompareAndSwap(false, true) {
		panic("summarizer bug")
	}
	return p.next.Summarize(ctx, req)
}

// TestWorkerPanickingFlushIsAFailedAttempt checks that a flush that panics does not take the
// worker down: the panic is a failed attempt (retried, then dead-lettered after MaxAttempts)
// counted as the flush outcome "panic", and the lease is released.
func TestWorkerPanickingFlushIsAFailedAttempt(t *testing.T) {
	r := newRig(t, "redis")
	m := NewMetrics(prometheus.NewRegistry())
	w, q := r.worker("w1", m)
	w.Orch.Planner = panicPlanner{}
	run(t, w)
	j := job("s1", "panic", 1)
	if _, err := q.Enqueue(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	st := waitState(t, q, j, 10*time.Second)
	if st.State != StateDead || st.Attempt != 3 || !strings.Contains(st.Error, "planner bug") {
		t.Fatalf("status %+v", st)
	}
	if got := testutil.ToFloat64(m.Flushes.WithLabelValues(string(OutcomePanic))); got != 3 {
		t.Fatalf("panic flushes %v", got)
	}
	if got := testutil.ToFloat64(m.Jobs.WithLabelValues("retried")); got != 2 {
		t.Fatalf("retried %v", got)
	}
	if snap, err := r.st.Load(context.Background(), "s1"); err != nil || snap.Lease != nil {
		t.Fatalf("lease %+v err %v", snap.Lease, err)
	}
}

// TestInProcessPanickingSummarizer checks that a summarizer call that panics (on a goroutine
// of its own) ends the in-process flush with OutcomePanic and a *PanicError carrying the
// stack, commits nothing, releases the lease, and leaves the runner working.
func TestInProcessPanickingSummarizer(t *testing.T) {
	r := newRig(t, "memory")
	p := &InProcess{Orch: r.orch("a", &panicFirst{next: r.llm})}
	defer p.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tk, err := p.Enqueue(ctx, job("s1", "x", 2))
	if err != nil {
		t.Fatal(err)
	}
	res, err := tk.Wait(ctx)
	var pe *PanicError
	if !errors.As(err, &pe) || res.Outcome != OutcomePanic || !strings.Contains(string(pe.Stack), "panicFirst") {
		t.Fatalf("res %+v err %v", res, err)
	}
	if _, v := r.state("s1"); v != 0 {
		t.Fatal("a panicked flush committed")
	}
	if r.stats("s1")["flush.panic"] != 1 {
		t.Fatalf("stats %v", r.stats("s1"))
	}
	// Another job (an identical one would join the first while its goroutine winds down),
	// with the same orchestrator, whose summarizer no longer panics.
	tk, err = p.Enqueue(ctx, job("s1", "y", 2))
	if err != nil {
		t.Fatal(err)
	}
	if res, err := tk.Wait(ctx); err != nil || res.Outcome != OutcomeFlushed {
		t.Fatalf("after the panic: res %+v err %v", res, err)
	}
}

// TestQueueReclaimedJobPastMaxAttemptsIsDeadLettered checks that a job whose earlier
// deliveries all died with their worker (a crash mid-job counts no attempt of its own) is
// dead-lettered when reclaimed once the deliveries reach MaxAttempts, instead of being run and
// reclaimed forever.
func TestQueueReclaimedJobPastMaxAttemptsIsDeadLettered(t *testing.T) {
	r := newRig(t, "redis")
	ctx := context.Background()
	m := NewMetrics(prometheus.NewRegistry())
	w, q := r.worker("w1", m)
	if err := q.ensureGroup(ctx); err != nil {
		t.Fatal(err)
	}
	j := job("s1", "crash", 1)
	if _, err := q.Enqueue(ctx, j); err != nil {
		t.Fatal(err)
	}
	// Three workers took the job in turn and died with it: delivered three times, never acknowledged.
	msgs, err := r.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: q.Group, Consumer: "ghost", Streams: []string{q.StreamKey(), ">"}, Count: 1}).Result()
	if err != nil || len(msgs) != 1 || len(msgs[0].Messages) != 1 {
		t.Fatalf("read %+v err %v", msgs, err)
	}
	id := msgs[0].Messages[0].ID
	for range 2 {
		if err := r.rdb.XClaim(ctx, &redis.XClaimArgs{Stream: q.StreamKey(), Group: q.Group, Consumer: "ghost", Messages: []string{id}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	run(t, w)
	st := waitState(t, q, j, 10*time.Second)
	if st.State != StateDead || st.Attempt != 3 {
		t.Fatalf("status %+v", st)
	}
	if n := len(r.up.Requests()); n != 0 {
		t.Fatalf("the job ran again (%d summarizer calls)", n)
	}
	if got := testutil.ToFloat64(m.Jobs.WithLabelValues("reclaimed")); got != 1 {
		t.Fatalf("reclaimed %v", got)
	}
}
