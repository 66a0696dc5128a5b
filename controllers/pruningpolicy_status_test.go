package controllers

import (
	"errors"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	condensev1 "github.com/condense-dev/condense/api/v1alpha1"
)

// wantCond is a condition a status must hold: status and reason, and the message when set.
type wantCond struct {
	typ    string
	status metav1.ConditionStatus
	reason string
	msg    string
}

func checkConds(t *testing.T, conds []metav1.Condition, gen int64, want ...wantCond) {
	t.Helper()
	for _, w := range want {
		c := apimeta.FindStatusCondition(conds, w.typ)
		switch {
		case c == nil:
			t.Errorf("%s missing in %+v", w.typ, conds)
		case c.Status != w.status || c.Reason != w.reason || (w.msg != "" && c.Message != w.msg) || c.ObservedGeneration != gen:
			t.Errorf("%s = %s %s %q (generation %d), want %s %s %q (generation %d)",
				w.typ, c.Status, c.Reason, c.Message, c.ObservedGeneration, w.status, w.reason, w.msg, gen)
		}
	}
}

// availableProxy is a proxy Deployment the deployment controller reports Available.
func availableProxy(gen, observed int64) appsv1.Deployment {
	d := appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "team-proxy", Generation: gen}}
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: observed, Replicas: 2, ReadyReplicas: 2,
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}}
	return d
}

func TestComputePolicyStatus(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	earlier := metav1.NewTime(now.Add(-time.Hour))
	prior := condensev1.PruningPolicyStatus{ConfigHash: "old", Conditions: []metav1.Condition{
		{Type: condensev1.ConditionStoreReachable, Status: metav1.ConditionTrue, Reason: reasonStoreReachable, LastTransitionTime: earlier, ObservedGeneration: 2},
	}}
	sessions := []condensev1.AgentSession{
		{Status: condensev1.AgentSessionStatus{Diagnostics: condensev1.DiagnosticCounts{Unresolved: 1, Orphans: 2}}},
		{Status: condensev1.AgentSessionStatus{Diagnostics: condensev1.DiagnosticCounts{Unresolved: 3, Mismatch: 4, BackfillEmpty: 5}}},
	}
	cases := []struct {
		name  string
		obs   policyObservation
		conds []wantCond
		check func(t *testing.T, st *condensev1.PruningPolicyStatus)
	}{
		{name: "invalid configuration keeps the last hash and the other conditions",
			obs: policyObservation{configErr: errors.New("engine.protectedTools[0]: empty")},
			conds: []wantCond{{condensev1.ConditionReady, metav1.ConditionFalse, reasonInvalidSpec,
				"the policy renders an invalid proxy configuration: engine.protectedTools[0]: empty"}},
			check: func(t *testing.T, st *condensev1.PruningPolicyStatus) {
				if st.ConfigHash != "old" || len(st.Conditions) != 2 {
					t.Errorf("hash %q, conditions %+v", st.ConfigHash, st.Conditions)
				}
				if c := apimeta.FindStatusCondition(st.Conditions, condensev1.ConditionStoreReachable); c.ObservedGeneration != 2 {
					t.Errorf("an unobserved condition must be left as it was: %+v", c)
				}
			}},
		{name: "a child that cannot be applied",
			obs:   policyObservation{configHash: "new", childrenErr: errors.New("apply *v1.Service clash-proxy: taken")},
			conds: []wantCond{{condensev1.ConditionReady, metav1.ConditionFalse, reasonApplyFailed, "apply *v1.Service clash-proxy: taken"}},
			check: func(t *testing.T, st *condensev1.PruningPolicyStatus) {
				if st.ConfigHash != "new" || st.Sessions != 0 {
					t.Errorf("hash %q sessions %d", st.ConfigHash, st.Sessions)
				}
			}},
		{name: "the URL secret is missing",
			obs: policyObservation{configHash: "new", storeErr: &specError{reason: reasonSecretUnavailable, err: errors.New("no secret")},
				proxy: availableProxy(1, 1)},
			conds: []wantCond{
				{condensev1.ConditionStoreReachable, metav1.ConditionFalse, reasonSecretUnavailable, "no secret"},
				{condensev1.ConditionProxyAvailable, metav1.ConditionTrue, reasonDeploymentReady, "2/2 proxy replicas ready"},
				{condensev1.ConditionReady, metav1.ConditionFalse, reasonNotReady, "session store not reachable"},
			}},
		{name: "the store is down",
			obs: policyObservation{configHash: "new", storeErr: errors.New("dial tcp: refused"), proxy: availableProxy(1, 1)},
			conds: []wantCond{
				{condensev1.ConditionStoreReachable, metav1.ConditionFalse, reasonStoreUnreachable, "dial tcp: refused"},
				{condensev1.ConditionReady, metav1.ConditionFalse, reasonNotReady, "session store not reachable"},
			}},
		{name: "no proxy Deployment yet",
			obs: policyObservation{configHash: "new"},
			conds: []wantCond{
				{condensev1.ConditionStoreReachable, metav1.ConditionTrue, reasonStoreReachable, "listed sessions in the store"},
				{condensev1.ConditionProxyAvailable, metav1.ConditionFalse, reasonDeploymentNotReady, "proxy Deployment  has 0/0 ready replicas"},
				{condensev1.ConditionReady, metav1.ConditionFalse, reasonNotReady, "proxy not available yet"},
			}},
		{name: "a proxy rollout not observed yet is not available",
			obs: policyObservation{configHash: "new", proxy: availableProxy(3, 2)},
			conds: []wantCond{{condensev1.ConditionProxyAvailable, metav1.ConditionFalse, reasonDeploymentNotReady,
				"proxy Deployment team-proxy has 2/2 ready replicas"}}},
		{name: "working: replicas, sessions and their diagnostics summed",
			obs: policyObservation{configHash: "new", proxy: availableProxy(1, 1), sessions: sessions},
			conds: []wantCond{
				{condensev1.ConditionProxyAvailable, metav1.ConditionTrue, reasonDeploymentReady, "2/2 proxy replicas ready"},
				{condensev1.ConditionReady, metav1.ConditionTrue, reasonReconciled, "proxy available and store reachable"},
			},
			check: func(t *testing.T, st *condensev1.PruningPolicyStatus) {
				want := condensev1.DiagnosticCounts{Unresolved: 4, Mismatch: 4, Orphans: 2, BackfillEmpty: 5}
				if st.Replicas != 2 || st.ReadyReplicas != 2 || st.Sessions != 2 || st.Diagnostics != want || st.ConfigHash != "new" {
					t.Errorf("status %+v", st)
				}
				if c := apimeta.FindStatusCondition(st.Conditions, condensev1.ConditionStoreReachable); !c.LastTransitionTime.Equal(&earlier) {
					t.Errorf("an unchanged condition keeps its transition time: %s", c.LastTransitionTime)
				}
				if c := apimeta.FindStatusCondition(st.Conditions, condensev1.ConditionReady); !c.LastTransitionTime.Time.Equal(now) {
					t.Errorf("a new condition starts now: %s", c.LastTransitionTime)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &condensev1.PruningPolicy{ObjectMeta: metav1.ObjectMeta{Name: "team", Namespace: "agents", Generation: 3},
				Status: *prior.DeepCopy()}
			tc.obs.now = now
			st := computePolicyStatus(p, &tc.obs)
			if st.ObservedGeneration != 3 || st.Endpoint != "http://team-proxy.agents.svc:8080" {
				t.Errorf("generation %d endpoint %q", st.ObservedGeneration, st.Endpoint)
			}
			checkConds(t, st.Conditions, 3, tc.conds...)
			if tc.check != nil {
				tc.check(t, st)
			}
			if p.Status.ConfigHash != "old" || len(p.Status.Conditions) != 1 {
				t.Errorf("computePolicyStatus changed the policy's own status: %+v", p.Status)
			}
		})
	}
}

func TestConditionEventType(t *testing.T) {
	for _, c := range []struct {
		typ    string
		status metav1.ConditionStatus
		want   string
	}{
		{condensev1.ConditionReady, metav1.ConditionTrue, corev1.EventTypeNormal},
		{condensev1.ConditionReady, metav1.ConditionFalse, corev1.EventTypeWarning},
		{condensev1.ConditionStoreReachable, metav1.ConditionFalse, corev1.EventTypeWarning},
		{condensev1.ConditionProxyAvailable, metav1.ConditionTrue, corev1.EventTypeNormal},
		{condensev1.ConditionDegraded, metav1.ConditionTrue, corev1.EventTypeWarning},
		{condensev1.ConditionDegraded, metav1.ConditionFalse, corev1.EventTypeNormal},
	} {
		if got := conditionEventType(metav1.Condition{Type: c.typ, Status: c.status}); got != c.want {
			t.Errorf("%s=%s: %s, want %s", c.typ, c.status, got, c.want)
		}
	}
}
