#!/usr/bin/env bash
# build.sh builds the Kubernetes test binaries (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl, kwok) from this wrapper
# module and caches them outside the repository.
#
# Output: the path of the finished directory, as the ONLY line on stdout.
# Progress goes to stderr. The directory holds the binaries side by side (so it
# also works as KUBEBUILDER_ASSETS) and kwok's stage configs in kwok-stages/.
#
# Cache location:
#   ${FLOTILLA_TESTBIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/flotilla/testbin}/
#     <k8s version>-<hash of go.mod, go.sum and this script>/
#
# A finished directory contains the marker file .complete, written last; the
# directory appears by an atomic rename, so readers never see a partial build.
# Concurrent callers serialise on a flock and only the first one builds.
#
# Works from any working directory. Environment:
#   FLOTILLA_TESTBIN_CACHE   cache root (optional, see above)
#   FLOTILLA_TESTBIN_LOCK_TIMEOUT  seconds to wait for another build (default 2400)
set -euo pipefail

# Everything lives in main so that bash parses the whole script before it
# runs: editing the file during a 10-minute build cannot derail it.
main() {
	# Keep stdout for the result only.
	exec 3>&1 1>&2

	local -r K8S_VERSION=v1.37.1
	local -r K8S_MAJOR=1
	local -r K8S_MINOR=37

	cache_root="${FLOTILLA_TESTBIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/flotilla/testbin}"
	mkdir -p "$cache_root"
	cache_root="$(cd "$cache_root" && pwd -P)" # a relative path means the caller's cwd

	script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
	cd "$script_dir"

	hash="$(cat go.mod go.sum build.sh | sha256sum | cut -c1-12)"
	out="$cache_root/$K8S_VERSION-$hash"
	marker="$out/.complete"

	if [[ -f "$marker" ]]; then
		echo "$out" >&3
		exit 0
	fi

	# The Go caches must never live inside this module: `go mod tidy` would walk them.
	export GOWORK=off
	for var in GOMODCACHE GOCACHE; do
		dir="$(go env "$var")"
		case "$dir/" in
		"$script_dir"/*)
			echo "build.sh: $var ($dir) is inside $script_dir; move it elsewhere" >&2
			exit 1
			;;
		esac
	done

	exec 9>"$cache_root/.$K8S_VERSION-$hash.lock"
	if ! flock -n 9; then
		echo "build.sh: waiting for another build of $out" >&2
		flock -w "${FLOTILLA_TESTBIN_LOCK_TIMEOUT:-2400}" 9 || {
			echo "build.sh: timed out waiting for the build lock" >&2
			exit 1
		}
	fi

	# Another caller may have finished while we waited.
	if [[ -f "$marker" ]]; then
		echo "$out" >&3
		exit 0
	fi
	# A directory without its marker cannot come from this script's rename; clear it.
	rm -rf "$out"

	tmp="$(mktemp -d "$cache_root/.tmp-$K8S_VERSION-$hash.XXXXXX")"
	trap 'rm -rf "$tmp"' EXIT

	ldflags="-s -w"
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ldflags+=" -X $pkg.gitVersion=$K8S_VERSION"
		ldflags+=" -X $pkg.gitMajor=$K8S_MAJOR"
		ldflags+=" -X $pkg.gitMinor=$K8S_MINOR"
		ldflags+=" -X $pkg.gitTreeState=clean"
		ldflags+=" -X $pkg.buildDate=1970-01-01T00:00:00Z"
	done
	build=(go build -mod=readonly -trimpath -buildvcs=false -ldflags "$ldflags")

	start=$SECONDS
	echo "build.sh: building Kubernetes $K8S_VERSION test binaries into $out" >&2
	# etcd's main package is the module root, so name its binary explicitly.
	"${build[@]}" -o "$tmp/etcd" go.etcd.io/etcd/server/v3
	echo "build.sh: etcd done after $((SECONDS - start))s" >&2
	"${build[@]}" -o "$tmp/" \
		k8s.io/kubernetes/cmd/kube-apiserver \
		k8s.io/kubernetes/cmd/kube-controller-manager \
		k8s.io/kubernetes/cmd/kube-scheduler \
		k8s.io/kubernetes/cmd/kubectl \
		sigs.k8s.io/kwok/cmd/kwok
	echo "build.sh: all binaries done after $((SECONDS - start))s" >&2

	# kwok exits with "no stages found" unless it is given Stage objects.
	kwok_dir="$(go list -mod=readonly -m -f '{{.Dir}}' sigs.k8s.io/kwok)"
	if [[ -z "$kwok_dir" || ! -d "$kwok_dir/kustomize/stage" ]]; then
		echo "build.sh: kwok module source not found (got '$kwok_dir')" >&2
		exit 1
	fi
	mkdir -p "$tmp/kwok-stages"
	for stage in node/fast node/heartbeat-with-lease pod/fast; do
		for f in "$kwok_dir/kustomize/stage/$stage"/*.yaml; do
			[[ "$(basename "$f")" == kustomization.yaml ]] && continue
			cp "$f" "$tmp/kwok-stages/"
		done
	done
	chmod -R u+w "$tmp/kwok-stages"

	printf 'version=%s\nhash=%s\nbuildSeconds=%s\n' "$K8S_VERSION" "$hash" "$((SECONDS - start))" >"$tmp/.complete"
	chmod 0755 "$tmp"
	mv -T "$tmp" "$out"
	trap - EXIT
	echo "build.sh: done in $((SECONDS - start))s" >&2
	echo "$out" >&3
}

main "$@"
exit
