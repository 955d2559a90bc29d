#!/usr/bin/env bash
# Installs what building and testing the container images needs, when missing.
# Idempotent and non-interactive; Debian packages as root or through `sudo -n`.
#
#   scripts/setup/image.sh           all of the parts below
#   scripts/setup/image.sh static    the static build: musl-tools (musl-gcc, the C compiler
#                                    aws-lc-sys needs) and the x86_64-unknown-linux-musl target
#   scripts/setup/image.sh podman    building and running images: podman, runc
#   scripts/setup/image.sh rootfs    what goes into the images: ca-certificates, and
#                                    libgssapi-krb5-2 for the Kerberos variant
set -euo pipefail

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo -n "$@"; fi
}

have_lib() {
    [ -e "/usr/lib/x86_64-linux-gnu/$1" ] || [ -e "/lib/x86_64-linux-gnu/$1" ]
}

parts=("$@")
[ "${#parts[@]}" -gt 0 ] || parts=(static podman rootfs)

packages=()
rust_target=""
for part in "${parts[@]}"; do
    case "$part" in
    static)
        command -v musl-gcc >/dev/null 2>&1 || packages+=(musl-tools)
        rust_target=x86_64-unknown-linux-musl
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
        echo "usage: $0 [static|podman|rootfs]..." >&2
        exit 2
        ;;
    esac
done

if [ "${#packages[@]}" -gt 0 ]; then
    echo "==> installing ${packages[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${packages[@]}" </dev/null
fi

if [ -n "$rust_target" ] && ! rustup target list --installed 2>/dev/null | grep -qx "$rust_target"; then
    command -v rustup >/dev/null 2>&1 || {
        echo "rustup not found: install the Rust target $rust_target some other way" >&2
        exit 1
    }
    echo "==> rustup target add $rust_target"
    rustup target add "$rust_target"
fi
