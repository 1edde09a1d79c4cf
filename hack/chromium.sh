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

sudo_cmd=()
if [[ "$(id -u)" -ne 0 ]]; then
	if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
		sudo_cmd=(sudo -n)
	else
		echo "hack/chromium.sh: chromium is not installed and this user can neither install packages (not root) nor use passwordless sudo; install Debian's chromium package (apt-get install chromium) or put chromium on PATH" >&2
		exit 1
	fi
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "hack/chromium.sh: chromium is not installed and apt-get is not available to install it; put a chromium executable on PATH" >&2
	exit 1
fi

echo "hack/chromium.sh: installing Debian's chromium package (once per machine)..." >&2
# apt-get's own output goes to stderr: stdout carries only the path.
if ! "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 ||
	! "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >&2; then
	echo "hack/chromium.sh: apt-get could not install chromium (see the apt-get output above)" >&2
	exit 1
fi

path="$(find_chromium)"
if [[ -z "$path" ]]; then
	echo "hack/chromium.sh: apt-get installed chromium but no chromium executable is on PATH" >&2
	exit 1
fi
echo "$path"
