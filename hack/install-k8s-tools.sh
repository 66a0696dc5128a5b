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
. "$here/lib.sh"
K8S_VERSION=1.37.2
root=${CONDENSE_TOOLS_DIR:-$HOME/.cache/condense}
bin="$root/k8s-v$K8S_VERSION-$(sha256sum "$here/k8s-bins/go.sum" | cut -c1-12)/bin"
mkdir -p "$bin"

LDF="-s -w -X k8s.io/component-base/version.gitVersion=v$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 \
-X k8s.io/component-base/version.gitMinor=37 -X k8s.io/component-base/version.gitTreeState=clean \
-X k8s.io/component-base/version.buildDate=2026-01-01T00:00:00Z -X k8s.io/client-go/pkg/version.gitVersion=v$K8S_VERSION \
-X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=37"

# pkg NAME: the Go package (in k8s-bins) of one tool.
pkg() {
	case $1 in
	kube-apiserver|kube-controller-manager|kube-scheduler|kubectl) echo "k8s.io/kubernetes/cmd/$1" ;;
	etcd|etcdctl) echo "./cmd/$1" ;;
	kwok) echo sigs.k8s.io/kwok/cmd/kwok ;;
	controller-gen) echo sigs.k8s.io/controller-tools/cmd/controller-gen ;;
	kustomize) echo sigs.k8s.io/kustomize/kustomize/v5 ;;
	helm) echo helm.sh/helm/v3/cmd/helm ;;
	*) echo "hack: unknown tool $1" >&2; exit 2 ;;
	esac
}

want=${*:-kube-apiserver etcd kubectl kube-controller-manager kube-scheduler kwok controller-gen kustomize helm}
missing=()
for t in $want; do
	pkg "$t" >/dev/null # an unknown tool stops here
	if [ ! -x "$bin/$t" ]; then missing+=("$t"); fi
done
if [ ${#missing[@]} -gt 0 ]; then
	say "building ${#missing[@]} of $(wc -w <<<"$want") tools from Go modules into $bin (cached afterwards): ${missing[*]}"
	all=$SECONDS
	i=0
	for t in "${missing[@]}"; do
		i=$((i + 1))
		say "[$i/${#missing[@]}] building $t"
		t0=$SECONDS
		(cd "$here/k8s-bins" && GOFLAGS=-buildvcs=false go build -trimpath -ldflags "$LDF" -o "$bin/$t.tmp" "$(pkg "$t")")
		mv "$bin/$t.tmp" "$bin/$t"
		say "[$i/${#missing[@]}] built $t in $(since "$t0")"
	done
	say "built ${#missing[@]} tools in $(since "$all")"
fi

# kwok needs stage definitions; the kwok module ships the stock ones.
if [ ! -s "$bin/kwok-stages.yaml" ]; then
	# go list names the module's directory only once it is in the module cache, which on a
	# fresh machine it is not unless kwok was built above.
	say "fetching kwok's stage definitions (go mod download sigs.k8s.io/kwok)"
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
