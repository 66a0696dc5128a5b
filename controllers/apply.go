package controllers

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// fieldOwner is the server-side-apply field manager of the operator.
const fieldOwner = "condense-operator"

// fieldOwnerHandover holds the proxy Deployment's spec.replicas while it passes from the
// operator to the HorizontalPodAutoscaler.
const fieldOwnerHandover = "condense-handover-to-hpa"

// applyOwned sets owner as the controller of obj and server-side applies obj (typed, with
// TypeMeta set) with force: fields the operator owns are reset, fields others own are kept.
func applyOwned(ctx context.Context, c client.Client, scheme *runtime.Scheme, owner client.Object, obj client.Object) error {
	if err := controllerutil.SetControllerReference(owner, obj, scheme); err != nil {
		return err
	}
	return apply(ctx, c, obj)
}

// apply server-side applies obj as fieldOwner, without status and empty creation timestamps.
func apply(ctx context.Context, c client.Client, obj client.Object) error {
	if obj.GetObjectKind().GroupVersionKind().Kind == "" {
		return fmt.Errorf("apply %T: TypeMeta not set", obj)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: m}
	delete(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	// StatefulSet claim templates carry their own (empty) metadata and status.
	if tpls, ok, _ := unstructured.NestedSlice(u.Object, "spec", "volumeClaimTemplates"); ok {
		for _, t := range tpls {
			if tm, ok := t.(map[string]any); ok {
				delete(tm, "status")
				unstructured.RemoveNestedField(tm, "metadata", "creationTimestamp")
			}
		}
		_ = unstructured.SetNestedSlice(u.Object, tpls, "spec", "volumeClaimTemplates")
	}
	unstructured.RemoveNestedField(u.Object, "spec", "template", "metadata", "creationTimestamp")
	return c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fieldOwner), client.ForceOwnership)
}

// ownsReplicas reports whether field manager owner applied obj's spec.replicas.
func ownsReplicas(obj client.Object, owner string) bool {
	for _, e := range obj.GetManagedFields() {
		if e.Manager != owner || e.Operation != metav1.ManagedFieldsOperationApply || e.FieldsV1 == nil {
			continue
		}
		var fields struct {
			Spec map[string]json.RawMessage `json:"f:spec"`
		}
		if json.Unmarshal(e.FieldsV1.Raw, &fields) == nil {
			if _, ok := fields.Spec["f:replicas"]; ok {
				return true
			}
		}
	}
	return false
}

// deleteIfExists deletes the object of obj's type, namespace and name; absent is fine.
func deleteIfExists(ctx context.Context, c client.Client, obj client.Object) error {
	err := c.Delete(ctx, obj, client.PropagationPolicy("Background"))
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}
