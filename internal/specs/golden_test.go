package specs

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	condensev1 "github.com/condense-dev/condense/api/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the current builders")

// goldenCases are policies that together make every child object and every optional part of
// one: defaults with a managed Redis, an external Redis with everything else on, and an
// ephemeral managed Redis behind a single proxy replica.
var goldenCases = []struct {
	name string
	mut  func(*condensev1.PruningPolicy)
	opts BuildOptions
}{
	{name: "managed-defaults", opts: BuildOptions{Image: "condense:golden", OperatorNamespace: "condense-system"}},
	{name: "external-everything", mut: func(p *condensev1.PruningPolicy) {
		sel := func(name, key string) corev1.SecretKeySelector {
			return corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key}
		}
		s := &p.Spec
		s.Redis = condensev1.RedisSpec{External: &condensev1.ExternalRedisSpec{Mode: "sentinel", URLSecretRef: sel("redis", "url")}}
		s.SessionAuth = &condensev1.SessionAuthSpec{SecretRef: sel("auth", "hmac")}
		s.Summarizer = condensev1.SummarizerSpec{Model: "claude-haiku-4-5", Provider: "anthropic",
			TotalTimeout: &metav1.Duration{Duration: time.Minute},
			Credentials:  &condensev1.CredentialsSpec{SecretKeyRef: sel("llm", "api-key")}}
		s.Pruner = condensev1.PrunerSpec{Replicas: 2,
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")}}}
		s.Proxy.Image = "own:2"
		s.Proxy.ServiceType = corev1.ServiceTypeLoadBalancer
		s.Proxy.Autoscaling = &condensev1.AutoscalingSpec{MinReplicas: 3, MaxReplicas: 9, TargetCPUUtilizationPercentage: 55}
		s.Proxy.Resources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}
		s.Proxy.PodTemplate = &condensev1.PodTemplateOverrides{
			Labels:             map[string]string{"team": "x"},
			Annotations:        map[string]string{"a": "b"},
			NodeSelector:       map[string]string{"kubernetes.io/os": "linux"},
			Tolerations:        []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}},
			ServiceAccountName: "condense-proxy",
			PriorityClassName:  "high",
			ImagePullSecrets:   []corev1.LocalObjectReference{{Name: "registry"}},
		}
		s.Proxy.Limits = condensev1.ProxyLimits{MaxBodyBytes: new(resource.MustParse("16Mi"))}
		s.Observations = condensev1.ObservationsSpec{Enabled: new(true), Harness: "mini-swe-agent"}
	}, opts: BuildOptions{Image: "condense:golden"}},
	{name: "ephemeral-single-replica", mut: func(p *condensev1.PruningPolicy) {
		p.Spec.Proxy.Replicas = new(int32(1))
		p.Spec.Redis.Managed = &condensev1.ManagedRedisSpec{Persistence: new(false), Image: "redis:7.4"}
	}},
}

// TestGoldenChildren compares every object the builders make for the golden cases with
// testdata/golden/<case>/<kind>-<name>.yaml (go test ./internal/specs -update rewrites them).
func TestGoldenChildren(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			p := policy(tc.mut)
			cfg, err := BuildConfig(p)
			if err != nil {
				t.Fatal(err)
			}
			var keys []SecretKeyValue
			for _, sel := range ReferencedSecretKeys(p) {
				keys = append(keys, SecretKeyValue{Secret: sel.Name, Key: sel.Key, Value: []byte("value of " + sel.Key), Found: true})
			}
			children, err := Children(p, cfg, tc.opts, PodHashes{Config: cfg.Hash(), Secrets: SecretsHash(keys)})
			if err != nil {
				t.Fatal(err)
			}
			objects := map[string]any{}
			for _, c := range children {
				if c.Wanted {
					objects[c.Object.GetObjectKind().GroupVersionKind().Kind+"-"+c.Object.GetName()] = c.Object
				}
			}
			session := &condensev1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: "alice-1", Namespace: p.Namespace},
				Spec: condensev1.AgentSessionSpec{PolicyRef: corev1.LocalObjectReference{Name: p.Name}, SessionID: "0f3c9a52-alice"}}
			if p.Spec.SessionAuth != nil {
				objects["Secret-alice-1-token"] = BuildSessionTokenSecret(session, "token-of-alice-1")
			}
			discovered := BuildDiscoveredSession(p, "Session 42 / laptop")
			objects["AgentSession-"+discovered.Name] = discovered
			if h := BuildProxyReplicasHandover(p, 5); h != nil {
				objects["DeploymentApplyConfiguration-"+*h.Name] = h
			}
			compareGolden(t, filepath.Join("testdata", "golden", tc.name), objects)
		})
	}
}

// compareGolden checks that dir holds exactly one <name>.yaml per object, equal to its YAML.
func compareGolden(t *testing.T, dir string, objects map[string]any) {
	t.Helper()
	if *update {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var want []string
	for name, obj := range objects {
		want = append(want, name+".yaml")
		got, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name+".yaml")
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		golden, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%v (go test ./internal/specs -update writes it)", err)
			continue
		}
		if string(golden) != string(got) {
			t.Errorf("%s differs from the built object; review and rerun with -update:\n%s", path, lineDiff(string(golden), string(got)))
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !slices.Contains(want, e.Name()) {
			t.Errorf("%s: no such object is built any more (rerun with -update)", filepath.Join(dir, e.Name()))
		}
	}
}

// lineDiff lists the lines of want and got that differ, position by position.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := range max(len(w), len(g)) {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			b.WriteString("- " + wl + "\n+ " + gl + "\n")
		}
	}
	return b.String()
}
