package specs

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	condensev1 "github.com/condense-dev/condense/api/v1alpha1"
)

// redisUID is the user and group of the official Redis image's redis account, which the
// managed Redis runs as.
const redisUID = 999

// redisConf is the managed Redis configuration file.
func redisConf(persistent bool) string {
	var b strings.Builder
	b.WriteString("# Rendered by the condense operator.\n")
	fmt.Fprintf(&b, "port %d\nbind 0.0.0.0\nprotected-mode no\ndir /data\n", RedisPort)
	if persistent {
		b.WriteString("appendonly yes\nappendfsync everysec\nsave 3600 1 300 100\n")
	} else {
		b.WriteString("appendonly no\nsave \"\"\n")
	}
	b.WriteString("maxmemory-policy noeviction\nnotify-keyspace-events \"\"\n")
	return b.String()
}

// BuildRedisConfigMap builds the ConfigMap of the managed Redis configuration; nil unless redis.managed.
func BuildRedisConfigMap(p *condensev1.PruningPolicy) *corev1.ConfigMap {
	m := p.Spec.Redis.ManagedOrDefault()
	if m == nil {
		return nil
	}
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: meta(p, redisConfigName(p), "redis"),
		Data:       map[string]string{"redis.conf": redisConf(ptr.Deref(m.Persistence, true))},
	}
}

// BuildRedisService builds the headless Service of the managed Redis; nil unless redis.managed.
func BuildRedisService(p *condensev1.PruningPolicy) *corev1.Service {
	if p.Spec.Redis.ManagedOrDefault() == nil {
		return nil
	}
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: meta(p, redisName(p), "redis"),
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  selectorLabels(p, "redis"),
			Ports:     []corev1.ServicePort{{Name: "redis", Port: RedisPort, TargetPort: intstr.FromString("redis"), Protocol: corev1.ProtocolTCP}},
		},
	}
}

// BuildRedisStatefulSet builds the single-replica managed Redis; nil unless redis.managed.
// With persistence the data directory is a PersistentVolumeClaim, otherwise an emptyDir.
func BuildRedisStatefulSet(p *condensev1.PruningPolicy) *appsv1.StatefulSet {
	m := p.Spec.Redis.ManagedOrDefault()
	if m == nil {
		return nil
	}
	persistent := ptr.Deref(m.Persistence, true)
	confHash := sha256.Sum256([]byte(redisConf(persistent)))
	c := corev1.Container{
		Name:            "redis",
		Image:           strOr(m.Image, "redis:7.2"),
		ImagePullPolicy: corev1.PullIfNotPresent,
		Args:            []string{"redis-server", "/etc/redis/redis.conf"},
		Ports:           []corev1.ContainerPort{{Name: "redis", ContainerPort: RedisPort, Protocol: corev1.ProtocolTCP}},
		Resources:       m.Resources,
		VolumeMounts: []corev1.VolumeMount{
			{Name: "data", MountPath: "/data"},
			{Name: "config", MountPath: "/etc/redis", ReadOnly: true},
		},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"redis-cli", "ping"}}},
			PeriodSeconds: 5,
		},
		LivenessProbe: &corev1.Probe{
			ProbeHandler:        corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("redis")}},
			InitialDelaySeconds: 10,
			PeriodSeconds:       10,
		},
		// PodSecurity "restricted": Redis writes only to /data.
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: new(false),
			ReadOnlyRootFilesystem:   new(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
	}
	ss := &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: meta(p, redisName(p), "redis"),
		Spec: appsv1.StatefulSetSpec{
			Replicas:    new(int32(1)),
			ServiceName: redisName(p),
			Selector:    &metav1.LabelSelector{MatchLabels: selectorLabels(p, "redis")},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      selectorLabels(p, "redis"),
					Annotations: map[string]string{AnnotationConfigHash: hex.EncodeToString(confHash[:])},
				},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{c},
					Volumes: []corev1.Volume{{
						Name: "config",
						VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: redisConfigName(p)},
						}},
					}},
					EnableServiceLinks: new(false),
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:        new(true),
						RunAsUser:           new(int64(redisUID)),
						RunAsGroup:          new(int64(redisUID)),
						FSGroup:             new(int64(redisUID)),
						FSGroupChangePolicy: new(corev1.FSGroupChangeOnRootMismatch),
						SeccompProfile:      &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
				},
			},
		},
	}
	if persistent {
		size := resource.MustParse("1Gi")
		if m.Storage != nil {
			size = m.Storage.DeepCopy()
		}
		ss.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
			ObjectMeta: metav1.ObjectMeta{Name: "data", Labels: selectorLabels(p, "redis")},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: m.StorageClassName,
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
			},
		}}
	} else {
		ss.Spec.Template.Spec.Volumes = append(ss.Spec.Template.Spec.Volumes,
			corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	return ss
}

// BuildRedisNetworkPolicy builds the NetworkPolicy of the managed Redis: ingress to its port
// only from the policy's proxy and pruner pods and, with o.OperatorNamespace, from the
// operator's pods there (it lists the sessions). nil unless redis.managed.
func BuildRedisNetworkPolicy(p *condensev1.PruningPolicy, o BuildOptions) *networkingv1.NetworkPolicy {
	if p.Spec.Redis.ManagedOrDefault() == nil {
		return nil
	}
	from := []networkingv1.NetworkPolicyPeer{
		{PodSelector: &metav1.LabelSelector{MatchLabels: selectorLabels(p, "proxy")}},
		{PodSelector: &metav1.LabelSelector{MatchLabels: selectorLabels(p, "pruner")}},
	}
	if o.OperatorNamespace != "" {
		from = append(from, networkingv1.NetworkPolicyPeer{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: o.OperatorNamespace}},
			PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{LabelOperator: "operator"}},
		})
	}
	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: meta(p, redisName(p), "redis"),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: selectorLabels(p, "redis")},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  from,
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: new(corev1.ProtocolTCP), Port: new(intstr.FromInt32(RedisPort))}},
			}},
		},
	}
}
