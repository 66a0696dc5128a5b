package controllers

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"

	condensev1 "github.com/condense-dev/condense/api/v1alpha1"
	"github.com/condense-dev/condense/internal/config"
)

// AnnotationConfigHash is set on the proxy and pruner pod templates to the hash of the
// rendered configuration, so a configuration change rolls the pods.
const AnnotationConfigHash = "condense.dev/config-hash"

// AnnotationSecretsHash is set on the proxy and pruner pod templates to a digest of the data
// of the Secret keys the pods read (external Redis URL, summarizer key, session-auth secret;
// see SecretsHash), so rotating one rolls the pods: environment variables and the
// session-auth secret are read once, at start. Edits that leave those keys alone (labels,
// annotations, other keys) roll nothing.
const AnnotationSecretsHash = "condense.dev/secrets-hash"

// PodHashes are the pod template annotations that roll the proxy and pruner pods.
type PodHashes struct {
	// Config is the rendered configuration's hash (AnnotationConfigHash).
	Config string
	// Secrets digests the data of the referenced Secret keys (AnnotationSecretsHash); "" when
	// the policy references none.
	Secrets string
}

// DefaultImage is the condense image used when a policy names none.
const DefaultImage = "ghcr.io/condense-dev/condense:latest"

// BuildOptions are operator-wide settings the builders need.
type BuildOptions struct {
	// Image is the condense image used when the policy names none.
	Image string
	// OperatorNamespace is the namespace the operator runs in; its pods (labelled
	// LabelOperator) may reach the managed Redis. Empty admits no operator pods (an operator
	// running outside the cluster reaches Redis from outside the pod network anyway).
	OperatorNamespace string
}

// LabelOperator marks the operator's own pods (value "operator"); the managed Redis's
// NetworkPolicy admits them from OperatorNamespace.
const LabelOperator = condensev1.LabelComponent

// redisUID is the user and group of the official Redis image's redis account, which the
// managed Redis runs as.
const redisUID = 999

func (o BuildOptions) image(p *condensev1.PruningPolicy) string {
	if p.Spec.Proxy.Image != "" {
		return p.Spec.Proxy.Image
	}
	if o.Image != "" {
		return o.Image
	}
	return DefaultImage
}

// selectorLabels are the immutable labels that select a component's pods.
func selectorLabels(p *condensev1.PruningPolicy, component string) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":     "condense",
		"app.kubernetes.io/instance": p.Name,
		condensev1.LabelComponent:    component,
	}
}

// objectLabels are the labels on every child object.
func objectLabels(p *condensev1.PruningPolicy, component string) map[string]string {
	l := selectorLabels(p, component)
	l["app.kubernetes.io/managed-by"] = "condense-operator"
	l[condensev1.LabelPolicy] = p.Name
	return l
}

func meta(p *condensev1.PruningPolicy, name, component string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: p.Namespace, Labels: objectLabels(p, component)}
}

// BuildProxyConfigMap renders the configuration ConfigMap of the proxy and pruner pods.
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

// podSpec builds the pod spec shared by the proxy and the pruner: one condense container
// running subcommand with the mounted configuration and the secrets the policy references.
func podSpec(p *condensev1.PruningPolicy, o BuildOptions, subcommand string, res corev1.ResourceRequirements) corev1.PodSpec {
	s := &p.Spec
	c := corev1.Container{
		Name:            subcommand,
		Image:           o.image(p),
		ImagePullPolicy: corev1.PullIfNotPresent,
		Args:            []string{subcommand, "--config", ConfigPath},
		Resources:       res,
		Ports: []corev1.ContainerPort{
			{Name: "metrics", ContainerPort: MetricsPort, Protocol: corev1.ProtocolTCP},
			{Name: "health", ContainerPort: HealthPort, Protocol: corev1.ProtocolTCP},
		},
		VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: ConfigDir, ReadOnly: true}},
		LivenessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("health")}},
			PeriodSeconds: 10,
		},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString("health")}},
			PeriodSeconds: 5,
		},
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: new(false),
			ReadOnlyRootFilesystem:   new(true),
			RunAsNonRoot:             new(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
	}
	if subcommand == "proxy" {
		c.Ports = append([]corev1.ContainerPort{{Name: "proxy", ContainerPort: ProxyPort, Protocol: corev1.ProtocolTCP}}, c.Ports...)
	}
	volumes := []corev1.Volume{{
		Name: "config",
		VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: proxyConfigName(p)},
		}},
	}}
	if ext := s.Redis.External; ext != nil {
		c.Env = append(c.Env, corev1.EnvVar{Name: EnvStoreURL, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: ext.URLSecretRef.DeepCopy()}})
	}
	if cr := s.Summarizer.Credentials; cr != nil {
		c.Env = append(c.Env, corev1.EnvVar{Name: EnvSummarizerAPIKey, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: cr.SecretKeyRef.DeepCopy()}})
	}
	if lim, ok := res.Limits[corev1.ResourceMemory]; ok && lim.Value() > 0 {
		c.Env = append(c.Env, corev1.EnvVar{Name: EnvGoMemLimit, Value: strconv.FormatInt(lim.Value()/10*9, 10)})
	}
	if sa := s.SessionAuth; sa != nil {
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "session-auth", MountPath: SessionAuthDir, ReadOnly: true})
		volumes = append(volumes, corev1.Volume{
			Name: "session-auth",
			VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName: sa.SecretRef.Name,
				Items:      []corev1.KeyToPath{{Key: sa.SecretRef.Key, Path: "secret"}},
			}},
		})
	}
	ps := corev1.PodSpec{
		Containers:         []corev1.Container{c},
		Volumes:            volumes,
		EnableServiceLinks: new(false),
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:   new(true),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
	}
	if t := s.Proxy.PodTemplate; t != nil {
		ps.NodeSelector = maps.Clone(t.NodeSelector)
		for _, tol := range t.Tolerations {
			ps.Tolerations = append(ps.Tolerations, *tol.DeepCopy())
		}
		ps.Affinity = t.Affinity.DeepCopy()
		ps.ServiceAccountName = t.ServiceAccountName
		ps.PriorityClassName = t.PriorityClassName
		ps.ImagePullSecrets = append(ps.ImagePullSecrets, t.ImagePullSecrets...)
	}
	return ps
}

func podTemplate(p *condensev1.PruningPolicy, o BuildOptions, component, subcommand string, hashes PodHashes, res corev1.ResourceRequirements) corev1.PodTemplateSpec {
	labels := map[string]string{}
	annotations := map[string]string{}
	if t := p.Spec.Proxy.PodTemplate; t != nil {
		maps.Copy(labels, t.Labels)
		maps.Copy(annotations, t.Annotations)
	}
	maps.Copy(labels, selectorLabels(p, component))
	annotations[AnnotationConfigHash] = hashes.Config
	if hashes.Secrets != "" {
		annotations[AnnotationSecretsHash] = hashes.Secrets
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations},
		Spec:       podSpec(p, o, subcommand, res),
	}
}

// BuildProxyDeployment renders the proxy Deployment; hashes go on the pod template. With
// autoscaling on, replicas are left to the HorizontalPodAutoscaler.
func BuildProxyDeployment(p *condensev1.PruningPolicy, o BuildOptions, hashes PodHashes) *appsv1.Deployment {
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: meta(p, proxyName(p), "proxy"),
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
		d.Spec.Replicas = new(i32(p.Spec.Proxy.Replicas, 2))
	}
	return d
}

// BuildProxyReplicasHandover renders what the field manager FieldOwnerHandover applies to the
// proxy Deployment when autoscaling is turned on: only spec.replicas, the live count within
// the autoscaler's bounds. Owned by that manager, the field keeps its value when the operator
// stops applying it, until the HorizontalPodAutoscaler writes it and so takes it over. nil
// without autoscaling.
func BuildProxyReplicasHandover(p *condensev1.PruningPolicy, live int32) *appsv1ac.DeploymentApplyConfiguration {
	a := p.Spec.Proxy.Autoscaling
	if a == nil {
		return nil
	}
	lo := max(a.MinReplicas, 1)
	return appsv1ac.Deployment(proxyName(p), p.Namespace).
		WithSpec(appsv1ac.DeploymentSpec().WithReplicas(min(max(live, lo), max(a.MaxReplicas, lo))))
}

// BuildPrunerDeployment renders the pruner worker Deployment; nil when pruner.replicas is 0.
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

// BuildProxyService renders the proxy Service (port 8080 "proxy", 9090 "metrics").
func BuildProxyService(p *condensev1.PruningPolicy) *corev1.Service {
	t := p.Spec.Proxy.ServiceType
	if t == "" {
		t = corev1.ServiceTypeClusterIP
	}
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: meta(p, proxyName(p), "proxy"),
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

// BuildProxyPDB renders the proxy PodDisruptionBudget: at most one proxy pod down at a time.
// It returns nil when the proxy may run a single replica, where a budget would block drains.
func BuildProxyPDB(p *condensev1.PruningPolicy) *policyv1.PodDisruptionBudget {
	minReplicas := i32(p.Spec.Proxy.Replicas, 2)
	if a := p.Spec.Proxy.Autoscaling; a != nil {
		minReplicas = max(a.MinReplicas, 1)
	}
	if minReplicas < 2 {
		return nil
	}
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: meta(p, proxyName(p), "proxy"),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: new(intstr.FromInt32(1)),
			Selector:       &metav1.LabelSelector{MatchLabels: selectorLabels(p, "proxy")},
		},
	}
}

// BuildProxyHPA renders the proxy HorizontalPodAutoscaler; nil without spec.proxy.autoscaling.
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
		ObjectMeta: meta(p, proxyName(p), "proxy"),
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: proxyName(p)},
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

// RedisConf renders the managed Redis configuration file.
func RedisConf(persistent bool) string {
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

// BuildRedisConfigMap renders the managed Redis configuration; nil unless redis.managed.
func BuildRedisConfigMap(p *condensev1.PruningPolicy) *corev1.ConfigMap {
	m := p.Spec.Redis.ManagedOrDefault()
	if m == nil {
		return nil
	}
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: meta(p, redisConfigName(p), "redis"),
		Data:       map[string]string{"redis.conf": RedisConf(boolOr(m.Persistence, true))},
	}
}

// BuildRedisService renders the headless Service of the managed Redis; nil unless redis.managed.
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

// BuildRedisStatefulSet renders the single-replica managed Redis; nil unless redis.managed.
// With persistence the data directory is a PersistentVolumeClaim, otherwise an emptyDir.
func BuildRedisStatefulSet(p *condensev1.PruningPolicy) *appsv1.StatefulSet {
	m := p.Spec.Redis.ManagedOrDefault()
	if m == nil {
		return nil
	}
	persistent := boolOr(m.Persistence, true)
	confHash := sha256.Sum256([]byte(RedisConf(persistent)))
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

// referencedSecretKeys returns the Secret keys the proxy and pruner pods read, sorted by
// Secret name and key, without duplicates.
func referencedSecretKeys(p *condensev1.PruningPolicy) []corev1.SecretKeySelector {
	var sels []corev1.SecretKeySelector
	s := &p.Spec
	if s.Redis.External != nil {
		sels = append(sels, s.Redis.External.URLSecretRef)
	}
	if s.SessionAuth != nil {
		sels = append(sels, s.SessionAuth.SecretRef)
	}
	if s.Summarizer.Credentials != nil {
		sels = append(sels, s.Summarizer.Credentials.SecretKeyRef)
	}
	slices.SortFunc(sels, compareSecretKeys)
	return slices.CompactFunc(sels, func(a, b corev1.SecretKeySelector) bool { return compareSecretKeys(a, b) == 0 })
}

// compareSecretKeys orders Secret key selectors by Secret name, then key.
func compareSecretKeys(a, b corev1.SecretKeySelector) int {
	return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.Key, b.Key))
}

// referencedSecrets returns the names of the Secrets the proxy and pruner pods read, sorted
// and without duplicates.
func referencedSecrets(p *condensev1.PruningPolicy) []string {
	var names []string
	for _, sel := range referencedSecretKeys(p) {
		names = append(names, sel.Name)
	}
	return slices.Compact(names)
}

// SecretKeyValue is one Secret key the proxy and pruner pods read, as the operator found it.
type SecretKeyValue struct {
	// Secret and Key name the key.
	Secret, Key string
	// Value is the key's data.
	Value []byte
	// Found is false when the Secret or the key does not exist.
	Found bool
}

// SecretsHash digests the Secret keys the pods read: the SHA-256 over each key's Secret name,
// key name and value (length-prefixed, in name order), truncated to 32 hex digits; "" when
// there are none. Only the data counts, never a Secret's resourceVersion, so label or
// annotation edits do not change it. The result is published as an annotation: it is a
// digest, never the data.
func SecretsHash(keys []SecretKeyValue) string {
	if len(keys) == 0 {
		return ""
	}
	keys = slices.Clone(keys)
	slices.SortFunc(keys, func(a, b SecretKeyValue) int {
		return cmp.Or(strings.Compare(a.Secret, b.Secret), strings.Compare(a.Key, b.Key))
	})
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%d:%s%d:%s", len(k.Secret), k.Secret, len(k.Key), k.Key)
		if k.Found {
			fmt.Fprintf(h, "+%d:", len(k.Value))
			h.Write(k.Value)
		} else {
			h.Write([]byte("-"))
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// BuildRedisNetworkPolicy renders the NetworkPolicy of the managed Redis: ingress to its port
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

// BuildSessionTokenSecret renders the Secret holding an AgentSession's session token.
func BuildSessionTokenSecret(s *condensev1.AgentSession, token string) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      sessionTokenName(s),
			Namespace: s.Namespace,
			Labels: map[string]string{
				"app.kubernetes.io/managed-by": "condense-operator",
				condensev1.LabelPolicy:         s.Spec.PolicyRef.Name,
				condensev1.LabelComponent:      "session-token",
			},
		},
		Type:       corev1.SecretTypeOpaque,
		StringData: nil,
		Data:       map[string][]byte{"token": []byte(token), "sessionID": []byte(s.Spec.SessionID)},
	}
}

// SessionObjectName derives a stable AgentSession name for a session discovered in the store:
// the policy name, a readable prefix of the id and 10 hex digits of its SHA-256, all within
// 63 characters of lowercase DNS label.
func SessionObjectName(policy, sessionID string) string {
	sum := sha256.Sum256([]byte(sessionID))
	h := hex.EncodeToString(sum[:])[:10]
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(sessionID) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	readable := strings.Trim(b.String(), "-")
	prefix := policy
	if len(prefix) > 30 {
		prefix = strings.TrimRight(prefix[:30], "-")
	}
	room := 63 - len(prefix) - len(h) - 2
	if len(readable) > room {
		readable = strings.TrimRight(readable[:room], "-")
	}
	if readable == "" {
		return prefix + "-" + h
	}
	return prefix + "-" + readable + "-" + h
}

// BuildDiscoveredSession renders the AgentSession the operator creates for a session it found
// in the store.
func BuildDiscoveredSession(p *condensev1.PruningPolicy, sessionID string) *condensev1.AgentSession {
	return &condensev1.AgentSession{
		TypeMeta: metav1.TypeMeta{APIVersion: condensev1.GroupVersion.String(), Kind: "AgentSession"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      SessionObjectName(p.Name, sessionID),
			Namespace: p.Namespace,
			Labels: map[string]string{
				condensev1.LabelPolicy:     p.Name,
				condensev1.LabelDiscovered: "true",
			},
		},
		Spec: condensev1.AgentSessionSpec{
			PolicyRef: corev1.LocalObjectReference{Name: p.Name},
			SessionID: sessionID,
		},
	}
}
