// Package e2e is the whole-system test (build tag e2e): kube-apiserver with kwok, the Helm chart's
// RBAC, `condense manager`, a PruningPolicy, and `condense proxy` with Redis and the fake upstream.
// `make e2e` exports its tool paths (else it skips); child logs go to $E2E_LOG_DIR or a kept temp dir.
package e2e
