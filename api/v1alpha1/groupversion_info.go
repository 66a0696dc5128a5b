// Package v1alpha1 holds the condense.dev/v1alpha1 API: PruningPolicy (a pruning proxy
// deployment and the policy it enforces) and AgentSession (one agent session seen by a proxy).
//
// +kubebuilder:object:generate=true
// +groupName=condense.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the API group and version of these types.
	GroupVersion = schema.GroupVersion{Group: "condense.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the types with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this group-version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
