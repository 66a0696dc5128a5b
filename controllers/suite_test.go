package controllers

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	condensev1 "github.com/condense-dev/condense/api/v1alpha1"
	"github.com/condense-dev/condense/internal/store"
	"github.com/condense-dev/condense/internal/testutil/needs"
	"github.com/condense-dev/condense/internal/testutil/poll"
)

// testScheme holds the built-in and condense types.
var testScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(condensev1.AddToScheme(s))
	return s
}()

// startEnv starts a real kube-apiserver and etcd (envtest) with the condense CRDs installed,
// or skips the test when KUBEBUILDER_ASSETS is unset. The API server keeps its certificates in
// a fixed directory so that it can be restarted in place.
func startEnv(t *testing.T) (*envtest.Environment, *rest.Config, client.Client) {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		needs.Missing(t, "KUBEBUILDER_ASSETS is not set: run hack/test.sh (it builds kube-apiserver and etcd) or export it")
	}
	// Operator logs only on request (CONDENSE_TEST_LOG=1); otherwise discard them.
	if os.Getenv("CONDENSE_TEST_LOG") != "" {
		ctrl.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})))
	} else {
		ctrl.SetLogger(logr.Discard())
		store.LogRedisTo(nil) // the session index dials the test's Redis Services, which do not resolve
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		ControlPlane: envtest.ControlPlane{
			// A loaded 2-core machine can take over the 20 s default to start them.
			APIServer: &envtest.APIServer{CertDir: t.TempDir(), StopTimeout: 5 * time.Second, StartTimeout: 90 * time.Second},
			Etcd:      &envtest.Etcd{StartTimeout: 90 * time.Second},
		},
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start envtest: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Logf("stop envtest: %v", err)
		}
	})
	c, err := client.New(cfg, client.Options{Scheme: testScheme})
	if err != nil {
		t.Fatal(err)
	}
	return env, cfg, c
}

// testManager is a running operator and the object types its cache started informers for.
type testManager struct {
	ctrl.Manager
	mu        sync.Mutex
	informers []runtime.Object
}

// informerTypes returns the objects the cache's informers were created for (typed objects, or
// metav1.PartialObjectMetadata with the kind set for metadata-only informers).
func (m *testManager) informerTypes() []runtime.Object {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]runtime.Object{}, m.informers...)
}

// startManager runs the operator's controllers against cfg until the test ends, with the
// manager options of `condense manager` (ManagerOptions).
func startManager(t *testing.T, cfg *rest.Config, o Options) *testManager {
	t.Helper()
	skipNameValidation := true
	tm := &testManager{}
	mgr, err := ctrl.NewManager(cfg, ManagerOptions(ctrl.Options{
		Scheme:                 testScheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             crconfig.Controller{SkipNameValidation: &skipNameValidation},
		Cache: cache.Options{NewInformer: func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration,
			idx toolscache.Indexers) toolscache.SharedIndexInformer {
			tm.mu.Lock()
			tm.informers = append(tm.informers, obj)
			tm.mu.Unlock()
			return toolscache.NewSharedIndexInformer(lw, obj, resync, idx)
		}},
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := Setup(mgr, o); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Logf("manager: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("manager did not stop within 30s")
		}
	})
	tm.Manager = mgr
	return tm
}

// eventually polls cond every 100ms until it returns true or timeout passes.
var eventually = poll.Until
