package controllers

import (
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	condensev1 "github.com/condense-dev/condense/api/v1alpha1"
	"github.com/condense-dev/condense/internal/specs"
)

// policyObservation is what one reconcile of a PruningPolicy found; a step that failed leaves
// the fields of the later ones zero.
type policyObservation struct {
	// now is when the reconcile started (condition transition times).
	now time.Time
	// configErr is why the policy builds no valid configuration (a user mistake).
	configErr error
	// configHash is the built configuration's hash.
	configHash string
	// childrenErr is why a child object could not be built, applied or deleted.
	childrenErr error
	// storeErr is why the store is not reachable: a *specError, or the store's own error.
	storeErr error
	// proxy is the live proxy Deployment (zero when there is none).
	proxy appsv1.Deployment
	// sessions are the AgentSessions naming the policy.
	sessions []condensev1.AgentSession
}

// built reports whether the configuration and every child was built (and applied).
func (o *policyObservation) built() bool { return o.configErr == nil && o.childrenErr == nil }

// computePolicyStatus is the status p should have after what o observed.
func computePolicyStatus(p *condensev1.PruningPolicy, o *policyObservation) *condensev1.PruningPolicyStatus {
	st := p.Status.DeepCopy()
	st.ObservedGeneration = p.Generation
	st.Endpoint = specs.ProxyEndpoint(p)
	set := func(t string, ok bool, reason, msg string) {
		setCondition(&st.Conditions, p.Generation, t, ok, reason, msg, o.now)
	}
	if o.configErr != nil {
		set(condensev1.ConditionReady, false, reasonInvalidSpec, invalidConfigMessage(o.configErr))
		return st
	}
	st.ConfigHash = o.configHash
	if o.childrenErr != nil {
		// Reported for this generation, then retried with backoff.
		set(condensev1.ConditionReady, false, reasonApplyFailed, o.childrenErr.Error())
		return st
	}
	var serr *specError
	switch {
	case errors.As(o.storeErr, &serr):
		set(condensev1.ConditionStoreReachable, false, serr.reason, serr.Error())
	case o.storeErr != nil:
		set(condensev1.ConditionStoreReachable, false, reasonStoreUnreachable, o.storeErr.Error())
	default:
		set(condensev1.ConditionStoreReachable, true, reasonStoreReachable, "listed sessions in the store")
	}
	d := &o.proxy
	st.Replicas, st.ReadyReplicas = d.Status.Replicas, d.Status.ReadyReplicas
	proxyOK := deploymentAvailable(d)
	if proxyOK {
		set(condensev1.ConditionProxyAvailable, true, reasonDeploymentReady,
			fmt.Sprintf("%d/%d proxy replicas ready", d.Status.ReadyReplicas, d.Status.Replicas))
	} else {
		set(condensev1.ConditionProxyAvailable, false, reasonDeploymentNotReady,
			fmt.Sprintf("proxy Deployment %s has %d/%d ready replicas", d.Name, d.Status.ReadyReplicas, d.Status.Replicas))
	}
	st.Sessions = int32(len(o.sessions))
	st.Diagnostics = condensev1.DiagnosticCounts{}
	for i := range o.sessions {
		s := o.sessions[i].Status.Diagnostics
		st.Diagnostics.Unresolved += s.Unresolved
		st.Diagnostics.Mismatch += s.Mismatch
		st.Diagnostics.Orphans += s.Orphans
		st.Diagnostics.BackfillEmpty += s.BackfillEmpty
	}
	switch {
	case proxyOK && o.storeErr == nil:
		set(condensev1.ConditionReady, true, reasonReconciled, "proxy available and store reachable")
	case o.storeErr != nil:
		set(condensev1.ConditionReady, false, reasonNotReady, "session store not reachable")
	default:
		set(condensev1.ConditionReady, false, reasonNotReady, "proxy not available yet")
	}
	return st
}

// deploymentAvailable reports whether d is Available at its current generation.
func deploymentAvailable(d *appsv1.Deployment) bool {
	available := false
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
			available = true
		}
	}
	return available && d.Status.ObservedGeneration >= d.Generation
}
