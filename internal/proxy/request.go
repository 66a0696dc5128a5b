package proxy

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/condense-dev/condense/internal/logs"
	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/wire"
)

// turn is one client request as it moves through the proxy.
type turn struct {
	f      wire.Format
	ep     endpoint
	sid    string
	log    *slog.Logger
	hdr    http.Header
	path   string
	query  string
	client *wire.Request // as the client sent it
	view   *wire.Request // client + re-inserted hidden exchanges + query tool (the model's view)
	fwd    *wire.Request // what goes upstream (rendered view); continuations append to it
	body   wire.Segments // serialized fwd
	snap   *store.Snapshot
	state  *pruner.State
	splice *spliceSet
	open   string // non-empty: failing open for this reason (forward the client bytes)
	// opening is a conversation's first request under a conversation key: no stored session.
	opening bool
	// side is a request that offers no tools (a title, a summary, a token count) and is no
	// text turn: it neither triggers flushes nor moves the session's last values.
	side bool
	// text is a turn of a text-protocol agent (classify: observations on, no tools offered,
	// an assistant message and no tool call in its history): flushes follow its request side.
	text bool
	// recoverText: the model's replies may be text recovery requests, answered in-proxy
	// (recoversText; set when the answer is relayed).
	recoverText bool
	t0          time.Time
	// at is when the request arrived by the server's clock (Options.Now).
	at time.Time
	// flushWait is the total time the request may wait for flushes (FlushWaitTimeout).
	flushWait time.Duration
	// clock times the phases before the request goes upstream.
	clock phaseClock

	// For the request's log line (finish):
	method string   // the HTTP method
	passed string   // why the request went upstream unchanged (condense_responses_passthrough_total's reason)
	out    *outcome // what a relayed model response taught the proxy (nil: none was relayed)
	err    error    // why the provider's answer did not reach the client whole
	// aborted is a response whose provider's answer broke off while it was relayed: the
	// client's connection was aborted.
	aborted bool
	attrs   []any // more attributes of the line
}

func (s *Server) handleModel(w http.ResponseWriter, r *http.Request, f wire.Format, ep endpoint) {
	rw, t := s.begin(w, r, f, ep)
	defer s.finish(r, rw, t)
	s.serveModel(rw, r, t)
}

// serveModel reads, prunes and forwards a model request and relays its answer.
func (s *Server) serveModel(w http.ResponseWriter, r *http.Request, t *turn) {
	t.clock.start(t.t0)
	body, rf := s.readRequestBody(w, r)
	if rf != nil {
		s.refuse(w, t, rf)
		return
	}
	if r.Header.Get("Content-Encoding") != "" { // decoded: it goes upstream without the header
		t.hdr = r.Header.Clone()
		t.hdr.Del("Content-Encoding")
	}
	t.clock.done(phaseRead)
	if t.f == wire.Responses {
		if reason := heldHistory(body); reason != "" { // the provider holds the history: nothing to prune
			if len(s.opt.SessionSecret) > 0 && !s.admit(w, r, t, s.sessionOf(t.f, r.Header, body)) {
				return
			}
			s.met.ResponsesPassThrough.WithLabelValues(reason).Inc()
			t.passed = reason
			s.forwardRead(r.Context(), w, t, body)
			return
		}
	}
	id := s.sessionOf(t.f, r.Header, body)
	t.sid, t.opening = id.sid, id.opening
	req, err := s.parses.parse(t.f, t.sid, body)
	if err != nil {
		s.refuse(w, t, &refusal{status: http.StatusBadRequest, code: "malformed_request", msg: "condense proxy: malformed request body: " + err.Error()})
		return
	}
	t.log = s.log.With("session", t.sid, "endpoint", string(t.ep))
	if k := req.DuplicateField(); k != "" {
		s.refuse(w, t, duplicateMember(k))
		return
	}
	t.client = req
	t.side, t.text = s.classify(req)
	if !s.admit(w, r, t, id) {
		return
	}
	s.parses.put(t.f, t.sid, req)
	if err := store.ValidateSessionID(t.sid); err != nil {
		if id.src == SourceHeader {
			s.refuse(w, t, &refusal{status: http.StatusBadRequest, code: "invalid_session_id", msg: "condense proxy: invalid " + HeaderSession + ": " + err.Error()})
			return
		}
		t.open = "session-id"
	}
	t.clock.done(phaseParse)

	s.prepare(r.Context(), t)
	if !t.ep.countsTokens() && t.open == "" && !t.opening && !t.side {
		s.noteRequest(t)
	}
	s.observeOwnTime(t)

	resp, err := s.send(r.Context(), t, t.body)
	if err != nil {
		if r.Context().Err() == nil {
			s.upstreamFailed(w, t, err)
		}
		return
	}
	defer resp.Body.Close()
	if t.ep.countsTokens() || resp.StatusCode != http.StatusOK {
		t.out = &outcome{}
		if err := relayRaw(w, resp); err != nil {
			s.abortBroken(r.Context(), w, t, nil, err)
		}
		return
	}
	// The request's bookkeeping (finish) runs once the handler has returned: a streamed
	// answer's closing chunk goes out at that return and must not wait for the stats or a log
	// line.
	t.out = s.relay(r.Context(), w, t, resp)
}

// classify tells a side request (it offers no tools: a title, a summary, a token count)
// from a turn; with observations on, a request without tools whose history holds an
// assistant message and no tool call is a text-protocol agent's turn (text).
func (s *Server) classify(req *wire.Request) (side, text bool) {
	if len(req.Tools) > 0 {
		return false, false
	}
	if !s.opt.Policy.Observations.Enabled {
		return true, false
	}
	for _, m := range req.Messages {
		if m.Role != wire.RoleAssistant {
			continue
		}
		for _, b := range m.Blocks {
			if b.Kind == wire.KindToolUse { // a tool-using client's side call over its history
				return true, false
			}
		}
		text = true
	}
	return !text, text
}

// duplicateMember refuses a body that names top-level member k more than once: the proxy
// would prune one copy while the provider may read another.
func duplicateMember(k string) *refusal {
	return &refusal{status: http.StatusBadRequest, code: "duplicate_member",
		msg: fmt.Sprintf("condense proxy: the request body has more than one top-level %q member; send each member once", k)}
}

// admit reports whether the request may go on: session auth is off, or its X-Condense-Token
// is valid for the session id (authorized). Otherwise it answers 401.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, t *turn, id identity) bool {
	if s.authorized(r, id.sid) {
		return true
	}
	s.refuse(w, t, &refusal{status: http.StatusUnauthorized, code: "invalid_session_token", attrs: []any{"source", string(id.src)},
		msg: "condense proxy: missing or invalid " + HeaderToken + " for this session"})
	return false
}

// stored reports whether the request belongs to a stored session: it is not failing open and
// not a conversation's opening request.
func (t *turn) stored() bool { return t.open == "" && !t.opening }

// observeOwnTime records the request's own time before it goes upstream, in total and by
// phase, and logs the phases of a request that took SlowRequestLog or longer.
func (s *Server) observeOwnTime(t *turn) {
	own := time.Since(t.t0)
	s.met.AddedSeconds.WithLabelValues(string(t.ep)).Observe(own.Seconds())
	for p, d := range t.clock.spent {
		s.met.PhaseSeconds[p].Observe(d.Seconds())
	}
	if s.opt.SlowRequestLog > 0 && own >= s.opt.SlowRequestLog {
		attrs := append([]any{"ownMs", logs.Ms(own), "bytes", len(t.client.Raw())}, t.clock.attrs()...)
		t.log.Info("slow request", attrs...)
	}
}
