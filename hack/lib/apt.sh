# Sourced by the hack/ scripts that make a Debian package available for the
# tests (hack/chromium.sh, hack/postgres.sh).
#
# apt_install SCRIPT PACKAGE HINT installs PACKAGE with apt-get, as root or
# through passwordless sudo, with apt-get's output on stderr (stdout stays
# the caller's). When that is impossible or fails it prints a message that
# starts with SCRIPT and ends with HINT (what the user can do instead) to
# stderr and exits non-zero.
apt_install() {
	local script="$1" package="$2" hint="$3"
	local sudo_cmd=()
	if [[ "$(id -u)" -ne 0 ]]; then
		if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
			sudo_cmd=(sudo -n)
		else
			echo "$script: $package is not installed and this user can neither install packages (not root) nor use passwordless sudo; $hint" >&2
			exit 1
		fi
	fi
	if ! command -v apt-get >/dev/null 2>&1; then
		echo "$script: $package is not installed and apt-get is not available to install it; $hint" >&2
		exit 1
	fi
	echo "$script: installing Debian's $package package (once per machine)..." >&2
	if ! "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 ||
		! "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$package" >&2; then
		echo "$script: apt-get could not install $package (see the apt-get output above)" >&2
		exit 1
	fi
}
