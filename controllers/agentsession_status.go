package controllers

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	condensev1 "github.com/condense-dev/condense/api/v1alpha1"
	"github.com/condense-dev/condense/internal/pruner"
	"github.com/condense-dev/condense/internal/store"
)

// activeWindow is how recently a session must have been seen to count as active.
const activeWindow = 10 * time.Minute

// statRecords is the store counter of indexed tool results.
const statRecords = "records"

// sessionObservation is what one reconcile of an AgentSession found; a step that failed
// leaves the fields of the later ones zero.
type sessionObservation struct {
	// policy is the session's PruningPolicy; nil when it is missing, being deleted or another
	// object than the one that owns the session.
	policy *condensev1.PruningPolicy
	// ownerUID is the UID of the policy owning the session (a discovered one), or "".
	ownerUID types.UID
	// replaced is true when a policy of that name exists but is not the session's owner.
	replaced bool
	// tokenErr is why the policy's session-auth secret could not be read.
	tokenErr error
	// tokenSecret names the session token Secret in place ("" for none).
	tokenSecret string
	// info and found are the store's listing of the session; lookupErr is why there is none.
	info      store.SessionInfo
	found     bool
	lookupErr error
}

// statePolicy is the policy whose store holds the session's state: o.policy unless the
// session records (owner reference, else annotation) another policy's UID.
func (o *sessionObservation) statePolicy(s *condensev1.AgentSession) *condensev1.PruningPolicy {
	if o.policy == nil {
		return nil
	}
	recorded := o.ownerUID
	if recorded == "" {
		recorded = types.UID(s.Annotations[annotationPolicyUID])
	}
	if recorded != "" && recorded != o.policy.UID {
		return nil
	}
	return o.policy
}

// sessionNext is the outcome of computeSessionStatus.
type sessionNext struct {
	// status is the status the session should have.
	status *condensev1.AgentSessionStatus
	// requeue is when to look again (0: on the next change only).
	requeue time.Duration
	// expired is true when the session was idle longer than its ttl: delete it instead.
	expired bool
	// complete is true when the store was consulted, so a counter-only write may wait.
	complete bool
}

// computeSessionStatus is the status s should have at now after what o observed.
func computeSessionStatus(s *condensev1.AgentSession, o *sessionObservation, now time.Time) sessionNext {
	st := s.Status.DeepCopy()
	st.ObservedGeneration = s.Generation
	set := func(t string, ok bool, reason, msg string) {
		setCondition(&st.Conditions, s.Generation, t, ok, reason, msg, now)
	}
	switch {
	case o.policy == nil && o.replaced:
		set(condensev1.ConditionReady, false, reasonPolicyNotFound, fmt.Sprintf("the PruningPolicy %q that owns this session (uid %s) was deleted; the policy of that name now is another object", s.Spec.PolicyRef.Name, o.ownerUID))
		return sessionNext{status: st}
	case o.policy == nil:
		set(condensev1.ConditionReady, false, reasonPolicyNotFound, fmt.Sprintf("PruningPolicy %q not found in namespace %s", s.Spec.PolicyRef.Name, s.Namespace))
		return sessionNext{status: st}
	case o.tokenErr != nil:
		set(condensev1.ConditionReady, false, reasonSecretUnavailable, "session auth secret: "+o.tokenErr.Error())
		return sessionNext{status: st, requeue: time.Minute}
	}
	st.TokenSecretName = o.tokenSecret
	next := sessionNext{status: st, complete: true}
	switch {
	case o.lookupErr != nil:
		set(condensev1.ConditionReady, false, reasonStoreUnreachable, o.lookupErr.Error())
		next.requeue = 30 * time.Second
	case !o.found:
		set(condensev1.ConditionReady, false, reasonSessionNotInStore, "the store holds no state for this session (not used yet, or expired)")
		st.Active = false
	default:
		fillStatus(st, o.info, now)
		set(condensev1.ConditionReady, true, reasonSessionObserved, fmt.Sprintf("state version %d in the store", o.info.Version))
		if st.Active {
			next.requeue = o.info.LastSeen.Add(activeWindow).Sub(now) + time.Second
		}
	}
	if d := st.Diagnostics; d.Total() > 0 {
		set(condensev1.ConditionDegraded, true, reasonDiagnostics, fmt.Sprintf("diagnostics recorded: unresolved=%d mismatch=%d orphans=%d backfillEmpty=%d", d.Unresolved, d.Mismatch, d.Orphans, d.BackfillEmpty))
	} else {
		set(condensev1.ConditionDegraded, false, reasonNoDiagnostics, "no diagnostics recorded")
	}
	if s.Spec.TTL != nil && s.Spec.TTL.Duration > 0 && o.lookupErr == nil {
		// Idle since last seen, or since creation when never seen.
		since := s.CreationTimestamp.Time
		if st.LastSeen != nil && st.LastSeen.After(since) {
			since = st.LastSeen.Time
		}
		expires := since.Add(s.Spec.TTL.Duration)
		if !now.Before(expires) {
			return sessionNext{status: st, expired: true, complete: true}
		}
		next.requeue = sooner(next.requeue, expires.Sub(now)+time.Second)
	}
	return next
}

// sooner returns the shorter of two requeue delays, where 0 means none.
func sooner(a, b time.Duration) time.Duration {
	if a == 0 || b < a {
		return b
	}
	return a
}

// fillStatus copies a store listing into the status.
func fillStatus(st *condensev1.AgentSessionStatus, info store.SessionInfo, now time.Time) {
	if !info.LastSeen.IsZero() {
		t := metav1.NewTime(info.LastSeen.Truncate(time.Second))
		st.LastSeen = &t
	}
	st.Active = !info.LastSeen.IsZero() && now.Sub(info.LastSeen) < activeWindow
	st.Version = int64(info.Version)
	c := info.Stats
	st.Requests = c[store.StatRequests]
	st.Records = c[statRecords]
	st.Flushes = c[store.StatFlushes]
	st.BytesBefore = c[store.StatBytesBefore]
	st.BytesAfter = c[store.StatBytesAfter]
	st.TokensBefore = c[store.StatTokensBefore]
	st.TokensAfter = c[store.StatTokensAfter]
	st.ReclaimPercent = reclaimPercent(st.BytesBefore, st.BytesAfter)
	st.SummarizerCost = formatCost(c[store.StatSummarizerCostMicros])
	d := info.DiagnosticCounts
	st.Diagnostics = condensev1.DiagnosticCounts{
		Unresolved:    d[string(pruner.DiagUnresolvedRange)],
		Mismatch:      d[string(pruner.DiagRangeIDMismatch)],
		Orphans:       d[string(pruner.DiagOrphanSweep)],
		BackfillEmpty: d[string(pruner.DiagBackfillEmpty)],
	}
}

// reclaimPercent is the share of bytes removed, rounded down, clamped to 0..100.
func reclaimPercent(before, after int64) int32 {
	if before <= 0 || after >= before {
		return 0
	}
	if after < 0 {
		after = 0
	}
	return int32((before - after) * 100 / before)
}

// formatCost renders micro-dollars as dollars with four decimals ("0.0123").
func formatCost(micros int64) string {
	if micros <= 0 {
		return ""
	}
	return fmt.Sprintf("%d.%04d", micros/1_000_000, (micros%1_000_000)/100)
}

// counterWriteDelay returns how long to hold back a status write that changes only counters
// because this session's last write was less than StatusInterval ago; 0 means write now.
func (r *sessionReconciler) counterWriteDelay(key types.NamespacedName, cur, next *condensev1.AgentSessionStatus, now time.Time) time.Duration {
	if r.StatusInterval <= 0 || equality.Semantic.DeepEqual(cur, next) || !onlyCountersDiffer(cur, next) {
		return 0
	}
	r.writesMu.Lock()
	last, ok := r.lastWrite[key]
	r.writesMu.Unlock()
	if !ok {
		return 0
	}
	if elapsed := now.Sub(last); elapsed < r.StatusInterval {
		return r.StatusInterval - elapsed
	}
	return 0
}

// onlyCountersDiffer reports whether a and b differ at most in counters and in condition
// messages and times (the Ready message quotes the state version).
func onlyCountersDiffer(a, b *condensev1.AgentSessionStatus) bool {
	norm := func(s *condensev1.AgentSessionStatus) *condensev1.AgentSessionStatus {
		c := s.DeepCopy()
		c.LastSeen, c.Version = nil, 0
		c.Requests, c.Records, c.Flushes = 0, 0, 0
		c.BytesBefore, c.BytesAfter, c.TokensBefore, c.TokensAfter = 0, 0, 0, 0
		c.ReclaimPercent, c.SummarizerCost = 0, ""
		for i := range c.Conditions {
			c.Conditions[i].Message, c.Conditions[i].LastTransitionTime = "", metav1.Time{}
		}
		return c
	}
	return equality.Semantic.DeepEqual(norm(a), norm(b))
}
