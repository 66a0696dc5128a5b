package flush

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/testutil/redistest"
	"github.com/condense-dev/condense/internal/upstreamfake"
)

// TestFlushReleasesALeaseItLeftBehind: a lease issued to an earlier flush of this
// orchestrator that no longer runs (its release was lost) is released at once by the next
// flush of the session; a lease of another orchestrator, or of a flush of its own that still
// runs, is waited for (busy).
func TestFlushReleasesALeaseItLeftBehind(t *testing.T) {
	r := newRig(t, "memory")
	ctx := context.Background()
	a := r.orch("replica-a", nil)
	a.LeaseTTL = time.Minute
	if !strings.HasPrefix(a.Holder(), "replica-a#") || a.Holder() != a.Holder() {
		t.Fatalf("holder %q", a.Holder())
	}
	// An earlier flush of a's took the lease and ended without releasing it.
	left, err := r.st.AcquireLease(ctx, "s1", a.Holder()+"/0", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Flush(ctx, job("s1", "left", 2))
	if err != nil || res.Outcome != OutcomeFlushed {
		t.Fatalf("flush over a lease left behind: %+v, %v", res, err)
	}
	if snap, _ := r.st.Load(ctx, "s1"); snap.Lease != nil {
		t.Fatalf("a lease is still held after the flush: %+v", snap.Lease)
	}
	if err := r.st.ReleaseLease(ctx, left); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("the left-behind lease still held: %v", err)
	}

	// Another orchestrator's lease (another process, maybe mid-flush) is respected.
	b := r.orch("replica-b", nil)
	if _, err := r.st.AcquireLease(ctx, "s2", b.Holder()+"/1", time.Minute); err != nil {
		t.Fatal(err)
	}
	if res, err := a.Flush(ctx, job("s2", "other", 2)); !errors.Is(err, ErrBusy) || res.Outcome != OutcomeBusy {
		t.Fatalf("flush over another holder's lease: %+v, %v", res, err)
	}
	// So is the lease of one of a's own flushes that still runs.
	running := a.startFlush()
	defer a.endFlush(running)
	if _, err := r.st.AcquireLease(ctx, "s3", running, time.Minute); err != nil {
		t.Fatal(err)
	}
	if res, err := a.Flush(ctx, job("s3", "running", 2)); !errors.Is(err, ErrBusy) || res.Outcome != OutcomeBusy {
		t.Fatalf("flush over a running flush's lease: %+v, %v", res, err)
	}
}

// failingRelease is a store whose first ReleaseLease calls fail as if it were unreachable.
type failingRelease struct {
	store.Store
	fail atomic.Int32 // calls still to fail
}

func (f *failingRelease) ReleaseLease(ctx context.Context, l store.Lease) error {
	if f.fail.Add(-1) >= 0 {
		return store.ErrUnavailable
	}
	return f.Store.ReleaseLease(ctx, l)
}

// TestFlushRetriesAFailedRelease: a flush whose release failed releases the lease again once
// the store answers, so another process flushes the session long before the lease would lapse.
func TestFlushRetriesAFailedRelease(t *testing.T) {
	r := newRig(t, "memory")
	ctx := context.Background()
	st := &failingRelease{Store: r.st}
	st.fail.Store(3)
	a := r.orch("replica-a", nil)
	a.Store, a.LeaseTTL = st, time.Minute
	if res, err := a.Flush(ctx, job("s1", "retry", 2)); err != nil || res.Outcome != OutcomeFlushed {
		t.Fatalf("a: %+v, %v", res, err)
	}
	b := r.orch("replica-b", nil)
	b.LeaseTTL = time.Minute
	waitFor(t, func() bool {
		snap, err := r.st.Load(ctx, "s1")
		return err == nil && snap.Lease == nil
	})
	if res, err := b.Flush(ctx, job("s1", "retry", 3)); err != nil || res.Outcome != OutcomeFlushed {
		t.Fatalf("b after a's release was retried: %+v, %v", res, err)
	}
}

// TestFlushResumesAfterRedisKilledMidFlush: Redis (append-only file on) is killed with
// SIGKILL while a flush holds the session's one-minute lease and restarted on the same port
// from the same file, which still holds the lease. The flusher whose release failed releases
// it once Redis is back: another process's flush of the session, and the flusher's own next
// one, prune within seconds instead of waiting out the minute.
func TestFlushResumesAfterRedisKilledMidFlush(t *testing.T) {
	r := newRig(t, "memory")
	srv := redistest.Start(t, &redistest.Options{AOF: true})
	ctx := context.Background()
	st, err := store.Open(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	r.st = st
	a := r.orch("proxy-a", nil)
	b := r.orch("pruner-b", nil)
	a.LeaseTTL, b.LeaseTTL = time.Minute, time.Minute
	r.up.Enqueue(upstreamfake.Reply{Text: "- [[1:bash]] too late", Delay: time.Second})
	aDone := make(chan error, 1)
	go func() { _, err := a.Flush(ctx, job("s1", "kill", 2)); aDone <- err }()
	waitFor(t, func() bool { return len(r.up.Requests()) >= 1 }) // a holds the lease, summarizing
	srv.Kill()
	select {
	case err := <-aDone:
		if !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("a's flush with Redis killed: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a's flush never ended")
	}
	srv.Restart()

	start := time.Now()
	for {
		res, err := b.Flush(ctx, job("s1", "kill", 2))
		if err == nil && res.Outcome == OutcomeFlushed {
			break
		}
		if !errors.Is(err, ErrBusy) && !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("b: %+v, %v", res, err)
		}
		if time.Since(start) > 15*time.Second {
			t.Fatalf("b still cannot flush %s after the restart (lease one minute): %+v, %v", time.Since(start), res, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, v := r.state("s1"); v != 1 {
		t.Fatalf("version %d after b's flush, want 1", v)
	}
	if res, err := a.Flush(ctx, job("s1", "kill", 3)); err != nil || res.Outcome != OutcomeFlushed {
		t.Fatalf("a after the restart: %+v, %v", res, err)
	}
}
