package controllers

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
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
