#!/usr/bin/env bash
# Installs Debian's headless Chromium (used to check the replay HTML report) when missing.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
apt_install chromium chromium
