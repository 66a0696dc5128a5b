#!/usr/bin/env bash
# Installs redis-server (used by the store, proxy and operator tests) from Debian when missing.
set -euo pipefail
if command -v redis-server >/dev/null 2>&1; then exit 0; fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq redis-server redis-tools >/dev/null
command -v redis-server >/dev/null
