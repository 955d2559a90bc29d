#!/usr/bin/env bash
# Installs what the Kerberos tests need, when missing (tests/it/kerberos.rs,
# tests/it/support/kdc.rs): a real MIT KDC and its admin tool (krb5-kdc,
# krb5-admin-server's kadmin.local), kinit (krb5-user), libfaketime (a KDC whose clock
# runs ahead), and python-gssapi in the test venv for the test HDFS's NameNode side
# (built from source against libkrb5-dev). Idempotent and non-interactive.
#
#   scripts/setup/kerberos.sh VENV     VENV: the test HDFS's venv (target/test-venv)
set -euo pipefail

venv="${1:?usage: $0 VENV}"

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo -n "$@"; fi
}

packages=()
[ -x /usr/sbin/krb5kdc ] || packages+=(krb5-kdc)
[ -x /usr/sbin/kadmin.local ] || packages+=(krb5-admin-server)
command -v kinit >/dev/null 2>&1 || packages+=(krb5-user)
command -v faketime >/dev/null 2>&1 || packages+=(faketime)
command -v krb5-config >/dev/null 2>&1 || packages+=(libkrb5-dev)
if [ "${#packages[@]}" -gt 0 ]; then
    echo "==> installing ${packages[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${packages[@]}" </dev/null
fi

if ! "${venv}/bin/python" -c 'import gssapi' >/dev/null 2>&1 </dev/null; then
    echo "==> installing gssapi into ${venv}"
    "${venv}/bin/pip" install -q --disable-pip-version-check "gssapi==1.12.0" </dev/null
fi
