#!/usr/bin/env bash
# Node-level scale: PODS pods on one node start at once and fetch the 200-jar
# workload (W1 of bench/peers.sh: 200 jars, about 250 MiB, pinned by sha256) from
# nginx on 127.0.0.1, first each straight from the origin, then all through one
# `mirror serve` with an empty store. Same run, medians of ROUNDS:
#
#   one pod alone        one `fetch` from the origin (the yardstick)
#   PODS direct          PODS `fetch` at once from the origin
#   PODS via mirror      PODS `fetch --mirror` at once, the mirror's store empty
#   one via warm mirror  one `fetch --mirror` after them (every blob held)
#
# For each: the wall time of all the pods together and the bytes the origin sent
# (nginx's access log, $body_bytes_sent), against the workload's unique bytes.
# Every pod's jars are checked against the pins after every run (sha256sum -c).
# Targets: origin bytes through the mirror 1.00x the unique bytes (PODSx direct)
# and PODS via mirror within 1.5x of one pod alone (issue 17); PODS via mirror within
# 1.1x of PODS direct (issue 36).
#
# The pods write to POD_DIR, by default a directory on /dev/shm (an emptyDir with
# medium: Memory) when it is a tmpfs with room: 16 pods write 4 GiB a run, and on
# this VM's disk the writeback of the last run's pages made wall times swing by
# 1.7x from one run to the next, in either mode.
#
#   bash bench/mirror.sh            # 16 pods, 200 jars, 3 rounds, static binary
#   bash bench/mirror.sh --quick    # CI: 4 pods, 20 jars (25 MiB), 1 round
#
# Env: PODS, ROUNDS, POD_DIR, SPARK_LOCALIZER_BIN (default: images/build-static.sh's
# binary).
# Exits 1 when a pod's output is wrong or the origin sent more than the unique bytes
# through the mirror (correctness); timings are reported, not enforced.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD

quick=false
[ "${1:-}" = "--quick" ] && quick=true
if $quick; then
    pods="${PODS:-4}" rounds="${ROUNDS:-1}" jars=20 total_mib=25
else
    pods="${PODS:-16}" rounds="${ROUNDS:-3}" jars=200 total_mib=250
fi

. bench/lib.sh
have_nginx || apt_install nginx-light

bin=$(static_bin)

# Its own copy of W1: bench/peers.sh's data dir holds W2's big file too, which
# another size here would make data.py write again.
data="$root/target/bench/mirror-data"
$quick && data="$root/target/bench/mirror-data-quick"
mkdir -p "$data"
python3 bench/peers/data.py "$data" "$jars" "$total_mib" 1
unique=$(du -b --apparent-size -c "$data"/w1/*.jar | tail -n 1 | cut -f1)

work="$root/target/bench/mirror-run"
rm -rf "$work"
mkdir -p "$work"
mirror_pid=""
cleanup() {
    [ -n "$mirror_pid" ] && kill "$mirror_pid" 2>/dev/null || true
    [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
    [ -f "$work/capped/nginx.pid" ] && kill "$(cat "$work/capped/nginx.pid")" 2>/dev/null || true
    [ -n "${KEEP:-}" ] || rm -rf "$work"
    case "${pod_dir:-}" in /dev/shm/spark-localizer-mirror-bench.*) rm -rf "$pod_dir" ;; esac
}
trap cleanup EXIT

# Where the pods write (see above): /dev/shm when it is a tmpfs with room for
# every pod's copy and some to spare, else under $work.
need_kib=$(( (unique / 1024) * pods * 3 / 2 ))
if [ -n "${POD_DIR:-}" ]; then
    pod_dir=$POD_DIR
elif [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] \
    && [ "$(df -k --output=avail /dev/shm | tail -n 1)" -gt "$need_kib" ]; then
    pod_dir=$(mktemp -d /dev/shm/spark-localizer-mirror-bench.XXXXXX)
else
    pod_dir="$work"
fi
echo "==> the pods write under $pod_dir/pods" >&2

# Two origins serve the same jars: nginx on loopback as fast as it goes (the
# worst case for a mirror: the pods' own hashing and writing, which no mirror
# removes, is all there is), and one capped per connection like a remote
# repository or object store (ORIGIN_RATE, nginx limit_rate).
rate="${ORIGIN_RATE:-2m}"
port_fast=$(NGINX_ACCESS_LOG="log_format sent '\$request_method \$uri \$status \$body_bytes_sent'; access_log $work/access.log sent;" \
    start_nginx "$work" "$data")
mkdir -p "$work/capped"
port_capped=$(NGINX_ACCESS_LOG="log_format sent '\$request_method \$uri \$status \$body_bytes_sent'; access_log $work/access.log sent; limit_rate $rate;" \
    start_nginx "$work/capped" "$data")

# origin_bytes LABEL: bytes nginx sent since the log was last emptied (then empties it).
origin_bytes() {
    local sum
    sum=$(awk '{ s += $4 } END { printf "%.0f", s }' "$work/access.log")
    [ -z "${KEEP:-}" ] || cp "$work/access.log" "$work/access.log.${1// /_}"
    : > "$work/access.log"
    echo "$sum"
}

# start_mirror ORIGIN: a mirror with an empty store allowing ORIGIN.
start_mirror() {
    rm -rf "$work/mirror" "$work/mirror.out"
    "$bin" mirror serve --listen 127.0.0.1:0 --dir "$work/mirror" --allow-origin "$1/" \
        >"$work/mirror.out" 2>"$work/mirror.err" </dev/null &
    mirror_pid=$!
    local i
    for i in $(seq 100); do
        grep -q "listening on" "$work/mirror.out" 2>/dev/null && break
        sleep 0.05
    done
    mirror_url=$(sed -n 's/^listening on //p' "$work/mirror.out")
    [ -n "$mirror_url" ] || { cat "$work/mirror.err" >&2; echo "mirror did not start" >&2; exit 1; }
}

stop_mirror() {
    [ -z "${KEEP:-}" ] || curl -s "$mirror_url/metrics" > "$work/mirror.metrics"
    kill "$mirror_pid" 2>/dev/null || true
    wait "$mirror_pid" 2>/dev/null || true
    mirror_pid=""
}

# cpu_to FILE: CPU seconds (user + system) of this shell's finished children, plus the
# mirror's so far, into FILE (run in this shell: `times` in a subshell, as in $(...),
# knows none of these children).
cpu_to() {
    local mirror=0
    times > "$work/times"
    if [ -n "$mirror_pid" ] && [ -r "/proc/$mirror_pid/stat" ]; then
        mirror=$(awk -v hz="$(getconf CLK_TCK)" '{ printf "%.3f", ($14 + $15) / hz }' "/proc/$mirror_pid/stat")
    fi
    tail -n 1 "$work/times" | awk -v m="$mirror" '{ for (i = 1; i <= 2; i++) { split($i, t, "m"); s += t[1] * 60 + t[2] } } END { printf "%.3f %.3f\n", s, m }' > "$1"
}

# run_pods N [FLAG...]: N pods at once from $jar_list; prints their wall seconds and
# the CPU seconds they and the mirror used; checks each pod's jars against the pins,
# and that none fell back to the origin.
run_pods() {
    local n=$1 i start end failed=0
    shift
    rm -rf "$pod_dir/pods"
    mkdir -p "$pod_dir/pods"
    # Dirty pages of the last run are not this run's cost.
    sync
    cpu_to "$work/cpu0"
    start=$(date +%s.%N)
    local pids=()
    for i in $(seq "$n"); do
        "$bin" fetch -q --no-progress --jars "$jar_list" --checksums "$data/w1.sha256" \
            --jars-dir "$pod_dir/pods/$i/jars" --files-dir "$pod_dir/pods/$i/files" "$@" \
            >"$pod_dir/pods/$i.log" 2>&1 </dev/null &
        pids+=($!)
    done
    for i in "${pids[@]}"; do
        wait "$i" || failed=1
    done
    end=$(date +%s.%N)
    cpu_to "$work/cpu1"
    [ "$failed" = 0 ] || { cat "$pod_dir"/pods/*.log >&2; echo "a pod failed" >&2; exit 1; }
    for i in $(seq "$n"); do
        (cd "$pod_dir/pods/$i/jars" && sha256sum -c --quiet --strict "$data/w1.sha256" >/dev/null) || {
            echo "pod $i: wrong or missing jars" >&2
            exit 1
        }
    done
    if grep -q '"mirror": *"fallback"' "$pod_dir"/pods/*/jars/spark-localizer-report.json; then
        echo "a pod fell back to the origin:" >&2
        grep -h -o '"mirror_error": *"[^"]*"' "$pod_dir"/pods/*/jars/spark-localizer-report.json | head -3 >&2
        exit 1
    fi
    local p0 m0 p1 m1
    read -r p0 m0 < "$work/cpu0"
    read -r p1 m1 < "$work/cpu1"
    printf '%.3f %.3f %.3f\n' "$(echo "$end - $start" | bc -l)" "$(echo "$p1 - $p0" | bc -l)" "$(echo "$m1 - $m0" | bc -l)"
}

median() { tr ' ' '\n' | grep . | sort -n | awk '{ a[NR] = $1 } END { printf "%.3f", (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
verdict() { awk -v v="$1" -v t="$2" 'BEGIN { print (v <= t + 1e-9) ? "met" : "missed" }'; }

# bench_origin LABEL URL: every mode, ROUNDS times, against the origin at URL.
bench_origin() {
    local label=$1 origin=$2 r mode m
    declare -A secs=() cpu=() mcpu=() bytes=()
    local took
    # nginx serves $data: the jars are under /w1/.
    jar_list=$(cd "$data/w1" && ls -- *.jar | sed "s#^#$origin/w1/#" | paste -sd, -)
    local modes=("one pod alone" "$pods direct" "$pods via mirror" "one via warm mirror")
    for r in $(seq "$rounds"); do
        echo "==> $label origin, round $r of $rounds: $pods pods, $jars jars ($((unique / 1048576)) MiB)" >&2
        : > "$work/access.log"
        took=$(run_pods 1)
        read -r t_wall t_pods t_mirror <<< "$took"
        secs["one pod alone"]+="$t_wall "
        cpu["one pod alone"]+="$(echo "$t_pods + $t_mirror" | bc -l) "
        mcpu["one pod alone"]+="$t_mirror "
        bytes["one pod alone"]=$(origin_bytes "one pod alone")
        took=$(run_pods "$pods")
        read -r t_wall t_pods t_mirror <<< "$took"
        secs["$pods direct"]+="$t_wall "
        cpu["$pods direct"]+="$(echo "$t_pods + $t_mirror" | bc -l) "
        mcpu["$pods direct"]+="$t_mirror "
        bytes["$pods direct"]=$(origin_bytes "$pods direct")
        start_mirror "$origin"
        took=$(run_pods "$pods" --mirror "$mirror_url")
        read -r t_wall t_pods t_mirror <<< "$took"
        secs["$pods via mirror"]+="$t_wall "
        cpu["$pods via mirror"]+="$(echo "$t_pods + $t_mirror" | bc -l) "
        mcpu["$pods via mirror"]+="$t_mirror "
        bytes["$pods via mirror"]=$(origin_bytes "$pods via mirror")
        took=$(run_pods 1 --mirror "$mirror_url")
        read -r t_wall t_pods t_mirror <<< "$took"
        secs["one via warm mirror"]+="$t_wall "
        cpu["one via warm mirror"]+="$(echo "$t_pods + $t_mirror" | bc -l) "
        mcpu["one via warm mirror"]+="$t_mirror "
        bytes["one via warm mirror"]=$(origin_bytes "one via warm mirror")
        stop_mirror
    done
    printf '\n%s origin (%s cores)\n%-22s %8s %8s %10s %12s %10s\n' "$label" "$(nproc)" "mode" "wall s" "CPU s" "of mirror" "origin MiB" "x unique"
    for mode in "${modes[@]}"; do
        m=$(echo "${secs[$mode]}" | median)
        printf '%-22s %8s %8s %10s %12.1f %10.2f\n' "$mode" "$m" "$(echo "${cpu[$mode]}" | median)" \
            "$(echo "${mcpu[$mode]}" | median)" \
            "$(echo "${bytes[$mode]} / 1048576" | bc -l)" "$(echo "${bytes[$mode]} / $unique" | bc -l)"
    done
    local alone via direct ratio origin_ratio
    alone=$(echo "${secs["one pod alone"]}" | median)
    via=$(echo "${secs["$pods via mirror"]}" | median)
    direct=$(echo "${secs["$pods direct"]}" | median)
    ratio=$(echo "$via / $alone" | bc -l)
    origin_ratio=$(echo "${bytes["$pods via mirror"]} / $unique" | bc -l)
    printf '%s pods via the mirror / one pod alone: %.2fx (target <= 1.5: %s)\n' \
        "$pods" "$ratio" "$(verdict "$ratio" 1.5)"
    printf '%s pods via the mirror / %s direct: %.2fx (target <= 1.1: %s)\n' \
        "$pods" "$pods" "$(echo "$via / $direct" | bc -l)" "$(verdict "$(echo "$via / $direct" | bc -l)" 1.1)"
    # The pods' own work (receive, hash, write: every pod verifies every byte) and the
    # mirror's, spread over every core: no mirror can beat this floor.
    printf 'CPU floor of %s pods via the mirror: %.2f s (their CPU s / %s cores); wall / floor: %.2fx\n' \
        "$pods" "$(echo "$(echo "${cpu["$pods via mirror"]}" | median) / $(nproc)" | bc -l)" "$(nproc)" \
        "$(echo "$via / ($(echo "${cpu["$pods via mirror"]}" | median) / $(nproc))" | bc -l)"
    printf 'origin bytes via the mirror / unique bytes: %.2fx (target 1.00: %s)\n' "$origin_ratio" "$(verdict "$origin_ratio" 1.0)"
    awk -v v="$origin_ratio" 'BEGIN { exit (v <= 1.0 + 1e-9) ? 0 : 1 }' || {
        echo "the origin sent more than the unique bytes through the mirror" >&2
        exit 1
    }
}

bench_origin "loopback (uncapped)" "http://127.0.0.1:$port_fast"
bench_origin "capped ($rate/s per connection)" "http://127.0.0.1:$port_capped"
