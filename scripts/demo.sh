#!/usr/bin/env bash
# A real localization that needs no network: builds spark-localizer, serves a
# folder of jars and files on 127.0.0.1, localizes it, verifies pins, and shows
# the classpath fragment, the report, and a restart that fetches nothing.
#
#   bash scripts/demo.sh            # demo in a temp dir
#   DEMO_DIR=/tmp/x bash scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release --quiet
bin="$PWD/target/release/spark-localizer"

work="${DEMO_DIR:-$(mktemp -d -t spark-localizer-demo.XXXXXX)}"
mkdir -p "$work/repo/org/apache/celeborn/0.5.1" "$work/repo/conf"
cd "$work"

# A Maven-layout "repository": a few jars of different sizes and a config file.
python3 - <<'PY'
import os, random, zipfile
random.seed(7)
base = "repo/org/apache/celeborn/0.5.1"
for name, size in [("celeborn-client-spark-3-shaded_2.12-0.5.1.jar", 3 << 20),
                   ("metrics-plugin.jar", 512 << 10), ("jdbc-driver.jar", 1 << 20)]:
    with zipfile.ZipFile(os.path.join(base, name), "w") as z:
        z.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
        z.writestr("payload.bin", random.randbytes(size))
with open("repo/conf/log4j2.properties", "w") as f:
    f.write("rootLogger.level = info\n")
# A Python-environment-like bundle for --archives (unpacked under its #alias).
import io, tarfile
with tarfile.open("repo/conf/pyenv.tar.gz", "w:gz") as t:
    for name, body, mode in [("bin/python", b"#!/bin/sh\necho python\n", 0o755),
                             ("lib/site/mod.py", b"x = 1\n", 0o644)]:
        info = tarfile.TarInfo(name); info.size = len(body); info.mode = mode
        t.addfile(info, io.BytesIO(body))
PY
# A jar with a real class, when a JDK is at hand, to show a JVM loading it.
if command -v javac >/dev/null 2>&1 && command -v jar >/dev/null 2>&1; then
    mkdir -p hello/src/demo hello/classes
    cat > hello/src/demo/Hello.java <<'JAVA'
package demo;
public class Hello {
    public static void main(String[] args) {
        System.out.println("demo.Hello loaded from " + Hello.class.getProtectionDomain().getCodeSource().getLocation());
    }
}
JAVA
    javac -d hello/classes hello/src/demo/Hello.java
    jar cf repo/org/apache/celeborn/0.5.1/metrics-plugin.jar -C hello/classes .
fi

# Pins keyed by destination name (the jdbc jar is renamed with #postgresql.jar).
(cd repo && sha256sum org/apache/celeborn/0.5.1/*.jar conf/* | sed 's#  .*/#  #; s#jdbc-driver.jar#postgresql.jar#; s#pyenv.tar.gz#environment#') > pins.sha256

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 -m http.server --bind 127.0.0.1 --directory repo "$port" >server.log 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 50); do (echo >/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done

url="http://127.0.0.1:$port"
jars="$url/org/apache/celeborn/0.5.1/celeborn-client-spark-3-shaded_2.12-0.5.1.jar,$url/org/apache/celeborn/0.5.1/metrics-plugin.jar,$url/org/apache/celeborn/0.5.1/jdbc-driver.jar#postgresql.jar,local:///opt/spark/jars/spark-core.jar"
files="$url/conf/log4j2.properties"
archives="$url/conf/pyenv.tar.gz#environment"

echo "== check: the plan, where each value came from, and a probe of every URI"
"$bin" check --jars "$jars" --files "$files" --archives "$archives" --checksums pins.sha256 \
  --jars-dir "$work/spark-jars" --files-dir "$work/spark-files" || true

echo
echo "== fetch"
"$bin" fetch --jars "$jars" --files "$files" --archives "$archives" --checksums pins.sha256 \
  --jars-dir "$work/spark-jars" --files-dir "$work/spark-files"

echo
echo "== outputs in $work"
ls -l spark-jars spark-files
echo "-- the unpacked archive:"; find spark-files/environment -type f -exec ls -l {} +
echo "-- spark-jars/classpath:"; cat spark-jars/classpath
echo "-- spark-jars/spark-classpath.env:"; cat spark-jars/spark-classpath.env
echo "-- sourced before Spark's entrypoint:"
SPARK_CLASSPATH=/opt/spark/conf sh -c ". spark-jars/spark-classpath.env; echo SPARK_CLASSPATH=\$SPARK_CLASSPATH"

if command -v java >/dev/null 2>&1 && [ -d hello ]; then
    echo "-- a JVM started the way Spark's entrypoint would, with the localized classpath:"
    sh -c ". spark-jars/spark-classpath.env; exec java -cp \"\$SPARK_CLASSPATH\" demo.Hello"
fi

echo
echo "== a restarted init container re-verifies and fetches nothing"
"$bin" fetch --jars "$jars" --files "$files" --archives "$archives" --checksums pins.sha256 \
  --jars-dir "$work/spark-jars" --files-dir "$work/spark-files"
python3 - spark-jars/spark-localizer-report.json <<'PY'
import json, sys
for a in json.load(open(sys.argv[1]))["artifacts"]:
    print(f"{a['status']:8} {a['uri']}")
PY
