package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	condensev1 "github.com/condense-dev/condense/api/v1alpha1"
	"github.com/condense-dev/condense/internal/secretcache"
	"github.com/condense-dev/condense/internal/specs"
)

// observe records in o whether the policy's store is reachable, its proxy Deployment and the
// AgentSessions naming it. err is an API error.
func (r *policyReconciler) observe(ctx context.Context, p *condensev1.PruningPolicy, o *policyObservation) error {
	url, err := storeURL(ctx, r.Secrets, p)
	var serr *specError
	switch {
	case errors.As(err, &serr):
		o.storeErr = serr
	case err != nil:
		return err
	default:
		o.storeErr = r.Sessions.Ensure(ctx, client.ObjectKeyFromObject(p), url)
	}
	if err := r.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: specs.ProxyName(p)}, &o.proxy); client.IgnoreNotFound(err) != nil {
		return err
	}
	var sessions condensev1.AgentSessionList
	if err := r.List(ctx, &sessions, client.InNamespace(p.Namespace), client.MatchingFields{indexPolicyRef: p.Name}); err != nil {
		return err
	}
	o.sessions = sessions.Items
	return nil
}

// storeURL resolves the store URL the operator uses for the policy. The error is a
// *specError for user mistakes (missing secret, wrong scheme).
func storeURL(ctx context.Context, secrets *secretcache.Reader, p *condensev1.PruningPolicy) (string, error) {
	ext := p.Spec.Redis.External
	if ext == nil {
		return specs.ManagedRedisURL(p), nil
	}
	v, err := secrets.Value(ctx, p.Namespace, ext.URLSecretRef)
	if err != nil {
		return "", &specError{reason: reasonSecretUnavailable, err: fmt.Errorf("redis.external.urlSecretRef: %w", err)}
	}
	url := strings.TrimSpace(string(v))
	if err := specs.CheckExternalURL(ext.Mode, url); err != nil {
		return "", &specError{reason: reasonInvalidSpec, err: err}
	}
	return url, nil
}

// specError is a problem the user has to fix: reconciling again will not help until an
// object changes. reason is the condition reason that reports it.
type specError struct {
	reason string
	err    error
}

// Error implements error.
func (e *specError) Error() string { return e.err.Error() }

// Unwrap returns the underlying error.
func (e *specError) Unwrap() error { return e.err }
