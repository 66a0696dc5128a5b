package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/condense-dev/condense/internal/wire"
)

// send forwards body to the provider with the client's headers.
func (s *Server) send(ctx context.Context, t *turn, body wire.Segments) (*http.Response, error) {
	up, err := s.upstreamRequest(ctx, t, body)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	resp, err := s.do(up)
	s.met.UpstreamSecs.WithLabelValues(string(t.ep)).Observe(time.Since(start).Seconds())
	return resp, err
}

// upstreamRequest builds the request that forwards body. The transport reads the segments
// in place, and GetBody starts them over (the transport resends a request whose reused
// connection turned out closed before anything was written).
func (s *Server) upstreamRequest(ctx context.Context, t *turn, body wire.Segments) (*http.Request, error) {
	up, err := http.NewRequestWithContext(ctx, http.MethodPost, s.upstreamURL(t.f, t.path, t.query), http.NoBody)
	if err != nil {
		return nil, err
	}
	if n := body.Len(); n > 0 {
		up.Body, up.ContentLength = io.NopCloser(body.Reader()), int64(n)
		up.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(body.Reader()), nil }
	}
	copyRequestHeaders(up.Header, t.hdr)
	return up, nil
}

// upstreamURL returns the provider URL for a request path: the Anthropic base URL (without
// /v1) followed by the path; for OpenAI, a path under /v1 maps onto the base URL (which
// includes /v1), any other path goes unchanged to the base URL's origin.
func (s *Server) upstreamURL(f wire.Format, path, rawQuery string) string {
	var u string
	switch {
	case f == wire.Anthropic:
		u = s.opt.AnthropicBaseURL + path
	case path == "/v1" || strings.HasPrefix(path, "/v1/"):
		u = s.opt.OpenAIBaseURL + path[len("/v1"):]
	default:
		u = s.openAIOrigin + path
	}
	if rawQuery != "" {
		u += "?" + rawQuery
	}
	return u
}

// do sends an upstream request whose response headers must come within
// UpstreamHeaderTimeout and each body read within UpstreamIdleTimeout; either failing cancels
// it with an *upstreamLimit. Time spent writing to the client does not count.
func (s *Server) do(up *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(up.Context())
	up = up.WithContext(ctx)
	headerLimit := &upstreamLimit{limitHeaderTimeout, s.opt.UpstreamHeaderTimeout}
	var timer *time.Timer
	if s.opt.UpstreamHeaderTimeout > 0 {
		timer = time.AfterFunc(s.opt.UpstreamHeaderTimeout, func() { cancel(headerLimit) })
	}
	resp, err := s.client.Do(up)
	if timer != nil && !timer.Stop() { // fired: the request is cancelled, whatever Do returned
		if err == nil {
			resp.Body.Close()
		}
		cancel(nil)
		return nil, headerLimit
	}
	if err != nil {
		cancel(nil)
		return nil, err
	}
	b := &idleBody{ReadCloser: resp.Body, cancel: cancel, idle: s.opt.UpstreamIdleTimeout}
	if b.idle > 0 {
		b.limit = &upstreamLimit{limitIdleTimeout, b.idle}
		b.timer = time.AfterFunc(b.idle, func() { b.fired.Store(true); cancel(b.limit) })
		b.timer.Stop()
	}
	resp.Body = b
	return resp, nil
}

// idleBody is a response body whose every read must return within idle; one that does not
// cancels the request and fails with limit.
type idleBody struct {
	io.ReadCloser
	cancel context.CancelCauseFunc
	idle   time.Duration
	timer  *time.Timer
	limit  *upstreamLimit
	fired  atomic.Bool
}

func (b *idleBody) Read(p []byte) (int, error) {
	if b.timer == nil {
		return b.ReadCloser.Read(p)
	}
	b.timer.Reset(b.idle)
	n, err := b.ReadCloser.Read(p)
	b.timer.Stop()
	if err != nil && !errors.Is(err, io.EOF) && b.fired.Load() {
		err = b.limit
	}
	return n, err
}

// Close closes the body and releases the request's context.
func (b *idleBody) Close() error {
	if b.timer != nil {
		b.timer.Stop()
	}
	err := b.ReadCloser.Close()
	b.cancel(nil)
	return err
}

// Labels of condense_upstream_limits_total{limit}.
const (
	limitHeaderTimeout = "header_timeout"
	limitIdleTimeout   = "idle_timeout"
	limitResponseSize  = "response_too_large"
	limitEventSize     = "event_too_large"
)

// upstreamLimit is an upstream response cut short by one of the proxy's bounds on it. Its
// message is formatted only when asked for: the two timeouts' limits are made for every
// upstream request, and almost none of them is ever returned.
type upstreamLimit struct {
	limit string // the metric label
	bound any    // the bound: a time.Duration or a size in bytes
}

func (e *upstreamLimit) Error() string {
	switch e.limit {
	case limitHeaderTimeout:
		return fmt.Sprintf("the provider sent no response headers within %s", e.bound)
	case limitIdleTimeout:
		return fmt.Sprintf("the provider sent nothing for %s", e.bound)
	case limitResponseSize:
		return fmt.Sprintf("the provider's response exceeds %d bytes", e.bound)
	default:
		return fmt.Sprintf("a server-sent event of the provider exceeds %d bytes", e.bound)
	}
}

// countLimit counts err in condense_upstream_limits_total when a bound on the provider's
// response caused it.
func (s *Server) countLimit(ep endpoint, err error) {
	var ul *upstreamLimit
	if errors.As(err, &ul) {
		s.met.UpstreamLimits.WithLabelValues(string(ep), ul.limit).Inc()
	}
}

// readAllMax reads r to its end, failing with an *upstreamLimit past max bytes.
func readAllMax(r io.Reader, max int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if err == nil && int64(len(data)) > max {
		return nil, &upstreamLimit{limitResponseSize, max}
	}
	return data, err
}

// hopHeaders are not forwarded in either direction (RFC 9110 §7.6.1), plus the ones the
// proxy computes itself.
var hopHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Connection": true, "Proxy-Authenticate": true,
	"Proxy-Authorization": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
	"Content-Length": true, "Host": true,
}

// connectionNamed reports whether the Connection header of h names header k, which makes k
// hop-by-hop too (RFC 9110 §7.6.1).
func connectionNamed(h http.Header, k string) bool {
	for _, v := range h["Connection"] {
		for tok := range strings.SplitSeq(v, ",") {
			if http.CanonicalHeaderKey(strings.TrimSpace(tok)) == k {
				return true
			}
		}
	}
	return false
}

// hopByHop reports whether header k of h is not forwarded: a fixed hop-by-hop header, one
// the proxy computes itself, or one h's Connection header names.
func hopByHop(h http.Header, k string) bool {
	return hopHeaders[k] || len(h["Connection"]) > 0 && connectionNamed(h, k)
}

// copyRequestHeaders copies client headers to the upstream request as sent, except hop-by-hop
// headers, X-Condense-* and Accept-Encoding (the transport negotiates compression itself).
func copyRequestHeaders(dst, src http.Header) {
	for k, vs := range src {
		if hopByHop(src, k) || k == "Accept-Encoding" || strings.HasPrefix(k, "X-Condense-") {
			continue
		}
		dst[k] = append([]string(nil), vs...)
	}
}

// copyResponseHeaders copies provider response headers to the client's response, except
// hop-by-hop headers.
func copyResponseHeaders(dst, src http.Header) {
	for k, vs := range src {
		if hopByHop(src, k) {
			continue
		}
		dst[k] = append([]string(nil), vs...)
	}
}

// NewUpstreamTransport returns the transport the proxy sends upstream requests with (idle
// connections for 512 concurrent requests per host, 10 s dial timeout, 30 s keep-alive);
// hack/floorproxy's forwarding baseline uses it too.
func NewUpstreamTransport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 1024
	tr.MaxIdleConnsPerHost = 512
	tr.DisableCompression = false
	tr.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	return tr
}
