#!/usr/bin/env bash
# --packages resolution against Spark's own: one coordinate with a deep tree
# (org.apache.maven:maven-embedder:3.8.7, 36 jars in Spark's resolution) from Debian's
# Maven repository served by nginx on 127.0.0.1, same run, medians of ROUNDS:
#
# - `spark-submit --packages` (pyspark, a fresh Ivy home each round, the repository as
#   the only resolver of spark.jars.ivySettings) minus the same spark-submit without
#   --packages: the time Spark spends resolving and copying the jars;
# - `spark-localizer fetch --packages` (resolution and fetch of every jar, verified) and
#   `spark-localizer resolve` (resolution, then every jar downloaded to pin its sha256);
# - `spark-localizer fetch --lock` of that lockfile, against `fetch --jars` of the same
#   jars as plain URLs (the lock's cost: nothing but the pins).
#
# Then the same over a network's round trip: for each RTT of RTTS (ms), bench/rtt-proxy.py
# in front of nginx (each new connection costs one RTT before data flows, each chunk is
# delayed by RTT/2 each way, so a request and its response cost one RTT; throughput is
# not limited), Spark (the proxy as the ivysettings root) against `fetch --packages`
# (the proxy as --repositories) and `fetch --lock` (the lockfile's URLs on the proxy).
# Spark's time there is again minus the spark-submit without --packages (no network).
#
#   bash bench/packages.sh            # 5 rounds, RTTS="0 20 50", release build
#   bash bench/packages.sh --quick    # 1 round, RTTS="0 50" (CI: proves it still works)
#
# Needs Debian's maven (the repository), nginx, python3 and pyspark (scripts/setup/spark.sh).
# Env: ROUNDS, RTTS (space-separated ms; empty: none), COORDINATE, SPARK_LOCALIZER_BIN
# (default: a release build), SPARK_LOCALIZER_TEST_SPARK_HOME (default: scripts/setup/spark.sh's).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

rounds="${ROUNDS:-5}"
rtts="${RTTS-0 20 50}"
if [ "${1:-}" = "--quick" ]; then
    rounds="${ROUNDS:-1}"
    rtts="${RTTS-0 50}"
fi
for rtt in $rtts; do
    [[ "$rtt" =~ ^[0-9]+$ ]] || { echo "RTTS: $rtt is not a whole number of ms" >&2; exit 2; }
done
coordinate="${COORDINATE:-org.apache.maven:maven-embedder:3.8.7}"

. bench/lib.sh
need=()
have_nginx || need+=(nginx-light)
[ -d /usr/share/maven-repo/org/apache/maven/maven-embedder ] || need+=(maven)
apt_install "${need[@]}"

bin="${SPARK_LOCALIZER_BIN:-}"
if [ -z "$bin" ]; then
    cargo build --release --quiet
    bin="$PWD/target/release/spark-localizer"
fi
spark_home="${SPARK_LOCALIZER_TEST_SPARK_HOME:-$(bash scripts/setup/spark.sh </dev/null | tail -n 1)}"

work=$(mktemp -d)
cleanup() {
    local pid
    if [ -f "$work/proxy.pids" ]; then
        while read -r pid; do kill "$pid" 2>/dev/null || true; done < "$work/proxy.pids"
        while read -r pid; do wait "$pid" 2>/dev/null || true; done < "$work/proxy.pids"
    fi
    [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
port=$(start_nginx "$work" /usr/share/maven-repo)
repo="http://127.0.0.1:$port/"
cat > "$work/ivysettings.xml" <<XML
<ivysettings><settings defaultResolver="repo"/><resolvers><ibiblio name="repo" m2compatible="true" root="$repo"/></resolvers></ivysettings>
XML
echo 'pass' > "$work/app.py"

# One proxy per RTT, in front of nginx for the whole run: its port in $work/rtt-RTT.port,
# its ivysettings in $work/ivysettings-RTT.xml.
: > "$work/proxy.pids"
for rtt in $rtts; do
    python3 bench/rtt-proxy.py --rtt-ms "$rtt" --upstream "127.0.0.1:$port" \
        > "$work/rtt-$rtt.port" 2> "$work/rtt-$rtt.err" </dev/null &
    echo "$!" >> "$work/proxy.pids"
    for _ in $(seq 200); do [ -s "$work/rtt-$rtt.port" ] && break; sleep 0.05; done
    [ -s "$work/rtt-$rtt.port" ] || { cat "$work/rtt-$rtt.err" >&2; echo "bench/rtt-proxy.py did not start" >&2; exit 1; }
    via="http://127.0.0.1:$(cat "$work/rtt-$rtt.port")/"
    sed "s#root=\"$repo\"#root=\"$via\"#" "$work/ivysettings.xml" > "$work/ivysettings-$rtt.xml"
done
rtt_repo() { echo "http://127.0.0.1:$(cat "$work/rtt-$1.port")/"; }

# secs CMD...: wall seconds of CMD (its output discarded; a failure stops the bench).
secs() {
    local start end
    start=$(date +%s.%N)
    "$@" >"$work/last.out" 2>&1 || { cat "$work/last.out" >&2; echo "failed: $*" >&2; exit 1; }
    end=$(date +%s.%N)
    echo "$end - $start" | bc -l
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

# spark_submit ARG...: the app, with the repository (IVYSETTINGS: another settings file).
spark_submit() {
    SPARK_HOME="$spark_home" "$spark_home/bin/spark-submit" --conf "spark.jars.ivy=$work/ivy" \
        --conf "spark.jars.ivySettings=${IVYSETTINGS:-$work/ivysettings.xml}" "$@" "$work/app.py"
}

ours_flags=(--repositories "$repo" --only-repositories --no-progress)
"$bin" resolve --packages "$coordinate" "${ours_flags[@]}" --lock "$work/packages.lock" 2>/dev/null
jars=$(grep -v '^#' "$work/packages.lock" | awk '{print $2}' | paste -sd, -)
count=$(grep -vc '^#' "$work/packages.lock")
for rtt in $rtts; do
    sed "s#$repo#$(rtt_repo "$rtt")#g" "$work/packages.lock" > "$work/packages-$rtt.lock"
    : > "$work/spark-$rtt"; : > "$work/fetch-$rtt"; : > "$work/lock-$rtt"
done

: > "$work/spark" ; : > "$work/spark0"; : > "$work/fetch"; : > "$work/resolve"; : > "$work/lock"; : > "$work/urls"
for round in $(seq "$rounds"); do
    rm -rf "$work/ivy"
    secs spark_submit --packages "$coordinate" >> "$work/spark"
    rm -rf "$work/ivy"
    secs spark_submit >> "$work/spark0"
    rm -rf "$work/d"
    secs "$bin" fetch --packages "$coordinate" "${ours_flags[@]}" --jars-dir "$work/d/j" --files-dir "$work/d/f" >> "$work/fetch"
    secs "$bin" resolve --packages "$coordinate" "${ours_flags[@]}" --lock "$work/l.lock" >> "$work/resolve"
    rm -rf "$work/d"
    secs "$bin" fetch --lock "$work/packages.lock" --no-progress --jars-dir "$work/d/j" --files-dir "$work/d/f" >> "$work/lock"
    rm -rf "$work/d"
    secs "$bin" fetch --jars "$jars" --no-progress --jars-dir "$work/d/j" --files-dir "$work/d/f" >> "$work/urls"
    for rtt in $rtts; do
        rtt_flags=(--repositories "$(rtt_repo "$rtt")" --only-repositories --no-progress)
        rm -rf "$work/ivy"
        IVYSETTINGS="$work/ivysettings-$rtt.xml" secs spark_submit --packages "$coordinate" >> "$work/spark-$rtt"
        rm -rf "$work/d"
        secs "$bin" fetch --packages "$coordinate" "${rtt_flags[@]}" --jars-dir "$work/d/j" --files-dir "$work/d/f" >> "$work/fetch-$rtt"
        rm -rf "$work/d"
        secs "$bin" fetch --lock "$work/packages-$rtt.lock" --no-progress --jars-dir "$work/d/j" --files-dir "$work/d/f" >> "$work/lock-$rtt"
    done
done
spark=$(median < "$work/spark"); spark0=$(median < "$work/spark0")
fetch=$(median < "$work/fetch"); resolve=$(median < "$work/resolve")
lock=$(median < "$work/lock"); urls=$(median < "$work/urls")
spark_resolution=$(echo "$spark - $spark0" | bc -l)
printf '%s: %d jars, %d round(s), medians in seconds, same run\n' "$coordinate" "$count" "$rounds"
printf '  spark-submit --packages (minus without)   %8.3f  (%.3f - %.3f)\n' "$spark_resolution" "$spark" "$spark0"
printf '  spark-localizer fetch --packages          %8.3f  Spark / ours = %.1fx\n' "$fetch" "$(echo "$spark_resolution / $fetch" | bc -l)"
printf '  spark-localizer resolve (lockfile)        %8.3f  Spark / ours = %.1fx\n' "$resolve" "$(echo "$spark_resolution / $resolve" | bc -l)"
printf '  spark-localizer fetch --lock              %8.3f  / fetch --jars (plain URLs) %.3f = %.2fx\n' "$lock" "$urls" "$(echo "$lock / $urls" | bc -l)"
if [ -n "${rtts// /}" ]; then
    printf '%s over a round trip (bench/rtt-proxy.py: +1 RTT per connection, +1 RTT per request), medians in seconds, same run\n' "$coordinate"
fi
for rtt in $rtts; do
    r_spark=$(median < "$work/spark-$rtt"); r_fetch=$(median < "$work/fetch-$rtt"); r_lock=$(median < "$work/lock-$rtt")
    r_resolution=$(echo "$r_spark - $spark0" | bc -l)
    printf '  RTT %3d ms  spark-submit --packages (minus without) %8.3f  fetch --packages %7.3f (Spark / ours = %5.1fx)  fetch --lock %7.3f (Spark / ours = %5.1fx)\n' \
        "$rtt" "$r_resolution" "$r_fetch" "$(echo "$r_resolution / $r_fetch" | bc -l)" "$r_lock" "$(echo "$r_resolution / $r_lock" | bc -l)"
done
