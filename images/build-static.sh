#!/usr/bin/env bash
# Builds the fully static spark-localizer (Cargo profile `static`, musl, mimalloc) for one
# or more architectures and checks each binary's budgets, failing loudly when one is missed:
#   - the architecture asked for: an ELF64 little-endian executable for that machine;
#   - statically linked: no PT_INTERP program header (no dynamic loader, no shared library);
#   - smaller than 16 MiB;
#   - `--version` runs in an empty chroot (a directory holding only the binary, and for
#     another architecture Debian's static qemu-user emulator beside it).
#
#   images/build-static.sh                  this machine's architecture (x86_64 on CI)
#   images/build-static.sh aarch64          arm64 nodes (Graviton, Ampere, Apple silicon)
#   images/build-static.sh x86_64 aarch64   both, one after the other
#
# This machine's architecture builds with musl-gcc (Debian musl-tools); another one with
# cargo-zigbuild, zig as the cross C compiler and linker of AWS-LC and mimalloc (PyPI
# wheels in target/zig-venv). scripts/setup/image.sh installs what is missing, including
# qemu-user-static for the foreign binary's --version. Prints each binary's absolute
# path, one line per architecture in the order asked: the last line is the last one's.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. images/elf.sh

profile=static
budget=$((16 * 1024 * 1024))
host_arch=$(uname -m)
archs=("$@")
[ "${#archs[@]}" -gt 0 ] || archs=("$host_arch")
for arch in "${archs[@]}"; do
    case "$arch" in
    x86_64 | aarch64) ;;
    *)
        echo "usage: $0 [x86_64|aarch64]... (not '$arch')" >&2
        exit 2
        ;;
    esac
done

fail() {
    echo "BUDGET MISSED: $*" >&2
    exit 1
}

# The command that runs an empty root's /spark-localizer (and /qemu for a foreign binary):
# chroot as root, else in an unprivileged user namespace; none when neither works.
chroot_cmd() {
    local root=$1 chroot_bin
    chroot_bin=$(PATH="$PATH:/usr/sbin:/sbin" command -v chroot || true)
    if [ -z "$chroot_bin" ]; then
        return 0
    elif [ "$(id -u)" -eq 0 ]; then
        echo "$chroot_bin" "$root"
    elif command -v unshare >/dev/null 2>&1 && unshare -r true 2>/dev/null; then
        echo "$(command -v unshare)" -r "$chroot_bin" "$root"
    fi
}

# build ARCH: builds, checks and prints the binary's path.
build() {
    local arch=$1 target="$1-unknown-linux-musl"
    local bin="${CARGO_TARGET_DIR:-target}/${target}/${profile}/spark-localizer"
    local cargo=(cargo build) machine start
    if [ "$arch" = "$host_arch" ]; then
        bash scripts/setup/image.sh static >&2
    else
        bash scripts/setup/image.sh cross "$arch" >&2
        # cargo-zigbuild runs zig from PATH (the ziglang wheel's `python -m ziglang`).
        export PATH="${PWD}/target/zig-venv/bin:${PATH}"
        cargo=(cargo-zigbuild zigbuild)
    fi
    case "$arch" in
    x86_64) machine=62 ;;   # EM_X86_64
    aarch64) machine=183 ;; # EM_AARCH64
    esac

    echo "==> ${cargo[*]} --locked --profile ${profile} --target ${target}" >&2
    start=$SECONDS
    "${cargo[@]}" --locked --profile "$profile" --target "$target" --bin spark-localizer >&2
    echo "    built in $((SECONDS - start)) s" >&2

    elf_problem "$bin" "$machine" static
    [ -z "$ELF_PROBLEM" ] || fail "$bin $ELF_PROBLEM (wanted: ${arch}, static)"
    echo "ok: ${arch}, statically linked (no PT_INTERP among ${ELF_PHNUM} program headers)" >&2

    local size mib
    size=$(stat -c %s "$bin")
    mib=$(awk -v s="$size" 'BEGIN { printf "%.2f", s / 1048576 }')
    if [ "$size" -ge "$budget" ]; then
        fail "$bin is ${size} bytes (${mib} MiB); the budget is under ${budget} bytes (16 MiB)"
    fi
    echo "ok: size ${size} bytes (${mib} MiB), under 16 MiB by $((budget - size)) bytes" >&2

    # --version from an empty root: nothing but the binary (and the emulator) exists.
    local root emulator=() how version
    root=$(mktemp -d "${TMPDIR:-/tmp}/sl-empty-root.XXXXXX")
    cp "$bin" "$root/spark-localizer"
    if [ "$arch" != "$host_arch" ]; then
        cp "$(command -v "qemu-${arch}-static")" "$root/qemu"
        emulator=(/qemu)
    fi
    read -r -a how < <(chroot_cmd "$root")
    if [ "${#how[@]}" -eq 0 ]; then
        rm -rf "$root"
        [ -z "${CI:-}" ] || fail "--version in an empty chroot cannot be checked: no chroot, or not root and no unprivileged user namespace (unshare -r)"
        echo "SKIP: --version in an empty chroot: no chroot, or not root and no unprivileged user namespace (unshare -r)" >&2
    else
        version=$(env -i "${how[@]}" "${emulator[@]}" /spark-localizer --version) || {
            rm -rf "$root"
            fail "--version does not run in an empty chroot (${how[*]} ${emulator[*]})"
        }
        rm -rf "$root"
        echo "ok: '${version}' from an empty chroot${emulator:+ (under qemu-${arch}-static)}" >&2
    fi
    realpath "$bin"
}

for arch in "${archs[@]}"; do
    build "$arch"
done
