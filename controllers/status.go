package controllers

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	condensev1 "github.com/condense-dev/condense/api/v1alpha1"
)

// eventRecorder is the part of the events API the controllers use (a manager's recorder).
type eventRecorder interface {
	// Eventf records an event about regarding.
	Eventf(regarding runtime.Object, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// emitEvent records an event on obj when a recorder is configured.
func emitEvent(rec eventRecorder, obj runtime.Object, typ, reason, action, note string) {
	if rec != nil {
		rec.Eventf(obj, nil, typ, reason, action, "%s", note)
	}
}

// statusOf reaches the status of one API type and its conditions.
type statusOf[O client.Object, S any] func(O) (S, []metav1.Condition)

func policyStatus(p *condensev1.PruningPolicy) (*condensev1.PruningPolicyStatus, []metav1.Condition) {
	return &p.Status, p.Status.Conditions
}

func sessionStatus(s *condensev1.AgentSession) (*condensev1.AgentSessionStatus, []metav1.Condition) {
	return &s.Status, s.Status.Conditions
}

// writeStatus replaces obj's status with next when they differ, retrying conflicts on a fresh
// copy, and emits an event per condition whose status or reason changed. An object deleted
// meanwhile is no error; written reports whether the API server took the status.
func writeStatus[T any, O interface {
	*T
	client.Object
}, S any, PS interface {
	*S
	DeepCopy() *S
}](ctx context.Context, c client.Client, rec eventRecorder, obj O, next PS, field statusOf[O, PS]) (written bool, err error) {
	cur, old := field(obj)
	if equality.Semantic.DeepEqual(cur, next) {
		return false, nil
	}
	old = slices.Clone(old)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fresh := O(new(T))
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), fresh); err != nil {
			return err
		}
		st, _ := field(fresh)
		*st = *next.DeepCopy()
		if err := c.Status().Update(ctx, fresh); err != nil {
			return err
		}
		*obj = *fresh
		return nil
	})
	if err != nil {
		return false, client.IgnoreNotFound(err)
	}
	_, conds := field(obj)
	for _, cd := range conds {
		if prev := apimeta.FindStatusCondition(old, cd.Type); prev != nil && prev.Status == cd.Status && prev.Reason == cd.Reason {
			continue
		}
		emitEvent(rec, obj, conditionEventType(cd), cd.Reason, "Status", fmt.Sprintf("%s=%s: %s", cd.Type, cd.Status, cd.Message))
	}
	return true, nil
}

// conditionEventType is Warning for a condition that reports a problem (Degraded True, any
// other False) and Normal otherwise.
func conditionEventType(c metav1.Condition) string {
	if (c.Status == metav1.ConditionTrue) == (c.Type == condensev1.ConditionDegraded) {
		return corev1.EventTypeWarning
	}
	return corev1.EventTypeNormal
}
