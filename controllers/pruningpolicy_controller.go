package controllers

import (
	"context"
	"errors"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
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
	"github.com/condense-dev/condense/internal/secretcache"
	"github.com/condense-dev/condense/internal/sessionindex"
	"github.com/condense-dev/condense/internal/specs"
)

// policyReconciler turns a PruningPolicy into a running proxy (the children specs.Children
// builds) and writes the policy's status.
type policyReconciler struct {
	// Client reads from the cache and writes to the API server.
	client.Client
	// Scheme knows the API types.
	Scheme *runtime.Scheme
	// Recorder emits events.
	Recorder eventRecorder
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

// Reconcile implements reconcile.Reconciler: fetch, build, apply, observe, computeStatus,
// writeStatus. A step that fails leaves the later ones out of the status.
func (r *policyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	p, err := r.fetch(ctx, req.NamespacedName)
	if p == nil {
		return ctrl.Result{}, err
	}
	o := policyObservation{now: time.Now()}
	children, err := r.build(ctx, p, &o)
	if err != nil {
		return ctrl.Result{}, err
	}
	if o.built() {
		o.childrenErr = r.apply(ctx, p, children)
	}
	if o.built() {
		if err := r.observe(ctx, p, &o); err != nil {
			return ctrl.Result{}, err
		}
	}
	status := computePolicyStatus(p, &o)
	_, werr := writeStatus(ctx, r.Client, r.Recorder, p, status, policyStatus)
	return r.finish(ctx, p, &o, status, werr)
}

// fetch reads the policy. It returns nil for a policy that is gone or being deleted, after
// closing its store (and, once it is gone, dropping its metrics).
func (r *policyReconciler) fetch(ctx context.Context, key types.NamespacedName) (*condensev1.PruningPolicy, error) {
	var p condensev1.PruningPolicy
	err := r.Get(ctx, key, &p)
	switch {
	case apierrors.IsNotFound(err):
		r.Sessions.Forget(key)
		forgetPolicyMetrics(key)
		return nil, nil
	case err != nil:
		return nil, err
	case !p.DeletionTimestamp.IsZero():
		r.Sessions.Forget(key)
		return nil, nil
	}
	return &p, nil
}

// finish turns the reconcile's outcome into its result; metrics follow a complete one only.
func (r *policyReconciler) finish(ctx context.Context, p *condensev1.PruningPolicy, o *policyObservation,
	status *condensev1.PruningPolicyStatus, werr error) (ctrl.Result, error) {
	switch {
	case o.configErr != nil && werr != nil:
		return ctrl.Result{}, werr
	case o.configErr != nil:
		// A user mistake: retrying cannot help until the policy changes.
		return ctrl.Result{}, reconcile.TerminalError(o.configErr)
	case o.childrenErr != nil:
		if werr != nil {
			log.FromContext(ctx).Error(werr, "writing status after a failed apply")
		}
		// Retried with backoff: a name conflict or an API error may clear up by itself.
		return ctrl.Result{}, o.childrenErr
	case werr != nil:
		return ctrl.Result{}, werr
	}
	log.FromContext(ctx).V(1).Info("reconciled", "ready", publishPolicyMetrics(p, status))
	var serr *specError
	if errors.As(o.storeErr, &serr) {
		// A missing Secret or a URL of the wrong kind: the Secret watch brings the policy back.
		return ctrl.Result{}, reconcile.TerminalError(serr)
	}
	if r.Resync <= 0 {
		return ctrl.Result{RequeueAfter: time.Minute}, nil
	}
	return ctrl.Result{RequeueAfter: r.Resync}, nil
}

// setupWithManager registers the controller and what it watches.
func (r *policyReconciler) setupWithManager(mgr ctrl.Manager) error {
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
func (r *policyReconciler) policiesForSecret(ctx context.Context, o client.Object) []reconcile.Request {
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

// enqueuePolicy asks for a reconcile of the policy without blocking; a full queue drops the
// request (the resync catches up).
func (r *policyReconciler) enqueuePolicy(key types.NamespacedName) {
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
