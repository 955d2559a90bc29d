#!/usr/bin/env bash
# Installs a Spark for the real-JVM end-to-end test (tests/it/spark_e2e.rs): PyPI's
# `pyspark`, whose package directory is a complete SPARK_HOME (jars/, bin/), into the venv
# target/spark-venv, and a JDK (javac, jar) when missing.
#
# The version is the Spark of the pod templates' image (apache/spark:3.5.3); Spark 3.5
# runs on Java 8, 11 and 17 (Debian 12's default JDK is 17). Idempotent and
# non-interactive: a venv that already holds this version is reused (nothing is
# downloaded); otherwise it is made anew (the pyspark sdist is a ~320 MB download).
#
# Prints SPARK_HOME (the installed pyspark package directory) on the last line of stdout:
#   (Spark 4 needs Java 17, Debian 12's default)
#
#   export SPARK_LOCALIZER_TEST_SPARK_HOME="$(bash scripts/setup/spark.sh | tail -n 1)"
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

# A second Spark for the resolver's differential tests: `spark.sh 4.0.1` installs that
# version into target/spark4-venv (Spark 4 resolves --packages with Ivy 2.5.3, 3.5 with
# 2.5.1; tests/it/maven.rs runs both).
PYSPARK_VERSION="${1:-3.5.3}"
case "$PYSPARK_VERSION" in
    3.5.3) venv=target/spark-venv ;;
    *) venv="target/spark${PYSPARK_VERSION%%.*}-venv" ;;
esac
py="${venv}/bin/python"

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo -n "$@"; fi
}

packages=()
command -v javac >/dev/null 2>&1 && command -v jar >/dev/null 2>&1 || packages+=(default-jdk-headless)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || packages+=(python3-venv)
if [ "${#packages[@]}" -gt 0 ]; then
    echo "==> installing ${packages[*]}" >&2
    as_root apt-get update -qq </dev/null >&2
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${packages[@]}" </dev/null >&2
fi

installed() {
    "$py" -c 'import importlib.metadata as m, sys; sys.exit(m.version("pyspark") != sys.argv[1])' \
        "$PYSPARK_VERSION" >/dev/null 2>&1 </dev/null
}

if ! installed; then
    echo "==> installing pyspark==${PYSPARK_VERSION} into ${venv}" >&2
    start=$SECONDS
    python3 -m venv --clear "$venv" >&2
    "${venv}/bin/pip" install -q --disable-pip-version-check "pyspark==${PYSPARK_VERSION}" </dev/null >&2
    echo "    installed in $((SECONDS - start)) s" >&2
    installed || {
        echo "pyspark ${PYSPARK_VERSION} is not importable from ${venv} after the install" >&2
        exit 1
    }
fi

spark_home=$("$py" -c 'import os, pyspark; print(os.path.dirname(os.path.realpath(pyspark.__file__)))' </dev/null)
if ! compgen -G "${spark_home}/jars/spark-core_*.jar" >/dev/null; then
    echo "${spark_home}/jars holds no spark-core jar: not a usable SPARK_HOME" >&2
    exit 1
fi
java_version=$(java -version 2>&1 | head -n 1)
echo "ok: Spark ${PYSPARK_VERSION} (pyspark) at ${spark_home}; ${java_version}" >&2
echo "$spark_home"
