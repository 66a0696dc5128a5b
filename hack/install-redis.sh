#!/usr/bin/env bash
# Installs redis-server (used by the store, proxy and operator tests) from Debian when missing.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
apt_install redis-server redis-server redis-tools
