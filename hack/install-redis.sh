#!/usr/bin/env bash
# Installs redis-server (used by the store, proxy and operator tests) from Debian when missing.
set -euo pipefail
if command -v redis-server >/dev/null 2>&1; then exit 0; fi
sudo=()
if [ "$(id -u)" != 0 ]; then
	command -v sudo >/dev/null 2>&1 || { echo "$0: not root and no sudo: install it yourself (apt-get install redis-server redis-tools)" >&2; exit 1; }
	sudo=(sudo)
fi
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools >/dev/null
command -v redis-server >/dev/null
