#!/usr/bin/env bash
# Make Debian's OpenSSH server available for the tests that serve Git over
# SSH (internal/testenv StartSSHGitServer, tests/gitssh_test.go) and print
# the path of its sshd binary on stdout (/usr/sbin/sshd).
#
# Idempotent: when sshd is installed nothing is installed. On a fresh
# machine Debian's openssh-server package is installed with apt-get, as
# root or through passwordless sudo. The tests start their own sshd on a
# loopback port with their own configuration and host keys; the package's
# system service is not used.
#
#   export FLOTILLA_SSHD="$(bash hack/sshd.sh)"
set -euo pipefail

sshd=/usr/sbin/sshd
if [[ -x "$sshd" ]]; then
	echo "$sshd"
	exit 0
fi

# shellcheck source=lib/apt.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/apt.sh"
apt_install hack/sshd.sh openssh-server "install Debian's openssh-server package (apt-get install openssh-server) or set FLOTILLA_SSHD to an sshd binary"

if [[ ! -x "$sshd" ]]; then
	echo "hack/sshd.sh: apt-get installed openssh-server but $sshd is missing" >&2
	exit 1
fi
echo "$sshd"
