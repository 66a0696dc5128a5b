package specs

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	condensev1 "github.com/condense-dev/condense/api/v1alpha1"
)

// BuildSessionTokenSecret builds the Secret holding an AgentSession's session token.
func BuildSessionTokenSecret(s *condensev1.AgentSession, token string) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      sessionTokenName(s),
			Namespace: s.Namespace,
			Labels: map[string]string{
				"app.kubernetes.io/managed-by": "condense-operator",
				condensev1.LabelPolicy:         s.Spec.PolicyRef.Name,
				condensev1.LabelComponent:      "session-token",
			},
		},
		Type:       corev1.SecretTypeOpaque,
		StringData: nil,
		Data:       map[string][]byte{"token": []byte(token), "sessionID": []byte(s.Spec.SessionID)},
	}
}

// SessionObjectName derives a stable AgentSession name for a session discovered in the store:
// the policy name, a readable prefix of the id and 10 hex digits of its SHA-256, all within
// 63 characters of lowercase DNS label.
func SessionObjectName(policy, sessionID string) string {
	sum := sha256.Sum256([]byte(sessionID))
	h := hex.EncodeToString(sum[:])[:10]
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(sessionID) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	readable := strings.Trim(b.String(), "-")
	prefix := policy
	if len(prefix) > 30 {
		prefix = strings.TrimRight(prefix[:30], "-")
	}
	room := 63 - len(prefix) - len(h) - 2
	if len(readable) > room {
		readable = strings.TrimRight(readable[:room], "-")
	}
	if readable == "" {
		return prefix + "-" + h
	}
	return prefix + "-" + readable + "-" + h
}

// BuildDiscoveredSession builds the AgentSession the operator creates for a session it found
// in the store.
func BuildDiscoveredSession(p *condensev1.PruningPolicy, sessionID string) *condensev1.AgentSession {
	return &condensev1.AgentSession{
		TypeMeta: metav1.TypeMeta{APIVersion: condensev1.GroupVersion.String(), Kind: "AgentSession"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      SessionObjectName(p.Name, sessionID),
			Namespace: p.Namespace,
			Labels: map[string]string{
				condensev1.LabelPolicy:     p.Name,
				condensev1.LabelDiscovered: "true",
			},
		},
		Spec: condensev1.AgentSessionSpec{
			PolicyRef: corev1.LocalObjectReference{Name: p.Name},
			SessionID: sessionID,
		},
	}
}
