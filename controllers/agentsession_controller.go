package controllers

import (
	"context"
	"maps"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	condensev1 "github.com/condense-dev/condense/api/v1alpha1"
	"github.com/condense-dev/condense/internal/secretcache"
	"github.com/condense-dev/condense/internal/sessionindex"
)

// annotationPolicyUID records on an AgentSession the UID of the PruningPolicy it was last
// reconciled with; the finalizer deletes state only from that policy's store.
const annotationPolicyUID = "condense.dev/policy-uid"

// sessionReconciler keeps AgentSession status in step with the session store, deletes a
// session's state with its AgentSession (finalizer) or after its ttl, writes session token
// Secrets, and creates AgentSessions for sessions found in a store (discovery).
type sessionReconciler struct {
	// Client reads from the cache and writes to the API server.
	client.Client
	// APIReader reads uncached (discovery double-checks before creating).
	APIReader client.Reader
	// Secrets reads the Secrets the policies reference.
	Secrets *secretcache.Reader
	// Scheme knows the API types.
	Scheme *runtime.Scheme
	// Recorder emits events.
	Recorder eventRecorder
	// Sessions holds the open session stores.
	Sessions *sessionindex.Index
	// Discovery creates AgentSessions for unknown sessions in a policy's store.
	Discovery bool
	// Now returns the current time (time.Now when nil).
	Now func() time.Time
	// StatusInterval is the least time between two status writes of one session that change
	// only counters (0 writes every change).
	StatusInterval time.Duration

	writesMu  sync.Mutex
	lastWrite map[types.NamespacedName]time.Time

	sessionEvents chan event.TypedGenericEvent[*condensev1.AgentSession]
	changes       chan sessionindex.Change
	onPolicy      func(types.NamespacedName)
}

// +kubebuilder:rbac:groups=condense.dev,resources=agentsessions,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=condense.dev,resources=agentsessions/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=condense.dev,resources=agentsessions/finalizers,verbs=update

func (r *sessionReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Reconcile implements reconcile.Reconciler: fetch, finalize or apply (metadata, token),
// observe the store, computeStatus, then expire, hold back or writeStatus.
func (r *sessionReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	s, o, err := r.fetch(ctx, req.NamespacedName)
	if s == nil || err != nil {
		return ctrl.Result{}, err
	}
	if !s.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, s, o.statePolicy(s))
	}
	if err := r.applyMetadata(ctx, s, o.policy); err != nil {
		return ctrl.Result{}, err
	}
	if o.policy != nil {
		if err := r.applyToken(ctx, s, &o); err != nil {
			return ctrl.Result{}, err
		}
	}
	if o.policy != nil && o.tokenErr == nil {
		r.observe(ctx, s, &o)
	}
	now := r.now()
	next := computeSessionStatus(s, &o, now)
	if next.expired {
		return ctrl.Result{}, r.expire(ctx, s)
	}
	if wait := r.counterWriteDelay(req.NamespacedName, &s.Status, next.status, now); next.complete && wait > 0 {
		// Only counters moved since a write moments ago: write them at most once per StatusInterval.
		return ctrl.Result{RequeueAfter: sooner(next.requeue, wait)}, nil
	}
	written, err := writeStatus(ctx, r.Client, r.Recorder, s, next.status, sessionStatus)
	if written {
		r.rememberWrite(req.NamespacedName)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	log.FromContext(ctx).V(1).Info("reconciled", "found", o.found)
	return ctrl.Result{RequeueAfter: next.requeue}, nil
}

// fetch reads the session and its policy. The session is nil when it is gone (its write time
// is then forgotten); err is an API error.
func (r *sessionReconciler) fetch(ctx context.Context, key types.NamespacedName) (*condensev1.AgentSession, sessionObservation, error) {
	var s condensev1.AgentSession
	if err := r.Get(ctx, key, &s); err != nil {
		if apierrors.IsNotFound(err) {
			r.forgetWrite(key)
		}
		return nil, sessionObservation{}, client.IgnoreNotFound(err)
	}
	var p condensev1.PruningPolicy
	err := r.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: s.Spec.PolicyRef.Name}, &p)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, sessionObservation{}, err
	}
	// A session owned by a policy (discovered) belongs to that very object: a policy created
	// again under the same name is another policy, and the old session waits for the garbage
	// collector.
	o := sessionObservation{ownerUID: policyOwnerUID(&s)}
	o.replaced = err == nil && o.ownerUID != "" && o.ownerUID != p.UID
	if err == nil && p.DeletionTimestamp.IsZero() && !o.replaced {
		o.policy = &p
	}
	return &s, o, nil
}

// applyMetadata patches the finalizer, the labels mirrored from the spec and the recorded
// policy UID onto the session when any of them is missing.
func (r *sessionReconciler) applyMetadata(ctx context.Context, s *condensev1.AgentSession, p *condensev1.PruningPolicy) error {
	wantLabels := sessionLabels(s)
	recordUID := p != nil && s.Annotations[annotationPolicyUID] != string(p.UID)
	if controllerutil.ContainsFinalizer(s, condensev1.AgentSessionFinalizer) && wantLabels == nil && !recordUID {
		return nil
	}
	patch := client.MergeFrom(s.DeepCopy())
	controllerutil.AddFinalizer(s, condensev1.AgentSessionFinalizer)
	if wantLabels != nil {
		s.Labels = wantLabels
	}
	if recordUID {
		metav1.SetMetaDataAnnotation(&s.ObjectMeta, annotationPolicyUID, string(p.UID))
	}
	return r.Patch(ctx, s, patch)
}

// sessionLabels returns the labels the session should carry (policy, agent, owner mirrored
// from the spec), or nil when they are already in place.
func sessionLabels(s *condensev1.AgentSession) map[string]string {
	want := map[string]string{
		condensev1.LabelPolicy: s.Spec.PolicyRef.Name,
		condensev1.LabelAgent:  s.Spec.Agent,
		condensev1.LabelOwner:  s.Spec.Owner,
	}
	labels := maps.Clone(s.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	changed := false
	for k, v := range want {
		cur, ok := labels[k]
		switch {
		case v == "" && ok:
			delete(labels, k)
			changed = true
		case v != "" && cur != v:
			labels[k] = v
			changed = true
		}
	}
	if !changed {
		return nil
	}
	return labels
}

// policyOwnerUID returns the UID of the PruningPolicy named by the session's policyRef that
// owns the session (a discovered session), or "" when no such owner reference exists.
func policyOwnerUID(s *condensev1.AgentSession) types.UID {
	for _, ref := range s.OwnerReferences {
		if ref.Kind == "PruningPolicy" && ref.Name == s.Spec.PolicyRef.Name && strings.HasPrefix(ref.APIVersion, condensev1.GroupVersion.Group+"/") {
			return ref.UID
		}
	}
	return ""
}

// rememberWrite records that the session's status was written now.
func (r *sessionReconciler) rememberWrite(key types.NamespacedName) {
	r.writesMu.Lock()
	defer r.writesMu.Unlock()
	if r.lastWrite == nil {
		r.lastWrite = map[types.NamespacedName]time.Time{}
	}
	r.lastWrite[key] = r.now()
}

// forgetWrite drops the write time of a session that is gone.
func (r *sessionReconciler) forgetWrite(key types.NamespacedName) {
	r.writesMu.Lock()
	defer r.writesMu.Unlock()
	delete(r.lastWrite, key)
}

// setupWithManager registers the controller and its store-change runnable. onPolicy is
// called when a policy's store reachability changes (it should enqueue the policy).
func (r *sessionReconciler) setupWithManager(mgr ctrl.Manager, onPolicy func(types.NamespacedName)) error {
	r.sessionEvents = make(chan event.TypedGenericEvent[*condensev1.AgentSession], 1024)
	r.changes = make(chan sessionindex.Change, 256)
	r.onPolicy = onPolicy
	if err := mgr.Add(r); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&condensev1.AgentSession{}).
		Owns(&corev1.Secret{}, builder.OnlyMetadata).
		// A rotated session-auth secret re-issues every token of the policies using it.
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.sessionsForSecret), builder.OnlyMetadata).
		Watches(&condensev1.PruningPolicy{}, handler.EnqueueRequestsFromMapFunc(r.sessionsForPolicy),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesRawSource(source.Channel(r.sessionEvents, &handler.TypedEnqueueRequestForObject[*condensev1.AgentSession]{})).
		Named("agentsession").
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Complete(r)
}

// sessionsForSecret maps a Secret to the sessions of the policies whose session-auth secret it is.
func (r *sessionReconciler) sessionsForSecret(ctx context.Context, o client.Object) []reconcile.Request {
	var out []reconcile.Request
	for _, p := range policiesWhere(ctx, r.Client, o.GetNamespace(), func(p *condensev1.PruningPolicy) bool {
		return p.Spec.SessionAuth != nil && p.Spec.SessionAuth.SecretRef.Name == o.GetName()
	}) {
		out = append(out, r.sessionsForPolicy(ctx, p)...)
	}
	return out
}

// sessionsForPolicy maps a policy to the sessions naming it.
func (r *sessionReconciler) sessionsForPolicy(ctx context.Context, o client.Object) []reconcile.Request {
	var list condensev1.AgentSessionList
	if err := r.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{indexPolicyRef: o.GetName()}); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return out
}
