package controllers

import (
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	condensev1 "github.com/condense-dev/condense/api/v1alpha1"
	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/store"
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
	r := &sessionReconciler{StatusInterval: 10 * time.Second}
	key := types.NamespacedName{Namespace: "ns", Name: "s"}
	cur := &condensev1.AgentSessionStatus{Requests: 1, Active: true,
		Conditions: []metav1.Condition{{Type: condensev1.ConditionReady, Status: metav1.ConditionTrue, Reason: reasonSessionObserved, Message: "state version 1 in the store"}}}
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

func TestComputeSessionStatus(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	created := metav1.NewTime(now.Add(-time.Hour))
	policy := &condensev1.PruningPolicy{ObjectMeta: metav1.ObjectMeta{Name: "team", Namespace: "agents", UID: "p-1"}}
	seen := store.SessionInfo{Session: "s", Version: 3, LastSeen: now.Add(-2 * time.Minute),
		Stats: map[string]int64{store.StatRequests: 9, statRecords: 4, store.StatFlushes: 2, store.StatBytesBefore: 1000,
			store.StatBytesAfter: 370, store.StatTokensBefore: 300, store.StatTokensAfter: 80, store.StatSummarizerCostMicros: 12_345},
		DiagnosticCounts: map[string]int64{string(pruner.DiagOrphanSweep): 1, string(pruner.DiagBackfillEmpty): 2}}
	ttl := func(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
	cases := []struct {
		name  string
		ttl   *metav1.Duration
		obs   sessionObservation
		conds []wantCond
		want  sessionNext // status is checked through conds and check
		check func(t *testing.T, st *condensev1.AgentSessionStatus)
	}{
		{name: "no policy", obs: sessionObservation{},
			conds: []wantCond{{condensev1.ConditionReady, metav1.ConditionFalse, reasonPolicyNotFound, `PruningPolicy "team" not found in namespace agents`}}},
		{name: "the owning policy was replaced", obs: sessionObservation{ownerUID: "p-0", replaced: true},
			conds: []wantCond{{condensev1.ConditionReady, metav1.ConditionFalse, reasonPolicyNotFound,
				`the PruningPolicy "team" that owns this session (uid p-0) was deleted; the policy of that name now is another object`}}},
		{name: "session-auth secret unreadable", obs: sessionObservation{policy: policy, tokenErr: errors.New(`secret agents/auth has no key "k"`)},
			conds: []wantCond{{condensev1.ConditionReady, metav1.ConditionFalse, reasonSecretUnavailable, `session auth secret: secret agents/auth has no key "k"`}},
			want:  sessionNext{requeue: time.Minute}},
		{name: "store unreachable", ttl: ttl(time.Minute),
			obs: sessionObservation{policy: policy, tokenSecret: "s-token", lookupErr: errors.New("dial tcp: refused")},
			conds: []wantCond{
				{condensev1.ConditionReady, metav1.ConditionFalse, reasonStoreUnreachable, "dial tcp: refused"},
				{condensev1.ConditionDegraded, metav1.ConditionFalse, reasonNoDiagnostics, "no diagnostics recorded"}},
			want: sessionNext{requeue: 30 * time.Second, complete: true},
			check: func(t *testing.T, st *condensev1.AgentSessionStatus) {
				if st.TokenSecretName != "s-token" {
					t.Errorf("token secret %q", st.TokenSecretName)
				}
			}},
		{name: "not in the store", obs: sessionObservation{policy: policy},
			conds: []wantCond{{condensev1.ConditionReady, metav1.ConditionFalse, reasonSessionNotInStore,
				"the store holds no state for this session (not used yet, or expired)"}},
			want: sessionNext{complete: true},
			check: func(t *testing.T, st *condensev1.AgentSessionStatus) {
				if st.Active || st.TokenSecretName != "" {
					t.Errorf("active %v token %q", st.Active, st.TokenSecretName)
				}
			}},
		{name: "observed and active: counters, Degraded, requeued when it turns idle",
			obs: sessionObservation{policy: policy, info: seen, found: true},
			conds: []wantCond{
				{condensev1.ConditionReady, metav1.ConditionTrue, reasonSessionObserved, "state version 3 in the store"},
				{condensev1.ConditionDegraded, metav1.ConditionTrue, reasonDiagnostics,
					"diagnostics recorded: unresolved=0 mismatch=0 orphans=1 backfillEmpty=2"}},
			want: sessionNext{requeue: 8*time.Minute + time.Second, complete: true},
			check: func(t *testing.T, st *condensev1.AgentSessionStatus) {
				want := condensev1.AgentSessionStatus{Active: true, Version: 3, Requests: 9, Records: 4, Flushes: 2, BytesBefore: 1000,
					BytesAfter: 370, TokensBefore: 300, TokensAfter: 80, ReclaimPercent: 63, SummarizerCost: "0.0123",
					Diagnostics: condensev1.DiagnosticCounts{Orphans: 1, BackfillEmpty: 2}}
				got := *st.DeepCopy()
				got.Conditions, got.ObservedGeneration = nil, 0
				if got.LastSeen == nil || !got.LastSeen.Time.Equal(seen.LastSeen) {
					t.Errorf("lastSeen %v", got.LastSeen)
				}
				got.LastSeen = nil
				if !equality.Semantic.DeepEqual(got, want) {
					t.Errorf("status\n got %+v\nwant %+v", got, want)
				}
			}},
		{name: "ttl not reached: requeued at the sooner of expiry and idleness", ttl: ttl(3 * time.Minute),
			obs:  sessionObservation{policy: policy, info: seen, found: true},
			want: sessionNext{requeue: time.Minute + time.Second, complete: true}},
		{name: "idle past the ttl since last seen", ttl: ttl(2 * time.Minute),
			obs:  sessionObservation{policy: policy, info: seen, found: true},
			want: sessionNext{expired: true, complete: true}},
		{name: "never seen: the ttl counts from creation", ttl: ttl(30 * time.Minute),
			obs:  sessionObservation{policy: policy},
			want: sessionNext{expired: true, complete: true}},
		{name: "never seen, within the ttl", ttl: ttl(2 * time.Hour),
			obs:  sessionObservation{policy: policy},
			want: sessionNext{requeue: time.Hour + time.Second, complete: true}},
		{name: "no expiry while the store cannot be read", ttl: ttl(time.Second),
			obs:  sessionObservation{policy: policy, lookupErr: errors.New("down")},
			want: sessionNext{requeue: 30 * time.Second, complete: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &condensev1.AgentSession{
				ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "agents", Generation: 2, CreationTimestamp: created},
				Spec:       condensev1.AgentSessionSpec{PolicyRef: corev1.LocalObjectReference{Name: "team"}, SessionID: "s", TTL: tc.ttl},
				Status:     condensev1.AgentSessionStatus{TokenSecretName: "old-token"},
			}
			next := computeSessionStatus(s, &tc.obs, now)
			if next.requeue != tc.want.requeue || next.expired != tc.want.expired || next.complete != tc.want.complete {
				t.Errorf("requeue %s expired %v complete %v, want %s %v %v",
					next.requeue, next.expired, next.complete, tc.want.requeue, tc.want.expired, tc.want.complete)
			}
			if next.status.ObservedGeneration != 2 {
				t.Errorf("observed generation %d", next.status.ObservedGeneration)
			}
			if !next.complete && next.status.TokenSecretName != "old-token" {
				t.Errorf("an early outcome must keep the token secret name, got %q", next.status.TokenSecretName)
			}
			checkConds(t, next.status.Conditions, 2, tc.conds...)
			if tc.check != nil {
				tc.check(t, next.status)
			}
			if s.Status.TokenSecretName != "old-token" || len(s.Status.Conditions) != 0 {
				t.Errorf("computeSessionStatus changed the session's own status: %+v", s.Status)
			}
		})
	}
}

func TestStatePolicy(t *testing.T) {
	p := &condensev1.PruningPolicy{ObjectMeta: metav1.ObjectMeta{Name: "team", UID: "p-1"}}
	withUID := func(uid string) *condensev1.AgentSession {
		return &condensev1.AgentSession{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{annotationPolicyUID: uid}}}
	}
	for _, c := range []struct {
		name string
		o    sessionObservation
		s    *condensev1.AgentSession
		want *condensev1.PruningPolicy
	}{
		{"no policy", sessionObservation{}, withUID(""), nil},
		{"nothing recorded", sessionObservation{policy: p}, withUID(""), p},
		{"recorded this policy", sessionObservation{policy: p}, withUID("p-1"), p},
		{"recorded an earlier policy of the name", sessionObservation{policy: p}, withUID("p-0"), nil},
		{"owned by this policy, annotation stale", sessionObservation{policy: p, ownerUID: "p-1"}, withUID("p-0"), p},
	} {
		if got := c.o.statePolicy(c.s); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestSooner(t *testing.T) {
	for _, c := range [][3]time.Duration{{0, 5, 5}, {5, 0, 0}, {5, 3, 3}, {3, 5, 3}} {
		if got := sooner(c[0], c[1]); got != c[2] {
			t.Errorf("sooner(%s, %s) = %s, want %s", c[0], c[1], got, c[2])
		}
	}
}
