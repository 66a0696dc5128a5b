#!/usr/bin/env bash
# Builds the Kubernetes toolchain condense's tests need (kube-apiserver, etcd, kubectl,
# kube-controller-manager, kube-scheduler, kwok, controller-gen, kustomize, helm) from Go
# modules, since no binary can be downloaded here. The binaries are cached outside the clone,
# keyed by version, so a fresh clone on the same machine reuses them.
#
# Usage: hack/install-k8s-tools.sh            # builds what is missing, prints the bin dir
# Env:   CONDENSE_TOOLS_DIR  cache root (default $HOME/.cache/condense)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
K8S_VERSION=1.37.2
root=${CONDENSE_TOOLS_DIR:-$HOME/.cache/condense}
bin="$root/k8s-v$K8S_VERSION-$(sha256sum "$here/k8s-bins/go.sum" | cut -c1-12)/bin"
mkdir -p "$bin"

LDF="-s -w -X k8s.io/component-base/version.gitVersion=v$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 \
-X k8s.io/component-base/version.gitMinor=37 -X k8s.io/component-base/version.gitTreeState=clean \
-X k8s.io/component-base/version.buildDate=2026-01-01T00:00:00Z -X k8s.io/client-go/pkg/version.gitVersion=v$K8S_VERSION \
-X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=37"

# build NAME PKG: builds one binary unless the cache already has it.
build() {
	local name=$1 pkg=$2
	if [ -x "$bin/$name" ]; then return 0; fi
	echo "hack: building $name (first run only; the API server takes ~11 min on 2 cores)" >&2
	(cd "$here/k8s-bins" && GOFLAGS=-buildvcs=false go build -trimpath -ldflags "$LDF" -o "$bin/$name.tmp" "$pkg")
	mv "$bin/$name.tmp" "$bin/$name"
}

want=${*:-kube-apiserver etcd kubectl kube-controller-manager kube-scheduler kwok controller-gen kustomize helm}
for t in $want; do
	case $t in
	kube-apiserver|kube-controller-manager|kube-scheduler|kubectl) build "$t" "k8s.io/kubernetes/cmd/$t" ;;
	etcd|etcdctl) build "$t" "./cmd/$t" ;;
	kwok) build kwok sigs.k8s.io/kwok/cmd/kwok ;;
	controller-gen) build controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen ;;
	kustomize) build kustomize sigs.k8s.io/kustomize/kustomize/v5 ;;
	helm) build helm helm.sh/helm/v3/cmd/helm ;;
	*) echo "hack: unknown tool $t" >&2; exit 2 ;;
	esac
done

# kwok needs stage definitions; the kwok module ships the stock ones.
if [ ! -s "$bin/kwok-stages.yaml" ]; then
	# go list names the module's directory only once it is in the module cache, which on a
	# fresh machine it is not unless kwok was built above.
	stages=$(cd "$here/k8s-bins" && go mod download sigs.k8s.io/kwok && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)/kustomize/stage
	if [ ! -d "$stages" ]; then
		echo "hack: kwok's stage definitions not found at $stages" >&2
		exit 1
	fi
	for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
		pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
		cat "$stages/$f"; echo "---"
	done >"$bin/kwok-stages.yaml.tmp"
	mv "$bin/kwok-stages.yaml.tmp" "$bin/kwok-stages.yaml"
fi
echo "$bin"
