#!/usr/bin/env bash
# Installs what building and testing the container images needs, when missing.
# Idempotent and non-interactive; Debian packages as root or through `sudo -n`.
#
#   scripts/setup/image.sh           all of the parts below
#   scripts/setup/image.sh static    the static build for this machine's architecture:
#                                    musl-tools (musl-gcc, the C compiler aws-lc-sys needs)
#                                    and the <arch>-unknown-linux-musl target
#   scripts/setup/image.sh cross ARCH  a static build for another architecture (x86_64 or
#                                    aarch64): the Rust target, cargo-zigbuild and zig (PyPI's
#                                    ziglang: the cross C compiler and linker for AWS-LC and
#                                    mimalloc) in the venv target/zig-venv, and Debian's
#                                    qemu-user-static to run the result
#   scripts/setup/image.sh podman    building and running images: podman, runc
#   scripts/setup/image.sh rootfs    what goes into the images: ca-certificates, and
#                                    libgssapi-krb5-2 for the Kerberos variant
set -euo pipefail

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo -n "$@"; fi
}

host_arch=$(uname -m)

have_lib() {
    [ -e "/usr/lib/x86_64-linux-gnu/$1" ] || [ -e "/lib/x86_64-linux-gnu/$1" ]
}

parts=("$@")
[ "${#parts[@]}" -gt 0 ] || parts=(static podman rootfs)

# The cross build's tools, pinned: PyPI wheels for x86_64 and aarch64 Linux.
ZIGLANG_VERSION=0.13.0.post1
CARGO_ZIGBUILD_VERSION=0.24.1
zig_venv="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/target/zig-venv"

packages=()
rust_targets=()
cross=false
while [ "${#parts[@]}" -gt 0 ]; do
    part=${parts[0]}
    parts=("${parts[@]:1}")
    case "$part" in
    static)
        command -v musl-gcc >/dev/null 2>&1 || packages+=(musl-tools)
        rust_targets+=("${host_arch}-unknown-linux-musl")
        ;;
    cross)
        arch=${parts[0]:-}
        case "$arch" in
        x86_64 | aarch64) parts=("${parts[@]:1}") ;;
        *)
            echo "usage: $0 cross x86_64|aarch64 (not '${arch}')" >&2
            exit 2
            ;;
        esac
        command -v "qemu-${arch}-static" >/dev/null 2>&1 || packages+=(qemu-user-static)
        python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || packages+=(python3-venv)
        rust_targets+=("${arch}-unknown-linux-musl")
        cross=true
        ;;
    podman)
        command -v podman >/dev/null 2>&1 || packages+=(podman)
        command -v runc >/dev/null 2>&1 || [ -x /usr/sbin/runc ] || packages+=(runc)
        ;;
    rootfs)
        [ -s /etc/ssl/certs/ca-certificates.crt ] || packages+=(ca-certificates)
        have_lib libgssapi_krb5.so.2 || packages+=(libgssapi-krb5-2)
        ;;
    *)
        echo "usage: $0 [static|cross ARCH|podman|rootfs]..." >&2
        exit 2
        ;;
    esac
done

if [ "${#packages[@]}" -gt 0 ]; then
    echo "==> installing ${packages[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${packages[@]}" </dev/null
fi

for rust_target in "${rust_targets[@]}"; do
    rustup target list --installed 2>/dev/null | grep -qx "$rust_target" && continue
    command -v rustup >/dev/null 2>&1 || {
        echo "rustup not found: install the Rust target $rust_target some other way" >&2
        exit 1
    }
    echo "==> rustup target add $rust_target"
    rustup target add "$rust_target"
done

if $cross && ! { [ -x "$zig_venv/bin/cargo-zigbuild" ] &&
    [ "$("$zig_venv/bin/python" -m ziglang version 2>/dev/null)" = "${ZIGLANG_VERSION%.post*}" ] &&
    "$zig_venv/bin/cargo-zigbuild" --version 2>/dev/null | grep -qx "cargo-zigbuild ${CARGO_ZIGBUILD_VERSION}"; }; then
    echo "==> installing ziglang ${ZIGLANG_VERSION} and cargo-zigbuild ${CARGO_ZIGBUILD_VERSION} into $zig_venv"
    python3 -m venv --clear "$zig_venv"
    "$zig_venv/bin/pip" install -q --disable-pip-version-check \
        "ziglang==${ZIGLANG_VERSION}" "cargo-zigbuild==${CARGO_ZIGBUILD_VERSION}" </dev/null
fi
