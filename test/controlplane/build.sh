#!/usr/bin/env bash
# Builds kube-apiserver, etcd and kubectl from the Go module proxy into a cache
# directory outside the repository, keyed by their versions, and prints that
# directory. When the binaries are already there it does nothing else.
#
# FXKUBE_CONTROLPLANE_CACHE overrides the cache root
# (default: ${XDG_CACHE_HOME:-$HOME/.cache}/fxkube/controlplane).
set -euo pipefail

# Resolve a relative cache root before changing directory.
if [[ -n ${FXKUBE_CONTROLPLANE_CACHE:-} && ${FXKUBE_CONTROLPLANE_CACHE} != /* ]]; then
	FXKUBE_CONTROLPLANE_CACHE=$PWD/$FXKUBE_CONTROLPLANE_CACHE
fi
cd "$(dirname "$0")"

version_of() { awk -v m="$1" '$1 == m { print $2; exit }' go.mod; }
kube=$(version_of k8s.io/kubernetes)
etcd=$(version_of go.etcd.io/etcd/server/v3)
root=${FXKUBE_CONTROLPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fxkube/controlplane}
dir="$root/kubernetes-$kube-etcd-$etcd"

if [[ -x $dir/kube-apiserver && -x $dir/etcd && -x $dir/kubectl ]]; then
	echo "$dir"
	exit 0
fi

echo "building kube-apiserver $kube, etcd $etcd and kubectl $kube into $dir (a few minutes on a cold cache)" >&2
minor=${kube#v*.}
minor=${minor%%.*}
major=${kube#v}
major=${major%%.*}
pkgs=(k8s.io/component-base/version k8s.io/client-go/pkg/version)
ldflags="-s -w"
for p in "${pkgs[@]}"; do
	ldflags+=" -X $p.gitVersion=$kube -X $p.gitMajor=$major -X $p.gitMinor=$minor"
	ldflags+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
done

tmp=$(mktemp -d "$root.tmp.XXXXXX" 2>/dev/null || { mkdir -p "$root" && mktemp -d "$root.tmp.XXXXXX"; })
trap 'rm -rf "$tmp"' EXIT
CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$tmp/" \
	k8s.io/kubernetes/cmd/kube-apiserver \
	k8s.io/kubernetes/cmd/kubectl \
	./cmd/etcd
mkdir -p "$root"
rm -rf "$dir"
mv "$tmp" "$dir"
trap - EXIT
echo "$dir"
