package specs

import (
	"maps"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	condensev1 "github.com/condense-dev/condense/api/v1alpha1"
)

// AnnotationConfigHash is set on the proxy and pruner pod templates to the hash of the
// built configuration, so a configuration change rolls the pods.
const AnnotationConfigHash = "condense.dev/config-hash"

// AnnotationSecretsHash is set on the proxy and pruner pod templates to SecretsHash of the
// Secret keys the pods read at start, so rotating one of them rolls the pods.
const AnnotationSecretsHash = "condense.dev/secrets-hash"

// PodHashes are the pod template annotations that roll the proxy and pruner pods.
type PodHashes struct {
	// Config is the built configuration's hash (AnnotationConfigHash).
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

func (o BuildOptions) image(p *condensev1.PruningPolicy) string {
	if p.Spec.Proxy.Image != "" {
		return p.Spec.Proxy.Image
	}
	if o.Image != "" {
		return o.Image
	}
	return DefaultImage
}

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
