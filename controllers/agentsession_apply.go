package controllers

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	condensev1 "github.com/condense-dev/condense/api/v1alpha1"
	"github.com/condense-dev/condense/internal/config"
	"github.com/condense-dev/condense/internal/specs"
	"github.com/condense-dev/condense/internal/store"
)

// applyToken writes the session token Secret when o.policy has session auth on, and deletes
// the one the status names when it is off. An unreadable session-auth secret is recorded in
// o.tokenErr; err is an API error.
func (r *sessionReconciler) applyToken(ctx context.Context, s *condensev1.AgentSession, o *sessionObservation) error {
	sa := o.policy.Spec.SessionAuth
	if sa == nil {
		if s.Status.TokenSecretName != "" {
			old := &corev1.Secret{}
			old.Namespace, old.Name = s.Namespace, s.Status.TokenSecretName
			if err := deleteIfExists(ctx, r.Client, old); err != nil {
				return err
			}
		}
		o.tokenSecret = ""
		return nil
	}
	secret, err := r.Secrets.Value(ctx, o.policy.Namespace, sa.SecretRef)
	if err != nil {
		o.tokenErr = err
		return nil
	}
	tok := specs.BuildSessionTokenSecret(s, config.SessionToken(secret, s.Spec.SessionID))
	if err := applyOwned(ctx, r.Client, r.Scheme, s, tok); err != nil {
		return err
	}
	o.tokenSecret = tok.Name
	return nil
}

// finalize deletes the session's state from the store of p and releases the finalizer. With
// p nil (the policy is gone or another object), or a policy whose store cannot be resolved for
// a user mistake, the state is left to the store's idle expiry.
func (r *sessionReconciler) finalize(ctx context.Context, s *condensev1.AgentSession, p *condensev1.PruningPolicy) error {
	if !controllerutil.ContainsFinalizer(s, condensev1.AgentSessionFinalizer) {
		return nil
	}
	if p != nil {
		if err := r.deleteState(ctx, s, p); err != nil {
			return err
		}
	}
	patch := client.MergeFrom(s.DeepCopy())
	controllerutil.RemoveFinalizer(s, condensev1.AgentSessionFinalizer)
	return client.IgnoreNotFound(r.Patch(ctx, s, patch))
}

// deleteState deletes the session's state from the store of p, opening it if needed.
func (r *sessionReconciler) deleteState(ctx context.Context, s *condensev1.AgentSession, p *condensev1.PruningPolicy) error {
	key := client.ObjectKeyFromObject(p)
	st := r.Sessions.Store(key)
	if st == nil {
		url, err := storeURL(ctx, r.Secrets, p)
		var serr *specError
		switch {
		case errors.As(err, &serr):
			return nil
		case err != nil:
			return err
		}
		if err := r.Sessions.Ensure(ctx, key, url); err != nil {
			return fmt.Errorf("delete session state: %w", err)
		}
		if st = r.Sessions.Store(key); st == nil {
			return nil
		}
	}
	if err := st.Delete(ctx, s.Spec.SessionID); err != nil && !errors.Is(err, store.ErrInvalidSession) {
		emitEvent(r.Recorder, s, corev1.EventTypeWarning, "DeleteFailed", "Delete", "deleting the session state from the store: "+err.Error())
		return fmt.Errorf("delete session state: %w", err)
	}
	metricSessionStateDeletions.WithLabelValues(p.Namespace, p.Name).Inc()
	emitEvent(r.Recorder, s, corev1.EventTypeNormal, "StateDeleted", "Delete", "deleted the session's state from the store")
	r.Sessions.Relist(ctx, key)
	return nil
}

// expire deletes a session idle longer than its ttl (the finalizer then deletes its state).
func (r *sessionReconciler) expire(ctx context.Context, s *condensev1.AgentSession) error {
	emitEvent(r.Recorder, s, corev1.EventTypeNormal, "Expired", "Delete",
		fmt.Sprintf("idle for more than ttl %s; deleting the session and its stored state", s.Spec.TTL.Duration))
	if err := r.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}
