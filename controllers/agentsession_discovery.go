package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"

	condensev1 "github.com/condense-dev/condense/api/v1alpha1"
	"github.com/condense-dev/condense/internal/sessionindex"
	"github.com/condense-dev/condense/internal/specs"
	"github.com/condense-dev/condense/internal/store"
)

// notify is the sessionindex.Index callback: it queues the change for Start without blocking
// (a full queue drops it; the next resync catches up).
func (r *sessionReconciler) notify(ch sessionindex.Change) {
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
func (r *sessionReconciler) Start(ctx context.Context) error {
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

// handleChange enqueues the AgentSessions of the changed and removed sessions and discovers
// the changed ones that have none.
func (r *sessionReconciler) handleChange(ctx context.Context, ch sessionindex.Change) error {
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
		if matched == 0 && r.Discovery && slices.Contains(ch.Changed, id) {
			if err := r.discover(ctx, &p, id); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// discover creates the AgentSession of a session found in the store, owned by the policy.
func (r *sessionReconciler) discover(ctx context.Context, p *condensev1.PruningPolicy, id string) error {
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
	emitEvent(r.Recorder, p, corev1.EventTypeNormal, "SessionDiscovered", "Create",
		fmt.Sprintf("created AgentSession %s for session %q found in the store", s.Name, truncate(id, 80)))
	return nil
}

// truncate shortens s to n bytes of valid UTF-8 and an ellipsis.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
