#!/usr/bin/env bash
# Installs the real agent CLIs the client suite (test/clients) drives, at pinned versions, from
# npm into a cache outside the clone keyed by the versions; prints the bin dir on its last line.
#
# Usage: hack/install-clients.sh
# Env:   CONDENSE_TOOLS_DIR  cache root (default $HOME/.cache/condense)
set -euo pipefail
# The pinned versions (docs/clients.md says what each was verified with).
PACKAGES=(
	@anthropic-ai/claude-code@2.1.332
	@openai/codex@0.171.0
	@mariozechner/pi-coding-agent@0.73.1
)
root=${CONDENSE_TOOLS_DIR:-$HOME/.cache/condense}
dir="$root/clients-$(printf '%s\n' "${PACKAGES[@]}" | sha256sum | cut -c1-12)"
bin="$dir/node_modules/.bin"

# pi needs Node.js 20.6 or later; Claude Code and Codex ship native binaries.
if ! command -v npm >/dev/null 2>&1; then
	sudo=()
	[ "$(id -u)" = 0 ] || sudo=(sudo)
	echo "hack: installing nodejs and npm from Debian (apt-get)" >&2
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi

if [ ! -f "$dir/.installed" ]; then
	echo "hack: installing ${PACKAGES[*]} from npm into $dir (first run only; about 1 GB, 1-4 min)" >&2
	start=$SECONDS
	mkdir -p "$dir"
	[ -f "$dir/package.json" ] || echo '{"name":"condense-test-clients","private":true}' >"$dir/package.json"
	(cd "$dir" && npm install --no-audit --no-fund --loglevel=error "${PACKAGES[@]}" >&2)
	echo "hack: agent CLIs installed in $((SECONDS - start)) s" >&2
	touch "$dir/.installed"
fi
for c in claude codex pi; do
	if ! "$bin/$c" --version >/dev/null 2>&1; then
		echo "hack: $bin/$c does not run; remove $dir and try again" >&2
		exit 1
	fi
done
echo "$bin"
