package controllers

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SecretReader reads the Secrets that policies reference (external Redis URL, summarizer key,
// session-auth secret) without an informer holding the data of every Secret in the cluster.
// The operator watches Secrets as metadata only (see ManagerOptions); the data of a referenced
// Secret is read from the API server and kept only while the cached metadata reports the
// same resourceVersion. It is safe for concurrent use.
type SecretReader struct {
	// Meta reads Secret metadata (metav1.PartialObjectMetadata) from the manager's cache; when
	// nil, every read goes to API.
	Meta client.Reader
	// API reads whole Secrets from the API server, uncached.
	API client.Reader

	mu   sync.Mutex
	data map[types.NamespacedName]versionedData
}

// versionedData is the data of one Secret at one resourceVersion.
type versionedData struct {
	version string
	data    map[string][]byte
}

// secretMetadata is the metadata-only form of a Secret, as the operator's informer caches it.
func secretMetadata() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	return m
}

// Value reads one key of a Secret in ns: from memory when the cached metadata still reports
// the resourceVersion it was read at, otherwise from the API server.
func (s *SecretReader) Value(ctx context.Context, ns string, sel corev1.SecretKeySelector) ([]byte, error) {
	key := types.NamespacedName{Namespace: ns, Name: sel.Name}
	data, err := s.secretData(ctx, key)
	if err != nil {
		return nil, err
	}
	v, ok := data[sel.Key]
	if !ok {
		return nil, fmt.Errorf("secret %s/%s has no key %q", ns, sel.Name, sel.Key)
	}
	return v, nil
}

// Lookup reads one key of a Secret in ns like Value, but a missing Secret or key is not an
// error: found is false.
func (s *SecretReader) Lookup(ctx context.Context, ns string, sel corev1.SecretKeySelector) (value []byte, found bool, err error) {
	data, err := s.secretData(ctx, types.NamespacedName{Namespace: ns, Name: sel.Name})
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	value, found = data[sel.Key]
	return value, found, nil
}

func (s *SecretReader) secretData(ctx context.Context, key types.NamespacedName) (map[string][]byte, error) {
	if s.Meta != nil {
		m := secretMetadata()
		err := s.Meta.Get(ctx, key, m)
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
		if err == nil {
			s.mu.Lock()
			d, ok := s.data[key]
			s.mu.Unlock()
			if ok && d.version == m.ResourceVersion {
				return d.data, nil
			}
		}
		// Changed, not read yet, or not in the cache yet (created a moment ago): ask the API server.
	}
	var sec corev1.Secret
	if err := s.API.Get(ctx, key, &sec); err != nil {
		if apierrors.IsNotFound(err) {
			s.mu.Lock()
			delete(s.data, key)
			s.mu.Unlock()
		}
		return nil, err
	}
	s.mu.Lock()
	if s.data == nil {
		s.data = map[types.NamespacedName]versionedData{}
	}
	s.data[key] = versionedData{version: sec.ResourceVersion, data: sec.Data}
	s.mu.Unlock()
	return sec.Data, nil
}

// ManagerOptions returns o with the settings the controllers rely on: Secrets are cached as
// metadata only (the controllers watch them with builder.OnlyMetadata), without annotations
// — where `kubectl apply` keeps a copy of the data — or managed fields, and the manager's
// client reads Secrets from the API server, never through an informer of whole Secrets.
func ManagerOptions(o ctrl.Options) ctrl.Options {
	byObject := make(map[client.Object]cache.ByObject, len(o.Cache.ByObject)+1)
	for k, v := range o.Cache.ByObject {
		byObject[k] = v
	}
	byObject[secretMetadata()] = cache.ByObject{Transform: stripSecretMetadata}
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
