#!/usr/bin/env bash
# Installs the real agent CLIs the client suite (test/clients) drives, at pinned versions, from
# npm into a cache outside the clone keyed by the versions; prints the bin dir on its last line.
#
# Usage: hack/install-clients.sh
# Env:   CONDENSE_TOOLS_DIR  cache root (default $HOME/.cache/condense)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
# The pinned versions (docs/clients.md says what each was verified with).
PACKAGES=(
	@anthropic-ai/claude-code@2.1.332
	@openai/codex@0.171.0
	@mariozechner/pi-coding-agent@0.73.1
	opencode-ai@1.18.33
)
root=${CONDENSE_TOOLS_DIR:-$HOME/.cache/condense}
dir="$root/clients-$(printf '%s\n' "${PACKAGES[@]}" | sha256sum | cut -c1-12)"
bin="$dir/node_modules/.bin"

# pi needs Node.js 20.6 or later; Claude Code, Codex and opencode ship native binaries.
apt_install npm nodejs npm
if [ ! -f "$dir/.installed" ]; then
	say "installing ${PACKAGES[*]} from npm into $dir (first run only; about 1.4 GB)"
	t0=$SECONDS
	mkdir -p "$dir"
	[ -f "$dir/package.json" ] || echo '{"name":"condense-test-clients","private":true}' >"$dir/package.json"
	(cd "$dir" && npm install --no-audit --no-fund --loglevel=error "${PACKAGES[@]}" >&2)
	say "agent CLIs installed in $(since "$t0")"
	touch "$dir/.installed"
fi
for c in claude codex pi opencode; do
	if ! "$bin/$c" --version >/dev/null 2>&1; then
		echo "$0: $bin/$c does not run; remove $dir and run again" >&2
		exit 1
	fi
done
echo "$bin"
