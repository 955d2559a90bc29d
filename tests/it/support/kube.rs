//! The pod templates played as pods: `podman kube play` of a template from
//! `pod-templates/`, as written but for the substitutions of [`adapt`] (one place, each
//! with its reason), in the tests' throwaway storage (`support::podman`), waited for
//! through `podman inspect` and the events log (never a sleep), torn down with
//! `kube play --down` by a Drop guard.
//!
//! Images, all built here, from local files: the static spark-localizer image
//! (`crate::image::static_image`), a stand-in for the Spark image (Debian's static
//! busybox, `FROM scratch`, user 185 as in the apache/spark images, whose
//! `/opt/entrypoint.sh` shows what Spark's container sees and exits), and the pod's infra
//! (pause) image, the same busybox sleeping, named in a `containers.conf` given to podman
//! through `CONTAINERS_CONF`.
//!
//! What podman 4.3.1 needs on these machines, and what it cannot do:
//! - no infra image of its own here (Debian's catatonit is not installed): ours, in
//!   `[engine] infra_image`;
//! - `[containers] default_ulimits`: the sandbox lacks CAP_SYS_RESOURCE, and runc's default
//!   rlimits fail;
//! - an `emptyDir` is a named volume called by the volume's name, and a ConfigMap volume
//!   too (which `--down` leaves): two pods with a volume of the same name share it. Plays
//!   are therefore one at a time in a test process ([`PLAYS`]), and the guard removes the
//!   pod's volumes after `--down`;
//! - Secret volumes are broken (a panic without `optional:`, `data:` not base64-decoded,
//!   `stringData:` empty): a Secret is played as a ConfigMap of the same keys (values
//!   decoded);
//! - an init container that succeeded is removed once it has run (its exit is read from
//!   the events log), and `/dev/termination-log` is not mounted (a failure's message is in
//!   `podman logs`);
//! - a container's `ports` are taken for port mappings, refused on the host's network: they
//!   are dropped (the pods listen on the host's network, as the mirror's DaemonSet does);
//! - projected volumes (the `serviceAccountToken` that EKS's and Azure's webhooks project
//!   for workload identity) are refused: such a volume is played as a ConfigMap of the
//!   token a stand-in identity provider accepts, same volume name and mount
//!   ([`Identity`], [`play_identity`]);
//! - image volumes (`volumes[].image`) are refused:
//!   `HostPath, ConfigMap, EmptyDir, and PersistentVolumeClaim are currently the only
//!   supported VolumeSource`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use base64::Engine as _;
use serde::Deserialize as _;
use serde_json::{json, Value};

use super::podman::{output, podman, root, text};

/// The placeholder image of the templates' spark-localizer containers.
const TEMPLATE_IMAGE: &str = "ghcr.io/example/spark-localizer:";
/// The stand-in for the Spark image, and the infra image.
const SPARK_IMAGE: &str = "localhost/pods-spark:test";
const PAUSE_IMAGE: &str = "localhost/pods-pause:test";
/// The variable naming the stand-in entrypoint the directories to show.
const OBSERVE: &str = "SPARK_LOCALIZER_TEST_OBSERVE";
/// How long a pod may take to run to its end (a bound, not a wait: states are polled).
const LIMIT: Duration = Duration::from_secs(180);

/// One play at a time per test process: emptyDir and ConfigMap volumes are named volumes
/// called by the template's volume names, shared by every pod in the storage.
static PLAYS: Mutex<()> = Mutex::new(());

/// The stand-in for Spark's `/opt/entrypoint.sh`: what Spark's container sees (its args,
/// its user, `SPARK_CLASSPATH` after the template's command sourced the env file, every
/// file under the shared directories with its sha256, the directories' mount options, the
/// classpath files, and what a write there gives), then exit 0.
const ENTRYPOINT: &str = r#"#!/bin/sh
echo "args: $*"
echo "uid: $(id -u):$(id -g)"
echo "SPARK_CLASSPATH: ${SPARK_CLASSPATH-<unset>}"
for dir in $SPARK_LOCALIZER_TEST_OBSERVE; do
    find "$dir" -type f | sort | while read -r f; do
        echo "file: $(sha256sum "$f" | cut -c1-64) $f"
    done
    echo "mount: $dir $(awk -v d="$dir" '$5 == d { print $6 }' /proc/self/mountinfo)"
    if err=$(touch "$dir/.write-probe" 2>&1); then
        echo "write: $dir written"
    else
        echo "write: $dir refused: $err"
    fi
    [ -f "$dir/classpath" ] && echo "classpath: $dir $(cat "$dir/classpath")"
    [ -f "$dir/spark-classpath.env" ] && sed "s|^|env: $dir |" "$dir/spark-classpath.env"
done
exit 0
"#;

/// What the tests play with: the images and the containers.conf, made once per process.
pub struct Kit {
    localizer: String,
    conf: PathBuf,
}

/// The kit, or `None` after printing why the pods cannot be played here (skipped locally,
/// a failure under CI: see `crate::image::skip`).
pub fn kit() -> Option<&'static Kit> {
    static KIT: OnceLock<Option<Kit>> = OnceLock::new();
    KIT.get_or_init(|| {
        let localizer = crate::image::static_image()?;
        let busybox = ["/bin/busybox", "/usr/bin/busybox"]
            .into_iter()
            .map(Path::new)
            .find(|p| p.is_file());
        let Some(busybox) = busybox else {
            return crate::image::skip(
                "no /bin/busybox (Debian's busybox-static; `bash scripts/test.sh` installs it)",
            );
        };
        let elf = std::fs::read(busybox).unwrap();
        assert!(
            !crate::image::program_header_types(&elf).contains(&crate::image::PT_INTERP),
            "{} is dynamically linked: the images are FROM scratch (install busybox-static)",
            busybox.display()
        );
        let tar = root().join("pods-busybox.tar");
        busybox_rootfs(busybox, &tar);
        import(
            &tar,
            SPARK_IMAGE,
            &[r#"ENTRYPOINT ["/opt/entrypoint.sh"]"#, "USER 185:185"],
        );
        import(
            &tar,
            PAUSE_IMAGE,
            &[r#"ENTRYPOINT ["/bin/sleep", "infinity"]"#],
        );
        let _ = std::fs::remove_file(&tar);
        let conf = root().join("containers.conf");
        std::fs::write(
            &conf,
            format!(
                "[containers]\n\
                 default_ulimits = [\"nofile=20000:20000\", \"nproc=4096:4096\"]\n\
                 [engine]\n\
                 infra_image = \"{PAUSE_IMAGE}\"\n\
                 events_logger = \"file\"\n"
            ),
        )
        .unwrap();
        Some(Kit { localizer, conf })
    })
    .as_ref()
}

impl Kit {
    /// The static spark-localizer image, in the throwaway storage.
    pub fn localizer(&self) -> &str {
        &self.localizer
    }
}

/// A root filesystem tar: busybox, a link per applet in /bin, the stand-in entrypoint.
fn busybox_rootfs(busybox: &Path, tar_path: &Path) {
    let applets = Command::new(busybox).arg("--list").output().unwrap();
    assert!(applets.status.success(), "busybox --list failed");
    let mut tar = tar::Builder::new(std::fs::File::create(tar_path).unwrap());
    let mut add = |path: &str, mode: u32, body: &[u8]| {
        let mut header = tar::Header::new_gnu();
        header.set_size(body.len() as u64);
        header.set_mode(mode);
        header.set_entry_type(tar::EntryType::Regular);
        tar.append_data(&mut header, path, body).unwrap();
    };
    add("bin/busybox", 0o755, &std::fs::read(busybox).unwrap());
    add("opt/entrypoint.sh", 0o755, ENTRYPOINT.as_bytes());
    for applet in String::from_utf8_lossy(&applets.stdout).split_whitespace() {
        if applet == "busybox" {
            continue;
        }
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Symlink);
        header.set_size(0);
        header.set_mode(0o777);
        tar.append_link(&mut header, format!("bin/{applet}"), "busybox")
            .unwrap();
    }
    tar.into_inner().unwrap();
}

fn import(tar: &Path, image: &str, changes: &[&str]) {
    let mut cmd = podman();
    cmd.arg("import");
    for change in changes {
        cmd.args(["--change", change]);
    }
    let out = output(cmd.arg(tar).arg(image));
    assert!(
        out.status.success(),
        "podman import {image}\n{}",
        text(&out)
    );
}

/// The YAML documents of `pod-templates/<rel>`.
pub fn documents(rel: &str) -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("pod-templates")
        .join(rel);
    let yaml = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{rel}: {e}"));
    serde_yaml_ng::Deserializer::from_str(&yaml)
        .map(|doc| Value::deserialize(doc).unwrap_or_else(|e| panic!("{rel}: {e}")))
        .filter(|doc| !doc.is_null())
        .map(|mut doc| {
            octal_modes(&mut doc);
            doc
        })
        .collect()
}

/// File modes as Kubernetes reads them: its YAML is 1.1, where `0440` is an octal number;
/// serde_yaml_ng reads YAML 1.2, where it is a string.
fn octal_modes(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                let octal = v
                    .as_str()
                    .filter(|_| key == "defaultMode" || key == "mode")
                    .and_then(|s| s.strip_prefix('0'))
                    .and_then(|s| u32::from_str_radix(s, 8).ok());
                match octal {
                    Some(mode) => *v = json!(mode),
                    None => octal_modes(v),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(octal_modes),
        _ => {}
    }
}

/// Which of Spark's pods a template is for: Spark's container gets that role's args.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Role {
    Driver,
    Executor,
    /// A pod of no Spark's: a node daemon (the mirror's DaemonSet), played as written
    /// but for the images and the substitutions asked.
    Daemon,
}

/// The pod a DaemonSet's or a Deployment's controller makes (one replica): its pod
/// template's metadata and spec.
pub fn controller_pod(set: &Value) -> Value {
    let template = &set["spec"]["template"];
    let mut metadata = template["metadata"].clone();
    metadata["name"] = set["metadata"]["name"].clone();
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": template["spec"],
    })
}

/// The pod the Kubeflow spark-operator's webhook makes of a SparkApplication for `role`,
/// as far as the template shapes it: the role's `initContainers` and `serviceAccount`, a
/// Spark container (named as Spark names it, no image: Spark sets it) with the role's
/// `volumeMounts`, and the application's `volumes` that container mounts (the operator
/// copies only those). What Spark adds (its own volumes, the conf ConfigMap) is not the
/// template's and not played.
pub fn spark_application_pod(app: &Value, role: Role) -> Value {
    let (key, container, suffix) = match role {
        Role::Driver => ("driver", "spark-kubernetes-driver", "driver"),
        Role::Executor | Role::Daemon => ("executor", "spark-kubernetes-executor", "exec-1"),
    };
    let shape = &app["spec"][key];
    let mounts = shape["volumeMounts"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mounted = |v: &&Value| mounts.iter().any(|m| m["name"] == v["name"]);
    let volumes: Vec<Value> = app["spec"]["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(mounted)
        .cloned()
        .collect();
    let mut spec = json!({
        "initContainers": shape["initContainers"],
        "containers": [{"name": container, "volumeMounts": mounts}],
        "volumes": volumes,
    });
    if let Some(account) = shape["serviceAccount"].as_str() {
        spec["serviceAccountName"] = json!(account);
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": format!("{}-{suffix}", app["metadata"]["name"].as_str().unwrap())},
        "spec": spec,
    })
}

/// The only changes made to a template and its ConfigMaps/Secrets before they are played.
/// `replace`: (text in the template, text for the test), each found at least once
/// (placeholders for URLs, endpoints, digests, pins).
pub fn adapt(
    pod: &mut Value,
    others: &mut [Value],
    role: Role,
    replace: &[(String, String)],
    insecure_registry: Option<&str>,
    (localizer, kerberos): (&str, Option<&str>),
) {
    // Secrets → ConfigMaps of the same keys, values decoded: podman 4.3.1's Secret volumes
    // are broken (a panic without `optional:`, `data:` not base64-decoded, `stringData:`
    // empty). Referenced the same way: the volume and env sources become ConfigMap ones.
    // Named `secret-<name>`: a Secret and a ConfigMap may share a name (staging's
    // `spark-init`), a ConfigMap and a ConfigMap may not.
    for doc in others.iter_mut() {
        if doc["kind"] == "Secret" {
            secret_as_configmap(doc);
        }
    }
    for volume in pod["spec"]["volumes"].as_array_mut().into_iter().flatten() {
        if let Some(secret) = volume.as_object_mut().and_then(|v| v.remove("secret")) {
            let mut cm = secret.clone();
            let cm_obj = cm.as_object_mut().unwrap();
            if let Some(name) = cm_obj.remove("secretName") {
                let name = format!("secret-{}", name.as_str().unwrap());
                cm_obj.insert("name".into(), json!(name));
            }
            volume["configMap"] = cm;
        }
    }
    // URLs, endpoints and pins → the suite's servers on 127.0.0.1 and what they serve.
    for (from, to) in replace {
        let mut found = 0;
        replace_in(pod, from, to, &mut found);
        for doc in others.iter_mut() {
            replace_in(doc, from, to, &mut found);
        }
        assert!(
            found > 0,
            "{from:?} is not in the template any more: the test must follow it"
        );
    }
    let spec = &mut pod["spec"];
    // The pod reaches the servers on 127.0.0.1: the host's network, not a pod network.
    spec["hostNetwork"] = json!(true);
    // A container's `ports` are what it listens on, on the host's network as in a pod's:
    // podman 4.3.1 takes them for port mappings, which it refuses on the host's network
    // ("PortMappings can only be used with Bridge or slirp4netns networking").
    for key in ["initContainers", "containers"] {
        for c in spec[key].as_array_mut().into_iter().flatten() {
            if let Some(c) = c.as_object_mut() {
                c.remove("ports");
            }
        }
    }
    // Run once and stop: what the test looks at is the first run (Kubernetes' default
    // `Always` would restart the Spark container that exits after showing what it sees).
    spec["restartPolicy"] = json!("Never");
    // The spark-localizer image: the one built from images/ for this test run, in place of
    // the placeholder of the registry users push it to.
    for key in ["initContainers", "containers"] {
        for c in spec[key].as_array_mut().into_iter().flatten() {
            let Some(tag) = c["image"]
                .as_str()
                .and_then(|i| i.strip_prefix(TEMPLATE_IMAGE))
            else {
                continue;
            };
            // The Kerberos-capable image (`-kerberos` tags), built from images/ too.
            c["image"] = json!(match tag.ends_with("-kerberos") {
                true => kerberos.expect("a -kerberos image in the template: Spec::kerberos"),
                false => localizer,
            });
        }
    }
    // The test registry speaks plain HTTP on 127.0.0.1 (a real one, TLS): the variable the
    // oci templates' comment gives for a plain-HTTP registry, on the init container.
    if let Some(host) = insecure_registry {
        for c in spec["initContainers"].as_array_mut().into_iter().flatten() {
            push_env(c, "SPARK_LOCALIZER_INSECURE_REGISTRY", host);
        }
    }
    if role == Role::Daemon {
        return;
    }
    // Spark's container (the first: Spark fills it in): Spark sets its image and its args
    // (`executor`, `driver …`); the test's stand-in image shows what the container sees,
    // from its entrypoint (way A) or from the template's command's `exec
    // /opt/entrypoint.sh "$@"` (way B), for the directories the template mounts in it from
    // an emptyDir (or an image volume). The template's own command is kept.
    let empty_dirs: Vec<String> = spec["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v.get("emptyDir").is_some() || v.get("image").is_some())
        .filter_map(|v| v["name"].as_str().map(str::to_owned))
        .collect();
    let spark = &mut spec["containers"][0];
    assert!(
        spark.get("image").is_none(),
        "Spark's container has an image in the template: Spark sets it"
    );
    spark["image"] = json!(SPARK_IMAGE);
    spark["args"] = json!([match role {
        Role::Driver => "driver",
        Role::Executor | Role::Daemon => "executor",
    }]);
    let observe: Vec<&str> = spark["volumeMounts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| {
            m["name"]
                .as_str()
                .is_some_and(|n| empty_dirs.iter().any(|e| e == n))
        })
        .filter_map(|m| m["mountPath"].as_str())
        .collect();
    let observe = observe.join(" ");
    push_env(spark, OBSERVE, &observe);
}

/// A workload identity as the cluster gives it to the pod, played against the suite's
/// stand-ins (a fake STS, a fake Entra ID, a metadata server on 127.0.0.1).
pub struct Identity {
    /// The volume of `files` (none when `files` is empty).
    pub volume: String,
    /// Where it comes from. `None`: it is the template's projected service-account token
    /// volume, which podman 4.3.1 refuses, so it is played as a ConfigMap of `files`, same
    /// volume name, same mounts (EKS). `Some(path)`: the template has none because the
    /// cluster's webhook injects it (AKS's, into every container at `path`), or none exists
    /// and the harness needs one (GKE's metadata server needs no file): it is added, as a
    /// ConfigMap of `files` mounted read-only at `path` in every container.
    pub injected_at: Option<String>,
    pub files: Vec<(String, String)>,
    /// Added to the init containers' env: the endpoints of the stand-ins on 127.0.0.1 (what
    /// a real cloud reaches at its public endpoints, e.g. AWS_ENDPOINT_URL for the S3
    /// server, AWS_ENDPOINT_URL_STS for the STS), and what a webhook would inject that the
    /// template leaves to it.
    pub env: Vec<(String, String)>,
}

/// The [`Identity`] substitutions, made after [`adapt`]'s: the token volume becomes a
/// ConfigMap (added to `others`), the stand-ins' endpoints go into the init containers' env.
pub fn play_identity(pod: &mut Value, others: &mut Vec<Value>, identity: &Identity) {
    if !identity.files.is_empty() {
        identity_volume(pod, others, identity);
    }
    for c in pod["spec"]["initContainers"]
        .as_array_mut()
        .into_iter()
        .flatten()
    {
        for (name, value) in &identity.env {
            push_env(c, name, value);
        }
    }
}

/// The ConfigMap of `identity.files`, in place of the template's projected volume or
/// added and mounted as a webhook would.
fn identity_volume(pod: &mut Value, others: &mut Vec<Value>, identity: &Identity) {
    let pod_name = pod["metadata"]["name"].as_str().unwrap().to_owned();
    let cm_name = format!("{pod_name}-{}", identity.volume);
    let played = json!({"name": identity.volume, "configMap": {"name": cm_name}});
    let volumes = pod["spec"]
        .as_object_mut()
        .unwrap()
        .entry("volumes")
        .or_insert_with(|| json!([]))
        .as_array_mut()
        .unwrap();
    let existing = volumes
        .iter_mut()
        .find(|v| v["name"] == identity.volume.as_str());
    match (&identity.injected_at, existing) {
        (None, Some(volume)) => {
            assert!(
                volume.get("projected").is_some(),
                "{} is not a projected volume any more: the test must follow it",
                identity.volume
            );
            *volume = played;
        }
        (None, None) => panic!("no volume {} in the template", identity.volume),
        (Some(_), Some(_)) => panic!(
            "the template has a volume {} now: the test must follow it",
            identity.volume
        ),
        (Some(path), None) => {
            volumes.push(played);
            let spec = &mut pod["spec"];
            for list in ["initContainers", "containers"] {
                for c in spec[list].as_array_mut().into_iter().flatten() {
                    let mounts = c
                        .as_object_mut()
                        .unwrap()
                        .entry("volumeMounts")
                        .or_insert_with(|| json!([]));
                    mounts.as_array_mut().unwrap().push(json!({
                        "name": identity.volume, "mountPath": path, "readOnly": true,
                    }));
                }
            }
        }
    }
    let data: serde_json::Map<String, Value> = identity
        .files
        .iter()
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    others.push(json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": cm_name},
        "data": data,
    }));
}

/// Adds `name=value` to `container`'s `env`.
fn push_env(container: &mut Value, name: &str, value: &str) {
    let env = container
        .as_object_mut()
        .unwrap()
        .entry("env")
        .or_insert_with(|| json!([]));
    env.as_array_mut()
        .unwrap()
        .push(json!({"name": name, "value": value}));
}

fn secret_as_configmap(doc: &mut Value) {
    let (mut data, mut binary) = (serde_json::Map::new(), serde_json::Map::new());
    for (key, value) in doc["data"].as_object().into_iter().flatten() {
        let encoded = value.as_str().unwrap_or_default();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .unwrap_or_else(|e| panic!("Secret key {key}: not base64: {e}"));
        // A binary value (a token file, a keytab) as the ConfigMap's `binaryData`.
        match String::from_utf8(bytes) {
            Ok(text) => data.insert(key.clone(), json!(text)),
            Err(_) => binary.insert(key.clone(), json!(encoded)),
        };
    }
    for (key, value) in doc["stringData"].as_object().into_iter().flatten() {
        data.insert(key.clone(), value.clone());
    }
    let mut metadata = doc["metadata"].clone();
    metadata["name"] = json!(format!("secret-{}", metadata["name"].as_str().unwrap()));
    *doc = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata,
        "data": data,
    });
    if !binary.is_empty() {
        doc["binaryData"] = json!(binary);
    }
}

fn replace_in(value: &mut Value, from: &str, to: &str, found: &mut usize) {
    match value {
        Value::String(s) if s.contains(from) => {
            *found += s.matches(from).count();
            *s = s.replace(from, to);
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|v| replace_in(v, from, to, found)),
        Value::Object(map) => map
            .values_mut()
            .for_each(|v| replace_in(v, from, to, found)),
        _ => {}
    }
}

/// One template to play: its pod, the ConfigMaps/Secrets to give `--configmap`, and the
/// replacements for [`adapt`].
pub struct Spec {
    pub template: String,
    pub role: Role,
    pub configmaps: Vec<Value>,
    pub replace: Vec<(String, String)>,
    pub insecure_registry: Option<String>,
    /// The pod, when it is not the template's first document: the pod a DaemonSet or a
    /// SparkApplication makes, built by the test from the template (see [`Spec::pod`]).
    pub pod: Option<Value>,
    /// The Kerberos-capable image, for templates that name it.
    pub kerberos: Option<String>,
    /// The workload identity to play (see [`Identity`]).
    pub identity: Option<Identity>,
    /// Added to the env of every container running spark-localizer (the endpoint of a
    /// suite's server the template leaves to the cluster's defaults).
    pub env: Vec<(String, String)>,
}

impl Spec {
    /// `pod-templates/<template>`, for `role`.
    pub fn new(template: &str) -> Spec {
        let role = if template.ends_with("driver.yaml") {
            Role::Driver
        } else {
            Role::Executor
        };
        Spec {
            template: template.to_owned(),
            role,
            configmaps: Vec::new(),
            replace: Vec::new(),
            insecure_registry: None,
            pod: None,
            kerberos: None,
            identity: None,
            env: Vec::new(),
        }
    }

    /// The pod `pod` made from `pod-templates/<template>` (a DaemonSet's pod template, a
    /// SparkApplication's driver or executor) by the caller, which says how in its doc,
    /// played as `role`.
    pub fn pod(template: &str, role: Role, pod: Value) -> Spec {
        Spec {
            role,
            pod: Some(pod),
            ..Spec::new(template)
        }
    }

    /// The ConfigMaps (or Secrets) of `pod-templates/<rel>`.
    pub fn configmap(mut self, rel: &str) -> Spec {
        self.configmaps.extend(documents(rel));
        self
    }

    /// A ConfigMap (or Secret) the test makes: what Spark adds to its pods (the driver's
    /// `spark.properties`), or what a command prints for the user to apply.
    pub fn document(mut self, doc: Value) -> Spec {
        self.configmaps.push(doc);
        self
    }

    pub fn replace(mut self, from: impl Into<String>, to: impl Into<String>) -> Spec {
        self.replace.push((from.into(), to.into()));
        self
    }

    /// The workload identity to play in place of the cluster's (see [`Identity`]).
    pub fn identity(mut self, identity: Identity) -> Spec {
        self.identity = Some(identity);
        self
    }

    /// `name=value` in the env of every container running spark-localizer.
    pub fn env(mut self, name: &str, value: &str) -> Spec {
        self.env.push((name.to_owned(), value.to_owned()));
        self
    }

    /// The test registry `host` speaks plain HTTP.
    pub fn insecure_registry(mut self, host: &str) -> Spec {
        self.insecure_registry = Some(host.to_owned());
        self
    }

    /// Plays it; `None` when pods cannot be played here (see [`kit`]).
    pub fn play(self) -> Option<Played> {
        let kit = kit()?;
        let lock = PLAYS.lock().unwrap_or_else(|e| e.into_inner());
        Some(self.play_locked(kit, Some(lock)))
    }

    /// Plays it while `first` runs (a pod serving this one: the mirror's DaemonSet pod),
    /// under `first`'s turn: the two must not share a volume name, and this one is
    /// dropped first.
    pub fn play_beside(self, first: &Played) -> Played {
        let names: Vec<String> = self.volume_names();
        assert!(
            !names.iter().any(|n| first.volumes.contains(n)),
            "{} and {} share a volume name: they would share the volume",
            self.template,
            first.pod_file.display()
        );
        self.play_locked(first.kit, None)
    }

    fn volume_names(&self) -> Vec<String> {
        let pod = match &self.pod {
            Some(pod) => pod.clone(),
            None => documents(&self.template).remove(0),
        };
        volume_names(&pod)
    }

    fn play_locked(self, kit: &'static Kit, lock: Option<MutexGuard<'static, ()>>) -> Played {
        let mut pod = match self.pod {
            Some(pod) => pod,
            None => documents(&self.template).remove(0),
        };
        let mut configmaps = self.configmaps;
        adapt(
            &mut pod,
            &mut configmaps,
            self.role,
            &self.replace,
            self.insecure_registry.as_deref(),
            (&kit.localizer, self.kerberos.as_deref()),
        );
        if let Some(identity) = &self.identity {
            play_identity(&mut pod, &mut configmaps, identity);
        }
        for list in ["initContainers", "containers"] {
            for c in pod["spec"][list].as_array_mut().into_iter().flatten() {
                if c["image"] == kit.localizer.as_str() {
                    for (name, value) in &self.env {
                        push_env(c, name, value);
                    }
                }
            }
        }
        let dir = tempfile::Builder::new()
            .prefix("sl-pods-")
            .tempdir()
            .unwrap();
        let pod_file = dir.path().join("pod.yaml");
        std::fs::write(&pod_file, serde_yaml_ng::to_string(&pod).unwrap()).unwrap();
        let mut cmd = kube(kit);
        cmd.arg("play");
        for (i, cm) in configmaps.iter().enumerate() {
            let file = dir.path().join(format!("configmap-{i}.yaml"));
            std::fs::write(&file, serde_yaml_ng::to_string(cm).unwrap()).unwrap();
            cmd.arg("--configmap").arg(&file);
        }
        let name = pod["metadata"]["name"].as_str().unwrap().to_owned();
        let volumes = volume_names(&pod);
        let mut played = Played {
            kit,
            _lock: lock,
            _dir: dir,
            pod_file,
            pod,
            name,
            volumes,
            output: None,
            id: String::new(),
        };
        // Volumes of the same names left by a pod before this one would be reused.
        played.remove_volumes();
        let out = output(cmd.arg(&played.pod_file));
        // Its id (kube play prints it only when the pod started): the events name it.
        let id = output(podman().args(["pod", "inspect", "--format", "{{.ID}}", &played.name]));
        played.id = String::from_utf8_lossy(&id.stdout).trim().to_owned();
        played.output = Some(out);
        played
    }
}

/// The podman volumes a pod's volumes are: named after them, a claim's after its claim.
fn volume_names(pod: &Value) -> Vec<String> {
    pod["spec"]["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| {
            v["persistentVolumeClaim"]["claimName"]
                .as_str()
                .or(v["name"].as_str())
                .map(str::to_owned)
        })
        .collect()
}

/// `podman kube` on the throwaway storage with the harness's containers.conf.
fn kube(kit: &Kit) -> Command {
    let mut cmd = podman();
    cmd.env("CONTAINERS_CONF", &kit.conf).arg("kube");
    cmd
}

/// A played pod, torn down on Drop.
pub struct Played {
    kit: &'static Kit,
    /// The turn of this play (none for a pod played beside another).
    _lock: Option<MutexGuard<'static, ()>>,
    _dir: tempfile::TempDir,
    pod_file: PathBuf,
    pod: Value,
    name: String,
    volumes: Vec<String>,
    output: Option<Output>,
    id: String,
}

/// One line of podman's events log about one of the pod's containers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub container: String,
    pub status: String,
    pub exit_code: i64,
}

impl Played {
    /// `kube play`'s exit code and output.
    pub fn play_output(&self) -> (Option<i32>, String) {
        let out = self.output.as_ref().unwrap();
        (out.status.code(), text(out))
    }

    /// The YAML played, for messages.
    pub fn yaml(&self) -> String {
        std::fs::read_to_string(&self.pod_file).unwrap()
    }

    /// podman's name of the template's container `name`.
    pub fn container(&self, name: &str) -> String {
        format!("{}-{name}", self.name)
    }

    fn container_names(&self, key: &str) -> Vec<String> {
        self.pod["spec"][key]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["name"].as_str())
            .map(|n| self.container(n))
            .collect()
    }

    /// The name of the template's Spark container (the first) and its init containers.
    pub fn spark(&self) -> String {
        self.container_names("containers").remove(0)
    }

    pub fn init(&self) -> String {
        self.container_names("initContainers").remove(0)
    }

    /// `podman inspect` of a container's `.State.<field>`; `None` when it does not exist.
    pub fn state(&self, container: &str, field: &str) -> Option<String> {
        let out = output(podman().args([
            "inspect",
            "--type",
            "container",
            "--format",
            &format!("{{{{.State.{field}}}}}"),
            container,
        ]));
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// Waits (polling `podman inspect`) until `container` has exited; its exit code.
    pub fn wait_exit(&self, container: &str) -> i64 {
        let exited = super::wait_for(LIMIT, || {
            self.state(container, "Status").as_deref() == Some("exited")
        });
        assert!(
            exited,
            "{container} did not exit within {LIMIT:?}: {:?}\n{}\n{}",
            self.state(container, "Status"),
            self.logs(container),
            self.yaml()
        );
        self.state(container, "ExitCode").unwrap().parse().unwrap()
    }

    /// `podman logs` of a container (stdout and stderr).
    pub fn logs(&self, container: &str) -> String {
        let out = output(podman().args(["logs", container]));
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    }

    /// The events of this pod's containers (infra excluded), in the order podman logged
    /// them: `died` carries the exit code (0 when podman leaves it out).
    pub fn events(&self) -> Vec<Event> {
        let out = output(&mut events_command(self.kit));
        assert!(out.status.success(), "podman events\n{}", text(&out));
        let all: Vec<Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let ours: BTreeMap<String, String> = all
            .iter()
            .filter(|e| e["Type"] == "container" && e["PodID"] == self.id.as_str())
            .filter_map(|e| Some((e["ID"].as_str()?.to_owned(), e["Name"].as_str()?.to_owned())))
            .filter(|(_, name)| name.starts_with(&format!("{}-", self.name)))
            .collect();
        all.iter()
            .filter(|e| e["Type"] == "container")
            .filter_map(|e| {
                let name = ours.get(e["ID"].as_str()?)?;
                Some(Event {
                    container: name.clone(),
                    status: e["Status"].as_str()?.to_owned(),
                    exit_code: e["ContainerExitCode"].as_i64().unwrap_or(0),
                })
            })
            .collect()
    }

    /// Waits for the Spark container to exit 0 and reads what it saw.
    pub fn observed(&self) -> Observed {
        let spark = self.spark();
        let code = self.wait_exit(&spark);
        let logs = self.logs(&spark);
        assert_eq!(code, 0, "{spark} exited {code}:\n{logs}\n{}", self.yaml());
        Observed::parse(&logs)
    }

    fn remove_volumes(&self) {
        for volume in &self.volumes {
            let _ = output(podman().args(["volume", "rm", "--force", volume]));
        }
    }
}

/// `podman events` of the whole (throwaway) storage, as JSON lines, without waiting.
fn events_command(kit: &Kit) -> Command {
    let mut cmd = podman();
    cmd.env("CONTAINERS_CONF", &kit.conf)
        .args(["events", "--stream=false", "--format", "json"]);
    cmd
}

impl Drop for Played {
    fn drop(&mut self) {
        let down = output(kube(self.kit).args(["play", "--down"]).arg(&self.pod_file));
        if !down.status.success() {
            // A pod kube play left half made: removed by name.
            let _ = output(podman().args(["pod", "rm", "--force", &self.name]));
        }
        self.remove_volumes();
    }
}

/// What the stand-in Spark entrypoint printed.
#[derive(Debug, Default)]
pub struct Observed {
    pub args: String,
    pub uid: String,
    pub spark_classpath: String,
    /// path → sha256 of every file under the shared directories.
    pub files: BTreeMap<String, String>,
    /// directory → its mount options.
    pub mounts: BTreeMap<String, String>,
    /// directory → what a write there gave.
    pub writes: BTreeMap<String, String>,
    /// directory → its `classpath` file.
    pub classpath: BTreeMap<String, String>,
    /// directory → its `spark-classpath.env`.
    pub env: BTreeMap<String, String>,
    pub raw: String,
}

impl Observed {
    fn parse(logs: &str) -> Observed {
        let mut o = Observed {
            raw: logs.to_owned(),
            ..Observed::default()
        };
        for line in logs.lines() {
            let Some((key, rest)) = line.split_once(": ") else {
                continue;
            };
            let (first, second) = rest.split_once(' ').unwrap_or((rest, ""));
            match key {
                "args" => o.args = rest.to_owned(),
                "uid" => o.uid = rest.to_owned(),
                "SPARK_CLASSPATH" => o.spark_classpath = rest.to_owned(),
                "file" => {
                    o.files.insert(second.to_owned(), first.to_owned());
                }
                "mount" => {
                    o.mounts.insert(first.to_owned(), second.to_owned());
                }
                "write" => {
                    o.writes.insert(first.to_owned(), second.to_owned());
                }
                "classpath" => {
                    o.classpath.insert(first.to_owned(), second.to_owned());
                }
                "env" => {
                    let env = o.env.entry(first.to_owned()).or_default();
                    env.push_str(second);
                    env.push('\n');
                }
                _ => {}
            }
        }
        o
    }

    /// Asserts `dir` is mounted read-only and a write there is refused as such.
    pub fn assert_read_only(&self, dir: &str) {
        let opts = self
            .mounts
            .get(dir)
            .unwrap_or_else(|| panic!("{dir} is not a mount:\n{}", self.raw));
        assert!(
            opts.split(',').any(|o| o == "ro"),
            "{dir} is mounted {opts}, not read-only:\n{}",
            self.raw
        );
        let write = &self.writes[dir];
        assert!(
            write.starts_with("refused") && write.contains("Read-only file system"),
            "a write in {dir}: {write}\n{}",
            self.raw
        );
    }
}
