package proxy

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/condense-dev/condense/internal/logs"
	"github.com/condense-dev/condense/internal/wire"
)

// recorder is the ResponseWriter of a client request the proxy answers (a model request, a
// pass-through or a probe): it counts the status in condense_requests_total when the status
// is sent and keeps it, with the proxy's own error code, for the request's log line.
type recorder struct {
	http.ResponseWriter
	s       *Server
	t       *turn
	status  int    // the status sent (0: none yet)
	refused string // X-Condense-Error of the response: the proxy answered with an error itself
}

func (w *recorder) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
		w.refused = w.Header().Get("X-Condense-Error")
		w.s.countRequest(w.t, code)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Flush sends what was written (the status first, when none was).
func (w *recorder) Flush() {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if fl, ok := w.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
}

// Unwrap gives http.ResponseController the connection's writer.
func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// countRequest counts a request by the status the client got.
func (s *Server) countRequest(t *turn, code int) {
	s.met.Requests.WithLabelValues(string(t.ep), t.f.String(), strconv.Itoa(code)).Inc()
}

// begin starts a client request the proxy answers and logs; finish ends it.
func (s *Server) begin(w http.ResponseWriter, r *http.Request, f wire.Format, ep endpoint) (*recorder, *turn) {
	s.active.Add(1)
	t := &turn{f: f, ep: ep, hdr: r.Header, path: r.URL.Path, query: r.URL.RawQuery, t0: time.Now(), at: s.now(),
		flushWait: s.opt.FlushWaitTimeout, method: r.Method, log: s.log.With("endpoint", string(ep))}
	return &recorder{ResponseWriter: w, s: s, t: t}, t
}

// finish ends a request begun by begin, after the handler returned: it records a relayed
// response's session counters and logs the request's line. Defer it directly: it recovers an
// abortResponse panic to log, then panics on.
func (s *Server) finish(r *http.Request, w *recorder, t *turn) {
	defer s.active.Add(-1)
	p := recover()
	gone := r.Context().Err() != nil
	switch {
	case w.status == 0 && gone:
		s.countRequest(t, statusClientGone)
	case w.status == 0 && p == nil:
		w.status = http.StatusOK // net/http sends 200 for a handler that wrote nothing
		s.countRequest(t, w.status)
	}
	if p != nil {
		t.aborted = !gone
		s.logRequest(w, t, gone)
		panic(p)
	}
	s.background(func(ctx context.Context) {
		if t.out != nil {
			if st := s.sessionStats(t, t.out.usage); st != nil {
				s.storeStats(ctx, t, st)
			}
		}
		s.logRequest(w, t, gone)
	})
}

// statusClientGone is the status logged and counted for a request whose client went away
// before it had a response (nginx's convention).
const statusClientGone = 499

// logRequest logs a request's one line, "request": info for a 2xx (or 1xx, 3xx), warn for a
// 4xx — refused by the proxy, by the provider, or the client gone — and error for a 5xx or a
// response aborted after the provider's broke off.
func (s *Server) logRequest(w *recorder, t *turn, gone bool) {
	status := w.status
	if status == 0 && gone {
		status = statusClientGone
	}
	level := slog.LevelInfo
	switch {
	case t.aborted || status >= 500:
		level = slog.LevelError
	case status >= 400:
		level = slog.LevelWarn
	}
	attrs := make([]any, 0, 24)
	attrs = append(attrs, "status", status)
	if t.ep == epOther || t.ep == epProbe {
		attrs = append(attrs, "format", t.f.String(), "method", t.method, "path", t.path)
	}
	if t.passed != "" {
		attrs = append(attrs, "passThrough", t.passed)
	}
	if t.client != nil {
		attrs = append(attrs, "bytesBefore", len(t.client.Raw()), "bytesAfter", t.body.Len(), "failOpen", t.open)
	}
	if t.out != nil && status == http.StatusOK {
		attrs = append(attrs, "final", t.out.final, "hidden", t.out.splice != nil)
	}
	if w.refused != "" {
		attrs = append(attrs, "proxyError", w.refused)
	}
	if t.aborted {
		attrs = append(attrs, "aborted", true)
	}
	if t.err != nil {
		attrs = append(attrs, "err", t.err.Error())
	}
	attrs = append(attrs, t.attrs...)
	attrs = append(attrs, "ms", logs.Ms(time.Since(t.t0)))
	t.log.Log(context.Background(), level, "request", attrs...)
}

// refuse answers a request with an error the proxy makes itself (writeError), keeping the
// refusal's attributes for the request's log line.
func (s *Server) refuse(w http.ResponseWriter, t *turn, rf *refusal) {
	t.attrs = append(t.attrs, rf.attrs...)
	writeError(w, t.f, rf.status, rf.code, rf.msg)
}
