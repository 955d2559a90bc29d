# Shared by the scripts under bench/ (sourced, not run): Debian packages, free
# ports, nginx on 127.0.0.1.

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo -n "$@"; fi; }

# apt_install PKG...: installs the Debian packages named (none: does nothing), as root
# or through `sudo -n`, non-interactively.
apt_install() {
    [ "$#" -gt 0 ] || return 0
    echo "==> installing $*" >&2
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" </dev/null >&2
}

have_nginx() { command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ]; }

# free_ports N: N distinct ports free on 127.0.0.1 right now, space-separated.
free_ports() {
    python3 -c '
import socket, sys
held = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in held: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in held))' "$1"
}

# static_bin: the binary to measure, SPARK_LOCALIZER_BIN or else the static build
# (images/build-static.sh, its budgets checked); fails when it is not executable.
static_bin() {
    local bin="${SPARK_LOCALIZER_BIN:-}"
    if [ -z "$bin" ]; then
        echo "==> images/build-static.sh" >&2
        bin=$(bash images/build-static.sh </dev/null | tail -n 1)
    fi
    [ -x "$bin" ] || { echo "no spark-localizer binary at $bin" >&2; return 1; }
    echo "$bin"
}

# runnable BIN DIR: how to run BIN here. An ELF for this machine's architecture is printed
# as is; one for another architecture (the aarch64 build on an x86_64 machine) gets a
# wrapper DIR/emulated-spark-localizer that runs it under Debian's qemu-<arch>-static,
# whose path is printed. Emulated timings mean nothing: a smoke test only.
runnable() {
    local bin=$1 dir=$2 machine arch
    machine=$(od -An -t u2 -j 18 -N 2 "$bin" | tr -d ' ')
    case "$machine" in
    62) arch=x86_64 ;;
    183) arch=aarch64 ;;
    *) arch=unknown ;;
    esac
    if [ "$arch" = "$(uname -m)" ]; then
        echo "$bin"
        return 0
    fi
    command -v "qemu-${arch}-static" >/dev/null 2>&1 || {
        echo "$bin is for ${arch} (ELF machine ${machine}); qemu-${arch}-static is not installed" >&2
        return 1
    }
    mkdir -p "$dir"
    printf '#!/bin/sh\nexec %q %q "$@"\n' "$(command -v "qemu-${arch}-static")" "$bin" >"$dir/emulated-spark-localizer"
    chmod 0755 "$dir/emulated-spark-localizer"
    echo "!! $bin is an ${arch} binary: it runs under qemu-${arch}-static, so its timings are a smoke test, not figures" >&2
    echo "$dir/emulated-spark-localizer"
}

# start_nginx WORK ROOT [DIRECTIVE...]: nginx serving ROOT on a free 127.0.0.1 port
# (2 workers, sendfile, no access log; each DIRECTIVE added to the http block), its
# configuration, pid and logs in WORK; waits until it answers and prints the port.
# Started as root, its workers run as root too: ROOT may sit in a directory other
# users cannot enter. Stop it with `kill "$(cat WORK/nginx.pid)"`.
start_nginx() {
    local work=$1 root=$2 port user_line="" directive
    shift 2
    [ "$(id -u)" -eq 0 ] && user_line="user root;"
    read -r port < <(free_ports 1)
    {
        cat <<NGINX
$user_line
worker_processes 2;
pid $work/nginx.pid;
error_log $work/nginx.err warn;
events { worker_connections 4096; }
http {
    ${NGINX_ACCESS_LOG:-access_log off;}
    client_body_temp_path $work/nginx-body;
    proxy_temp_path $work/nginx-proxy;
    fastcgi_temp_path $work/nginx-fastcgi;
    uwsgi_temp_path $work/nginx-uwsgi;
    scgi_temp_path $work/nginx-scgi;
    sendfile on;
NGINX
        for directive in "$@"; do echo "    $directive"; done
        echo "    server { listen 127.0.0.1:$port; root $root; }"
        echo "}"
    } > "$work/nginx.conf"
    "$(command -v nginx || echo /usr/sbin/nginx)" -p "$work" -c "$work/nginx.conf" -e "$work/nginx.err" </dev/null
    for _ in $(seq 50); do
        curl -s -o /dev/null "http://127.0.0.1:$port/" && break
        sleep 0.1
    done
    curl -s -o /dev/null "http://127.0.0.1:$port/" || {
        cat "$work/nginx.err" >&2
        echo "nginx did not start" >&2
        return 1
    }
    echo "$port"
}
