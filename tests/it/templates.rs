//! The manifests under `pod-templates/`: schema-valid (`scripts/validate-manifests.sh`,
//! kubernetes-validate --strict against several Kubernetes versions), and consistent in
//! ways no schema can tell: every flag and `SPARK_LOCALIZER_*` variable a spark-localizer
//! container uses is one this build accepts (`--help`), the jars (and files) directory is
//! an emptyDir mounted at the same path in the init container and in Spark's container,
//! the init container is locked down (securityContext, resources, termination message),
//! and every ConfigMap or Secret a template names has an example manifest beside it.
//! Templates that mount the dependencies as an image volume (`spark-localizer bundle`)
//! have no init container instead: the image volume, its digest reference, its read-only
//! mount where Spark's container reads the classpath, are checked in their place.
//!
//! The validation script runs when `CI` is set or its venv (target/k8s-venv) exists, and
//! is skipped with a message otherwise (`bash scripts/validate-manifests.sh` creates the
//! venv). The consistency checks read the YAML with PyYAML (no YAML crate here): the
//! venv's Python, else a system `python3` that has it, else they are skipped too.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

use crate::support::BIN;

/// The templates each case must ship, by their predictable names.
const EXPECTED: &[&str] = &[
    "http-maven/driver.yaml",
    "http-maven/executor.yaml",
    "http-maven/pins-configmap.yaml",
    "maven-lock/driver.yaml",
    "maven-lock/executor.yaml",
    "maven-lock/lock-configmap.yaml",
    "s3-irsa/driver.yaml",
    "s3-irsa/executor.yaml",
    "s3-irsa/serviceaccount.yaml",
    "gcs-workload-identity/executor.yaml",
    "gcs-workload-identity/serviceaccount.yaml",
    "azure-workload-identity/executor.yaml",
    "azure-workload-identity/serviceaccount.yaml",
    "hdfs/driver.yaml",
    "hdfs/executor.yaml",
    "hdfs/hadoop-conf-configmap.yaml",
    "hdfs/tokens-secret.yaml",
    "hdfs-kerberos/executor.yaml",
    "hdfs-kerberos/hadoop-conf-configmap.yaml",
    "hdfs-kerberos/krb5-configmap.yaml",
    "hdfs-kerberos/keytab-secret.yaml",
    "staging/driver.yaml",
    "staging/executor.yaml",
    "staging/spark-init-secret.yaml",
    "staging-server/deployment.yaml",
    "staging-server/service.yaml",
    "staging-server/secret.yaml",
    "staging-server/rbac.yaml",
    "spark-operator/sparkapplication.yaml",
    "mirror/daemonset.yaml",
    "mirror/service.yaml",
    "mirror/executor.yaml",
    "oci/driver.yaml",
    "oci/executor.yaml",
    "oci/registry-secret.yaml",
    "image-volume/driver.yaml",
    "image-volume/executor.yaml",
    "image-volume/prepull-daemonset.yaml",
];

/// Where `spark-localizer bundle` writes the image's `classpath` and `spark-classpath.env`
/// for (its `--mount-path` default): an image volume template mounts the image there.
const BUNDLE_MOUNT_PATH: &str = "/opt/spark/extra-jars";

/// Volumes Spark adds to the pod itself, which a template may mount without declaring.
const SPARK_PROVIDED_VOLUMES: &[&str] = &["spark-conf-volume-driver"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

fn ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false")
}

fn venv_python() -> PathBuf {
    root().join("target/k8s-venv/bin/python")
}

/// Runs scripts/validate-manifests.sh once per test binary when `CI` is set or its venv
/// exists: `Some(Ok(output))`, `Some(Err(output))`, or `None` when skipped.
fn validation() -> &'static Option<Result<String, String>> {
    static RESULT: OnceLock<Option<Result<String, String>>> = OnceLock::new();
    RESULT.get_or_init(|| {
        if !ci() && !venv_python().exists() {
            return None;
        }
        let out = Command::new("bash")
            .arg(root().join("scripts/validate-manifests.sh"))
            .current_dir(root())
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run bash");
        let text = format!(
            "--- stdout ---\n{}\n--- stderr ---\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Some(if out.status.success() {
            Ok(text)
        } else {
            Err(text)
        })
    })
}

#[test]
fn every_manifest_passes_kubernetes_validate_strict() {
    match validation() {
        None => eprintln!(
            "SKIP: target/k8s-venv does not exist and CI is not set; \
             run `bash scripts/validate-manifests.sh`"
        ),
        Some(Ok(out)) => eprintln!("{out}"),
        Some(Err(out)) => panic!("scripts/validate-manifests.sh failed\n{out}"),
    }
}

/// Every YAML file under pod-templates/ (relative path → its documents), through PyYAML.
/// `None` (after printing SKIP) where no Python with PyYAML is at hand outside CI.
fn manifests() -> Option<BTreeMap<String, Vec<Value>>> {
    // Under CI the validation run installs the venv (and its PyYAML) first.
    let _ = validation();
    let python = if venv_python().exists() {
        venv_python().into_os_string()
    } else if Command::new("python3")
        .args(["-c", "import yaml"])
        .output()
        .is_ok_and(|o| o.status.success())
    {
        "python3".into()
    } else {
        assert!(!ci(), "no Python with PyYAML although CI is set");
        eprintln!("SKIP: no Python with PyYAML; run `bash scripts/validate-manifests.sh`");
        return None;
    };
    let script = r#"
import json, os, sys, yaml
root = sys.argv[1]
out = {}
for dirpath, _, filenames in os.walk(root):
    for name in filenames:
        if name.endswith((".yaml", ".yml")):
            path = os.path.join(dirpath, name)
            with open(path) as f:
                out[os.path.relpath(path, root)] = [d for d in yaml.safe_load_all(f) if d]
json.dump(out, sys.stdout)
"#;
    let out = Command::new(python)
        .args(["-c", script])
        .arg(root().join("pod-templates"))
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "reading the YAML failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(serde_json::from_slice(&out.stdout).expect("JSON from PyYAML"))
}

/// What `spark-localizer <sub> --help` accepts: its `--flags` and `SPARK_LOCALIZER_*` names.
fn accepted(sub: &[&str]) -> (BTreeSet<String>, BTreeSet<String>) {
    let out = Command::new(BIN)
        .args(sub)
        .arg("--help")
        .output()
        .expect("run --help");
    assert!(out.status.success(), "{sub:?} --help failed");
    let help = String::from_utf8_lossy(&out.stdout);
    let word = |s: &str, ok: fn(char) -> bool| s.chars().take_while(|&c| ok(c)).collect::<String>();
    let mut flags = BTreeSet::new();
    let mut envs = BTreeSet::new();
    for (i, _) in help.match_indices("--") {
        let name = word(&help[i + 2..], |c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'
        });
        if !name.is_empty() {
            flags.insert(format!("--{name}"));
        }
    }
    for (i, _) in help.match_indices("SPARK_LOCALIZER_") {
        envs.insert(word(&help[i..], |c| {
            c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'
        }));
    }
    assert!(
        flags.contains("--help") && !envs.is_empty(),
        "unexpected --help:\n{help}"
    );
    (flags, envs)
}

fn strs(v: &Value) -> Vec<&str> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn list(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or_default()
}

fn is_localizer(container: &Value) -> bool {
    container["image"]
        .as_str()
        .is_some_and(|i| i.contains("spark-localizer"))
}

/// The value of `flag` in `args` (`--flag V` or `--flag=V`), else of the env twin.
fn setting(container: &Value, flag: &str, env: &str) -> Option<String> {
    let args = strs(&container["args"]);
    for (i, a) in args.iter().enumerate() {
        if *a == flag {
            return args.get(i + 1).map(|s| s.to_string());
        }
        if let Some(v) = a.strip_prefix(&format!("{flag}=")) {
            return Some(v.to_owned());
        }
    }
    list(&container["env"])
        .iter()
        .find(|e| e["name"] == env)
        .and_then(|e| e["value"].as_str())
        .map(str::to_owned)
}

/// The volume mounted at `path` in `container`, if any.
fn mount_at<'a>(container: &'a Value, path: &str) -> Option<&'a str> {
    list(&container["volumeMounts"])
        .iter()
        .find(|m| m["mountPath"] == path)
        .and_then(|m| m["name"].as_str())
}

/// The volumes of `volumes` that are image volumes (`image: {reference, pullPolicy}`).
fn image_volumes(volumes: &[Value]) -> Vec<&Value> {
    volumes.iter().filter(|v| !v["image"].is_null()).collect()
}

/// `registry/repo@sha256:<64 lowercase hex>`: the reference `bundle` prints.
fn is_digest_reference(reference: &str) -> bool {
    let Some((name, digest)) = reference.split_once("@sha256:") else {
        return false;
    };
    !name.is_empty()
        && !name.contains(char::is_whitespace)
        && digest.len() == 64
        && digest
            .chars()
            .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
}

struct Checker {
    fetch: (BTreeSet<String>, BTreeSet<String>),
    serve: (BTreeSet<String>, BTreeSet<String>),
    mirror: (BTreeSet<String>, BTreeSet<String>),
    /// (kind, name) of every ConfigMap / Secret defined under pod-templates/.
    defined: BTreeSet<(String, String)>,
    problems: Vec<String>,
}

impl Checker {
    fn problem(&mut self, where_: &str, what: String) {
        self.problems.push(format!("{where_}: {what}"));
    }

    /// Flags and env names against `--help`, the locked-down init container settings.
    fn localizer(&mut self, where_: &str, c: &Value, init: bool) {
        let args = strs(&c["args"]);
        let (sub, (flags, envs)) = match args.as_slice() {
            ["fetch", ..] => ("fetch", self.fetch.clone()),
            ["stage", "serve", ..] => ("stage serve", self.serve.clone()),
            ["mirror", "serve", ..] => ("mirror serve", self.mirror.clone()),
            _ => {
                self.problem(
                    where_,
                    format!("args {args:?}: expected fetch, stage serve or mirror serve"),
                );
                return;
            }
        };
        for a in &args {
            if let Some(flag) = a.strip_prefix("--").map(|f| f.split('=').next().unwrap()) {
                if !flags.contains(&format!("--{flag}")) {
                    self.problem(where_, format!("flag --{flag} is not in `{sub} --help`"));
                }
            }
        }
        for e in list(&c["env"]) {
            let name = e["name"].as_str().unwrap_or_default();
            if name.starts_with("SPARK_LOCALIZER_") && !envs.contains(name) {
                self.problem(where_, format!("env {name} is not in `{sub} --help`"));
            }
        }
        let sc = &c["securityContext"];
        let expect: &[(&str, Value)] = &[
            ("readOnlyRootFilesystem", Value::Bool(true)),
            ("allowPrivilegeEscalation", Value::Bool(false)),
        ];
        for (key, want) in expect {
            if sc[key] != *want {
                self.problem(where_, format!("securityContext.{key} is not {want}"));
            }
        }
        if strs(&sc["capabilities"]["drop"]) != ["ALL"] {
            self.problem(
                where_,
                "securityContext.capabilities.drop is not [ALL]".into(),
            );
        }
        if c["terminationMessagePolicy"] != "FallbackToLogsOnError" {
            self.problem(
                where_,
                "terminationMessagePolicy is not FallbackToLogsOnError".into(),
            );
        }
        for kind in ["requests", "limits"] {
            for res in ["cpu", "memory"] {
                if c["resources"][kind][res].is_null() {
                    self.problem(where_, format!("resources.{kind}.{res} is missing"));
                }
            }
        }
        if init {
            // The pod-level context of an init container is Spark's, so all of it is here.
            let expect: &[(&str, Value)] = &[
                ("runAsNonRoot", Value::Bool(true)),
                ("runAsUser", Value::from(65532)),
            ];
            for (key, want) in expect {
                if sc[key] != *want {
                    self.problem(where_, format!("securityContext.{key} is not {want}"));
                }
            }
            if sc["seccompProfile"]["type"] != "RuntimeDefault" {
                self.problem(
                    where_,
                    "securityContext.seccompProfile is not RuntimeDefault".into(),
                );
            }
            for key in ["image", "args", "volumeMounts"] {
                if c[key].is_null() {
                    self.problem(where_, format!("{key} is missing"));
                }
            }
        }
    }

    /// The jars (and files) directory: an emptyDir mounted at the same path in the init
    /// container and in the Spark container.
    fn shared_dirs(&mut self, where_: &str, init: &Value, main: &Value, volumes: &[Value]) {
        let jars = setting(init, "--jars-dir", "SPARK_LOCALIZER_JARS_DIR");
        if jars.is_none() {
            self.problem(
                where_,
                "no --jars-dir: the default is not on a shared volume".into(),
            );
        }
        let files = setting(init, "--files-dir", "SPARK_LOCALIZER_FILES_DIR");
        for dir in jars.iter().chain(files.iter()) {
            let Some(vol) = mount_at(init, dir) else {
                self.problem(
                    where_,
                    format!("the init container mounts nothing at {dir}"),
                );
                continue;
            };
            let is_empty_dir = volumes
                .iter()
                .any(|v| v["name"] == vol && v["emptyDir"].is_object());
            if !is_empty_dir {
                self.problem(where_, format!("volume {vol} at {dir} is not an emptyDir"));
            }
            if mount_at(main, dir) != Some(vol) {
                self.problem(
                    where_,
                    format!("the Spark container does not mount {vol} at {dir}"),
                );
            }
        }
        self.way_b(where_, main, &jars.unwrap_or_default());
    }

    /// Way B, when the Spark container has a command: `sh -c '<script>' --` sourcing
    /// `<dir>/spark-classpath.env`, so that "$@" is exactly the args Spark sets.
    fn way_b(&mut self, where_: &str, main: &Value, dir: &str) {
        let command = strs(&main["command"]);
        if command.is_empty() {
            return;
        }
        let env_file = format!(". {dir}/spark-classpath.env &&");
        if command.len() != 4
            || command[..2] != ["/bin/sh", "-c"]
            || command[3] != "--"
            || !command[2].contains(&env_file)
            || !command[2].contains("exec /opt/entrypoint.sh \"$@\"")
        {
            self.problem(
                where_,
                format!("unexpected Spark container command {command:?} (expected way B sourcing {dir}/spark-classpath.env)"),
            );
        }
    }

    /// A template that mounts the bundle as an image volume: no init container; one image
    /// volume with a digest reference, mounted read-only in the Spark container at the path
    /// the bundle was written for, which way B's command sources `spark-classpath.env` from
    /// and way A's `extraClassPath` (in the comments, `text`) points into.
    fn image_volume(&mut self, where_: &str, spec: &Value, main: &Value, text: &str) {
        if !list(&spec["initContainers"]).is_empty() {
            self.problem(
                where_,
                "an image volume template has an init container".into(),
            );
        }
        let volumes = list(&spec["volumes"]);
        let images = image_volumes(volumes);
        let [volume] = images.as_slice() else {
            self.problem(
                where_,
                format!("{} image volumes, expected 1", images.len()),
            );
            return;
        };
        let name = volume["name"].as_str().unwrap_or_default();
        let reference = volume["image"]["reference"].as_str().unwrap_or_default();
        if !is_digest_reference(reference) {
            self.problem(
                where_,
                format!("image volume {name}: reference {reference:?} is not REGISTRY/REPO@sha256:<64 hex>"),
            );
        }
        // A digest never changes: pulling it again on every pod start only costs.
        if volume["image"]["pullPolicy"] != "IfNotPresent" {
            self.problem(
                where_,
                format!("image volume {name}: pullPolicy is not IfNotPresent"),
            );
        }
        let mounts: Vec<&Value> = list(&main["volumeMounts"])
            .iter()
            .filter(|m| m["name"] == name)
            .collect();
        let [mount] = mounts.as_slice() else {
            self.problem(
                where_,
                format!(
                    "the Spark container mounts image volume {name} {} times, expected once",
                    mounts.len()
                ),
            );
            return;
        };
        let path = mount["mountPath"].as_str().unwrap_or_default();
        if path != BUNDLE_MOUNT_PATH {
            self.problem(
                where_,
                format!("image volume {name} is mounted at {path:?}, not at {BUNDLE_MOUNT_PATH} (bundle's --mount-path: its classpath files name that path)"),
            );
        }
        if mount["readOnly"] != true {
            self.problem(
                where_,
                format!("image volume {name} is not mounted readOnly: true"),
            );
        }
        if !mount["subPath"].is_null() || !mount["subPathExpr"].is_null() {
            self.problem(
                where_,
                format!("image volume {name} is mounted with a subPath"),
            );
        }
        self.way_b(where_, main, path);
        // Way A (active for a driver, a comment for an executor): the jars are under jars/
        // in the image, not at its root as in an emptyDir the init container fills.
        let role = if main["name"] == "spark-kubernetes-driver" {
            "driver"
        } else {
            "executor"
        };
        let way_a = format!("spark.{role}.extraClassPath={path}/jars/*");
        if !text.contains(&way_a) {
            self.problem(where_, format!("no `{way_a}` (way A) in the comments"));
        }
        let wrong = format!("extraClassPath={path}/*");
        if text.contains(&wrong) {
            self.problem(
                where_,
                format!("`{wrong}`: the image has its jars under {path}/jars/"),
            );
        }
    }

    /// Every mount names a volume; every ConfigMap/Secret named has an example manifest.
    fn references(&mut self, where_: &str, containers: &[&Value], volumes: &[Value]) {
        let names: BTreeSet<&str> = volumes.iter().filter_map(|v| v["name"].as_str()).collect();
        for c in containers {
            for m in list(&c["volumeMounts"]) {
                let name = m["name"].as_str().unwrap_or_default();
                if !names.contains(name) && !SPARK_PROVIDED_VOLUMES.contains(&name) {
                    self.problem(where_, format!("volumeMount {name} names no volume"));
                }
            }
            for e in list(&c["env"]) {
                if let Some(n) = e["valueFrom"]["configMapKeyRef"]["name"].as_str() {
                    self.defined_as(where_, "ConfigMap", n);
                }
                if let Some(n) = e["valueFrom"]["secretKeyRef"]["name"].as_str() {
                    self.defined_as(where_, "Secret", n);
                }
            }
        }
        for v in volumes {
            if let Some(n) = v["configMap"]["name"].as_str() {
                self.defined_as(where_, "ConfigMap", n);
            }
            if let Some(n) = v["secret"]["secretName"].as_str() {
                self.defined_as(where_, "Secret", n);
            }
        }
    }

    fn defined_as(&mut self, where_: &str, kind: &str, name: &str) {
        if !self.defined.contains(&(kind.to_owned(), name.to_owned())) {
            self.problem(
                where_,
                format!("{kind} {name} has no example manifest in pod-templates/"),
            );
        }
    }

    fn pod_template(&mut self, path: &str, doc: &Value, text: &str) {
        let role = if path.ends_with("driver.yaml") {
            "driver"
        } else {
            "executor"
        };
        let spec = &doc["spec"];
        let main_name = format!("spark-kubernetes-{role}");
        // Spark takes the first container unless podTemplateContainerName says otherwise.
        let Some(main) = list(&spec["containers"])
            .first()
            .filter(|c| c["name"] == main_name.as_str())
        else {
            self.problem(path, format!("the first container is not {main_name}"));
            return;
        };
        let all: Vec<&Value> = list(&spec["initContainers"])
            .iter()
            .chain(list(&spec["containers"]))
            .collect();
        if !image_volumes(list(&spec["volumes"])).is_empty() {
            self.image_volume(path, spec, main, text);
            self.references(path, &all, list(&spec["volumes"]));
            self.pull_secrets(path, spec);
            return;
        }
        let inits: Vec<&Value> = list(&spec["initContainers"])
            .iter()
            .filter(|c| is_localizer(c))
            .collect();
        let [init] = inits.as_slice() else {
            self.problem(
                path,
                format!(
                    "{} spark-localizer init containers, expected 1",
                    inits.len()
                ),
            );
            return;
        };
        let volumes = list(&spec["volumes"]);
        self.localizer(path, init, true);
        self.shared_dirs(path, init, main, volumes);
        self.references(path, &all, volumes);
        self.pull_secrets(path, spec);
    }

    /// Every Secret in `imagePullSecrets` has an example manifest.
    fn pull_secrets(&mut self, where_: &str, spec: &Value) {
        for s in list(&spec["imagePullSecrets"]) {
            if let Some(n) = s["name"].as_str() {
                self.defined_as(where_, "Secret", n);
            }
        }
    }

    fn spark_application(&mut self, path: &str, doc: &Value) {
        let spec = &doc["spec"];
        let volumes = list(&spec["volumes"]);
        for role in ["driver", "executor"] {
            let where_ = format!("{path} ({role})");
            let part = &spec[role];
            // The operator adds volumeMounts to its main container.
            let main = serde_json::json!({ "volumeMounts": part["volumeMounts"] });
            let inits: Vec<&Value> = list(&part["initContainers"])
                .iter()
                .filter(|c| is_localizer(c))
                .collect();
            let [init] = inits.as_slice() else {
                self.problem(
                    &where_,
                    format!(
                        "{} spark-localizer init containers, expected 1",
                        inits.len()
                    ),
                );
                continue;
            };
            self.localizer(&where_, init, true);
            // The operator's webhook copies into the pod only the volumes the main
            // container mounts: an init container's other volumes would not exist.
            let mounted: BTreeSet<&str> = list(&part["volumeMounts"])
                .iter()
                .filter_map(|m| m["name"].as_str())
                .collect();
            for m in list(&init["volumeMounts"]) {
                let name = m["name"].as_str().unwrap_or_default();
                if !mounted.contains(name) {
                    self.problem(
                        &where_,
                        format!("the init container mounts volume {name}, which {role}.volumeMounts does not: the operator leaves it out of the pod"),
                    );
                }
            }
            self.shared_dirs(&where_, init, &main, volumes);
            self.references(&where_, &[init, &main], volumes);
        }
    }

    fn deployment(&mut self, path: &str, doc: &Value) {
        let spec = &doc["spec"]["template"]["spec"];
        let volumes = list(&spec["volumes"]);
        let containers: Vec<&Value> = list(&spec["containers"]).iter().collect();
        for c in &containers {
            if is_localizer(c) {
                self.localizer(path, c, false);
                for probe in ["readinessProbe", "livenessProbe"] {
                    if c[probe]["httpGet"]["path"] != "/healthz" {
                        self.problem(path, format!("{probe} is not on /healthz"));
                    }
                }
            }
        }
        if spec["securityContext"]["runAsNonRoot"] != true {
            self.problem(path, "the pod does not set runAsNonRoot".into());
        }
        for v in image_volumes(volumes) {
            let reference = v["image"]["reference"].as_str().unwrap_or_default();
            if !is_digest_reference(reference) {
                self.problem(
                    path,
                    format!("image volume reference {reference:?} is not a digest reference"),
                );
            }
        }
        self.references(path, &containers, volumes);
        self.pull_secrets(path, spec);
    }
}

#[test]
fn templates_use_only_what_the_binary_accepts_and_share_the_jars_dir() {
    let Some(manifests) = manifests() else { return };
    for path in EXPECTED {
        assert!(
            manifests.contains_key(*path),
            "pod-templates/{path} is missing"
        );
    }
    let defined = manifests
        .values()
        .flatten()
        .filter(|d| d["kind"] == "ConfigMap" || d["kind"] == "Secret")
        .map(|d| {
            let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
            (s(&d["kind"]), s(&d["metadata"]["name"]))
        })
        .collect();
    let mut check = Checker {
        fetch: accepted(&["fetch"]),
        serve: accepted(&["stage", "serve"]),
        mirror: accepted(&["mirror", "serve"]),
        defined,
        problems: Vec::new(),
    };
    let mut seen = 0;
    for (path, docs) in &manifests {
        for doc in docs {
            let file = Path::new(path).file_name().unwrap().to_str().unwrap();
            match doc["kind"].as_str().unwrap_or_default() {
                "Pod" if file == "driver.yaml" || file == "executor.yaml" => {
                    let text = std::fs::read_to_string(root().join("pod-templates").join(path))
                        .expect("read template");
                    check.pod_template(path, doc, &text);
                    seen += 1;
                }
                "Pod" => check.problem(
                    path,
                    "a Pod that is not a driver.yaml/executor.yaml template".into(),
                ),
                "SparkApplication" => {
                    check.spark_application(path, doc);
                    seen += 1;
                }
                "Deployment" | "DaemonSet" => {
                    check.deployment(path, doc);
                    seen += 1;
                }
                _ => {}
            }
        }
    }
    // The e2e test runs this init container as written: it must say everything itself.
    let hook = &manifests["http-maven/executor.yaml"][0]["spec"]["initContainers"][0];
    for key in ["image", "args", "env", "volumeMounts"] {
        assert!(
            !hook[key].is_null(),
            "http-maven/executor.yaml: init container lacks {key}"
        );
    }
    // One bundle per directory: the pre-pull DaemonSet must pull what the pods mount.
    let mut references: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (path, docs) in &manifests {
        for doc in docs {
            let spec = match doc["kind"].as_str() {
                Some("Pod") => &doc["spec"],
                _ => &doc["spec"]["template"]["spec"],
            };
            for v in image_volumes(list(&spec["volumes"])) {
                let dir = path.split('/').next().unwrap_or_default();
                references
                    .entry(dir)
                    .or_default()
                    .insert(v["image"]["reference"].as_str().unwrap_or_default());
            }
        }
    }
    for (dir, refs) in &references {
        if refs.len() > 1 {
            check.problem(
                dir,
                format!("image volumes name different references: {refs:?}"),
            );
        }
    }
    assert!(
        references.contains_key("image-volume"),
        "no image volume under pod-templates/image-volume/"
    );
    assert!(seen >= 14, "only {seen} templates checked");
    assert!(
        check.problems.is_empty(),
        "pod-templates/ problems:\n  {}",
        check.problems.join("\n  ")
    );
}
