#!/usr/bin/env bash
# The staging server under load: N concurrent downloads of one bundle (default 200 x
# 50 MiB), against nginx serving the same file with the same client in the same run.
# Reports wall time, throughput and the server's peak RSS (VmHWM), and the ratios.
#
#   bash bench/stage-downloads.sh            # 200 clients, 50 MiB bundle, release build
#   bash bench/stage-downloads.sh --quick    # 20 clients, 5 MiB (CI: proves it still works)
#
# Client: one `curl --parallel` process holding all N transfers at once (HTTP/1.1, one
# connection each), bodies to /dev/null; every transfer must answer 200 with the full
# size, and the first 5 are also downloaded again and checked by sha256. Everything
# on 127.0.0.1. Env: CLIENTS, SIZE_MIB, SPARK_LOCALIZER_BIN (default: a release build).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

clients="${CLIENTS:-200}"
size_mib="${SIZE_MIB:-50}"
if [ "${1:-}" = "--quick" ]; then
    clients="${CLIENTS:-20}"
    size_mib="${SIZE_MIB:-5}"
fi

. bench/lib.sh
need=()
command -v curl >/dev/null 2>&1 || need+=(curl)
have_nginx || need+=(nginx-light)
apt_install "${need[@]}"

bin="${SPARK_LOCALIZER_BIN:-}"
if [ -z "$bin" ]; then
    cargo build --release --quiet
    bin="$PWD/target/release/spark-localizer"
fi

work=$(mktemp -d)
server_pid=""
cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
    [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# A bundle of incompressible bytes: a tar.gz about size_mib MiB.
mkdir -p "$work/payload"
head -c "$((size_mib * 1024 * 1024))" /dev/urandom > "$work/payload/big.jar"
"$bin" stage serve --upload-auth none --listen 127.0.0.1:0 --store "$work/store" --unused-ttl 1h \
    > "$work/serve.out" 2> "$work/serve.err" &
server_pid=$!
for _ in $(seq 100); do grep -q '^listening on ' "$work/serve.out" 2>/dev/null && break; sleep 0.1; done
server=$(sed -n 's/^listening on //p' "$work/serve.out")
[ -n "$server" ] || { cat "$work/serve.err"; echo "stage serve did not start" >&2; exit 1; }
"$bin" stage upload --server "$server" "$work/payload/big.jar" > "$work/staged.json" 2>/dev/null
id=$(sed -E 's/.*"resourceId":"([^"]+)".*/\1/' "$work/staged.json")
secret=$(sed -E 's/.*"resourceSecret":"([^"]+)".*/\1/' "$work/staged.json")
sha=$(sed -E 's/.*"sha256":"([^"]+)".*/\1/' "$work/staged.json")
url="$server/api/v0/resources/$id"
bytes=$(curl -sS -I -H "Authorization: $secret" "$url" | tr -d '\r' | awk -F': ' 'tolower($1)=="content-length"{print $2}')

# The same bytes from nginx.
mkdir -p "$work/www"
curl -sS -H "Authorization: $secret" -o "$work/www/bundle.tar.gz" "$url"
port=$(start_nginx "$work" "$work/www")
nginx_url="http://127.0.0.1:$port/bundle.tar.gz"

# N transfers in one curl process, all at once; prints "code size" per transfer.
run() { # run URL HEADER -> seconds
    local target=$1 header=$2 args=()
    for _ in $(seq "$clients"); do args+=(-o /dev/null "$target"); done
    local start end
    start=$(date +%s.%N)
    curl -sS --no-progress-meter --parallel --parallel-immediate --parallel-max "$clients" -H "$header" \
        -w '%{http_code} %{size_download}\n' "${args[@]}" > "$work/codes"
    end=$(date +%s.%N)
    local good
    good=$(grep -c "^200 $bytes\$" "$work/codes" || true)
    if [ "$good" -ne "$clients" ]; then
        echo "FAIL: only $good of $clients transfers from $target were complete:" >&2
        sort "$work/codes" | uniq -c >&2
        exit 1
    fi
    calc "$end - $start"
}
verify() { # verify URL HEADER
    for i in 1 2 3 4 5; do
        got=$(curl -sS -H "$2" "$1" | sha256sum | cut -d' ' -f1)
        [ "$got" = "$sha" ] || { echo "FAIL: sha256 $got from $1, expected $sha" >&2; exit 1; }
    done
}
calc() { awk "BEGIN { print $* }"; }
hwm() { awk '/VmHWM/{print $2}' "/proc/$1/status"; }  # KiB

verify "$url" "Authorization: $secret"
verify "$nginx_url" "X-Nothing: 1"
run "$url" "Authorization: $secret" > /dev/null   # warm-up
stage_secs=$(run "$url" "Authorization: $secret")
stage_rss=$(hwm "$server_pid")
run "$nginx_url" "X-Nothing: 1" > /dev/null
nginx_secs=$(run "$nginx_url" "X-Nothing: 1")
nginx_rss=0
for p in $(pgrep -P "$(cat "$work/nginx.pid")"); do
    r=$(hwm "$p"); [ "$r" -gt "$nginx_rss" ] && nginx_rss=$r
done

total_mib=$(calc "$clients * $bytes / 1048576")
printf '\n%s concurrent downloads of a %s-byte bundle (%.0f MiB in all), %s, %s cores\n\n' \
    "$clients" "$bytes" "$total_mib" "$(date -u +%Y-%m-%d)" "$(nproc)"
printf '| server | wall s | MiB/s | peak RSS MiB |\n| --- | ---: | ---: | ---: |\n'
printf '| spark-localizer stage serve | %.2f | %.0f | %.1f |\n' "$stage_secs" \
    "$(calc "$total_mib / $stage_secs")" "$(calc "$stage_rss / 1024")"
printf '| nginx (sendfile, 2 workers; largest worker) | %.2f | %.0f | %.1f |\n' "$nginx_secs" \
    "$(calc "$total_mib / $nginx_secs")" "$(calc "$nginx_rss / 1024")"
printf '\nstage serve / nginx wall time: %.2fx\n' "$(calc "$stage_secs / $nginx_secs")"
