//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/go-logr/logr"
	"github.com/tidwall/gjson"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	condensev1 "github.com/condense-dev/condense/api/v1alpha1"
	"github.com/condense-dev/condense/internal/config"
	"github.com/condense-dev/condense/internal/specs"
	"github.com/condense-dev/condense/internal/testutil/needs"
	"github.com/condense-dev/condense/internal/testutil/redistest"
	"github.com/condense-dev/condense/internal/upstreamfake"
)

const (
	operatorNS  = "condense-system"
	release     = "condense" // the Helm release; the chart names its ServiceAccount after it
	agentsNS    = "agents"
	policyName  = "team"
	sessionID   = "e2e-agent-session-1"
	chartDir    = "../../charts/condense"
	kubeVersion = "1.37.2"
)

// operatorUser is the identity the API server gives a pod running as the chart's
// ServiceAccount; the manager runs with exactly this identity and no other rights.
var (
	operatorUser   = "system:serviceaccount:" + operatorNS + ":" + release
	operatorGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + operatorNS}
)

// The policy under test: a managed Redis with persistence (PVC + AOF), two proxy replicas,
// in-proxy summarizing with the session's own model (model "default": the fake upstream writes
// the summaries, with the client's credentials), and a small batch threshold so the short
// conversation below gets summarized. The conversation's four tasks are tiny, so the cache-aware
// policy would (rightly) defer every flush as costing more cache re-writes than it saves; it is
// turned off here, and its decision is tested in internal/proxy and internal/cachepolicy.
const policyYAML = `apiVersion: condense.dev/v1alpha1
kind: PruningPolicy
metadata:
  name: ` + policyName + `
  namespace: ` + agentsNS + `
spec:
  minBatchChars: 200
  trigger:
    cacheAware: false
  summarizer:
    model: default
  proxy:
    replicas: 2
  redis:
    managed:
      persistence: true
      storage: 1Gi
`

func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(condensev1.AddToScheme(s))
	return s
}

// TestE2EWholeSystem runs operator, proxy, Redis and an agent client together on a simulated
// cluster; see the package documentation.
func TestE2EWholeSystem(t *testing.T) {
	tc := requireToolchain(t)
	if !redistest.Available() {
		needs.Missing(t, "redis-server not found in PATH (hack/install-redis.sh installs it)")
	}
	t0 := time.Now()
	logf.SetLogger(logr.Discard()) // the test's own clients; the operator under test logs to its file
	logs := logDir(t)
	work := t.TempDir()
	built := buildCondense(work)
	t.Cleanup(func() { _, _ = built() }) // never remove work under a running build
	// Generous: the first build of the condense binary on a busy machine can take minutes; the
	// waits below have their own, tighter limits.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	// --- control plane: envtest's kube-apiserver + etcd (kcm, scheduler and kwok follow the CRDs) ---
	env := &envtest.Environment{Scheme: scheme()}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("envtest: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	kubeconfig := func(name string, user envtest.User) (string, *envtest.AuthenticatedUser) {
		u, err := env.AddUser(user, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := u.KubeConfig()
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(work, name+".kubeconfig")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p, u
	}
	adminKC, _ := kubeconfig("admin", envtest.User{Name: "e2e-admin", Groups: []string{"system:masters"}})
	operatorKC, operatorAuth := kubeconfig("operator", envtest.User{Name: operatorUser, Groups: operatorGroups})
	t.Logf("control plane up after %v", time.Since(t0).Round(time.Millisecond))

	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	// KUBECACHEDIR keeps kubectl's discovery cache out of $HOME.
	kenv := []string{"KUBECONFIG=" + adminKC, "KUBECACHEDIR=" + filepath.Join(work, "kube-cache")}
	kubectl := func(stdin []byte, args ...string) string {
		t.Helper()
		out, err := run(ctx, kenv, stdin, tc.kubectl, args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	// --- the chart's CRDs and RBAC, rendered by helm and applied by kubectl ---
	kubectl(nil, "create", "namespace", operatorNS)
	kubectl(nil, "create", "namespace", agentsNS)
	helm := func(templates ...string) string {
		t.Helper()
		args := []string{"template", release, chartDir, "--namespace", operatorNS, "--kube-version", kubeVersion}
		for _, tpl := range templates {
			args = append(args, "--show-only", tpl)
		}
		out, err := run(ctx, []string{"HELM_CACHE_HOME=" + work, "HELM_CONFIG_HOME=" + work, "HELM_DATA_HOME=" + work}, nil, tc.helm, args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	crds := helm("templates/crds/condense.dev_pruningpolicies.yaml", "templates/crds/condense.dev_agentsessions.yaml")
	rbac := helm("templates/serviceaccount.yaml", "templates/rbac.yaml")
	for _, kind := range []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} {
		if !strings.Contains(rbac, "\nkind: "+kind+"\n") {
			t.Fatalf("helm template rendered no %s:\n%s", kind, rbac)
		}
	}
	// Server-side apply: the CRDs are too large for client-side apply's last-applied annotation.
	kubectl([]byte(crds), "apply", "--server-side", "--field-manager=helm-e2e", "-f", "-")
	kubectl(nil, "wait", "--for=condition=Established", "--timeout=30s",
		"crd/pruningpolicies.condense.dev", "crd/agentsessions.condense.dev")
	t.Logf("chart CRDs established after %v", time.Since(t0).Round(time.Millisecond))
	// Without the chart's RBAC the operator's identity may do nothing: the RBAC applied next is
	// what the rest of the test runs on.
	opClient, err := client.New(operatorAuth.Config(), client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	var probe condensev1.PruningPolicyList
	if err := opClient.List(ctx, &probe, client.InNamespace(agentsNS)); !apierrors.IsForbidden(err) {
		t.Fatalf("before the chart's RBAC the operator identity must be forbidden to list PruningPolicies, got %v", err)
	}
	kubectl([]byte(rbac), "apply", "--server-side", "--field-manager=helm-e2e", "-f", "-")
	if out := kubectl(nil, "auth", "can-i", "create", "statefulsets.apps", "-n", agentsNS, "--as", operatorUser,
		"--as-group", operatorGroups[0]); strings.TrimSpace(out) != "yes" {
		t.Fatalf("kubectl auth can-i for the operator identity: %q", out)
	}
	// The controller manager starts after the CRDs exist, so its garbage collector watches
	// PruningPolicies from the start instead of discovering them at its next 30s resync.
	kcm := startProc(t, logs, "kube-controller-manager", nil, filepath.Join(tc.assets, "kube-controller-manager"),
		"--kubeconfig="+adminKC, "--secure-port=0", "--leader-elect=false", "--use-service-account-credentials=false",
		"--controllers=*")
	sched := startProc(t, logs, "kube-scheduler", nil, filepath.Join(tc.assets, "kube-scheduler"),
		"--kubeconfig="+adminKC, "--secure-port=0", "--leader-elect=false")
	kwok := startProc(t, logs, "kwok", nil, tc.kwok, "--kubeconfig="+adminKC, "--config="+tc.kwokStages,
		"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--cidr=10.244.0.0/16", "--node-ip=10.0.0.1", "--server-address=127.0.0.1:0")
	cluster := []*proc{kcm, sched, kwok}

	createFakeNode(ctx, t, c)
	t.Logf("kube-controller-manager, kube-scheduler and kwok started after %v", time.Since(t0).Round(time.Millisecond))
	// A volume for the managed Redis's claim (nothing provisions volumes in a simulated cluster).
	kubectl([]byte(`apiVersion: v1
kind: PersistentVolume
metadata: {name: e2e-redis-pv}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: ""
  hostPath: {path: /tmp/e2e-redis-pv}
`), "apply", "-f", "-")
	t.Logf("simulated cluster ready (node, volume, chart CRDs and RBAC) after %v", time.Since(t0).Round(time.Millisecond))

	// --- local stand-ins for what simulated pods cannot run: Redis and the LLM provider ---
	rds := redistest.Start(t, nil)
	up := upstreamfake.Start()
	t.Cleanup(up.Close)
	agent := newScriptedAgentModel()
	up.SetResponder(agent.reply)

	// --- the operator: the real binary, as the chart's ServiceAccount ---
	bin, err := built()
	if err != nil {
		t.Fatal(err)
	}
	inCluster := fmt.Sprintf("%s-redis.%s.svc:%d", policyName, agentsNS, specs.RedisPort)
	metricsAddr := freeAddr(t)
	manager := startProc(t, logs, "condense-manager", []string{"KUBECONFIG=" + operatorKC}, bin, "manager",
		"--metrics-bind-address="+metricsAddr, "--health-probe-bind-address=0",
		"--leader-elect", "--leader-election-namespace="+operatorNS,
		"--store-resync=2s", "--store-min-interval=200ms", "--policy-resync=5s",
		"--store-address-map="+inCluster+"="+rds.Addr)
	watched := append([]*proc{manager}, cluster...)

	// --- a PruningPolicy: proxy Deployment and Redis StatefulSet Available, policy Ready ---
	tPolicy := time.Now()
	kubectl([]byte(policyYAML), "apply", "-f", "-")
	key := types.NamespacedName{Namespace: agentsNS, Name: policyName}
	eventually(t, 60*time.Second, "proxy Deployment Available", func() (bool, string) {
		var d appsv1.Deployment
		if err := c.Get(ctx, types.NamespacedName{Namespace: agentsNS, Name: policyName + "-proxy"}, &d); err != nil {
			return false, err.Error()
		}
		for _, cond := range d.Status.Conditions {
			if cond.Type == appsv1.DeploymentAvailable && cond.Status == corev1.ConditionTrue && d.Status.ReadyReplicas == 2 {
				return true, ""
			}
		}
		return false, fmt.Sprintf("status %+v", d.Status)
	}, watched...)
	eventually(t, 60*time.Second, "Redis StatefulSet ready", func() (bool, string) {
		var s appsv1.StatefulSet
		if err := c.Get(ctx, types.NamespacedName{Namespace: agentsNS, Name: policyName + "-redis"}, &s); err != nil {
			return false, err.Error()
		}
		return s.Status.AvailableReplicas == 1 && s.Status.ReadyReplicas == 1, fmt.Sprintf("status %+v", s.Status)
	}, watched...)
	kubectl(nil, "wait", "-n", agentsNS, "--for=condition=Ready", "--timeout=60s", "pruningpolicy/"+policyName)
	var policy condensev1.PruningPolicy
	if err := c.Get(ctx, key, &policy); err != nil {
		t.Fatal(err)
	}
	for _, ct := range []string{condensev1.ConditionReady, condensev1.ConditionProxyAvailable, condensev1.ConditionStoreReachable} {
		if !condTrue(policy.Status.Conditions, ct) {
			t.Fatalf("policy condition %s not True: %+v", ct, policy.Status.Conditions)
		}
	}
	t.Logf("policy Ready (proxy 2/2, Redis 1/1, store reachable) %v after apply\n%s", time.Since(tPolicy).Round(time.Millisecond),
		kubectl(nil, "get", "pruningpolicies", "-n", agentsNS))

	// Leader election ran through the chart's namespaced Role.
	if holder := kubectl(nil, "get", "lease", "condense-operator.condense.dev", "-n", operatorNS,
		"-o", "jsonpath={.spec.holderIdentity}"); strings.TrimSpace(holder) == "" {
		t.Fatal("the operator's leader election Lease has no holder")
	}

	// --- the proxy, from exactly the ConfigMap the operator rendered ---
	var cm corev1.ConfigMap
	if err := c.Get(ctx, types.NamespacedName{Namespace: agentsNS, Name: policyName + "-proxy-config"}, &cm); err != nil {
		t.Fatal(err)
	}
	rawCfg := cm.Data[specs.ConfigKey]
	cfgPath := localProxyConfig(t, work, rawCfg)
	loaded, err := config.Load(cfgPath)
	if err != nil {
		t.Fatalf("the rendered ConfigMap does not load: %v\n%s", err, rawCfg)
	}
	if loaded.Store.URL != "redis://"+inCluster+"/0" || loaded.Policy.Name != policyName || loaded.Engine.MinBatchChars != 200 ||
		loaded.Summarizer.Model != "default" {
		t.Fatalf("rendered configuration does not reflect the policy: store %q policy %+v minBatchChars %d summarizer %q",
			loaded.Store.URL, loaded.Policy, loaded.Engine.MinBatchChars, loaded.Summarizer.Model)
	}
	px := startProc(t, logs, "condense-proxy", nil, bin, "proxy", "--config", cfgPath,
		"--listen", "127.0.0.1:0", "--anthropic-upstream", up.URL, "--store", rds.URL()+"/0")
	addrs := px.listenAddrs(t, 3, 30*time.Second)
	watched = append(watched, px)

	// --- an agent conversation through the proxy with anthropic-sdk-go ---
	tConv := time.Now()
	ac := anthropic.NewClient(aoption.WithBaseURL("http://"+addrs["proxy"]), aoption.WithAPIKey("sk-ant-e2e"),
		aoption.WithHeader("X-Condense-Session", sessionID), aoption.WithMaxRetries(0))
	metricsURL := "http://" + addrs["metrics"] + "/metrics"
	// An agent thinks between tasks; the test instead waits until the proxy reports the flush
	// its final answer started, so every prompt meets a settled state (metrics, not timing).
	flushed := func(n int) {
		eventually(t, 30*time.Second, fmt.Sprintf("%d flushes with outcome flushed", n), func() (bool, string) {
			v := metricValue(httpGet(t, metricsURL), `condense_flushes_total{outcome="flushed"}`)
			return v >= float64(n), fmt.Sprintf("condense_flushes_total{outcome=\"flushed\"} = %v", v)
		}, watched...)
	}
	bodies, history := converse(ctx, t, &ac, agent, 4, flushed)
	sizes := make([]int, len(bodies))
	for i, b := range bodies {
		sizes[i] = len(b)
	}
	t.Logf("conversation of %d model requests in %v; upstream body sizes: %v", len(bodies), time.Since(tConv).Round(time.Millisecond), sizes)
	if agent.summaries.Load() == 0 {
		t.Fatal("the proxy never asked the (fake) session model for a summary")
	}
	// Request 2k is task k+1's prompt, 2k+1 its tool result: once a task's flush is done, its
	// tool output never reaches the provider verbatim again, while the current one always does.
	for i, body := range bodies {
		task := i/2 + 1
		for earlier := 1; earlier < task; earlier++ {
			if strings.Contains(body, fmt.Sprintf("task-%d line 040", earlier)) {
				t.Errorf("request %d (task %d) still carries task %d's tool output verbatim (%d bytes)", i+1, task, earlier, len(body))
			}
		}
		if i%2 == 1 && !strings.Contains(body, fmt.Sprintf("task-%d line 040", task)) {
			t.Errorf("request %d lost the current tool output of task %d", i+1, task)
		}
		if i >= 2 && i%2 == 0 && len(body) >= len(bodies[i-1]) {
			t.Errorf("request %d (%d bytes) is not smaller than request %d (%d bytes)", i+1, len(body), i, len(bodies[i-1]))
		}
	}
	metrics := httpGet(t, metricsURL)
	for _, m := range []string{"condense_requests_total", "condense_requests_pruned_total"} {
		if !strings.Contains(metrics, m) {
			t.Errorf("proxy /metrics lacks %s", m)
		}
	}

	// A client that sends a tool result nothing asked for: the proxy sweeps it so the provider
	// does not reject the request, and records an orphan-sweep diagnostic (the "O" column).
	orphanMsg := anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_e2e_stale", "stale output", false),
		anthropic.NewTextBlock("Carry on."))
	if _, err := ac.Messages.New(ctx, anthropic.MessageNewParams{Model: "claude-sonnet-e2e", MaxTokens: 1024,
		System: []anthropic.TextBlockParam{{Text: "You are a coding agent."}}, Tools: []anthropic.ToolUnionParam{bashTool},
		Messages: append(history, orphanMsg)}); err != nil {
		t.Fatalf("request with an orphan tool result: %v", err)
	}
	if strings.Contains(agent.lastAgentBody(), "toolu_e2e_stale") {
		t.Fatal("the orphan tool result reached the provider")
	}

	// --- kubectl get agentsessions: the session, its reclaim and u/m/o/b columns ---
	sessName := specs.SessionObjectName(policyName, sessionID)
	var table string
	eventually(t, 30*time.Second, "kubectl get agentsessions to show the session with reclaim > 0", func() (bool, string) {
		out, err := run(ctx, kenv, nil, tc.kubectl, "get", "agentsessions", "-n", agentsNS)
		if err != nil {
			return false, err.Error()
		}
		table = out
		row, ok := tableRow(out, sessName)
		if !ok {
			return false, out
		}
		reclaim, err := strconv.Atoi(row["RECLAIM"])
		return err == nil && reclaim > 0 && row["O"] == "1", out
	}, watched...)
	t.Logf("kubectl get agentsessions:\n%s", table)
	hdr := strings.Fields(strings.SplitN(table, "\n", 2)[0])
	if strings.Join(hdr, " ") != "NAME POLICY ACTIVE RECLAIM U M O B AGE" {
		t.Fatalf("agentsessions columns: %v", hdr)
	}
	row, _ := tableRow(table, sessName)
	for col, want := range map[string]string{"U": "0", "M": "0", "O": "1", "B": "0"} {
		if row[col] != want {
			t.Errorf("column %s is %q, want %s", col, row[col], want)
		}
	}
	if row["POLICY"] != policyName || row["ACTIVE"] != "true" {
		t.Fatalf("session row %v", row)
	}
	var sess condensev1.AgentSession
	if err := c.Get(ctx, types.NamespacedName{Namespace: agentsNS, Name: sessName}, &sess); err != nil {
		t.Fatal(err)
	}
	if sess.Spec.SessionID != sessionID || sess.Status.Requests < int64(len(bodies)) || sess.Status.BytesAfter >= sess.Status.BytesBefore {
		t.Fatalf("AgentSession %s: spec %+v status %+v", sessName, sess.Spec, sess.Status)
	}
	if !condTrue(sess.Status.Conditions, condensev1.ConditionDegraded) || !condTrue(sess.Status.Conditions, condensev1.ConditionReady) {
		t.Fatalf("AgentSession %s conditions: want Ready and Degraded (an orphan sweep was recorded): %+v", sessName, sess.Status.Conditions)
	}
	eventually(t, 30*time.Second, "policy status to count the session and its diagnostic", func() (bool, string) {
		var p condensev1.PruningPolicy
		if err := c.Get(ctx, key, &p); err != nil {
			return false, err.Error()
		}
		return p.Status.Sessions == 1 && p.Status.Diagnostics.Orphans == 1,
			fmt.Sprintf("status.sessions = %d, status.diagnostics = %+v", p.Status.Sessions, p.Status.Diagnostics)
	}, watched...)
	t.Logf("kubectl get pruningpolicies:\n%s", kubectl(nil, "get", "pruningpolicies", "-n", agentsNS))
	if got := operatorMetrics(t, "http://"+metricsAddr+"/metrics"); !strings.Contains(got, "condense_operator_") {
		t.Errorf("operator /metrics exports no condense_operator_* series")
	}

	// --- delete the policy: the real garbage collector removes everything it owns ---
	owned := ownedObjects(ctx, t, c, policy.UID)
	if len(owned) < 6 {
		t.Fatalf("expected the policy to own at least proxy Deployment, Redis StatefulSet, Services, ConfigMaps, PDB and the AgentSession; got %v", owned)
	}
	tDel := time.Now()
	kubectl(nil, "delete", "-n", agentsNS, "pruningpolicy/"+policyName, "--wait=true", "--timeout=60s")
	eventually(t, 60*time.Second, "garbage collection of the policy's objects", func() (bool, string) {
		var left []string
		for _, o := range owned {
			obj := o.obj.DeepCopyObject().(client.Object)
			if err := c.Get(ctx, client.ObjectKeyFromObject(o.obj), obj); err == nil {
				left = append(left, o.String())
			} else if !apierrors.IsNotFound(err) {
				return false, err.Error()
			}
		}
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(agentsNS)); err != nil {
			return false, err.Error()
		}
		for _, p := range pods.Items {
			left = append(left, "Pod/"+p.Name)
		}
		return len(left) == 0, fmt.Sprintf("still present: %v", left)
	}, watched...)
	t.Logf("policy and its %d owned objects (and their pods) gone %v after delete; whole test %v",
		len(owned), time.Since(tDel).Round(time.Millisecond), time.Since(t0).Round(time.Millisecond))
}

// createFakeNode registers the node kwok simulates.
func createFakeNode(ctx context.Context, t *testing.T, c client.Client) {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "kwok-node-0",
		Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
		Labels: map[string]string{"kubernetes.io/hostname": "kwok-node-0", "kubernetes.io/os": "linux",
			"kubernetes.io/arch": "amd64", "type": "kwok"}}}
	if err := c.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	node.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"), corev1.ResourcePods: resource.MustParse("110")}
	node.Status.Allocatable = node.Status.Capacity
	if err := c.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
}

// localProxyConfig writes the rendered configuration for a local process. Only the listen
// addresses change (the pod's fixed ports may be taken on a shared machine: every listener
// gets a free loopback port, reported in the log); everything else stays as rendered, and the
// upstream and store addresses are overridden with the proxy's own flags.
func localProxyConfig(t *testing.T, dir, rendered string) string {
	t.Helper()
	var doc map[string]any
	if err := yaml.Unmarshal([]byte(rendered), &doc); err != nil {
		t.Fatalf("rendered ConfigMap is not YAML: %v", err)
	}
	listen, _ := doc["listen"].(map[string]any)
	if listen == nil {
		t.Fatalf("rendered configuration has no listen section:\n%s", rendered)
	}
	listen["metrics"], listen["health"] = "127.0.0.1:0", "127.0.0.1:0"
	b, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "proxy-config.yaml")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func condTrue(conds []metav1.Condition, typ string) bool {
	for _, c := range conds {
		if c.Type == typ {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

// tableRow finds the row named name in kubectl's table output and maps header -> cell.
func tableRow(table, name string) (map[string]string, bool) {
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) < 2 {
		return nil, false
	}
	hdr := strings.Fields(lines[0])
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) != len(hdr) || f[0] != name {
			continue
		}
		row := map[string]string{}
		for i, h := range hdr {
			row[h] = f[i]
		}
		return row, true
	}
	return nil, false
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return string(b)
}

// operatorMetrics reads the manager's metrics endpoint (its port was chosen free before start).
func operatorMetrics(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Errorf("operator metrics: %v", err)
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// metricValue returns the value of one exact series in a Prometheus text exposition (0 when absent).
func metricValue(exposition, series string) float64 {
	for _, l := range strings.Split(exposition, "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	return 0
}

// ownedRef is one object the policy owns.
type ownedRef struct {
	kind string
	obj  client.Object
}

func (o ownedRef) String() string { return o.kind + "/" + o.obj.GetName() }

// ownedObjects lists the objects in the agents namespace whose owner is the policy.
func ownedObjects(ctx context.Context, t *testing.T, c client.Client, uid types.UID) []ownedRef {
	t.Helper()
	var out []ownedRef
	add := func(kind string, list client.ObjectList, items func() []client.Object) {
		if err := c.List(ctx, list, client.InNamespace(agentsNS)); err != nil {
			t.Fatal(err)
		}
		for _, o := range items() {
			for _, ref := range o.GetOwnerReferences() {
				if ref.UID == uid {
					out = append(out, ownedRef{kind: kind, obj: o})
				}
			}
		}
	}
	var deps appsv1.DeploymentList
	add("Deployment", &deps, func() (r []client.Object) {
		for i := range deps.Items {
			r = append(r, &deps.Items[i])
		}
		return
	})
	var sts appsv1.StatefulSetList
	add("StatefulSet", &sts, func() (r []client.Object) {
		for i := range sts.Items {
			r = append(r, &sts.Items[i])
		}
		return
	})
	var svcs corev1.ServiceList
	add("Service", &svcs, func() (r []client.Object) {
		for i := range svcs.Items {
			r = append(r, &svcs.Items[i])
		}
		return
	})
	var cms corev1.ConfigMapList
	add("ConfigMap", &cms, func() (r []client.Object) {
		for i := range cms.Items {
			r = append(r, &cms.Items[i])
		}
		return
	})
	var pdbs policyv1.PodDisruptionBudgetList
	add("PodDisruptionBudget", &pdbs, func() (r []client.Object) {
		for i := range pdbs.Items {
			r = append(r, &pdbs.Items[i])
		}
		return
	})
	var sess condensev1.AgentSessionList
	add("AgentSession", &sess, func() (r []client.Object) {
		for i := range sess.Items {
			r = append(r, &sess.Items[i])
		}
		return
	})
	kinds := map[string]bool{}
	for _, o := range out {
		kinds[o.kind] = true
	}
	for _, k := range []string{"Deployment", "StatefulSet", "Service", "ConfigMap", "PodDisruptionBudget", "AgentSession"} {
		if !kinds[k] {
			t.Fatalf("the policy owns no %s (owned: %v)", k, out)
		}
	}
	return out
}

// scriptedAgentModel answers the fake upstream's requests: agent requests (they carry tools)
// follow a task script — a user prompt gets a bash call, a tool result gets a final answer —
// and summarizer requests (no tools) get a short summary.
type scriptedAgentModel struct {
	calls     atomic.Int64
	summaries atomic.Int64
	last      atomic.Value // string: the last agent request body
}

func newScriptedAgentModel() *scriptedAgentModel { return &scriptedAgentModel{} }

func (m *scriptedAgentModel) reply(req upstreamfake.Recorded) upstreamfake.Reply {
	if !gjson.GetBytes(req.Body, "tools").Exists() {
		m.summaries.Add(1)
		return upstreamfake.Reply{Text: "Ran the build step; output was routine progress lines, no errors."}
	}
	m.last.Store(string(req.Body))
	lastMsg := gjson.GetBytes(req.Body, "messages.@reverse.0")
	if lastMsg.Get(`content.#(type=="tool_result")`).Exists() {
		return upstreamfake.Reply{Text: "Step finished without errors."}
	}
	n := m.calls.Add(1)
	return upstreamfake.Reply{Text: "Running it.", ToolCalls: []upstreamfake.ToolCall{{
		ID: fmt.Sprintf("toolu_e2e_%02d", n), Name: "bash", Input: fmt.Sprintf(`{"cmd":"make task-%d"}`, n)}}}
}

func (m *scriptedAgentModel) lastAgentBody() string {
	s, _ := m.last.Load().(string)
	return s
}

var bashTool = anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{Name: "bash", Description: anthropic.String("run a shell command"),
	InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"cmd": map[string]any{"type": "string"}}}}}

// toolOutput is a build log large enough to be summarized and pruned.
func toolOutput(task int) string {
	var b strings.Builder
	for i := 0; i < 80; i++ {
		fmt.Fprintf(&b, "task-%d line %03d: compiling package %d of 80, nothing the model needs to read twice\n", task, i, i)
	}
	return b.String()
}

// converse runs tasks prompt -> tool call -> tool result -> final answer, alternating JSON
// and SSE responses; after task n's final answer it calls flushed(n). It returns the body of
// each agent request the upstream received and the conversation so far.
func converse(ctx context.Context, t *testing.T, c *anthropic.Client, m *scriptedAgentModel, tasks int, flushed func(n int)) ([]string, []anthropic.MessageParam) {
	t.Helper()
	var msgs []anthropic.MessageParam
	var bodies []string
	send := func(stream bool) *anthropic.Message {
		t.Helper()
		params := anthropic.MessageNewParams{Model: "claude-sonnet-e2e", MaxTokens: 1024,
			System: []anthropic.TextBlockParam{{Text: "You are a coding agent."}},
			Tools:  []anthropic.ToolUnionParam{bashTool}, Messages: msgs}
		var msg *anthropic.Message
		if stream {
			st := c.Messages.NewStreaming(ctx, params)
			var acc anthropic.Message
			for st.Next() {
				if err := acc.Accumulate(st.Current()); err != nil {
					t.Fatalf("accumulate: %v", err)
				}
			}
			if err := st.Err(); err != nil {
				t.Fatalf("stream through the proxy: %v", err)
			}
			msg = &acc
		} else {
			var err error
			if msg, err = c.Messages.New(ctx, params); err != nil {
				t.Fatalf("messages.new through the proxy: %v", err)
			}
		}
		bodies = append(bodies, m.lastAgentBody())
		return msg
	}
	for task := 1; task <= tasks; task++ {
		stream := task%2 == 0
		msgs = append(msgs, anthropic.NewUserMessage(anthropic.NewTextBlock(fmt.Sprintf("Please do task %d.", task))))
		call := send(stream)
		if call.StopReason != anthropic.StopReasonToolUse {
			t.Fatalf("task %d: want a tool call, got %+v", task, call.Content)
		}
		var id string
		for _, b := range call.Content {
			if b.Type == "tool_use" {
				id = b.ID
			}
		}
		msgs = append(msgs, call.ToParam(), anthropic.NewUserMessage(anthropic.NewToolResultBlock(id, toolOutput(task), false)))
		final := send(stream)
		if final.StopReason != anthropic.StopReasonEndTurn || len(final.Content) == 0 {
			t.Fatalf("task %d: want a final answer, got %+v", task, final)
		}
		msgs = append(msgs, final.ToParam())
		flushed(task)
	}
	return bodies, msgs
}
