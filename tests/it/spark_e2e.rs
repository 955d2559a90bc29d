//! End to end with a real image and a real Spark JVM, driven by a pod template as written
//! (`pod-templates/http-maven/executor.yaml`):
//!
//! 1. `javac` against `$SPARK_HOME/jars/*` compiles `example.LocalizedShuffleManager`
//!    (tests/spark/shuffle-manager/), a `SortShuffleManager` that announces itself; its jar
//!    is served by a real nginx on 127.0.0.1 under a Maven-layout path and pinned by sha256
//!    in the file the template's pins ConfigMap provides.
//! 2. The template's init container runs in the real image with podman, with its args, env,
//!    securityContext (user, read-only root, dropped capabilities, no privilege
//!    escalation) and a host directory behind each volumeMount; only the jar list
//!    (`SPARK_LOCALIZER_JARS`) is pointed at nginx and the image at the one under test. The
//!    classpath doctor is added (`--doctor-jars` on Spark's jars, mounted read-only, and
//!    `--doctor-strict`): the template's run stays clean, no error in the report's `doctor`.
//! 3. The template's Spark container `command` (source `spark-classpath.env`, exec the
//!    entrypoint) runs verbatim with Spark's args, in a private mount namespace where the
//!    emptyDir is bind-mounted at the container's own mountPath — see [`MountNamespace`] —
//!    and `/opt/entrypoint.sh` is tests/spark/entrypoint.sh, which starts
//!    `java -cp "$SPARK_CLASSPATH:$SPARK_HOME/jars/*" … SparkSubmit` like Spark's image
//!    entrypoint. The job (tests/spark/app/, not localized) runs a shuffle with
//!    `spark.shuffle.manager=example.LocalizedShuffleManager`; the manager's markers (built
//!    from the localized jar at its container path, shuffle writers and readers obtained)
//!    and the job's result on stdout prove it ran.
//! 4. A control run of the same Spark step without the init container's output fails with
//!    `ClassNotFoundException: example.LocalizedShuffleManager`.
//!
//! Needs `SPARK_LOCALIZER_TEST_SPARK_HOME` (`bash scripts/setup/spark.sh`, last line), the image
//! (`SPARK_LOCALIZER_IMAGE`, e.g. `localhost/spark-localizer:test` from
//! `images/build-image.sh static test`; without it the image is built as tests/it/image.rs
//! does, from `SPARK_LOCALIZER_STATIC_BIN`), podman, nginx, a JDK, a Python with PyYAML
//! (target/k8s-venv from scripts/validate-manifests.sh) and `unshare`. Whatever is missing
//! skips the test with a "SKIP:" line locally and fails it under CI.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::nginx::Nginx;
use crate::support::{is_root, sha256_hex};

const TEMPLATE: &str = "pod-templates/http-maven/executor.yaml";
/// Spark's container in the template (`spark.kubernetes.executor.podTemplateContainerName`).
const SPARK_CONTAINER: &str = "spark-kubernetes-executor";
/// Where the init container sees Spark's jars (mounted read-only) for the classpath doctor.
const DOCTOR_JARS: &str = "/opt/spark/jars";
/// Where the jar sits in the Maven-layout repository nginx serves.
const MAVEN_PATH: &str =
    "maven2/org/example/spark/localized-shuffle-manager/1.0.0/localized-shuffle-manager-1.0.0.jar";
const JAR_NAME: &str = "localized-shuffle-manager-1.0.0.jar";
const SHUFFLE_MANAGER: &str = "example.LocalizedShuffleManager";
const MARKER: &str = "[LocalizedShuffleManager]";
/// The env twin of `--jars`: the one thing of the template the test changes.
const JARS_ENV: &str = "SPARK_LOCALIZER_JARS";
/// The root the mount namespace covers with a tmpfs; the Spark image's entrypoint and the
/// jars mount of the template live under it.
const PRIVATE_ROOT: &str = "/opt";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false")
}

/// Skips (returns `None`) locally, panics under CI.
fn skip<T>(why: &str) -> Option<T> {
    if ci() {
        panic!("{why} (CI is set: this test must run; `bash scripts/test.sh` provides it)");
    }
    eprintln!("SKIP: spark_e2e: {why}");
    None
}

fn env_path(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// `SPARK_LOCALIZER_TEST_SPARK_HOME`, checked to hold Spark's jars.
fn spark_home() -> Option<PathBuf> {
    let Some(home) = env_path("SPARK_LOCALIZER_TEST_SPARK_HOME") else {
        return skip(
            "SPARK_LOCALIZER_TEST_SPARK_HOME is not set (`bash scripts/setup/spark.sh` installs \
             pyspark and prints it on its last line)",
        );
    };
    let home = PathBuf::from(home);
    let core = std::fs::read_dir(home.join("jars"))
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| e.file_name().to_string_lossy().starts_with("spark-core_"));
    assert!(
        core,
        "SPARK_LOCALIZER_TEST_SPARK_HOME={} has no jars/spark-core_*.jar",
        home.display()
    );
    Some(home)
}

/// The image under test: `SPARK_LOCALIZER_IMAGE`, else the static image built as
/// tests/it/image.rs builds it (from `SPARK_LOCALIZER_STATIC_BIN`).
fn image() -> Option<String> {
    if let Some(image) = env_path("SPARK_LOCALIZER_IMAGE") {
        // Copied (`podman save`, read only) from the user's storage into the tests'.
        if let Err(why) = crate::support::podman::import_user_image(&image) {
            panic!(
                "SPARK_LOCALIZER_IMAGE={image} cannot be copied from podman's store ({why}); \
                 build it with `bash images/build-image.sh static TAG`"
            );
        }
        return Some(image);
    }
    if env_path("SPARK_LOCALIZER_STATIC_BIN").is_none() {
        return skip(
            "neither SPARK_LOCALIZER_IMAGE (e.g. localhost/spark-localizer:test from \
             `bash images/build-image.sh static test`) nor SPARK_LOCALIZER_STATIC_BIN is set",
        );
    }
    crate::image::static_image()
}

fn found(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A Python with PyYAML: the venv of scripts/validate-manifests.sh, else `python3`.
fn python_with_yaml() -> Option<PathBuf> {
    let venv = repo().join("target/k8s-venv/bin/python");
    for python in [venv, PathBuf::from("python3")] {
        let ok = Command::new(&python)
            .args(["-c", "import yaml"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            return Some(python);
        }
    }
    skip("no Python with PyYAML (`bash scripts/validate-manifests.sh` makes target/k8s-venv)")
}

/// Every document of a YAML file, as JSON values, through PyYAML.
fn load_yaml(python: &Path, path: &Path) -> Vec<Value> {
    let out = Command::new(python)
        .args([
            "-c",
            "import json, sys, yaml\n\
             print(json.dumps([d for d in yaml.safe_load_all(open(sys.argv[1])) if d is not None]))",
        ])
        .arg(path)
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "cannot read {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn str_of<'a>(v: &'a Value, what: &str) -> &'a str {
    v.as_str()
        .unwrap_or_else(|| panic!("{what} is not a string: {v}"))
}

fn strings(v: &Value, what: &str) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("{what} is not a list: {v}"))
        .iter()
        .map(|s| str_of(s, what).to_owned())
        .collect()
}

/// `podman` on the tests' throwaway storage (never the user's).
fn podman() -> Command {
    crate::support::podman::podman()
}

/// What a child process did; its output went to files under the test's work dir.
struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    elapsed: Duration,
}

impl std::fmt::Display for Ran {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {:?} after {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.code, self.elapsed, self.stdout, self.stderr
        )
    }
}

/// Runs `cmd` with stdout and stderr in `logs/<name>.{stdout,stderr}`, killed after `limit`.
fn run(cmd: &mut Command, logs: &Path, name: &str, limit: Duration) -> Ran {
    let out_path = logs.join(format!("{name}.stdout"));
    let err_path = logs.join(format!("{name}.stderr"));
    let started = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{name} still running after {limit:?}, killed\n--- stdout ---\n{}\n--- stderr ---\n{}",
                std::fs::read_to_string(&out_path).unwrap_or_default(),
                std::fs::read_to_string(&err_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Ran {
        code: status.code(),
        stdout: String::from_utf8_lossy(&std::fs::read(&out_path).unwrap()).into_owned(),
        stderr: String::from_utf8_lossy(&std::fs::read(&err_path).unwrap()).into_owned(),
        elapsed: started.elapsed(),
    }
}

/// `javac --release 17 -cp "$SPARK_HOME/jars/*"` of every `.java` under `src`, jarred.
fn compile_jar(spark_home: &Path, src: &Path, work: &Path, name: &str) -> PathBuf {
    let mut sources: Vec<PathBuf> = Vec::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "java") {
                sources.push(path);
            }
        }
    }
    assert!(
        !sources.is_empty(),
        "no Java sources under {}",
        src.display()
    );
    let classes = work.join(format!("classes-{name}"));
    let jars = spark_home.join("jars").join("*");
    let ran = run(
        Command::new("javac")
            .args(["--release", "17", "-encoding", "UTF-8", "-cp"])
            .arg(&jars)
            .arg("-d")
            .arg(&classes)
            .args(&sources),
        work,
        &format!("javac-{name}"),
        Duration::from_secs(180),
    );
    assert_eq!(ran.code, Some(0), "javac of {}\n{ran}", src.display());
    let jar = work.join(name);
    let ran = run(
        Command::new("jar")
            .arg("cf")
            .arg(&jar)
            .arg("-C")
            .arg(&classes)
            .arg("."),
        work,
        &format!("jar-{name}"),
        Duration::from_secs(60),
    );
    assert_eq!(ran.code, Some(0), "jar {name}\n{ran}");
    jar
}

/// A temp dir anybody may write to: an emptyDir the container user (65532) fills.
fn empty_dir(prefix: &str) -> tempfile::TempDir {
    let dir = tempfile::Builder::new().prefix(prefix).tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    dir
}

/// How the Spark container's view of the pod is reproduced without a Spark image.
///
/// The init container wrote `spark-classpath.env` naming the jars by their path in the
/// pod (`/opt/spark/extra-jars/…`), and the template's command sources it from there. The
/// host directory behind the emptyDir has another path; rewriting the file would test a
/// file the product never wrote. What a kubelet does instead is a bind mount in the
/// container's mount namespace, so this does the same: `unshare --mount` (as root, or
/// `--map-root-user` in a user namespace otherwise) gives the Spark step a private mount
/// namespace with a tmpfs over `/opt` (nothing on the host is written or shadowed for any
/// other process; it vanishes with the JVM), the emptyDir's host directory bind-mounted at
/// the Spark container's mountPath (read-only where the template says so), and the
/// stand-in entrypoint at the path the template's command execs. The JVM then reads
/// exactly the file the init container wrote, at exactly the paths it names. Spark itself
/// (`SPARK_HOME`, Java) stays at its host paths, as an image's own files would be.
struct MountNamespace {
    unshare: Vec<&'static str>,
}

const SETUP: &str = r#"set -eu
root=$1 host=$2 mnt=$3 ro=$4 standin=$5 entrypoint=$6
shift 6
mount -t tmpfs -o mode=0755 spark-e2e "$root"
mkdir -p "$mnt" "$(dirname "$entrypoint")"
mount --bind "$host" "$mnt"
if [ "$ro" = true ]; then mount -o remount,bind,ro "$mnt"; fi
cp "$standin" "$entrypoint"
chmod 0755 "$entrypoint"
exec "$@"
"#;

impl MountNamespace {
    fn probe() -> Option<MountNamespace> {
        let unshare = if is_root() {
            vec!["unshare", "--mount", "--propagation", "private"]
        } else {
            vec![
                "unshare",
                "--map-root-user",
                "--mount",
                "--propagation",
                "private",
            ]
        };
        let works = Command::new(unshare[0])
            .args(&unshare[1..])
            .args(["sh", "-c", &format!("mount -t tmpfs probe {PRIVATE_ROOT}")])
            .stdin(Stdio::null())
            .output()
            .is_ok_and(|o| o.status.success());
        if works {
            Some(MountNamespace { unshare })
        } else {
            skip(&format!(
                "cannot make a private mount namespace with a tmpfs on {PRIVATE_ROOT} ({})",
                unshare.join(" ")
            ))
        }
    }

    /// `command` in the namespace: `host` mounted at `mount_path`, the stand-in
    /// entrypoint at `entrypoint`.
    fn command(
        &self,
        host: &Path,
        mount_path: &str,
        read_only: bool,
        entrypoint: &str,
        command: &[String],
    ) -> Command {
        let mut cmd = Command::new(self.unshare[0]);
        cmd.args(&self.unshare[1..])
            .args(["sh", "-c", SETUP, "setup", PRIVATE_ROOT])
            .arg(host)
            .arg(mount_path)
            .arg(if read_only { "true" } else { "false" })
            .arg(repo().join("tests/spark/entrypoint.sh"))
            .arg(entrypoint)
            .args(command);
        cmd
    }
}

/// The jars volume as a container mounts it.
struct Mount {
    path: String,
    read_only: bool,
}

fn mounts(container: &Value) -> BTreeMap<String, Mount> {
    container["volumeMounts"]
        .as_array()
        .expect("volumeMounts")
        .iter()
        .map(|m| {
            (
                str_of(&m["name"], "volumeMounts[].name").to_owned(),
                Mount {
                    path: str_of(&m["mountPath"], "volumeMounts[].mountPath").to_owned(),
                    read_only: m["readOnly"].as_bool().unwrap_or(false),
                },
            )
        })
        .collect()
}

/// podman flags for a container's securityContext (the fields the templates set).
fn security_flags(ctx: &Value) -> Vec<String> {
    let mut flags = Vec::new();
    let user = ctx["runAsUser"]
        .as_u64()
        .expect("securityContext.runAsUser");
    let group = ctx["runAsGroup"].as_u64().unwrap_or(user);
    flags.push(format!("--user={user}:{group}"));
    if ctx["readOnlyRootFilesystem"] == Value::Bool(true) {
        flags.push("--read-only".into());
    }
    if ctx["allowPrivilegeEscalation"] == Value::Bool(false) {
        flags.push("--security-opt=no-new-privileges".into());
    }
    for cap in ctx["capabilities"]["drop"].as_array().into_iter().flatten() {
        flags.push(format!("--cap-drop={}", str_of(cap, "capabilities.drop[]")));
    }
    flags
}

/// The job's expected result: sum of 1..=1000 by `x % 10`, as Java's TreeMap prints it.
fn expected_result() -> String {
    let mut sums = [0u64; 10];
    for x in 1..=1000u64 {
        sums[(x % 10) as usize] += x;
    }
    let parts: Vec<String> = sums
        .iter()
        .enumerate()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    format!("[ShuffleJob] result: {{{}}}", parts.join(", "))
}

#[test]
fn a_pod_template_localizes_a_shuffle_manager_that_a_real_spark_job_uses() {
    let Some(spark_home) = spark_home() else {
        return;
    };
    if !(found("javac") && found("jar") && found("java")) {
        skip::<()>("no JDK (java, javac, jar); scripts/setup/spark.sh installs one");
        return;
    }
    let Some(python) = python_with_yaml() else {
        return;
    };
    let Some(namespace) = MountNamespace::probe() else {
        return;
    };
    let work = tempfile::Builder::new()
        .prefix("sl-spark-e2e-")
        .tempdir()
        .unwrap();
    let work = work.path();

    // --- The template, as written -------------------------------------------------------
    let docs = load_yaml(&python, &repo().join(TEMPLATE));
    let pod = &docs[0];
    assert_eq!(pod["kind"], "Pod", "{TEMPLATE}");
    let spec = &pod["spec"];
    let volumes: BTreeMap<String, Value> = spec["volumes"]
        .as_array()
        .expect("spec.volumes")
        .iter()
        .map(|v| (str_of(&v["name"], "volumes[].name").to_owned(), v.clone()))
        .collect();
    let inits = spec["initContainers"].as_array().expect("initContainers");
    assert_eq!(inits.len(), 1, "one init container in {TEMPLATE}");
    let init = &inits[0];
    assert!(
        init.get("command").is_none(),
        "the init container runs the image's entrypoint"
    );
    let args = strings(&init["args"], "initContainers[0].args");
    let mut env: Vec<(String, String)> = init["env"]
        .as_array()
        .expect("initContainers[0].env")
        .iter()
        .map(|e| {
            let name = str_of(&e["name"], "env[].name").to_owned();
            (name.clone(), str_of(&e["value"], &name).to_owned())
        })
        .collect();
    let init_mounts = mounts(init);
    let spark = spec["containers"]
        .as_array()
        .expect("containers")
        .iter()
        .find(|c| c["name"] == SPARK_CONTAINER)
        .unwrap_or_else(|| panic!("no container {SPARK_CONTAINER} in {TEMPLATE}"));
    let spark_command = strings(&spark["command"], "the Spark container's command");
    let spark_mounts = mounts(spark);
    // The jars volume: the emptyDir both containers mount.
    let jars_volume = init_mounts
        .keys()
        .find(|name| volumes[*name].get("emptyDir").is_some())
        .expect("an emptyDir among the init container's mounts")
        .clone();
    let init_jars = &init_mounts[&jars_volume];
    let spark_jars = spark_mounts
        .get(&jars_volume)
        .unwrap_or_else(|| panic!("{SPARK_CONTAINER} does not mount {jars_volume}"));
    assert!(
        spark_jars.path.starts_with(&format!("{PRIVATE_ROOT}/")),
        "the test mounts the jars under {PRIVATE_ROOT}, the template at {}",
        spark_jars.path
    );
    // `/bin/sh -c '. <dir>/spark-classpath.env && exec /opt/entrypoint.sh "$@"' --`
    assert_eq!(spark_command[..2], ["/bin/sh", "-c"], "{spark_command:?}");
    let entrypoint = spark_command[2]
        .split("exec ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no `exec <entrypoint>` in {:?}", spark_command[2]))
        .to_owned();
    assert!(
        entrypoint.starts_with(&format!("{PRIVATE_ROOT}/")),
        "the stand-in entrypoint goes under {PRIVATE_ROOT}, the template execs {entrypoint}"
    );

    // --- 1. The localized jar, and the application jar (not localized) ------------------
    let started = Instant::now();
    let manager_jar = compile_jar(
        &spark_home,
        &repo().join("tests/spark/shuffle-manager"),
        work,
        JAR_NAME,
    );
    let app_jar = compile_jar(
        &spark_home,
        &repo().join("tests/spark/app"),
        work,
        "shuffle-job.jar",
    );
    eprintln!("compiled both jars in {:?}", started.elapsed());
    let manager_bytes = std::fs::read(&manager_jar).unwrap();

    let repo_root = work.join("repository");
    let served = repo_root.join(MAVEN_PATH);
    std::fs::create_dir_all(served.parent().unwrap()).unwrap();
    std::fs::copy(&manager_jar, &served).unwrap();
    let Some(nginx) = Nginx::start(&repo_root) else {
        return;
    };
    let Some(image) = image() else {
        return;
    };

    // --- 2. The init container, in the image, with a host dir behind each mount ---------
    let mut host_dirs: BTreeMap<String, tempfile::TempDir> = BTreeMap::new();
    let checksums = args
        .iter()
        .position(|a| a == "--checksums")
        .map(|i| args[i + 1].clone())
        .expect("--checksums in the init container's args");
    for (name, mount) in &init_mounts {
        let volume = &volumes[name];
        let dir = empty_dir(&format!("sl-spark-e2e-{name}-"));
        if volume.get("emptyDir").is_some() {
            // As the kubelet makes it: empty, writable by the pod's users.
        } else if let Some(config_map) = volume.get("configMap") {
            // The pins ConfigMap: its key (as the example manifest beside the template
            // names it) holding the jar's digest, keyed by destination name.
            let rel = checksums
                .strip_prefix(&format!("{}/", mount.path))
                .unwrap_or_else(|| panic!("{checksums} is not under the mount of {name}"));
            let cm_name = str_of(&config_map["name"], "configMap.name");
            let example = std::fs::read_dir(repo().join(TEMPLATE).parent().unwrap())
                .unwrap()
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
                .flat_map(|p| load_yaml(&python, &p))
                .find(|d| d["kind"] == "ConfigMap" && d["metadata"]["name"] == cm_name)
                .unwrap_or_else(|| panic!("no example ConfigMap {cm_name} beside {TEMPLATE}"));
            assert!(
                example["data"].get(rel).is_some(),
                "ConfigMap {cm_name} has no key {rel} (the file --checksums reads)"
            );
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
            let pins = dir.path().join(rel);
            std::fs::write(
                &pins,
                format!(
                    "# {JAR_NAME}, built by this test\n{}  {JAR_NAME}\n",
                    sha256_hex(&manager_bytes)
                ),
            )
            .unwrap();
            std::fs::set_permissions(&pins, std::fs::Permissions::from_mode(0o644)).unwrap();
        } else {
            panic!("volume {name}: only emptyDir and configMap are backed by host dirs here");
        }
        host_dirs.insert(name.clone(), dir);
    }
    let url = nginx.url(MAVEN_PATH);
    let jars_env = env
        .iter_mut()
        .find(|(name, _)| name == JARS_ENV)
        .unwrap_or_else(|| panic!("{JARS_ENV} is not in the init container's env"));
    jars_env.1 = url.clone();

    let mut podman_run = podman();
    podman_run.args([
        "run",
        "--rm",
        "--pull=never",
        "--network=host",
        "--ulimit",
        "nofile=4096:4096",
        "--ulimit",
        "nproc=4096:4096",
    ]);
    podman_run.args(security_flags(&init["securityContext"]));
    for (name, mount) in &init_mounts {
        let ro = if mount.read_only { ":ro" } else { "" };
        podman_run.arg("-v").arg(format!(
            "{}:{}{ro}",
            host_dirs[name].path().display(),
            mount.path
        ));
    }
    for (name, value) in &env {
        podman_run.arg("-e").arg(format!("{name}={value}"));
    }
    // The classpath doctor against the Spark the job runs on, strict: the template's run
    // must be clean (an error would fail the init container with exit 8).
    podman_run.arg("-v").arg(format!(
        "{}:{DOCTOR_JARS}:ro",
        spark_home.join("jars").display()
    ));
    podman_run
        .arg(&image)
        .args(&args)
        .args(["--doctor-jars", DOCTOR_JARS, "--doctor-strict"]);
    eprintln!("init container: {podman_run:?}");
    let ran = run(
        &mut podman_run,
        work,
        "init-container",
        Duration::from_secs(180),
    );
    eprintln!(
        "init container ran in {:?}; its log:\n{}",
        ran.elapsed,
        ran.stderr.trim_end()
    );
    assert_eq!(ran.code, Some(0), "the init container failed\n{ran}");
    let jars_dir = host_dirs[&jars_volume].path();
    assert_eq!(
        std::fs::read(jars_dir.join(JAR_NAME)).unwrap(),
        manager_bytes,
        "the localized jar"
    );
    let in_pod = format!("{}/{JAR_NAME}", init_jars.path);
    assert_eq!(
        std::fs::read_to_string(jars_dir.join("classpath")).unwrap(),
        format!("{in_pod}\n")
    );
    let report: Value = serde_json::from_slice(
        &std::fs::read(jars_dir.join("spark-localizer-report.json")).unwrap(),
    )
    .unwrap();
    let doctor = &report["doctor"];
    assert_eq!(doctor["image"]["dir"], DOCTOR_JARS, "{report:#}");
    assert_eq!(doctor["image"]["spark"], "3.5.3", "{report:#}");
    assert_eq!(doctor["added"][0]["path"], in_pod, "{report:#}");
    let errors: Vec<&Value> = doctor["findings"]
        .as_array()
        .expect("doctor.findings")
        .iter()
        .filter(|f| f["severity"] == "error")
        .collect();
    assert!(
        errors.is_empty(),
        "the classpath doctor found errors: {errors:#?}"
    );
    let env_file = std::fs::read_to_string(jars_dir.join("spark-classpath.env")).unwrap();
    assert!(
        env_file.contains(&format!("SPARK_CLASSPATH='{in_pod}'")),
        "{env_file}"
    );
    assert!(
        nginx
            .access_log()
            .iter()
            .any(|l| l.starts_with(&format!("GET /{MAVEN_PATH} ")) && l.ends_with(" 200")),
        "nginx served the jar: {:?}",
        nginx.access_log()
    );

    // --- 3. Spark's container: the template's command, then Spark's entrypoint ----------
    let home = work.join("home");
    let tmp = work.join("tmp");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&tmp).unwrap();
    let spark_args: Vec<String> = [
        "--master",
        "local[2]",
        "--conf",
        &format!("spark.shuffle.manager={SHUFFLE_MANAGER}"),
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        "spark.driver.host=127.0.0.1",
        "--conf",
        "spark.driver.bindAddress=127.0.0.1",
        "--conf",
        &format!("spark.local.dir={}", tmp.display()),
        "--class",
        "example.ShuffleJob",
        &app_jar.display().to_string(),
    ]
    .map(str::to_owned)
    .to_vec();
    let spark_step = |jars_host: &Path, command: &[String], name: &str| {
        let mut cmd = namespace.command(
            jars_host,
            &spark_jars.path,
            spark_jars.read_only,
            &entrypoint,
            command,
        );
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &home)
            .env("TMPDIR", &tmp)
            .env("LANG", "C.UTF-8")
            .env("SPARK_HOME", &spark_home)
            .env("SPARK_LOCAL_IP", "127.0.0.1");
        if let Some(java_home) = std::env::var_os("JAVA_HOME") {
            cmd.env("JAVA_HOME", java_home);
        }
        let ran = run(&mut cmd, work, name, Duration::from_secs(300));
        eprintln!("{name}: exit {:?} in {:?}", ran.code, ran.elapsed);
        ran
    };
    let with_template: Vec<String> = spark_command.iter().chain(&spark_args).cloned().collect();
    let ran = spark_step(jars_dir, &with_template, "spark-with-init-container");
    assert_eq!(ran.code, Some(0), "the Spark job failed\n{ran}");
    let lines: Vec<&str> = ran.stdout.lines().collect();
    let constructed = format!("{MARKER} constructed from file:{in_pod}");
    let position = |prefix: &str| lines.iter().position(|l| l.starts_with(prefix));
    let built_at = position(&constructed).unwrap_or_else(|| {
        panic!("no {constructed:?}: the shuffle manager did not come from the localized jar\n{ran}")
    });
    let writer_at = position(&format!("{MARKER} writer for shuffle "))
        .unwrap_or_else(|| panic!("no shuffle writer was obtained from {SHUFFLE_MANAGER}\n{ran}"));
    assert!(built_at < writer_at, "{ran}");
    assert!(
        position(&format!("{MARKER} reader for shuffle ")).is_some(),
        "no shuffle reader was obtained from {SHUFFLE_MANAGER}\n{ran}"
    );
    assert!(
        lines.contains(&format!("[ShuffleJob] shuffle manager: {SHUFFLE_MANAGER}").as_str()),
        "{ran}"
    );
    assert!(
        lines.contains(&expected_result().as_str()),
        "the job's result is missing or wrong (want {:?})\n{ran}",
        expected_result()
    );

    eprintln!("what the job printed:");
    for line in lines.iter().filter(|l| l.starts_with('[')) {
        eprintln!("  {line}");
    }

    // --- 4. Control: the same Spark step without the init container's output ------------
    // A fresh emptyDir nothing was localized into. The template's command refuses to start
    // Spark at all (nothing to source)...
    let empty = empty_dir("sl-spark-e2e-no-init-");
    let ran = spark_step(empty.path(), &with_template, "spark-without-fragment");
    assert_ne!(ran.code, Some(0), "{ran}");
    assert!(
        ran.stderr.contains("spark-classpath.env") && !ran.stdout.contains(MARKER),
        "{ran}"
    );
    // ...and Spark's own entrypoint, i.e. the pod without the init container and its
    // command, has no SPARK_CLASSPATH: the shuffle manager class is not there.
    let plain: Vec<String> = std::iter::once(entrypoint.clone())
        .chain(spark_args.iter().cloned())
        .collect();
    let ran = spark_step(empty.path(), &plain, "spark-without-init-container");
    assert_ne!(
        ran.code,
        Some(0),
        "Spark started without the localized jar\n{ran}"
    );
    assert!(
        ran.stderr.contains(&format!(
            "java.lang.ClassNotFoundException: {SHUFFLE_MANAGER}"
        )),
        "{ran}"
    );
    assert!(!ran.stdout.contains(MARKER), "{ran}");
}
