package controllers

import (
	"fmt"
	"math"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	condensev1 "github.com/condense-dev/condense/api/v1alpha1"
	"github.com/condense-dev/condense/internal/config"
)

// Paths and environment variable names inside the pods the operator creates.
const (
	// ConfigKey is the ConfigMap key holding the rendered configuration.
	ConfigKey = "config.yaml"
	// ConfigDir is where the configuration ConfigMap is mounted.
	ConfigDir = "/etc/condense"
	// SessionAuthDir is where the session-auth secret is mounted.
	SessionAuthDir = "/etc/condense/session-auth"
	// SessionAuthFile is the mounted HMAC secret file.
	SessionAuthFile = SessionAuthDir + "/secret"
	// EnvStoreURL carries an external store URL from its Secret.
	EnvStoreURL = "CONDENSE_STORE_URL"
	// EnvSummarizerAPIKey carries the summarizer API key from its Secret.
	EnvSummarizerAPIKey = "CONDENSE_SUMMARIZER_API_KEY"
	// EnvGoMemLimit is the Go runtime's soft memory limit, set to 90 % of a container's
	// memory limit so that the collector works harder before the container runs out.
	EnvGoMemLimit = "GOMEMLIMIT"
	// ProxyPort is the proxy's container and Service port.
	ProxyPort = 8080
	// MetricsPort serves Prometheus metrics.
	MetricsPort = 9090
	// HealthPort serves /healthz and /readyz.
	HealthPort = 8081
	// RedisPort is the managed Redis port.
	RedisPort = 6379
)

// ConfigPath is the full path of the mounted configuration file.
const ConfigPath = ConfigDir + "/" + ConfigKey

// Names of the child objects of a PruningPolicy.
func proxyName(p *condensev1.PruningPolicy) string       { return p.Name + "-proxy" }
func proxyConfigName(p *condensev1.PruningPolicy) string { return p.Name + "-proxy-config" }
func prunerName(p *condensev1.PruningPolicy) string      { return p.Name + "-pruner" }
func redisName(p *condensev1.PruningPolicy) string       { return p.Name + "-redis" }
func redisConfigName(p *condensev1.PruningPolicy) string { return p.Name + "-redis-config" }
func sessionTokenName(s *condensev1.AgentSession) string { return s.Name + "-token" }
func managedRedisURL(p *condensev1.PruningPolicy) string {
	return fmt.Sprintf("redis://%s.%s.svc:%d/0", redisName(p), p.Namespace, RedisPort)
}
func proxyEndpoint(p *condensev1.PruningPolicy) string {
	return fmt.Sprintf("http://%s.%s.svc:%d", proxyName(p), p.Namespace, ProxyPort)
}

func i32(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

func boolOr(p *bool, def bool) bool {
	if p == nil {
		return def
	}
	return *p
}

func strOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// RenderConfig turns a PruningPolicy into the data-plane configuration its proxy and pruner
// pods load. Unset fields (as in objects that did not pass through the API server's
// defaulting) take the same defaults as the CRD. The result is validated; an invalid
// result is a user mistake in the policy and comes back as a *config.ValidationError.
func RenderConfig(p *condensev1.PruningPolicy) (*config.Config, error) {
	s := &p.Spec
	c := config.Default()
	c.Policy = config.PolicyRef{Name: p.Name, Namespace: p.Namespace}
	c.Listen = config.Listen{
		Proxy:   fmt.Sprintf(":%d", ProxyPort),
		Metrics: fmt.Sprintf(":%d", MetricsPort),
		Health:  fmt.Sprintf(":%d", HealthPort),
	}
	c.Upstreams.Anthropic = strOr(s.Upstreams.Anthropic, config.DefaultAnthropicBaseURL)
	c.Upstreams.OpenAI = strOr(s.Upstreams.OpenAI, config.DefaultOpenAIBaseURL)

	switch {
	case s.Redis.External != nil:
		c.Store = config.Store{URLEnv: EnvStoreURL}
	default:
		c.Store = config.Store{URL: managedRedisURL(p)}
	}

	e := &c.Engine
	e.BatchingMode = config.BatchingMode(strOr(string(s.BatchingMode), string(config.BatchingTurn)))
	e.Trigger.Mode = config.TriggerMode(strOr(string(s.Trigger.Mode), string(config.TriggerAgentMessage)))
	e.Trigger.AutoBudgetThreshold = copyFloat(s.Trigger.AutoBudgetThreshold)
	e.Trigger.BudgetTurnDelta = copyFloat(s.Trigger.BudgetTurnDelta)
	e.Trigger.CacheAware = boolOr(s.Trigger.CacheAware, true)
	e.Trigger.MidRun = boolOr(s.Trigger.MidRun, true)
	e.Trigger.MidRunGraceTurns = int(i32(s.Trigger.MidRunGraceTurns, config.DefaultMidRunGraceTurns))
	e.Trigger.Horizon = int(i32(s.Trigger.Horizon, config.DefaultHorizon))
	e.Trigger.MaxHorizon = int(i32(s.Trigger.MaxHorizon, config.DefaultMaxHorizon))
	e.MinBatchChars = int(i32(s.MinBatchChars, config.DefaultMinBatchChars))
	e.Dedup = boolOr(s.Dedup, true)
	e.Spill.Threshold = int(i32(s.Spill.Threshold, config.DefaultSpillThreshold))
	e.Spill.PreviewBytes = int(i32(s.Spill.PreviewBytes, config.DefaultSpillPreviewBytes))
	e.ProtectedTools = append([]string{}, s.ProtectedTools...)
	if s.ProtectedPaths == nil {
		e.ProtectedPaths = []string{config.DefaultProtectedPath}
	} else {
		e.ProtectedPaths = append([]string{}, s.ProtectedPaths...)
	}
	e.RecoveryGraceTurns = int(i32(s.RecoveryGraceTurns, config.DefaultRecoveryGraceTurns))
	cc := &s.ChainCompression
	e.ChainCompression = config.ChainCompression{
		Enabled:                     boolOr(cc.Enabled, true),
		RollingWindow:               int(i32(cc.RollingWindow, config.DefaultRollingWindow)),
		StripFinalAssistantThinking: boolOr(cc.StripFinalAssistantThinking, true),
		FuseRangeSummary:            boolOr(cc.FuseRangeSummary, true),
	}
	pe := &s.PurgeErrors
	e.PurgeErrors = config.PurgeErrors{
		Enabled:       boolOr(pe.Enabled, true),
		CooldownTurns: int(i32(pe.CooldownTurns, config.DefaultPurgeCooldownTurns)),
		MinArgChars:   int(i32(pe.MinArgChars, config.DefaultPurgeMinArgChars)),
	}

	sm := &s.Summarizer
	c.Summarizer.Model = strOr(sm.Model, config.DefaultSummarizerModel)
	c.Summarizer.Provider = config.ProviderFormat(strOr(string(sm.Provider), string(config.ProviderAnthropic)))
	c.Summarizer.BaseURL = sm.BaseURL
	c.Summarizer.ThinkingBudget = config.ThinkingBudget(strOr(string(sm.ThinkingBudget), string(config.ThinkingOff)))
	c.Summarizer.IdleTimeout = durOr(sm.IdleTimeoutDuration(), config.DefaultIdleTimeout)
	c.Summarizer.TotalTimeout = durOr(sm.TotalTimeoutDuration(), config.DefaultTotalTimeout)
	if sm.Credentials != nil {
		c.Summarizer.APIKeyEnv = EnvSummarizerAPIKey
	}
	if s.Pruner.Replicas > 0 {
		c.Summarizer.Mode = config.SummarizerJobs
	} else {
		c.Summarizer.Mode = config.SummarizerInProxy
	}
	if s.SessionAuth != nil {
		c.SessionAuth = config.SessionAuth{Enabled: true, SecretFile: SessionAuthFile}
	}
	l := &s.Proxy.Limits
	c.Limits.MaxBodyBytes = bytesOr(l.MaxBodyBytes, config.DefaultMaxBodyBytes)
	c.Limits.FlushWaitTimeout = durOr(l.FlushWaitTimeoutDuration(), 0)
	c.Limits.MaxRecoveryRounds = int(i32(l.MaxRecoveryRounds, config.DefaultMaxRecoveryRounds))
	c.Limits.ParseCacheBytes = bytesOr(l.ParseCacheBytes, config.DefaultParseCacheBytes)
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

func copyFloat(p *float64) *float64 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// bytesOr returns q in bytes (a fraction rounds up; past the int64 range, the nearest
// int64), or def when q is unset.
func bytesOr(q *resource.Quantity, def int64) int64 {
	switch {
	case q == nil:
		return def
	case q.Cmp(*resource.NewQuantity(math.MaxInt64, resource.BinarySI)) >= 0:
		return math.MaxInt64
	case q.Cmp(*resource.NewQuantity(math.MinInt64, resource.BinarySI)) <= 0:
		return math.MinInt64
	}
	return q.Value()
}

func durOr(d *time.Duration, def time.Duration) config.Duration {
	if d == nil {
		return config.Duration(def)
	}
	return config.Duration(*d)
}

// storeSchemeFor returns the URL scheme prefixes an external Redis of the given mode accepts.
func storeSchemesFor(mode condensev1.RedisMode) []string {
	switch mode {
	case "sentinel":
		return []string{"redis+sentinel://", "rediss+sentinel://"}
	case "cluster":
		return []string{"redis+cluster://", "rediss+cluster://"}
	default:
		return []string{"redis://", "rediss://"}
	}
}

// checkExternalURL reports whether an external store URL matches the declared mode.
func checkExternalURL(mode condensev1.RedisMode, url string) error {
	for _, p := range storeSchemesFor(mode) {
		if strings.HasPrefix(url, p) && len(url) > len(p) {
			return nil
		}
	}
	return fmt.Errorf("redis.external: the URL in the secret must start with %s for mode %q",
		strings.Join(storeSchemesFor(mode), " or "), strOr(string(mode), "standalone"))
}
