package proxy

import (
	"context"
	"errors"
	"time"

	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/wire"
)

// prepare loads the session, waits for an unfinished flush, re-inserts hidden exchanges,
// adds the query tool, renders, and starts due flushes. On any failure it fails open.
func (s *Server) prepare(ctx context.Context, t *turn) {
	t.fwd, t.view, t.body = t.client, t.client, wire.Segments{t.client.Raw()}
	if s.opt.Store == nil || t.open != "" {
		if t.open != "" {
			s.failOpen(t, t.open, nil)
		}
		s.met.Bytes.WithLabelValues("before").Add(float64(t.body.Len()))
		s.met.Bytes.WithLabelValues("after").Add(float64(t.body.Len()))
		return
	}
	if t.opening {
		s.prepareOpening(t)
		return
	}
	s.waitLocalFlush(ctx, t) // before loading, so a flush ending meanwhile is seen
	snap, known, err := s.loadKnown(ctx, t.sid)
	if err != nil {
		s.failOpen(t, "store", err)
		return
	}
	if fresh := s.waitForLease(ctx, t, snap); fresh != snap {
		snap, known = fresh, nil // reloaded whole
	}
	t.clock.done(phaseLoad)
	if known != nil {
		t.snap, t.state = snap, known
	} else if err := s.useSnapshot(t, snap); err != nil {
		s.failOpen(t, "state", err)
		return
	}
	t.clock.done(phaseDecode)
	if hasSplices(snap.Stats) {
		sp, err := s.loadSplices(ctx, t)
		if err != nil {
			s.failOpen(t, "store", err)
			return
		}
		t.splice = sp
	}
	view, err := s.buildView(t)
	if err != nil {
		s.failOpen(t, "splice", err)
		return
	}
	t.view = view
	t.clock.done(phaseView)
	s.render(t)
	t.clock.done(phaseRender)

	if !t.ep.countsTokens() && !t.side && s.opt.Flusher != nil {
		defer t.clock.done(phaseFlush)
		if trig, opts := s.dueTrigger(t); trig != "" {
			var body []byte
			if t.fwd == t.view && len(t.body) == 1 {
				body = t.body[0] // nothing was pruned or added: the forwarded bytes are the view's
			}
			s.waitIfCacheExpired(t)
			tk := s.startFlush(t, trig, t.view, body, opts, t.flushWait > 0)
			if tk != nil && t.flushWait > 0 {
				if s.waitTicket(ctx, t, tk) {
					if snap, err := s.load(ctx, t.sid); err == nil && snap.Version != t.snap.Version {
						if s.useSnapshot(t, snap) == nil {
							s.render(t)
						}
					}
				}
			}
		}
	}
}

// waitIfCacheExpired lets a request whose session's prompt cache has expired wait for the
// flush it found due (IdleFlushWait): forwarded unpruned, it would write the cache with the
// old prefix, and the flush's commit would make the next request write it again.
func (s *Server) waitIfCacheExpired(t *turn) {
	if s.opt.IdleFlushWait <= 0 || s.lastRequest(t).IsZero() || s.cacheAlive(t) {
		return
	}
	t.flushWait = max(t.flushWait, s.opt.IdleFlushWait)
	t.attrs = append(t.attrs, "cacheExpiredFlush", true)
}

// prepareOpening renders a conversation's opening request with an empty state (it only adds
// the query tool, so the next request's prefix starts the same): there is nothing to load.
func (s *Server) prepareOpening(t *turn) {
	t.snap, t.state = &store.Snapshot{}, pruner.NewState()
	if view, err := s.buildView(t); err == nil {
		t.view = view
		s.render(t)
	}
}

// failOpen forwards the client's bytes unchanged.
func (s *Server) failOpen(t *turn, reason string, err error) {
	t.open = reason
	t.fwd, t.view, t.body = t.client, t.client, wire.Segments{t.client.Raw()}
	s.met.FailOpen.WithLabelValues(reason).Inc()
	t.log.Warn("forwarding unpruned", "reason", reason, "err", err)
}

// storeCtx bounds one store call on the request path; it is detached from client
// cancellation only in background paths.
func (s *Server) storeCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.opt.StoreTimeout)
}

func (s *Server) load(ctx context.Context, sid string) (*store.Snapshot, error) {
	return s.timedLoad(ctx, func(c context.Context) (*store.Snapshot, error) { return s.opt.Store.Load(c, sid) })
}

// loadKnown loads the session like load, but when the store can leave out a state this
// process holds decoded (store.KnownStateLoader) it asks it to: when the stored version is
// the decoded one, the snapshot's State is nil, StateKnown is set and known is that state.
func (s *Server) loadKnown(ctx context.Context, sid string) (snap *store.Snapshot, known *pruner.State, err error) {
	kl, ok := s.opt.Store.(store.KnownStateLoader)
	cs, cached := s.states.Load(sid)
	if !ok || !cached {
		snap, err = s.load(ctx, sid)
		return snap, nil, err
	}
	snap, err = s.timedLoad(ctx, func(c context.Context) (*store.Snapshot, error) { return kl.LoadKnown(c, sid, cs.version) })
	if err != nil || !snap.StateKnown {
		return snap, nil, err
	}
	return snap, cs.state, nil
}

// timedLoad runs one store load with the request path's store timeout and metrics.
func (s *Server) timedLoad(ctx context.Context, load func(context.Context) (*store.Snapshot, error)) (*store.Snapshot, error) {
	c, cancel := s.storeCtx(ctx)
	defer cancel()
	start := time.Now()
	snap, err := load(c)
	s.met.StoreSeconds.WithLabelValues("load").Observe(time.Since(start).Seconds())
	if err != nil {
		s.met.StoreErrors.WithLabelValues("load").Inc()
	}
	return snap, err
}

// cachedState is a decoded state of one session version (States are immutable).
type cachedState struct {
	version uint64
	state   *pruner.State
}

// maxStateCache bounds the decoded-state cache; past it the cache starts over.
const maxStateCache = 4096

func (s *Server) useSnapshot(t *turn, snap *store.Snapshot) error {
	st, err := s.decodedState(t.sid, snap)
	if err != nil {
		return err
	}
	t.snap, t.state = snap, st
	return nil
}

// decodedState returns the engine state of a session snapshot: from the decoded-state cache
// when it holds this version, else decoded and cached.
func (s *Server) decodedState(sid string, snap *store.Snapshot) (*pruner.State, error) {
	if c, ok := s.states.Load(sid); ok && snap.Version > 0 && c.version == snap.Version {
		return c.state, nil
	}
	if snap.StateKnown {
		return nil, errors.New("proxy: the store left out a state this process no longer holds decoded")
	}
	st := pruner.NewState()
	if len(snap.State) > 0 {
		if err := st.UnmarshalBinary(snap.State); err != nil {
			return nil, err
		}
	}
	s.cacheState(sid, snap.Version, st)
	return st, nil
}

// cacheState remembers the decoded state of a session version (version 0, no state yet, is
// not cached).
func (s *Server) cacheState(sid string, version uint64, st *pruner.State) {
	if version == 0 {
		return
	}
	s.states.Store(sid, cachedState{version, st})
}

// buildView returns the model's view of the client request: hidden exchanges re-inserted and
// the context_tree_query tool added, unless the request offers no tools or asks for several
// choices (n > 1) and its history holds no query call.
func (s *Server) buildView(t *turn) (*wire.Request, error) {
	req, err := s.reinsert(t)
	if err != nil {
		return nil, err
	}
	if !s.opt.DisableQueryTool && (!manyChoices(t) && len(req.Tools) > 0 || callsQueryTool(req)) {
		has := false
		for _, tl := range req.Tools {
			if tl.Name == pruner.QueryToolName {
				has = true
				break
			}
		}
		if !has {
			req = req.WithTools(append(append([]*wire.Tool(nil), req.Tools...), pruner.QueryTool(t.f)))
		}
	}
	return req, nil
}

// callsQueryTool reports whether a request's messages hold a context_tree_query call.
func callsQueryTool(req *wire.Request) bool {
	for _, m := range req.Messages {
		for _, b := range m.Blocks {
			if b.Kind == wire.KindToolUse && b.Name == pruner.QueryToolName {
				return true
			}
		}
	}
	return false
}

// render runs the pruning engine over the view.
func (s *Server) render(t *turn) {
	start := time.Now()
	// The forwarded body is the rendered request's segments: the bytes it keeps from the
	// client's body (most of them) are sent from there, not copied into a new buffer first.
	res := pruner.RenderRequest(t.view, t.state, s.opt.Policy)
	t.fwd = res.Request // the view when Unchanged: it may add hidden exchanges and the tool
	t.body = t.fwd.Segments()
	s.met.RenderSeconds.Observe(time.Since(start).Seconds())
	if res.Fallback != "" {
		s.met.FailOpen.WithLabelValues("render-invalid").Inc()
		t.log.Warn("rendered request failed validation; forwarding the unpruned view", "why", res.Fallback)
	}
	if !res.Unchanged || t.view != t.client {
		s.met.RequestsPruned.Inc()
	}
	before := len(t.client.Raw())
	s.met.Bytes.WithLabelValues("before").Add(float64(before))
	s.met.Bytes.WithLabelValues("after").Add(float64(t.body.Len()))
	s.met.Tokens.WithLabelValues("before").Add(float64(estimateTokens(before)))
	s.met.Tokens.WithLabelValues("after").Add(float64(estimateTokens(t.body.Len())))
	// A lasting condition (say, a range that stays unresolved) is reported by every render;
	// only keys the session has not recorded yet are counted and written.
	var diags []store.Diagnostic
	for _, d := range res.Diagnostics {
		if t.snap.HasDiagnostic(d.Key) {
			continue
		}
		diags = append(diags, store.Diagnostic{Kind: string(d.Kind), Key: d.Key, Detail: d.Detail})
		s.met.Diagnostics.WithLabelValues(string(d.Kind)).Inc()
	}
	if len(diags) > 0 {
		s.background(func(ctx context.Context) {
			if err := s.opt.Store.AddDiagnostics(ctx, t.sid, diags); err != nil {
				s.met.StoreErrors.WithLabelValues("diagnostics").Inc()
				t.log.Warn("recording diagnostics failed", "err", err)
			}
		})
	}
}

func estimateTokens(n int) int { return (n + 3) / 4 }
