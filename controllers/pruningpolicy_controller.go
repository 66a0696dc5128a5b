package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	condensev1 "github.com/condense-dev/condense/api/v1alpha1"
	"github.com/condense-dev/condense/internal/config"
	"github.com/condense-dev/condense/internal/secretcache"
	"github.com/condense-dev/condense/internal/sessionindex"
	"github.com/condense-dev/condense/internal/specs"
)

// Condition reasons.
const (
	// ReasonReconciled: the policy is fully working.
	ReasonReconciled = "Reconciled"
	// ReasonInvalidSpec: the policy (or the URL in its Secret) cannot be used as written.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonSecretUnavailable: a Secret or key the policy references does not exist.
	ReasonSecretUnavailable = "SecretUnavailable"
	// ReasonStoreUnreachable: the session store could not be opened or listed.
	ReasonStoreUnreachable = "StoreUnreachable"
	// ReasonStoreReachable: the last listing of the session store succeeded.
	ReasonStoreReachable = "StoreReachable"
	// ReasonDeploymentReady: the proxy Deployment is Available.
	ReasonDeploymentReady = "MinimumReplicasAvailable"
	// ReasonDeploymentNotReady: the proxy Deployment is not Available (yet).
	ReasonDeploymentNotReady = "MinimumReplicasUnavailable"
	// ReasonApplyFailed: a child object could not be applied or deleted.
	ReasonApplyFailed = "ApplyFailed"
	// ReasonNotReady: Ready is False because another condition is False.
	ReasonNotReady = "NotReady"
	// ReasonPolicyNotFound: the AgentSession's PruningPolicy does not exist.
	ReasonPolicyNotFound = "PolicyNotFound"
	// ReasonSessionNotInStore: the store holds no state for the session.
	ReasonSessionNotInStore = "SessionNotInStore"
	// ReasonSessionObserved: the session's state was read from the store.
	ReasonSessionObserved = "SessionObserved"
	// ReasonDiagnostics: the session recorded diagnostics (Degraded is True).
	ReasonDiagnostics = "DiagnosticsRecorded"
	// ReasonNoDiagnostics: the session recorded no diagnostics (Degraded is False).
	ReasonNoDiagnostics = "NoDiagnostics"
)

// indexPolicyRef indexes AgentSessions by spec.policyRef.name.
const indexPolicyRef = "spec.policyRef.name"

// indexPolicySession indexes AgentSessions by "<policy>/<sessionID>".
const indexPolicySession = "spec.policySession"

// PruningPolicyReconciler turns a PruningPolicy into a running proxy: configuration ConfigMap,
// Deployment, Service, PodDisruptionBudget, optional HorizontalPodAutoscaler, optional pruner
// worker Deployment and, for redis.managed, a Redis StatefulSet with its Service,
// configuration and NetworkPolicy. Status is computed once per reconcile and written only when it changed.
type PruningPolicyReconciler struct {
	// Client reads from the cache and writes to the API server.
	client.Client
	// Scheme knows the API types.
	Scheme *runtime.Scheme
	// Recorder emits events.
	Recorder EventRecorder
	// Sessions holds the open session stores.
	Sessions *sessionindex.Index
	// Secrets reads the Secrets the policy references.
	Secrets *secretcache.Reader
	// Options are passed to the builders.
	Options specs.BuildOptions
	// Resync is how often a policy is re-checked without a triggering change (default 60s).
	Resync time.Duration

	policyEvents chan event.TypedGenericEvent[*condensev1.PruningPolicy]
}

// The operator never writes a PruningPolicy (status aside). Leases for leader election are
// granted by the namespaced Role in config/rbac/leader_election_role.yaml, not here.
// +kubebuilder:rbac:groups=condense.dev,resources=pruningpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=condense.dev,resources=pruningpolicies/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=condense.dev,resources=pruningpolicies/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=configmaps;services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=autoscaling,resources=horizontalpodautoscalers,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// storeURL resolves the store URL the operator uses for the policy. The error is a
// *specError for user mistakes (missing secret, wrong scheme).
func storeURL(ctx context.Context, secrets *secretcache.Reader, p *condensev1.PruningPolicy) (string, error) {
	ext := p.Spec.Redis.External
	if ext == nil {
		return specs.ManagedRedisURL(p), nil
	}
	v, err := secrets.Value(ctx, p.Namespace, ext.URLSecretRef)
	if err != nil {
		return "", &specError{reason: ReasonSecretUnavailable, err: fmt.Errorf("redis.external.urlSecretRef: %w", err)}
	}
	url := strings.TrimSpace(string(v))
	if err := specs.CheckExternalURL(ext.Mode, url); err != nil {
		return "", &specError{reason: ReasonInvalidSpec, err: err}
	}
	return url, nil
}

// specError is a problem the user has to fix; reconciling again will not help until an
// object changes.
type specError struct {
	reason string
	err    error
}

// Error implements error.
func (e *specError) Error() string { return e.err.Error() }

// Unwrap returns the underlying error.
func (e *specError) Unwrap() error { return e.err }

// Reconcile implements reconcile.Reconciler.
func (r *PruningPolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	var p condensev1.PruningPolicy
	if err := r.Get(ctx, req.NamespacedName, &p); err != nil {
		if apierrors.IsNotFound(err) {
			r.Sessions.Forget(req.NamespacedName)
			metricPolicyReady.DeleteLabelValues(req.Namespace, req.Name)
			metricPolicySessions.DeleteLabelValues(req.Namespace, req.Name)
			metricPolicyDiagnostics.DeletePartialMatch(map[string]string{"namespace": req.Namespace, "policy": req.Name})
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !p.DeletionTimestamp.IsZero() {
		r.Sessions.Forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	status := p.Status.DeepCopy()
	status.ObservedGeneration = p.Generation
	status.Endpoint = specs.ProxyEndpoint(&p)
	resync := r.Resync
	if resync <= 0 {
		resync = time.Minute
	}

	cfg, err := specs.RenderConfig(&p)
	if err != nil {
		msg := "the policy renders an invalid proxy configuration: " + err.Error()
		setCond(status, p.Generation, condensev1.ConditionReady, false, ReasonInvalidSpec, msg)
		r.event(&p, corev1.EventTypeWarning, ReasonInvalidSpec, "Render", msg)
		if werr := r.writeStatus(ctx, &p, status); werr != nil {
			return ctrl.Result{}, werr
		}
		// A user mistake: retrying cannot help until the policy changes.
		return ctrl.Result{}, reconcile.TerminalError(err)
	}
	status.ConfigHash = cfg.Hash()
	hashes := specs.PodHashes{Config: cfg.Hash()}
	if hashes.Secrets, err = r.secretsHash(ctx, &p); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.applyChildren(ctx, &p, cfg, hashes); err != nil {
		// Reported for this generation, then retried with backoff (a conflict over a name or
		// an API error may clear up without the policy changing).
		setCond(status, p.Generation, condensev1.ConditionReady, false, ReasonApplyFailed, err.Error())
		if werr := r.writeStatus(ctx, &p, status); werr != nil {
			logger.Error(werr, "writing status after a failed apply")
		}
		return ctrl.Result{}, err
	}

	// Store reachability.
	url, uerr := storeURL(ctx, r.Secrets, &p)
	var serr *specError
	switch {
	case errors.As(uerr, &serr):
		setCond(status, p.Generation, condensev1.ConditionStoreReachable, false, serr.reason, serr.Error())
	case uerr != nil:
		return ctrl.Result{}, uerr
	default:
		if err := r.Sessions.Ensure(ctx, req.NamespacedName, url); err != nil {
			setCond(status, p.Generation, condensev1.ConditionStoreReachable, false, ReasonStoreUnreachable, err.Error())
		} else {
			setCond(status, p.Generation, condensev1.ConditionStoreReachable, true, ReasonStoreReachable, "listed sessions in the store")
		}
	}

	// Proxy availability.
	var dep appsv1.Deployment
	if err := r.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: specs.ProxyName(&p)}, &dep); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
	}
	status.Replicas = dep.Status.Replicas
	status.ReadyReplicas = dep.Status.ReadyReplicas
	available := false
	for _, c := range dep.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
			available = true
		}
	}
	if available && dep.Status.ObservedGeneration >= dep.Generation {
		setCond(status, p.Generation, condensev1.ConditionProxyAvailable, true, ReasonDeploymentReady,
			fmt.Sprintf("%d/%d proxy replicas ready", dep.Status.ReadyReplicas, dep.Status.Replicas))
	} else {
		setCond(status, p.Generation, condensev1.ConditionProxyAvailable, false, ReasonDeploymentNotReady,
			fmt.Sprintf("proxy Deployment %s has %d/%d ready replicas", dep.Name, dep.Status.ReadyReplicas, dep.Status.Replicas))
	}

	// Sessions and their diagnostics.
	var sessions condensev1.AgentSessionList
	if err := r.List(ctx, &sessions, client.InNamespace(p.Namespace), client.MatchingFields{indexPolicyRef: p.Name}); err != nil {
		return ctrl.Result{}, err
	}
	status.Sessions = int32(len(sessions.Items))
	status.Diagnostics = condensev1.DiagnosticCounts{}
	for i := range sessions.Items {
		d := sessions.Items[i].Status.Diagnostics
		status.Diagnostics.Unresolved += d.Unresolved
		status.Diagnostics.Mismatch += d.Mismatch
		status.Diagnostics.Orphans += d.Orphans
		status.Diagnostics.BackfillEmpty += d.BackfillEmpty
	}

	proxyOK := apimeta.IsStatusConditionTrue(status.Conditions, condensev1.ConditionProxyAvailable)
	storeOK := apimeta.IsStatusConditionTrue(status.Conditions, condensev1.ConditionStoreReachable)
	switch {
	case proxyOK && storeOK:
		setCond(status, p.Generation, condensev1.ConditionReady, true, ReasonReconciled, "proxy available and store reachable")
	case !storeOK:
		setCond(status, p.Generation, condensev1.ConditionReady, false, ReasonNotReady, "session store not reachable")
	default:
		setCond(status, p.Generation, condensev1.ConditionReady, false, ReasonNotReady, "proxy not available yet")
	}
	if err := r.writeStatus(ctx, &p, status); err != nil {
		return ctrl.Result{}, err
	}
	ready := 0.0
	if proxyOK && storeOK {
		ready = 1
	}
	metricPolicyReady.WithLabelValues(p.Namespace, p.Name).Set(ready)
	metricPolicySessions.WithLabelValues(p.Namespace, p.Name).Set(float64(status.Sessions))
	for kind, v := range map[string]int64{"unresolved": status.Diagnostics.Unresolved, "mismatch": status.Diagnostics.Mismatch,
		"orphans": status.Diagnostics.Orphans, "backfillEmpty": status.Diagnostics.BackfillEmpty} {
		metricPolicyDiagnostics.WithLabelValues(p.Namespace, p.Name, kind).Set(float64(v))
	}
	logger.V(1).Info("reconciled", "ready", proxyOK && storeOK)
	if serr != nil {
		// A missing Secret or a URL of the wrong kind: the Secret watch brings the policy back
		// when it is fixed.
		return ctrl.Result{}, reconcile.TerminalError(serr)
	}
	return ctrl.Result{RequeueAfter: resync}, nil
}

// secretsHash digests the data of the Secret keys the policy's pods read.
func (r *PruningPolicyReconciler) secretsHash(ctx context.Context, p *condensev1.PruningPolicy) (string, error) {
	var keys []specs.SecretKeyValue
	for _, sel := range specs.ReferencedSecretKeys(p) {
		v, found, err := r.Secrets.Lookup(ctx, p.Namespace, sel)
		if err != nil {
			return "", err
		}
		keys = append(keys, specs.SecretKeyValue{Secret: sel.Name, Key: sel.Key, Value: v, Found: found})
	}
	return specs.SecretsHash(keys), nil
}

// applyChildren server-side applies every child object and deletes the optional ones the
// policy no longer wants.
func (r *PruningPolicyReconciler) applyChildren(ctx context.Context, p *condensev1.PruningPolicy, cfg *config.Config, hashes specs.PodHashes) error {
	children, err := specs.Children(p, cfg, r.Options, hashes)
	if err != nil {
		return err
	}
	if err := r.handOverReplicas(ctx, p); err != nil {
		return fmt.Errorf("hand the proxy replicas over to the autoscaler: %w", err)
	}
	for _, c := range children {
		if !c.Wanted {
			if err := r.deleteOwned(ctx, p, c.Object); err != nil {
				return fmt.Errorf("delete %T %s: %w", c.Object, c.Object.GetName(), err)
			}
			continue
		}
		if err := applyOwned(ctx, r.Client, r.Scheme, p, c.Object); err != nil {
			return fmt.Errorf("apply %T %s: %w", c.Object, c.Object.GetName(), err)
		}
	}
	return nil
}

// handOverReplicas keeps the proxy's replica count when autoscaling is turned on. The proxy
// Deployment is then applied without spec.replicas; were the operator still the field's only
// owner, the API server would reset it to 1. So, while the live Deployment has replicas the
// operator applied, the field manager FieldOwnerHandover first applies the current count
// (within the autoscaler's bounds); the HorizontalPodAutoscaler takes the field over from it
// the next time it scales.
func (r *PruningPolicyReconciler) handOverReplicas(ctx context.Context, p *condensev1.PruningPolicy) error {
	if p.Spec.Proxy.Autoscaling == nil {
		return nil
	}
	var live appsv1.Deployment
	if err := r.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: specs.ProxyName(p)}, &live); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !ownsReplicas(&live, FieldOwner) {
		return nil
	}
	handover := specs.BuildProxyReplicasHandover(p, ptr.Deref(live.Spec.Replicas, 1))
	log.FromContext(ctx).Info("handing the proxy replicas over to the autoscaler", "replicas", *handover.Spec.Replicas)
	return r.Apply(ctx, handover, client.FieldOwner(FieldOwnerHandover), client.ForceOwnership)
}

// deleteOwned deletes obj if it exists and is controlled by p (never someone else's object).
func (r *PruningPolicyReconciler) deleteOwned(ctx context.Context, p *condensev1.PruningPolicy, obj client.Object) error {
	if err := r.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	if !metav1.IsControlledBy(obj, p) {
		return nil
	}
	if err := deleteIfExists(ctx, r.Client, obj); err != nil {
		return err
	}
	r.event(p, corev1.EventTypeNormal, "Deleted", "Delete", fmt.Sprintf("deleted %T %s no longer wanted by the policy", obj, obj.GetName()))
	return nil
}

func setCond(status *condensev1.PruningPolicyStatus, gen int64, t string, ok bool, reason, msg string) {
	setCondition(&status.Conditions, gen, t, ok, reason, msg)
}

func (r *PruningPolicyReconciler) event(obj runtime.Object, typ, reason, action, note string) {
	emitEvent(r.Recorder, obj, typ, reason, action, note)
}

// writeStatus writes status when it differs from the stored one, retrying on conflicts with a
// fresh copy, and emits an event for every condition that changed.
func (r *PruningPolicyReconciler) writeStatus(ctx context.Context, p *condensev1.PruningPolicy, status *condensev1.PruningPolicyStatus) error {
	if equality.Semantic.DeepEqual(&p.Status, status) {
		return nil
	}
	old := p.Status.DeepCopy()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cur condensev1.PruningPolicy
		if err := r.Get(ctx, client.ObjectKeyFromObject(p), &cur); err != nil {
			return err
		}
		cur.Status = *status.DeepCopy()
		if err := r.Status().Update(ctx, &cur); err != nil {
			return err
		}
		*p = cur
		return nil
	})
	if err != nil {
		return err
	}
	for _, c := range status.Conditions {
		prev := apimeta.FindStatusCondition(old.Conditions, c.Type)
		if prev == nil || prev.Status != c.Status || prev.Reason != c.Reason {
			typ := corev1.EventTypeNormal
			if c.Status != metav1.ConditionTrue {
				typ = corev1.EventTypeWarning
			}
			r.event(p, typ, c.Reason, "Status", fmt.Sprintf("%s=%s: %s", c.Type, c.Status, c.Message))
		}
	}
	return nil
}

// SetupWithManager registers the controller, the AgentSession field indexes and the session
// index runnable.
func (r *PruningPolicyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := setupIndexes(mgr); err != nil {
		return err
	}
	r.policyEvents = make(chan event.TypedGenericEvent[*condensev1.PruningPolicy], 256)
	return ctrl.NewControllerManagedBy(mgr).
		For(&condensev1.PruningPolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&corev1.ConfigMap{}).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Owns(&autoscalingv2.HorizontalPodAutoscaler{}).
		Owns(&appsv1.StatefulSet{}).
		Owns(&networkingv1.NetworkPolicy{}).
		Watches(&condensev1.AgentSession{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			s := o.(*condensev1.AgentSession)
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: s.Namespace, Name: s.Spec.PolicyRef.Name}}}
		})).
		// Secrets as metadata only: an informer of whole Secrets would hold the data of every
		// Secret in the cluster (see ManagerOptions and secretcache.Reader).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.policiesForSecret), builder.OnlyMetadata).
		WatchesRawSource(source.Channel(r.policyEvents, &handler.TypedEnqueueRequestForObject[*condensev1.PruningPolicy]{})).
		Named("pruningpolicy").
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Complete(r)
}

// policiesForSecret maps a Secret to the policies that reference it.
func (r *PruningPolicyReconciler) policiesForSecret(ctx context.Context, o client.Object) []reconcile.Request {
	var out []reconcile.Request
	for _, p := range policiesWhere(ctx, r.Client, o.GetNamespace(), func(p *condensev1.PruningPolicy) bool {
		return slices.Contains(specs.ReferencedSecrets(p), o.GetName())
	}) {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(p)})
	}
	return out
}

// policiesWhere lists the policies of namespace ns for which keep is true (none when the
// listing fails: watch mappings have no error path, and the resync catches up).
func policiesWhere(ctx context.Context, c client.Reader, ns string, keep func(*condensev1.PruningPolicy) bool) []*condensev1.PruningPolicy {
	var list condensev1.PruningPolicyList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil
	}
	var out []*condensev1.PruningPolicy
	for i := range list.Items {
		if keep(&list.Items[i]) {
			out = append(out, &list.Items[i])
		}
	}
	return out
}

// EnqueuePolicy asks for a reconcile of the policy (used by the session index when store
// reachability changes). It never blocks; a full queue drops the request (the resync catches up).
func (r *PruningPolicyReconciler) EnqueuePolicy(key types.NamespacedName) {
	if r.policyEvents == nil {
		return
	}
	p := &condensev1.PruningPolicy{}
	p.Namespace, p.Name = key.Namespace, key.Name
	select {
	case r.policyEvents <- event.TypedGenericEvent[*condensev1.PruningPolicy]{Object: p}:
	default:
	}
}

var indexesDone = map[ctrl.Manager]bool{}

func setupIndexes(mgr ctrl.Manager) error {
	if indexesDone[mgr] {
		return nil
	}
	indexesDone[mgr] = true
	fi := mgr.GetFieldIndexer()
	ctx := context.Background()
	if err := fi.IndexField(ctx, &condensev1.AgentSession{}, indexPolicyRef, func(o client.Object) []string {
		return []string{o.(*condensev1.AgentSession).Spec.PolicyRef.Name}
	}); err != nil {
		return err
	}
	return fi.IndexField(ctx, &condensev1.AgentSession{}, indexPolicySession, func(o client.Object) []string {
		s := o.(*condensev1.AgentSession)
		return []string{policySessionKey(s.Spec.PolicyRef.Name, s.Spec.SessionID)}
	})
}

// policySessionKey is the value of the policy+session index. Long ids are hashed by the
// caller-independent specs.SessionObjectName suffix to keep index values short.
func policySessionKey(policy, session string) string {
	return policy + "/" + specs.SessionObjectName("", session)
}
