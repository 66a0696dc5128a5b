// Package controllers holds the condense operator: the PruningPolicy controller (proxy,
// pruner and managed Redis children, status) and the AgentSession controller (status from the
// session store, finalizer, ttl, session tokens, discovery).
package controllers

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	pr := &PruningPolicyReconciler{
		Client:   mgr.GetClient(),
		Scheme:   mgr.GetScheme(),
		Recorder: mgr.GetEventRecorder("condense-operator"),
		Sessions: idx,
		Secrets:  secrets,
		Options:  specs.BuildOptions{Image: o.Image, OperatorNamespace: o.OperatorNamespace},
		Resync:   o.PolicyResync,
	}
	if err := pr.SetupWithManager(mgr); err != nil {
		return err
	}
	sr := &AgentSessionReconciler{
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
	idx.Notify = sr.Notify
	return sr.SetupWithManager(mgr, func(k types.NamespacedName) { pr.EnqueuePolicy(k) })
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
