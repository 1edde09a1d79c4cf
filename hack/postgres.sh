#!/usr/bin/env bash
# Make Debian's PostgreSQL server available for the tests that run Temporal
# on PostgreSQL (internal/testenv StartPostgres, tests/postgres_test.go) and
# print the directory that holds its server binaries (initdb, pg_ctl,
# postgres) on stdout, e.g. /usr/lib/postgresql/15/bin.
#
# Idempotent: when a server is already installed nothing is installed (the
# newest version wins when there are several). On a fresh machine Debian's
# postgresql package is installed with apt-get, as root or through
# passwordless sudo. When it cannot be installed, a clear message goes to
# stderr and the script exits non-zero.
#
#   export FLOTILLA_POSTGRES="$(bash hack/postgres.sh)"
set -euo pipefail

# Debian installs each major version under its own directory here.
pg_root=/usr/lib/postgresql

# find_bindir prints the newest /usr/lib/postgresql/<version>/bin that holds
# all three server binaries, or nothing.
find_bindir() {
	local version dir
	for version in $(cd "$pg_root" 2>/dev/null && printf '%s\n' * | sort -V -r); do
		dir="$pg_root/$version/bin"
		if [[ -x "$dir/initdb" && -x "$dir/pg_ctl" && -x "$dir/postgres" ]]; then
			echo "$dir"
			return
		fi
	done
}

dir="$(find_bindir)"
if [[ -n "$dir" ]]; then
	echo "$dir"
	exit 0
fi

# shellcheck source=lib/apt.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/apt.sh"
# The package's own cluster is not needed (tests run initdb in a temp dir),
# but installing it is harmless and keeps this to the stock package.
apt_install hack/postgres.sh postgresql "install Debian's postgresql package (apt-get install postgresql) or set FLOTILLA_POSTGRES to a directory holding initdb, pg_ctl and postgres"

dir="$(find_bindir)"
if [[ -z "$dir" ]]; then
	echo "hack/postgres.sh: apt-get installed postgresql but no /usr/lib/postgresql/<version>/bin holds initdb, pg_ctl and postgres" >&2
	exit 1
fi
echo "$dir"
