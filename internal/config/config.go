// Package config is the versioned data-plane configuration (condense.dev/config/v1 ProxyConfig,
// YAML or JSON) of `condense proxy` and `condense pruner`: omitted fields keep Default's values,
// unknown ones are errors; no Kubernetes dependencies. See docs/configuration.md.
package config

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/condense-dev/condense/internal/wire"
)

// APIVersion is the only configuration version this package reads and writes.
const APIVersion = "condense.dev/config/v1"

// Kind is the kind every configuration document carries.
const Kind = "ProxyConfig"

// Defaults for the fields whose zero value is meaningful, exported so the operator's CRD
// defaults and documentation can refer to the same numbers.
const (
	DefaultProxyListen        = ":8080"
	DefaultMetricsListen      = ":9090"
	DefaultHealthListen       = ":8081"
	DefaultAnthropicBaseURL   = "https://api.anthropic.com"
	DefaultOpenAIBaseURL      = "https://api.openai.com/v1"
	DefaultStoreURL           = "memory:"
	DefaultMinBatchChars      = 1000
	DefaultSpillThreshold     = 65536
	DefaultSpillPreviewBytes  = 2048
	DefaultRecoveryGraceTurns = 3
	DefaultRollingWindow      = 3
	DefaultPurgeCooldownTurns = 2
	DefaultPurgeMinArgChars   = 500
	DefaultSummarizerModel    = "extractive"
	DefaultIdleTimeout        = 20 * time.Second
	DefaultTotalTimeout       = 180 * time.Second
	DefaultMaxBodyBytes       = 32 << 20
	DefaultMaxRecoveryRounds  = 3
	DefaultSlowRequestLog     = 100 * time.Millisecond
	DefaultBodyReadTimeout    = 5 * time.Minute
	DefaultIdleConnTimeout    = 5 * time.Minute
	DefaultUpstreamHeaders    = 15 * time.Minute
	DefaultUpstreamIdle       = 10 * time.Minute
	DefaultMaxResponseBytes   = 64 << 20
	DefaultParseCacheBytes    = 512 << 20
	DefaultProtectedPath      = "**/skills/**/*.md"
	DefaultHorizon            = 8
	DefaultMaxHorizon         = 32
	DefaultMidRunGraceTurns   = 3
)

// BatchingMode selects how captured tool results are grouped into summaries.
type BatchingMode string

const (
	// BatchingTurn makes one batch (one summary) per tool-using assistant turn.
	BatchingTurn BatchingMode = "turn"
	// BatchingAgentMessage merges every pending turn up to the agent's final reply into one batch.
	BatchingAgentMessage BatchingMode = "agent-message"
)

// TriggerMode selects what flushes pending batches in normal operation.
type TriggerMode string

const (
	// TriggerAgentMessage flushes when the agent sends a final (tool-free) reply.
	TriggerAgentMessage TriggerMode = "agent-message"
	// TriggerOnDemand flushes only on an explicit request (or a budget/delta trigger).
	TriggerOnDemand TriggerMode = "on-demand"
)

// ThinkingBudget is the reasoning effort requested from the summarizer model.
type ThinkingBudget string

// The thinking budgets, from none to the most.
const (
	// ThinkingOff requests no reasoning (Anthropic thinking disabled; OpenAI reasoning_effort
	// omitted, which models before gpt-5.1 take as their default effort).
	ThinkingOff ThinkingBudget = "off"
	// ThinkingMinimal requests minimal reasoning effort.
	ThinkingMinimal ThinkingBudget = "minimal"
	// ThinkingLow requests low reasoning effort.
	ThinkingLow ThinkingBudget = "low"
	// ThinkingMedium requests medium reasoning effort.
	ThinkingMedium ThinkingBudget = "medium"
	// ThinkingHigh requests high reasoning effort.
	ThinkingHigh ThinkingBudget = "high"
	// ThinkingXHigh requests the highest reasoning effort.
	ThinkingXHigh ThinkingBudget = "xhigh"
)

// SummarizerMode says where summaries are produced.
type SummarizerMode string

const (
	// SummarizerInProxy runs the summarizer inside the proxy process.
	SummarizerInProxy SummarizerMode = "in-proxy"
	// SummarizerJobs hands flushes to `condense pruner` workers through the store.
	SummarizerJobs SummarizerMode = "jobs"
)

// Config is one complete data-plane configuration document.
type Config struct {
	// APIVersion must be APIVersion.
	APIVersion string `json:"apiVersion" yaml:"apiVersion"`
	// Kind must be Kind.
	Kind string `json:"kind" yaml:"kind"`
	// Policy names the PruningPolicy this configuration was built from (empty outside Kubernetes).
	Policy PolicyRef `json:"policy" yaml:"policy"`
	// Listen holds the addresses the process listens on.
	Listen Listen `json:"listen" yaml:"listen"`
	// Upstreams holds the provider base URLs requests are forwarded to.
	Upstreams Upstreams `json:"upstreams" yaml:"upstreams"`
	// Store says where session state lives.
	Store Store `json:"store" yaml:"store"`
	// Engine is the pruning policy proper.
	Engine Engine `json:"engine" yaml:"engine"`
	// Summarizer configures the model that writes summaries.
	Summarizer Summarizer `json:"summarizer" yaml:"summarizer"`
	// SessionAuth configures per-session tokens.
	SessionAuth SessionAuth `json:"sessionAuth" yaml:"sessionAuth"`
	// Limits bounds request sizes and waits.
	Limits Limits `json:"limits" yaml:"limits"`
}

// PolicyRef identifies the PruningPolicy a configuration belongs to.
type PolicyRef struct {
	// Name is the PruningPolicy name.
	Name string `json:"name,omitempty" yaml:"name,omitempty"`
	// Namespace is the PruningPolicy namespace.
	Namespace string `json:"namespace,omitempty" yaml:"namespace,omitempty"`
}

// Listen holds listen addresses in net.Listen "host:port" form.
type Listen struct {
	// Proxy is the address agents send provider requests to (default ":8080").
	Proxy string `json:"proxy" yaml:"proxy"`
	// Metrics serves Prometheus metrics at /metrics (default ":9090"; empty disables).
	Metrics string `json:"metrics" yaml:"metrics"`
	// Health serves /healthz, /readyz, /storez and the admin API /admin/... (default ":8081";
	// empty disables). Keep it internal: the admin API reads any session's records and
	// starts flushes, guarded only by session tokens when SessionAuth is enabled.
	Health string `json:"health" yaml:"health"`
	// AdminOnProxyPort also serves the admin API on the proxy port (default false). Only with
	// SessionAuth enabled is it limited to each session's own token holder.
	AdminOnProxyPort bool `json:"adminOnProxyPort,omitempty" yaml:"adminOnProxyPort,omitempty"`
}

// Upstreams holds provider base URLs.
type Upstreams struct {
	// Anthropic is the Anthropic API base URL (default "https://api.anthropic.com").
	Anthropic string `json:"anthropic" yaml:"anthropic"`
	// OpenAI is the OpenAI API base URL including the version path
	// (default "https://api.openai.com/v1").
	OpenAI string `json:"openai" yaml:"openai"`
}

// Store says where session state lives.
type Store struct {
	// URL is a store.Open URL: redis://, rediss://, unix://, redis+sentinel://, redis+cluster://
	// (rediss+... for TLS), bolt:PATH, bolt: or memory: (default, single process only). Ignored when
	// URLEnv is set.
	URL string `json:"url" yaml:"url"`
	// URLEnv names an environment variable holding the URL, so credentials in it stay out of the
	// configuration file (the operator sets it from a Secret).
	URLEnv string `json:"urlEnv,omitempty" yaml:"urlEnv,omitempty"`
}

// ResolvedURL returns the store URL, read from URLEnv when that is set.
func (s Store) ResolvedURL() (string, error) {
	if s.URLEnv == "" {
		return s.URL, nil
	}
	v := strings.TrimSpace(os.Getenv(s.URLEnv))
	if v == "" {
		return "", fmt.Errorf("config: store.urlEnv: environment variable %s is empty or unset", s.URLEnv)
	}
	return v, nil
}

// Engine is the pruning behaviour.
type Engine struct {
	// BatchingMode is "turn" (default) or "agent-message".
	BatchingMode BatchingMode `json:"batchingMode" yaml:"batchingMode"`
	// Trigger says when pending batches are flushed.
	Trigger Trigger `json:"trigger" yaml:"trigger"`
	// MinBatchChars skips summarizing batches whose results total fewer characters
	// (UTF-16 code units; default 1000; 0 disables).
	MinBatchChars int `json:"minBatchChars" yaml:"minBatchChars"`
	// Dedup reuses an earlier summary for a byte-identical tool result (default true).
	Dedup bool `json:"dedup" yaml:"dedup"`
	// Spill moves single oversized results out of the context.
	Spill Spill `json:"spill" yaml:"spill"`
	// ProtectedTools lists tool names whose results are never pruned.
	ProtectedTools []string `json:"protectedTools" yaml:"protectedTools"`
	// ProtectedPaths lists globs (`**`, `*`, `?`) matched against a tool call's "path" argument;
	// matching results are never pruned (default ["**/skills/**/*.md"]; empty disables).
	ProtectedPaths []string `json:"protectedPaths" yaml:"protectedPaths"`
	// RecoveryGraceTurns keeps a recovered result verbatim for this many user turns
	// (default 3; 0 disables).
	RecoveryGraceTurns int `json:"recoveryGraceTurns" yaml:"recoveryGraceTurns"`
	// ChainCompression collapses whole closed tool chains into one summary.
	ChainCompression ChainCompression `json:"chainCompression" yaml:"chainCompression"`
	// PurgeErrors replaces the arguments of failed tool calls after a cooldown.
	PurgeErrors PurgeErrors `json:"purgeErrors" yaml:"purgeErrors"`
	// Observations prunes the text observations of text-protocol agents (mini-swe-agent 1.x,
	// SWE-agent without function calling) like tool results (default off).
	Observations Observations `json:"observations" yaml:"observations"`
}

// Trigger says when pending batches are flushed.
type Trigger struct {
	// Mode is "agent-message" (default) or "on-demand".
	Mode TriggerMode `json:"mode" yaml:"mode"`
	// AutoBudgetThreshold flushes at turn end once the context uses at least this fraction of the
	// model's window, in (0, 1]; nil disables.
	AutoBudgetThreshold *float64 `json:"autoBudgetThreshold,omitempty" yaml:"autoBudgetThreshold,omitempty"`
	// BudgetTurnDelta flushes when one turn grows context usage by at least this fraction,
	// in (0, 1]; nil disables.
	BudgetTurnDelta *float64 `json:"budgetTurnDelta,omitempty" yaml:"budgetTurnDelta,omitempty"`
	// CacheAware weighs agent-message, delta and mid-run flushes against the prompt cache (default
	// true): one that costs more than it saves is deferred to a later request (docs/cost-model.md §8).
	// Manual and budget flushes always run.
	CacheAware bool `json:"cacheAware" yaml:"cacheAware"`
	// MidRun (with CacheAware) also flushes inside long agent runs without a final reply, over
	// the transcript before the latest MidRunGraceTurns tool-using turns (default true).
	MidRun bool `json:"midRun" yaml:"midRun"`
	// MidRunGraceTurns is how many of the latest tool-using turns a mid-run flush never
	// touches (default 3, >= 1).
	MidRunGraceTurns int `json:"midRunGraceTurns" yaml:"midRunGraceTurns"`
	// Horizon is the fewest further requests the cache-aware decision expects a context to
	// have; it expects as many more as the context has already seen, up to MaxHorizon
	// (default 8, >= 1).
	Horizon int `json:"horizon" yaml:"horizon"`
	// MaxHorizon caps the expected further requests: a flush must pay for its cache rewrite
	// within this many requests (default 32, >= Horizon).
	MaxHorizon int `json:"maxHorizon" yaml:"maxHorizon"`
}

// Spill configures the eager spill of a single oversized tool result.
type Spill struct {
	// Threshold is the result size (UTF-16 code units) at which a result is spilled
	// (default 65536; must be > 0).
	Threshold int `json:"threshold" yaml:"threshold"`
	// PreviewBytes is the UTF-8 size of the head preview kept in context (default 2048).
	PreviewBytes int `json:"previewBytes" yaml:"previewBytes"`
}

// ChainCompression configures the collapse of closed tool chains.
type ChainCompression struct {
	// Enabled turns chain compression on (default true).
	Enabled bool `json:"enabled" yaml:"enabled"`
	// RollingWindow is how many of the newest closed chains stay uncompressed (default 3).
	RollingWindow int `json:"rollingWindow" yaml:"rollingWindow"`
	// StripFinalAssistantThinking drops thinking blocks from a compressed chain's kept final
	// assistant message (default true).
	StripFinalAssistantThinking bool `json:"stripFinalAssistantThinking" yaml:"stripFinalAssistantThinking"`
	// FuseRangeSummary makes one extra summarizer call that fuses a chain's batch summaries
	// (default true).
	FuseRangeSummary bool `json:"fuseRangeSummary" yaml:"fuseRangeSummary"`
}

// PurgeErrors configures the purge of errored tool-call arguments.
type PurgeErrors struct {
	// Enabled turns the purge on (default true).
	Enabled bool `json:"enabled" yaml:"enabled"`
	// CooldownTurns is how many assistant turns an errored call keeps its arguments (default 2, >= 1).
	CooldownTurns int `json:"cooldownTurns" yaml:"cooldownTurns"`
	// MinArgChars is the smallest argument JSON length that is purged (default 500).
	MinArgChars int `json:"minArgChars" yaml:"minArgChars"`
}

// Observations configures the pruning of text observations (docs/engine.md).
type Observations struct {
	// Enabled turns it on (default false: off for clients that are not text-protocol agents).
	Enabled bool `json:"enabled" yaml:"enabled"`
	// Harness selects the built-in patterns of one agent (ObservationHarnesses); "" selects
	// every built-in pattern.
	Harness string `json:"harness" yaml:"harness"`
	// Patterns, when set, replace the built-in patterns.
	Patterns []ObservationPattern `json:"patterns" yaml:"patterns"`
}

// ObservationHarnesses lists the harnesses with built-in observation patterns.
var ObservationHarnesses = []string{"mini-swe-agent", "swe-agent"}

// ObservationPattern recognises one agent's observations (docs/engine.md "Text observations").
type ObservationPattern struct {
	// Match is an RE2 expression an observation's text must match; its group "rc" is the
	// exit status (not 0: failed).
	Match string `json:"match" yaml:"match"`
	// Stub frames the stub: ${stub} and ${group} of Match (empty: "${stub}").
	Stub string `json:"stub,omitempty" yaml:"stub,omitempty"`
	// Action is an RE2 expression whose first group, in its last match over the assistant's
	// text, is the action (empty: the whole text).
	Action string `json:"action,omitempty" yaml:"action,omitempty"`
	// Tool is the tool name the action is recorded under (empty: "bash").
	Tool string `json:"tool,omitempty" yaml:"tool,omitempty"`
	// Failed marks every observation the pattern matches as failed.
	Failed bool `json:"failed,omitempty" yaml:"failed,omitempty"`
}

// Summarizer configures the model that writes summaries.
type Summarizer struct {
	// Model is "extractive" (the default: the built-in summarizer, no LLM call), "default"
	// (the model of the request being pruned, billed to the session's credentials) or a model id.
	Model string `json:"model" yaml:"model"`
	// Provider is the wire format used to call the summarizer: "anthropic" (default) or "openai".
	Provider wire.Format `json:"provider" yaml:"provider"`
	// BaseURL overrides the upstream base URL for summarizer calls; empty uses the upstream of
	// Provider.
	BaseURL string `json:"baseURL,omitempty" yaml:"baseURL,omitempty"`
	// ThinkingBudget is off (default), minimal, low, medium, high or xhigh.
	ThinkingBudget ThinkingBudget `json:"thinkingBudget" yaml:"thinkingBudget"`
	// IdleTimeout aborts a summarizer call after this long without streamed output
	// (default 20s; 0 disables).
	IdleTimeout Duration `json:"idleTimeout" yaml:"idleTimeout"`
	// TotalTimeout aborts a summarizer call after this long in total (default 180s; 0 disables).
	TotalTimeout Duration `json:"totalTimeout" yaml:"totalTimeout"`
	// APIKeyFile is a file holding the summarizer API key (the operator mounts a Secret there).
	APIKeyFile string `json:"apiKeyFile,omitempty" yaml:"apiKeyFile,omitempty"`
	// APIKeyEnv names an environment variable holding the API key. With neither APIKeyFile nor
	// APIKeyEnv the proxy reuses the credentials of the request being pruned.
	APIKeyEnv string `json:"apiKeyEnv,omitempty" yaml:"apiKeyEnv,omitempty"`
	// Mode is "in-proxy" (default) or "jobs" (flushes run in `condense pruner` workers).
	Mode SummarizerMode `json:"mode" yaml:"mode"`
}

// APIKey returns the configured summarizer API key: the trimmed content of APIKeyFile, else the
// value of APIKeyEnv, else "" (reuse the request's credentials).
func (s Summarizer) APIKey() (string, error) {
	if s.APIKeyFile != "" {
		b, err := os.ReadFile(s.APIKeyFile)
		if err != nil {
			return "", fmt.Errorf("config: summarizer.apiKeyFile: %w", err)
		}
		k := strings.TrimSpace(string(b))
		if k == "" {
			return "", fmt.Errorf("config: summarizer.apiKeyFile: %s is empty", s.APIKeyFile)
		}
		return k, nil
	}
	if s.APIKeyEnv != "" {
		k := strings.TrimSpace(os.Getenv(s.APIKeyEnv))
		if k == "" {
			return "", fmt.Errorf("config: summarizer.apiKeyEnv: environment variable %s is empty or unset", s.APIKeyEnv)
		}
		return k, nil
	}
	return "", nil
}

// SessionAuth configures per-session tokens: a client must present
// SessionToken(secret, sessionID) for its session.
type SessionAuth struct {
	// Enabled requires a valid session token on every request.
	Enabled bool `json:"enabled" yaml:"enabled"`
	// SecretFile holds the HMAC secret (required when Enabled).
	SecretFile string `json:"secretFile,omitempty" yaml:"secretFile,omitempty"`
}

// Secret reads the HMAC secret from SecretFile (surrounding whitespace removed).
func (a SessionAuth) Secret() ([]byte, error) {
	b, err := os.ReadFile(a.SecretFile)
	if err != nil {
		return nil, fmt.Errorf("config: sessionAuth.secretFile: %w", err)
	}
	b = []byte(strings.TrimSpace(string(b)))
	if len(b) == 0 {
		return nil, fmt.Errorf("config: sessionAuth.secretFile: %s is empty", a.SecretFile)
	}
	return b, nil
}

// Limits bounds request sizes and waits.
type Limits struct {
	// MaxBodyBytes rejects request bodies larger than this (default 32 MiB).
	MaxBodyBytes int64 `json:"maxBodyBytes" yaml:"maxBodyBytes"`
	// FlushWaitTimeout is how long a request waits for an in-flight flush of its session before
	// it is forwarded with the state it has (default 0: never wait).
	FlushWaitTimeout Duration `json:"flushWaitTimeout" yaml:"flushWaitTimeout"`
	// MaxRecoveryRounds bounds the recovery-tool round trips the proxy answers itself within one
	// client request (default 3; 0 disables in-proxy recovery).
	MaxRecoveryRounds int `json:"maxRecoveryRounds" yaml:"maxRecoveryRounds"`
	// SlowRequestLog logs every request whose own time in the proxy before going upstream
	// reaches this, with the time each phase took (default 100ms; 0 never logs).
	SlowRequestLog Duration `json:"slowRequestLog" yaml:"slowRequestLog"`
	// BodyReadTimeout bounds reading one request body, from the end of its headers (default
	// 5m; 0 disables): a client that stops sending gets 408 and its connection closed.
	BodyReadTimeout Duration `json:"bodyReadTimeout" yaml:"bodyReadTimeout"`
	// IdleConnTimeout closes a client's keep-alive connection after this long without a
	// request (default 5m; 0 disables). Keep it above the backend keep-alive timeout of a load
	// balancer in front of the proxy.
	IdleConnTimeout Duration `json:"idleConnTimeout" yaml:"idleConnTimeout"`
	// UpstreamHeaderTimeout bounds the wait for a provider's response headers (default 15m,
	// above the 10 minutes the providers' SDKs wait for a non-streamed answer, whose headers
	// come only once it is generated; 0 disables): past it the client gets 502.
	UpstreamHeaderTimeout Duration `json:"upstreamHeaderTimeout" yaml:"upstreamHeaderTimeout"`
	// UpstreamIdleTimeout bounds each wait for more of a provider's response body (default
	// 10m: reasoning models can stream nothing for minutes; 0 disables): past it a JSON answer
	// becomes a 502 and a relayed stream is aborted.
	UpstreamIdleTimeout Duration `json:"upstreamIdleTimeout" yaml:"upstreamIdleTimeout"`
	// MaxResponseBytes bounds a provider answer the proxy reads whole (non-streamed JSON) and
	// one server-sent event of a stream (default 64 MiB).
	MaxResponseBytes int64 `json:"maxResponseBytes" yaml:"maxResponseBytes"`
	// ParseCacheBytes bounds the memory kept alive by the requests the proxy remembers, each
	// session's last, so that a session's next request is parsed only where it differs
	// (default 512 MiB; 0 remembers none). Least recently used sessions are forgotten first.
	ParseCacheBytes int64 `json:"parseCacheBytes" yaml:"parseCacheBytes"`
}

// Default returns a complete configuration holding every default.
func Default() *Config {
	return &Config{
		APIVersion: APIVersion,
		Kind:       Kind,
		Listen:     Listen{Proxy: DefaultProxyListen, Metrics: DefaultMetricsListen, Health: DefaultHealthListen},
		Upstreams:  Upstreams{Anthropic: DefaultAnthropicBaseURL, OpenAI: DefaultOpenAIBaseURL},
		Store:      Store{URL: DefaultStoreURL},
		Engine: Engine{
			BatchingMode: BatchingTurn,
			Trigger: Trigger{Mode: TriggerAgentMessage, CacheAware: true, MidRun: true,
				MidRunGraceTurns: DefaultMidRunGraceTurns, Horizon: DefaultHorizon, MaxHorizon: DefaultMaxHorizon},
			MinBatchChars:      DefaultMinBatchChars,
			Dedup:              true,
			Spill:              Spill{Threshold: DefaultSpillThreshold, PreviewBytes: DefaultSpillPreviewBytes},
			ProtectedTools:     []string{},
			ProtectedPaths:     []string{DefaultProtectedPath},
			RecoveryGraceTurns: DefaultRecoveryGraceTurns,
			ChainCompression: ChainCompression{
				Enabled: true, RollingWindow: DefaultRollingWindow,
				StripFinalAssistantThinking: true, FuseRangeSummary: true,
			},
			PurgeErrors:  PurgeErrors{Enabled: true, CooldownTurns: DefaultPurgeCooldownTurns, MinArgChars: DefaultPurgeMinArgChars},
			Observations: Observations{Patterns: []ObservationPattern{}},
		},
		Summarizer: Summarizer{
			Model:          DefaultSummarizerModel,
			Provider:       wire.Anthropic,
			ThinkingBudget: ThinkingOff,
			IdleTimeout:    Duration(DefaultIdleTimeout),
			TotalTimeout:   Duration(DefaultTotalTimeout),
			Mode:           SummarizerInProxy,
		},
		Limits: Limits{MaxBodyBytes: DefaultMaxBodyBytes, MaxRecoveryRounds: DefaultMaxRecoveryRounds,
			SlowRequestLog: Duration(DefaultSlowRequestLog), BodyReadTimeout: Duration(DefaultBodyReadTimeout),
			IdleConnTimeout: Duration(DefaultIdleConnTimeout), UpstreamHeaderTimeout: Duration(DefaultUpstreamHeaders),
			UpstreamIdleTimeout: Duration(DefaultUpstreamIdle), MaxResponseBytes: DefaultMaxResponseBytes,
			ParseCacheBytes: DefaultParseCacheBytes},
	}
}

// Parse decodes a YAML or JSON document over Default and validates the result. Unknown fields
// and a missing or different apiVersion/kind are errors. Decoding problems are *DecodeError,
// invalid values *ValidationError, both with the line and YAML path of the problem when known.
func Parse(data []byte) (*Config, error) {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(data, &head); err != nil {
		return nil, &DecodeError{Err: syntaxError(err)}
	}
	root := document(data)
	if head.APIVersion != APIVersion {
		return nil, &DecodeError{Line: lineOf(root, "apiVersion"),
			Err: fmt.Errorf("%w: apiVersion %q (want %q)", ErrUnsupportedVersion, head.APIVersion, APIVersion)}
	}
	if head.Kind != Kind {
		return nil, &DecodeError{Line: lineOf(root, "kind"), Err: fmt.Errorf("%w: kind %q (want %q)", ErrUnsupportedVersion, head.Kind, Kind)}
	}
	c := Default()
	if err := yaml.UnmarshalStrict(data, c); err != nil {
		if se := checkSchema(root); se != nil {
			return nil, &DecodeError{Line: se.line, Field: se.field, Err: errors.New(se.msg)}
		}
		return nil, &DecodeError{Err: syntaxError(err)}
	}
	if err := c.Validate(); err != nil {
		var ve *ValidationError
		if errors.As(err, &ve) {
			for i := range ve.Fields {
				ve.Fields[i].Line = lineOf(root, ve.Fields[i].Field)
			}
		}
		return nil, err
	}
	return c, nil
}

// syntaxError drops the layers the YAML library wraps around a parse error ("error
// converting YAML to JSON: yaml: line 3: ..." becomes "line 3: ...").
func syntaxError(err error) error {
	msg := err.Error()
	for _, p := range []string{"error converting YAML to JSON: ", "error unmarshaling JSON: ", "while decoding JSON: ", "yaml: ", "json: "} {
		msg = strings.TrimPrefix(msg, p)
	}
	return errors.New(msg)
}

// Load reads and parses the configuration file at path. Errors name the file.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		var de *DecodeError
		if errors.As(err, &de) {
			de.Path = path
			return nil, de
		}
		var ve *ValidationError
		if errors.As(err, &ve) {
			ve.Path = path
			return nil, ve
		}
		return nil, err
	}
	return c, nil
}

// MarshalYAML writes the configuration as YAML (the ConfigMap form). The output parses back
// to an equal Config.
func (c *Config) MarshalYAML() ([]byte, error) {
	j, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	return yaml.JSONToYAML(j)
}

// Hash returns a stable hex SHA-256 of the configuration's canonical JSON form; the operator
// puts it on the proxy pod template so a configuration change rolls the pods.
func (c *Config) Hash() string {
	j, err := json.Marshal(c)
	if err != nil {
		// Config holds only strings, numbers, bools and slices of them: Marshal cannot fail.
		panic(err)
	}
	sum := sha256.Sum256(j)
	return hex.EncodeToString(sum[:])
}

// Duration is a time.Duration written as a Go duration string ("20s", "3m", "0s").
type Duration time.Duration

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MarshalJSON writes the duration as a string such as "1m30s".
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string such as "20s" or "1m30s".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"20s\", got %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("invalid duration %q: %w", s, err)
	}
	*d = Duration(v)
	return nil
}
