package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	condensev1 "github.com/condense-dev/condense/api/v1alpha1"
)

// TestAPIValidation checks, against a real API server (envtest, no operator running), the
// validation that keeps a PruningPolicy or AgentSession from being accepted when the operator
// could never reconcile it, and that keeps legitimate edits possible.
func TestAPIValidation(t *testing.T) {
	_, _, c := startEnv(t)
	t.Run("PolicyNames", func(t *testing.T) { testPolicyNames(t, c) })
	t.Run("SessionNames", func(t *testing.T) { testSessionNames(t, c) })
	t.Run("RedisSwitchToExternal", func(t *testing.T) { testRedisSwitchToExternal(t, c) })
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

	// The limits come from the children. The proxy Service <name>-proxy must be a DNS label:
	// a policy name with a dot (a valid object name) cannot have one. (Before the
	// RelaxedServiceNameValidation feature, on by default from Kubernetes 1.36, a Service name must
	// also start with a letter: a DNS-1035 label.)
	p := &condensev1.PruningPolicy{ObjectMeta: metav1.ObjectMeta{Name: "team.a", Namespace: ns}}
	wantInvalid(t, "Service for policy team.a", c.Create(ctx, BuildProxyService(p)), "must not contain dots")
	// The managed Redis StatefulSet <name>-redis labels its pods controller-revision-hash:
	// <name>-redis-<hash>, the hash being a 32-bit FNV sum in decimal (up to 10 digits), and a
	// label value has at most 63 characters: 63 - len("-redis-") - 10 = 46.
	for n, ok := range map[int]bool{46: true, 47: false} {
		p := &condensev1.PruningPolicy{ObjectMeta: metav1.ObjectMeta{Name: nameOf(n), Namespace: ns}}
		ss := BuildRedisStatefulSet(p)
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
	p = &condensev1.PruningPolicy{}
	if err := get(ctx, c, ns, nameOf(46), p); err != nil {
		t.Fatal(err)
	}
	p.Spec.Proxy.Replicas = new(int32(3))
	if err := c.Update(ctx, p); err != nil {
		t.Errorf("update of a valid policy: %v", err)
	}
	p.Status.Sessions = 2
	if err := c.Status().Update(ctx, p); err != nil {
		t.Errorf("status update of a valid policy: %v", err)
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
		sec := BuildSessionTokenSecret(session(nameOf(n)), "t")
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
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: nameOf(247)}, s); err != nil {
		t.Fatal(err)
	}
	s.Spec.Owner = "alice"
	if err := c.Update(ctx, s); err != nil {
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
		if p.Spec.Redis.ManagedOrDefault() == nil || BuildRedisStatefulSet(p) == nil {
			t.Fatalf("%s: spec {} must mean a managed Redis, got %+v", name, p.Spec.Redis)
		}
	}

	// Read, modify, write: the object read back holds what the defaults stored.
	p := &condensev1.PruningPolicy{}
	if err := get(ctx, c, ns, "by-update", p); err != nil {
		t.Fatal(err)
	}
	p.Spec.Redis.External = external.DeepCopy()
	if err := c.Update(ctx, p); err != nil {
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
