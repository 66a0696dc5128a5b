package proxy

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/condense-dev/condense/internal/config"
	"github.com/condense-dev/condense/internal/flush"
	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/store"
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
	// DefaultBodyIdleTimeout bounds each wait for more of a request body: a client that sent
	// part of its body and then nothing for this long has stopped.
	DefaultBodyIdleTimeout = 30 * time.Second
	// DefaultIdleFlushWait bounds the wait for a due flush of a session whose prompt cache
	// expired, for an LLM summarizer (Run gives the extractive one ExtractiveIdleFlushWait).
	DefaultIdleFlushWait = 2 * time.Second
	// ExtractiveIdleFlushWait is IdleFlushWait with the extractive summarizer: its flushes take
	// milliseconds, and the bound only matters on an overloaded machine.
	ExtractiveIdleFlushWait = 5 * time.Second
	// BudgetCap caps the budget trigger: a flush is due at min(BudgetCap, threshold × window).
	BudgetCap = 300_000
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

// Flusher starts flushes: *flush.InProcess (in this process) and *flush.Queue (jobs for
// `condense pruner` workers) implement it.
type Flusher = flush.Flusher

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
	// CacheAware weighs agent-message, delta, retried and mid-run flushes against the prompt
	// cache (internal/cachepolicy): one that costs more than it saves is deferred and retried.
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
	// BodyIdleTimeout bounds each wait for more of a model request's body: a client that sends
	// nothing for this long gets 408 (0: DefaultBodyIdleTimeout; negative: no bound; never
	// longer than BodyReadTimeout).
	BodyIdleTimeout time.Duration
	// FlushWaitTimeout is how long a request waits for an unfinished flush of its session
	// (0: never wait, use the last committed state).
	FlushWaitTimeout time.Duration
	// IdleFlushWait is how long a request whose prompt cache has expired waits for the flush it
	// finds due, so it goes out pruned (0: DefaultIdleFlushWait; negative: none); the longer of
	// it and FlushWaitTimeout applies.
	IdleFlushWait time.Duration
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
	// AdminOnProxyPort also serves the admin API (/admin/...) on the proxy's own handler; off,
	// only AdminHandler (Run: the health listener) serves it.
	AdminOnProxyPort bool
	// Now is the clock the cache-aware flush decisions read (nil: time.Now). Tests move it
	// past the prompt cache's lifetime.
	Now func() time.Time
}
