package controllers

import (
	"github.com/prometheus/client_golang/prometheus"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	condensev1 "github.com/condense-dev/condense/api/v1alpha1"
)

// Operator metrics, served with controller-runtime's on the manager's metrics endpoint.
var (
	metricPolicyReady = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "condense_operator_policy_ready",
		Help: "1 when the PruningPolicy's Ready condition is True, else 0.",
	}, []string{"namespace", "policy"})
	metricPolicySessions = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "condense_operator_policy_sessions",
		Help: "AgentSessions of the PruningPolicy.",
	}, []string{"namespace", "policy"})
	metricPolicyDiagnostics = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "condense_operator_policy_diagnostics",
		Help: "Distinct diagnostics over the PruningPolicy's sessions, by kind.",
	}, []string{"namespace", "policy", "kind"})
	metricSessionsDiscovered = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "condense_operator_sessions_discovered_total",
		Help: "AgentSessions the operator created for sessions found in a store.",
	}, []string{"namespace", "policy"})
	metricSessionStateDeletions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "condense_operator_session_state_deletions_total",
		Help: "Session states deleted from a store by the AgentSession finalizer.",
	}, []string{"namespace", "policy"})
)

func init() {
	metrics.Registry.MustRegister(metricPolicyReady, metricPolicySessions, metricPolicyDiagnostics,
		metricSessionsDiscovered, metricSessionStateDeletions)
}

// publishPolicyMetrics sets the policy's gauges from its status and reports whether it is Ready.
func publishPolicyMetrics(p *condensev1.PruningPolicy, st *condensev1.PruningPolicyStatus) bool {
	ready := apimeta.IsStatusConditionTrue(st.Conditions, condensev1.ConditionReady)
	v := 0.0
	if ready {
		v = 1
	}
	metricPolicyReady.WithLabelValues(p.Namespace, p.Name).Set(v)
	metricPolicySessions.WithLabelValues(p.Namespace, p.Name).Set(float64(st.Sessions))
	d := st.Diagnostics
	for kind, v := range map[string]int64{"unresolved": d.Unresolved, "mismatch": d.Mismatch, "orphans": d.Orphans, "backfillEmpty": d.BackfillEmpty} {
		metricPolicyDiagnostics.WithLabelValues(p.Namespace, p.Name, kind).Set(float64(v))
	}
	return ready
}

// forgetPolicyMetrics drops the gauges of a policy that is gone.
func forgetPolicyMetrics(key types.NamespacedName) {
	metricPolicyReady.DeleteLabelValues(key.Namespace, key.Name)
	metricPolicySessions.DeleteLabelValues(key.Namespace, key.Name)
	metricPolicyDiagnostics.DeletePartialMatch(map[string]string{"namespace": key.Namespace, "policy": key.Name})
}
