package specs

import (
	"fmt"
	"math"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	condensev1 "github.com/condense-dev/condense/api/v1alpha1"
	"github.com/condense-dev/condense/internal/config"
	"github.com/condense-dev/condense/internal/wire"
)

// BuildConfig turns a PruningPolicy into the validated data-plane configuration its pods load;
// unset fields take the CRD's defaults. An invalid result is a user mistake in the policy and
// comes back as a *config.ValidationError.
func BuildConfig(p *condensev1.PruningPolicy) (*config.Config, error) {
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
		c.Store = config.Store{URL: ManagedRedisURL(p)}
	}

	e := &c.Engine
	e.BatchingMode = config.BatchingMode(strOr(string(s.BatchingMode), string(config.BatchingTurn)))
	e.Trigger.Mode = config.TriggerMode(strOr(string(s.Trigger.Mode), string(config.TriggerAgentMessage)))
	e.Trigger.AutoBudgetThreshold = copyFloat(s.Trigger.AutoBudgetThreshold)
	e.Trigger.BudgetTurnDelta = copyFloat(s.Trigger.BudgetTurnDelta)
	e.Trigger.CacheAware = ptr.Deref(s.Trigger.CacheAware, true)
	e.Trigger.MidRun = ptr.Deref(s.Trigger.MidRun, true)
	e.Trigger.MidRunGraceTurns = int(ptr.Deref(s.Trigger.MidRunGraceTurns, config.DefaultMidRunGraceTurns))
	e.Trigger.Horizon = int(ptr.Deref(s.Trigger.Horizon, config.DefaultHorizon))
	e.Trigger.MaxHorizon = int(ptr.Deref(s.Trigger.MaxHorizon, config.DefaultMaxHorizon))
	e.MinBatchChars = int(ptr.Deref(s.MinBatchChars, config.DefaultMinBatchChars))
	e.Dedup = ptr.Deref(s.Dedup, true)
	e.Spill.Threshold = int(ptr.Deref(s.Spill.Threshold, config.DefaultSpillThreshold))
	e.Spill.PreviewBytes = int(ptr.Deref(s.Spill.PreviewBytes, config.DefaultSpillPreviewBytes))
	e.ProtectedTools = append([]string{}, s.ProtectedTools...)
	if s.ProtectedPaths == nil {
		e.ProtectedPaths = []string{config.DefaultProtectedPath}
	} else {
		e.ProtectedPaths = append([]string{}, s.ProtectedPaths...)
	}
	e.RecoveryGraceTurns = int(ptr.Deref(s.RecoveryGraceTurns, config.DefaultRecoveryGraceTurns))
	cc := &s.ChainCompression
	e.ChainCompression = config.ChainCompression{
		Enabled:                     ptr.Deref(cc.Enabled, true),
		RollingWindow:               int(ptr.Deref(cc.RollingWindow, config.DefaultRollingWindow)),
		StripFinalAssistantThinking: ptr.Deref(cc.StripFinalAssistantThinking, true),
		FuseRangeSummary:            ptr.Deref(cc.FuseRangeSummary, true),
	}
	pe := &s.PurgeErrors
	e.PurgeErrors = config.PurgeErrors{
		Enabled:       ptr.Deref(pe.Enabled, true),
		CooldownTurns: int(ptr.Deref(pe.CooldownTurns, config.DefaultPurgeCooldownTurns)),
		MinArgChars:   int(ptr.Deref(pe.MinArgChars, config.DefaultPurgeMinArgChars)),
	}
	ob := &s.Observations
	e.Observations = config.Observations{Enabled: ptr.Deref(ob.Enabled, false), Harness: string(ob.Harness),
		Patterns: []config.ObservationPattern{}}
	for _, p := range ob.Patterns {
		e.Observations.Patterns = append(e.Observations.Patterns,
			config.ObservationPattern{Match: p.Match, Stub: p.Stub, Action: p.Action, Tool: p.Tool, Failed: p.Failed})
	}

	sm := &s.Summarizer
	c.Summarizer.Model = strOr(sm.Model, config.DefaultSummarizerModel)
	prov, err := wire.ParseFormat(strOr(string(sm.Provider), wire.Anthropic.String()))
	if err != nil { // the CRD's enum admits no other value
		return nil, &config.ValidationError{Fields: []config.FieldError{{Field: "summarizer.provider",
			Value: fmt.Sprintf("%q", sm.Provider), Msg: "must be anthropic or openai"}}}
	}
	c.Summarizer.Provider = prov
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
	c.Limits.MaxRecoveryRounds = int(ptr.Deref(l.MaxRecoveryRounds, config.DefaultMaxRecoveryRounds))
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
func CheckExternalURL(mode condensev1.RedisMode, url string) error {
	for _, p := range storeSchemesFor(mode) {
		if strings.HasPrefix(url, p) && len(url) > len(p) {
			return nil
		}
	}
	return fmt.Errorf("redis.external: the URL in the secret must start with %s for mode %q",
		strings.Join(storeSchemesFor(mode), " or "), strOr(string(mode), "standalone"))
}
