package controllers

import (
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition reasons of PruningPolicy and AgentSession status.
const (
	// reasonReconciled: the policy is fully working.
	reasonReconciled = "Reconciled"
	// reasonInvalidSpec: the policy (or the URL in its Secret) cannot be used as written.
	reasonInvalidSpec = "InvalidSpec"
	// reasonSecretUnavailable: a Secret or key the policy references does not exist.
	reasonSecretUnavailable = "SecretUnavailable"
	// reasonStoreUnreachable: the session store could not be opened or listed.
	reasonStoreUnreachable = "StoreUnreachable"
	// reasonStoreReachable: the last listing of the session store succeeded.
	reasonStoreReachable = "StoreReachable"
	// reasonDeploymentReady: the proxy Deployment is Available.
	reasonDeploymentReady = "MinimumReplicasAvailable"
	// reasonDeploymentNotReady: the proxy Deployment is not Available (yet).
	reasonDeploymentNotReady = "MinimumReplicasUnavailable"
	// reasonApplyFailed: a child object could not be applied or deleted.
	reasonApplyFailed = "ApplyFailed"
	// reasonNotReady: Ready is False because another condition is False.
	reasonNotReady = "NotReady"
	// reasonPolicyNotFound: the AgentSession's PruningPolicy does not exist.
	reasonPolicyNotFound = "PolicyNotFound"
	// reasonSessionNotInStore: the store holds no state for the session.
	reasonSessionNotInStore = "SessionNotInStore"
	// reasonSessionObserved: the session's state was read from the store.
	reasonSessionObserved = "SessionObserved"
	// reasonDiagnostics: the session recorded diagnostics (Degraded is True).
	reasonDiagnostics = "DiagnosticsRecorded"
	// reasonNoDiagnostics: the session recorded no diagnostics (Degraded is False).
	reasonNoDiagnostics = "NoDiagnostics"
)

// setCondition sets condition t to True (ok) or False with the reason, message and the
// generation it was computed for; the transition time becomes now only when the status changes.
func setCondition(conds *[]metav1.Condition, gen int64, t string, ok bool, reason, msg string, now time.Time) {
	s := metav1.ConditionFalse
	if ok {
		s = metav1.ConditionTrue
	}
	apimeta.SetStatusCondition(conds, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg,
		ObservedGeneration: gen, LastTransitionTime: metav1.NewTime(now)})
}
