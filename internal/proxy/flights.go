package proxy

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/condense-dev/condense/internal/cachepolicy"
	"github.com/condense-dev/condense/internal/flush"
	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/summarize"
	"github.com/condense-dev/condense/internal/wire"
)

// maxFlushTrack bounds how long the proxy tracks a flush it started (for flushWaitTimeout).
const maxFlushTrack = 10 * time.Minute

// flushOpts are the cache-aware parts of a flush job.
type flushOpts struct {
	weigh        bool // weigh against the prompt cache (flush.Job.Cache)
	planMessages int  // flush.Job.PlanMessages
	// last is when the prompt cache was last written (zero: unknown).
	last time.Time
}

// contextWindow returns a model's context window in tokens (a conservative table; unknown
// models get 200k).
func contextWindow(model string) int {
	m := strings.ToLower(model)
	switch {
	case strings.Contains(m, "[1m]"), strings.HasPrefix(m, "gpt-4.1"):
		return 1_000_000
	case strings.HasPrefix(m, "gpt-5"):
		return 400_000
	case strings.HasPrefix(m, "gpt-4o"), strings.HasPrefix(m, "gpt-4-turbo"), strings.HasPrefix(m, "o1"), strings.HasPrefix(m, "o3"), strings.HasPrefix(m, "o4"):
		return 128_000
	}
	return 200_000
}

// lastRequest returns when the session's previous request was forwarded (zero: unknown): the
// later of what this process saw and what the store's counter says (another replica, or this
// one before a restart).
func (s *Server) lastRequest(t *turn) time.Time {
	var last time.Time
	if t.snap != nil {
		if ms := t.snap.Stats[statLastRequestMs]; ms > 0 {
			last = time.UnixMilli(ms)
		}
	}
	if l, ok := s.lastReq.Load(t.sid); ok && l.After(last) {
		last = l
	}
	return last
}

// noteRequest remembers that a request of the session is being forwarded now (it writes the
// provider's prompt cache).
func (s *Server) noteRequest(t *turn) {
	s.lastReq.Swap(t.sid, t.at)
}

// cacheAlive reports whether the prompt cache the session's previous request wrote is still
// alive at the request's arrival (the 1-hour lifetime when the request carries ttl "1h"
// cache markers, else 5 minutes).
func (s *Server) cacheAlive(t *turn) bool {
	return cachepolicy.Alive(s.lastRequest(t), t.at, cachepolicy.RequestTTL(t.client))
}

// dueTrigger returns the flush trigger that fires for this request ("" for none) and how to
// weigh the flush: manual (a pending admin flush, unless one runs or the lease is held), budget,
// delta, agent-message after a final reply, and with Trigger.CacheAware retry and mid-run.
func (s *Server) dueTrigger(t *turn) (string, flushOpts) {
	last := s.lastRequest(t)
	if s.flushPending(t) && !s.flushRunning(t.sid) && t.snap.Lease == nil {
		return "manual", flushOpts{}
	}
	tokens := estimateTokens(t.body.Len())
	window := float64(contextWindow(t.client.Model))
	if th := s.opt.Trigger.BudgetThreshold; th > 0 && float64(tokens) >= min(BudgetCap, th*window) {
		return "budget", flushOpts{}
	}
	weigh := flushOpts{weigh: s.opt.Trigger.CacheAware, last: last}
	if d := s.opt.Trigger.TurnDelta; d > 0 {
		if last := t.snap.Stats[statLastTokens]; last > 0 && float64(int64(tokens)-last) >= d*window {
			return "delta", weigh
		}
	}
	if t.text && !s.opt.Trigger.OnDemand {
		if key, ok := finalReply(t.view.Messages, s.toolTurn); ok {
			if lastKey, seen := s.finals.Load(t.sid); !seen || lastKey != key {
				s.finals.Swap(t.sid, key)
				return "agent-message", weigh
			}
		}
	}
	if !s.opt.Trigger.CacheAware {
		return "", flushOpts{}
	}
	if t.snap.Stats[flush.StatFlushPending] > 0 {
		return "retry", weigh
	}
	if s.opt.Trigger.MidRun {
		var cut int
		var key uint64
		if msgs := t.view.Messages; s.opt.Policy.Observations.Enabled {
			cut, key = cachepolicy.MidRunCutFunc(msgs, s.opt.Trigger.GraceTurns, func(i int) bool { return s.toolTurn(msgs, i) })
		} else {
			cut, key = cachepolicy.MidRunCut(t.view.Messages, s.opt.Trigger.GraceTurns)
		}
		if cut == 0 {
			return "", flushOpts{}
		}
		lastKey, _ := s.midCuts.Load(t.sid)
		if !cachepolicy.MidRunDue(key, lastKey, s.cacheAlive(t)) {
			return "", flushOpts{}
		}
		s.midCuts.Swap(t.sid, key)
		weigh.planMessages = cut
		return "mid-run", weigh
	}
	return "", flushOpts{}
}

// finalReply reports whether the last assistant message of msgs is a final reply, key
// identifying it: a message follows it, it is no tool-using turn (toolTurn, as
// pruner.ToolTurnFunc) and an earlier one is (a flush has something to prune).
func finalReply(msgs []*wire.Message, toolTurn func([]*wire.Message, int) bool) (key uint64, ok bool) {
	last := -1
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != wire.RoleAssistant {
			continue
		}
		if last < 0 {
			if i == len(msgs)-1 || toolTurn(msgs, i) {
				return 0, false
			}
			last = i
		} else if toolTurn(msgs, i) {
			return xxhash.Sum64(msgs[last].Raw()) ^ uint64(last), true
		}
	}
	return 0, false
}

// startFlush hands a flush of req (serialized as body; nil: when the job is built) to the
// flusher, claiming the session's flight first; the channel closes when it ended. With waited
// the job is submitted before it returns (nil when that fails), else in the background.
func (s *Server) startFlush(t *turn, trigger string, req *wire.Request, body []byte, o flushOpts, waited bool) <-chan struct{} {
	job := &flush.Job{Request: req, Queued: flush.Queued{Session: t.sid, Format: t.f, Trigger: trigger,
		SessionModel: s.sessionEndpoint(t), PlanMessages: o.planMessages}}
	if t.snap != nil && t.state != nil {
		job.State, job.StateVersion = t.state, t.snap.Version // the planner skips decoding it again
		if req == t.view {
			job.Rendered = t.fwd // and the weighing skips rendering it again
		}
	}
	if o.weigh {
		job.Cache = &flush.CacheCheck{At: t.at, LastRequest: o.last, Requests: s.contextRequests(t) - 1,
			Horizon: s.opt.Trigger.Horizon, MaxHorizon: s.opt.Trigger.MaxHorizon}
	}
	submit := func() *flush.Ticket {
		job.Body = body // nil: the flusher uses req (a queue serializes it)
		tk, err := s.opt.Flusher.Submit(s.ctx, job)
		if err != nil {
			t.log.Warn("starting flush failed", "trigger", trigger, "err", err)
			return nil
		}
		s.met.FlushTriggers.WithLabelValues(trigger).Inc()
		t.log.Debug("flush submitted", "trigger", trigger) // the flusher logs the flush's one line
		return tk
	}
	_, local := s.opt.Flusher.(*flush.InProcess)
	f := &flight{done: make(chan struct{}), manual: trigger == "manual", local: local}
	registered, running := s.claimFlight(t.sid, f)
	if f.manual && !registered {
		return running.done // a flush is already running: no second admin flush
	}
	track := func(tk *flush.Ticket) {
		if registered {
			defer s.flights.CompareAndDelete(t.sid, f)
		}
		defer close(f.done)
		if tk == nil {
			return
		}
		c, cancel := context.WithTimeout(s.ctx, maxFlushTrack)
		defer cancel()
		res, err := tk.Wait(c)
		if f.manual && s.ctx.Err() == nil && (res == nil || res.Outcome != flush.OutcomeBusy) {
			s.flushServed(t)
		}
		if err != nil && c.Err() == nil {
			t.log.Debug("flush failed", "trigger", trigger, "err", err) // the flusher's flush line says so
		} else if res != nil && (res.Outcome == flush.OutcomeFlushed || res.Outcome == flush.OutcomePartial) {
			s.warmState(t.f, t.sid, res.Version)
		}
	}
	if waited {
		tk := submit()
		if tk == nil {
			track(nil) // ends the claimed flight
			return nil
		}
		go track(tk)
		return f.done
	}
	s.bgAdd()
	go func() {
		tk := submit()
		s.bgDone()
		track(tk)
	}()
	return f.done
}

// flight is a flush this process started for a session.
type flight struct {
	done   chan struct{} // closed when the flush ended
	manual bool          // an admin flush ("manual")
	local  bool          // run by this process (flush.InProcess), which warms its commit before done closes
}

// running reports whether the flush has not ended.
func (f *flight) running() bool {
	select {
	case <-f.done:
		return false
	default:
		return true
	}
}

// claimFlight registers f as the session's flight unless a running flush may not be replaced:
// a manual flush replaces none (the running one is returned), and none replaces a running
// manual one (it then runs unregistered). The claim is atomic.
func (s *Server) claimFlight(sid string, f *flight) (registered bool, running *flight) {
	for {
		v, loaded := s.flights.LoadOrStore(sid, f)
		if !loaded {
			return true, nil
		}
		old := v.(*flight)
		if old.running() && (f.manual || old.manual) {
			return false, old
		}
		if s.flights.CompareAndSwap(sid, old, f) {
			return true, nil
		}
	}
}

// flushServed raises the session's served admin flush requests to those the request saw,
// once its manual flush ended with any outcome but a held lease or this server's shutdown.
func (s *Server) flushServed(t *turn) {
	s.noteServed(t.sid, t.snap.Stats[statFlushRequested])
	ctx, cancel := s.storeCtx(s.ctx)
	defer cancel()
	err := s.opt.Store.UpdateStats(ctx, t.sid, store.StatsUpdate{Max: map[string]int64{statFlushServed: t.snap.Stats[statFlushRequested]}})
	if err != nil {
		s.met.StoreErrors.WithLabelValues("update_stats").Inc()
		t.log.Warn("recording the served admin flush failed", "err", err)
	}
}

// flushRunning reports whether a flush this process started for the session has not ended.
func (s *Server) flushRunning(sid string) bool {
	v, ok := s.flights.Load(sid)
	return ok && v.(*flight).running()
}

// flushPending reports whether the request saw more admin flush requests than were served:
// the snapshot's counter, or more that this process's manual flushes served (noteServed).
func (s *Server) flushPending(t *turn) bool {
	served := t.snap.Stats[statFlushServed]
	if v, ok := s.servedFlush.Load(t.sid); ok {
		served = max(served, v)
	}
	return t.snap.Stats[statFlushRequested] > served
}

// noteServed raises the session's record of admin flush requests this process served to n.
func (s *Server) noteServed(sid string, n int64) {
	for {
		v, had := s.servedFlush.LoadOrStore(sid, n)
		if !had || v >= n || s.servedFlush.CompareAndSwap(sid, v, n) {
			return
		}
	}
}

// sessionEndpoint describes the session's own model, the summarizer's fallback target, in the
// session's own API. The credentials of the request are reused (they never leave this
// process), with an OpenAI request's organization, project and ChatGPT account headers.
func (s *Server) sessionEndpoint(t *turn) *summarize.Endpoint {
	ep := &summarize.Endpoint{Model: t.client.Model, Header: http.Header{}}
	if t.f != wire.Anthropic {
		ep.Format, ep.BaseURL = wire.OpenAI, s.opt.OpenAIBaseURL
		if t.f == wire.Responses {
			ep.Format = wire.Responses
		}
		ep.APIKey = strings.TrimPrefix(t.hdr.Get("Authorization"), "Bearer ")
		for _, k := range []string{"Openai-Organization", "Openai-Project", "Chatgpt-Account-Id"} {
			if v := t.hdr.Get(k); v != "" {
				ep.Header.Set(k, v)
			}
		}
	} else {
		ep.Format, ep.BaseURL = wire.Anthropic, s.opt.AnthropicBaseURL
		ep.APIKey = t.hdr.Get("X-Api-Key")
		for _, k := range []string{"Anthropic-Version", "Anthropic-Beta", "Authorization"} {
			if v := t.hdr.Get(k); v != "" {
				ep.Header.Set(k, v)
			}
		}
	}
	return ep
}

// waitUntil is the latest time the request may still wait for flushes.
func (t *turn) waitUntil() time.Time { return t.t0.Add(t.flushWait) }

// waitTicket waits for a flush until the request's wait deadline (FlushWaitTimeout after it
// arrived, for all waits of the request together) and reports whether it finished.
func (s *Server) waitTicket(ctx context.Context, t *turn, done <-chan struct{}) bool {
	timer := time.NewTimer(time.Until(t.waitUntil()))
	defer timer.Stop()
	select {
	case <-done:
		s.met.FlushWaits.WithLabelValues("done").Inc()
		return true
	case <-timer.C:
		s.met.FlushWaits.WithLabelValues("timeout").Inc()
	case <-ctx.Done():
	}
	return false
}

// waitLocalFlush waits (at most FlushWaitTimeout) for an unfinished flush of the session
// that this process started.
func (s *Server) waitLocalFlush(ctx context.Context, t *turn) {
	if s.opt.FlushWaitTimeout <= 0 {
		return
	}
	if v, ok := s.flights.Load(t.sid); ok {
		if f := v.(*flight); f.running() {
			s.waitTicket(ctx, t, f.done)
		}
	}
}

// waitForLease waits (at most FlushWaitTimeout) while another flusher — another replica or a
// `condense pruner` worker — holds the session's flush lease, and returns the freshest
// snapshot.
func (s *Server) waitForLease(ctx context.Context, t *turn, snap *store.Snapshot) *store.Snapshot {
	if s.opt.FlushWaitTimeout <= 0 {
		return snap
	}
	if snap.Lease == nil {
		return snap
	}
	deadline := t.waitUntil()
	for time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(min(25*time.Millisecond, time.Until(deadline)))
		fresh, err := s.load(ctx, t.sid)
		if err != nil {
			return snap
		}
		snap = fresh
		if snap.Lease == nil {
			s.met.FlushWaits.WithLabelValues("done").Inc()
			return snap
		}
	}
	s.met.FlushWaits.WithLabelValues("timeout").Inc()
	return snap
}

// onFinal starts the next flush when a response is a final answer. It runs before the
// response's last bytes go out, so the client's next request finds the flush under way (and
// waits for it up to flushWaitTimeout). A text turn's answer is never final here (finalReply).
func (s *Server) onFinal(t *turn, out *outcome) {
	if !t.stored() || t.side || t.text || s.opt.Store == nil {
		return
	}
	if out.final && s.opt.Flusher != nil && !s.opt.Trigger.OnDemand && len(out.viewTail) > 0 {
		msgs, err := parseMessages(t.f, out.viewTail)
		if err != nil {
			t.log.Warn("cannot build the flush transcript", "err", err)
			return
		}
		all := append(append([]*wire.Message(nil), t.view.Messages...), msgs...)
		// This request has just written the prompt cache: the flush is weighed against it.
		s.startFlush(t, "agent-message", t.view.WithMessages(all), nil,
			flushOpts{weigh: s.opt.Trigger.CacheAware, last: t.at}, false)
	}
}
