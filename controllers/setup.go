// Package controllers runs the condense operator: the PruningPolicy controller (its children
// and status) and the AgentSession controller (status from the session store, finalizer, ttl,
// session tokens, discovery). Setup registers both with a manager.
package controllers

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	condensev1 "github.com/condense-dev/condense/api/v1alpha1"
	"github.com/condense-dev/condense/internal/secretcache"
	"github.com/condense-dev/condense/internal/sessionindex"
	"github.com/condense-dev/condense/internal/specs"
)

// Options configure Setup.
type Options struct {
	// Image is the condense image for proxy and pruner pods when a policy names none.
	Image string
	// OperatorNamespace is the namespace the operator's pods run in (admitted by the managed
	// Redis's NetworkPolicy); empty when the operator runs outside the cluster.
	OperatorNamespace string
	// OpenStore opens session stores (sessionindex.OpenRedis when nil).
	OpenStore sessionindex.Opener
	// Discovery creates AgentSessions for sessions found in a store without one.
	Discovery bool
	// StoreMinInterval rate-limits store listings triggered by change notifications (default 1s).
	StoreMinInterval time.Duration
	// StoreResync lists every store at least this often (default 30s).
	StoreResync time.Duration
	// PolicyResync re-checks every policy at least this often (default 60s).
	PolicyResync time.Duration
	// Now is the clock used for ttl and activity (time.Now when nil).
	Now func() time.Time
	// SessionStatusInterval is the least time between two AgentSession status writes that
	// change only counters (0 writes every change).
	SessionStatusInterval time.Duration
}

// Setup registers both controllers, the field indexes and the session index with mgr, which
// should have been created with ManagerOptions.
func Setup(mgr ctrl.Manager, o Options) error {
	if err := setupIndexes(mgr); err != nil {
		return err
	}
	idx := &sessionindex.Index{
		Open:        o.OpenStore,
		MinInterval: o.StoreMinInterval,
		Resync:      o.StoreResync,
		Log:         ctrl.Log.WithName("session-index"),
	}
	if err := mgr.Add(idx); err != nil {
		return err
	}
	secrets := &secretcache.Reader{Meta: mgr.GetCache(), API: mgr.GetAPIReader()}
	pr := &policyReconciler{
		Client:   mgr.GetClient(),
		Scheme:   mgr.GetScheme(),
		Recorder: mgr.GetEventRecorder("condense-operator"),
		Sessions: idx,
		Secrets:  secrets,
		Options:  specs.BuildOptions{Image: o.Image, OperatorNamespace: o.OperatorNamespace},
		Resync:   o.PolicyResync,
	}
	if err := pr.setupWithManager(mgr); err != nil {
		return err
	}
	sr := &sessionReconciler{
		Client:         mgr.GetClient(),
		APIReader:      mgr.GetAPIReader(),
		Secrets:        secrets,
		Scheme:         mgr.GetScheme(),
		Recorder:       mgr.GetEventRecorder("condense-operator"),
		Sessions:       idx,
		Discovery:      o.Discovery,
		Now:            o.Now,
		StatusInterval: o.SessionStatusInterval,
	}
	idx.Notify = sr.notify
	return sr.setupWithManager(mgr, pr.enqueuePolicy)
}

// ManagerOptions returns o with what the controllers rely on: Secrets cached as metadata only,
// without annotations or managed fields, and the manager's client reading whole Secrets from
// the API server, never through an informer.
func ManagerOptions(o ctrl.Options) ctrl.Options {
	byObject := make(map[client.Object]cache.ByObject, len(o.Cache.ByObject)+1)
	for k, v := range o.Cache.ByObject {
		byObject[k] = v
	}
	byObject[secretcache.Metadata()] = cache.ByObject{Transform: stripSecretMetadata}
	o.Cache.ByObject = byObject
	cacheOpts := client.CacheOptions{}
	if o.Client.Cache != nil {
		cacheOpts = *o.Client.Cache
	}
	cacheOpts.DisableFor = append(append([]client.Object{}, cacheOpts.DisableFor...), &corev1.Secret{})
	o.Client.Cache = &cacheOpts
	return o
}

// stripSecretMetadata drops what the operator never reads from cached Secret metadata:
// annotations and managed fields.
func stripSecretMetadata(in any) (any, error) {
	if m, ok := in.(metav1.Object); ok {
		m.SetManagedFields(nil)
		m.SetAnnotations(nil)
	}
	return in, nil
}

// Field indexes of AgentSessions.
const (
	// indexPolicyRef indexes AgentSessions by spec.policyRef.name.
	indexPolicyRef = "spec.policyRef.name"
	// indexPolicySession indexes AgentSessions by policySessionKey.
	indexPolicySession = "spec.policySession"
)

// setupIndexes registers the AgentSession field indexes both controllers list by.
func setupIndexes(mgr ctrl.Manager) error {
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

// policySessionKey is the policy+session index value: the policy name and the session's
// hashed object-name suffix, which keeps long ids short.
func policySessionKey(policy, session string) string {
	return policy + "/" + specs.SessionObjectName("", session)
}
