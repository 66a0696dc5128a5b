#!/usr/bin/env bash
# The whole test suite, runnable on a fresh machine that has only Go: installs redis-server
# and Chromium from Debian when missing (as root, or through sudo), the agent CLIs from npm
# (hack/install-clients.sh), builds the Kubernetes test
# binaries from Go modules (cached under $HOME/.cache/condense: the first run builds them,
# later runs take seconds), then runs every Go test including the end-to-end test on a
# simulated cluster. Each stage says when it starts and how long it took.
set -euo pipefail
cd "$(dirname "$0")/.."
. hack/lib.sh
start=$SECONDS
hack/install-redis.sh
hack/install-chromium.sh
bin=$(hack/install-k8s-tools.sh)
export CONDENSE_CLIENTS_BIN=$(hack/install-clients.sh)
export KUBEBUILDER_ASSETS="$bin"
export KWOK_BIN="$bin/kwok" KWOK_STAGES="$bin/kwok-stages.yaml"
export CONDENSE_TOOLS_BIN="$bin"
# Every tool is installed now: a test that finds one missing fails instead of skipping
# (internal/testutil/needs), so a broken install cannot pass the suite with tests skipped.
export CONDENSE_REQUIRE_TOOLS=1
say "tools ready after $(since "$start"); go test ./..."
t0=$SECONDS
go test -count=1 -timeout 20m ./...
say "go test ./... took $(since "$t0")"
# The packages whose goroutines share state (request handlers and their background work,
# flush workers, store clients, concurrent replays) again under the race detector.
t0=$SECONDS
go test -race -count=1 -timeout 10m ./internal/proxy/ ./internal/flush/ ./internal/store/ ./internal/replay/
say "race-detector tests took $(since "$t0")"
# The end-to-end test only: the other packages under test/ ran above.
t0=$SECONDS
go test -count=1 -timeout 10m -tags e2e ./test/e2e/
say "end-to-end test took $(since "$t0"); make test took $(since "$start")"
