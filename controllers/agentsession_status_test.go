package controllers

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	condensev1 "github.com/condense-dev/condense/api/v1alpha1"
)

func TestReclaimAndCost(t *testing.T) {
	if got := reclaimPercent(1000, 370); got != 63 {
		t.Errorf("reclaim = %d", got)
	}
	if reclaimPercent(0, 0) != 0 || reclaimPercent(100, 150) != 0 {
		t.Error("reclaim must be 0 without savings")
	}
	if got := formatCost(12_345); got != "0.0123" {
		t.Errorf("cost = %s", got)
	}
	if got := formatCost(3_000_000); got != "3.0000" {
		t.Errorf("cost = %s", got)
	}
}

func TestCounterWriteDelay(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	r := &AgentSessionReconciler{StatusInterval: 10 * time.Second}
	key := types.NamespacedName{Namespace: "ns", Name: "s"}
	cur := &condensev1.AgentSessionStatus{Requests: 1, Active: true,
		Conditions: []metav1.Condition{{Type: condensev1.ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonSessionObserved, Message: "state version 1 in the store"}}}
	counters := cur.DeepCopy()
	counters.Requests, counters.Version, counters.BytesBefore = 5, 2, 900
	counters.Conditions[0].Message = "state version 2 in the store"
	if d := r.counterWriteDelay(key, cur, counters, now); d != 0 {
		t.Fatalf("never written before: delay %s", d)
	}
	r.lastWrite = map[types.NamespacedName]time.Time{key: now.Add(-3 * time.Second)}
	if d := r.counterWriteDelay(key, cur, counters, now); d != 7*time.Second {
		t.Fatalf("counters only, written 3s ago: delay %s, want 7s", d)
	}
	if d := r.counterWriteDelay(key, cur, counters, now.Add(8*time.Second)); d != 0 {
		t.Fatalf("after the interval: delay %s", d)
	}
	for name, mut := range map[string]func(*condensev1.AgentSessionStatus){
		"diagnostics": func(s *condensev1.AgentSessionStatus) { s.Diagnostics.Orphans = 1 },
		"activity":    func(s *condensev1.AgentSessionStatus) { s.Active = false },
		"condition":   func(s *condensev1.AgentSessionStatus) { s.Conditions[0].Status = metav1.ConditionFalse },
		"token":       func(s *condensev1.AgentSessionStatus) { s.TokenSecretName = "x-token" },
	} {
		next := counters.DeepCopy()
		mut(next)
		if d := r.counterWriteDelay(key, cur, next, now); d != 0 {
			t.Errorf("%s change must be written at once, delay %s", name, d)
		}
	}
	r.StatusInterval = 0
	if d := r.counterWriteDelay(key, cur, counters, now); d != 0 {
		t.Fatalf("interval 0 must never delay: %s", d)
	}
}
