#!/usr/bin/env bash
# Runs every fuzz target in the module for FUZZTIME each (default 60s), one at a time;
# FuzzParseMatchesEncodingJSON (the wire parser against encoding/json) for ORACLE_FUZZTIME
# (default 10m). Targets are discovered with `go test -list`, so new ones need no
# registration here.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-60s}
ORACLE_FUZZTIME=${ORACLE_FUZZTIME:-10m}
fail=0
for pkg in $(go list ./...); do
	for f in $(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
		t=$FUZZTIME
		[ "$f" = FuzzParseMatchesEncodingJSON ] && t=$ORACLE_FUZZTIME
		echo "== $pkg $f ($t)"
		go test -run '^$' -fuzz "^$f\$" -fuzztime "$t" "$pkg" || fail=1
	done
done
exit $fail
