#!/usr/bin/env bash
# Runs every cargo-fuzz target (fuzz/fuzz_targets/) for a given time each, with
# libFuzzer and AddressSanitizer, from the committed seeds (fuzz/corpus/<target>/)
# into a working corpus under target/fuzz/corpus/<target>/ (the committed seeds stay
# small). A finding stops the run: its input is in fuzz/artifacts/<target>/.
#
#   bash bench/fuzz.sh                 # 600 s per target (the long run)
#   bash bench/fuzz.sh --quick         # 5 s per target (the test command's smoke)
#   SECONDS_PER_TARGET=60 ONLY="properties checksums" bash bench/fuzz.sh
#   JOBS=2 bash bench/fuzz.sh          # two targets at a time (one core each)
#
# --build-only builds the targets and stops; --no-build runs what was built (the
# test command builds in the background, then runs). --quick builds without
# optimizations (cargo fuzz build --dev: quicker to build, slower to run).
#
# Installs the nightly toolchain (rustup, minimal profile) and cargo-fuzz when missing.
# Prints one line per target: runs, executions per second, coverage (cov: edges,
# ft: features) and corpus size, from libFuzzer's final statistics.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

CARGO_FUZZ_VERSION=0.13.2
seconds="${SECONDS_PER_TARGET:-600}"
profile=release
build=yes
run=yes
for arg in "$@"; do
    case "$arg" in
        --quick) seconds="${SECONDS_PER_TARGET:-5}"; profile=debug ;;
        --build-only) run=no ;;
        --no-build) build=no ;;
        *) echo "bench/fuzz.sh: unknown argument $arg (--quick, --build-only, --no-build)" >&2; exit 2 ;;
    esac
done
bins="fuzz/target/x86_64-unknown-linux-gnu/${profile}"

targets=$(sed -n 's/^name = "\(.*\)"$/\1/p' fuzz/Cargo.toml | grep -vx spark-localizer-fuzz)
[ -z "${ONLY:-}" ] || targets=$ONLY

if [ "$build" = yes ]; then
    if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
        echo "==> rustup toolchain install nightly --profile minimal" >&2
        rustup toolchain install nightly --profile minimal >&2
    fi
    if ! cargo fuzz --version 2>/dev/null | grep -q "$CARGO_FUZZ_VERSION"; then
        echo "==> cargo install cargo-fuzz $CARGO_FUZZ_VERSION" >&2
        cargo install --locked --quiet cargo-fuzz --version "$CARGO_FUZZ_VERSION" >&2
    fi
    flag=""
    [ "$profile" = debug ] && flag="--dev"
    echo "==> cargo +nightly fuzz build ${flag} (${profile}, debug assertions, AddressSanitizer)" >&2
    start=$SECONDS
    # fuzz/Cargo.lock is the root Cargo.lock plus libFuzzer's crates (what is
    # fuzzed is what ships): refuse to build when it would change.
    cargo +nightly metadata --locked --format-version 1 --manifest-path fuzz/Cargo.toml >/dev/null
    cargo +nightly fuzz build $flag >&2
    echo "    built in $((SECONDS - start)) s" >&2
fi
[ "$run" = yes ] || exit 0

# One target for `seconds`; prints its line of figures, or the finding and fails.
run_target() {
    local target=$1 work="target/fuzz/corpus/$1" log="target/fuzz/$1.log"
    mkdir -p "$work" "fuzz/artifacts/${target}"
    if ! "${bins}/${target}" "$work" "fuzz/corpus/${target}" \
        -max_total_time="$seconds" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="fuzz/artifacts/${target}/" >"$log" 2>&1; then
        tail -n 40 "$log" >&2
        echo "FINDING: ${target} (input in fuzz/artifacts/${target}/, log in ${log})" >&2
        return 1
    fi
    # (-a: libFuzzer's log may hold the bytes of an input.)
    stat() { grep -a "^stat::$1:" "$log" | tail -n 1 | grep -o '[0-9]*$'; }
    cov=$(grep -a -o 'cov: [0-9]*' "$log" | tail -n 1 | cut -d' ' -f2)
    ft=$(grep -a -o 'ft: [0-9]*' "$log" | tail -n 1 | cut -d' ' -f2)
    printf '%-18s %8s %10s %10s %8s %8s %8s\n' "$target" "$seconds" "$(stat number_of_executed_units)" \
        "$(stat average_exec_per_sec)" "${cov:-?}" "${ft:-?}" "$(find "$work" -type f | wc -l)"
}

mkdir -p target/fuzz
printf '%-18s %8s %10s %10s %8s %8s %8s\n' target seconds runs "exec/s" cov ft corpus
failed=0
# JOBS targets at a time (libFuzzer uses one core per target).
jobs="${JOBS:-1}"
for target in $targets; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || failed=1; done
    run_target "$target" &
done
while [ "$(jobs -rp | wc -l)" -gt 0 ]; do wait -n || failed=1; done
exit "$failed"
