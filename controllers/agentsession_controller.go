package controllers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
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
	"github.com/condense-dev/condense/internal/config"
	"github.com/condense-dev/condense/internal/secretcache"
	"github.com/condense-dev/condense/internal/sessionindex"
	"github.com/condense-dev/condense/internal/specs"
	"github.com/condense-dev/condense/internal/store"
)

// ActiveWindow is how recently a session must have been seen to count as active.
const ActiveWindow = 10 * time.Minute

// AnnotationPolicyUID records on an AgentSession the UID of the PruningPolicy it was last
// reconciled with. The finalizer deletes session state only from that policy's store, so a
// policy deleted and created again under the same name never loses state to the sessions of
// its predecessor. A discovered session's owner reference takes precedence over it.
const AnnotationPolicyUID = "condense.dev/policy-uid"

// Counter names the operator reads besides the store.Stat* ones.
const (
	// StatRecords counts indexed tool results.
	StatRecords = "records"
)

// Diagnostic kinds the engine records, mapped onto the u/m/o/b columns.
const (
	// DiagUnresolvedRange is counted in the U column.
	DiagUnresolvedRange = "unresolved-range"
	// DiagRangeIDMismatch is counted in the M column.
	DiagRangeIDMismatch = "range-id-mismatch"
	// DiagOrphanSweep is counted in the O column.
	DiagOrphanSweep = "orphan-sweep"
	// DiagBackfillEmpty is counted in the B column.
	DiagBackfillEmpty = "backfill-empty"
)

// AgentSessionReconciler keeps AgentSession status in step with the session store, deletes a
// session's stored state when its AgentSession is deleted (finalizer), deletes AgentSessions
// idle longer than their ttl, writes session token Secrets, and creates AgentSessions for
// sessions found in the store without one (discovery).
type AgentSessionReconciler struct {
	// Client reads from the cache and writes to the API server.
	client.Client
	// APIReader reads uncached (discovery double-checks before creating).
	APIReader client.Reader
	// Secrets reads the Secrets the policies reference.
	Secrets *secretcache.Reader
	// Scheme knows the API types.
	Scheme *runtime.Scheme
	// Recorder emits events.
	Recorder EventRecorder
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

func (r *AgentSessionReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Reconcile implements reconcile.Reconciler.
func (r *AgentSessionReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	var s condensev1.AgentSession
	if err := r.Get(ctx, req.NamespacedName, &s); err != nil {
		if apierrors.IsNotFound(err) {
			r.writesMu.Lock()
			delete(r.lastWrite, req.NamespacedName)
			r.writesMu.Unlock()
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	policyKey := types.NamespacedName{Namespace: s.Namespace, Name: s.Spec.PolicyRef.Name}
	var p condensev1.PruningPolicy
	perr := r.Get(ctx, policyKey, &p)
	if perr != nil && !apierrors.IsNotFound(perr) {
		return ctrl.Result{}, perr
	}
	// A session owned by a policy (discovered) belongs to that very object: a policy created
	// again under the same name is another policy, and the old session waits for the garbage
	// collector.
	ownerUID := policyOwnerUID(&s)
	policyFound := perr == nil && p.DeletionTimestamp.IsZero() && (ownerUID == "" || ownerUID == p.UID)

	if !s.DeletionTimestamp.IsZero() {
		recorded := ownerUID
		if recorded == "" {
			recorded = types.UID(s.Annotations[AnnotationPolicyUID])
		}
		return ctrl.Result{}, r.finalize(ctx, &s, &p, policyFound && (recorded == "" || recorded == p.UID))
	}
	wantLabels := sessionLabels(&s)
	recordUID := policyFound && s.Annotations[AnnotationPolicyUID] != string(p.UID)
	if !controllerutil.ContainsFinalizer(&s, condensev1.AgentSessionFinalizer) || wantLabels != nil || recordUID {
		patch := client.MergeFrom(s.DeepCopy())
		controllerutil.AddFinalizer(&s, condensev1.AgentSessionFinalizer)
		if wantLabels != nil {
			s.Labels = wantLabels
		}
		if recordUID {
			metav1.SetMetaDataAnnotation(&s.ObjectMeta, AnnotationPolicyUID, string(p.UID))
		}
		if err := r.Patch(ctx, &s, patch); err != nil {
			return ctrl.Result{}, err
		}
	}

	status := s.Status.DeepCopy()
	status.ObservedGeneration = s.Generation
	if !policyFound {
		msg := fmt.Sprintf("PruningPolicy %q not found in namespace %s", s.Spec.PolicyRef.Name, s.Namespace)
		if perr == nil && ownerUID != "" && ownerUID != p.UID {
			msg = fmt.Sprintf("the PruningPolicy %q that owns this session (uid %s) was deleted; the policy of that name now is another object", s.Spec.PolicyRef.Name, ownerUID)
		}
		setSessionCond(status, s.Generation, condensev1.ConditionReady, false, ReasonPolicyNotFound, msg)
		return ctrl.Result{}, r.writeStatus(ctx, &s, status)
	}

	// Session token Secret.
	if sa := p.Spec.SessionAuth; sa != nil {
		secret, err := r.Secrets.Value(ctx, p.Namespace, sa.SecretRef)
		if err != nil {
			setSessionCond(status, s.Generation, condensev1.ConditionReady, false, ReasonSecretUnavailable,
				"session auth secret: "+err.Error())
			return ctrl.Result{RequeueAfter: time.Minute}, r.writeStatus(ctx, &s, status)
		}
		tok := specs.BuildSessionTokenSecret(&s, config.SessionToken(secret, s.Spec.SessionID))
		if err := applyOwned(ctx, r.Client, r.Scheme, &s, tok); err != nil {
			return ctrl.Result{}, err
		}
		status.TokenSecretName = tok.Name
	} else if status.TokenSecretName != "" {
		old := &corev1.Secret{}
		old.Namespace, old.Name = s.Namespace, status.TokenSecretName
		if err := deleteIfExists(ctx, r.Client, old); err != nil {
			return ctrl.Result{}, err
		}
		status.TokenSecretName = ""
	}

	// Store view.
	info, found, lerr := r.Sessions.Lookup(policyKey, s.Spec.SessionID)
	if errors.Is(lerr, sessionindex.ErrNotWatched) {
		url, err := storeURL(ctx, r.Secrets, &p)
		if err == nil {
			err = r.Sessions.Ensure(ctx, policyKey, url)
		}
		if err == nil {
			info, found, lerr = r.Sessions.Lookup(policyKey, s.Spec.SessionID)
		} else {
			lerr = err
		}
	}
	now := r.now()
	var requeue time.Duration
	switch {
	case lerr != nil:
		setSessionCond(status, s.Generation, condensev1.ConditionReady, false, ReasonStoreUnreachable, lerr.Error())
		requeue = 30 * time.Second
	case !found:
		setSessionCond(status, s.Generation, condensev1.ConditionReady, false, ReasonSessionNotInStore,
			"the store holds no state for this session (not used yet, or expired)")
		status.Active = false
	default:
		fillStatus(status, info, now)
		setSessionCond(status, s.Generation, condensev1.ConditionReady, true, ReasonSessionObserved,
			fmt.Sprintf("state version %d in the store", info.Version))
		if status.Active {
			requeue = info.LastSeen.Add(ActiveWindow).Sub(now) + time.Second
		}
	}
	if total := status.Diagnostics.Total(); total > 0 {
		d := status.Diagnostics
		setSessionCond(status, s.Generation, condensev1.ConditionDegraded, true, ReasonDiagnostics,
			fmt.Sprintf("diagnostics recorded: unresolved=%d mismatch=%d orphans=%d backfillEmpty=%d", d.Unresolved, d.Mismatch, d.Orphans, d.BackfillEmpty))
	} else {
		setSessionCond(status, s.Generation, condensev1.ConditionDegraded, false, ReasonNoDiagnostics, "no diagnostics recorded")
	}

	// TTL expiry: idle since last seen (or since creation when never seen).
	if s.Spec.TTL != nil && s.Spec.TTL.Duration > 0 && lerr == nil {
		since := s.CreationTimestamp.Time
		if status.LastSeen != nil && status.LastSeen.After(since) {
			since = status.LastSeen.Time
		}
		expires := since.Add(s.Spec.TTL.Duration)
		if !now.Before(expires) {
			r.event(&s, corev1.EventTypeNormal, "Expired", "Delete",
				fmt.Sprintf("idle for more than ttl %s; deleting the session and its stored state", s.Spec.TTL.Duration))
			if err := r.Delete(ctx, &s); err != nil && !apierrors.IsNotFound(err) {
				return ctrl.Result{}, err
			}
			return ctrl.Result{}, nil
		}
		if d := expires.Sub(now) + time.Second; requeue == 0 || d < requeue {
			requeue = d
		}
	}
	key := client.ObjectKeyFromObject(&s)
	if wait := r.counterWriteDelay(key, &s.Status, status, now); wait > 0 {
		// Only counters moved and the status was written moments ago: write them later, so a
		// busy session costs the API server at most one write per StatusInterval.
		if requeue == 0 || wait < requeue {
			requeue = wait
		}
		return ctrl.Result{RequeueAfter: requeue}, nil
	}
	if err := r.writeStatus(ctx, &s, status); err != nil {
		return ctrl.Result{}, err
	}
	logger.V(1).Info("reconciled", "found", found)
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// counterWriteDelay returns how long to hold back a status write that changes only counters
// (requests, bytes, tokens, version, last seen, cost) because the previous write of this
// session was less than StatusInterval ago; 0 means write now. Condition, activity and
// diagnostic changes are never held back.
func (r *AgentSessionReconciler) counterWriteDelay(key types.NamespacedName, cur, next *condensev1.AgentSessionStatus, now time.Time) time.Duration {
	if r.StatusInterval <= 0 || equality.Semantic.DeepEqual(cur, next) || !onlyCountersDiffer(cur, next) {
		return 0
	}
	r.writesMu.Lock()
	last, ok := r.lastWrite[key]
	r.writesMu.Unlock()
	if !ok {
		return 0
	}
	if elapsed := now.Sub(last); elapsed < r.StatusInterval {
		return r.StatusInterval - elapsed
	}
	return 0
}

// onlyCountersDiffer reports whether a and b differ at most in counters and in condition
// messages and times (the Ready message quotes the state version).
func onlyCountersDiffer(a, b *condensev1.AgentSessionStatus) bool {
	norm := func(s *condensev1.AgentSessionStatus) *condensev1.AgentSessionStatus {
		c := s.DeepCopy()
		c.LastSeen, c.Version = nil, 0
		c.Requests, c.Records, c.Flushes = 0, 0, 0
		c.BytesBefore, c.BytesAfter, c.TokensBefore, c.TokensAfter = 0, 0, 0, 0
		c.ReclaimPercent, c.SummarizerCost = 0, ""
		for i := range c.Conditions {
			c.Conditions[i].Message, c.Conditions[i].LastTransitionTime = "", metav1.Time{}
		}
		return c
	}
	return equality.Semantic.DeepEqual(norm(a), norm(b))
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

// finalize deletes the session's state from the store and releases the finalizer. Without
// the policy the session belongs to (gone, or replaced by another object of the same name,
// or when the policy's store cannot be resolved because its secret is gone) there is no store
// to clean and the state is left to the store's idle expiry.
func (r *AgentSessionReconciler) finalize(ctx context.Context, s *condensev1.AgentSession, p *condensev1.PruningPolicy, policyFound bool) error {
	if !controllerutil.ContainsFinalizer(s, condensev1.AgentSessionFinalizer) {
		return nil
	}
	if policyFound {
		key := client.ObjectKeyFromObject(p)
		st := r.Sessions.Store(key)
		if st == nil {
			url, err := storeURL(ctx, r.Secrets, p)
			var serr *specError
			switch {
			case errors.As(err, &serr):
				st = nil
			case err != nil:
				return err
			default:
				if err := r.Sessions.Ensure(ctx, key, url); err != nil {
					return fmt.Errorf("delete session state: %w", err)
				}
				st = r.Sessions.Store(key)
			}
		}
		if st != nil {
			if err := st.Delete(ctx, s.Spec.SessionID); err != nil && !errors.Is(err, store.ErrInvalidSession) {
				r.event(s, corev1.EventTypeWarning, "DeleteFailed", "Delete", "deleting the session state from the store: "+err.Error())
				return fmt.Errorf("delete session state: %w", err)
			}
			metricSessionStateDeletions.WithLabelValues(p.Namespace, p.Name).Inc()
			r.event(s, corev1.EventTypeNormal, "StateDeleted", "Delete", "deleted the session's state from the store")
			r.Sessions.Relist(ctx, key)
		}
	}
	patch := client.MergeFrom(s.DeepCopy())
	controllerutil.RemoveFinalizer(s, condensev1.AgentSessionFinalizer)
	return client.IgnoreNotFound(r.Patch(ctx, s, patch))
}

// fillStatus copies a store listing into the status.
func fillStatus(st *condensev1.AgentSessionStatus, info store.SessionInfo, now time.Time) {
	if !info.LastSeen.IsZero() {
		t := metav1.NewTime(info.LastSeen.Truncate(time.Second))
		st.LastSeen = &t
	}
	st.Active = !info.LastSeen.IsZero() && now.Sub(info.LastSeen) < ActiveWindow
	st.Version = int64(info.Version)
	c := info.Stats
	st.Requests = c[store.StatRequests]
	st.Records = c[StatRecords]
	st.Flushes = c[store.StatFlushes]
	st.BytesBefore = c[store.StatBytesBefore]
	st.BytesAfter = c[store.StatBytesAfter]
	st.TokensBefore = c[store.StatTokensBefore]
	st.TokensAfter = c[store.StatTokensAfter]
	st.ReclaimPercent = reclaimPercent(st.BytesBefore, st.BytesAfter)
	st.SummarizerCost = formatCost(c[store.StatSummarizerCostMicros])
	d := info.DiagnosticCounts
	st.Diagnostics = condensev1.DiagnosticCounts{
		Unresolved:    d[DiagUnresolvedRange],
		Mismatch:      d[DiagRangeIDMismatch],
		Orphans:       d[DiagOrphanSweep],
		BackfillEmpty: d[DiagBackfillEmpty],
	}
}

// reclaimPercent is the share of bytes removed, rounded down, clamped to 0..100.
func reclaimPercent(before, after int64) int32 {
	if before <= 0 || after >= before {
		return 0
	}
	if after < 0 {
		after = 0
	}
	return int32((before - after) * 100 / before)
}

// formatCost renders micro-dollars as dollars with four decimals ("0.0123").
func formatCost(micros int64) string {
	if micros <= 0 {
		return ""
	}
	return fmt.Sprintf("%d.%04d", micros/1_000_000, (micros%1_000_000)/100)
}

func setSessionCond(status *condensev1.AgentSessionStatus, gen int64, t string, ok bool, reason, msg string) {
	setCondition(&status.Conditions, gen, t, ok, reason, msg)
}

func (r *AgentSessionReconciler) event(obj runtime.Object, typ, reason, action, note string) {
	emitEvent(r.Recorder, obj, typ, reason, action, note)
}

// writeStatus writes the status when it changed, retrying conflicts on a fresh copy, and emits
// events for Ready/Degraded transitions.
func (r *AgentSessionReconciler) writeStatus(ctx context.Context, s *condensev1.AgentSession, status *condensev1.AgentSessionStatus) error {
	if equality.Semantic.DeepEqual(&s.Status, status) {
		return nil
	}
	old := s.Status.DeepCopy()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cur condensev1.AgentSession
		if err := r.Get(ctx, client.ObjectKeyFromObject(s), &cur); err != nil {
			return err
		}
		cur.Status = *status.DeepCopy()
		if err := r.Status().Update(ctx, &cur); err != nil {
			return err
		}
		*s = cur
		return nil
	})
	if err != nil {
		return client.IgnoreNotFound(err)
	}
	r.writesMu.Lock()
	if r.lastWrite == nil {
		r.lastWrite = map[types.NamespacedName]time.Time{}
	}
	r.lastWrite[client.ObjectKeyFromObject(s)] = r.now()
	r.writesMu.Unlock()
	for _, c := range status.Conditions {
		prev := apimeta.FindStatusCondition(old.Conditions, c.Type)
		if prev != nil && prev.Status == c.Status && prev.Reason == c.Reason {
			continue
		}
		typ := corev1.EventTypeNormal
		if (c.Type == condensev1.ConditionReady) != (c.Status == metav1.ConditionTrue) {
			typ = corev1.EventTypeWarning
		}
		r.event(s, typ, c.Reason, "Status", fmt.Sprintf("%s=%s: %s", c.Type, c.Status, c.Message))
	}
	return nil
}

// Notify is the sessionindex.Index callback: it queues the change for the discovery loop. It never
// blocks; when the queue is full the change is dropped and the next resync catches up.
func (r *AgentSessionReconciler) Notify(ch sessionindex.Change) {
	if r.changes == nil {
		return
	}
	select {
	case r.changes <- ch:
	default:
	}
}

// Start consumes store changes (manager.Runnable): it enqueues the affected AgentSessions and,
// with Discovery on, creates AgentSessions for unknown sessions.
func (r *AgentSessionReconciler) Start(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case ch := <-r.changes:
			if err := r.handleChange(ctx, ch); err != nil {
				log.FromContext(ctx).Error(err, "handling session store changes", "policy", ch.Policy)
			}
		}
	}
}

func (r *AgentSessionReconciler) handleChange(ctx context.Context, ch sessionindex.Change) error {
	if ch.ReachabilityChanged && r.onPolicy != nil {
		r.onPolicy(ch.Policy)
	}
	ids := append(append([]string{}, ch.Changed...), ch.Removed...)
	if len(ids) == 0 {
		return nil
	}
	var p condensev1.PruningPolicy
	if err := r.Get(ctx, ch.Policy, &p); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !p.DeletionTimestamp.IsZero() {
		return nil
	}
	var errs []error
	for _, id := range ids {
		var list condensev1.AgentSessionList
		if err := r.List(ctx, &list, client.InNamespace(p.Namespace),
			client.MatchingFields{indexPolicySession: policySessionKey(p.Name, id)}); err != nil {
			errs = append(errs, err)
			continue
		}
		matched := 0
		for i := range list.Items {
			if list.Items[i].Spec.SessionID != id {
				continue
			}
			matched++
			select {
			case r.sessionEvents <- event.TypedGenericEvent[*condensev1.AgentSession]{Object: &list.Items[i]}:
			case <-ctx.Done():
				return nil
			}
		}
		if matched == 0 && r.Discovery && containsStr(ch.Changed, id) {
			if err := r.discover(ctx, &p, id); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// discover creates the AgentSession of a session found in the store, owned by the policy.
func (r *AgentSessionReconciler) discover(ctx context.Context, p *condensev1.PruningPolicy, id string) error {
	if err := store.ValidateSessionID(id); err != nil {
		return nil
	}
	s := specs.BuildDiscoveredSession(p, id)
	if err := controllerutil.SetOwnerReference(p, s, r.Scheme); err != nil {
		return err
	}
	// The cache may lag behind a session created a moment ago: check the API server.
	if r.APIReader != nil {
		var existing condensev1.AgentSession
		err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(s), &existing)
		if err == nil {
			return nil
		}
		if !apierrors.IsNotFound(err) {
			return err
		}
	}
	if err := r.Create(ctx, s); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return fmt.Errorf("discover session: %w", err)
	}
	metricSessionsDiscovered.WithLabelValues(p.Namespace, p.Name).Inc()
	r.event(p, corev1.EventTypeNormal, "SessionDiscovered", "Create",
		fmt.Sprintf("created AgentSession %s for session %q found in the store", s.Name, truncate(id, 80)))
	return nil
}

func containsStr(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// SetupWithManager registers the controller and its store-change runnable. onPolicy is called
// when a policy's store reachability changes (it should enqueue the policy).
func (r *AgentSessionReconciler) SetupWithManager(mgr ctrl.Manager, onPolicy func(types.NamespacedName)) error {
	if err := setupIndexes(mgr); err != nil {
		return err
	}
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
func (r *AgentSessionReconciler) sessionsForSecret(ctx context.Context, o client.Object) []reconcile.Request {
	var out []reconcile.Request
	for _, p := range policiesWhere(ctx, r.Client, o.GetNamespace(), func(p *condensev1.PruningPolicy) bool {
		return p.Spec.SessionAuth != nil && p.Spec.SessionAuth.SecretRef.Name == o.GetName()
	}) {
		out = append(out, r.sessionsForPolicy(ctx, p)...)
	}
	return out
}

func (r *AgentSessionReconciler) sessionsForPolicy(ctx context.Context, o client.Object) []reconcile.Request {
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
