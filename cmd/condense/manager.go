package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	condensev1 "github.com/condense-dev/condense/api/v1alpha1"
	"github.com/condense-dev/condense/controllers"
	"github.com/condense-dev/condense/internal/sessionindex"
	"github.com/condense-dev/condense/internal/specs"
	"github.com/condense-dev/condense/internal/store"
)

// managerFlags are the flags of `condense manager`.
type managerFlags struct {
	metricsAddr    string
	probeAddr      string
	leaderElect    bool
	leaderElectNS  string
	image          string
	discovery      bool
	storeResync    time.Duration
	storeMinPeriod time.Duration
	policyResync   time.Duration
	development    bool
	statusInterval time.Duration
	storeAddrMap   []string
}

func init() {
	var f managerFlags
	cmd := &cobra.Command{
		Use:   "manager",
		Short: "Run the Kubernetes operator (PruningPolicy and AgentSession controllers)",
		Long: `Run the condense operator. It reconciles PruningPolicies into proxy Deployments,
Services, PodDisruptionBudgets, autoscalers, pruner workers and managed Redis, and keeps
AgentSession status in step with the session store. It uses the kubeconfig of
$KUBECONFIG, ~/.kube/config or the pod's service account; outside a cluster bind
--metrics-bind-address and --health-probe-bind-address to loopback.

Docs: ` + docsURL + `operator.md`,
		Args: positional(),
		RunE: func(cmd *cobra.Command, _ []string) error { return runManager(cmd.ErrOrStderr(), f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.metricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus metrics endpoint (\"0\" disables)")
	fl.StringVar(&f.probeAddr, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz endpoints")
	fl.BoolVar(&f.leaderElect, "leader-elect", false, "elect a leader so only one replica reconciles at a time")
	fl.StringVar(&f.leaderElectNS, "leader-election-namespace", "", "namespace of the leader election Lease (default: the pod's namespace)")
	fl.StringVar(&f.image, "image", "", "condense image for proxy and pruner pods of policies that name none (default: $"+envImage+
		", which the chart and config/manager set to the manager's own image, else "+specs.DefaultImage+")")
	fl.BoolVar(&f.discovery, "discovery", true, "create AgentSessions for sessions found in a store without one")
	fl.DurationVar(&f.storeResync, "store-resync", 30*time.Second, "list every session store at least this often")
	fl.DurationVar(&f.storeMinPeriod, "store-min-interval", time.Second, "minimum time between store listings triggered by change notifications")
	fl.DurationVar(&f.policyResync, "policy-resync", time.Minute, "re-check every PruningPolicy at least this often")
	fl.DurationVar(&f.statusInterval, "session-status-interval", 0,
		"least time between two AgentSession status writes that change only counters (0: write every change; e.g. 10s for large fleets)")
	fl.BoolVar(&f.development, "debug", false, "human-readable debug logging instead of JSON")
	fl.StringArrayVar(&f.storeAddrMap, "store-address-map", nil, "FROM=TO (host:port each, repeatable): open session stores at TO where their URL names FROM; for running the manager outside the cluster (development, tests)")
	rootCmd.AddCommand(cmd)
}

// managerScheme returns the scheme with the built-in and condense types.
func managerScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(condensev1.AddToScheme(s))
	return s
}

// envImage names the environment variable with the default image of proxy and pruner pods:
// the chart and config/manager set it to the manager's own image, so the two never skew.
const envImage = "CONDENSE_IMAGE"

// childImage is the image of proxy and pruner pods of policies that name none: the --image
// flag, else $CONDENSE_IMAGE, else specs.DefaultImage.
func childImage(flag string, getenv func(string) string) string {
	if flag != "" {
		return flag
	}
	if v := strings.TrimSpace(getenv(envImage)); v != "" {
		return v
	}
	return specs.DefaultImage
}

// serviceAccountNamespaceFile holds the namespace of a pod's service account.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// operatorNamespace is the namespace the manager's pod runs in: $POD_NAMESPACE (set by the
// chart and config/manager), else its service account's namespace; "" outside a cluster.
func operatorNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	b, err := os.ReadFile(serviceAccountNamespaceFile)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// runManager runs the operator until a signal, logging to w.
func runManager(w io.Writer, f managerFlags) error {
	var h slog.Handler = slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo})
	if f.development {
		h = slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug})
	}
	ctrl.SetLogger(logr.FromSlogHandler(h))
	log := slog.New(h).With("component", "manager")
	store.LogRedisTo(log)
	addrMap, err := parseStoreAddressMap(f.storeAddrMap)
	if err != nil {
		return err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubernetes client configuration: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, controllers.ManagerOptions(ctrl.Options{
		Scheme:                  managerScheme(),
		Metrics:                 metricsserver.Options{BindAddress: f.metricsAddr},
		HealthProbeBindAddress:  f.probeAddr,
		LeaderElection:          f.leaderElect,
		LeaderElectionID:        "condense-operator.condense.dev",
		LeaderElectionNamespace: f.leaderElectNS,
		// The manager exits right after Start returns, so giving the Lease up on shutdown is
		// safe and lets a standby replica take over without waiting for the Lease to expire.
		LeaderElectionReleaseOnCancel: true,
	}))
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	if err := controllers.Setup(mgr, controllers.Options{
		Image:                 childImage(f.image, os.Getenv),
		OperatorNamespace:     operatorNamespace(),
		OpenStore:             addrMap.opener(sessionindex.OpenRedis),
		Discovery:             f.discovery,
		StoreResync:           f.storeResync,
		StoreMinInterval:      f.storeMinPeriod,
		PolicyResync:          f.policyResync,
		SessionStatusInterval: f.statusInterval,
	}); err != nil {
		return fmt.Errorf("set up controllers: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	log.Info("starting", "apiServer", cfg.Host, "metrics", f.metricsAddr, "health", f.probeAddr,
		"leaderElection", f.leaderElect, "image", childImage(f.image, os.Getenv), "discovery", f.discovery)
	sd := onSignals(log)
	defer sd.Close()
	err = mgr.Start(sd.Context())
	sd.Stopped(err)
	return err
}
