package config

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/condense-dev/condense/internal/wire"
)

// ErrUnsupportedVersion is wrapped by a *DecodeError when a document's apiVersion or kind is
// not the one this package reads.
var ErrUnsupportedVersion = errors.New("unsupported configuration version")

// DecodeError reports a document that is not valid YAML/JSON, has unknown fields or values of
// the wrong type, or carries an unsupported apiVersion/kind.
type DecodeError struct {
	// Path is the file the document came from ("" for Parse).
	Path string
	// Line is the document line of the problem (0: unknown).
	Line int
	// Field is the YAML path of the offending key or value, e.g. "engine.spill.threshold"
	// ("" when unknown).
	Field string
	// Err is the underlying problem.
	Err error
}

// Error implements error.
func (e *DecodeError) Error() string {
	where := "config"
	if e.Path != "" {
		where += " " + e.Path
	}
	if e.Line > 0 {
		where += fmt.Sprintf(": line %d", e.Line)
	}
	if e.Field != "" {
		where += ": " + e.Field
	}
	return fmt.Sprintf("%s: %v", where, e.Err)
}

// Unwrap returns the underlying error.
func (e *DecodeError) Unwrap() error { return e.Err }

// FieldError is one invalid field value.
type FieldError struct {
	// Field is the dotted path of the field, e.g. "engine.spill.threshold".
	Field string
	// Value is the offending value as written.
	Value string
	// Msg says what is allowed.
	Msg string
	// Line is the line of the field in the parsed document (0: not from a document).
	Line int
	// Flag, when set, is the command-line flag the value came from (e.g. "--listen"); Error
	// names it instead of Field.
	Flag string
}

// Error implements error.
func (e FieldError) Error() string {
	switch {
	case e.Flag != "":
		return fmt.Sprintf("%s: %s (got %s)", e.Flag, e.Msg, e.Value)
	case e.Line > 0:
		return fmt.Sprintf("line %d: %s: %s (got %s)", e.Line, e.Field, e.Msg, e.Value)
	}
	return fmt.Sprintf("%s: %s (got %s)", e.Field, e.Msg, e.Value)
}

// ValidationError lists every invalid field of a configuration.
type ValidationError struct {
	// Path is the file the document came from ("" when not loaded from a file).
	Path string
	// Fields holds one entry per invalid field, in document order.
	Fields []FieldError
}

// Error implements error. Values set by flags are named by their flag only.
func (e *ValidationError) Error() string {
	var fields, flags []string
	for _, f := range e.Fields {
		if f.Flag != "" {
			flags = append(flags, f.Error())
		} else {
			fields = append(fields, f.Error())
		}
	}
	if len(fields) == 0 {
		return strings.Join(flags, "; ")
	}
	where := "config"
	if e.Path != "" {
		where = "config " + e.Path
	}
	return fmt.Sprintf("%s: invalid: %s", where, strings.Join(append(fields, flags...), "; "))
}

// SetByFlags marks the fields whose value a command-line flag set (field path → flag name,
// e.g. "listen.proxy" → "--listen"), so that the error names the flag.
func (e *ValidationError) SetByFlags(flags map[string]string) {
	for i := range e.Fields {
		if f, ok := flags[e.Fields[i].Field]; ok {
			e.Fields[i].Flag, e.Fields[i].Line = f, 0
		}
	}
}

// Validate checks every field and returns a *ValidationError listing all problems, or nil.
func (c *Config) Validate() error {
	var errs []FieldError
	bad := func(field string, value any, msg string) {
		errs = append(errs, FieldError{Field: field, Value: fmt.Sprintf("%q", fmt.Sprint(value)), Msg: msg})
	}
	if c.APIVersion != APIVersion {
		bad("apiVersion", c.APIVersion, "must be "+APIVersion)
	}
	if c.Kind != Kind {
		bad("kind", c.Kind, "must be "+Kind)
	}
	checkAddr := func(field, v string, required bool) {
		if v == "" {
			if required {
				bad(field, v, "is required")
			}
			return
		}
		if _, _, err := net.SplitHostPort(v); err != nil {
			bad(field, v, "must be host:port, e.g. \":8080\"")
		}
	}
	checkAddr("listen.proxy", c.Listen.Proxy, true)
	checkAddr("listen.metrics", c.Listen.Metrics, false)
	checkAddr("listen.health", c.Listen.Health, false)
	checkURL := func(field, v string, required bool) {
		if v == "" {
			if required {
				bad(field, v, "is required")
			}
			return
		}
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad(field, v, "must be an absolute http(s) URL")
		}
	}
	checkURL("upstreams.anthropic", c.Upstreams.Anthropic, true)
	checkURL("upstreams.openai", c.Upstreams.OpenAI, true)

	if c.Store.URLEnv == "" {
		if c.Store.URL == "" {
			bad("store.url", c.Store.URL, "is required unless store.urlEnv is set")
		} else if !validStoreURL(c.Store.URL) {
			bad("store.url", c.Store.URL, "must be a store URL: redis://, rediss://, unix://, redis+sentinel://, redis+cluster:// (rediss+ for TLS), bolt:PATH or memory:")
		}
	}

	e := &c.Engine
	switch e.BatchingMode {
	case BatchingTurn, BatchingAgentMessage:
	default:
		bad("engine.batchingMode", e.BatchingMode, "must be turn or agent-message")
	}
	switch e.Trigger.Mode {
	case TriggerAgentMessage, TriggerOnDemand:
	default:
		bad("engine.trigger.mode", e.Trigger.Mode, "must be agent-message or on-demand")
	}
	checkFraction := func(field string, p *float64) {
		if p != nil && !(*p > 0 && *p <= 1) {
			bad(field, *p, "must be a fraction in (0, 1]; leave it out to disable")
		}
	}
	checkFraction("engine.trigger.autoBudgetThreshold", e.Trigger.AutoBudgetThreshold)
	checkFraction("engine.trigger.budgetTurnDelta", e.Trigger.BudgetTurnDelta)
	if e.Trigger.MidRunGraceTurns < 1 {
		bad("engine.trigger.midRunGraceTurns", e.Trigger.MidRunGraceTurns, "must be >= 1")
	}
	if e.Trigger.Horizon < 1 {
		bad("engine.trigger.horizon", e.Trigger.Horizon, "must be >= 1")
	}
	if e.Trigger.MaxHorizon < e.Trigger.Horizon {
		bad("engine.trigger.maxHorizon", e.Trigger.MaxHorizon, "must be >= engine.trigger.horizon")
	}
	if e.MinBatchChars < 0 {
		bad("engine.minBatchChars", e.MinBatchChars, "must be >= 0 (0 disables)")
	}
	if e.Spill.Threshold <= 0 {
		bad("engine.spill.threshold", e.Spill.Threshold, "must be > 0")
	}
	if e.Spill.PreviewBytes < 0 {
		bad("engine.spill.previewBytes", e.Spill.PreviewBytes, "must be >= 0")
	}
	for i, t := range e.ProtectedTools {
		if strings.TrimSpace(t) == "" {
			bad(fmt.Sprintf("engine.protectedTools[%d]", i), t, "must not be empty")
		}
	}
	for i, p := range e.ProtectedPaths {
		if strings.TrimSpace(p) == "" {
			bad(fmt.Sprintf("engine.protectedPaths[%d]", i), p, "must not be empty")
		}
	}
	if e.RecoveryGraceTurns < 0 {
		bad("engine.recoveryGraceTurns", e.RecoveryGraceTurns, "must be >= 0 (0 disables)")
	}
	if e.ChainCompression.RollingWindow < 0 {
		bad("engine.chainCompression.rollingWindow", e.ChainCompression.RollingWindow, "must be >= 0")
	}
	if e.PurgeErrors.CooldownTurns < 1 {
		bad("engine.purgeErrors.cooldownTurns", e.PurgeErrors.CooldownTurns, "must be >= 1")
	}
	if e.PurgeErrors.MinArgChars < 0 {
		bad("engine.purgeErrors.minArgChars", e.PurgeErrors.MinArgChars, "must be >= 0")
	}
	if h := e.Observations.Harness; h != "" && !slices.Contains(ObservationHarnesses, h) {
		bad("engine.observations.harness", h, "must be "+strings.Join(ObservationHarnesses, ", ")+" or empty (every built-in pattern)")
	}
	for i, p := range e.Observations.Patterns {
		field := fmt.Sprintf("engine.observations.patterns[%d]", i)
		if _, err := regexp.Compile(p.Match); err != nil || p.Match == "" {
			bad(field+".match", p.Match, "must be a non-empty RE2 regular expression")
		}
		if re, err := regexp.Compile(p.Action); err != nil || p.Action != "" && re.NumSubexp() < 1 {
			bad(field+".action", p.Action, "must be empty or an RE2 regular expression with a group (the action)")
		}
		if p.Stub != "" && !strings.Contains(p.Stub, "${stub}") {
			bad(field+".stub", p.Stub, "must contain ${stub}")
		}
	}

	s := &c.Summarizer
	if strings.TrimSpace(s.Model) == "" {
		bad("summarizer.model", s.Model, "must be \"extractive\", \"default\" or a model id")
	}
	switch s.Provider {
	case wire.Anthropic, wire.OpenAI:
	default:
		name := s.Provider.String()
		if s.Provider == 0 {
			name = "" // as written: provider: ""
		}
		bad("summarizer.provider", name, "must be anthropic or openai")
	}
	checkURL("summarizer.baseURL", s.BaseURL, false)
	switch s.ThinkingBudget {
	case ThinkingOff, ThinkingMinimal, ThinkingLow, ThinkingMedium, ThinkingHigh, ThinkingXHigh:
	default:
		bad("summarizer.thinkingBudget", s.ThinkingBudget, "must be off, minimal, low, medium, high or xhigh")
	}
	if s.IdleTimeout < 0 {
		bad("summarizer.idleTimeout", s.IdleTimeout.D(), "must be >= 0 (0 disables)")
	}
	if s.TotalTimeout < 0 {
		bad("summarizer.totalTimeout", s.TotalTimeout.D(), "must be >= 0 (0 disables)")
	}
	if s.APIKeyFile != "" && s.APIKeyEnv != "" {
		bad("summarizer.apiKeyEnv", s.APIKeyEnv, "set at most one of apiKeyFile and apiKeyEnv")
	}
	switch s.Mode {
	case SummarizerInProxy, SummarizerJobs:
	default:
		bad("summarizer.mode", s.Mode, "must be in-proxy or jobs")
	}
	if s.Mode == SummarizerJobs && c.Store.URLEnv == "" && strings.HasPrefix(c.Store.URL, "memory:") {
		bad("summarizer.mode", s.Mode, "jobs mode needs a shared store (redis), not memory:")
	}

	if c.SessionAuth.Enabled && c.SessionAuth.SecretFile == "" {
		bad("sessionAuth.secretFile", "", "is required when sessionAuth.enabled is true")
	}
	if c.Limits.MaxBodyBytes <= 0 {
		bad("limits.maxBodyBytes", c.Limits.MaxBodyBytes, "must be > 0")
	}
	if c.Limits.FlushWaitTimeout < 0 {
		bad("limits.flushWaitTimeout", c.Limits.FlushWaitTimeout.D(), "must be >= 0 (0 never waits)")
	}
	if c.Limits.MaxRecoveryRounds < 0 {
		bad("limits.maxRecoveryRounds", c.Limits.MaxRecoveryRounds, "must be >= 0")
	}
	if c.Limits.SlowRequestLog < 0 {
		bad("limits.slowRequestLog", c.Limits.SlowRequestLog.D(), "must be >= 0 (0 never logs)")
	}
	if c.Limits.BodyReadTimeout < 0 {
		bad("limits.bodyReadTimeout", c.Limits.BodyReadTimeout.D(), "must be >= 0 (0 disables)")
	}
	if c.Limits.IdleConnTimeout < 0 {
		bad("limits.idleConnTimeout", c.Limits.IdleConnTimeout.D(), "must be >= 0 (0 disables)")
	}
	if c.Limits.UpstreamHeaderTimeout < 0 {
		bad("limits.upstreamHeaderTimeout", c.Limits.UpstreamHeaderTimeout.D(), "must be >= 0 (0 disables)")
	}
	if c.Limits.UpstreamIdleTimeout < 0 {
		bad("limits.upstreamIdleTimeout", c.Limits.UpstreamIdleTimeout.D(), "must be >= 0 (0 disables)")
	}
	if c.Limits.MaxResponseBytes <= 0 {
		bad("limits.maxResponseBytes", c.Limits.MaxResponseBytes, "must be > 0")
	}
	if c.Limits.ParseCacheBytes < 0 {
		bad("limits.parseCacheBytes", c.Limits.ParseCacheBytes, "must be >= 0 (0 remembers no request)")
	}
	if len(errs) > 0 {
		return &ValidationError{Fields: errs}
	}
	return nil
}

func validStoreURL(u string) bool {
	if u == "memory:" || strings.HasPrefix(u, "memory:?") || strings.HasPrefix(u, "bolt:") {
		return true
	}
	for _, p := range []string{"redis://", "rediss://", "unix://", "redis+sentinel://", "rediss+sentinel://", "redis+cluster://", "rediss+cluster://"} {
		if strings.HasPrefix(u, p) && len(u) > len(p) {
			return true
		}
	}
	return false
}

// SessionToken is the token a client presents for sessionID when session auth is on:
// lowercase hex HMAC-SHA256 of the session id keyed by the policy secret. The operator writes it
// into each AgentSession's token Secret; the proxy compares it in constant time (VerifySessionToken).
func SessionToken(secret []byte, sessionID string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(sessionID))
	return hex.EncodeToString(m.Sum(nil))
}

// VerifySessionToken reports, in constant time, whether token is SessionToken(secret, sessionID).
func VerifySessionToken(secret []byte, sessionID, token string) bool {
	want := SessionToken(secret, sessionID)
	return hmac.Equal([]byte(want), []byte(strings.ToLower(strings.TrimSpace(token))))
}
