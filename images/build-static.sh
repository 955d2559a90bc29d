#!/usr/bin/env bash
# Builds the fully static x86_64-unknown-linux-musl binary (Cargo profile `static`) and
# checks its budgets, failing loudly when one is missed:
#   - statically linked: no PT_INTERP program header (no dynamic loader, no shared library);
#   - smaller than 16 MiB;
#   - `--version` runs in an empty chroot (a directory holding only the binary).
# Installs musl-tools and the Rust target when missing (scripts/setup/image.sh static).
# Prints the binary's path on the last line of stdout.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

target=x86_64-unknown-linux-musl
profile=static
bin="${CARGO_TARGET_DIR:-target}/${target}/${profile}/spark-localizer"
budget=$((16 * 1024 * 1024))

bash scripts/setup/image.sh static >&2

echo "==> cargo build --locked --profile ${profile} --target ${target}" >&2
start=$SECONDS
cargo build --locked --profile "$profile" --target "$target" --bin spark-localizer >&2
echo "    built in $((SECONDS - start)) s" >&2

fail() {
    echo "BUDGET MISSED: $*" >&2
    exit 1
}

# Statically linked: an ELF64 little-endian executable without a PT_INTERP (3) program
# header. Read with od, so no binutils are needed.
elf_u() { od -An -t "u$1" -j "$2" -N "$1" "$bin" | tr -d ' '; }
[ "$(head -c 4 "$bin" | od -An -c | tr -d ' ')" = '177ELF' ] || fail "$bin is not an ELF file"
[ "$(elf_u 1 4)" = 2 ] && [ "$(elf_u 1 5)" = 1 ] || fail "$bin is not a little-endian ELF64 file"
phoff=$(elf_u 8 32)
phentsize=$(elf_u 2 54)
phnum=$(elf_u 2 56)
for ((i = 0; i < phnum; i++)); do
    if [ "$(elf_u 4 $((phoff + i * phentsize)))" = 3 ]; then
        fail "$bin has a PT_INTERP header: it is dynamically linked, not static"
    fi
done
echo "ok: statically linked (no PT_INTERP among ${phnum} program headers)" >&2

size=$(stat -c %s "$bin")
mib=$(awk -v s="$size" 'BEGIN { printf "%.2f", s / 1048576 }')
if [ "$size" -ge "$budget" ]; then
    fail "$bin is ${size} bytes (${mib} MiB); the budget is under ${budget} bytes (16 MiB)"
fi
echo "ok: size ${size} bytes (${mib} MiB), under 16 MiB by $((budget - size)) bytes" >&2

# --version from an empty root: nothing but the binary exists.
root=$(mktemp -d "${TMPDIR:-/tmp}/sl-empty-root.XXXXXX")
trap 'rm -rf "$root"' EXIT
cp "$bin" "$root/spark-localizer"
chroot_bin=$(PATH="$PATH:/usr/sbin:/sbin" command -v chroot || true)
if [ -z "$chroot_bin" ]; then
    chroot_cmd=()
elif [ "$(id -u)" -eq 0 ]; then
    chroot_cmd=("$chroot_bin" "$root")
elif command -v unshare >/dev/null 2>&1 && unshare -r true 2>/dev/null; then
    chroot_cmd=("$(command -v unshare)" -r "$chroot_bin" "$root")
else
    chroot_cmd=()
fi
if [ "${#chroot_cmd[@]}" -eq 0 ]; then
    [ -z "${CI:-}" ] || fail "--version in an empty chroot cannot be checked: no chroot, or not root and no unprivileged user namespace (unshare -r)"
    echo "SKIP: --version in an empty chroot: no chroot, or not root and no unprivileged user namespace (unshare -r)" >&2
else
    version=$(env -i "${chroot_cmd[@]}" /spark-localizer --version) ||
        fail "--version does not run in an empty chroot (${chroot_cmd[*]})"
    echo "ok: '${version}' from an empty chroot" >&2
fi

realpath "$bin"
