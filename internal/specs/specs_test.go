package specs

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	condensev1 "github.com/condense-dev/condense/api/v1alpha1"
	"github.com/condense-dev/condense/internal/config"
	"github.com/condense-dev/condense/internal/wire"
)

func policy(mut func(*condensev1.PruningPolicy)) *condensev1.PruningPolicy {
	p := &condensev1.PruningPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "team", Namespace: "agents"},
		Spec:       condensev1.PruningPolicySpec{Redis: condensev1.RedisSpec{Managed: &condensev1.ManagedRedisSpec{}}},
	}
	if mut != nil {
		mut(p)
	}
	return p
}

func TestBuildConfigDefaults(t *testing.T) {
	c, err := BuildConfig(policy(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := config.Default()
	want.Policy = config.PolicyRef{Name: "team", Namespace: "agents"}
	want.Store = config.Store{URL: "redis://team-redis.agents.svc:6379/0"}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("unset policy must render the config defaults with the managed store:\n got %+v\nwant %+v", c, want)
	}
}

func TestBuildConfigEveryField(t *testing.T) {
	th, delta := 0.8, 0.1
	p := policy(func(p *condensev1.PruningPolicy) {
		s := &p.Spec
		s.BatchingMode = "agent-message"
		s.Trigger = condensev1.TriggerSpec{Mode: "on-demand", AutoBudgetThreshold: &th, BudgetTurnDelta: &delta,
			CacheAware: new(false), MidRun: new(false), MidRunGraceTurns: new(int32(2)), Horizon: new(int32(4)), MaxHorizon: new(int32(6))}
		s.MinBatchChars = new(int32(0))
		s.Dedup = new(false)
		s.Spill = condensev1.SpillSpec{Threshold: new(int32(100)), PreviewBytes: new(int32(10))}
		s.ProtectedTools = []string{"todo"}
		s.ProtectedPaths = []string{}
		s.RecoveryGraceTurns = new(int32(0))
		s.ChainCompression = condensev1.ChainCompressionSpec{Enabled: new(false), RollingWindow: new(int32(5)),
			StripFinalAssistantThinking: new(false), FuseRangeSummary: new(false)}
		s.PurgeErrors = condensev1.PurgeErrorsSpec{Enabled: new(false), CooldownTurns: new(int32(4)), MinArgChars: new(int32(9))}
		s.Observations = condensev1.ObservationsSpec{Enabled: new(true), Harness: "swe-agent",
			Patterns: []condensev1.ObservationPatternSpec{{Match: `\AResult (?P<rc>\d+):\n`, Stub: "Result ${rc}:\n${stub}", Action: "(?m)^> (.*)$", Tool: "sh", Failed: true}}}
		s.Summarizer = condensev1.SummarizerSpec{Model: "m", Provider: "openai", BaseURL: "http://gw:1/v1", ThinkingBudget: "high",
			IdleTimeout: &metav1.Duration{Duration: 0}, TotalTimeout: &metav1.Duration{Duration: time.Minute},
			Credentials: &condensev1.CredentialsSpec{SecretKeyRef: corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "k"}, Key: "key"}}}
		s.Upstreams = condensev1.UpstreamsSpec{Anthropic: "http://a:1", OpenAI: "http://o:2/v1"}
		s.SessionAuth = &condensev1.SessionAuthSpec{SecretRef: corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "auth"}, Key: "s"}}
		s.Pruner.Replicas = 2
		s.Proxy.Limits = condensev1.ProxyLimits{MaxBodyBytes: new(resource.MustParse("1.5Mi")), FlushWaitTimeout: &metav1.Duration{Duration: 2 * time.Second},
			MaxRecoveryRounds: new(int32(0)), ParseCacheBytes: new(resource.MustParse("0"))}
		s.Redis = condensev1.RedisSpec{External: &condensev1.ExternalRedisSpec{URLSecretRef: corev1.SecretKeySelector{Key: "url"}}}
	})
	c, err := BuildConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	e := c.Engine
	checks := []struct {
		name      string
		got, want any
	}{
		{"batching", e.BatchingMode, config.BatchingAgentMessage},
		{"trigger", e.Trigger.Mode, config.TriggerOnDemand},
		{"budget", *e.Trigger.AutoBudgetThreshold, 0.8},
		{"delta", *e.Trigger.BudgetTurnDelta, 0.1},
		{"cacheAware", e.Trigger.CacheAware, false},
		{"midRun", e.Trigger.MidRun, false},
		{"midRunGrace", e.Trigger.MidRunGraceTurns, 2},
		{"horizon", e.Trigger.Horizon, 4},
		{"maxHorizon", e.Trigger.MaxHorizon, 6},
		{"minBatch", e.MinBatchChars, 0},
		{"dedup", e.Dedup, false},
		{"spill", e.Spill, config.Spill{Threshold: 100, PreviewBytes: 10}},
		{"tools", e.ProtectedTools, []string{"todo"}},
		{"paths", e.ProtectedPaths, []string{}},
		{"grace", e.RecoveryGraceTurns, 0},
		{"chain", e.ChainCompression, config.ChainCompression{RollingWindow: 5}},
		{"purge", e.PurgeErrors, config.PurgeErrors{CooldownTurns: 4, MinArgChars: 9}},
		{"observations", e.Observations, config.Observations{Enabled: true, Harness: "swe-agent",
			Patterns: []config.ObservationPattern{{Match: `\AResult (?P<rc>\d+):\n`, Stub: "Result ${rc}:\n${stub}", Action: "(?m)^> (.*)$", Tool: "sh", Failed: true}}}},
		{"model", c.Summarizer.Model, "m"},
		{"provider", c.Summarizer.Provider, wire.OpenAI},
		{"baseURL", c.Summarizer.BaseURL, "http://gw:1/v1"},
		{"thinking", c.Summarizer.ThinkingBudget, config.ThinkingHigh},
		{"idle", c.Summarizer.IdleTimeout.D(), time.Duration(0)},
		{"total", c.Summarizer.TotalTimeout.D(), time.Minute},
		{"apiKeyEnv", c.Summarizer.APIKeyEnv, EnvSummarizerAPIKey},
		{"mode", c.Summarizer.Mode, config.SummarizerJobs},
		{"upstreams", c.Upstreams, config.Upstreams{Anthropic: "http://a:1", OpenAI: "http://o:2/v1"}},
		{"auth", c.SessionAuth, config.SessionAuth{Enabled: true, SecretFile: SessionAuthFile}},
		{"store", c.Store, config.Store{URLEnv: EnvStoreURL}},
		{"limits", []any{c.Limits.MaxBodyBytes, c.Limits.FlushWaitTimeout.D(), c.Limits.MaxRecoveryRounds, c.Limits.ParseCacheBytes},
			[]any{int64(1572864), 2 * time.Second, 0, int64(0)}},
	}
	for _, ck := range checks {
		if !reflect.DeepEqual(ck.got, ck.want) {
			t.Errorf("%s: got %#v, want %#v", ck.name, ck.got, ck.want)
		}
	}
	// The rendered document must load in the proxy exactly as rendered.
	cm, err := BuildProxyConfigMap(p, c)
	if err != nil {
		t.Fatal(err)
	}
	back, err := config.Parse([]byte(cm.Data[ConfigKey]))
	if err != nil {
		t.Fatalf("rendered ConfigMap does not load: %v", err)
	}
	if !reflect.DeepEqual(back, c) || cm.Annotations[AnnotationConfigHash] != c.Hash() {
		t.Fatalf("ConfigMap round trip differs:\n%#v\n%#v", back, c)
	}
}

// TestBytesOr: quantities become bytes, rounding a fraction up, and ones past the int64
// range saturate instead of wrapping to 0 (which would turn the parse cache off).
func TestBytesOr(t *testing.T) {
	for q, want := range map[string]int64{"1.5Mi": 1572864, "1.5": 2, "0": 0, "10E": math.MaxInt64, "100Ei": math.MaxInt64,
		"1e30": math.MaxInt64, "-1": -1, "-1e30": math.MinInt64} {
		if got := bytesOr(new(resource.MustParse(q)), 7); got != want {
			t.Errorf("bytesOr(%s) = %d, want %d", q, got, want)
		}
	}
	if got := bytesOr(nil, 7); got != 7 {
		t.Errorf("bytesOr(nil) = %d, want the default", got)
	}
}

func TestBuildConfigRejectsInvalid(t *testing.T) {
	_, err := BuildConfig(policy(func(p *condensev1.PruningPolicy) { p.Spec.Upstreams.Anthropic = "not a url" }))
	if err == nil || !strings.Contains(err.Error(), "upstreams.anthropic") {
		t.Fatalf("want a validation error naming upstreams.anthropic, got %v", err)
	}
	// A regular expression the CRD cannot check.
	_, err = BuildConfig(policy(func(p *condensev1.PruningPolicy) {
		p.Spec.Observations.Patterns = []condensev1.ObservationPatternSpec{{Match: "(unclosed"}}
	}))
	var ve *config.ValidationError
	if !errors.As(err, &ve) || !strings.Contains(err.Error(), "engine.observations.patterns[0].match") {
		t.Fatalf("want a validation error naming the pattern, got %v", err)
	}
}

func container(t *testing.T, spec corev1.PodSpec) corev1.Container {
	t.Helper()
	if len(spec.Containers) != 1 {
		t.Fatalf("want one container, got %d", len(spec.Containers))
	}
	return spec.Containers[0]
}

func TestBuildProxyDeployment(t *testing.T) {
	cases := []struct {
		name  string
		mut   func(*condensev1.PruningPolicy)
		check func(t *testing.T, p *condensev1.PruningPolicy)
	}{
		{"defaults", nil, func(t *testing.T, p *condensev1.PruningPolicy) {
			d := BuildProxyDeployment(p, BuildOptions{Image: "img:1"}, PodHashes{Config: "h1"})
			if d.Name != "team-proxy" || d.Namespace != "agents" || *d.Spec.Replicas != 2 {
				t.Errorf("meta/replicas: %s/%s %d", d.Namespace, d.Name, *d.Spec.Replicas)
			}
			c := container(t, d.Spec.Template.Spec)
			if c.Image != "img:1" || !reflect.DeepEqual(c.Args, []string{"proxy", "--config", "/etc/condense/config.yaml"}) {
				t.Errorf("container: %s %v", c.Image, c.Args)
			}
			if d.Spec.Template.Annotations[AnnotationConfigHash] != "h1" {
				t.Errorf("config hash annotation: %v", d.Spec.Template.Annotations)
			}
			if _, ok := d.Spec.Template.Annotations[AnnotationSecretsHash]; ok {
				t.Errorf("no secrets, no secrets hash: %v", d.Spec.Template.Annotations)
			}
			if !reflect.DeepEqual(d.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
				t.Errorf("selector %v does not match template labels %v", d.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
			}
			if len(c.Env) != 0 || len(d.Spec.Template.Spec.Volumes) != 1 {
				t.Errorf("no secrets expected: env %v volumes %v", c.Env, d.Spec.Template.Spec.Volumes)
			}
			if d.Spec.Template.Spec.Volumes[0].ConfigMap.Name != "team-proxy-config" {
				t.Errorf("config volume: %+v", d.Spec.Template.Spec.Volumes[0])
			}
			if c.Ports[0].ContainerPort != ProxyPort || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
				t.Errorf("ports/probes: %+v", c.Ports)
			}
		}},
		{"policy image, secrets and overrides", func(p *condensev1.PruningPolicy) {
			p.Spec.Proxy.Image = "own:2"
			p.Spec.Proxy.Replicas = new(int32(5))
			p.Spec.Proxy.Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}}
			p.Spec.Proxy.PodTemplate = &condensev1.PodTemplateOverrides{
				Labels:       map[string]string{"team": "x", condensev1.LabelComponent: "hijack"},
				Annotations:  map[string]string{"a": "b"},
				NodeSelector: map[string]string{"os": "linux"},
				Tolerations:  []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}},
			}
			p.Spec.Summarizer.Credentials = &condensev1.CredentialsSpec{SecretKeyRef: corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "llm"}, Key: "k"}}
			p.Spec.SessionAuth = &condensev1.SessionAuthSpec{SecretRef: corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "auth"}, Key: "hmac"}}
			p.Spec.Redis = condensev1.RedisSpec{External: &condensev1.ExternalRedisSpec{URLSecretRef: corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "redis"}, Key: "url"}}}
		}, func(t *testing.T, p *condensev1.PruningPolicy) {
			d := BuildProxyDeployment(p, BuildOptions{Image: "img:1"}, PodHashes{Config: "h", Secrets: "s1"})
			c := container(t, d.Spec.Template.Spec)
			if d.Spec.Template.Annotations[AnnotationSecretsHash] != "s1" {
				t.Errorf("secrets hash annotation: %v", d.Spec.Template.Annotations)
			}
			if got := ReferencedSecrets(p); !reflect.DeepEqual(got, []string{"auth", "llm", "redis"}) {
				t.Errorf("referenced secrets %v", got)
			}
			if c.Image != "own:2" || *d.Spec.Replicas != 5 || c.Resources.Requests.Cpu().String() != "250m" {
				t.Errorf("image/replicas/resources: %s %d %v", c.Image, *d.Spec.Replicas, c.Resources)
			}
			if d.Spec.Template.Labels["team"] != "x" || d.Spec.Template.Labels[condensev1.LabelComponent] != "proxy" {
				t.Errorf("override labels must merge under the operator's: %v", d.Spec.Template.Labels)
			}
			if d.Spec.Template.Annotations["a"] != "b" || d.Spec.Template.Spec.NodeSelector["os"] != "linux" || len(d.Spec.Template.Spec.Tolerations) != 1 {
				t.Errorf("overrides not applied: %+v", d.Spec.Template)
			}
			env := map[string]string{}
			for _, e := range c.Env {
				env[e.Name] = e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
			}
			if env[EnvStoreURL] != "redis/url" || env[EnvSummarizerAPIKey] != "llm/k" {
				t.Errorf("env: %v", env)
			}
			var auth *corev1.Volume
			for i := range d.Spec.Template.Spec.Volumes {
				if d.Spec.Template.Spec.Volumes[i].Name == "session-auth" {
					auth = &d.Spec.Template.Spec.Volumes[i]
				}
			}
			if auth == nil || auth.Secret.SecretName != "auth" || auth.Secret.Items[0].Key != "hmac" || auth.Secret.Items[0].Path != "secret" {
				t.Errorf("session-auth volume: %+v", auth)
			}
		}},
		{"a memory limit sets GOMEMLIMIT", func(p *condensev1.PruningPolicy) {
			p.Spec.Proxy.Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}
			p.Spec.Pruner.Replicas = 1
			p.Spec.Pruner.Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}
		}, func(t *testing.T, p *condensev1.PruningPolicy) {
			c := container(t, BuildProxyDeployment(p, BuildOptions{}, PodHashes{Config: "h"}).Spec.Template.Spec)
			if len(c.Env) != 1 || c.Env[0].Name != EnvGoMemLimit || c.Env[0].Value != "966367638" {
				t.Errorf("proxy with a 1Gi limit: env %v, want GOMEMLIMIT=966367638 (90 %%)", c.Env)
			}
			// A request alone is no limit the container could run out of.
			if c := container(t, BuildPrunerDeployment(p, BuildOptions{}, PodHashes{Config: "h"}).Spec.Template.Spec); len(c.Env) != 0 {
				t.Errorf("pruner with a memory request only: env %v, want none", c.Env)
			}
		}},
		{"autoscaled leaves replicas to the HPA", func(p *condensev1.PruningPolicy) {
			p.Spec.Proxy.Autoscaling = &condensev1.AutoscalingSpec{MinReplicas: 2, MaxReplicas: 6}
		}, func(t *testing.T, p *condensev1.PruningPolicy) {
			if d := BuildProxyDeployment(p, BuildOptions{}, PodHashes{Config: "h"}); d.Spec.Replicas != nil {
				t.Errorf("replicas must be unset under autoscaling, got %d", *d.Spec.Replicas)
			}
			if c := container(t, BuildProxyDeployment(p, BuildOptions{}, PodHashes{Config: "h"}).Spec.Template.Spec); c.Image != DefaultImage {
				t.Errorf("default image: %s", c.Image)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, policy(tc.mut)) })
	}
}

func TestSecretsHash(t *testing.T) {
	kv := func(secret, key, value string) SecretKeyValue {
		return SecretKeyValue{Secret: secret, Key: key, Value: []byte(value), Found: true}
	}
	a := SecretsHash([]SecretKeyValue{kv("redis", "url", "redis://a"), kv("auth", "hmac", "s3cret")})
	if len(a) != 32 || a != SecretsHash([]SecretKeyValue{kv("auth", "hmac", "s3cret"), kv("redis", "url", "redis://a")}) {
		t.Fatalf("hash must be 32 hex digits, stable and independent of order: %q", a)
	}
	for _, changed := range [][]SecretKeyValue{
		{kv("redis", "url", "redis://b"), kv("auth", "hmac", "s3cret")},                   // rotated value
		{kv("redis", "url", "redis://a"), kv("auth", "other", "s3cret")},                  // another key
		{kv("redis", "url", "redis://a"), kv("auth", "hmac", "")},                         // emptied
		{kv("redis", "url", "redis://a"), {Secret: "auth", Key: "hmac"}},                  // missing
		{kv("redis", "url", "redis://a")},                                                 // no longer referenced
		{kv("redis", "url", "redis://as3cret"), kv("auth", "hmac", "")},                   // value moved between keys
		{kv("redis", "url", "redis://a"), kv("auth", "hmac", "s3cret"), kv("x", "k", "")}, // one more
	} {
		if SecretsHash(changed) == a {
			t.Errorf("%v hashes like the original", changed)
		}
	}
	if SecretsHash(nil) != "" {
		t.Error("no secrets, no hash")
	}
}

func TestReferencedSecretKeys(t *testing.T) {
	sel := func(name, key string) corev1.SecretKeySelector {
		return corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key}
	}
	p := policy(func(p *condensev1.PruningPolicy) {
		p.Spec.Redis = condensev1.RedisSpec{External: &condensev1.ExternalRedisSpec{URLSecretRef: sel("shared", "url")}}
		p.Spec.SessionAuth = &condensev1.SessionAuthSpec{SecretRef: sel("shared", "hmac")}
		p.Spec.Summarizer.Credentials = &condensev1.CredentialsSpec{SecretKeyRef: sel("shared", "url")}
	})
	want := []corev1.SecretKeySelector{sel("shared", "hmac"), sel("shared", "url")}
	if got := ReferencedSecretKeys(p); !reflect.DeepEqual(got, want) {
		t.Errorf("referenced keys %v, want %v", got, want)
	}
	if got := ReferencedSecrets(p); !reflect.DeepEqual(got, []string{"shared"}) {
		t.Errorf("referenced secrets %v", got)
	}
}

func TestBuildProxyReplicasHandover(t *testing.T) {
	p := policy(func(p *condensev1.PruningPolicy) {
		p.Spec.Proxy.Autoscaling = &condensev1.AutoscalingSpec{MinReplicas: 2, MaxReplicas: 6}
	})
	for live, want := range map[int32]int32{3: 3, 1: 2, 0: 2, 9: 6} {
		h := BuildProxyReplicasHandover(p, live)
		if *h.Spec.Replicas != want || *h.Name != "team-proxy" || *h.Namespace != "agents" || h.Spec.Template != nil || h.Spec.Selector != nil {
			t.Errorf("live %d: handover %+v, want only replicas %d", live, h.Spec, want)
		}
	}
	if BuildProxyReplicasHandover(policy(nil), 3) != nil {
		t.Error("no handover without autoscaling")
	}
}

func TestBuildOptionalChildren(t *testing.T) {
	cases := []struct {
		name                        string
		mut                         func(*condensev1.PruningPolicy)
		pdb, hpa, pruner, redis     bool
		pdbMax                      int32
		hpaMin, hpaMax, hpaTarget   int32
		prunerReplicas, storageSize string
	}{
		{name: "defaults", pdb: true, redis: true, storageSize: "1Gi"},
		{name: "single replica has no budget", mut: func(p *condensev1.PruningPolicy) { p.Spec.Proxy.Replicas = new(int32(1)) }, redis: true, storageSize: "1Gi"},
		{name: "autoscaling and workers", mut: func(p *condensev1.PruningPolicy) {
			p.Spec.Proxy.Autoscaling = &condensev1.AutoscalingSpec{MinReplicas: 3, MaxReplicas: 9, TargetCPUUtilizationPercentage: 55}
			p.Spec.Pruner.Replicas = 4
			p.Spec.Redis.Managed.Storage = new(resource.MustParse("5Gi"))
		}, pdb: true, hpa: true, hpaMin: 3, hpaMax: 9, hpaTarget: 55, pruner: true, prunerReplicas: "4", redis: true, storageSize: "5Gi"},
		{name: "empty redis means managed", mut: func(p *condensev1.PruningPolicy) { p.Spec.Redis = condensev1.RedisSpec{} },
			pdb: true, redis: true, storageSize: "1Gi"},
		{name: "external redis", mut: func(p *condensev1.PruningPolicy) {
			p.Spec.Redis = condensev1.RedisSpec{External: &condensev1.ExternalRedisSpec{}}
		}, pdb: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := policy(tc.mut)
			if got := BuildProxyPDB(p) != nil; got != tc.pdb {
				t.Errorf("pdb present = %v", got)
			} else if got && BuildProxyPDB(p).Spec.MaxUnavailable.IntValue() != 1 {
				t.Errorf("pdb maxUnavailable = %v", BuildProxyPDB(p).Spec.MaxUnavailable)
			}
			h := BuildProxyHPA(p)
			if (h != nil) != tc.hpa {
				t.Errorf("hpa present = %v", h != nil)
			} else if h != nil {
				if *h.Spec.MinReplicas != tc.hpaMin || h.Spec.MaxReplicas != tc.hpaMax ||
					*h.Spec.Metrics[0].Resource.Target.AverageUtilization != tc.hpaTarget || h.Spec.ScaleTargetRef.Name != "team-proxy" {
					t.Errorf("hpa spec: %+v", h.Spec)
				}
			}
			w := BuildPrunerDeployment(p, BuildOptions{}, PodHashes{Config: "h"})
			if (w != nil) != tc.pruner {
				t.Errorf("pruner present = %v", w != nil)
			} else if w != nil {
				c := container(t, w.Spec.Template.Spec)
				if c.Args[0] != "pruner" || w.Name != "team-pruner" || w.Spec.Template.Annotations[AnnotationConfigHash] != "h" {
					t.Errorf("pruner: %s %v", w.Name, c.Args)
				}
				if got := resource.NewQuantity(int64(*w.Spec.Replicas), resource.DecimalSI).String(); got != tc.prunerReplicas {
					t.Errorf("pruner replicas %s", got)
				}
			}
			ss, svc, cm := BuildRedisStatefulSet(p), BuildRedisService(p), BuildRedisConfigMap(p)
			if (ss != nil) != tc.redis || (svc != nil) != tc.redis || (cm != nil) != tc.redis {
				t.Fatalf("redis objects present: %v %v %v", ss != nil, svc != nil, cm != nil)
			}
			if ss != nil {
				if ss.Spec.ServiceName != svc.Name || svc.Spec.ClusterIP != corev1.ClusterIPNone || *ss.Spec.Replicas != 1 {
					t.Errorf("redis statefulset/service: %s %s", ss.Spec.ServiceName, svc.Spec.ClusterIP)
				}
				if got := ss.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests.Storage().String(); got != tc.storageSize {
					t.Errorf("storage %s", got)
				}
				if !strings.Contains(cm.Data["redis.conf"], "appendonly yes") {
					t.Errorf("AOF must be on: %s", cm.Data["redis.conf"])
				}
			}
		})
	}
}

func TestRedisWithoutPersistence(t *testing.T) {
	p := policy(func(p *condensev1.PruningPolicy) { p.Spec.Redis.Managed.Persistence = new(false) })
	ss := BuildRedisStatefulSet(p)
	if len(ss.Spec.VolumeClaimTemplates) != 0 {
		t.Fatal("no claim without persistence")
	}
	found := false
	for _, v := range ss.Spec.Template.Spec.Volumes {
		found = found || (v.Name == "data" && v.EmptyDir != nil)
	}
	if !found || !strings.Contains(BuildRedisConfigMap(p).Data["redis.conf"], "appendonly no") {
		t.Fatal("ephemeral redis must use an emptyDir and no AOF")
	}
}

func TestRedisHardening(t *testing.T) {
	p := policy(nil)
	ps := BuildRedisStatefulSet(p).Spec.Template.Spec
	sc, cs := ps.SecurityContext, container(t, ps).SecurityContext
	if sc == nil || !*sc.RunAsNonRoot || *sc.RunAsUser != 999 || *sc.RunAsGroup != 999 || *sc.FSGroup != 999 ||
		sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security context: %+v", sc)
	}
	if cs == nil || *cs.AllowPrivilegeEscalation || !*cs.ReadOnlyRootFilesystem || !reflect.DeepEqual(cs.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container security context: %+v", cs)
	}
	np := BuildRedisNetworkPolicy(p, BuildOptions{OperatorNamespace: "condense-system"})
	if np.Name != "team-redis" || !reflect.DeepEqual(np.Spec.PodSelector.MatchLabels, selectorLabels(p, "redis")) ||
		len(np.Spec.Ingress) != 1 || np.Spec.Ingress[0].Ports[0].Port.IntValue() != RedisPort {
		t.Fatalf("network policy: %+v", np.Spec)
	}
	from := np.Spec.Ingress[0].From
	if len(from) != 3 || from[0].PodSelector.MatchLabels[condensev1.LabelComponent] != "proxy" ||
		from[1].PodSelector.MatchLabels[condensev1.LabelComponent] != "pruner" || from[0].NamespaceSelector != nil ||
		from[2].NamespaceSelector.MatchLabels[corev1.LabelMetadataName] != "condense-system" ||
		from[2].PodSelector.MatchLabels[LabelOperator] != "operator" {
		t.Errorf("peers: %+v", from)
	}
	if from := BuildRedisNetworkPolicy(p, BuildOptions{}).Spec.Ingress[0].From; len(from) != 2 {
		t.Errorf("without the operator's namespace only proxy and pruner pods are admitted: %+v", from)
	}
	if BuildRedisNetworkPolicy(policy(func(p *condensev1.PruningPolicy) {
		p.Spec.Redis = condensev1.RedisSpec{External: &condensev1.ExternalRedisSpec{}}
	}), BuildOptions{}) != nil {
		t.Error("no network policy for an external Redis")
	}
}

func TestBuildProxyService(t *testing.T) {
	s := BuildProxyService(policy(func(p *condensev1.PruningPolicy) { p.Spec.Proxy.ServiceType = corev1.ServiceTypeLoadBalancer }))
	if s.Spec.Type != corev1.ServiceTypeLoadBalancer || s.Spec.Ports[0].Port != ProxyPort || s.Spec.Selector[condensev1.LabelComponent] != "proxy" {
		t.Fatalf("service: %+v", s.Spec)
	}
	if BuildProxyService(policy(nil)).Spec.Type != corev1.ServiceTypeClusterIP {
		t.Fatal("default service type")
	}
}

func TestSessionObjectName(t *testing.T) {
	ids := []string{"abc", "ABC", "0f3c9a52-7c1e-4d0b-9b1e-5d2f8a6c4e10", "{weird}: id / with spaces", strings.Repeat("x", 500), "日本語", "--"}
	seen := map[string]string{}
	for _, id := range ids {
		n := SessionObjectName("a-long-policy-name-that-goes-on-and-on", id)
		if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
			t.Errorf("%q -> %q: %v", id, n, errs)
		}
		if SessionObjectName("a-long-policy-name-that-goes-on-and-on", id) != n {
			t.Errorf("not deterministic for %q", id)
		}
		if prev, dup := seen[n]; dup {
			t.Errorf("%q and %q both map to %q", prev, id, n)
		}
		seen[n] = id
	}
}

func TestCheckExternalURL(t *testing.T) {
	cases := []struct {
		mode condensev1.RedisMode
		url  string
		ok   bool
	}{
		{"", "redis://r:6379", true}, {"standalone", "rediss://r:6380", true},
		{"standalone", "redis+cluster://r:1", false}, {"sentinel", "redis+sentinel://s:26379/mymaster", true},
		{"cluster", "redis+cluster://a:1,b:2", true}, {"cluster", "redis://a:1", false}, {"", "redis://", false},
		// A socket in the proxy pods is out of reach of the other replicas and the operator.
		{"standalone", "unix:///run/redis.sock", false}, {"", "unix:///run/redis.sock", false},
	}
	for _, c := range cases {
		if err := CheckExternalURL(c.mode, c.url); (err == nil) != c.ok {
			t.Errorf("%s %s: %v", c.mode, c.url, err)
		}
	}
}
