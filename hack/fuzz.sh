#!/usr/bin/env bash
# Runs every fuzz target in the module for FUZZTIME each (default 60s), one at a time.
# Targets are discovered with `go test -list`, so new ones need no registration here.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-60s}
fail=0
for pkg in $(go list ./...); do
	for f in $(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
		echo "== $pkg $f ($FUZZTIME)"
		go test -run '^$' -fuzz "^$f\$" -fuzztime "$FUZZTIME" "$pkg" || fail=1
	done
done
exit $fail
