package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/condense-dev/condense/internal/wire"
)

// handlePassThrough forwards any other path as it came: to the Anthropic upstream when the
// request carries anthropic-version or x-api-key, else to the OpenAI one (upstreamURL).
func (s *Server) handlePassThrough(w http.ResponseWriter, r *http.Request) {
	s.passThrough(w, r, headerFormat(r.Header), "")
}

// headerFormat is the API a request without a body the proxy reads is for, by its headers:
// Anthropic with anthropic-version or x-api-key, else OpenAI.
func headerFormat(h http.Header) wire.Format {
	if h.Get("Anthropic-Version") != "" || h.Get("X-Api-Key") != "" {
		return wire.Anthropic
	}
	return wire.OpenAI
}

// handleResponsesPassThrough forwards the Responses API's other paths (compact, retrieve,
// delete, cancel, input_items) to the OpenAI upstream as they came, counted by why
// (condense_responses_passthrough_total).
func (s *Server) handleResponsesPassThrough(w http.ResponseWriter, r *http.Request) {
	reason := responsesPathReason(r.Method, r.URL.Path)
	s.met.ResponsesPassThrough.WithLabelValues(reason).Inc()
	s.passThrough(w, r, wire.Responses, reason)
}

// passThrough forwards a request as it came (forwardUntouched) once its session token, with
// session auth, is valid for the session its headers name.
func (s *Server) passThrough(w http.ResponseWriter, r *http.Request, f wire.Format, reason string) {
	rw, t := s.begin(w, r, f, epOther)
	defer s.finish(r, rw, t)
	t.passed = reason
	if len(s.opt.SessionSecret) > 0 {
		id, ok := headerIdentity(r.Header)
		if !ok {
			s.refuse(rw, t, &refusal{status: http.StatusUnauthorized, code: "invalid_session_token",
				msg: "condense proxy: with session auth a request the proxy does not prune must name its session (" + HeaderSession + ") and carry its " + HeaderToken})
			return
		}
		if !s.admit(rw, r, t, id) {
			return
		}
	}
	s.forwardUntouched(rw, r, t)
}

// handleProbe answers GET / and HEAD / itself (200, no upstream call): clients probe the
// base URL they were given (Claude Code sends HEAD / without any provider header), and no
// provider serves anything there worth relaying.
func (s *Server) handleProbe(w http.ResponseWriter, r *http.Request) {
	rw, t := s.begin(w, r, headerFormat(r.Header), epProbe)
	defer s.finish(r, rw, t)
	rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(rw, "condense proxy\n")
}

// Reasons of condense_responses_passthrough_total{reason}.
const (
	passPreviousResponse = "previous_response_id" // POST /v1/responses continuing a stored response
	passConversation     = "conversation"         // POST /v1/responses continuing a stored conversation
	passCompact          = "compact"              // POST /v1/responses/compact
	passInputItems       = "input_items"          // GET /v1/responses/{id}/input_items
	passCancel           = "cancel"               // POST /v1/responses/{id}/cancel
	passRetrieve         = "retrieve"             // GET /v1/responses/{id}
	passDelete           = "delete"               // DELETE /v1/responses/{id}
	passOther            = "other"                // any other method or path under /v1/responses
)

// responsesPathReason names a request to a Responses API path the proxy does not prune.
func responsesPathReason(method, path string) string {
	switch {
	case path == "/v1/responses/compact":
		return passCompact
	case strings.HasSuffix(path, "/input_items"):
		return passInputItems
	case strings.HasSuffix(path, "/cancel"):
		return passCancel
	case path == "/v1/responses" || strings.Count(path, "/") != 3:
		return passOther
	case method == http.MethodGet:
		return passRetrieve
	case method == http.MethodDelete:
		return passDelete
	}
	return passOther
}

// heldHistory returns why a Responses request body must go upstream unchanged — it continues
// history the provider holds (previous_response_id, conversation), which the proxy can neither
// see nor prune — or "" when it need not (also for a body that is not a JSON object).
func heldHistory(body []byte) string {
	vals, err := wire.TopLevel(body, "previous_response_id", "conversation")
	if err != nil {
		return ""
	}
	for i, reason := range []string{passPreviousResponse, passConversation} {
		if v := bytes.TrimSpace(vals[i]); len(v) > 0 && !bytes.Equal(v, []byte("null")) && !bytes.Equal(v, []byte(`""`)) {
			return reason
		}
	}
	return ""
}

// forwardUntouched forwards a request as it came, its body streamed, to format t.f's
// upstream and relays the answer as it comes (relayRaw).
func (s *Server) forwardUntouched(w http.ResponseWriter, r *http.Request, t *turn) {
	up, err := http.NewRequestWithContext(r.Context(), r.Method, s.upstreamURL(t.f, r.URL.Path, r.URL.RawQuery), r.Body)
	if err != nil {
		s.refuse(w, t, &refusal{status: http.StatusBadGateway, code: "bad_upstream_url", msg: err.Error()})
		return
	}
	up.ContentLength = r.ContentLength
	copyRequestHeaders(up.Header, r.Header)
	resp, err := s.do(up)
	if err != nil {
		if r.Context().Err() == nil {
			s.upstreamFailed(w, t, err)
		}
		return
	}
	defer resp.Body.Close()
	if err := relayRaw(w, resp); err != nil {
		s.abortBroken(r.Context(), w, t, nil, err)
	}
}

// forwardRead forwards a model request whose body the proxy read, as the client sent it
// (decoded), and relays the answer as it comes.
func (s *Server) forwardRead(ctx context.Context, w http.ResponseWriter, t *turn, body []byte) {
	resp, err := s.send(ctx, t, wire.Segments{body})
	if err != nil {
		if ctx.Err() == nil {
			s.upstreamFailed(w, t, err)
		}
		return
	}
	defer resp.Body.Close()
	if err := relayRaw(w, resp); err != nil {
		s.abortBroken(ctx, w, t, nil, err)
	}
}

// relayRaw copies a response as it arrives, flushing after every read so streams stay live.
// It returns the error that ended reading the provider's body before its end (nil at its end,
// or when the client is gone).
func relayRaw(w http.ResponseWriter, resp *http.Response) error {
	copyResponseHeaders(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	fl, _ := w.(http.Flusher)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return nil
			}
			if fl != nil {
				fl.Flush()
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
