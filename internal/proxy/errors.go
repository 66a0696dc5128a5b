package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/tidwall/gjson"

	"github.com/condense-dev/condense/internal/wire"
)

// errorType maps an HTTP status to the provider error type the proxy reports for it.
func errorType(f wire.Format, status int) string {
	if f != wire.Anthropic {
		switch status {
		case http.StatusUnauthorized, http.StatusRequestEntityTooLarge, http.StatusBadRequest, http.StatusRequestTimeout, http.StatusUnsupportedMediaType:
			return "invalid_request_error" // OpenAI's 401 too (code invalid_api_key)
		}
		return "server_error"
	}
	switch status {
	case http.StatusBadRequest, http.StatusRequestTimeout, http.StatusUnsupportedMediaType:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	}
	return "api_error"
}

// ErrorBody returns a provider-shaped error body: Anthropic {"type":"error","error":{…}},
// OpenAI (Chat Completions and Responses) {"error":{"message","type","param":null,"code"}}
// (a 401's code is invalid_api_key).
func ErrorBody(f wire.Format, status int, code, msg string) []byte {
	typ := errorType(f, status)
	if f != wire.Anthropic {
		var c any
		if code != "" {
			c = code
		}
		if status == http.StatusUnauthorized {
			c = "invalid_api_key"
		}
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": c}})
		return b
	}
	b, _ := json.Marshal(struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}{Type: "error", Error: struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}{typ, msg}})
	return b
}

// writeError writes a provider-shaped error response produced by the proxy itself. The
// X-Condense-Error header tells operators the proxy, not the provider, refused the request.
func writeError(w http.ResponseWriter, f wire.Format, status int, code, msg string) {
	b := ErrorBody(f, status, code, msg)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("X-Condense-Error", code)
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// upstreamFailed answers a request whose provider could not be reached or sent no response
// headers in time (UpstreamHeaderTimeout): a 502 in the provider's error shape, err kept for
// the request's log line.
func (s *Server) upstreamFailed(w http.ResponseWriter, t *turn, err error) {
	code, msg := "upstream_unreachable", "condense proxy: upstream unreachable: "
	var ul *upstreamLimit
	if errors.As(err, &ul) {
		s.countLimit(t.ep, err)
		code, msg = "upstream_timeout", "condense proxy: "
	}
	t.err = err
	writeError(w, t.f, http.StatusBadGateway, code, msg+err.Error())
}

// abortBroken ends a response whose provider body broke off with err: it counts it, keeps err
// for the log line, sends event (nil: none) and aborts the client's connection, so the client
// sees an error, not a truncated answer. It does not return.
func (s *Server) abortBroken(ctx context.Context, w http.ResponseWriter, t *turn, event []byte, err error) {
	if ctx.Err() == nil { // else the client went away, and with it the upstream request
		s.met.UpstreamBroken.WithLabelValues(string(t.ep)).Inc()
		s.countLimit(t.ep, err)
		t.err = err
	}
	abortResponse(ctx, w, event)
}

// abortResponse sends event (nil: none) unless the client is gone (ctx ended), then aborts
// the client's connection — net/http closes it without the response's end. It does not
// return.
func abortResponse(ctx context.Context, w http.ResponseWriter, event []byte) {
	if ctx.Err() == nil {
		if event != nil {
			_, _ = w.Write(event)
		}
		if fl, ok := w.(http.Flusher); ok {
			fl.Flush()
		}
	}
	panic(http.ErrAbortHandler)
}

// streamErrorEvent returns the event telling a streaming client its response failed: an
// Anthropic error event (the provider's own when it sent one), a Responses "error" event
// numbered by e.seq (with the provider's code, message, param), nil for Chat Completions.
func streamErrorEvent(e emitter, f wire.Format, status int, code, msg string, provider []byte) []byte {
	switch f {
	case wire.Anthropic:
		if v := gjson.ParseBytes(provider); v.Get("type").Str == "error" && v.Get("error.type").Exists() {
			return encodeEvent("error", provider)
		}
		return encodeEvent("error", ErrorBody(wire.Anthropic, status, "", msg))
	case wire.Responses:
		param := json.RawMessage("null")
		if v := gjson.ParseBytes(provider).Get("error"); v.IsObject() {
			if m := v.Get("message").Str; m != "" {
				msg = m
			}
			if c := v.Get("code").Str; c != "" {
				code = c
			} else if c := v.Get("type").Str; c != "" {
				code = c
			}
			if p := v.Get("param"); p.Exists() {
				param = json.RawMessage(p.Raw)
			}
		}
		b, _ := json.Marshal(struct {
			Type    string          `json:"type"`
			Code    string          `json:"code"`
			Message string          `json:"message"`
			Param   json.RawMessage `json:"param"`
			Seq     int64           `json:"sequence_number"`
		}{"error", code, msg, param, e.seq.fresh()})
		return encodeEvent("error", b)
	}
	return nil
}
