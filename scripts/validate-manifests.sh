#!/usr/bin/env bash
# Validates every manifest under pod-templates/ offline, with `kubernetes-validate --strict`
# (PyPI; the Kubernetes OpenAPI schemas ship inside the package, so no cluster and no
# network beyond the one-time install), against each Kubernetes version in K8S_VERSIONS.
#
# - Pod templates are Pods and are validated as such; multi-document files resource by
#   resource. --strict rejects unknown fields (a misspelt `securityContext` key, say).
# - kubernetes-validate only warns (and passes) on a kind it has no schema for; here any
#   warning fails, so a typo in `kind`/`apiVersion` cannot slip through.
# - A directory may need a newer Kubernetes than the oldest in K8S_VERSIONS (a field that
#   older schemas do not have): MIN_K8S_VERSION names it with its minimum, and its files are
#   validated against the versions from that minimum on only (stated there, with the reason).
# - The SparkApplication (sparkoperator.k8s.io, a CRD) has no schema in the package. It is
#   handled explicitly: its spec, spec.driver and spec.executor keys are checked against
#   the v1beta2 field names, and for each of driver and executor a Pod is built on the fly
#   from its initContainers, the main container (volumeMounts, env, securityContext) and
#   spec.volumes, and validated as core/v1 like any template.
#
# Idempotent and non-interactive: installs kubernetes-validate into target/k8s-venv on the
# first run (python3-venv from Debian when missing), reuses it afterwards.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

KV_VERSION=1.37.0
# The versions users run: from the oldest still in a provider's extended support to the
# newest the pinned kubernetes-validate knows (it ships schemas for 1.25 to 1.37).
K8S_VERSIONS=(1.28 1.29 1.30 1.31 1.32 1.33 1.34 1.35 1.36 1.37)
# Directories under pod-templates/ validated only from a minimum version on, with why.
# Everything else is validated against every version above.
declare -A MIN_K8S_VERSION=(
    # Pod.spec.volumes[].image (KEP-4639 image volumes) first appears in the 1.31 API
    # (alpha; beta in 1.33, on by default from 1.35): older schemas reject it as unknown.
    [image-volume]=1.31
)
venv=target/k8s-venv

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo -n "$@"; fi
}

if [ "$("${venv}/bin/kubernetes-validate" --version 2>/dev/null </dev/null || true)" != "${KV_VERSION}" ]; then
    if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
        echo "==> installing python3-venv"
        as_root apt-get update -qq </dev/null
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv </dev/null
    fi
    echo "==> installing kubernetes-validate==${KV_VERSION} into ${venv}"
    python3 -m venv --clear "${venv}"
    "${venv}/bin/pip" install -q --disable-pip-version-check "kubernetes-validate==${KV_VERSION}" </dev/null
fi

work=$(mktemp -d)
trap 'rm -rf "${work}"' EXIT

# Lists the files to validate (one per line), writing Pods derived from SparkApplications
# into ${work}; fails on a SparkApplication that breaks the v1beta2 field names.
"${venv}/bin/python" - pod-templates "${work}" > "${work}/files.txt" </dev/null <<'PY'
import os
import sys

import yaml

root, work = sys.argv[1], sys.argv[2]

# sparkoperator.k8s.io/v1beta2 field names (api/v1beta2/sparkapplication_types.go).
SPEC = {
    "type", "sparkVersion", "mode", "proxyUser", "image", "imagePullPolicy",
    "imagePullSecrets", "mainClass", "mainApplicationFile", "arguments", "sparkConf",
    "hadoopConf", "sparkConfigMap", "hadoopConfigMap", "volumes", "driver", "executor",
    "deps", "restartPolicy", "nodeSelector", "failureRetries", "retryInterval",
    "pythonVersion", "memoryOverheadFactor", "monitoring", "batchScheduler",
    "timeToLiveSeconds", "batchSchedulerOptions", "sparkUIOptions",
    "driverIngressOptions", "dynamicAllocation",
}
SPEC_REQUIRED = {"type", "sparkVersion", "mainApplicationFile", "driver", "executor"}
POD = {
    "template", "cores", "coreLimit", "memory", "memoryOverhead", "gpu", "image",
    "configMaps", "secrets", "env", "envVars", "envFrom", "envSecretKeyRefs", "labels",
    "annotations", "volumeMounts", "affinity", "tolerations", "podSecurityContext",
    "securityContext", "schedulerName", "sidecars", "initContainers", "hostNetwork",
    "nodeSelector", "dnsConfig", "terminationGracePeriodSeconds", "serviceAccount",
    "hostAliases", "shareProcessNamespace",
}
DRIVER = POD | {
    "podName", "coreRequest", "javaOptions", "lifecycle", "kubernetesMaster",
    "serviceAnnotations", "serviceLabels", "ports", "priorityClassName",
}
EXECUTOR = POD | {
    "instances", "coreRequest", "javaOptions", "lifecycle", "deleteOnTermination",
    "ports", "priorityClassName",
}

errors = []


def unknown(where, obj, allowed):
    if not isinstance(obj, dict):
        errors.append(f"{where}: not a mapping")
        return
    for key in sorted(set(obj) - allowed):
        errors.append(f"{where}: unknown field {key!r} (not in sparkoperator.k8s.io/v1beta2)")


def wrap(app, role):
    """A core/v1 Pod holding what the operator adds to the driver or executor pod."""
    spec = app["spec"]
    part = spec[role]
    main = {"name": f"spark-kubernetes-{role}", "image": part.get("image", spec.get("image"))}
    for key in ("env", "envFrom", "volumeMounts", "securityContext"):
        if key in part:
            main[key] = part[key]
    pod_spec = {"containers": [main] + list(part.get("sidecars", []))}
    for src, dst in (
        ("initContainers", "initContainers"),
        ("podSecurityContext", "securityContext"),
        ("serviceAccount", "serviceAccountName"),
        ("tolerations", "tolerations"),
        ("affinity", "affinity"),
    ):
        if src in part:
            pod_spec[dst] = part[src]
    # As the operator's webhook does: only the volumes the main container mounts go
    # into the pod (an init container's mount of any other volume then fails here too).
    mounted = {m["name"] for m in part.get("volumeMounts", [])}
    volumes = [v for v in spec.get("volumes", []) if v.get("name") in mounted]
    if volumes:
        pod_spec["volumes"] = volumes
    name = app.get("metadata", {}).get("name", "app")
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{name}-{role}", "namespace": app.get("metadata", {}).get("namespace", "default")},
        "spec": pod_spec,
    }


out = []
for dirpath, dirnames, filenames in os.walk(root):
    dirnames.sort()
    for filename in sorted(filenames):
        if not filename.endswith((".yaml", ".yml")):
            continue
        path = os.path.join(dirpath, filename)
        with open(path) as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
        crds = [d for d in docs if str(d.get("apiVersion", "")).startswith("sparkoperator.k8s.io/")]
        if not crds:
            out.append(path)
            continue
        derived = [d for d in docs if d not in crds]
        for app in crds:
            where = f"{path}: {app.get('kind')} {app.get('metadata', {}).get('name')}"
            if app.get("apiVersion") != "sparkoperator.k8s.io/v1beta2" or app.get("kind") != "SparkApplication":
                errors.append(f"{where}: expected apiVersion sparkoperator.k8s.io/v1beta2, kind SparkApplication")
                continue
            spec = app.get("spec", {})
            unknown(f"{where}: spec", spec, SPEC)
            for key in sorted(SPEC_REQUIRED - set(spec)):
                errors.append(f"{where}: spec.{key} is required")
            unknown(f"{where}: spec.driver", spec.get("driver", {}), DRIVER)
            unknown(f"{where}: spec.executor", spec.get("executor", {}), EXECUTOR)
            if errors:
                continue
            derived += [wrap(app, "driver"), wrap(app, "executor")]
        if errors:
            continue
        target = os.path.join(work, os.path.relpath(path, root).replace(os.sep, "__") + ".as-pods.yaml")
        with open(target, "w") as f:
            yaml.safe_dump_all(derived, f, sort_keys=False)
        print(f"note: {path}: SparkApplication (a CRD kubernetes-validate has no schema for): "
              f"fields checked against sparkoperator.k8s.io/v1beta2; its driver and executor "
              f"pods (initContainers, main container, spec.volumes) validated as core/v1 Pods",
              file=sys.stderr)
        out.append(target)

if errors:
    for e in errors:
        print(f"ERROR {e}", file=sys.stderr)
    sys.exit(1)
print("\n".join(out))
PY

mapfile -t files < "${work}/files.txt"
if [ "${#files[@]}" -eq 0 ]; then
    echo "no manifests found under pod-templates/" >&2
    exit 1
fi

# True when version $1 >= version $2 (major.minor).
version_ge() {
    [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n 1)" = "$2" ]
}

# The minimum version of a listed file: its directory's under pod-templates/ (derived Pods
# in ${work} are named <dir>__<file>.as-pods.yaml), else the oldest of K8S_VERSIONS.
min_version() {
    local dir
    case "$1" in
        pod-templates/*) dir=${1#pod-templates/}; dir=${dir%%/*} ;;
        *) dir=$(basename "$1"); dir=${dir%%__*} ;;
    esac
    printf '%s\n' "${MIN_K8S_VERSION[${dir}]:-${K8S_VERSIONS[0]}}"
}

for dir in "${!MIN_K8S_VERSION[@]}"; do
    if [ ! -d "pod-templates/${dir}" ]; then
        echo "MIN_K8S_VERSION names pod-templates/${dir}, which does not exist" >&2
        exit 1
    fi
    if ! version_ge "${K8S_VERSIONS[-1]}" "${MIN_K8S_VERSION[${dir}]}"; then
        echo "MIN_K8S_VERSION[${dir}]=${MIN_K8S_VERSION[${dir}]} is above every version in K8S_VERSIONS" >&2
        exit 1
    fi
done

# Files grouped by their minimum version: one kubernetes-validate run per group.
declare -A group=()
for f in "${files[@]}"; do
    group[$(min_version "$f")]+="${f}"$'\n'
done

failed=0
total=0
for min in $(printf '%s\n' "${!group[@]}" | sort -V); do
    mapfile -t gfiles < <(printf '%s' "${group[${min}]}")
    versions=()
    for v in "${K8S_VERSIONS[@]}"; do
        if version_ge "$v" "$min"; then versions+=("$v"); fi
    done
    args=(--strict --quiet)
    for v in "${versions[@]}"; do args+=(-k "$v"); done
    echo "==> kubernetes-validate ${KV_VERSION} --strict: ${#gfiles[@]} files against Kubernetes ${versions[*]}"
    status=0
    output=$("${venv}/bin/kubernetes-validate" "${args[@]}" "${gfiles[@]}" </dev/null 2>&1) || status=$?
    if [ -n "${output}" ]; then
        printf '%s\n' "${output}"
    fi
    # Any WARN (e.g. no schema for a kind) fails too: every manifest here must be checked.
    if [ "${status}" -ne 0 ] || grep -qE '^(ERROR|WARN|FATAL)' <<<"${output}"; then
        failed=1
    fi
    total=$((total + ${#gfiles[@]}))
done
if [ "${failed}" -ne 0 ]; then
    echo "manifest validation FAILED" >&2
    exit 1
fi
summary="Kubernetes ${K8S_VERSIONS[*]}"
for dir in $(printf '%s\n' "${!MIN_K8S_VERSION[@]}" | sort); do
    summary+=" (pod-templates/${dir}/: ${MIN_K8S_VERSION[${dir}]} on)"
done
echo "all ${total} manifest files valid against ${summary}"
