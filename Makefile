# condense — developer entry points. `make test` is the whole suite (what CI runs).
SHELL := /usr/bin/env bash
GO ?= go
PKGS := ./...
# The directory of the Kubernetes tools, built on first use (its errors are shown and stop make).
TOOLS_BIN = set -o pipefail; bin=$$(hack/install-k8s-tools.sh controller-gen kustomize helm | tail -n 1); test -x "$$bin/controller-gen"

.PHONY: all build test lint bench fuzz generate manifests e2e loadtest bench-corpus verify-generated verify-corpus

all: lint build

## build: the static condense binary in bin/
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o bin/condense ./cmd/condense

## test: every test, installing what they need (redis-server, Chromium, the k8s test binaries)
test:
	hack/test.sh

## lint: gofmt, go vet and a tidy go.mod
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt wants to change:"; echo "$$out"; exit 1; fi
	$(GO) mod tidy -diff
	$(GO) vet $(PKGS)
	$(GO) vet -tags loadtest ./internal/proxy/

## bench: every Go benchmark, 6 runs each for benchstat (results in bench.out)
bench:
	set -o pipefail; $(GO) test -run '^$$' -bench . -benchmem -count 6 $(PKGS) | tee bench.out

## fuzz: every fuzz target for FUZZTIME (default 60s) each, the wire/encoding-json oracle for ORACLE_FUZZTIME (10m)
fuzz:
	hack/fuzz.sh

## generate: deepcopy code for the API types
generate:
	$(TOOLS_BIN); "$$bin"/controller-gen object:headerFile=hack/boilerplate.go.txt paths=./api/...

## manifests: CRDs and RBAC under config/
manifests:
	$(TOOLS_BIN); "$$bin"/controller-gen crd:allowDangerousTypes=true rbac:roleName=manager paths=./api/... paths=./controllers/... \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	hack/sync-chart.sh

## verify-generated: fail when `make generate manifests` changes or adds files
verify-generated: generate manifests
	git diff --exit-code -- api config charts
	@out=$$(git status --porcelain --untracked-files=all -- api config charts); if [ -n "$$out" ]; then echo "generated files not committed:"; echo "$$out"; exit 1; fi

## e2e: the whole-system test on a simulated cluster (also part of `make test`)
e2e:
	bin=$$(hack/install-k8s-tools.sh); KUBEBUILDER_ASSETS=$$bin KWOK_BIN=$$bin/kwok KWOK_STAGES=$$bin/kwok-stages.yaml \
		CONDENSE_TOOLS_BIN=$$bin CONDENSE_REQUIRE_TOOLS=1 $(GO) test -count=1 -tags e2e -v ./test/e2e/

## loadtest: 200 concurrent agent sessions, each request sent direct and through a condense proxy process (not in CI; docs/performance.md "Proxy load")
loadtest:
	$(GO) test -count=1 -tags loadtest -run LoadTest -v -timeout 30m ./internal/proxy/...

## bench-corpus: replay every corpus file and write docs/benchmarks/corpus.md
bench-corpus:
	$(GO) run ./cmd/condense replay ../shared/corpus/raw --markdown docs/benchmarks/corpus.md

## verify-corpus: run the README's main job and fail when its report differs from docs/benchmarks/corpus.md
verify-corpus:
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
		$(GO) run ./cmd/condense replay ../shared/corpus/raw --progress never --markdown "$$tmp/corpus.md" >/dev/null && \
		diff -u docs/benchmarks/corpus.md "$$tmp/corpus.md" || { echo "docs/benchmarks/corpus.md is stale: run make bench-corpus"; exit 1; }
