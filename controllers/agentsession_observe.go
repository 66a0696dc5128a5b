package controllers

import (
	"context"
	"errors"

	"sigs.k8s.io/controller-runtime/pkg/client"

	condensev1 "github.com/condense-dev/condense/api/v1alpha1"
	"github.com/condense-dev/condense/internal/sessionindex"
)

// observe records the store's listing of the session in o, opening the policy's store first
// when the index does not watch it yet.
func (r *sessionReconciler) observe(ctx context.Context, s *condensev1.AgentSession, o *sessionObservation) {
	key := client.ObjectKeyFromObject(o.policy)
	o.info, o.found, o.lookupErr = r.Sessions.Lookup(key, s.Spec.SessionID)
	if !errors.Is(o.lookupErr, sessionindex.ErrNotWatched) {
		return
	}
	url, err := storeURL(ctx, r.Secrets, o.policy)
	if err == nil {
		err = r.Sessions.Ensure(ctx, key, url)
	}
	if err != nil {
		o.lookupErr = err
		return
	}
	o.info, o.found, o.lookupErr = r.Sessions.Lookup(key, s.Spec.SessionID)
}
