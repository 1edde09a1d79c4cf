#!/usr/bin/env bash
# Make Debian's Chromium available for the browser tests (tests/ui_test.go)
# and print the path of its executable on stdout.
#
# Idempotent: when `chromium` is already on PATH nothing is installed. On a
# fresh machine it is installed with apt-get, as root or through passwordless
# sudo. When it cannot be installed, a clear message goes to stderr and the
# script exits non-zero.
#
#   export FLOTILLA_CHROMIUM="$(bash hack/chromium.sh)"
set -euo pipefail

find_chromium() {
	command -v chromium 2>/dev/null || true
}

path="$(find_chromium)"
if [[ -n "$path" ]]; then
	echo "$path"
	exit 0
fi

# shellcheck source=lib/apt.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/apt.sh"
apt_install hack/chromium.sh chromium "install Debian's chromium package (apt-get install chromium) or put chromium on PATH"

path="$(find_chromium)"
if [[ -z "$path" ]]; then
	echo "hack/chromium.sh: apt-get installed chromium but no chromium executable is on PATH" >&2
	exit 1
fi
echo "$path"
