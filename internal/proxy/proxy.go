// Package proxy is the condense pruning proxy: an HTTP server speaking the Anthropic Messages
// and OpenAI Chat Completions APIs that loads a session's pruning state, renders a pruned
// request, forwards it to the provider, relays the response (SSE event by event), answers
// context_tree_query calls itself, and starts flushes. Everything that can fail fails open:
// the client's request is then forwarded unchanged. See docs/proxy.md.
package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/condense-dev/condense/internal/config"
	"github.com/condense-dev/condense/internal/flush"
	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/wire"
)

// Defaults for Options fields left zero. Those the configuration also has are its values
// (package config is their one source), so the two cannot drift apart.
const (
	// DefaultMaxBodyBytes is the request body limit (32 MiB, the provider's own).
	DefaultMaxBodyBytes = config.DefaultMaxBodyBytes
	// DefaultStoreTimeout bounds each store call on the request path.
	DefaultStoreTimeout = 2 * time.Second
	// DefaultBodyReadTimeout bounds reading one request body.
	DefaultBodyReadTimeout = config.DefaultBodyReadTimeout
	// BudgetCap caps the budget trigger: a flush is due at min(BudgetCap, threshold × window).
	BudgetCap = 300_000
)

// Flusher starts flushes: *flush.InProcess (in this process) and *flush.Queue (jobs for
// `condense pruner` workers) implement it.
type Flusher = flush.Flusher

// maxFlushTrack bounds how long the proxy tracks a flush it started (for flushWaitTimeout).
const maxFlushTrack = 10 * time.Minute

// Trigger configures when the proxy starts flushes (see config.Trigger).
type Trigger struct {
	// OnDemand disables the agent-message trigger: flushes then start only through the admin
	// API or the budget/delta triggers.
	OnDemand bool
	// BudgetThreshold, when > 0, starts a flush once a request's estimated tokens reach
	// min(BudgetCap, BudgetThreshold × the model's context window).
	BudgetThreshold float64
	// TurnDelta, when > 0, starts a flush when one request grows the estimated tokens by at
	// least TurnDelta × the context window.
	TurnDelta float64
	// CacheAware weighs agent-message, delta, retried and mid-run flushes against the
	// provider's prompt cache before they are committed (internal/cachepolicy): a flush whose
	// cache rewrite costs more than it saves over the expected remaining requests is deferred
	// and retried on the session's next requests, and always runs once the cache has expired.
	// Manual and budget flushes are never deferred.
	CacheAware bool
	// MidRun (with CacheAware) also weighs a flush inside long agent runs that never produce a
	// final reply: over the transcript before the latest GraceTurns tool-using turns, whenever
	// that cut moved or the cache expired.
	MidRun bool
	// GraceTurns is how many of the latest tool-using turns a mid-run flush never touches
	// (cachepolicy.DefaultGraceTurns when <= 0).
	GraceTurns int
	// Horizon and MaxHorizon bound the expected further requests of a context in the
	// cache-aware decision (cachepolicy.Horizon; defaults 8 and 32 when <= 0).
	Horizon, MaxHorizon int
}

// Options configures a Server.
type Options struct {
	// ParseCacheBytes bounds the memory kept alive by the requests remembered, each session's
	// last, so that the next request only parses what was added (0: DefaultParseCacheBytes;
	// negative disables). What a remembered request keeps alive is in parseCache's comment.
	ParseCacheBytes int
	// AnthropicBaseURL is the Anthropic API base URL without /v1 (e.g. https://api.anthropic.com).
	AnthropicBaseURL string
	// OpenAIBaseURL is the OpenAI API base URL including /v1 (e.g. https://api.openai.com/v1).
	OpenAIBaseURL string
	// Store holds session state. Nil disables pruning (every request is forwarded unchanged).
	Store store.Store
	// Policy is the pruning policy used to render.
	Policy pruner.Policy
	// Flusher starts flushes; nil disables flushing.
	Flusher Flusher
	// Trigger says when flushes start.
	Trigger Trigger
	// MaxBodyBytes rejects larger request bodies with 413 (default 32 MiB).
	MaxBodyBytes int64
	// BodyReadTimeout bounds reading a model request's body, from the end of its headers: a
	// client that stops sending gets 408 (0: DefaultBodyReadTimeout; negative: no bound).
	BodyReadTimeout time.Duration
	// FlushWaitTimeout is how long a request waits for an unfinished flush of its session
	// (0: never wait, use the last committed state).
	FlushWaitTimeout time.Duration
	// SlowRequestLog logs, with its phase timings, every request whose own time before going
	// upstream reaches this (0: never).
	SlowRequestLog time.Duration
	// MaxRecoveryRounds bounds the context_tree_query rounds answered within one client
	// request (0 disables in-proxy answering: calls are then deferred to the next request).
	MaxRecoveryRounds int
	// SessionSecret, when non-empty, requires X-Condense-Token = HMAC-SHA256(secret, session).
	SessionSecret []byte
	// StoreTimeout bounds each store call on the request path (default 2s).
	StoreTimeout time.Duration
	// UpstreamHeaderTimeout bounds the wait for a provider's response headers, from sending
	// the request (0: DefaultUpstreamHeaderTimeout; negative: no bound).
	UpstreamHeaderTimeout time.Duration
	// UpstreamIdleTimeout bounds each wait for more of a provider's response body (0:
	// DefaultUpstreamIdleTimeout; negative: no bound).
	UpstreamIdleTimeout time.Duration
	// MaxResponseBytes bounds a provider response the proxy reads whole (a JSON answer) and
	// one server-sent event of a stream (0: DefaultMaxResponseBytes).
	MaxResponseBytes int64
	// Client sends upstream requests (default: a transport without timeouts on the body).
	Client *http.Client
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
	// Registry, when set, receives the metrics; otherwise the server makes its own.
	Registry *prometheus.Registry
	// DisableQueryTool stops adding the context_tree_query definition to requests.
	DisableQueryTool bool
	// AdminOnProxyPort also serves the admin API (/admin/...) on the proxy's own handler.
	// Off (the default) it is served only by AdminHandler, which Run mounts on the health
	// listener, an internal port: the admin API reads any session's records and starts
	// flushes, and without SessionSecret nothing else guards it.
	AdminOnProxyPort bool
	// Now is the clock the cache-aware flush decisions read (nil: time.Now). Tests move it
	// past the prompt cache's lifetime.
	Now func() time.Time
}

// Server is the proxy. It is an http.Handler; Close stops background work.
type Server struct {
	opt     Options
	log     *slog.Logger
	reg     *prometheus.Registry
	met     *Metrics
	client  *http.Client
	mux     *http.ServeMux
	ready   func(context.Context) error
	mcp     http.Handler
	admin   *http.ServeMux
	parses  *parseCache // each session's last parsed request, for wire.ParseReusing
	flights sync.Map    // session → *flight: the last flush this process started (claimFlight)
	states  sync.Map    // session → cachedState
	nstates atomic.Int64
	midCuts sync.Map // session → uint64: the key of the mid-run cut weighed last
	nmid    atomic.Int64
	lastReq sync.Map // session → time.Time: when this process last forwarded a request of it
	nlast   atomic.Int64
	// servedFlush holds the admin flush requests this process's manual flushes served:
	// session → int64 (flushPending).
	servedFlush sync.Map
	nserved     atomic.Int64
	// spliceCache holds hidden exchanges read or written by this process:
	// session + "\x00" + client index → cachedSplice.
	spliceCache sync.Map
	nsplices    atomic.Int64
	bg          sync.WaitGroup
	watching    sync.WaitGroup // watchCommits
	ctx         context.Context
	cancel      context.CancelFunc
}

// New returns a Server.
func New(opt Options) (*Server, error) {
	if opt.AnthropicBaseURL == "" || opt.OpenAIBaseURL == "" {
		return nil, errors.New("proxy: both upstream base URLs are required")
	}
	opt.AnthropicBaseURL = strings.TrimRight(opt.AnthropicBaseURL, "/")
	opt.OpenAIBaseURL = strings.TrimRight(opt.OpenAIBaseURL, "/")
	if opt.MaxBodyBytes <= 0 {
		opt.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opt.StoreTimeout <= 0 {
		opt.StoreTimeout = DefaultStoreTimeout
	}
	if opt.BodyReadTimeout == 0 {
		opt.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if opt.UpstreamHeaderTimeout == 0 {
		opt.UpstreamHeaderTimeout = DefaultUpstreamHeaderTimeout
	}
	if opt.UpstreamIdleTimeout == 0 {
		opt.UpstreamIdleTimeout = DefaultUpstreamIdleTimeout
	}
	if opt.MaxResponseBytes <= 0 {
		opt.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if opt.MaxRecoveryRounds < 0 {
		opt.MaxRecoveryRounds = 0
	}
	if opt.ParseCacheBytes == 0 {
		opt.ParseCacheBytes = DefaultParseCacheBytes
	}
	s := &Server{opt: opt, log: opt.Logger, reg: opt.Registry, client: opt.Client, parses: newParseCache(opt.ParseCacheBytes)}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.reg == nil {
		s.reg = prometheus.NewRegistry()
		s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	s.met = NewMetrics(s.reg)
	s.reg.MustRegister(s.parses.collectors()...)
	if s.client == nil {
		s.client = &http.Client{Transport: NewUpstreamTransport()}
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("POST /v1/messages", func(w http.ResponseWriter, r *http.Request) { s.handleModel(w, r, wire.Anthropic, epMessages) })
	s.mux.HandleFunc("POST /v1/messages/count_tokens", func(w http.ResponseWriter, r *http.Request) { s.handleModel(w, r, wire.Anthropic, epCountTokens) })
	s.mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) { s.handleModel(w, r, wire.OpenAI, epChat) })
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	s.mux.HandleFunc("GET /readyz", s.handleReady)
	s.mux.HandleFunc("GET /storez", s.handleStore)
	s.mux.Handle("GET /metrics", s.MetricsHandler())
	s.admin = http.NewServeMux()
	s.admin.HandleFunc("GET /admin/sessions/{id}", s.handleAdminSession)
	s.admin.HandleFunc("GET /admin/sessions/{id}/records/{ref}", s.handleAdminRecord)
	s.admin.HandleFunc("POST /admin/sessions/{id}/flush", s.handleAdminFlush)
	if opt.AdminOnProxyPort {
		s.mux.Handle("/admin/", s.admin)
	} else {
		s.mux.HandleFunc("/admin/", func(w http.ResponseWriter, _ *http.Request) {
			adminError(w, http.StatusNotFound, "condense proxy: the admin API is served on the health listener (listen.health), not on the proxy port (listen.adminOnProxyPort)")
		})
	}
	s.mcp = s.newMCPHandler()
	s.mux.Handle("/mcp", s.mcp)
	s.mux.Handle("/mcp/", s.mcp)
	s.mux.HandleFunc("/", s.handlePassThrough)
	if opt.Store != nil {
		s.watching.Add(1)
		go s.watchCommits()
	}
	return s, nil
}

// now reads the server's clock.
func (s *Server) now() time.Time {
	if s.opt.Now != nil {
		return s.opt.Now()
	}
	return time.Now()
}

// Registry returns the Prometheus registry holding the proxy metrics; other components
// (flush, summarizer) may register on it.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// Metrics returns the proxy metrics.
func (s *Server) Metrics() *Metrics { return s.met }

// MetricsHandler serves the registry in the Prometheus exposition format.
func (s *Server) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{})
}

// SetReadiness sets an extra readiness check for /readyz (for example the flush worker's).
// It must fail only when the proxy cannot serve requests.
func (s *Server) SetReadiness(f func(context.Context) error) { s.ready = f }

// AdminHandler serves the admin API (/admin/sessions/...): Run mounts it on the health
// listener. Whoever reaches it reads any session's records and starts flushes unless
// SessionSecret is set, so it belongs on an internal port.
func (s *Server) AdminHandler() http.Handler { return s.admin }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Close stops background work started by the server (it does not close the store or the
// flusher, which the caller owns) and waits for it.
func (s *Server) Close() error {
	s.cancel()
	s.bg.Wait()
	s.watching.Wait()
	return nil
}

// handleReady answers /readyz: whether the proxy can serve requests. It does not depend on the
// store: with the store unreachable the proxy still serves, unpruned (fail open), so a store
// outage must not take every replica out of its Service. /storez reports the store.
func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	if s.ready != nil {
		ctx, cancel := context.WithTimeout(r.Context(), s.opt.StoreTimeout)
		defer cancel()
		if err := s.ready(ctx); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
	}
	_, _ = io.WriteString(w, "ok\n")
}

// handleStore answers /storez: 200 when the store answers a load within StoreTimeout (or the
// proxy has no store), else 503 with the error; requests meanwhile are forwarded unpruned.
func (s *Server) handleStore(w http.ResponseWriter, r *http.Request) {
	if s.opt.Store != nil {
		ctx, cancel := context.WithTimeout(r.Context(), s.opt.StoreTimeout)
		defer cancel()
		if _, err := s.opt.Store.Load(ctx, "condense-readyz"); err != nil {
			http.Error(w, "store: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
	}
	_, _ = io.WriteString(w, "ok\n")
}

// endpoint identifies a model endpoint.
type endpoint string

const (
	epMessages    endpoint = "messages"
	epCountTokens endpoint = "count_tokens"
	epChat        endpoint = "chat_completions"
	epOther       endpoint = "other"
)

// upstreamURL returns the provider URL for a request path.
func (s *Server) upstreamURL(f wire.Format, path, rawQuery string) string {
	var u string
	if f == wire.OpenAI {
		u = s.opt.OpenAIBaseURL + strings.TrimPrefix(path, "/v1")
	} else {
		u = s.opt.AnthropicBaseURL + path
	}
	if rawQuery != "" {
		u += "?" + rawQuery
	}
	return u
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

// copyRequestHeaders copies client headers to the upstream request: everything as sent
// (anthropic-version, anthropic-beta, authorization, x-api-key, unknown ones) except hop-by-hop
// headers, the proxy's own X-Condense-* headers and Accept-Encoding (the transport negotiates
// compression itself so the proxy can read responses).
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

// handlePassThrough forwards any other path untouched: Anthropic when the request carries
// anthropic-version or x-api-key, OpenAI otherwise.
func (s *Server) handlePassThrough(w http.ResponseWriter, r *http.Request) {
	f := wire.OpenAI
	if r.Header.Get("Anthropic-Version") != "" || r.Header.Get("X-Api-Key") != "" {
		f = wire.Anthropic
	}
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

// abortBroken ends a response whose provider body broke off while it was relayed (a read
// error before its end, err): it is counted (condense_upstream_broken_total) and logged,
// event (an Anthropic stream's error event; nil: none) is sent, and the client's connection
// is aborted — net/http closes it without the response's end — so the client sees an error,
// not a cleanly ended, truncated answer. It does not return.
func (s *Server) abortBroken(ctx context.Context, w http.ResponseWriter, log *slog.Logger, ep endpoint, event []byte, err error) {
	if ctx.Err() == nil { // else the client went away, and with it the upstream request
		s.met.UpstreamBroken.WithLabelValues(string(ep)).Inc()
		s.countLimit(ep, err)
		log.Warn("the provider's response broke off; aborting the client's response", "err", err)
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

// upstreamFailed answers a request whose provider could not be reached or sent no response
// headers in time (UpstreamHeaderTimeout): a 502 in the provider's error shape.
func (s *Server) upstreamFailed(w http.ResponseWriter, f wire.Format, log *slog.Logger, ep endpoint, err error) {
	code, msg := "upstream_unreachable", "condense proxy: upstream unreachable: "
	var ul *upstreamLimit
	if errors.As(err, &ul) {
		s.countLimit(ep, err)
		code, msg = "upstream_timeout", "condense proxy: "
	}
	log.Warn("upstream request failed", "err", err)
	writeError(w, f, http.StatusBadGateway, code, msg+err.Error())
}

// NewUpstreamTransport returns the HTTP transport the proxy sends upstream requests with:
// idle connections kept for up to 512 concurrent requests per upstream host, 10 s dial
// timeout, 30 s TCP keep-alive. hack/floorproxy uses it too, so the load test's
// forwarding-only baseline connects upstream exactly as the proxy does.
func NewUpstreamTransport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 1024
	tr.MaxIdleConnsPerHost = 512
	tr.DisableCompression = false
	tr.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	return tr
}
