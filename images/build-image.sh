#!/usr/bin/env bash
# Builds a container image with podman, from local files only (no registry):
#
#   images/build-image.sh static   [TAG]   localhost/spark-localizer:TAG (default latest)
#   images/build-image.sh kerberos [TAG]   localhost/spark-localizer:TAG (default kerberos)
#
# static: images/Dockerfile, the static musl binaries and the build host's CA bundle, for
#   each platform of SPARK_LOCALIZER_PLATFORMS (default linux/amd64,linux/arm64): the
#   images TAG-amd64 and TAG-arm64 and, under TAG, a manifest list holding both, so one tag
#   serves amd64 and arm64 nodes (`podman manifest push --all` publishes it). With one
#   platform, TAG is that platform's image. The binaries: SPARK_LOCALIZER_STATIC_BIN
#   (x86_64) and SPARK_LOCALIZER_STATIC_BIN_ARM64 (aarch64), or else built by
#   images/build-static.sh; each is checked to be an ELF for its platform.
# kerberos: images/Dockerfile.kerberos, the glibc release binary (cargo build --release, or
#   the file named by SPARK_LOCALIZER_GLIBC_BIN) with the shared libraries it and
#   libgssapi_krb5.so.2 need (found with ldd), the dynamic loader and the CA bundle. This
#   machine's architecture only (amd64 on CI): see docs/images.md.
#
# The build context is target/image/<variant>/. Installs podman, runc, ca-certificates and
# libgssapi-krb5-2 when missing (scripts/setup/image.sh). Prints the image name last.
# SPARK_LOCALIZER_PODMAN_ROOT=DIR builds into a storage of its own under DIR (--root,
# --runroot, --tmpdir), not the user's: the tests use it (tests/it/support/podman.rs).
set -euo pipefail
caller=$PWD
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. images/elf.sh

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

# abs PATH: PATH as the caller meant it (relative to the directory the script was run from).
abs() {
    case "$1" in
    /*) echo "$1" ;;
    *) echo "${caller}/$1" ;;
    esac
}
if [ -n "${SPARK_LOCALIZER_PODMAN_ROOT:-}" ]; then
    podman_root=$(abs "$SPARK_LOCALIZER_PODMAN_ROOT")
    podman+=(--root "${podman_root}/root" --runroot "${podman_root}/run" --tmpdir "${podman_root}/tmp")
fi

# check_elf VAR PATH MACHINE static|dynamic WHAT: fails unless PATH (named by VAR) is an
# executable for MACHINE linked as asked (images/elf.sh). The wrong binary under a
# platform would fail every pod of it ("exec format error", "no such file or directory").
check_elf() {
    local var=$1 bin=$2 machine=$3 linking=$4 what=$5
    [ -f "$bin" ] || {
        echo "$var=$bin is not a file" >&2
        exit 1
    }
    elf_problem "$bin" "$machine" "$linking"
    [ -z "$ELF_PROBLEM" ] || {
        echo "$var=$bin $ELF_PROBLEM; $what" >&2
        exit 1
    }
}

host_platform=linux/amd64
[ "$(uname -m)" = aarch64 ] && host_platform=linux/arm64

bash scripts/setup/image.sh podman rootfs >&2

platforms=()
ctx="target/image/${variant}"
rm -rf "$ctx"
mkdir -p "$ctx"

if [ "$variant" = static ]; then
    # The platforms asked for, blanks trimmed, each once, in the order given.
    IFS=, read -r -a asked <<<"${SPARK_LOCALIZER_PLATFORMS:-linux/amd64,linux/arm64}"
    for platform in "${asked[@]}"; do
        platform=$(echo "$platform" | tr -d '[:space:]')
        [[ " ${platforms[*]} " == *" ${platform} "* ]] || platforms+=("$platform")
    done
    [ "${#platforms[@]}" -gt 0 ] || platforms=(linux/amd64 linux/arm64)
    mkdir -p "$ctx/bin"
    for platform in "${platforms[@]}"; do
        # The Rust architecture, the binary's variable and its ELF machine (e_machine).
        case "$platform" in
        linux/amd64) arch=x86_64 var=SPARK_LOCALIZER_STATIC_BIN machine=62 ;;
        linux/arm64) arch=aarch64 var=SPARK_LOCALIZER_STATIC_BIN_ARM64 machine=183 ;;
        *)
            echo "SPARK_LOCALIZER_PLATFORMS: '$platform' is not linux/amd64 or linux/arm64" >&2
            exit 2
            ;;
        esac
        bin="${!var:-}"
        if [ -n "$bin" ]; then
            bin=$(abs "$bin")
        else
            bin=$(bash images/build-static.sh "$arch" | tail -n 1)
        fi
        check_elf "$var" "$bin" "$machine" static \
            "${platform} needs the static ${arch} build (bash images/build-static.sh ${arch}, last line)"
        dir="$ctx/bin/${platform#linux/}"
        mkdir -p "$dir"
        cp "$bin" "$dir/spark-localizer"
        chmod 0755 "$dir/spark-localizer"
    done
    cp -L "$ca" "$ctx/ca-certificates.crt"
    chmod 0644 "$ctx/ca-certificates.crt"
    dockerfile=images/Dockerfile
else
    # The build host's glibc and MIT krb5 libraries go into the image: its platform only.
    if [ -n "${SPARK_LOCALIZER_PLATFORMS:-}" ] && [ "$(echo "$SPARK_LOCALIZER_PLATFORMS" | tr -d '[:space:]')" != "$host_platform" ]; then
        echo "SPARK_LOCALIZER_PLATFORMS=${SPARK_LOCALIZER_PLATFORMS}: the kerberos variant is built for this machine's platform only (${host_platform}); see docs/images.md" >&2
        exit 2
    fi
    bin="${SPARK_LOCALIZER_GLIBC_BIN:-}"
    if [ -n "$bin" ]; then
        bin=$(abs "$bin")
    else
        echo "==> cargo build --locked --release" >&2
        cargo build --locked --release --bin spark-localizer >&2
        bin=target/release/spark-localizer
    fi
    machine=62
    [ "$host_platform" = linux/arm64 ] && machine=183
    check_elf SPARK_LOCALIZER_GLIBC_BIN "$bin" "$machine" dynamic \
        "the kerberos variant needs this machine's glibc build, which can load libgssapi_krb5.so.2 (cargo build --release)"
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

# build_one NAME [PLATFORM]: builds the Dockerfile as NAME (for PLATFORM); the image NAME
# named before, now untagged, is removed unless still in use.
build_one() {
    local name=$1 platform=${2:-} old new size
    old=$("${podman[@]}" image inspect --format '{{.Id}}' "$name" 2>/dev/null || true)
    echo "==> podman build ${platform:+--platform ${platform} }-t ${name} -f ${dockerfile} ${ctx}" >&2
    "${podman[@]}" build --pull=never -q ${platform:+--platform "$platform"} -t "$name" -f "$dockerfile" "$ctx" >&2
    new=$("${podman[@]}" image inspect --format '{{.Id}}' "$name")
    if [ -n "$old" ] && [ "$old" != "$new" ]; then
        "${podman[@]}" rmi "$old" >/dev/null 2>&1 || true
    fi
    size=$("${podman[@]}" image inspect --format '{{.Size}}' "$name")
    echo "image ${name}${platform:+ (${platform})}: $(awk -v s="$size" 'BEGIN { printf "%.2f", s / 1048576 }') MiB" >&2
}

if [ "$variant" = kerberos ] || [ "${#platforms[@]}" -eq 1 ]; then
    # A single image; the static one for its one platform.
    if [ "$variant" = static ] && "${podman[@]}" manifest exists "$image" 2>/dev/null; then
        "${podman[@]}" manifest rm "$image" >/dev/null
    fi
    build_one "$image" "${platforms[0]:-}"
else
    # One image per platform (TAG-amd64, TAG-arm64), then TAG: the manifest list of both,
    # made anew (whatever TAG named before is untagged first).
    for platform in "${platforms[@]}"; do
        build_one "${image}-${platform#linux/}" "$platform"
    done
    if "${podman[@]}" manifest exists "$image" 2>/dev/null; then
        "${podman[@]}" manifest rm "$image" >/dev/null
    elif "${podman[@]}" image exists "$image" 2>/dev/null; then
        # This one name only: `podman untag IMAGE` alone removes every name of the image.
        "${podman[@]}" untag "$image" "$image" >/dev/null
    fi
    "${podman[@]}" manifest create "$image" >/dev/null
    for platform in "${platforms[@]}"; do
        "${podman[@]}" manifest add "$image" "containers-storage:${image}-${platform#linux/}" >/dev/null
    done
    echo "manifest list ${image}: ${platforms[*]}" >&2
fi
echo "$image"
