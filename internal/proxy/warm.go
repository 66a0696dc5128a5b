package proxy

import (
	"time"

	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/wire"
)

// warmState prepares the session's next request for a state just committed — by a flush of
// this process, or by another process (watchCommits) — off the request path. It decodes the state, loading and decoding exactly as that
// request would (when the session has moved past version meanwhile it does nothing: the
// request then decodes what it loads), and renders the session's remembered request with it
// (warmRender). For a job this process queued, its end and the store's commit notification
// (watchCommits) may both ask for one version: whichever comes second finds it decoded and
// does nothing.
func (s *Server) warmState(f wire.Format, sid string, version uint64) {
	if c, ok := s.states.Load(sid); ok && c.version >= version {
		return
	}
	ctx, cancel := s.storeCtx(s.ctx)
	defer cancel()
	snap, err := s.opt.Store.Load(ctx, sid)
	if err != nil || snap.Version != version {
		return
	}
	st, err := s.decodedState(sid, snap)
	if err != nil {
		return // a state that fails to decode fails its request the same way
	}
	s.warmRender(f, sid, st)
}

// warmRender renders the session's remembered request (the parse cache's) with st and
// discards the result. What a render computes once and keeps — occurrence keys, stub and
// summary blocks and their encodings — sits on the parsed messages and blocks, which the
// session's next request shares through wire.ParseReusing; after a flush that request would
// otherwise compute all of it for the new state on the request path
// (BenchmarkPrepareAfterFlush). It counts in condense_state_warmups_total.
func (s *Server) warmRender(f wire.Format, sid string, st *pruner.State) {
	if req := s.parses.peek(f, sid); req != nil {
		_ = pruner.RenderView(req, st, s.opt.Policy).Request.Segments()
		s.met.Warmups.Inc()
	}
}

// watchRetry is how long watchCommits waits before subscribing again after the store's
// notifications failed or ended.
const watchRetry = 5 * time.Second

// watchCommits does for states other processes commit — a condense pruner worker (jobs
// mode), another replica, an admin flush served elsewhere — what warmState does after this
// process's own flushes: for each commit notification (store.Watch) of a session this process
// remembers a request of, it decodes the new state and renders that request with it in the
// background, so the session's next request does neither on its path. Notifications are
// hints: a missed one leaves the work to the request, as before. When the subscription fails
// or ends (a store outage) it subscribes again after watchRetry. It runs until Close.
func (s *Server) watchCommits() {
	defer s.watching.Done()
	for s.ctx.Err() == nil {
		if events, err := s.opt.Store.Watch(s.ctx); err == nil {
			for ev := range events {
				if ev.Kind == store.EventCommitted {
					s.warmCommitted(ev.Session, ev.Version)
				}
			}
		}
		select {
		case <-s.ctx.Done():
		case <-time.After(watchRetry):
		}
	}
}

// warmCommitted warms a session's committed version (warmState) when this process holds a
// request of it, unless this process is running that session's flush itself (the flush warms
// its commit before it ends). A job this process queued is not skipped: its end is seen by
// polling its status, later than the notification.
func (s *Server) warmCommitted(sid string, version uint64) {
	if f, ok := s.flights.Load(sid); ok && f.(*flight).local && f.(*flight).running() {
		return
	}
	for _, f := range []wire.Format{wire.Anthropic, wire.OpenAI} {
		if s.parses.peek(f, sid) != nil {
			s.warmState(f, sid, version)
			return
		}
	}
}
