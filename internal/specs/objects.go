// Package specs builds the objects a PruningPolicy runs as and the data-plane configuration
// its pods load. Everything here is pure: no client, no I/O.
package specs

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	condensev1 "github.com/condense-dev/condense/api/v1alpha1"
	"github.com/condense-dev/condense/internal/config"
)

// Paths, environment variable names and ports inside the pods a policy runs.
const (
	// ConfigKey is the ConfigMap key holding the built configuration.
	ConfigKey = "config.yaml"
	// ConfigDir is where the configuration ConfigMap is mounted.
	ConfigDir = "/etc/condense"
	// SessionAuthDir is where the session-auth secret is mounted.
	SessionAuthDir = "/etc/condense/session-auth"
	// SessionAuthFile is the mounted HMAC secret file.
	SessionAuthFile = SessionAuthDir + "/secret"
	// EnvStoreURL carries an external store URL from its Secret.
	EnvStoreURL = "CONDENSE_STORE_URL"
	// EnvSummarizerAPIKey carries the summarizer API key from its Secret.
	EnvSummarizerAPIKey = "CONDENSE_SUMMARIZER_API_KEY"
	// EnvGoMemLimit is the Go runtime's soft memory limit, set to 90 % of a container's
	// memory limit.
	EnvGoMemLimit = "GOMEMLIMIT"
	// ProxyPort is the proxy's container and Service port.
	ProxyPort = 8080
	// MetricsPort serves Prometheus metrics.
	MetricsPort = 9090
	// HealthPort serves /healthz and /readyz.
	HealthPort = 8081
	// RedisPort is the managed Redis port.
	RedisPort = 6379
)

// ConfigPath is the full path of the mounted configuration file.
const ConfigPath = ConfigDir + "/" + ConfigKey

// LabelOperator marks the operator's own pods (value "operator"); the managed Redis's
// NetworkPolicy admits them from BuildOptions.OperatorNamespace.
const LabelOperator = condensev1.LabelComponent

// ProxyName is the name of the policy's proxy Deployment, Service, budget and autoscaler.
func ProxyName(p *condensev1.PruningPolicy) string { return p.Name + "-proxy" }

// ProxyEndpoint is the in-cluster URL agents send their requests to.
func ProxyEndpoint(p *condensev1.PruningPolicy) string {
	return fmt.Sprintf("http://%s.%s.svc:%d", ProxyName(p), p.Namespace, ProxyPort)
}

// ManagedRedisURL is the store URL of the policy's managed Redis.
func ManagedRedisURL(p *condensev1.PruningPolicy) string {
	return fmt.Sprintf("redis://%s.%s.svc:%d/0", redisName(p), p.Namespace, RedisPort)
}

func proxyConfigName(p *condensev1.PruningPolicy) string { return p.Name + "-proxy-config" }
func prunerName(p *condensev1.PruningPolicy) string      { return p.Name + "-pruner" }
func redisName(p *condensev1.PruningPolicy) string       { return p.Name + "-redis" }
func redisConfigName(p *condensev1.PruningPolicy) string { return p.Name + "-redis-config" }
func sessionTokenName(s *condensev1.AgentSession) string { return s.Name + "-token" }

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

// Child is one object a policy may own: the built object when Wanted, else an empty object
// of its type holding only the namespace and name (to be deleted if the policy owns it).
type Child struct {
	// Object is the object to apply, or the one to delete.
	Object client.Object
	// Wanted is false when the policy does not want the object.
	Wanted bool
}

// Children builds every child object of the policy, in the order they are applied.
func Children(p *condensev1.PruningPolicy, cfg *config.Config, o BuildOptions, hashes PodHashes) ([]Child, error) {
	cm, err := BuildProxyConfigMap(p, cfg)
	if err != nil {
		return nil, err
	}
	return []Child{
		child(cm, p, proxyConfigName(p)),
		child(BuildProxyDeployment(p, o, hashes), p, ProxyName(p)),
		child(BuildProxyService(p), p, ProxyName(p)),
		child(BuildProxyPDB(p), p, ProxyName(p)),
		child(BuildProxyHPA(p), p, ProxyName(p)),
		child(BuildPrunerDeployment(p, o, hashes), p, prunerName(p)),
		child(BuildRedisConfigMap(p), p, redisConfigName(p)),
		child(BuildRedisService(p), p, redisName(p)),
		child(BuildRedisStatefulSet(p), p, redisName(p)),
		child(BuildRedisNetworkPolicy(p, o), p, redisName(p)),
	}, nil
}

// child wraps what a builder returned; nil becomes an unwanted empty object named name.
func child[T any, P interface {
	*T
	client.Object
}](built P, p *condensev1.PruningPolicy, name string) Child {
	if built != nil {
		return Child{Object: built, Wanted: true}
	}
	empty := P(new(T))
	empty.SetNamespace(p.Namespace)
	empty.SetName(name)
	return Child{Object: empty}
}

func strOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
