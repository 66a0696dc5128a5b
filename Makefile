# condense — developer entry points. `make test` is the whole suite (what CI runs).
SHELL := /usr/bin/env bash
GO ?= go
PKGS := ./...
TOOLS_BIN = $(shell hack/install-k8s-tools.sh controller-gen kustomize helm 2>/dev/null | tail -n 1)

.PHONY: all build test lint bench fuzz generate manifests e2e loadtest bench-corpus verify-generated

all: lint build

## build: the static condense binary in bin/
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o bin/condense ./cmd/condense

## test: every test, installing what they need (redis-server, Chromium, the k8s test binaries)
test:
	hack/test.sh

## lint: gofmt and go vet
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt wants to change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) vet -tags loadtest ./internal/proxy/

## bench: every Go benchmark, 6 runs each for benchstat (results in bench.out)
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 6 $(PKGS) | tee bench.out

## fuzz: every fuzz target for FUZZTIME (default 60s) each
fuzz:
	hack/fuzz.sh

## generate: deepcopy code for the API types
generate:
	$(TOOLS_BIN)/controller-gen object:headerFile=hack/boilerplate.go.txt paths=./api/...

## manifests: CRDs and RBAC under config/
manifests:
	$(TOOLS_BIN)/controller-gen crd:allowDangerousTypes=true rbac:roleName=manager paths=./api/... paths=./controllers/... \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	hack/sync-chart.sh

## verify-generated: fail when `make generate manifests` changes tracked files
verify-generated: generate manifests
	git diff --exit-code -- api config charts

## e2e: the whole-system test on a simulated cluster (also part of `make test`)
e2e:
	bin=$$(hack/install-k8s-tools.sh); KUBEBUILDER_ASSETS=$$bin KWOK_BIN=$$bin/kwok KWOK_STAGES=$$bin/kwok-stages.yaml \
		CONDENSE_TOOLS_BIN=$$bin $(GO) test -count=1 -tags e2e -v ./test/...

## loadtest: 200 concurrent agent sessions, each request sent direct and through a condense proxy process (not in CI; docs/performance.md "Proxy load")
loadtest:
	$(GO) test -count=1 -tags loadtest -run LoadTest -v -timeout 30m ./internal/proxy/...

## bench-corpus: replay every corpus file and write docs/benchmarks/corpus.md
bench-corpus:
	$(GO) run ./cmd/condense replay ../shared/corpus/raw --markdown docs/benchmarks/corpus.md
