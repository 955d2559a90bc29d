#!/usr/bin/env bash
# Runs every cargo-fuzz target (fuzz/fuzz_targets/) for a given time each, with
# libFuzzer and AddressSanitizer, from the committed seeds (fuzz/corpus/<target>/)
# into a working corpus under target/fuzz/corpus/<target>/ (the committed seeds stay
# small). A finding stops the run: its input is in fuzz/artifacts/<target>/.
#
#   bash bench/fuzz.sh                 # 600 s per target (the long run)
#   bash bench/fuzz.sh --quick         # 5 s per target (the test command's smoke)
#   SECONDS_PER_TARGET=60 ONLY="properties checksums" bash bench/fuzz.sh
#
# Installs the nightly toolchain (rustup, minimal profile) and cargo-fuzz when missing.
# Prints one line per target: runs, executions per second, coverage (cov: edges,
# ft: features) and corpus size, from libFuzzer's final statistics.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

CARGO_FUZZ_VERSION=0.13.2
seconds="${SECONDS_PER_TARGET:-600}"
[ "${1:-}" = "--quick" ] && seconds="${SECONDS_PER_TARGET:-5}"

if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    echo "==> rustup toolchain install nightly --profile minimal" >&2
    rustup toolchain install nightly --profile minimal >&2
fi
if ! cargo fuzz --version 2>/dev/null | grep -q "$CARGO_FUZZ_VERSION"; then
    echo "==> cargo install cargo-fuzz $CARGO_FUZZ_VERSION" >&2
    cargo install --locked --quiet cargo-fuzz --version "$CARGO_FUZZ_VERSION" >&2
fi

targets=$(sed -n 's/^name = "\(.*\)"$/\1/p' fuzz/Cargo.toml | grep -vx spark-localizer-fuzz)
[ -z "${ONLY:-}" ] || targets=$ONLY

echo "==> cargo +nightly fuzz build (release, debug assertions, AddressSanitizer)" >&2
start=$SECONDS
cargo +nightly fuzz build >&2
echo "    built in $((SECONDS - start)) s" >&2

printf '%-16s %8s %10s %10s %8s %8s %8s\n' target seconds runs "exec/s" cov ft corpus
for target in $targets; do
    work="target/fuzz/corpus/${target}"
    mkdir -p "$work" "fuzz/artifacts/${target}"
    log="target/fuzz/${target}.log"
    if ! cargo +nightly fuzz run "$target" "$work" "fuzz/corpus/${target}" -- \
        -max_total_time="$seconds" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="fuzz/artifacts/${target}/" >"$log" 2>&1; then
        tail -n 40 "$log" >&2
        echo "FINDING: ${target} (input in fuzz/artifacts/${target}/, log in ${log})" >&2
        exit 1
    fi
    stat() { sed -n "s/^stat::$1: *\([0-9]*\).*/\1/p" "$log" | tail -n 1; }
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | cut -d' ' -f2)
    ft=$(grep -o 'ft: [0-9]*' "$log" | tail -n 1 | cut -d' ' -f2)
    printf '%-16s %8s %10s %10s %8s %8s %8s\n' "$target" "$seconds" "$(stat number_of_executed_units)" \
        "$(stat average_exec_per_sec)" "${cov:-?}" "${ft:-?}" "$(find "$work" -type f | wc -l)"
done
