package controllers

import (
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// setCondition sets condition t to True (ok) or False with the reason, message and the
// generation it was computed for; the transition time changes only when the status does.
func setCondition(conds *[]metav1.Condition, gen int64, t string, ok bool, reason, msg string) {
	s := metav1.ConditionFalse
	if ok {
		s = metav1.ConditionTrue
	}
	apimeta.SetStatusCondition(conds, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen})
}

// emitEvent records an event on obj when a recorder is configured.
func emitEvent(rec EventRecorder, obj runtime.Object, typ, reason, action, note string) {
	if rec != nil {
		rec.Eventf(obj, nil, typ, reason, action, "%s", note)
	}
}
