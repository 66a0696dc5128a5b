package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/condense-dev/condense/internal/config"
)

// Defaults of the bounds on upstream responses (Options fields left zero): the
// configuration's (package config is their one source).
const (
	// DefaultUpstreamHeaderTimeout bounds the wait for a provider's response headers. A
	// non-streamed answer's headers come only once the whole answer is generated, which the
	// providers' SDKs wait up to 10 minutes for: the default is above that.
	DefaultUpstreamHeaderTimeout = config.DefaultUpstreamHeaders
	// DefaultUpstreamIdleTimeout bounds the wait for the next bytes of a response body. Models
	// that reason before they answer can stream nothing for minutes.
	DefaultUpstreamIdleTimeout = config.DefaultUpstreamIdle
	// DefaultMaxResponseBytes bounds a response the proxy buffers whole (a JSON answer) and
	// one server-sent event.
	DefaultMaxResponseBytes = config.DefaultMaxResponseBytes
)

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

// do sends an upstream request under the bounds on its response: the response headers must
// come within UpstreamHeaderTimeout, and each read of the body must return within
// UpstreamIdleTimeout; either failing cancels the request, and the error is an
// *upstreamLimit. Only the time spent waiting for the provider counts: time the proxy takes
// writing to a slow client between two reads does not.
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

// readAllMax reads r to its end, failing with an *upstreamLimit past max bytes.
func readAllMax(r io.Reader, max int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if err == nil && int64(len(data)) > max {
		return nil, &upstreamLimit{limitResponseSize, max}
	}
	return data, err
}

// errLineTooLong is readLine's error past its bound.
var errLineTooLong = errors.New("line too long")

// readLine reads one line (up to and including '\n') of at most max bytes, failing with
// errLineTooLong past that: unlike bufio.Reader.ReadBytes it never holds more.
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(line)+len(frag) > max {
			return nil, errLineTooLong
		}
		line = append(line, frag...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, err
		}
	}
}
