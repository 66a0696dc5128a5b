package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/condense-dev/condense/internal/wire"
)

func TestDefaultIsValid(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatalf("Default() invalid: %v", err)
	}
}

func TestParseMinimalKeepsDefaults(t *testing.T) {
	c, err := Parse([]byte("apiVersion: condense.dev/config/v1\nkind: ProxyConfig\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c, Default()) {
		t.Fatalf("minimal document should equal Default():\n got %+v\nwant %+v", c, Default())
	}
}

func TestParseOverridesAndZeroValues(t *testing.T) {
	doc := `
apiVersion: condense.dev/config/v1
kind: ProxyConfig
policy: {name: p1, namespace: agents}
store: {url: "redis://redis:6379/0"}
engine:
  batchingMode: agent-message
  trigger: {mode: on-demand, autoBudgetThreshold: 0.8, budgetTurnDelta: 0.1, cacheAware: false, horizon: 12}
  minBatchChars: 0
  dedup: false
  spill: {threshold: 1000, previewBytes: 0}
  protectedTools: [read]
  protectedPaths: []
  recoveryGraceTurns: 0
  chainCompression: {enabled: false, rollingWindow: 0}
  purgeErrors: {cooldownTurns: 5}
  observations:
    enabled: true
    patterns: [{match: '\AResult (?P<rc>\d+):', stub: 'Result ${rc}: ${stub}', action: '(?m)^> (.*)$', tool: sh, failed: true}]
summarizer:
  model: claude-haiku-4-5
  provider: openai
  thinkingBudget: xhigh
  idleTimeout: 0s
  totalTimeout: 5m
  apiKeyEnv: SUMMARIZER_KEY
  mode: jobs
limits: {maxBodyBytes: 1024, flushWaitTimeout: 1500ms, maxRecoveryRounds: 0}
`
	c, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	e := c.Engine
	if e.BatchingMode != BatchingAgentMessage || e.Trigger.Mode != TriggerOnDemand {
		t.Errorf("modes: %+v", e)
	}
	if e.Trigger.AutoBudgetThreshold == nil || *e.Trigger.AutoBudgetThreshold != 0.8 || *e.Trigger.BudgetTurnDelta != 0.1 {
		t.Errorf("trigger fractions: %+v", e.Trigger)
	}
	if e.Trigger.CacheAware || !e.Trigger.MidRun || e.Trigger.Horizon != 12 || e.Trigger.MaxHorizon != DefaultMaxHorizon || e.Trigger.MidRunGraceTurns != DefaultMidRunGraceTurns {
		t.Errorf("cache-aware trigger: explicit false and 12 kept, the rest defaulted: %+v", e.Trigger)
	}
	if e.MinBatchChars != 0 || e.Dedup || e.Spill.Threshold != 1000 || e.Spill.PreviewBytes != 0 || e.RecoveryGraceTurns != 0 {
		t.Errorf("explicit zeros must not be replaced by defaults: %+v", e)
	}
	if len(e.ProtectedPaths) != 0 || !reflect.DeepEqual(e.ProtectedTools, []string{"read"}) {
		t.Errorf("protected: %+v %+v", e.ProtectedTools, e.ProtectedPaths)
	}
	// Partial nested object: unspecified members keep their defaults.
	if e.ChainCompression.Enabled || e.ChainCompression.RollingWindow != 0 || !e.ChainCompression.FuseRangeSummary {
		t.Errorf("chainCompression: %+v", e.ChainCompression)
	}
	if !e.PurgeErrors.Enabled || e.PurgeErrors.CooldownTurns != 5 || e.PurgeErrors.MinArgChars != DefaultPurgeMinArgChars {
		t.Errorf("purgeErrors: %+v", e.PurgeErrors)
	}
	if o := e.Observations; !o.Enabled || o.Harness != "" || !reflect.DeepEqual(o.Patterns, []ObservationPattern{{Match: `\AResult (?P<rc>\d+):`,
		Stub: "Result ${rc}: ${stub}", Action: `(?m)^> (.*)$`, Tool: "sh", Failed: true}}) {
		t.Errorf("observations: %+v", o)
	}
	if d := Default().Engine.Observations; d.Enabled || d.Harness != "" || d.Patterns == nil {
		t.Errorf("default observations: %+v", d)
	}
	s := c.Summarizer
	if s.IdleTimeout.D() != 0 || s.TotalTimeout.D() != 5*time.Minute || s.Mode != SummarizerJobs || s.ThinkingBudget != ThinkingXHigh {
		t.Errorf("summarizer: %+v", s)
	}
	if c.Limits.FlushWaitTimeout.D() != 1500*time.Millisecond || c.Limits.MaxBodyBytes != 1024 || c.Limits.SlowRequestLog.D() != DefaultSlowRequestLog {
		t.Errorf("limits: %+v", c.Limits)
	}
	if c.Policy.Name != "p1" || c.Policy.Namespace != "agents" {
		t.Errorf("policy: %+v", c.Policy)
	}
}

func TestRoundTripAndHash(t *testing.T) {
	c := Default()
	v := 0.75
	c.Engine.Trigger.AutoBudgetThreshold = &v
	c.Store.URL = "bolt:/var/lib/condense/state.db"
	c.Summarizer.TotalTimeout = Duration(90 * time.Second)
	out, err := c.MarshalYAML()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(out)
	if err != nil {
		t.Fatalf("rendered YAML does not parse: %v\n%s", err, out)
	}
	if !reflect.DeepEqual(back, c) {
		t.Fatalf("round trip changed the config:\n%s", out)
	}
	if back.Hash() != c.Hash() {
		t.Fatal("hash differs for equal configs")
	}
	back.Engine.MinBatchChars++
	if back.Hash() == c.Hash() {
		t.Fatal("hash did not change with the config")
	}
	// Fields left empty on purpose must stay empty, not fall back to their defaults.
	e := Default()
	e.Store = Store{URLEnv: "CONDENSE_STORE_URL"}
	e.Listen.Metrics, e.Listen.Health = "", ""
	e.Engine.ProtectedPaths = []string{}
	out, err = e.MarshalYAML()
	if err != nil {
		t.Fatal(err)
	}
	if back, err = Parse(out); err != nil || !reflect.DeepEqual(back, e) {
		t.Fatalf("round trip of emptied fields: %v\n%s", err, out)
	}
}

func TestDecodeErrors(t *testing.T) {
	cases := map[string]struct {
		doc  string
		want string
	}{
		"unknown field":    {"apiVersion: condense.dev/config/v1\nkind: ProxyConfig\nengine: {minBatchCharz: 3}\n", "minBatchCharz"},
		"wrong version":    {"apiVersion: condense.dev/config/v2\nkind: ProxyConfig\n", "apiVersion"},
		"missing version":  {"kind: ProxyConfig\n", "apiVersion"},
		"wrong kind":       {"apiVersion: condense.dev/config/v1\nkind: Other\n", "kind"},
		"not yaml":         {"apiVersion: [\n", ""},
		"wrong type":       {"apiVersion: condense.dev/config/v1\nkind: ProxyConfig\nengine: {minBatchChars: lots}\n", ""},
		"numeric duration": {"apiVersion: condense.dev/config/v1\nkind: ProxyConfig\nsummarizer: {idleTimeout: 20}\n", "duration"},
		"bad duration":     {"apiVersion: condense.dev/config/v1\nkind: ProxyConfig\nsummarizer: {idleTimeout: soon}\n", "soon"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc))
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("want *DecodeError, got %T %v", err, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
		})
	}
	_, err := Parse([]byte("apiVersion: condense.dev/config/v2\nkind: ProxyConfig\n"))
	if !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("want ErrUnsupportedVersion, got %v", err)
	}
}

func TestValidationErrors(t *testing.T) {
	cases := map[string]struct {
		mutate func(*Config)
		field  string
	}{
		"listen":        {func(c *Config) { c.Listen.Proxy = "8080" }, "listen.proxy"},
		"listen empty":  {func(c *Config) { c.Listen.Proxy = "" }, "listen.proxy"},
		"upstream":      {func(c *Config) { c.Upstreams.Anthropic = "api.anthropic.com" }, "upstreams.anthropic"},
		"store scheme":  {func(c *Config) { c.Store.URL = "postgres://x" }, "store.url"},
		"store empty":   {func(c *Config) { c.Store.URL = "" }, "store.url"},
		"batching":      {func(c *Config) { c.Engine.BatchingMode = "every-turn" }, "engine.batchingMode"},
		"trigger":       {func(c *Config) { c.Engine.Trigger.Mode = "agentic-auto" }, "engine.trigger.mode"},
		"budget zero":   {func(c *Config) { v := 0.0; c.Engine.Trigger.AutoBudgetThreshold = &v }, "engine.trigger.autoBudgetThreshold"},
		"budget pct":    {func(c *Config) { v := 80.0; c.Engine.Trigger.AutoBudgetThreshold = &v }, "engine.trigger.autoBudgetThreshold"},
		"delta":         {func(c *Config) { v := -0.1; c.Engine.Trigger.BudgetTurnDelta = &v }, "engine.trigger.budgetTurnDelta"},
		"midRunGrace":   {func(c *Config) { c.Engine.Trigger.MidRunGraceTurns = 0 }, "engine.trigger.midRunGraceTurns"},
		"horizon":       {func(c *Config) { c.Engine.Trigger.Horizon = 0 }, "engine.trigger.horizon"},
		"maxHorizon":    {func(c *Config) { c.Engine.Trigger.Horizon = 10; c.Engine.Trigger.MaxHorizon = 9 }, "engine.trigger.maxHorizon"},
		"minBatch":      {func(c *Config) { c.Engine.MinBatchChars = -1 }, "engine.minBatchChars"},
		"spill":         {func(c *Config) { c.Engine.Spill.Threshold = 0 }, "engine.spill.threshold"},
		"preview":       {func(c *Config) { c.Engine.Spill.PreviewBytes = -1 }, "engine.spill.previewBytes"},
		"protected":     {func(c *Config) { c.Engine.ProtectedTools = []string{" "} }, "engine.protectedTools[0]"},
		"protectedPath": {func(c *Config) { c.Engine.ProtectedPaths = []string{"a", ""} }, "engine.protectedPaths[1]"},
		"grace":         {func(c *Config) { c.Engine.RecoveryGraceTurns = -2 }, "engine.recoveryGraceTurns"},
		"window":        {func(c *Config) { c.Engine.ChainCompression.RollingWindow = -1 }, "engine.chainCompression.rollingWindow"},
		"cooldown":      {func(c *Config) { c.Engine.PurgeErrors.CooldownTurns = 0 }, "engine.purgeErrors.cooldownTurns"},
		"minArg":        {func(c *Config) { c.Engine.PurgeErrors.MinArgChars = -5 }, "engine.purgeErrors.minArgChars"},
		"harness":       {func(c *Config) { c.Engine.Observations.Harness = "openhands" }, "engine.observations.harness"},
		"obsMatch": {func(c *Config) { c.Engine.Observations.Patterns = []ObservationPattern{{Match: "("}} },
			"engine.observations.patterns[0].match"},
		"obsEmpty": {func(c *Config) { c.Engine.Observations.Patterns = []ObservationPattern{{}} },
			"engine.observations.patterns[0].match"},
		"obsAction": {func(c *Config) {
			c.Engine.Observations.Patterns = []ObservationPattern{{Match: "x", Action: "no group"}}
		},
			"engine.observations.patterns[0].action"},
		"obsStub": {func(c *Config) { c.Engine.Observations.Patterns = []ObservationPattern{{Match: "x", Stub: "[pruned]"}} },
			"engine.observations.patterns[0].stub"},
		"model":       {func(c *Config) { c.Summarizer.Model = "" }, "summarizer.model"},
		"provider":    {func(c *Config) { c.Summarizer.Provider = wire.Responses }, "summarizer.provider"},
		"thinking":    {func(c *Config) { c.Summarizer.ThinkingBudget = "max" }, "summarizer.thinkingBudget"},
		"idle":        {func(c *Config) { c.Summarizer.IdleTimeout = -1 }, "summarizer.idleTimeout"},
		"both keys":   {func(c *Config) { c.Summarizer.APIKeyEnv = "K"; c.Summarizer.APIKeyFile = "/k" }, "summarizer.apiKeyEnv"},
		"mode":        {func(c *Config) { c.Summarizer.Mode = "batch" }, "summarizer.mode"},
		"jobs memory": {func(c *Config) { c.Summarizer.Mode = SummarizerJobs }, "summarizer.mode"},
		"auth":        {func(c *Config) { c.SessionAuth.Enabled = true }, "sessionAuth.secretFile"},
		"body":        {func(c *Config) { c.Limits.MaxBodyBytes = 0 }, "limits.maxBodyBytes"},
		"flushWait":   {func(c *Config) { c.Limits.FlushWaitTimeout = -1 }, "limits.flushWaitTimeout"},
		"rounds":      {func(c *Config) { c.Limits.MaxRecoveryRounds = -1 }, "limits.maxRecoveryRounds"},
		"slowLog":     {func(c *Config) { c.Limits.SlowRequestLog = -1 }, "limits.slowRequestLog"},
		"bodyRead":    {func(c *Config) { c.Limits.BodyReadTimeout = -1 }, "limits.bodyReadTimeout"},
		"idleConn":    {func(c *Config) { c.Limits.IdleConnTimeout = -1 }, "limits.idleConnTimeout"},
		"upHeaders":   {func(c *Config) { c.Limits.UpstreamHeaderTimeout = -1 }, "limits.upstreamHeaderTimeout"},
		"upIdle":      {func(c *Config) { c.Limits.UpstreamIdleTimeout = -1 }, "limits.upstreamIdleTimeout"},
		"respBytes":   {func(c *Config) { c.Limits.MaxResponseBytes = 0 }, "limits.maxResponseBytes"},
		"parseCache":  {func(c *Config) { c.Limits.ParseCacheBytes = -1 }, "limits.parseCacheBytes"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := Default()
			tc.mutate(c)
			err := c.Validate()
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("want *ValidationError, got %v", err)
			}
			if len(ve.Fields) != 1 || ve.Fields[0].Field != tc.field {
				t.Fatalf("want exactly one error on %s, got %v", tc.field, ve.Fields)
			}
		})
	}
}

func TestValidationListsEveryProblem(t *testing.T) {
	c := Default()
	c.Engine.MinBatchChars = -1
	c.Limits.MaxBodyBytes = -1
	var ve *ValidationError
	if err := c.Validate(); !errors.As(err, &ve) || len(ve.Fields) != 2 {
		t.Fatalf("want two field errors, got %v", err)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	if err := os.WriteFile(good, []byte(`{"apiVersion":"condense.dev/config/v1","kind":"ProxyConfig","engine":{"minBatchChars":7}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(good)
	if err != nil {
		t.Fatal(err)
	}
	if c.Engine.MinBatchChars != 7 {
		t.Fatalf("minBatchChars = %d", c.Engine.MinBatchChars)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: condense.dev/config/v1\nkind: ProxyConfig\nengine: {minBatchChars: -3}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Load(bad)
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Path != bad || !strings.Contains(err.Error(), bad) {
		t.Fatalf("want ValidationError naming %s, got %v", bad, err)
	}
	_, err = Load(filepath.Join(dir, "missing.yaml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("want ErrNotExist, got %v", err)
	}
}

func TestSecretsAndKeys(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "key")
	if err := os.WriteFile(f, []byte("  sk-test\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := Summarizer{APIKeyFile: f}.APIKey()
	if err != nil || k != "sk-test" {
		t.Fatalf("APIKey file = %q, %v", k, err)
	}
	t.Setenv("CONDENSE_TEST_KEY", "sk-env")
	if k, err := (Summarizer{APIKeyEnv: "CONDENSE_TEST_KEY"}).APIKey(); err != nil || k != "sk-env" {
		t.Fatalf("APIKey env = %q, %v", k, err)
	}
	if _, err := (Summarizer{APIKeyEnv: "CONDENSE_TEST_UNSET_KEY"}).APIKey(); err == nil {
		t.Fatal("unset env must be an error")
	}
	if k, err := (Summarizer{}).APIKey(); err != nil || k != "" {
		t.Fatalf("no key configured = %q, %v", k, err)
	}
	sec, err := SessionAuth{SecretFile: f}.Secret()
	if err != nil || string(sec) != "sk-test" {
		t.Fatalf("Secret = %q, %v", sec, err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := (SessionAuth{SecretFile: empty}).Secret(); err == nil {
		t.Fatal("empty secret must be an error")
	}
	t.Setenv("CONDENSE_TEST_STORE", "redis://r:6379")
	if u, err := (Store{URL: "memory:", URLEnv: "CONDENSE_TEST_STORE"}).ResolvedURL(); err != nil || u != "redis://r:6379" {
		t.Fatalf("ResolvedURL = %q, %v", u, err)
	}
}

func TestSessionToken(t *testing.T) {
	// RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?".
	const want = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
	if got := SessionToken([]byte("Jefe"), "what do ya want for nothing?"); got != want {
		t.Fatalf("SessionToken = %s", got)
	}
	if !VerifySessionToken([]byte("Jefe"), "what do ya want for nothing?", strings.ToUpper(want)) {
		t.Fatal("valid token rejected")
	}
	if VerifySessionToken([]byte("Jefe"), "other session", want) {
		t.Fatal("token accepted for another session")
	}
}

// TestErrorsNameLineAndPath: a decoding problem names the file, the line and the YAML path of
// the offending key (not the JSON decoder's words); an invalid value names its line too.
func TestErrorsNameLineAndPath(t *testing.T) {
	const head = "apiVersion: condense.dev/config/v1\nkind: ProxyConfig\n"
	cases := map[string]struct {
		doc, field string
		line       int
		msg        string
	}{
		"unknown top-level": {head + "helth: {}\n", "helth", 3, "unknown field (known here: apiVersion, kind, policy, listen"},
		"unknown nested":    {head + "engine:\n  spill:\n    thresold: 3\n", "engine.spill.thresold", 5, "unknown field (known here: threshold, previewBytes)"},
		"wrong type":        {head + "engine:\n  minBatchChars: lots\n", "engine.minBatchChars", 4, `must be an integer (got "lots")`},
		"bad duration":      {head + "limits:\n  bodyReadTimeout: soon\n", "limits.bodyReadTimeout", 4, `must be a duration such as "20s"`},
		"list expected":     {head + "engine:\n  protectedTools: read\n", "engine.protectedTools", 4, "must be a list"},
		"repeated key":      {head + "engine:\n  dedup: true\n  dedup: false\n", "engine.dedup", 5, "repeated key (first at line 4)"},
		"json document":     {"{\"apiVersion\":\"condense.dev/config/v1\",\"kind\":\"ProxyConfig\",\n\"limits\":{\"maxBodyBytes\":\"x\"}}", "limits.maxBodyBytes", 2, "must be an integer"},
		"unknown provider":  {head + "summarizer:\n  provider: gemini\n", "summarizer.provider", 4, `unknown wire format "gemini" (want anthropic, openai or responses)`},
		"numeric provider":  {head + "summarizer:\n  provider: 1\n", "summarizer.provider", 4, `unknown wire format "1"`},
		"provider mapping":  {head + "summarizer:\n  provider: {name: openai}\n", "summarizer.provider", 4, "must be a string"},
		// A number where a string goes is what the decoder accepts: the problem found is the next one.
		"after a number string": {head + "listen: {proxy: 8080}\nlimits: {maxBodyByte: 1}\n", "limits.maxBodyByte", 4, "unknown field"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "proxy.yaml")
			if err := os.WriteFile(path, []byte(tc.doc), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path)
			var de *DecodeError
			if !errors.As(err, &de) || de.Field != tc.field || de.Line != tc.line {
				t.Fatalf("err = %#v (%v), want field %s line %d", err, err, tc.field, tc.line)
			}
			want := fmt.Sprintf("config %s: line %d: %s: %s", path, tc.line, tc.field, tc.msg)
			if !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "JSON") {
				t.Fatalf("error %q, want it to start with %q", err, want)
			}
		})
	}
	_, err := Parse([]byte(head + "engine:\n  protectedTools: [read, \" \"]\nlisten:\n  proxy: nonsense\n"))
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Fields) != 2 ||
		err.Error() != `config: invalid: line 6: listen.proxy: must be host:port, e.g. ":8080" (got "nonsense"); line 4: engine.protectedTools[1]: must not be empty (got " ")` {
		t.Fatalf("validation error %q", err)
	}
	// A format name the summarizer does not take, or none, is a value to validate.
	for v, want := range map[string]string{"responses": `"responses"`, `""`: `""`} {
		_, err = Parse([]byte(head + "summarizer:\n  provider: " + v + "\n"))
		if !errors.As(err, &ve) || err.Error() != "config: invalid: line 4: summarizer.provider: must be anthropic or openai (got "+want+")" {
			t.Fatalf("provider %s: %v", v, err)
		}
	}
	_, err = Parse([]byte("apiVersion: condense.dev/config/v1\nkind: ProxyConfig\n  bad: indent\n"))
	if err == nil || !strings.HasPrefix(err.Error(), "config: line 3: ") {
		t.Fatalf("syntax error %q", err)
	}
}

// TestSetByFlags: a value a flag set is reported under the flag's name, without the config
// file's name or a line.
func TestSetByFlags(t *testing.T) {
	c := Default()
	c.Listen.Proxy, c.Limits.MaxBodyBytes = "nonsense", 0
	err := c.Validate()
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatal(err)
	}
	ve.Path = "proxy.yaml"
	ve.SetByFlags(map[string]string{"listen.proxy": "--listen"})
	if got := ve.Error(); got != `config proxy.yaml: invalid: limits.maxBodyBytes: must be > 0 (got "0"); --listen: must be host:port, e.g. ":8080" (got "nonsense")` {
		t.Fatalf("mixed: %s", got)
	}
	c.Limits.MaxBodyBytes = 1
	errors.As(c.Validate(), &ve)
	ve.SetByFlags(map[string]string{"listen.proxy": "--listen"})
	if got := ve.Error(); got != `--listen: must be host:port, e.g. ":8080" (got "nonsense")` {
		t.Fatalf("flag only: %s", got)
	}
}
