package flush

import (
	"context"
	"time"

	"github.com/condense-dev/condense/internal/store"
)

// waitVersion waits until the session's committed version exceeds after, using the store's
// change notifications with a periodic Load as a safety net (notifications may be dropped).
// It returns the version seen, or ctx's error with the last version loaded when ctx ends
// first. Use a context with a deadline for a bounded wait (the proxy's flushWaitTimeout).
func waitVersion(ctx context.Context, st store.Store, session string, after uint64) (uint64, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events, werr := st.Watch(wctx)
	var last uint64
	check := func() (bool, error) {
		snap, err := st.Load(ctx, session)
		if err != nil {
			return false, err
		}
		last = snap.Version
		return snap.Version > after, nil
	}
	if ok, err := check(); err != nil || ok {
		return last, err
	}
	poll := time.NewTicker(250 * time.Millisecond)
	defer poll.Stop()
	if werr != nil {
		events = nil
	}
	for {
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case ev, open := <-events:
			if !open {
				events = nil
				continue
			}
			if ev.Session != session {
				continue
			}
			if ev.Version > after {
				return ev.Version, nil
			}
		case <-poll.C:
			if ok, err := check(); err != nil || ok {
				return last, err
			}
		}
	}
}
