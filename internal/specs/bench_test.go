package specs

import (
	"testing"

	condensev1 "github.com/condense-dev/condense/api/v1alpha1"
)

// BenchmarkBuildConfig measures building the proxy configuration of a policy and its hash
// (done on every PruningPolicy reconcile).
func BenchmarkBuildConfig(b *testing.B) {
	p := policy(func(p *condensev1.PruningPolicy) { p.Spec.ProtectedTools = []string{"a", "b", "c"} })
	b.ReportAllocs()
	for b.Loop() {
		c, err := BuildConfig(p)
		if err != nil {
			b.Fatal(err)
		}
		_ = c.Hash()
	}
}

// BenchmarkBuildChildren measures building every child object of a policy (ConfigMap,
// Deployments, Service, PDB, HPA, Redis StatefulSet/Service/ConfigMap).
func BenchmarkBuildChildren(b *testing.B) {
	p := policy(func(p *condensev1.PruningPolicy) {
		p.Spec.Proxy.Autoscaling = &condensev1.AutoscalingSpec{MinReplicas: 2, MaxReplicas: 8}
		p.Spec.Pruner.Replicas = 2
	})
	cfg, err := BuildConfig(p)
	if err != nil {
		b.Fatal(err)
	}
	o := BuildOptions{Image: "condense:bench"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := BuildProxyConfigMap(p, cfg); err != nil {
			b.Fatal(err)
		}
		h := cfg.Hash()
		_ = BuildProxyDeployment(p, o, PodHashes{Config: h})
		_ = BuildPrunerDeployment(p, o, PodHashes{Config: h})
		_ = BuildProxyService(p)
		_ = BuildProxyPDB(p)
		_ = BuildProxyHPA(p)
		_ = BuildRedisConfigMap(p)
		_ = BuildRedisService(p)
		_ = BuildRedisStatefulSet(p)
	}
}
