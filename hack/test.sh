#!/usr/bin/env bash
# The whole test suite, runnable on a fresh machine that has only Go: installs redis-server
# and Chromium from Debian when missing, builds the Kubernetes test binaries from Go modules
# (cached under $HOME/.cache/condense; ~15 min the first time, seconds afterwards), then runs
# every Go test including the end-to-end test on a simulated cluster.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" = 0 ] || command -v sudo >/dev/null 2>&1; then
	hack/install-redis.sh
	hack/install-chromium.sh
fi
bin=$(hack/install-k8s-tools.sh)
export KUBEBUILDER_ASSETS="$bin"
export KWOK_BIN="$bin/kwok" KWOK_STAGES="$bin/kwok-stages.yaml"
export CONDENSE_TOOLS_BIN="$bin"
go test -count=1 -timeout 20m ./...
go test -count=1 -timeout 15m -tags e2e ./test/...
