// Package e2e holds the whole-system test of condense (build tag e2e): a real kube-apiserver,
// etcd, kube-controller-manager and kube-scheduler with kwok simulating a node; the Helm
// chart's CRDs and RBAC applied with the real helm and kubectl; the real `condense manager`
// binary running with exactly the chart's ServiceAccount permissions; a PruningPolicy whose
// proxy Deployment and managed Redis StatefulSet become Available; then `condense proxy`,
// started from the ConfigMap the operator rendered, in front of the fake LLM upstream with a
// real redis-server, driven by anthropic-sdk-go; `kubectl get agentsessions` shows the session
// with its reclaim and u/m/o/b columns; deleting the policy garbage-collects everything it owns.
//
// Run it with `make e2e` (or hack/test.sh), which exports KUBEBUILDER_ASSETS, KWOK_BIN,
// KWOK_STAGES and CONDENSE_TOOLS_BIN; without them the test skips. Child process logs go to a
// temporary directory that is printed (and kept) when the test fails, or to $E2E_LOG_DIR.
package e2e
