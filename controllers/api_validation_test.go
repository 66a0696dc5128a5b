package controllers

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	condensev1 "github.com/condense-dev/condense/api/v1alpha1"
	"github.com/condense-dev/condense/internal/config"
	"github.com/condense-dev/condense/internal/specs"
	"github.com/condense-dev/condense/internal/store"
)

// TestAPIValidation checks, against a real API server (envtest, no operator running), the
// validation that keeps a PruningPolicy or AgentSession from being accepted when the operator
// could never reconcile it, and that keeps legitimate edits possible.
func TestAPIValidation(t *testing.T) {
	_, cfg, c := startEnv(t)
	t.Run("PolicyNames", func(t *testing.T) { testPolicyNames(t, c) })
	t.Run("SessionNames", func(t *testing.T) { testSessionNames(t, c) })
	t.Run("RedisSwitchToExternal", func(t *testing.T) { testRedisSwitchToExternal(t, c) })
	t.Run("ManagedRedisStorage", func(t *testing.T) { testManagedRedisStorage(t, c) })
	t.Run("PolicyRefName", func(t *testing.T) { testPolicyRefName(t, c) })
	t.Run("ProxyLimits", func(t *testing.T) { testProxyLimits(t, c) })
	t.Run("Observations", func(t *testing.T) { testObservations(t, c) })

	// What the schema lets through and only the operator's configuration check catches.
	startManager(t, cfg, Options{Image: "condense:test", PolicyResync: 2 * time.Second,
		OpenStore: func(context.Context, string) (store.Store, error) { return nil, errors.New("no store in this test") }})
	t.Run("InvalidSpecKeepsChildren", func(t *testing.T) { testInvalidSpecKeepsChildren(t, c) })
}

// policyObject is a PruningPolicy as kubectl sends it: exactly the given spec, nothing the Go
// types would add (a typed client always sends redis: {}, for example).
func policyObject(ns, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": condensev1.GroupVersion.String(), "kind": "PruningPolicy",
		"metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec}}
}

// wantInvalid fails unless err is an Invalid error whose message contains want.
func wantInvalid(t *testing.T, what string, err error, want string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: accepted, want an Invalid error containing %q", what, want)
		return
	}
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("%s: want an Invalid error containing %q, got %v", what, want, err)
	}
}

// nameOf returns a name of n characters: a, then bs, then c (a valid DNS-1035 label for n ≤ 63).
func nameOf(n int) string {
	return "a" + strings.Repeat("b", n-2) + "c"
}

const policyNameMessage = "metadata.name must be a DNS-1035 label of at most 46 characters"

func testPolicyNames(t *testing.T, c client.Client) {
	ctx := context.Background()
	ns := newNamespace(t, c)

	// The limits come from the children: the proxy Service <name>-proxy must be a DNS label
	// (before Kubernetes 1.36's RelaxedServiceNameValidation a DNS-1035 one), so a policy name
	// with a dot, a valid object name, cannot have one.
	p := &condensev1.PruningPolicy{ObjectMeta: metav1.ObjectMeta{Name: "team.a", Namespace: ns}}
	wantInvalid(t, "Service for policy team.a", c.Create(ctx, specs.BuildProxyService(p)), "must not contain dots")
	// The managed Redis StatefulSet <name>-redis labels its pods controller-revision-hash:
	// <name>-redis-<hash>, the hash being a 32-bit FNV sum in decimal (up to 10 digits), and a
	// label value has at most 63 characters: 63 - len("-redis-") - 10 = 46.
	for n, ok := range map[int]bool{46: true, 47: false} {
		p := &condensev1.PruningPolicy{ObjectMeta: metav1.ObjectMeta{Name: nameOf(n), Namespace: ns}}
		ss := specs.BuildRedisStatefulSet(p)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: ss.Name + "-0", Namespace: ns, Labels: map[string]string{
				"controller-revision-hash":           ss.Name + "-4294967295",
				"statefulset.kubernetes.io/pod-name": ss.Name + "-0",
			}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "redis", Image: "redis"}}},
		}
		err := c.Create(ctx, pod)
		if ok && err != nil {
			t.Errorf("Redis pod of a %d-character policy name rejected: %v", n, err)
		}
		if !ok {
			wantInvalid(t, "Redis pod of a 47-character policy name", err, "must be no more than 63")
		}
	}

	// The API server takes exactly the names whose children can exist.
	for _, name := range []string{"a", "team-agents", nameOf(46)} {
		if err := c.Create(ctx, policyObject(ns, name, map[string]any{})); err != nil {
			t.Errorf("policy %q rejected: %v", name, err)
		}
	}
	for _, name := range []string{"team.a", "1team", nameOf(47), nameOf(63)} {
		wantInvalid(t, "policy "+name, c.Create(ctx, policyObject(ns, name, map[string]any{})), policyNameMessage)
	}
	// generateName is checked on the generated name.
	u := policyObject(ns, "", map[string]any{})
	u.SetGenerateName(nameOf(44) + "-")
	wantInvalid(t, "policy generated from a 45-character prefix", c.Create(ctx, u), policyNameMessage)
	u = policyObject(ns, "", map[string]any{})
	u.SetGenerateName("team-")
	if err := c.Create(ctx, u); err != nil {
		t.Errorf("policy generated from team-: %v", err)
	}

	// Accepted policies stay editable (the rule is checked on create; names are immutable).
	wantEditable(t, c, ns, nameOf(46))
}

// wantEditable fails unless the policy ns/name takes an unrelated spec change and a status write.
func wantEditable(t *testing.T, c client.Client, ns, name string) {
	t.Helper()
	ctx := context.Background()
	p := &condensev1.PruningPolicy{}
	if err := update(ctx, c, ns, name, p, func() {
		p.Spec.Proxy.Replicas = new(ptr.Deref(p.Spec.Proxy.Replicas, 2) + 1)
	}); err != nil {
		t.Errorf("%s: spec update rejected: %v", name, err)
	}
	p.Status.Sessions++
	if err := c.Status().Update(ctx, p); err != nil {
		t.Errorf("%s: status update rejected: %v", name, err)
	}
}

const sessionNameMessage = "metadata.name must have at most 247 characters"

func testSessionNames(t *testing.T, c client.Client) {
	ctx := context.Background()
	ns := newNamespace(t, c)
	session := func(name string) *condensev1.AgentSession {
		return &condensev1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: condensev1.AgentSessionSpec{PolicyRef: corev1.LocalObjectReference{Name: "team"}, SessionID: name}}
	}
	// The session-token Secret <name>-token is an object name of at most 253 characters.
	for n, ok := range map[int]bool{247: true, 248: false} {
		sec := specs.BuildSessionTokenSecret(session(nameOf(n)), "t")
		err := c.Create(ctx, sec)
		if ok && err != nil {
			t.Errorf("token Secret of a %d-character session name rejected: %v", n, err)
		}
		if !ok {
			wantInvalid(t, "token Secret of a 248-character session name", err, "must be no more than 253 characters")
		}
	}
	if err := c.Create(ctx, session(nameOf(247))); err != nil {
		t.Errorf("247-character session name rejected: %v", err)
	}
	for _, n := range []int{248, 253} {
		wantInvalid(t, fmt.Sprintf("%d-character session name", n), c.Create(ctx, session(nameOf(n))), sessionNameMessage)
	}
	// Accepted sessions stay editable.
	s := &condensev1.AgentSession{}
	if err := update(ctx, c, ns, nameOf(247), s, func() { s.Spec.Owner = "alice" }); err != nil {
		t.Errorf("update of a valid session: %v", err)
	}
}

// testRedisSwitchToExternal: a policy created with every default (a managed Redis) can be
// switched to an external Redis the way kubectl does it, by sending only redis.external.
func testRedisSwitchToExternal(t *testing.T, c client.Client) {
	ctx := context.Background()
	ns := newNamespace(t, c)
	external := condensev1.ExternalRedisSpec{Mode: "standalone", URLSecretRef: corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "redis-url"}, Key: "url"}}
	for _, name := range []string{"by-update", "by-patch"} {
		if err := c.Create(ctx, policyObject(ns, name, map[string]any{})); err != nil {
			t.Fatal(err)
		}
		p := &condensev1.PruningPolicy{}
		if err := get(ctx, c, ns, name, p); err != nil {
			t.Fatal(err)
		}
		if p.Spec.Redis.ManagedOrDefault() == nil || specs.BuildRedisStatefulSet(p) == nil {
			t.Fatalf("%s: spec {} must mean a managed Redis, got %+v", name, p.Spec.Redis)
		}
	}

	// Read, modify, write: the object read back holds what the defaults stored.
	p := &condensev1.PruningPolicy{}
	if err := update(ctx, c, ns, "by-update", p, func() { p.Spec.Redis.External = external.DeepCopy() }); err != nil {
		t.Errorf("update to redis.external rejected: %v", err)
	}
	// A merge patch, as kubectl apply sends when redis.external is added to the manifest.
	patch := []byte(`{"spec":{"redis":{"external":{"urlSecretRef":{"name":"redis-url","key":"url"}}}}}`)
	q := &condensev1.PruningPolicy{ObjectMeta: metav1.ObjectMeta{Name: "by-patch", Namespace: ns}}
	if err := c.Patch(ctx, q, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Errorf("merge patch to redis.external rejected: %v", err)
	}
	for _, name := range []string{"by-update", "by-patch"} {
		p := &condensev1.PruningPolicy{}
		if err := get(ctx, c, ns, name, p); err != nil {
			t.Fatal(err)
		}
		if p.Spec.Redis.Managed != nil || p.Spec.Redis.External == nil || p.Spec.Redis.ManagedOrDefault() != nil {
			t.Errorf("%s: want only redis.external, got %+v", name, p.Spec.Redis)
		}
	}
	// A policy that stores redis.managed (as every policy created while the default was
	// {managed: {}} does) switches when the same patch clears it, as docs/operator.md says.
	if err := c.Create(ctx, policyObject(ns, "old-default", map[string]any{"redis": map[string]any{"managed": map[string]any{}}})); err != nil {
		t.Fatal(err)
	}
	q = &condensev1.PruningPolicy{ObjectMeta: metav1.ObjectMeta{Name: "old-default", Namespace: ns}}
	patch = []byte(`{"spec":{"redis":{"managed":null,"external":{"urlSecretRef":{"name":"redis-url","key":"url"}}}}}`)
	if err := c.Patch(ctx, q, client.RawPatch(types.MergePatchType, patch)); err != nil || q.Spec.Redis.Managed != nil {
		t.Errorf("merge patch clearing redis.managed: %v, %+v", err, q.Spec.Redis)
	}
	// Setting both explicitly is still refused.
	wantInvalid(t, "both managed and external", c.Create(ctx, policyObject(ns, "both", map[string]any{"redis": map[string]any{
		"managed": map[string]any{}, "external": map[string]any{"urlSecretRef": map[string]any{"name": "r", "key": "url"}}}})),
		"set at most one of redis.managed and redis.external")
}

// testManagedRedisStorage: redis.managed.persistence, storage and storageClassName, which shape
// the StatefulSet's volume claim template (which Kubernetes never lets change), cannot change
// once the policy has a managed Redis.
func testManagedRedisStorage(t *testing.T, c client.Client) {
	ctx := context.Background()
	ns := newNamespace(t, c)

	// The StatefulSet the operator applies cannot follow such a change.
	for what, mut := range map[string]func(*condensev1.ManagedRedisSpec){
		"storage":          func(m *condensev1.ManagedRedisSpec) { m.Storage = new(resource.MustParse("5Gi")) },
		"persistence":      func(m *condensev1.ManagedRedisSpec) { m.Persistence = new(false) },
		"storageClassName": func(m *condensev1.ManagedRedisSpec) { m.StorageClassName = new("fast") },
	} {
		p := &condensev1.PruningPolicy{ObjectMeta: metav1.ObjectMeta{Name: "wedge-" + strings.ToLower(what), Namespace: ns},
			Spec: condensev1.PruningPolicySpec{Redis: condensev1.RedisSpec{Managed: &condensev1.ManagedRedisSpec{}}}}
		if err := apply(ctx, c, specs.BuildRedisStatefulSet(p)); err != nil {
			t.Fatal(err)
		}
		mut(p.Spec.Redis.Managed)
		wantInvalid(t, "StatefulSet after a change of "+what, apply(ctx, c, specs.BuildRedisStatefulSet(p)),
			"spec.volumeClaimTemplates")
	}

	managed := func(m map[string]any) map[string]any { return map[string]any{"redis": map[string]any{"managed": m}} }
	external := map[string]any{"redis": map[string]any{"external": map[string]any{"urlSecretRef": map[string]any{"name": "r", "key": "url"}}}}
	const (
		persistence = "redis.managed.persistence is immutable"
		storage     = "redis.managed.storage is immutable"
		class       = "redis.managed.storageClassName is immutable"
	)
	for _, tc := range []struct {
		name     string
		from, to map[string]any
		want     string // "" when the change is allowed
	}{
		{"grow", managed(map[string]any{"storage": "1Gi"}), managed(map[string]any{"storage": "5Gi"}), storage},
		{"persistence-off", managed(map[string]any{}), managed(map[string]any{"persistence": false}), persistence},
		{"persistence-on", managed(map[string]any{"persistence": false}), managed(map[string]any{}), persistence},
		{"class-set", managed(map[string]any{}), managed(map[string]any{"storageClassName": "fast"}), class},
		{"class-empty", managed(map[string]any{}), managed(map[string]any{"storageClassName": ""}), class},
		{"class-unset", managed(map[string]any{"storageClassName": "fast"}), managed(map[string]any{}), class},
		{"class-change", managed(map[string]any{"storageClassName": "fast"}), managed(map[string]any{"storageClassName": "slow"}), class},
		// Neither managed nor external is a managed Redis with default settings.
		{"default-to-bigger", map[string]any{}, managed(map[string]any{"storage": "5Gi"}), storage},
		{"bigger-to-default", managed(map[string]any{"storage": "5Gi"}), map[string]any{}, storage},
		{"default-to-ephemeral", map[string]any{}, managed(map[string]any{"persistence": false}), persistence},
		{"default-to-managed", map[string]any{}, managed(map[string]any{"storage": "1Gi"}), ""},
		{"managed-to-default", managed(map[string]any{"persistence": true}), map[string]any{}, ""},
		// The same size written differently, or as a number, is no change.
		{"same-size", managed(map[string]any{"storage": "1Gi"}), managed(map[string]any{"storage": "1024Mi"}), ""},
		{"number", managed(map[string]any{"storage": int64(1 << 30)}), managed(map[string]any{"storage": "1Gi"}), ""},
		// Without persistence there is no claim: size and class do not matter.
		{"ephemeral", managed(map[string]any{"persistence": false}),
			managed(map[string]any{"persistence": false, "storage": "5Gi", "storageClassName": "fast"}), ""},
		{"other-fields", managed(map[string]any{}), managed(map[string]any{"image": "redis:7.4",
			"resources": map[string]any{"requests": map[string]any{"cpu": "100m"}}}), ""},
		// Leaving the managed Redis deletes its StatefulSet; coming back creates a new one.
		{"to-external", managed(map[string]any{}), external, ""},
		{"from-external", external, managed(map[string]any{"storage": "5Gi", "storageClassName": "fast"}), ""},
	} {
		if err := c.Create(ctx, policyObject(ns, tc.name, tc.from)); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		u := policyObject(ns, tc.name, nil)
		err := update(ctx, c, ns, tc.name, u, func() { u.Object["spec"] = tc.to })
		switch {
		case tc.want != "":
			wantInvalid(t, tc.name, err, tc.want)
		case err != nil:
			t.Errorf("%s: change rejected: %v", tc.name, err)
		}
	}

	// Status writes and unrelated spec changes of a policy with a managed Redis go through.
	wantEditable(t, c, ns, "grow")
}

const policyRefMessage = "policyRef.name must name a PruningPolicy"

// testPolicyRefName: an AgentSession names its policy with a valid object name that can also be
// a label value (the operator mirrors it into the session's label condense.dev/policy).
func testPolicyRefName(t *testing.T, c client.Client) {
	ctx := context.Background()
	ns := newNamespace(t, c)
	long := nameOf(64)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "labelled", Namespace: ns,
		Labels: map[string]string{condensev1.LabelPolicy: long}}}
	wantInvalid(t, "label condense.dev/policy of 64 characters", c.Create(ctx, cm), "must be no more than 63")

	session := func(name string, ref map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": condensev1.GroupVersion.String(), "kind": "AgentSession",
			"metadata": map[string]any{"name": name, "namespace": ns},
			"spec":     map[string]any{"policyRef": ref, "sessionID": name}}}
	}
	for i, name := range []string{"team", "team-agents", "team.a", nameOf(63)} {
		if err := c.Create(ctx, session(fmt.Sprintf("ok%d", i), map[string]any{"name": name})); err != nil {
			t.Errorf("policyRef.name %q rejected: %v", name, err)
		}
	}
	for i, ref := range []map[string]any{{}, {"name": ""}, {"name": "Team"}, {"name": "team_a"}, {"name": "-team"},
		{"name": "team."}, {"name": long}} {
		wantInvalid(t, fmt.Sprintf("policyRef %v", ref), c.Create(ctx, session(fmt.Sprintf("bad%d", i), ref)), policyRefMessage)
	}
}

// testInvalidSpecKeepsChildren: a protectedTools entry of only spaces passes the schema but not
// the configuration check, which sets Ready=False InvalidSpec and leaves the children (and so
// the last valid generation's proxy and configuration) alone.
func testInvalidSpecKeepsChildren(t *testing.T, c client.Client) {
	ctx := context.Background()
	ns := newNamespace(t, c)
	p := &condensev1.PruningPolicy{ObjectMeta: metav1.ObjectMeta{Name: "was-valid", Namespace: ns}}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	eventually(t, 20*time.Second, "the proxy ConfigMap", func() (bool, string) {
		err := get(ctx, c, ns, "was-valid-proxy-config", &cm)
		return err == nil, fmt.Sprint(err)
	})
	wantInvalid(t, "empty protectedTools entry", update(ctx, c, ns, "was-valid", p, func() { p.Spec.ProtectedTools = []string{""} }),
		"spec.protectedTools[0] in body should be at least 1 chars long")
	if err := update(ctx, c, ns, "was-valid", p, func() { p.Spec.ProtectedTools = []string{"  "} }); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "Ready=False InvalidSpec", func() (bool, string) {
		_ = get(ctx, c, ns, "was-valid", p)
		cd := apimeta.FindStatusCondition(p.Status.Conditions, condensev1.ConditionReady)
		return cd != nil && cd.Reason == reasonInvalidSpec && cd.ObservedGeneration == p.Generation, fmt.Sprintf("%+v", cd)
	})
	var after corev1.ConfigMap
	if err := get(ctx, c, ns, "was-valid-proxy-config", &after); err != nil || after.Data["config.yaml"] != cm.Data["config.yaml"] {
		t.Errorf("the last good configuration must stay: %v", err)
	}
	if err := get(ctx, c, ns, "was-valid-proxy", &appsv1.Deployment{}); err != nil {
		t.Errorf("the proxy of the earlier generation must stay: %v", err)
	}
}

// createRendered creates the policy name with exactly spec: when want is set, the API server
// must reject it with an Invalid error containing want; otherwise it returns the stored policy
// and its rendered configuration (nil after reporting a failure).
func createRendered(t *testing.T, c client.Client, ns, name string, spec map[string]any, want string) (*condensev1.PruningPolicy, *config.Config) {
	t.Helper()
	ctx := context.Background()
	obj := policyObject(ns, name, spec)
	err := c.Create(ctx, obj)
	if want != "" {
		wantInvalid(t, name, err, want)
		return nil, nil
	}
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return nil, nil
	}
	var p condensev1.PruningPolicy
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), &p); err != nil {
		t.Fatal(err)
	}
	cfg, err := specs.BuildConfig(&p)
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return nil, nil
	}
	return &p, cfg
}

// testObservations: spec.observations defaults to off, takes a known harness or patterns whose
// stub holds ${stub}, and renders to the engine.observations the proxy loads.
func testObservations(t *testing.T, c client.Client) {
	ns := newNamespace(t, c)
	obs := func(o map[string]any) map[string]any { return map[string]any{"observations": o} }
	pattern := map[string]any{"match": `\AResult (?P<rc>\d+):`, "stub": "Result ${rc}: ${stub}", "action": "(?m)^> (.*)$", "tool": "sh"}
	for _, tc := range []struct {
		name string
		spec map[string]any
		want string // "" when accepted
		got  config.Observations
	}{
		{"unset", map[string]any{}, "", config.Observations{Patterns: []config.ObservationPattern{}}},
		{"harness", obs(map[string]any{"enabled": true, "harness": "mini-swe-agent"}), "",
			config.Observations{Enabled: true, Harness: "mini-swe-agent", Patterns: []config.ObservationPattern{}}},
		{"patterns", obs(map[string]any{"enabled": true, "patterns": []any{pattern}}), "",
			config.Observations{Enabled: true, Patterns: []config.ObservationPattern{{Match: `\AResult (?P<rc>\d+):`, Stub: "Result ${rc}: ${stub}", Action: "(?m)^> (.*)$", Tool: "sh"}}}},
		{"unknown-harness", obs(map[string]any{"enabled": true, "harness": "openhands"}), `spec.observations.harness: Unsupported value: "openhands"`, config.Observations{}},
		{"stub-without-stub", obs(map[string]any{"patterns": []any{map[string]any{"match": "x", "stub": "[pruned]"}}}), "stub must contain ${stub}", config.Observations{}},
		{"no-match", obs(map[string]any{"patterns": []any{map[string]any{"stub": "${stub}"}}}), "spec.observations.patterns[0].match: Required value", config.Observations{}},
	} {
		_, cfg := createRendered(t, c, ns, "obs-"+tc.name, tc.spec, tc.want)
		if cfg != nil && !reflect.DeepEqual(cfg.Engine.Observations, tc.got) {
			t.Errorf("%s: rendered %+v, want %+v", tc.name, cfg.Engine.Observations, tc.got)
		}
	}
}

// testProxyLimits: spec.proxy.limits gets its defaults from the schema, which rejects sizes
// the proxy could not use, given as strings or as integers.
func testProxyLimits(t *testing.T, c client.Client) {
	ns := newNamespace(t, c)
	limits := func(l map[string]any) map[string]any { return map[string]any{"proxy": map[string]any{"limits": l}} }
	for _, tc := range []struct {
		name string
		spec map[string]any
		want string // "" when accepted
	}{
		{"unset", map[string]any{}, ""},
		{"set", limits(map[string]any{"maxBodyBytes": "64Mi", "flushWaitTimeout": "2s", "maxRecoveryRounds": 0, "parseCacheBytes": 0}), ""},
		{"integers", limits(map[string]any{"maxBodyBytes": 1048576, "parseCacheBytes": 268435456}), ""},
		{"body-zero", limits(map[string]any{"maxBodyBytes": "0"}), "proxy.limits.maxBodyBytes must be greater than 0"},
		{"body-zero-int", limits(map[string]any{"maxBodyBytes": 0}), "proxy.limits.maxBodyBytes must be greater than 0"},
		{"body-negative", limits(map[string]any{"maxBodyBytes": "-1Mi"}), "proxy.limits.maxBodyBytes must be greater than 0"},
		{"cache-negative", limits(map[string]any{"parseCacheBytes": "-1"}), "proxy.limits.parseCacheBytes must not be negative"},
		{"cache-past-int64", limits(map[string]any{"parseCacheBytes": "10E"}), "must be less than 8Ei"},
		{"body-past-int64", limits(map[string]any{"maxBodyBytes": "1e30"}), "less than 8Ei"},
		{"wait-not-a-duration", limits(map[string]any{"flushWaitTimeout": "soon"}), "spec.proxy.limits.flushWaitTimeout"},
		{"rounds-negative", limits(map[string]any{"maxRecoveryRounds": -1}), "spec.proxy.limits.maxRecoveryRounds"},
	} {
		p, cfg := createRendered(t, c, ns, "limits-"+tc.name, tc.spec, tc.want)
		if cfg == nil {
			continue
		}
		if tc.name == "unset" {
			// The schema's defaults are the configuration's.
			l := p.Spec.Proxy.Limits
			if l.MaxBodyBytes == nil || l.ParseCacheBytes == nil || l.FlushWaitTimeout == nil || l.MaxRecoveryRounds == nil {
				t.Fatalf("unset limits were not defaulted: %+v", l)
			}
			d := config.Default().Limits
			if cfg.Limits.MaxBodyBytes != d.MaxBodyBytes || cfg.Limits.ParseCacheBytes != d.ParseCacheBytes ||
				cfg.Limits.FlushWaitTimeout != d.FlushWaitTimeout || cfg.Limits.MaxRecoveryRounds != d.MaxRecoveryRounds {
				t.Errorf("defaulted limits render %+v, want the configuration's defaults %+v", cfg.Limits, d)
			}
		}
	}
}
