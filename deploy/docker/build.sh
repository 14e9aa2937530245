#!/bin/sh
# build.sh DOCKERFILE IMAGE BINARY [CA_BUNDLE]
#
# Builds a FROM scratch image around one statically linked binary: it stages
# a build context holding the binary, a passwd/group naming the non-root user
# (65532, "nonroot"), the CA bundle and an empty /tmp, then runs the classic
# builder (no base image is pulled; buildx is not needed).
set -eu
dockerfile=$1 image=$2 binary=$3
ca=${4:-/etc/ssl/certs/ca-certificates.crt}
[ -f "$ca" ] || { echo "build.sh: CA bundle $ca not found (install ca-certificates or pass CA_BUNDLE=...)" >&2; exit 1; }
# A scratch image has no libc: refuse a dynamically linked binary (when
# file(1) is there to tell; the Makefile builds with CGO_ENABLED=0 anyway).
if command -v file >/dev/null 2>&1 && ! file -L "$binary" | grep -q 'statically linked'; then
	echo "build.sh: $binary is not statically linked" >&2; exit 1
fi
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/rootfs/etc/ssl/certs" "$ctx/rootfs/tmp" "$ctx/empty"
chmod 1777 "$ctx/rootfs/tmp"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$ctx/rootfs/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$ctx/rootfs/etc/group"
cp "$ca" "$ctx/rootfs/etc/ssl/certs/ca-certificates.crt"
cp "$binary" "$ctx/binary"
cp "$dockerfile" "$ctx/Dockerfile"
DOCKER_BUILDKIT=0 docker build -q -t "$image" "$ctx" >/dev/null 2>"$ctx/build.err" || { cat "$ctx/build.err" >&2; exit 1; }
echo "$image: $(docker image inspect -f '{{.Size}}' "$image" | awk '{printf "%.1f MB", $1/1e6}')"
