package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/condense-dev/condense/internal/config"
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
	// side is a request that offers no tools (a title, a summary, a token count): no query
	// tool is added, and it neither triggers flushes nor moves the session's last values.
	side bool
	t0   time.Time
	// at is when the request arrived by the server's clock (Options.Now).
	at time.Time
	// flushWait is the total time the request may wait for flushes (FlushWaitTimeout).
	flushWait time.Duration
	// clock times the phases before the request goes upstream.
	clock phaseClock
}

func (s *Server) handleModel(w http.ResponseWriter, r *http.Request, f wire.Format, ep endpoint) {
	t := &turn{f: f, ep: ep, hdr: r.Header, path: r.URL.Path, query: r.URL.RawQuery, t0: time.Now(), at: s.now(), flushWait: s.opt.FlushWaitTimeout}
	t.clock.start(t.t0)
	code, counted := 0, false
	count := func() {
		if code != 0 && !counted {
			counted = true
			s.met.Requests.WithLabelValues(string(ep), f.String(), strconv.Itoa(code)).Inc()
		}
	}
	defer count()
	s.bodyDeadline(w)
	body, err := readBody(r, s.opt.MaxBodyBytes)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			code = http.StatusRequestEntityTooLarge
			writeError(w, f, code, "request_too_large", fmt.Sprintf("condense proxy: request body exceeds %d bytes", s.opt.MaxBodyBytes))
			return
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			code = http.StatusRequestTimeout
			s.log.Warn("the client did not send its request body in time", "endpoint", string(ep), "timeout", s.opt.BodyReadTimeout.String(), "read", len(body))
			writeError(w, f, code, "body_read_timeout", fmt.Sprintf("condense proxy: the request body did not arrive within %s", s.opt.BodyReadTimeout))
			return
		}
		code = http.StatusBadRequest
		writeError(w, f, code, "body_read_failed", "condense proxy: reading request body: "+err.Error())
		return
	}
	t.clock.done(phaseRead)
	if f == wire.Responses {
		if reason := heldHistory(body); reason != "" { // the provider holds the history: nothing to prune
			s.met.ResponsesPassThrough.WithLabelValues(reason).Inc()
			t.log = s.log.With("endpoint", string(ep))
			s.forwardRead(r.Context(), w, t, body, func(c int) { code = c; count() })
			return
		}
	}
	id := s.sessionOf(f, r.Header, body)
	t.sid, t.opening = id.sid, id.opening
	req, err := s.parses.parse(f, t.sid, body)
	if err != nil {
		code = http.StatusBadRequest
		writeError(w, f, code, "malformed_request", "condense proxy: malformed request body: "+err.Error())
		return
	}
	t.client = req
	t.side = len(req.Tools) == 0
	t.log = s.log.With("session", t.sid, "endpoint", string(ep))
	if len(s.opt.SessionSecret) > 0 && !config.VerifySessionToken(s.opt.SessionSecret, t.sid, r.Header.Get(HeaderToken)) {
		code = http.StatusUnauthorized
		t.log.Warn("rejected request without a valid session token", "source", string(id.src))
		writeError(w, f, code, "invalid_session_token", "condense proxy: missing or invalid "+HeaderToken+" for this session")
		return
	}
	s.parses.put(f, t.sid, req)
	if err := store.ValidateSessionID(t.sid); err != nil {
		if id.src == SourceHeader {
			code = http.StatusBadRequest
			writeError(w, f, code, "invalid_session_id", "condense proxy: invalid "+HeaderSession+": "+err.Error())
			return
		}
		t.open = "session-id"
	}
	t.clock.done(phaseParse)

	s.prepare(r.Context(), t)
	if !ep.countsTokens() && t.open == "" && !t.opening && !t.side {
		s.noteRequest(t)
	}
	s.observeOwnTime(t)

	resp, err := s.send(r.Context(), t, t.body)
	if err != nil {
		code = http.StatusBadGateway
		if r.Context().Err() != nil {
			code = 499
			return
		}
		s.upstreamFailed(w, f, t.log, ep, err)
		return
	}
	defer resp.Body.Close()
	code = resp.StatusCode
	count() // now: a JSON response reaches the client before the handler returns
	if ep.countsTokens() || resp.StatusCode != http.StatusOK {
		if err := relayRaw(w, resp); err != nil {
			s.abortBroken(r.Context(), w, t.log, ep, nil, err)
		}
		s.recordStats(t, usage{})
		return
	}
	out := s.relay(r.Context(), w, t, resp)
	// The request's bookkeeping runs once the handler has returned: a streamed answer's
	// closing chunk goes out at that return and must not wait for the stats or a log line.
	s.background(func(ctx context.Context) {
		if st := s.sessionStats(t, out.usage); st != nil {
			s.storeStats(ctx, t, st)
		}
		s.afterResponse(t, out)
	})
}

// stored reports whether the request belongs to a stored session: it is not failing open and
// not a conversation's opening request.
func (t *turn) stored() bool { return t.open == "" && !t.opening }

// bodyDeadline bounds reading the request body (BodyReadTimeout); net/http lifts the deadline
// once the body is read, so it never bounds the response.
func (s *Server) bodyDeadline(w http.ResponseWriter) {
	if s.opt.BodyReadTimeout > 0 {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.opt.BodyReadTimeout))
	}
}

// maxPreGrow is the most readBody allocates for a body before its bytes arrive: a declared
// Content-Length alone must not make the proxy hold its size.
const maxPreGrow = 1 << 20

// readBody reads a request body of at most limit bytes into one buffer, sized by the declared
// Content-Length (at most maxPreGrow before bytes arrive) and doubled as they do.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	body := http.MaxBytesReader(nil, r.Body, limit)
	want := int64(-1) // the capacity a body of the declared length needs
	size := int64(bytes.MinRead)
	if r.ContentLength > 0 && r.ContentLength <= limit {
		want = r.ContentLength + bytes.MinRead
		size = min(want, maxPreGrow)
	}
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			n := int64(2*cap(buf)) + bytes.MinRead
			if want > int64(cap(buf)) {
				n = min(n, want)
			}
			buf = slices.Grow(buf, int(n)-len(buf))
		}
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// observeOwnTime records the request's own time before it goes upstream, in total and by
// phase, and logs the phases of a request that took SlowRequestLog or longer.
func (s *Server) observeOwnTime(t *turn) {
	own := time.Since(t.t0)
	s.met.AddedSeconds.WithLabelValues(string(t.ep)).Observe(own.Seconds())
	for p, d := range t.clock.spent {
		s.met.PhaseSeconds[p].Observe(d.Seconds())
	}
	if s.opt.SlowRequestLog > 0 && own >= s.opt.SlowRequestLog {
		attrs := append([]any{"own_ms", float64(own.Microseconds()) / 1000, "bytes", len(t.client.Raw())}, t.clock.attrs()...)
		t.log.Info("slow request", attrs...)
	}
}
