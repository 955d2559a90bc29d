# Sourced by images/build-static.sh and images/build-image.sh: what an ELF file is,
# read from its headers with od (no binutils needed).
#
# elf_problem BIN MACHINE static|dynamic: sets ELF_PROBLEM to why BIN is not an ELF64
# little-endian executable for MACHINE (e_machine: 62 x86_64, 183 aarch64) linked as
# asked (static: no PT_INTERP program header, so no dynamic loader and no shared library;
# dynamic: one), empty when it is; and ELF_PHNUM to its number of program headers.

elf_problem() {
    local bin=$1 machine=$2 linking=$3 found phoff phentsize i interp=no
    ELF_PROBLEM="" ELF_PHNUM=0
    elf_u() { od -An -t "u$1" -j "$2" -N "$1" "$bin" 2>/dev/null | tr -d ' '; }
    if [ "$(stat -c %s "$bin")" -lt 64 ] || [ "$(head -c 4 "$bin" | od -An -c | tr -d ' ')" != '177ELF' ] ||
        [ "$(elf_u 1 4)" != 2 ] || [ "$(elf_u 1 5)" != 1 ]; then
        ELF_PROBLEM="is not an ELF64 little-endian executable"
        return 0
    fi
    found=$(elf_u 2 18)
    if [ "$found" != "$machine" ]; then
        ELF_PROBLEM="is for ELF machine ${found} (62 is x86_64, 183 aarch64), not ${machine}"
        return 0
    fi
    phoff=$(elf_u 8 32) phentsize=$(elf_u 2 54) ELF_PHNUM=$(elf_u 2 56)
    for ((i = 0; i < ELF_PHNUM; i++)); do
        [ "$(elf_u 4 $((phoff + i * phentsize)))" = 3 ] && interp=yes
    done
    if [ "$linking" = static ] && [ "$interp" = yes ]; then
        ELF_PROBLEM="is dynamically linked (it has a PT_INTERP header), not static"
    elif [ "$linking" = dynamic ] && [ "$interp" = no ]; then
        ELF_PROBLEM="is statically linked (no PT_INTERP header)"
    fi
}
