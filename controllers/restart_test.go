package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	condensev1 "github.com/condense-dev/condense/api/v1alpha1"
	"github.com/condense-dev/condense/internal/config"
	"github.com/condense-dev/condense/internal/specs"
)

// TestAPIServerRestart stops the kube-apiserver under a running operator and starts it again
// (same etcd, same certificates): the operator must pick up the changes made before, during
// recovery and after, without being restarted itself.
func TestAPIServerRestart(t *testing.T) {
	env, cfg, c := startEnv(t)
	startManager(t, cfg, Options{Image: "condense:test", StoreResync: time.Second, PolicyResync: 2 * time.Second})
	ctx := context.Background()
	ns := newNamespace(t, c)
	p := &condensev1.PruningPolicy{ObjectMeta: metav1.ObjectMeta{Name: "survivor", Namespace: ns}}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "proxy deployment", func() (bool, string) {
		var d appsv1.Deployment
		err := get(ctx, c, ns, "survivor-proxy", &d)
		return err == nil, fmt.Sprint(err)
	})

	// With watches open the API server may not finish a graceful shutdown within its stop
	// timeout; it is then killed, which is the harsher restart.
	if err := env.ControlPlane.APIServer.Stop(); err != nil {
		t.Logf("stop apiserver: %v (killed)", err)
	}
	time.Sleep(2 * time.Second) // the operator's watches and reconciles fail meanwhile
	if err := env.ControlPlane.APIServer.Start(); err != nil {
		t.Fatalf("restart apiserver: %v", err)
	}

	// Changes after the restart are reconciled by the same operator process.
	eventually(t, 60*time.Second, "policy update after restart", func() (bool, string) {
		var cur condensev1.PruningPolicy
		if err := get(ctx, c, ns, "survivor", &cur); err != nil {
			return false, err.Error()
		}
		cur.Spec.MinBatchChars = new(int32(777))
		if err := c.Update(ctx, &cur); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	eventually(t, 60*time.Second, "config re-rendered after restart", func() (bool, string) {
		var cm corev1.ConfigMap
		if err := get(ctx, c, ns, "survivor-proxy-config", &cm); err != nil {
			return false, err.Error()
		}
		cfg, err := config.Parse([]byte(cm.Data[specs.ConfigKey]))
		if err != nil {
			return false, err.Error()
		}
		return cfg.Engine.MinBatchChars == 777, fmt.Sprintf("minBatchChars=%d", cfg.Engine.MinBatchChars)
	})
	second := &condensev1.PruningPolicy{ObjectMeta: metav1.ObjectMeta{Name: "newcomer", Namespace: ns}}
	if err := c.Create(ctx, second); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "new policy reconciled after restart", func() (bool, string) {
		var d appsv1.Deployment
		err := get(ctx, c, ns, "newcomer-proxy", &d)
		return err == nil, fmt.Sprint(err)
	})
}
