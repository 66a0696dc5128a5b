package specs

import (
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/utils/ptr"

	condensev1 "github.com/condense-dev/condense/api/v1alpha1"
	"github.com/condense-dev/condense/internal/config"
)

// BuildProxyConfigMap builds the configuration ConfigMap of the proxy and pruner pods.
func BuildProxyConfigMap(p *condensev1.PruningPolicy, cfg *config.Config) (*corev1.ConfigMap, error) {
	data, err := cfg.MarshalYAML()
	if err != nil {
		return nil, err
	}
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: meta(p, proxyConfigName(p), "proxy"),
		Data:       map[string]string{ConfigKey: string(data)},
	}
	cm.Annotations = map[string]string{AnnotationConfigHash: cfg.Hash()}
	return cm, nil
}

// BuildProxyDeployment builds the proxy Deployment; hashes go on the pod template. With
// autoscaling on, replicas are left to the HorizontalPodAutoscaler.
func BuildProxyDeployment(p *condensev1.PruningPolicy, o BuildOptions, hashes PodHashes) *appsv1.Deployment {
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: meta(p, ProxyName(p), "proxy"),
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: selectorLabels(p, "proxy")},
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxUnavailable: new(intstr.FromInt32(0)),
					MaxSurge:       new(intstr.FromInt32(1)),
				},
			},
			Template: podTemplate(p, o, "proxy", "proxy", hashes, p.Spec.Proxy.Resources),
		},
	}
	if p.Spec.Proxy.Autoscaling == nil {
		d.Spec.Replicas = new(ptr.Deref(p.Spec.Proxy.Replicas, 2))
	}
	return d
}

// BuildProxyReplicasHandover builds the apply configuration that holds the proxy's
// spec.replicas at live (within the autoscaler's bounds) while autoscaling takes the field
// over; nil without autoscaling.
func BuildProxyReplicasHandover(p *condensev1.PruningPolicy, live int32) *appsv1ac.DeploymentApplyConfiguration {
	a := p.Spec.Proxy.Autoscaling
	if a == nil {
		return nil
	}
	lo := max(a.MinReplicas, 1)
	return appsv1ac.Deployment(ProxyName(p), p.Namespace).
		WithSpec(appsv1ac.DeploymentSpec().WithReplicas(min(max(live, lo), max(a.MaxReplicas, lo))))
}

// BuildPrunerDeployment builds the pruner worker Deployment; nil when pruner.replicas is 0.
func BuildPrunerDeployment(p *condensev1.PruningPolicy, o BuildOptions, hashes PodHashes) *appsv1.Deployment {
	if p.Spec.Pruner.Replicas <= 0 {
		return nil
	}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: meta(p, prunerName(p), "pruner"),
		Spec: appsv1.DeploymentSpec{
			Replicas: new(p.Spec.Pruner.Replicas),
			Selector: &metav1.LabelSelector{MatchLabels: selectorLabels(p, "pruner")},
			Template: podTemplate(p, o, "pruner", "pruner", hashes, p.Spec.Pruner.Resources),
		},
	}
}

// BuildProxyService builds the proxy Service (port 8080 "proxy", 9090 "metrics").
func BuildProxyService(p *condensev1.PruningPolicy) *corev1.Service {
	t := p.Spec.Proxy.ServiceType
	if t == "" {
		t = corev1.ServiceTypeClusterIP
	}
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: meta(p, ProxyName(p), "proxy"),
		Spec: corev1.ServiceSpec{
			Type:     t,
			Selector: selectorLabels(p, "proxy"),
			Ports: []corev1.ServicePort{
				{Name: "proxy", Port: ProxyPort, TargetPort: intstr.FromString("proxy"), Protocol: corev1.ProtocolTCP},
				{Name: "metrics", Port: MetricsPort, TargetPort: intstr.FromString("metrics"), Protocol: corev1.ProtocolTCP},
			},
		},
	}
}

// BuildProxyPDB builds the proxy PodDisruptionBudget: at most one proxy pod down at a time.
// It returns nil when the proxy may run a single replica, where a budget would block drains.
func BuildProxyPDB(p *condensev1.PruningPolicy) *policyv1.PodDisruptionBudget {
	minReplicas := ptr.Deref(p.Spec.Proxy.Replicas, 2)
	if a := p.Spec.Proxy.Autoscaling; a != nil {
		minReplicas = max(a.MinReplicas, 1)
	}
	if minReplicas < 2 {
		return nil
	}
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: meta(p, ProxyName(p), "proxy"),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: new(intstr.FromInt32(1)),
			Selector:       &metav1.LabelSelector{MatchLabels: selectorLabels(p, "proxy")},
		},
	}
}

// BuildProxyHPA builds the proxy HorizontalPodAutoscaler; nil without spec.proxy.autoscaling.
func BuildProxyHPA(p *condensev1.PruningPolicy) *autoscalingv2.HorizontalPodAutoscaler {
	a := p.Spec.Proxy.Autoscaling
	if a == nil {
		return nil
	}
	target := a.TargetCPUUtilizationPercentage
	if target == 0 {
		target = 70
	}
	return &autoscalingv2.HorizontalPodAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler"},
		ObjectMeta: meta(p, ProxyName(p), "proxy"),
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: ProxyName(p)},
			MinReplicas:    new(max(a.MinReplicas, 1)),
			MaxReplicas:    a.MaxReplicas,
			Metrics: []autoscalingv2.MetricSpec{{
				Type: autoscalingv2.ResourceMetricSourceType,
				Resource: &autoscalingv2.ResourceMetricSource{
					Name:   corev1.ResourceCPU,
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: new(target)},
				},
			}},
		},
	}
}
