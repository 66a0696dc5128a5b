package controllers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	condensev1 "github.com/condense-dev/condense/api/v1alpha1"
	"github.com/condense-dev/condense/internal/config"
	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/secretcache"
	"github.com/condense-dev/condense/internal/sessionindex"
	"github.com/condense-dev/condense/internal/specs"
	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/testutil/redistest"
)

var nsCounter int

// newNamespace creates a fresh namespace for one test.
func newNamespace(t *testing.T, c client.Client) string {
	t.Helper()
	nsCounter++
	name := fmt.Sprintf("t%d-%d", nsCounter, time.Now().UnixNano()%100000)
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	return name
}

// readDocs decodes every YAML document of a file into unstructured objects.
func readDocs(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if err.Error() == "EOF" {
				break
			}
			t.Fatalf("%s: %v", path, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
	return out
}

// TestOperatorAgainstAPIServer runs every API-server-backed check on one envtest control plane
// (starting one costs seconds; compiling this package's test binary costs minutes).
func TestOperatorAgainstAPIServer(t *testing.T) {
	_, cfg, c := startEnv(t)
	t.Run("CELValidation", func(t *testing.T) { testCELValidation(t, c) })
	t.Run("CRDDefaults", func(t *testing.T) { testCRDDefaults(t, c) })
	t.Run("Immutability", func(t *testing.T) { testImmutability(t, c) })

	rds := redistest.Start(t, nil)
	mgr := startManager(t, cfg, Options{
		Image:             "condense:test",
		OperatorNamespace: "condense-system",
		Discovery:         true,
		StoreMinInterval:  50 * time.Millisecond,
		StoreResync:       time.Second,
		PolicyResync:      2 * time.Second,
		// Counter-only status updates are held back (and then written) in this suite.
		SessionStatusInterval: 2 * time.Second,
	})
	t.Run("Children", func(t *testing.T) { testChildren(t, c) })
	t.Run("StatusThroughRedis", func(t *testing.T) { testStatusThroughRedis(t, c, rds) })
	t.Run("SessionAuthToken", func(t *testing.T) { testSessionAuthToken(t, c, rds) })
	t.Run("TTLExpiry", func(t *testing.T) { testTTLExpiry(t, c, rds) })
	t.Run("StatusConflictRetry", func(t *testing.T) { testStatusConflictRetry(t, c) })
	t.Run("StoreOutage", func(t *testing.T) { testStoreOutage(t, c) })
	t.Run("UserMistakes", func(t *testing.T) { testUserMistakes(t, c, rds) })
	t.Run("ApplyFailureInStatus", func(t *testing.T) { testApplyFailureInStatus(t, c) })
	t.Run("PolicyRecreated", func(t *testing.T) { testPolicyRecreated(t, c, rds) })
	t.Run("SecretsCachedAsMetadata", func(t *testing.T) { testSecretsCachedAsMetadata(t, c, mgr, rds) })
	t.Run("SecretRotation", func(t *testing.T) { testSecretRotation(t, c, rds) })
	t.Run("RestrictedPodSecurity", func(t *testing.T) { testRestrictedPodSecurity(t, c) })
	t.Run("AutoscalingHandover", func(t *testing.T) { testAutoscalingHandover(t, c) })
}

func testCELValidation(t *testing.T, c client.Client) {
	ctx := context.Background()
	ns := newNamespace(t, c)
	var valid []string
	samples, _ := filepath.Glob(filepath.Join("..", "config", "samples", "condense_*.yaml"))
	more, _ := filepath.Glob(filepath.Join("testdata", "cel", "valid", "*.yaml"))
	valid = append(samples, more...)
	if len(samples) < 3 || len(more) < 3 {
		t.Fatalf("fixtures missing: %v %v", samples, more)
	}
	for _, f := range valid {
		for _, u := range readDocs(t, f) {
			u.SetNamespace(ns)
			if err := c.Create(ctx, u); err != nil {
				t.Errorf("%s: valid object rejected: %v", f, err)
			}
		}
	}
	invalid, _ := filepath.Glob(filepath.Join("testdata", "cel", "invalid", "*.yaml"))
	if len(invalid) < 15 {
		t.Fatalf("invalid fixtures missing: %v", invalid)
	}
	for _, f := range invalid {
		data, _ := os.ReadFile(f)
		first, _, _ := strings.Cut(string(data), "\n")
		want, ok := strings.CutPrefix(first, "# expect: ")
		if !ok {
			t.Fatalf("%s: first line must be '# expect: <message>'", f)
		}
		for _, u := range readDocs(t, f) {
			u.SetNamespace(ns)
			err := c.Create(ctx, u)
			if err == nil {
				t.Errorf("%s: invalid object accepted", f)
				continue
			}
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: want an Invalid error containing %q, got %v", f, want, err)
			}
		}
	}
}

func testCRDDefaults(t *testing.T, c client.Client) {
	ctx := context.Background()
	ns := newNamespace(t, c)
	// Created the way kubectl sends `spec: {}` (a typed Go client would send redis: {}).
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": condensev1.GroupVersion.String(), "kind": "PruningPolicy",
		"metadata": map[string]any{"name": "defaults", "namespace": ns}, "spec": map[string]any{}}}
	if err := c.Create(ctx, u); err != nil {
		t.Fatal(err)
	}
	p := &condensev1.PruningPolicy{}
	if err := get(ctx, c, ns, "defaults", p); err != nil {
		t.Fatal(err)
	}
	s := p.Spec
	if s.BatchingMode != "turn" || s.Trigger.Mode != "agent-message" || *s.MinBatchChars != 1000 || !*s.Dedup ||
		*s.Spill.Threshold != 65536 || *s.Spill.PreviewBytes != 2048 || *s.RecoveryGraceTurns != 3 ||
		len(s.ProtectedPaths) != 1 || s.ProtectedPaths[0] != "**/skills/**/*.md" ||
		!*s.ChainCompression.Enabled || *s.ChainCompression.RollingWindow != 3 || !*s.ChainCompression.FuseRangeSummary ||
		!*s.PurgeErrors.Enabled || *s.PurgeErrors.CooldownTurns != 2 || *s.PurgeErrors.MinArgChars != 500 ||
		s.Summarizer.Model != "extractive" || s.Summarizer.ThinkingBudget != "off" || s.Summarizer.IdleTimeout.Duration != 20*time.Second ||
		s.Summarizer.TotalTimeout.Duration != 180*time.Second || s.Upstreams.Anthropic != config.DefaultAnthropicBaseURL ||
		*s.Proxy.Replicas != 2 ||
		// redis defaults to {}: neither managed nor external stored, which means managed (so a
		// later apply can switch to external without clearing a defaulted managed: {}).
		s.Redis.Managed != nil || s.Redis.External != nil || s.Redis.ManagedOrDefault() == nil {
		t.Fatalf("CRD defaults not applied: %+v", s)
	}
	// The CRD defaults and the Go defaults of the config package must agree.
	got, err := specs.BuildConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	want := config.Default()
	want.Policy, want.Store = got.Policy, got.Store
	if got.Hash() != want.Hash() {
		a, _ := got.MarshalYAML()
		b, _ := want.MarshalYAML()
		t.Fatalf("CRD defaults render differently from config.Default():\n%s\nvs\n%s", a, b)
	}
	// An explicit empty list disables path protection instead of taking the default.
	q := &condensev1.PruningPolicy{ObjectMeta: metav1.ObjectMeta{Name: "nopaths", Namespace: ns},
		Spec: condensev1.PruningPolicySpec{ProtectedPaths: []string{}}}
	if err := c.Create(ctx, q); err != nil {
		t.Fatal(err)
	}
	if q.Spec.ProtectedPaths == nil || len(q.Spec.ProtectedPaths) != 0 {
		t.Fatalf("explicit [] must stay empty, got %#v", q.Spec.ProtectedPaths)
	}
}

func testImmutability(t *testing.T, c client.Client) {
	ctx := context.Background()
	ns := newNamespace(t, c)
	s := &condensev1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: "imm", Namespace: ns},
		Spec: condensev1.AgentSessionSpec{PolicyRef: corev1.LocalObjectReference{Name: "p"}, SessionID: "one"}}
	if err := c.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	s.Spec.SessionID = "two"
	if err := c.Update(ctx, s); err == nil || !strings.Contains(err.Error(), "sessionID is immutable") {
		t.Fatalf("sessionID change: %v", err)
	}
	s.Spec.SessionID = "one"
	s.Spec.PolicyRef.Name = "q"
	if err := c.Update(ctx, s); err == nil || !strings.Contains(err.Error(), "policyRef is immutable") {
		t.Fatalf("policyRef change: %v", err)
	}
	s.Spec.PolicyRef.Name = "p"
	s.Spec.Owner = "alice"
	if err := c.Update(ctx, s); err != nil {
		t.Fatalf("mutable field change rejected: %v", err)
	}
}

func isControlledBy(obj client.Object, owner client.Object) bool {
	ref := metav1.GetControllerOf(obj)
	return ref != nil && ref.UID == owner.GetUID() && ref.Kind == "PruningPolicy" && ref.APIVersion == condensev1.GroupVersion.String()
}

func get(ctx context.Context, c client.Client, ns, name string, obj client.Object) error {
	return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj)
}

// update reads ns/name into obj, applies change and writes it back, reading afresh and trying
// again while the controllers' own writes make the update conflict; it returns the last error.
func update(ctx context.Context, c client.Client, ns, name string, obj client.Object, change func()) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := get(ctx, c, ns, name, obj); err != nil {
			return err
		}
		change()
		return c.Update(ctx, obj)
	})
}

func testChildren(t *testing.T, c client.Client) {
	ctx := context.Background()
	ns := newNamespace(t, c)
	p := &condensev1.PruningPolicy{ObjectMeta: metav1.ObjectMeta{Name: "kids", Namespace: ns},
		Spec: condensev1.PruningPolicySpec{
			Proxy:  condensev1.ProxySpec{Autoscaling: &condensev1.AutoscalingSpec{MinReplicas: 2, MaxReplicas: 5}},
			Pruner: condensev1.PrunerSpec{Replicas: 2},
		}}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	type child struct {
		name string
		obj  client.Object
	}
	children := []child{
		{"kids-proxy-config", &corev1.ConfigMap{}}, {"kids-proxy", &appsv1.Deployment{}}, {"kids-proxy", &corev1.Service{}},
		{"kids-proxy", &policyv1.PodDisruptionBudget{}}, {"kids-proxy", &autoscalingv2.HorizontalPodAutoscaler{}},
		{"kids-pruner", &appsv1.Deployment{}}, {"kids-redis", &appsv1.StatefulSet{}}, {"kids-redis", &corev1.Service{}},
		{"kids-redis-config", &corev1.ConfigMap{}},
	}
	for _, ch := range children {
		eventually(t, 20*time.Second, fmt.Sprintf("%T %s", ch.obj, ch.name), func() (bool, string) {
			if err := get(ctx, c, ns, ch.name, ch.obj); err != nil {
				return false, err.Error()
			}
			return isControlledBy(ch.obj, p), "no controller reference to the policy"
		})
	}
	var cm corev1.ConfigMap
	var dep, worker appsv1.Deployment
	_ = get(ctx, c, ns, "kids-proxy-config", &cm)
	_ = get(ctx, c, ns, "kids-proxy", &dep)
	_ = get(ctx, c, ns, "kids-pruner", &worker)
	cfg, err := config.Parse([]byte(cm.Data[specs.ConfigKey]))
	if err != nil {
		t.Fatalf("rendered ConfigMap does not load: %v", err)
	}
	if cfg.Policy.Name != "kids" || cfg.Summarizer.Mode != config.SummarizerJobs || cfg.Store.URL != "redis://kids-redis."+ns+".svc:6379/0" {
		t.Fatalf("config: %+v", cfg)
	}
	hash := dep.Spec.Template.Annotations[specs.AnnotationConfigHash]
	if hash != cfg.Hash() || worker.Spec.Template.Annotations[specs.AnnotationConfigHash] != hash {
		t.Fatalf("config hash on pod templates %q/%q, want %q", hash, worker.Spec.Template.Annotations[specs.AnnotationConfigHash], cfg.Hash())
	}
	if dep.Spec.Template.Spec.Containers[0].Image != "condense:test" {
		t.Fatalf("image %s", dep.Spec.Template.Spec.Containers[0].Image)
	}

	// A policy change re-renders the config and rolls the pods; dropping autoscaling and
	// workers deletes the HPA and the worker Deployment.
	eventually(t, 10*time.Second, "policy update", func() (bool, string) {
		var cur condensev1.PruningPolicy
		if err := get(ctx, c, ns, "kids", &cur); err != nil {
			return false, err.Error()
		}
		cur.Spec.MinBatchChars = new(int32(4321))
		cur.Spec.Proxy.Autoscaling = nil
		cur.Spec.Pruner.Replicas = 0
		if err := c.Update(ctx, &cur); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	eventually(t, 20*time.Second, "re-rendered config and rolled template", func() (bool, string) {
		if err := get(ctx, c, ns, "kids-proxy-config", &cm); err != nil {
			return false, err.Error()
		}
		cfg, err := config.Parse([]byte(cm.Data[specs.ConfigKey]))
		if err != nil || cfg.Engine.MinBatchChars != 4321 {
			return false, fmt.Sprintf("config not updated: %v", err)
		}
		if err := get(ctx, c, ns, "kids-proxy", &dep); err != nil {
			return false, err.Error()
		}
		if dep.Spec.Template.Annotations[specs.AnnotationConfigHash] != cfg.Hash() || dep.Spec.Template.Annotations[specs.AnnotationConfigHash] == hash {
			return false, "hash annotation not rolled"
		}
		return dep.Spec.Replicas != nil && *dep.Spec.Replicas == 2, "replicas not restored without autoscaling"
	})
	for _, gone := range []struct {
		name string
		obj  client.Object
	}{{"kids-proxy", &autoscalingv2.HorizontalPodAutoscaler{}}, {"kids-pruner", &appsv1.Deployment{}}} {
		eventually(t, 20*time.Second, fmt.Sprintf("%T %s deleted", gone.obj, gone.name), func() (bool, string) {
			err := get(ctx, c, ns, gone.name, gone.obj)
			if apierrors.IsNotFound(err) {
				return true, ""
			}
			if err == nil && !gone.obj.GetDeletionTimestamp().IsZero() {
				return true, ""
			}
			return false, fmt.Sprint(err)
		})
	}
	// A hand edit of an owned field is reverted by the next reconcile.
	eventually(t, 10*time.Second, "hand edit", func() (bool, string) {
		if err := get(ctx, c, ns, "kids-proxy-config", &cm); err != nil {
			return false, err.Error()
		}
		cm.Data[specs.ConfigKey] = "tampered"
		return c.Update(ctx, &cm) == nil, "update failed"
	})
	eventually(t, 20*time.Second, "hand edit reverted", func() (bool, string) {
		_ = get(ctx, c, ns, "kids-proxy-config", &cm)
		return cm.Data[specs.ConfigKey] != "tampered", "still tampered"
	})

	// Status: the Deployment is not available (no controllers run here) until we say so.
	var cur condensev1.PruningPolicy
	eventually(t, 20*time.Second, "status written", func() (bool, string) {
		_ = get(ctx, c, ns, "kids", &cur)
		cond := apimeta.FindStatusCondition(cur.Status.Conditions, condensev1.ConditionProxyAvailable)
		return cond != nil && cond.Status == metav1.ConditionFalse && cur.Status.ObservedGeneration == cur.Generation &&
			cur.Status.Endpoint == "http://kids-proxy."+ns+".svc:8080", fmt.Sprintf("%+v", cur.Status)
	})
	// The managed Redis is not reachable from the test process: StoreReachable is False.
	if cond := apimeta.FindStatusCondition(cur.Status.Conditions, condensev1.ConditionStoreReachable); cond == nil || cond.Status != metav1.ConditionFalse {
		t.Fatalf("StoreReachable for an unreachable managed Redis: %+v", cond)
	}
	if apimeta.IsStatusConditionTrue(cur.Status.Conditions, condensev1.ConditionReady) {
		t.Fatal("Ready must be False")
	}
}

// markAvailable writes the status a deployment controller would write for a rolled-out proxy.
func markAvailable(t *testing.T, c client.Client, ns, name string) {
	t.Helper()
	eventually(t, 20*time.Second, "deployment status", func() (bool, string) {
		var d appsv1.Deployment
		if err := get(context.Background(), c, ns, name, &d); err != nil {
			return false, err.Error()
		}
		d.Status = appsv1.DeploymentStatus{
			ObservedGeneration: d.Generation, Replicas: 2, ReadyReplicas: 2, AvailableReplicas: 2, UpdatedReplicas: 2,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue,
				Reason: "MinimumReplicasAvailable", LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
		}
		if err := c.Status().Update(context.Background(), &d); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
}

// externalPolicy creates a URL Secret for the Redis and a policy using it.
func externalPolicy(t *testing.T, c client.Client, ns, name, url string, mut func(*condensev1.PruningPolicy)) *condensev1.PruningPolicy {
	t.Helper()
	ctx := context.Background()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-redis-url", Namespace: ns}, StringData: map[string]string{"url": url}}
	if err := c.Create(ctx, sec); err != nil {
		t.Fatal(err)
	}
	p := &condensev1.PruningPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: condensev1.PruningPolicySpec{Redis: condensev1.RedisSpec{External: &condensev1.ExternalRedisSpec{
			URLSecretRef: corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: sec.Name}, Key: "url"}}}}}
	if mut != nil {
		mut(p)
	}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	return p
}

func openTestStore(t *testing.T, url string) store.Store {
	t.Helper()
	st, err := sessionindex.OpenRedis(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// sessionFor finds the AgentSession of a session id.
func sessionFor(ctx context.Context, c client.Client, ns, id string) (*condensev1.AgentSession, error) {
	var list condensev1.AgentSessionList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	for i := range list.Items {
		if list.Items[i].Spec.SessionID == id {
			return &list.Items[i], nil
		}
	}
	return nil, errors.New("no AgentSession for " + id)
}

func testStatusThroughRedis(t *testing.T, c client.Client, rds *redistest.Server) {
	ctx := context.Background()
	ns := newNamespace(t, c)
	// A per-database URL keeps this test's sessions apart from the other tests'.
	url := rds.URL() + "/3"
	p := externalPolicy(t, c, ns, "live", url, nil)
	st := openTestStore(t, url)

	eventually(t, 20*time.Second, "StoreReachable", func() (bool, string) {
		var cur condensev1.PruningPolicy
		_ = get(ctx, c, ns, "live", &cur)
		return apimeta.IsStatusConditionTrue(cur.Status.Conditions, condensev1.ConditionStoreReachable), fmt.Sprintf("%+v", cur.Status.Conditions)
	})
	markAvailable(t, c, ns, "live-proxy")
	eventually(t, 20*time.Second, "Ready", func() (bool, string) {
		var cur condensev1.PruningPolicy
		_ = get(ctx, c, ns, "live", &cur)
		return apimeta.IsStatusConditionTrue(cur.Status.Conditions, condensev1.ConditionReady) && cur.Status.ReadyReplicas == 2,
			fmt.Sprintf("%+v", cur.Status)
	})

	// A session appears in the store: discovery creates its AgentSession, owned by the policy.
	const id = "sess-Alpha_01"
	if _, err := st.Commit(ctx, id, 0, []byte("state-1"), 0); err != nil {
		t.Fatal(err)
	}
	if err := st.IncrStats(ctx, id, map[string]int64{store.StatRequests: 3, store.StatBytesBefore: 1000, store.StatBytesAfter: 250,
		store.StatTokensBefore: 300, store.StatTokensAfter: 80, store.StatFlushes: 1, statRecords: 7, store.StatSummarizerCostMicros: 4200}); err != nil {
		t.Fatal(err)
	}
	var s *condensev1.AgentSession
	eventually(t, 20*time.Second, "discovered AgentSession with counters", func() (bool, string) {
		var err error
		if s, err = sessionFor(ctx, c, ns, id); err != nil {
			return false, err.Error()
		}
		st := s.Status
		ok := st.Requests == 3 && st.BytesBefore == 1000 && st.BytesAfter == 250 && st.ReclaimPercent == 75 && st.Records == 7 &&
			st.Flushes == 1 && st.TokensBefore == 300 && st.TokensAfter == 80 && st.SummarizerCost == "0.0042" && st.Version == 1 &&
			st.Active && st.LastSeen != nil && apimeta.IsStatusConditionTrue(st.Conditions, condensev1.ConditionReady) &&
			apimeta.IsStatusConditionFalse(st.Conditions, condensev1.ConditionDegraded)
		return ok, fmt.Sprintf("%+v", st)
	})
	if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != p.UID || s.Labels[condensev1.LabelDiscovered] != "true" {
		t.Fatalf("discovered session owner/labels: %+v %v", s.OwnerReferences, s.Labels)
	}
	if !slices.Contains(s.Finalizers, condensev1.AgentSessionFinalizer) {
		t.Fatalf("finalizer missing: %v", s.Finalizers)
	}
	// Meaningful changes are events: the discovery on the policy, Ready on the policy.
	eventually(t, 20*time.Second, "events", func() (bool, string) {
		var evs eventsv1.EventList
		if err := c.List(ctx, &evs, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		var seen []string
		discovered, ready := false, false
		for _, e := range evs.Items {
			seen = append(seen, e.Regarding.Kind+"/"+e.Reason)
			if e.Regarding.Kind == "PruningPolicy" && e.Reason == "SessionDiscovered" && strings.Contains(e.Note, s.Name) {
				discovered = true
			}
			if e.Regarding.Kind == "PruningPolicy" && e.Reason == reasonReconciled && e.Type == corev1.EventTypeNormal {
				ready = true
			}
		}
		return discovered && ready, fmt.Sprint(seen)
	})

	// Diagnostics make the session Degraded and add up on the policy.
	if err := st.AddDiagnostics(ctx, id, []store.Diagnostic{
		{Kind: string(pruner.DiagUnresolvedRange), Key: "b1"}, {Kind: string(pruner.DiagUnresolvedRange), Key: "overlap:b2"},
		{Kind: string(pruner.DiagOrphanSweep), Key: "0123456789abcdef"}, {Kind: string(pruner.DiagBackfillEmpty), Key: "1700000000000"},
		{Kind: string(pruner.DiagRangeIDMismatch), Key: "b3"},
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "Degraded session", func() (bool, string) {
		s, err := sessionFor(ctx, c, ns, id)
		if err != nil {
			return false, err.Error()
		}
		d := s.Status.Diagnostics
		return d == condensev1.DiagnosticCounts{Unresolved: 2, Mismatch: 1, Orphans: 1, BackfillEmpty: 1} &&
			apimeta.IsStatusConditionTrue(s.Status.Conditions, condensev1.ConditionDegraded), fmt.Sprintf("%+v", s.Status)
	})
	// Counter-only changes are held back by SessionStatusInterval, then written.
	if err := st.IncrStats(ctx, id, map[string]int64{store.StatRequests: 4}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "later counters", func() (bool, string) {
		s, err := sessionFor(ctx, c, ns, id)
		if err != nil {
			return false, err.Error()
		}
		return s.Status.Requests == 7, fmt.Sprintf("requests=%d", s.Status.Requests)
	})
	eventually(t, 20*time.Second, "policy aggregates", func() (bool, string) {
		var cur condensev1.PruningPolicy
		_ = get(ctx, c, ns, "live", &cur)
		return cur.Status.Sessions == 1 && cur.Status.Diagnostics.Total() == 5, fmt.Sprintf("%+v", cur.Status)
	})

	// Status is written only when it changes: resyncs of an unchanged policy and session
	// (every 2s and 1s here) leave the objects alone.
	var before, after condensev1.PruningPolicy
	_ = get(ctx, c, ns, "live", &before)
	sBefore, _ := sessionFor(ctx, c, ns, id)
	time.Sleep(3 * time.Second)
	_ = get(ctx, c, ns, "live", &after)
	sAfter, _ := sessionFor(ctx, c, ns, id)
	if before.ResourceVersion != after.ResourceVersion || sBefore.ResourceVersion != sAfter.ResourceVersion {
		t.Fatalf("unchanged objects were rewritten: policy %s -> %s, session %s -> %s",
			before.ResourceVersion, after.ResourceVersion, sBefore.ResourceVersion, sAfter.ResourceVersion)
	}

	// A user-declared AgentSession for another id is not duplicated by discovery.
	declared := &condensev1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: "declared", Namespace: ns},
		Spec: condensev1.AgentSessionSpec{PolicyRef: corev1.LocalObjectReference{Name: "live"}, SessionID: "declared id {x}"}}
	if err := c.Create(ctx, declared); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "declared session not in store yet", func() (bool, string) {
		_ = get(ctx, c, ns, "declared", declared)
		cond := apimeta.FindStatusCondition(declared.Status.Conditions, condensev1.ConditionReady)
		return cond != nil && cond.Reason == reasonSessionNotInStore, fmt.Sprintf("%+v", declared.Status)
	})
	if err := st.IncrStats(ctx, "declared id {x}", map[string]int64{store.StatRequests: 1}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "declared session observed", func() (bool, string) {
		_ = get(ctx, c, ns, "declared", declared)
		return declared.Status.Requests == 1, fmt.Sprintf("%+v", declared.Status)
	})
	var all condensev1.AgentSessionList
	_ = c.List(ctx, &all, client.InNamespace(ns))
	if len(all.Items) != 2 {
		t.Fatalf("want 2 AgentSessions (one discovered, one declared), got %d", len(all.Items))
	}

	// Deleting the AgentSession deletes the session's state (finalizer).
	if err := c.Delete(ctx, s); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "state deleted and AgentSession gone", func() (bool, string) {
		snap, err := st.Load(ctx, id)
		if err != nil {
			return false, err.Error()
		}
		if snap.Version != 0 {
			return false, "state still in the store"
		}
		err = get(ctx, c, ns, s.Name, &condensev1.AgentSession{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	// The Load above recreated nothing: the session must not be rediscovered.
	time.Sleep(1500 * time.Millisecond)
	if _, err := sessionFor(ctx, c, ns, id); err == nil {
		t.Fatal("deleted session was rediscovered")
	}
}

func testSessionAuthToken(t *testing.T, c client.Client, rds *redistest.Server) {
	ctx := context.Background()
	ns := newNamespace(t, c)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hmac", Namespace: ns}, StringData: map[string]string{"secret": "0123456789abcdef-team-secret"}}
	if err := c.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	externalPolicy(t, c, ns, "authd", rds.URL()+"/4", func(p *condensev1.PruningPolicy) {
		p.Spec.SessionAuth = &condensev1.SessionAuthSpec{SecretRef: corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "hmac"}, Key: "secret"}}
	})
	s := &condensev1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: "with-token", Namespace: ns},
		Spec: condensev1.AgentSessionSpec{PolicyRef: corev1.LocalObjectReference{Name: "authd"}, SessionID: "tok-session",
			Agent: "claude-code", Owner: "alice"}}
	if err := c.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	var tok corev1.Secret
	eventually(t, 20*time.Second, "token secret", func() (bool, string) {
		_ = get(ctx, c, ns, "with-token", s)
		if s.Status.TokenSecretName == "" {
			return false, "status.tokenSecretName empty"
		}
		if err := get(ctx, c, ns, s.Status.TokenSecretName, &tok); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	if s.Labels[condensev1.LabelAgent] != "claude-code" || s.Labels[condensev1.LabelOwner] != "alice" || s.Labels[condensev1.LabelPolicy] != "authd" {
		t.Fatalf("spec not mirrored to labels: %v", s.Labels)
	}
	want := config.SessionToken([]byte("0123456789abcdef-team-secret"), "tok-session")
	if string(tok.Data["token"]) != want || !config.VerifySessionToken([]byte("0123456789abcdef-team-secret"), "tok-session", string(tok.Data["token"])) {
		t.Fatalf("token %q, want %q", tok.Data["token"], want)
	}
	if ref := metav1.GetControllerOf(&tok); ref == nil || ref.UID != s.UID {
		t.Fatalf("token secret must be owned by the AgentSession: %+v", tok.OwnerReferences)
	}
	var dep appsv1.Deployment
	eventually(t, 20*time.Second, "proxy mounts the secret", func() (bool, string) {
		if err := get(ctx, c, ns, "authd-proxy", &dep); err != nil {
			return false, err.Error()
		}
		for _, v := range dep.Spec.Template.Spec.Volumes {
			if v.Secret != nil && v.Secret.SecretName == "hmac" {
				return true, ""
			}
		}
		return false, "no session-auth volume"
	})
}

func testTTLExpiry(t *testing.T, c client.Client, rds *redistest.Server) {
	ctx := context.Background()
	ns := newNamespace(t, c)
	url := rds.URL() + "/5"
	externalPolicy(t, c, ns, "short", url, nil)
	st := openTestStore(t, url)
	// Declared before the session reaches the store, so discovery finds it already covered.
	s := &condensev1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: "short-lived", Namespace: ns},
		Spec: condensev1.AgentSessionSpec{PolicyRef: corev1.LocalObjectReference{Name: "short"}, SessionID: "short-lived",
			TTL: &metav1.Duration{Duration: 3 * time.Second}}}
	if err := c.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Commit(ctx, "short-lived", 0, []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "observed before expiry", func() (bool, string) {
		_ = get(ctx, c, ns, "short-lived", s)
		return s.Status.Version == 1, fmt.Sprintf("%+v", s.Status)
	})
	eventually(t, 30*time.Second, "expired: AgentSession and state deleted", func() (bool, string) {
		err := get(ctx, c, ns, "short-lived", &condensev1.AgentSession{})
		if !apierrors.IsNotFound(err) {
			return false, fmt.Sprint(err)
		}
		infos, err := st.List(ctx)
		if err != nil {
			return false, err.Error()
		}
		return len(infos) == 0, fmt.Sprintf("%d sessions left in the store", len(infos))
	})
}

// testStatusConflictRetry writes status through a stale copy: the first write conflicts and
// the retry on a fresh copy succeeds without losing the concurrent change.
func testStatusConflictRetry(t *testing.T, c client.Client) {
	ctx := context.Background()
	ns := newNamespace(t, c)
	p := &condensev1.PruningPolicy{ObjectMeta: metav1.ObjectMeta{Name: "race", Namespace: ns}}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	stale := p.DeepCopy()
	// Someone else changes the object after we read it.
	eventually(t, 10*time.Second, "concurrent label", func() (bool, string) {
		var cur condensev1.PruningPolicy
		_ = get(ctx, c, ns, "race", &cur)
		cur.Labels = map[string]string{"touched": "yes"}
		return c.Update(ctx, &cur) == nil, "update failed"
	})
	// A direct status update with the stale copy conflicts...
	bad := stale.DeepCopy()
	bad.Status.Endpoint = "x"
	if err := c.Status().Update(ctx, bad); !apierrors.IsConflict(err) {
		t.Fatalf("want a conflict from the stale copy, got %v", err)
	}
	// ...writeStatus retries on a fresh copy.
	want := stale.Status.DeepCopy()
	want.Endpoint = "http://race-proxy." + ns + ".svc:8080"
	want.Sessions = 42
	if _, err := writeStatus(ctx, c, nil, stale, want, policyStatus); err != nil {
		t.Fatalf("writeStatus with a stale copy: %v", err)
	}
	var cur condensev1.PruningPolicy
	eventually(t, 10*time.Second, "status written", func() (bool, string) {
		_ = get(ctx, c, ns, "race", &cur)
		return cur.Status.Sessions == 42 || cur.Status.Endpoint == want.Endpoint, fmt.Sprintf("%+v", cur.Status)
	})
	if cur.Labels["touched"] != "yes" {
		t.Fatal("the concurrent change was lost")
	}
}

func testStoreOutage(t *testing.T, c client.Client) {
	ctx := context.Background()
	ns := newNamespace(t, c)
	rds := redistest.Start(t, &redistest.Options{AOF: true})
	externalPolicy(t, c, ns, "flaky", rds.URL(), nil)
	cond := func() *metav1.Condition {
		var cur condensev1.PruningPolicy
		_ = get(ctx, c, ns, "flaky", &cur)
		return apimeta.FindStatusCondition(cur.Status.Conditions, condensev1.ConditionStoreReachable)
	}
	eventually(t, 20*time.Second, "reachable", func() (bool, string) {
		cd := cond()
		return cd != nil && cd.Status == metav1.ConditionTrue, fmt.Sprintf("%+v", cd)
	})
	rds.Kill()
	eventually(t, 30*time.Second, "unreachable after redis dies", func() (bool, string) {
		cd := cond()
		return cd != nil && cd.Status == metav1.ConditionFalse && cd.Reason == reasonStoreUnreachable, fmt.Sprintf("%+v", cd)
	})
	rds.Restart()
	eventually(t, 30*time.Second, "reachable again", func() (bool, string) {
		cd := cond()
		return cd != nil && cd.Status == metav1.ConditionTrue, fmt.Sprintf("%+v", cd)
	})
}

// testUserMistakes covers policies the API server accepts but the operator cannot run: they
// are reported in status (and fixed by changing the policy or creating the Secret).
func testUserMistakes(t *testing.T, c client.Client, rds *redistest.Server) {
	ctx := context.Background()
	ns := newNamespace(t, c)
	blank := &condensev1.PruningPolicy{ObjectMeta: metav1.ObjectMeta{Name: "blank-tool", Namespace: ns},
		Spec: condensev1.PruningPolicySpec{ProtectedTools: []string{"  "}}}
	if err := c.Create(ctx, blank); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "InvalidSpec", func() (bool, string) {
		_ = get(ctx, c, ns, "blank-tool", blank)
		cd := apimeta.FindStatusCondition(blank.Status.Conditions, condensev1.ConditionReady)
		return cd != nil && cd.Status == metav1.ConditionFalse && cd.Reason == reasonInvalidSpec &&
			strings.Contains(cd.Message, "engine.protectedTools[0]"), fmt.Sprintf("%+v", cd)
	})
	if err := get(ctx, c, ns, "blank-tool-proxy", &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Fatalf("no proxy may be deployed for an invalid policy: %v", err)
	}

	// External Redis whose Secret does not exist yet, then a URL of the wrong kind, then a good one.
	p := &condensev1.PruningPolicy{ObjectMeta: metav1.ObjectMeta{Name: "nosecret", Namespace: ns},
		Spec: condensev1.PruningPolicySpec{Redis: condensev1.RedisSpec{External: &condensev1.ExternalRedisSpec{
			Mode:         "standalone",
			URLSecretRef: corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "later"}, Key: "url"}}}}}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	storeCond := func(reason string, status metav1.ConditionStatus) func() (bool, string) {
		return func() (bool, string) {
			var cur condensev1.PruningPolicy
			_ = get(ctx, c, ns, "nosecret", &cur)
			cd := apimeta.FindStatusCondition(cur.Status.Conditions, condensev1.ConditionStoreReachable)
			return cd != nil && cd.Status == status && cd.Reason == reason, fmt.Sprintf("%+v", cd)
		}
	}
	eventually(t, 20*time.Second, "SecretUnavailable", storeCond(reasonSecretUnavailable, metav1.ConditionFalse))
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "later", Namespace: ns},
		StringData: map[string]string{"url": "redis+cluster://" + rds.Addr}}
	if err := c.Create(ctx, sec); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "wrong scheme for the mode", storeCond(reasonInvalidSpec, metav1.ConditionFalse))
	sec.StringData = map[string]string{"url": rds.URL() + "/6"}
	if err := c.Update(ctx, sec); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "reachable once the Secret is right", storeCond(reasonStoreReachable, metav1.ConditionTrue))
}

// testApplyFailureInStatus makes applying a child fail (its name is taken by an object another
// controller owns): the failure is reported in status for the current generation, and the
// policy recovers once the name is free.
func testApplyFailureInStatus(t *testing.T, c client.Client) {
	ctx := context.Background()
	ns := newNamespace(t, c)
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "someone-else", Namespace: ns}}
	if err := c.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	taken := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "clash-proxy", Namespace: ns, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "ConfigMap", Name: other.Name, UID: other.UID, Controller: new(true)}}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 1}}},
	}
	if err := c.Create(ctx, taken); err != nil {
		t.Fatal(err)
	}
	p := &condensev1.PruningPolicy{ObjectMeta: metav1.ObjectMeta{Name: "clash", Namespace: ns}}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "Ready=False ApplyFailed", func() (bool, string) {
		cur, cd := policyCondition(ctx, c, ns, "clash", condensev1.ConditionReady)
		return cd != nil && cd.Status == metav1.ConditionFalse && cd.Reason == reasonApplyFailed &&
			strings.Contains(cd.Message, "clash-proxy") && cd.ObservedGeneration == cur.Generation &&
			cur.Status.ObservedGeneration == cur.Generation, fmt.Sprintf("%+v", cur.Status)
	})
	if err := c.Delete(ctx, taken); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "recovered once the name is free", func() (bool, string) {
		cur, cd := policyCondition(ctx, c, ns, "clash", condensev1.ConditionReady)
		var svc corev1.Service
		err := get(ctx, c, ns, "clash-proxy", &svc)
		return cd != nil && cd.Reason != reasonApplyFailed && err == nil && isControlledBy(&svc, cur), fmt.Sprintf("%+v %v", cd, err)
	})
}

// policyCondition reads a policy and returns it with its condition of type typ (nil when unset).
func policyCondition(ctx context.Context, c client.Client, ns, name, typ string) (*condensev1.PruningPolicy, *metav1.Condition) {
	var cur condensev1.PruningPolicy
	_ = get(ctx, c, ns, name, &cur)
	return &cur, apimeta.FindStatusCondition(cur.Status.Conditions, typ)
}

// testPolicyRecreated replaces a policy by one of the same name on the same store before the
// old policy's discovered sessions are collected: their finalizers leave the new policy's state
// alone, while a user-declared session follows the new policy and is cleaned up through it.
func testPolicyRecreated(t *testing.T, c client.Client, rds *redistest.Server) {
	ctx := context.Background()
	ns := newNamespace(t, c)
	url := rds.URL() + "/7"
	old := externalPolicy(t, c, ns, "again", url, nil)
	st := openTestStore(t, url)
	const discovered, declaredID = "recreated-discovered", "recreated-declared"
	declared := &condensev1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: "declared", Namespace: ns},
		Spec: condensev1.AgentSessionSpec{PolicyRef: corev1.LocalObjectReference{Name: "again"}, SessionID: declaredID}}
	if err := c.Create(ctx, declared); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{discovered, declaredID} {
		if _, err := st.Commit(ctx, id, 0, []byte("state"), 0); err != nil {
			t.Fatal(err)
		}
	}
	var s *condensev1.AgentSession
	eventually(t, 20*time.Second, "sessions bound to the first policy", func() (bool, string) {
		var err error
		if s, err = sessionFor(ctx, c, ns, discovered); err != nil {
			return false, err.Error()
		}
		_ = get(ctx, c, ns, "declared", declared)
		return slices.Contains(s.Finalizers, condensev1.AgentSessionFinalizer) && s.Status.Version == 1 &&
			declared.Annotations[annotationPolicyUID] == string(old.UID), fmt.Sprintf("%+v %v", s.Status, declared.Annotations)
	})

	if err := c.Delete(ctx, old); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "old policy gone", func() (bool, string) {
		err := get(ctx, c, ns, "again", &condensev1.PruningPolicy{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	again := &condensev1.PruningPolicy{ObjectMeta: metav1.ObjectMeta{Name: "again", Namespace: ns}, Spec: *old.Spec.DeepCopy()}
	if err := c.Create(ctx, again); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "new policy's store open, declared session rebound", func() (bool, string) {
		_, cd := policyCondition(ctx, c, ns, "again", condensev1.ConditionStoreReachable)
		_ = get(ctx, c, ns, "declared", declared)
		return cd != nil && cd.Status == metav1.ConditionTrue && declared.Annotations[annotationPolicyUID] == string(again.UID),
			fmt.Sprintf("%+v %v", cd, declared.Annotations)
	})
	eventually(t, 20*time.Second, "orphaned session reports its policy gone", func() (bool, string) {
		_ = get(ctx, c, ns, s.Name, s)
		cd := apimeta.FindStatusCondition(s.Status.Conditions, condensev1.ConditionReady)
		return cd != nil && cd.Reason == reasonPolicyNotFound, fmt.Sprintf("%+v", cd)
	})

	// What the garbage collector does to the old policy's session, and a user to theirs.
	for _, obj := range []*condensev1.AgentSession{s, declared} {
		if err := c.Delete(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 20*time.Second, "both AgentSessions gone", func() (bool, string) {
		e1 := get(ctx, c, ns, s.Name, &condensev1.AgentSession{})
		e2 := get(ctx, c, ns, "declared", &condensev1.AgentSession{})
		return apierrors.IsNotFound(e1) && apierrors.IsNotFound(e2), fmt.Sprint(e1, e2)
	})
	infos, err := st.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, info := range infos {
		left = append(left, info.Session)
	}
	if len(left) != 1 || left[0] != discovered {
		t.Fatalf("sessions in the store after the deletions: %v; want only %q (the old policy's session must not delete the new policy's state, the declared one must)", left, discovered)
	}
}

// testSecretsCachedAsMetadata: the operator reads referenced Secrets and writes token Secrets
// without any informer of whole Secrets; its metadata cache of Secrets keeps neither
// annotations (kubectl keeps the data there) nor managed fields.
func testSecretsCachedAsMetadata(t *testing.T, c client.Client, mgr *testManager, rds *redistest.Server) {
	ctx := context.Background()
	ns := newNamespace(t, c)
	hmac := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hmac", Namespace: ns, Labels: map[string]string{"team": "a"},
		Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"data":{"secret":"c2VjcmV0"}}`}},
		StringData: map[string]string{"secret": "0123456789abcdef-cache-check"}}
	if err := c.Create(ctx, hmac); err != nil {
		t.Fatal(err)
	}
	externalPolicy(t, c, ns, "cached", rds.URL()+"/8", func(p *condensev1.PruningPolicy) {
		p.Spec.SessionAuth = &condensev1.SessionAuthSpec{SecretRef: corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "hmac"}, Key: "secret"}}
	})
	s := &condensev1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: "cached", Namespace: ns},
		Spec: condensev1.AgentSessionSpec{PolicyRef: corev1.LocalObjectReference{Name: "cached"}, SessionID: "cached"}}
	if err := c.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "store reachable and token issued", func() (bool, string) {
		_, cd := policyCondition(ctx, c, ns, "cached", condensev1.ConditionStoreReachable)
		_ = get(ctx, c, ns, "cached", s)
		return cd != nil && cd.Status == metav1.ConditionTrue && s.Status.TokenSecretName != "", fmt.Sprintf("%+v %+v", cd, s.Status)
	})
	metaInformer := false
	for _, obj := range mgr.informerTypes() {
		switch o := obj.(type) {
		case *corev1.Secret:
			t.Fatal("an informer of whole Secrets was started: it would cache the data of every Secret in the cluster")
		case *metav1.PartialObjectMetadata:
			metaInformer = metaInformer || o.Kind == "Secret"
		}
	}
	if !metaInformer {
		t.Fatal("no metadata-only Secret informer: Secret changes are not watched")
	}
	m := secretcache.Metadata()
	eventually(t, 10*time.Second, "cached metadata", func() (bool, string) {
		err := mgr.GetCache().Get(ctx, client.ObjectKeyFromObject(hmac), m)
		return err == nil, fmt.Sprint(err)
	})
	if m.Labels["team"] != "a" || len(m.Annotations) != 0 || len(m.ManagedFields) != 0 {
		t.Fatalf("cached Secret metadata: labels %v, annotations %v, %d managed fields; want labels only", m.Labels, m.Annotations, len(m.ManagedFields))
	}
}

// testSecretRotation rotates the Secrets a policy's pods read: each rotation rolls the proxy
// (the pods read them once, at start), and a new session-auth secret re-issues the tokens;
// edits that leave the data the pods read alone (annotations, labels, other keys) roll nothing.
func testSecretRotation(t *testing.T, c client.Client, rds *redistest.Server) {
	ctx := context.Background()
	ns := newNamespace(t, c)
	hmac := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hmac", Namespace: ns}, StringData: map[string]string{"secret": "0123456789abcdef-first"}}
	llm := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "llm", Namespace: ns}, StringData: map[string]string{"key": "sk-first"}}
	for _, sec := range []*corev1.Secret{hmac, llm} {
		if err := c.Create(ctx, sec); err != nil {
			t.Fatal(err)
		}
	}
	externalPolicy(t, c, ns, "rotate", rds.URL()+"/9", func(p *condensev1.PruningPolicy) {
		p.Spec.SessionAuth = &condensev1.SessionAuthSpec{SecretRef: corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "hmac"}, Key: "secret"}}
		p.Spec.Summarizer.Credentials = &condensev1.CredentialsSpec{SecretKeyRef: corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "llm"}, Key: "key"}}
	})
	s := &condensev1.AgentSession{ObjectMeta: metav1.ObjectMeta{Name: "rotating", Namespace: ns},
		Spec: condensev1.AgentSessionSpec{PolicyRef: corev1.LocalObjectReference{Name: "rotate"}, SessionID: "rotating-id"}}
	if err := c.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	// templateHashes returns the proxy pod template's config and secrets hashes.
	templateHashes := func() (string, string, error) {
		var dep appsv1.Deployment
		if err := get(ctx, c, ns, "rotate-proxy", &dep); err != nil {
			return "", "", err
		}
		a := dep.Spec.Template.Annotations
		return a[specs.AnnotationConfigHash], a[specs.AnnotationSecretsHash], nil
	}
	// token waits for the session's token to be the one the secret gives.
	token := func(what, secret string) {
		t.Helper()
		want := config.SessionToken([]byte(secret), "rotating-id")
		eventually(t, 20*time.Second, what, func() (bool, string) {
			var tok corev1.Secret
			if err := get(ctx, c, ns, "rotating-token", &tok); err != nil {
				return false, err.Error()
			}
			return string(tok.Data["token"]) == want, string(tok.Data["token"])
		})
	}
	// digest is the secrets hash of the given session-auth and summarizer key values.
	digest := func(hmacValue, llmValue string) string {
		return specs.SecretsHash([]specs.SecretKeyValue{
			{Secret: "rotate-redis-url", Key: "url", Value: []byte(rds.URL() + "/9"), Found: true},
			{Secret: "hmac", Key: "secret", Value: []byte(hmacValue), Found: true},
			{Secret: "llm", Key: "key", Value: []byte(llmValue), Found: true},
		})
	}
	token("first token", "0123456789abcdef-first")
	var cfgHash, first string
	eventually(t, 20*time.Second, "secrets hash on the pod template", func() (bool, string) {
		var err error
		cfgHash, first, err = templateHashes()
		return err == nil && first != "", fmt.Sprint(cfgHash, first, err)
	})
	if want := digest("0123456789abcdef-first", "sk-first"); first != want {
		t.Fatalf("secrets hash %q, want the digest of the referenced keys' data %q", first, want)
	}

	// Edits that leave the referenced keys' data alone (an annotation, a label, another key)
	// change the Secrets' resourceVersions but must not roll the pods.
	var dep appsv1.Deployment
	if err := get(ctx, c, ns, "rotate-proxy", &dep); err != nil {
		t.Fatal(err)
	}
	generation := dep.Generation
	for _, sec := range []*corev1.Secret{hmac, llm} {
		eventually(t, 10*time.Second, "annotate "+sec.Name, func() (bool, string) {
			if err := get(ctx, c, ns, sec.Name, sec); err != nil {
				return false, err.Error()
			}
			metav1.SetMetaDataAnnotation(&sec.ObjectMeta, "reflector.example/synced", time.Now().String())
			metav1.SetMetaDataLabel(&sec.ObjectMeta, "team", "x")
			sec.Data["unused"] = []byte("not read by the pods")
			return c.Update(ctx, sec) == nil, "update failed"
		})
	}
	// The policy resyncs every 2s and the Secret watch enqueues it at once: after 3s it has
	// been reconciled with the edited Secrets.
	time.Sleep(3 * time.Second)
	if err := get(ctx, c, ns, "rotate-proxy", &dep); err != nil {
		t.Fatal(err)
	}
	if h := dep.Spec.Template.Annotations[specs.AnnotationSecretsHash]; h != first || dep.Generation != generation {
		t.Fatalf("metadata-only Secret edits rolled the pods: secrets hash %q (was %q), generation %d (was %d)", h, first, dep.Generation, generation)
	}
	// rotate changes one key of a Secret and waits for a new secrets hash (same configuration).
	rotate := func(sec *corev1.Secret, key, value, prev string) string {
		t.Helper()
		eventually(t, 10*time.Second, "rotate "+sec.Name, func() (bool, string) {
			if err := get(ctx, c, ns, sec.Name, sec); err != nil {
				return false, err.Error()
			}
			sec.Data[key] = []byte(value)
			return c.Update(ctx, sec) == nil, "update failed"
		})
		var next string
		eventually(t, 20*time.Second, "pods rolled after rotating "+sec.Name, func() (bool, string) {
			cfg, h, err := templateHashes()
			next = h
			return err == nil && h != "" && h != prev && cfg == cfgHash, fmt.Sprint(cfg, h, err)
		})
		return next
	}
	second := rotate(hmac, "secret", "0123456789abcdef-second", first)
	if want := digest("0123456789abcdef-second", "sk-first"); second != want {
		t.Errorf("secrets hash after rotating hmac %q, want %q", second, want)
	}
	token("token re-issued with the rotated secret", "0123456789abcdef-second")
	if third := rotate(llm, "key", "sk-second", second); third != digest("0123456789abcdef-second", "sk-second") {
		t.Errorf("secrets hash after rotating llm %q, want %q", third, digest("0123456789abcdef-second", "sk-second"))
	}
}

// testRestrictedPodSecurity: in a namespace enforcing PodSecurity "restricted", pods made from
// the applied proxy and Redis templates (created by the test: envtest runs no workload
// controllers) are admitted, and the Redis is fenced by a NetworkPolicy the policy owns.
func testRestrictedPodSecurity(t *testing.T, c client.Client) {
	ctx := context.Background()
	ns := newNamespace(t, c)
	var nsObj corev1.Namespace
	if err := get(ctx, c, "", ns, &nsObj); err != nil {
		t.Fatal(err)
	}
	nsObj.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	if err := c.Update(ctx, &nsObj); err != nil {
		t.Fatal(err)
	}
	p := &condensev1.PruningPolicy{ObjectMeta: metav1.ObjectMeta{Name: "locked", Namespace: ns}}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	var ss appsv1.StatefulSet
	var dep appsv1.Deployment
	var np networkingv1.NetworkPolicy
	eventually(t, 20*time.Second, "redis, proxy and network policy", func() (bool, string) {
		e1, e2, e3 := get(ctx, c, ns, "locked-redis", &ss), get(ctx, c, ns, "locked-proxy", &dep), get(ctx, c, ns, "locked-redis", &np)
		return e1 == nil && e2 == nil && e3 == nil, fmt.Sprint(e1, e2, e3)
	})
	for name, tpl := range map[string]corev1.PodTemplateSpec{"redis": ss.Spec.Template, "proxy": dep.Spec.Template} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name + "-admission", Namespace: ns, Labels: tpl.Labels}, Spec: tpl.Spec}
		if name == "redis" { // the StatefulSet adds the claim; any volume named data stands in for it
			pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		}
		if err := c.Create(ctx, pod); err != nil {
			t.Errorf("%s pod template rejected under PodSecurity restricted: %v", name, err)
		}
	}
	if !isControlledBy(&np, p) {
		t.Fatalf("network policy not controlled by the policy: %+v", np.OwnerReferences)
	}
	from := np.Spec.Ingress[0].From
	if len(from) != 3 || from[2].NamespaceSelector.MatchLabels[corev1.LabelMetadataName] != "condense-system" {
		t.Fatalf("network policy peers: %+v", from)
	}
}

// testAutoscalingHandover turns autoscaling on for a running proxy: the operator stops
// applying spec.replicas, and the replica count must not fall back to the API default of 1
// before the autoscaler (not running in envtest) takes the field over.
func testAutoscalingHandover(t *testing.T, c client.Client) {
	ctx := context.Background()
	ns := newNamespace(t, c)
	p := &condensev1.PruningPolicy{ObjectMeta: metav1.ObjectMeta{Name: "scaled", Namespace: ns},
		Spec: condensev1.PruningPolicySpec{Proxy: condensev1.ProxySpec{Replicas: new(int32(3))}}}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	var dep appsv1.Deployment
	eventually(t, 20*time.Second, "3 proxy replicas", func() (bool, string) {
		err := get(ctx, c, ns, "scaled-proxy", &dep)
		return err == nil && dep.Spec.Replicas != nil && *dep.Spec.Replicas == 3, fmt.Sprint(err)
	})
	eventually(t, 10*time.Second, "autoscaling on", func() (bool, string) {
		var cur condensev1.PruningPolicy
		if err := get(ctx, c, ns, "scaled", &cur); err != nil {
			return false, err.Error()
		}
		cur.Spec.Proxy.Autoscaling = &condensev1.AutoscalingSpec{MinReplicas: 2, MaxReplicas: 6}
		return c.Update(ctx, &cur) == nil, "update failed"
	})
	// The Deployment is applied before the HPA: once the HPA exists, so does the Deployment
	// without the operator's replicas.
	eventually(t, 20*time.Second, "HPA", func() (bool, string) {
		err := get(ctx, c, ns, "scaled-proxy", &autoscalingv2.HorizontalPodAutoscaler{})
		return err == nil, fmt.Sprint(err)
	})
	for range 3 { // across a few reconciles (policy resync is 2s here)
		if err := get(ctx, c, ns, "scaled-proxy", &dep); err != nil {
			t.Fatal(err)
		}
		if got := ptr.Deref(dep.Spec.Replicas, 1); got != 3 {
			t.Fatalf("turning autoscaling on changed the proxy replicas from 3 to %d", got)
		}
		time.Sleep(time.Second)
	}
	if ownsReplicas(&dep, fieldOwner) {
		t.Fatal("the operator still owns spec.replicas under autoscaling")
	}
}
