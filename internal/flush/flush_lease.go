package flush

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/condense-dev/condense/internal/store"
)

// leaseBook keeps an orchestrator's flush leases: those its running flushes hold, and those
// whose release failed (the store was unreachable), released again once the store answers.
type leaseBook struct {
	mu         sync.Mutex
	running    map[string]bool // lease owners of running flushes
	unreleased map[string]unreleased
	retrying   bool // a releaseAgain goroutine runs
}

// unreleased is a lease whose release failed, and when it lapses anyway.
type unreleased struct {
	lease store.Lease
	lapse time.Time
}

// Holder names this orchestrator in the leases of its flushes: Owner (default host:pid), "#"
// and a random id of this Orchestrator value. Each flush's lease owner is Holder, "/" and the
// flush's number, so a lease tells which process, and which of its flushes, holds it.
func (o *Orchestrator) Holder() string {
	o.holderOnce.Do(func() {
		owner := o.Owner
		if owner == "" {
			h, _ := os.Hostname()
			owner = fmt.Sprintf("%s:%d", h, os.Getpid())
		}
		o.holder = owner + "#" + strconv.FormatUint(rand.Uint64()>>32, 36)
	})
	return o.holder
}

// startFlush returns the lease owner of a new flush and records it as running until
// endFlush.
func (o *Orchestrator) startFlush() string {
	owner := o.Holder() + "/" + strconv.FormatUint(o.flushSeq.Add(1), 10)
	o.leases.mu.Lock()
	defer o.leases.mu.Unlock()
	if o.leases.running == nil {
		o.leases.running = map[string]bool{}
	}
	o.leases.running[owner] = true
	return owner
}

func (o *Orchestrator) endFlush(owner string) {
	o.leases.mu.Lock()
	defer o.leases.mu.Unlock()
	delete(o.leases.running, owner)
}

// leftBehind reports whether l was issued to a flush of this orchestrator that no longer runs
// (its release failed, or the store restarted from a file that still had it).
func (o *Orchestrator) leftBehind(l store.Lease) bool {
	if !strings.HasPrefix(l.Owner, o.Holder()+"/") {
		return false
	}
	o.leases.mu.Lock()
	defer o.leases.mu.Unlock()
	return !o.leases.running[l.Owner]
}

// acquire takes the session's lease for owner. A lease this orchestrator left behind is
// released at once, not waited out.
func (o *Orchestrator) acquire(ctx context.Context, st store.Store, session, owner string) (store.Lease, error) {
	lease, err := st.AcquireLease(ctx, session, owner, o.leaseTTL())
	var held *store.LeaseHeldError
	if !errors.As(err, &held) || !o.leftBehind(held.Lease) {
		return lease, err
	}
	if rerr := st.ReleaseLease(ctx, held.Lease); rerr != nil && !errors.Is(rerr, store.ErrLeaseLost) {
		return lease, err
	}
	o.released(held.Lease)
	o.log().Info("flush: released a lease of this process's that outlived its flush", "session", session,
		"owner", held.Lease.Owner, "token", held.Lease.Token)
	return st.AcquireLease(ctx, session, owner, o.leaseTTL())
}

// release gives up lease at the end of a flush; when the store cannot be reached it is
// released again in the background until the store answers or the lease lapses.
func (o *Orchestrator) release(ctx context.Context, st store.Store, lease store.Lease) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := st.ReleaseLease(rctx, lease)
	if err == nil || errors.Is(err, store.ErrLeaseLost) {
		return
	}
	o.log().Warn("flush: release lease failed; retrying until the store answers", "session", lease.Session, "err", err)
	o.leases.mu.Lock()
	defer o.leases.mu.Unlock()
	if o.leases.unreleased == nil {
		o.leases.unreleased = map[string]unreleased{}
	}
	o.leases.unreleased[lease.Owner] = unreleased{lease: lease, lapse: time.Now().Add(o.leaseTTL())}
	if !o.leases.retrying {
		o.leases.retrying = true
		go o.releaseAgain()
	}
}

// released forgets a lease that is no longer held.
func (o *Orchestrator) released(l store.Lease) {
	o.leases.mu.Lock()
	defer o.leases.mu.Unlock()
	delete(o.leases.unreleased, l.Owner)
}

// releaseRetryMax bounds the wait between two attempts to release the leases whose release
// failed (the first waits 100ms, each next one twice as long).
const releaseRetryMax = time.Second

// releaseAgain retries the release of the unreleased leases until none is left: each is
// released, found lost, or lapses by itself.
func (o *Orchestrator) releaseAgain() {
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, releaseRetryMax) {
		time.Sleep(wait)
		o.leases.mu.Lock()
		if len(o.leases.unreleased) == 0 {
			o.leases.retrying = false
			o.leases.mu.Unlock()
			return
		}
		pending := make([]unreleased, 0, len(o.leases.unreleased))
		for _, u := range o.leases.unreleased {
			pending = append(pending, u)
		}
		o.leases.mu.Unlock()
		for _, u := range pending {
			if time.Now().After(u.lapse) {
				o.released(u.lease)
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			err := o.Store.ReleaseLease(ctx, u.lease)
			cancel()
			switch {
			case err == nil:
				o.released(u.lease)
				o.log().Info("flush: released a lease once the store answered again", "session", u.lease.Session, "token", u.lease.Token)
			case errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrClosed):
				o.released(u.lease)
			}
		}
	}
}

func (o *Orchestrator) leaseTTL() time.Duration {
	if o.LeaseTTL > 0 {
		return o.LeaseTTL
	}
	return 60 * time.Second
}

// ctxErr reports a lost lease as fencing; other errors pass through.
func (o *Orchestrator) ctxErr(fctx context.Context, err error) error {
	if c := context.Cause(fctx); c != nil && errors.Is(c, store.ErrLeaseLost) {
		return fmt.Errorf("%w: %w", ErrFenced, c)
	}
	return err
}

// renew extends the lease every third of its TTL; losing it cancels the flush.
func (o *Orchestrator) renew(ctx context.Context, cancel context.CancelCauseFunc, lease store.Lease) {
	ttl := o.leaseTTL()
	t := time.NewTicker(ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			l, err := o.Store.RenewLease(ctx, lease, ttl)
			if err != nil {
				if errors.Is(err, store.ErrLeaseLost) {
					cancel(err)
					return
				}
				continue // transient: try again next tick; the commit's fence is the real guard
			}
			lease = l
		}
	}
}
