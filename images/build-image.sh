#!/usr/bin/env bash
# Builds a container image with podman, from local files only (no registry):
#
#   images/build-image.sh static   [TAG]   localhost/spark-localizer:TAG (default latest)
#   images/build-image.sh kerberos [TAG]   localhost/spark-localizer:TAG (default kerberos)
#
# static: images/Dockerfile, the static musl binary (images/build-static.sh, or the file
#   named by SPARK_LOCALIZER_STATIC_BIN) and the build host's CA bundle.
# kerberos: images/Dockerfile.kerberos, the glibc release binary (cargo build --release, or
#   the file named by SPARK_LOCALIZER_GLIBC_BIN) with the shared libraries it and
#   libgssapi_krb5.so.2 need (found with ldd), the dynamic loader and the CA bundle.
#
# The build context is target/image/<variant>/. Installs podman, runc, ca-certificates and
# libgssapi-krb5-2 when missing (scripts/setup/image.sh). Prints the image name last.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

variant="${1:-}"
case "$variant" in
static) tag="${2:-latest}" ;;
kerberos) tag="${2:-kerberos}" ;;
*)
    echo "usage: $0 static|kerberos [TAG]" >&2
    exit 2
    ;;
esac
image="localhost/spark-localizer:${tag}"
podman=(podman --storage-driver=vfs --runtime runc --cgroup-manager=cgroupfs)
ca=/etc/ssl/certs/ca-certificates.crt

bash scripts/setup/image.sh podman rootfs >&2

ctx="target/image/${variant}"
rm -rf "$ctx"
mkdir -p "$ctx"

if [ "$variant" = static ]; then
    bin="${SPARK_LOCALIZER_STATIC_BIN:-}"
    [ -n "$bin" ] || bin=$(bash images/build-static.sh | tail -n 1)
    cp "$bin" "$ctx/spark-localizer"
    cp -L "$ca" "$ctx/ca-certificates.crt"
    chmod 0755 "$ctx/spark-localizer"
    chmod 0644 "$ctx/ca-certificates.crt"
    dockerfile=images/Dockerfile
else
    bin="${SPARK_LOCALIZER_GLIBC_BIN:-}"
    if [ -z "$bin" ]; then
        echo "==> cargo build --locked --release" >&2
        cargo build --locked --release --bin spark-localizer >&2
        bin=target/release/spark-localizer
    fi
    gssapi=""
    for dir in /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu; do
        [ -e "$dir/libgssapi_krb5.so.2" ] && gssapi="$dir/libgssapi_krb5.so.2" && break
    done
    [ -n "$gssapi" ] || {
        echo "libgssapi_krb5.so.2 not found (Debian libgssapi-krb5-2)" >&2
        exit 1
    }
    rootfs="$ctx/rootfs"
    mkdir -p "$rootfs/etc/ssl/certs"
    cp "$bin" "$rootfs/spark-localizer"
    chmod 0755 "$rootfs/spark-localizer"
    # Every shared object (and the loader) the binary and libgssapi load, at the path
    # ldd resolves it to, symlinks followed; libgssapi itself under its soname.
    libs=$( (ldd "$bin" && ldd "$gssapi") | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i }' | sort -u)
    [ -n "$libs" ] || {
        echo "ldd found no shared libraries for $bin: is it the glibc build?" >&2
        exit 1
    }
    for lib in $libs "$gssapi"; do
        mkdir -p "$rootfs$(dirname "$lib")"
        cp -L "$lib" "$rootfs$lib"
    done
    cp -L "$ca" "$rootfs/etc/ssl/certs/ca-certificates.crt"
    chmod 0644 "$rootfs/etc/ssl/certs/ca-certificates.crt"
    echo "rootfs:" >&2
    (cd "$rootfs" && find . -type f -printf '  /%P %s\n' | sort) >&2
    dockerfile=images/Dockerfile.kerberos
fi

old=$("${podman[@]}" image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
echo "==> podman build -t ${image} -f ${dockerfile} ${ctx}" >&2
"${podman[@]}" build --pull=never -q -t "$image" -f "$dockerfile" "$ctx" >&2
new=$("${podman[@]}" image inspect --format '{{.Id}}' "$image")
# The image this tag named before, now untagged: removed unless still in use.
if [ -n "$old" ] && [ "$old" != "$new" ]; then
    "${podman[@]}" rmi "$old" >/dev/null 2>&1 || true
fi
size=$("${podman[@]}" image inspect --format '{{.Size}}' "$image")
echo "image ${image}: $(awk -v s="$size" 'BEGIN { printf "%.2f", s / 1048576 }') MiB" >&2
echo "$image"
