package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/condense-dev/condense/internal/wire"
)

// handlePassThrough forwards any other path untouched: Anthropic when the request carries
// anthropic-version or x-api-key, OpenAI otherwise.
func (s *Server) handlePassThrough(w http.ResponseWriter, r *http.Request) {
	f := wire.OpenAI
	if r.Header.Get("Anthropic-Version") != "" || r.Header.Get("X-Api-Key") != "" {
		f = wire.Anthropic
	}
	s.forwardUntouched(w, r, f)
}

// handleResponsesPassThrough forwards the Responses API's other paths (compact, retrieve,
// delete, cancel, input_items) to the OpenAI upstream untouched, counted by why
// (condense_responses_passthrough_total).
func (s *Server) handleResponsesPassThrough(w http.ResponseWriter, r *http.Request) {
	s.met.ResponsesPassThrough.WithLabelValues(responsesPathReason(r.Method, r.URL.Path)).Inc()
	s.forwardUntouched(w, r, wire.Responses)
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

// forwardUntouched forwards a request as it came, its body streamed, to format f's upstream
// and relays the answer as it comes (relayRaw), counted under endpoint "other".
func (s *Server) forwardUntouched(w http.ResponseWriter, r *http.Request, f wire.Format) {
	up, err := http.NewRequestWithContext(r.Context(), r.Method, s.upstreamURL(f, r.URL.Path, r.URL.RawQuery), r.Body)
	if err != nil {
		writeError(w, f, http.StatusBadGateway, "bad_upstream_url", err.Error())
		return
	}
	up.ContentLength = r.ContentLength
	copyRequestHeaders(up.Header, r.Header)
	resp, err := s.do(up)
	if err != nil {
		s.met.Requests.WithLabelValues(string(epOther), f.String(), "502").Inc()
		s.upstreamFailed(w, f, s.log.With("endpoint", string(epOther)), epOther, err)
		return
	}
	defer resp.Body.Close()
	s.met.Requests.WithLabelValues(string(epOther), f.String(), fmt.Sprint(resp.StatusCode)).Inc()
	if err := relayRaw(w, resp); err != nil {
		s.abortBroken(r.Context(), w, s.log.With("endpoint", string(epOther)), epOther, nil, err)
	}
}

// forwardRead forwards a model request whose body the proxy read, as the client sent it, and
// relays the answer as it comes. status gets the status the client is answered with (499:
// it went away) before anything is relayed.
func (s *Server) forwardRead(ctx context.Context, w http.ResponseWriter, t *turn, body []byte, status func(int)) {
	resp, err := s.send(ctx, t, wire.Segments{body})
	if err != nil {
		if ctx.Err() != nil {
			status(499)
			return
		}
		status(http.StatusBadGateway)
		s.upstreamFailed(w, t.f, t.log, t.ep, err)
		return
	}
	defer resp.Body.Close()
	status(resp.StatusCode)
	if err := relayRaw(w, resp); err != nil {
		s.abortBroken(ctx, w, t.log, t.ep, nil, err)
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
