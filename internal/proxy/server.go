package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/wire"
)

// Server is the proxy. It is an http.Handler; Close stops background work.
type Server struct {
	opt     Options
	log     *slog.Logger
	reg     *prometheus.Registry
	met     *Metrics
	client  *http.Client
	mux     *http.ServeMux
	mcp     http.Handler
	admin   *http.ServeMux
	parses  *parseCache                      // each session's last parsed request, for wire.ParseReusing
	flights sync.Map                         // session → *flight: the last flush this process started (claimFlight)
	states  *boundedMap[string, cachedState] // each session's last decoded state
	midCuts *boundedMap[string, uint64]      // the key of the mid-run cut weighed last
	finals  *boundedMap[string, uint64]      // the key of the text turn's final reply flushed last (finalReply)
	// toolTurn tells tool-using turns under the policy (pruner.ToolTurnFunc).
	toolTurn func([]*wire.Message, int) bool
	lastReq  *boundedMap[string, time.Time] // when this process last forwarded a request of the session
	// servedFlush holds the admin flush requests this process's manual flushes served (flushPending).
	servedFlush *boundedMap[string, int64]
	// spliceCache holds hidden exchanges read or written by this process.
	spliceCache *boundedMap[spliceKey, cachedSplice]
	// openAIOrigin is the OpenAI base URL's scheme and host: other paths than /v1/... go there.
	openAIOrigin string
	bg           sync.WaitGroup
	active       atomic.Int64   // client requests being answered (begin to finish)
	pending      atomic.Int64   // background tasks (bgAdd to bgDone)
	watching     sync.WaitGroup // watchCommits
	ctx          context.Context
	cancel       context.CancelFunc
}

// New returns a Server.
func New(opt Options) (*Server, error) {
	if opt.AnthropicBaseURL == "" || opt.OpenAIBaseURL == "" {
		return nil, errors.New("proxy: both upstream base URLs are required")
	}
	opt.AnthropicBaseURL = strings.TrimRight(opt.AnthropicBaseURL, "/")
	opt.OpenAIBaseURL = strings.TrimRight(opt.OpenAIBaseURL, "/")
	base, err := url.Parse(opt.OpenAIBaseURL)
	if err != nil || base.Scheme == "" || base.Host == "" {
		return nil, fmt.Errorf("proxy: the OpenAI base URL %q is not an absolute URL", opt.OpenAIBaseURL)
	}
	if opt.MaxBodyBytes <= 0 {
		opt.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opt.StoreTimeout <= 0 {
		opt.StoreTimeout = DefaultStoreTimeout
	}
	if opt.BodyReadTimeout == 0 {
		opt.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if opt.BodyIdleTimeout == 0 {
		opt.BodyIdleTimeout = DefaultBodyIdleTimeout
	}
	if opt.IdleFlushWait == 0 {
		opt.IdleFlushWait = DefaultIdleFlushWait
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
	s := &Server{opt: opt, log: opt.Logger, reg: opt.Registry, client: opt.Client, parses: newParseCache(opt.ParseCacheBytes),
		states: newBoundedMap[string, cachedState](maxStateCache), midCuts: newBoundedMap[string, uint64](maxStateCache),
		finals:  newBoundedMap[string, uint64](maxStateCache),
		lastReq: newBoundedMap[string, time.Time](maxStateCache), servedFlush: newBoundedMap[string, int64](maxStateCache),
		spliceCache: newBoundedMap[spliceKey, cachedSplice](4 * maxStateCache), openAIOrigin: base.Scheme + "://" + base.Host}
	s.toolTurn = pruner.ToolTurnFunc(opt.Policy)
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
	s.mux.HandleFunc("POST /v1/responses", func(w http.ResponseWriter, r *http.Request) { s.handleModel(w, r, wire.Responses, epResponses) })
	s.mux.HandleFunc("POST /v1/responses/input_tokens", func(w http.ResponseWriter, r *http.Request) {
		s.handleModel(w, r, wire.Responses, epResponsesInputTokens)
	})
	s.mux.HandleFunc("/v1/responses", s.handleResponsesPassThrough)
	s.mux.HandleFunc("/v1/responses/", s.handleResponsesPassThrough)
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
	s.mux.HandleFunc("GET /{$}", s.handleProbe) // and HEAD /
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

// MetricsHandler serves the registry in the Prometheus exposition format.
func (s *Server) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{})
}

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

// background runs f detached from the request with a store-sized timeout.
func (s *Server) background(f func(ctx context.Context)) {
	s.bgAdd()
	go func() {
		defer s.bgDone()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), s.opt.StoreTimeout)
		defer cancel()
		f(ctx)
	}()
}

// bgAdd and bgDone bracket a background task (Close waits for them; Drain counts them).
func (s *Server) bgAdd() { s.bg.Add(1); s.pending.Add(1) }

func (s *Server) bgDone() { s.pending.Add(-1); s.bg.Done() }

// Drain is what a server had under way when it began to stop: client requests being
// answered, background tasks (session counters, log lines, flush submissions) and flushes
// it started that had not ended.
type Drain struct {
	Requests, Background, Flushes int
}

// Underway returns what the server has under way now.
func (s *Server) Underway() Drain {
	d := Drain{Requests: int(s.active.Load()), Background: int(s.pending.Load())}
	s.flights.Range(func(_, v any) bool {
		if v.(*flight).running() {
			d.Flushes++
		}
		return true
	})
	return d
}

// handleReady answers /readyz: 200 while the proxy serves, whatever the store's state (it
// then fails open; /storez reports the store).
func (s *Server) handleReady(w http.ResponseWriter, _ *http.Request) {
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
	epMessages             endpoint = "messages"
	epCountTokens          endpoint = "count_tokens"
	epChat                 endpoint = "chat_completions"
	epResponses            endpoint = "responses"
	epResponsesInputTokens endpoint = "responses_input_tokens"
	epOther                endpoint = "other" // passed through as it came
	epProbe                endpoint = "probe" // GET / and HEAD /, answered by the proxy
)

// countsTokens reports whether the endpoint only counts a request's tokens (Anthropic
// count_tokens, Responses input_tokens): pruned like a model request, its answer relayed as
// it is, and nothing recorded in the session.
func (ep endpoint) countsTokens() bool { return ep == epCountTokens || ep == epResponsesInputTokens }
