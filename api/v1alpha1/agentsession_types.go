package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AgentSessionFinalizer is the finalizer with which the operator deletes a session's state from
// the store before the AgentSession goes away.
const AgentSessionFinalizer = "condense.dev/session-state"

// Labels the operator puts on the objects it manages.
const (
	// LabelPolicy names the PruningPolicy an object belongs to.
	LabelPolicy = "condense.dev/policy"
	// LabelComponent is proxy, pruner, redis or session-token.
	LabelComponent = "condense.dev/component"
	// LabelAgent mirrors AgentSession spec.agent.
	LabelAgent = "condense.dev/agent"
	// LabelOwner mirrors AgentSession spec.owner.
	LabelOwner = "condense.dev/owner"
	// LabelDiscovered marks AgentSessions the operator created for sessions it found in the store.
	LabelDiscovered = "condense.dev/discovered"
)

// AgentSessionSpec identifies one agent session and how long it is kept.
type AgentSessionSpec struct {
	// PolicyRef names the PruningPolicy (same namespace) whose proxy serves the session. The
	// name must be a valid object name (a lowercase DNS-1123 subdomain) of 1 to 63 characters,
	// since the operator copies it to the label condense.dev/policy.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="policyRef is immutable"
	// +kubebuilder:validation:XValidation:rule="self.name.size() >= 1 && self.name.size() <= 63 && self.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="policyRef.name must name a PruningPolicy: 1 to 63 lowercase letters, digits, '-' and '.', starting and ending with a letter or digit"
	// +required
	PolicyRef corev1.LocalObjectReference `json:"policyRef"`

	// SessionID is the session id the proxy uses as the store key.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=16384
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="sessionID is immutable"
	// +required
	SessionID string `json:"sessionID"`

	// Agent names the coding agent (for example "claude-code"); the operator copies it to the
	// label condense.dev/agent, so it must be a valid label value.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
	// +optional
	Agent string `json:"agent,omitempty"`

	// Owner names the person or team the session belongs to; the operator copies it to the
	// label condense.dev/owner, so it must be a valid label value.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
	// +optional
	Owner string `json:"owner,omitempty"`

	// TTL deletes the AgentSession, and with it the session's stored state, once the session has
	// been idle this long. Unset keeps it until the store expires the session.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +optional
	TTL *metav1.Duration `json:"ttl,omitempty"`
}

// AgentSessionStatus is what the store knows about the session.
type AgentSessionStatus struct {
	// ObservedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions are Ready (the session's state was read from the store) and Degraded (the
	// session recorded diagnostics).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// LastSeen is the last time the proxy touched the session.
	// +optional
	LastSeen *metav1.Time `json:"lastSeen,omitempty"`

	// Active is true when the session was seen within the last 10 minutes.
	// +optional
	Active bool `json:"active"`

	// Version is the committed state version in the store.
	// +optional
	Version int64 `json:"version,omitempty"`

	// Requests counts requests the proxy served for the session.
	// +optional
	Requests int64 `json:"requests,omitempty"`

	// Records counts tool results indexed (summarized, deduplicated or spilled).
	// +optional
	Records int64 `json:"records,omitempty"`

	// Flushes counts summarization flushes.
	// +optional
	Flushes int64 `json:"flushes,omitempty"`

	// BytesBefore sums request body sizes before pruning.
	// +optional
	BytesBefore int64 `json:"bytesBefore,omitempty"`

	// BytesAfter sums request body sizes after pruning.
	// +optional
	BytesAfter int64 `json:"bytesAfter,omitempty"`

	// TokensBefore sums estimated input tokens before pruning.
	// +optional
	TokensBefore int64 `json:"tokensBefore,omitempty"`

	// TokensAfter sums estimated input tokens after pruning.
	// +optional
	TokensAfter int64 `json:"tokensAfter,omitempty"`

	// ReclaimPercent is the share of request bytes pruning removed, 0-100.
	// +optional
	ReclaimPercent int32 `json:"reclaimPercent"`

	// SummarizerCost is the summarizer spend in US dollars, e.g. "0.0123".
	// +optional
	SummarizerCost string `json:"summarizerCost,omitempty"`

	// Diagnostics counts the session's distinct diagnostics by kind.
	// +optional
	Diagnostics DiagnosticCounts `json:"diagnostics,omitempty"`

	// TokenSecretName names the Secret holding the session token (key "token") when the
	// policy has session auth on.
	// +optional
	TokenSecretName string `json:"tokenSecretName,omitempty"`
}

// AgentSession is one agent session served by a PruningPolicy's proxy, with its savings and
// diagnostics. Its name has at most 247 characters (checked on create), so that the name of
// its session-token Secret <name>-token stays valid.
// +kubebuilder:validation:XValidation:rule="oldSelf.hasValue() || self.metadata.name.size() <= 247",optionalOldSelf=true,message="metadata.name must have at most 247 characters: the session-token Secret is named <name>-token"
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ags;asess,categories=condense
// +kubebuilder:printcolumn:name="Policy",type=string,JSONPath=`.spec.policyRef.name`
// +kubebuilder:printcolumn:name="Active",type=boolean,JSONPath=`.status.active`
// +kubebuilder:printcolumn:name="Reclaim",type=integer,JSONPath=`.status.reclaimPercent`,description="percent of request bytes removed"
// +kubebuilder:printcolumn:name="U",type=integer,JSONPath=`.status.diagnostics.unresolved`,description="unresolved ranges"
// +kubebuilder:printcolumn:name="M",type=integer,JSONPath=`.status.diagnostics.mismatch`,description="range id mismatches"
// +kubebuilder:printcolumn:name="O",type=integer,JSONPath=`.status.diagnostics.orphans`,description="orphan sweeps"
// +kubebuilder:printcolumn:name="B",type=integer,JSONPath=`.status.diagnostics.backfillEmpty`,description="empty backfills"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type AgentSession struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec identifies the session.
	// +required
	Spec AgentSessionSpec `json:"spec"`
	// Status is what the store knows about it.
	// +optional
	Status AgentSessionStatus `json:"status,omitempty"`
}

// AgentSessionList is a list of AgentSessions.
// +kubebuilder:object:root=true
type AgentSessionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the sessions.
	// +required
	Items []AgentSession `json:"items"`
}

func init() {
	SchemeBuilder.Register(&AgentSession{}, &AgentSessionList{})
}
