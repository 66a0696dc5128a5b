package controllers

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	condensev1 "github.com/condense-dev/condense/api/v1alpha1"
	"github.com/condense-dev/condense/internal/specs"
)

// build builds the policy's configuration and its children, recording a policy that builds
// no valid configuration (with a warning event) in o. err is an API error.
func (r *policyReconciler) build(ctx context.Context, p *condensev1.PruningPolicy, o *policyObservation) ([]specs.Child, error) {
	cfg, err := specs.BuildConfig(p)
	if err != nil {
		o.configErr = err
		emitEvent(r.Recorder, p, corev1.EventTypeWarning, reasonInvalidSpec, "Render", invalidConfigMessage(err))
		return nil, nil
	}
	o.configHash = cfg.Hash()
	secrets, err := r.secretsHash(ctx, p)
	if err != nil {
		return nil, err
	}
	children, err := specs.Children(p, cfg, r.Options, specs.PodHashes{Config: o.configHash, Secrets: secrets})
	o.childrenErr = err
	return children, nil
}

// invalidConfigMessage is the Ready message and event note of a policy BuildConfig rejects.
func invalidConfigMessage(err error) string {
	return "the policy renders an invalid proxy configuration: " + err.Error()
}

// secretsHash digests the data of the Secret keys the policy's pods read.
func (r *policyReconciler) secretsHash(ctx context.Context, p *condensev1.PruningPolicy) (string, error) {
	var keys []specs.SecretKeyValue
	for _, sel := range specs.ReferencedSecretKeys(p) {
		v, found, err := r.Secrets.Lookup(ctx, p.Namespace, sel)
		if err != nil {
			return "", err
		}
		keys = append(keys, specs.SecretKeyValue{Secret: sel.Name, Key: sel.Key, Value: v, Found: found})
	}
	return specs.SecretsHash(keys), nil
}

// apply server-side applies every wanted child and deletes the unwanted ones the policy owns.
func (r *policyReconciler) apply(ctx context.Context, p *condensev1.PruningPolicy, children []specs.Child) error {
	if err := r.handOverReplicas(ctx, p); err != nil {
		return fmt.Errorf("hand the proxy replicas over to the autoscaler: %w", err)
	}
	for _, c := range children {
		if !c.Wanted {
			if err := r.deleteOwned(ctx, p, c.Object); err != nil {
				return fmt.Errorf("delete %T %s: %w", c.Object, c.Object.GetName(), err)
			}
			continue
		}
		if err := applyOwned(ctx, r.Client, r.Scheme, p, c.Object); err != nil {
			return fmt.Errorf("apply %T %s: %w", c.Object, c.Object.GetName(), err)
		}
	}
	return nil
}

// handOverReplicas keeps the proxy's replica count when autoscaling is turned on: while the
// operator still owns the live Deployment's spec.replicas, fieldOwnerHandover applies the
// current count so that the field survives until the HorizontalPodAutoscaler takes it over.
func (r *policyReconciler) handOverReplicas(ctx context.Context, p *condensev1.PruningPolicy) error {
	if p.Spec.Proxy.Autoscaling == nil {
		return nil
	}
	var live appsv1.Deployment
	if err := r.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: specs.ProxyName(p)}, &live); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !ownsReplicas(&live, fieldOwner) {
		return nil
	}
	handover := specs.BuildProxyReplicasHandover(p, ptr.Deref(live.Spec.Replicas, 1))
	log.FromContext(ctx).Info("handing the proxy replicas over to the autoscaler", "replicas", *handover.Spec.Replicas)
	return r.Apply(ctx, handover, client.FieldOwner(fieldOwnerHandover), client.ForceOwnership)
}

// deleteOwned deletes obj if it exists and is controlled by p (never someone else's object).
func (r *policyReconciler) deleteOwned(ctx context.Context, p *condensev1.PruningPolicy, obj client.Object) error {
	if err := r.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	if !metav1.IsControlledBy(obj, p) {
		return nil
	}
	if err := deleteIfExists(ctx, r.Client, obj); err != nil {
		return err
	}
	emitEvent(r.Recorder, p, corev1.EventTypeNormal, "Deleted", "Delete", fmt.Sprintf("deleted %T %s no longer wanted by the policy", obj, obj.GetName()))
	return nil
}
