#!/usr/bin/env bash
# Installs Debian's headless Chromium (used to check the replay HTML report) when missing.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then exit 0; fi
sudo=()
if [ "$(id -u)" != 0 ]; then
	command -v sudo >/dev/null 2>&1 || { echo "$0: not root and no sudo: install it yourself (apt-get install chromium)" >&2; exit 1; }
	sudo=(sudo)
fi
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
command -v chromium >/dev/null
