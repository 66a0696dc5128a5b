package proxy

import (
	"time"

	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/wire"
)

// warmState decodes a state just committed for the session, as its next request would, and
// renders its remembered request with it (warmRender), off the request path; it does nothing
// once the session is past version or the version is decoded.
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

// warmRender renders the session's remembered request with st and discards the result: what
// the render keeps on the shared messages and blocks then serves the next request.
func (s *Server) warmRender(f wire.Format, sid string, st *pruner.State) {
	if req := s.parses.peek(f, sid); req != nil {
		_ = pruner.RenderRequest(req, st, s.opt.Policy).Request.Segments()
		s.met.Warmups.Inc()
	}
}

// watchRetry is how long watchCommits waits before subscribing again after the store's
// notifications failed or ended.
const watchRetry = 5 * time.Second

// watchCommits warms (warmCommitted) each state another process commits, from the store's
// commit notifications, subscribing again watchRetry after they fail. It runs until Close.
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

// warmCommitted warms a committed version (warmState) of a session this process holds a
// request of, unless this process runs that session's flush itself (it warms its own commit).
func (s *Server) warmCommitted(sid string, version uint64) {
	if f, ok := s.flights.Load(sid); ok && f.(*flight).local && f.(*flight).running() {
		return
	}
	for _, f := range []wire.Format{wire.Anthropic, wire.OpenAI, wire.Responses} {
		if s.parses.peek(f, sid) != nil {
			s.warmState(f, sid, version)
			return
		}
	}
}
