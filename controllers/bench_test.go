package controllers

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	condensev1 "github.com/condense-dev/condense/api/v1alpha1"
	"github.com/condense-dev/condense/internal/testutil/redistest"
)

// BenchmarkRenderConfig measures rendering a policy into the proxy configuration and its hash
// (done on every PruningPolicy reconcile).
func BenchmarkRenderConfig(b *testing.B) {
	p := policy(func(p *condensev1.PruningPolicy) { p.Spec.ProtectedTools = []string{"a", "b", "c"} })
	b.ReportAllocs()
	for b.Loop() {
		c, err := RenderConfig(p)
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
	cfg, err := RenderConfig(p)
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

// BenchmarkSessionIndexRefresh measures one listing of a real Redis store holding 1000
// sessions plus the change detection against the previous listing (what each rate-limited
// notification or resync costs the operator).
func BenchmarkSessionIndexRefresh(b *testing.B) {
	rds := redistest.Start(b, nil)
	st, err := OpenRedisStore(context.Background(), rds.URL())
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	for i := 0; i < 1000; i++ {
		id := fmt.Sprintf("session-%04d", i)
		if _, err := st.Commit(ctx, id, 0, []byte("state"), 0); err != nil {
			b.Fatal(err)
		}
		if err := st.IncrStats(ctx, id, map[string]int64{"requests": int64(i), "bytesBefore": 1000, "bytesAfter": 400}); err != nil {
			b.Fatal(err)
		}
	}
	x := &SessionIndex{}
	key := types.NamespacedName{Namespace: "ns", Name: "bench"}
	p := &policyStore{st: st, sessions: nil}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		x.refresh(ctx, key, p)
	}
	b.StopTimer()
	if len(p.sessions) != 1000 || p.err != nil {
		b.Fatalf("listed %d sessions, err %v", len(p.sessions), p.err)
	}
}
