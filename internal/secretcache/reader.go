// Package secretcache reads the data of the Secrets policies reference without an informer
// holding every Secret in the cluster: data is kept only while the cached metadata reports the
// resourceVersion it was read at.
package secretcache

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Reader reads Secret keys: from memory while Meta reports the resourceVersion they were read
// at, otherwise from API. It is safe for concurrent use.
type Reader struct {
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

// Metadata is an empty metadata-only Secret, the form in which Meta is expected to cache them.
func Metadata() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	return m
}

// Value reads one key of a Secret in ns: from memory when the cached metadata still reports
// the resourceVersion it was read at, otherwise from the API server.
func (s *Reader) Value(ctx context.Context, ns string, sel corev1.SecretKeySelector) ([]byte, error) {
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
func (s *Reader) Lookup(ctx context.Context, ns string, sel corev1.SecretKeySelector) (value []byte, found bool, err error) {
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

func (s *Reader) secretData(ctx context.Context, key types.NamespacedName) (map[string][]byte, error) {
	if s.Meta != nil {
		m := Metadata()
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
