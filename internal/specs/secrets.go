package specs

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	condensev1 "github.com/condense-dev/condense/api/v1alpha1"
)

// referencedSecretKeys returns the Secret keys the proxy and pruner pods read, sorted by
// Secret name and key, without duplicates.
func ReferencedSecretKeys(p *condensev1.PruningPolicy) []corev1.SecretKeySelector {
	var sels []corev1.SecretKeySelector
	s := &p.Spec
	if s.Redis.External != nil {
		sels = append(sels, s.Redis.External.URLSecretRef)
	}
	if s.SessionAuth != nil {
		sels = append(sels, s.SessionAuth.SecretRef)
	}
	if s.Summarizer.Credentials != nil {
		sels = append(sels, s.Summarizer.Credentials.SecretKeyRef)
	}
	slices.SortFunc(sels, compareSecretKeys)
	return slices.CompactFunc(sels, func(a, b corev1.SecretKeySelector) bool { return compareSecretKeys(a, b) == 0 })
}

// compareSecretKeys orders Secret key selectors by Secret name, then key.
func compareSecretKeys(a, b corev1.SecretKeySelector) int {
	return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.Key, b.Key))
}

// referencedSecrets returns the names of the Secrets the proxy and pruner pods read, sorted
// and without duplicates.
func ReferencedSecrets(p *condensev1.PruningPolicy) []string {
	var names []string
	for _, sel := range ReferencedSecretKeys(p) {
		names = append(names, sel.Name)
	}
	return slices.Compact(names)
}

// SecretKeyValue is one Secret key the proxy and pruner pods read, as the operator found it.
type SecretKeyValue struct {
	// Secret and Key name the key.
	Secret, Key string
	// Value is the key's data.
	Value []byte
	// Found is false when the Secret or the key does not exist.
	Found bool
}

// SecretsHash digests the Secret keys the pods read: 32 hex digits of the SHA-256 over each
// key's Secret name, key name and value (length-prefixed, in name order), "" for no keys.
// Only the data counts, so label or annotation edits leave it alone.
func SecretsHash(keys []SecretKeyValue) string {
	if len(keys) == 0 {
		return ""
	}
	keys = slices.Clone(keys)
	slices.SortFunc(keys, func(a, b SecretKeyValue) int {
		return cmp.Or(strings.Compare(a.Secret, b.Secret), strings.Compare(a.Key, b.Key))
	})
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%d:%s%d:%s", len(k.Secret), k.Secret, len(k.Key), k.Key)
		if k.Found {
			fmt.Fprintf(h, "+%d:", len(k.Value))
			h.Write(k.Value)
		} else {
			h.Write([]byte("-"))
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}
