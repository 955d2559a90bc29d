//! Every pod template runs as a pod (issue 38): `podman kube play` of the YAML in
//! `pod-templates/`, changed only as `support::kube::adapt` says (images, URLs and
//! endpoints of the suite's servers, pins, host network, `restartPolicy: Never`, Secrets as
//! ConfigMaps), against the real servers the suite runs. For each: the init container runs
//! first and exits 0, and Spark's container (a stand-in with a shell, user 185 as in the
//! apache/spark images) sees the jars byte for byte and the classpath files at the
//! template's path, on a read-only mount, with `SPARK_CLASSPATH` set by the template's own
//! command where it sources `spark-classpath.env`. One failing case per family: the init
//! container's exit code and message, and Spark's container never started.
//!
//! Needs podman, the static binary (`SPARK_LOCALIZER_STATIC_BIN`) and Debian's busybox-static:
//! skipped locally without them, failed under CI. Everything lives in the tests' throwaway
//! podman storage (`support::podman`).

use crate::support::kube::{Event, Played, Role, Spec};
use crate::support::nginx::Nginx;
use crate::support::registry::{Layer, Registry, PASSWORD};
use std::path::Path;

use crate::support::{data, sha256_hex, Sandbox};

/// The template's jars directory (and way B's `spark-classpath.env`).
pub(crate) const JARS: &str = "/opt/spark/extra-jars";
/// The placeholder pin of the example ConfigMaps (fails every fetch until replaced).
pub(crate) const ZEROS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The template's Celeborn client, under the Maven layout the templates name.
pub(crate) const CELEBORN: &str = "org/apache/celeborn/celeborn-client-spark-3-shaded_2.12/0.5.1/celeborn-client-spark-3-shaded_2.12-0.5.1.jar";
pub(crate) const CELEBORN_JAR: &str = "celeborn-client-spark-3-shaded_2.12-0.5.1.jar";

/// The pod ran: kube play exit 0, the init container started and exited 0 before Spark's
/// container started, and Spark's container saw `jars` (name → bytes) byte for byte in
/// `dir`, in that order on the classpath, read-only; with `SPARK_CLASSPATH` from the env
/// file when the template's command sources it (executors, way B), unset otherwise.
pub(crate) fn assert_ran(
    played: &Played,
    dir: &str,
    jars: &[(&str, &[u8])],
) -> crate::support::kube::Observed {
    let (code, out) = played.play_output();
    assert_eq!(code, Some(0), "kube play\n{out}\n{}", played.yaml());
    let seen = played.observed();
    let (init, spark) = (played.init(), played.spark());

    let events = played.events();
    let at = |container: &str, status: &str| {
        events
            .iter()
            .position(|e| e.container == container && e.status == status)
            .unwrap_or_else(|| panic!("no {status} event of {container} in {events:#?}"))
    };
    let died = &events[at(&init, "died")];
    assert_eq!(
        died,
        &Event {
            container: init.clone(),
            status: "died".into(),
            exit_code: 0
        }
    );
    assert!(
        at(&init, "start") < at(&init, "died") && at(&init, "died") < at(&spark, "start"),
        "the init container did not run to its end before Spark's container: {events:#?}"
    );

    assert_eq!(seen.uid, "185:185", "{}", seen.raw);
    for (name, bytes) in jars {
        let path = format!("{dir}/{name}");
        assert_eq!(
            seen.files.get(&path),
            Some(&sha256_hex(bytes)),
            "{path} in Spark's container:\n{}",
            seen.raw
        );
    }
    let classpath: Vec<String> = jars.iter().map(|(n, _)| format!("{dir}/{n}")).collect();
    let classpath = classpath.join(":");
    assert_eq!(seen.classpath.get(dir), Some(&classpath), "{}", seen.raw);
    let env = &seen.env[dir];
    assert!(
        env.contains(&format!("SPARK_CLASSPATH='{classpath}'")),
        "{env}"
    );
    seen.assert_read_only(dir);
    seen
}

/// The pod stopped at its init container: kube play failed, the init container exited
/// `code` with `message` in its logs, and Spark's container was created but never started.
pub(crate) fn assert_stopped(played: &Played, code: i64, message: &str) {
    let (play, out) = played.play_output();
    assert_ne!(play, Some(0), "kube play\n{out}");
    assert!(
        out.contains(&format!("exited with code {code}")),
        "kube play\n{out}"
    );
    let init = played.init();
    assert_eq!(played.wait_exit(&init), code);
    let logs = played.logs(&init);
    eprintln!("{init} exited {code}:\n{logs}");
    assert!(logs.contains(message), "{init} logs:\n{logs}");
    let spark = played.spark();
    assert_eq!(
        played.state(&spark, "Status").as_deref(),
        Some("created"),
        "{}",
        played.logs(&spark)
    );
    let events = played.events();
    assert!(
        !events
            .iter()
            .any(|e| e.container == spark && e.status == "start"),
        "Spark's container started: {events:#?}"
    );
    assert!(
        events
            .iter()
            .any(|e| e.container == init && e.status == "died" && e.exit_code == code),
        "{events:#?}"
    );
}

/// nginx serving `files` (path under its root → bytes), and that root.
pub(crate) type Served = (Nginx, tempfile::TempDir);

pub(crate) fn serve(files: &[(&str, &[u8])]) -> Option<Served> {
    let root = tempfile::Builder::new()
        .prefix("sl-pods-www-")
        .tempdir()
        .unwrap();
    for (path, bytes) in files {
        let file = root.path().join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, bytes).unwrap();
    }
    let nginx = Nginx::start(root.path())?;
    Some((nginx, root))
}

/// The http-maven templates with the jar on nginx under the Maven layout, pinned `pin`.
fn http_maven(template: &str, pin: &str) -> Option<(Played, Vec<u8>, Served)> {
    let jar = data(3801, 400_000);
    let served = serve(&[(&format!("maven2/{CELEBORN}"), &jar)])?;
    let played = Spec::new(template)
        .configmap("http-maven/pins-configmap.yaml")
        .replace("https://repo.example.com/", served.0.url(""))
        .replace(ZEROS, pin)
        .play()?;
    Some((played, jar, served))
}

#[test]
fn http_maven_executor_plays() {
    let pin = sha256_hex(&data(3801, 400_000));
    let Some((played, jar, _nginx)) = http_maven("http-maven/executor.yaml", &pin) else {
        return;
    };
    let seen = assert_ran(&played, JARS, &[(CELEBORN_JAR, &jar)]);
    // Way B: the template's command sourced the env file and passed Spark's args on.
    assert_eq!(seen.args, "executor");
    assert_eq!(seen.spark_classpath, format!("{JARS}/{CELEBORN_JAR}"));
}

#[test]
fn http_maven_driver_plays() {
    let pin = sha256_hex(&data(3801, 400_000));
    let Some((played, jar, _nginx)) = http_maven("http-maven/driver.yaml", &pin) else {
        return;
    };
    let seen = assert_ran(&played, JARS, &[(CELEBORN_JAR, &jar)]);
    // Way A: no command, the image's entrypoint with Spark's args; the classpath is
    // given at submission, not in the environment.
    assert_eq!(seen.args, "driver");
    assert_eq!(seen.spark_classpath, "<unset>");
}

#[test]
fn http_maven_wrong_pin_stops_the_pod_before_spark() {
    let wrong = sha256_hex(b"not the jar");
    let Some((played, _, _nginx)) = http_maven("http-maven/executor.yaml", &wrong) else {
        return;
    };
    assert_stopped(&played, 4, "sha256 mismatch");
}

/// The SparkApplication's driver and executor pods (as the spark-operator's webhook makes
/// them, see `kube::spark_application_pod`), with http-maven's pins ConfigMap as its
/// header says, and the jar on nginx pinned `pin`.
fn spark_operator(role: Role, pin: &str) -> Option<(Played, Vec<u8>, Served)> {
    let template = "spark-operator/sparkapplication.yaml";
    let jar = data(3801, 400_000);
    let served = serve(&[(&format!("maven2/{CELEBORN}"), &jar)])?;
    let app = crate::support::kube::documents(template).remove(0);
    let pod = crate::support::kube::spark_application_pod(&app, role);
    let played = Spec::pod(template, role, pod)
        .configmap("http-maven/pins-configmap.yaml")
        .replace("https://repo.example.com/", served.0.url(""))
        .replace(ZEROS, pin)
        .play()?;
    Some((played, jar, served))
}

#[test]
fn spark_operator_driver_and_executor_play() {
    let pin = sha256_hex(&data(3801, 400_000));
    for (role, args) in [(Role::Driver, "driver"), (Role::Executor, "executor")] {
        let Some((played, jar, _nginx)) = spark_operator(role, &pin) else {
            return;
        };
        let seen = assert_ran(&played, JARS, &[(CELEBORN_JAR, &jar)]);
        // Way A: the classpath is spark.{driver,executor}.extraClassPath, not the env.
        assert_eq!(seen.args, args);
        assert_eq!(seen.spark_classpath, "<unset>");
    }
}

#[test]
fn spark_operator_wrong_pin_stops_the_pod_before_spark() {
    let wrong = sha256_hex(b"not the jar");
    let Some((played, _, _nginx)) = spark_operator(Role::Executor, &wrong) else {
        return;
    };
    assert_stopped(&played, 4, "sha256 mismatch");
}

/// Jars in classpath order: name → bytes.
type Jars = Vec<(String, Vec<u8>)>;

/// A lock `resolve` wrote for a package of Debian's Maven repository (nginx), and the jars
/// it names in order (read from the repository).
fn debian_lock() -> Option<(Nginx, String, Jars)> {
    let repo = crate::maven::debian_repo()?;
    let root = repo.url("/");
    let sb = Sandbox::new();
    let lock = sb.root.join("packages.lock");
    sb.resolve()
        .args([
            "--packages",
            "org.eclipse.sisu:org.eclipse.sisu.plexus:0.3.4",
        ])
        .args(["--repositories", &root, "--only-repositories"])
        .arg("--lock")
        .arg(&lock)
        .run()
        .expect_code(0);
    let text = std::fs::read_to_string(&lock).unwrap();
    let jars: Jars = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (url, name) = l.split_once("  ").unwrap().1.rsplit_once('#').unwrap();
            let path = Path::new(crate::maven::DEBIAN_REPO).join(url.strip_prefix(&root).unwrap());
            (name.to_owned(), std::fs::read(path).unwrap())
        })
        .collect();
    assert!(jars.len() > 2, "{text}");
    Some((repo, text, jars))
}

/// The maven-lock templates with the lock ConfigMap holding `lock` in place of the
/// example (as its comment says: "Replace the whole file with what `resolve` writes").
fn maven_lock(template: &str, lock: &str) -> Option<Played> {
    let example = crate::support::kube::documents("maven-lock/lock-configmap.yaml")[0]["data"]
        ["packages.lock"]
        .as_str()
        .unwrap()
        .to_owned();
    Spec::new(template)
        .configmap("maven-lock/lock-configmap.yaml")
        .replace(example, lock)
        .play()
}

#[test]
fn maven_lock_executor_and_driver_play() {
    let Some((_repo, lock, jars)) = debian_lock() else {
        return;
    };
    let jars: Vec<(&str, &[u8])> = jars.iter().map(|(n, b)| (n.as_str(), &b[..])).collect();
    for (template, args) in [
        ("maven-lock/executor.yaml", "executor"),
        ("maven-lock/driver.yaml", "driver"),
    ] {
        let Some(played) = maven_lock(template, &lock) else {
            return;
        };
        let seen = assert_ran(&played, JARS, &jars);
        assert_eq!(seen.args, args);
        if args == "executor" {
            assert_eq!(seen.spark_classpath, seen.classpath[JARS], "{}", seen.raw);
        }
    }
}

#[test]
fn maven_lock_tampered_pin_stops_the_pod_before_spark() {
    let Some((_repo, lock, jars)) = debian_lock() else {
        return;
    };
    let pin = sha256_hex(&jars[1].1);
    let tampered = lock.replace(&pin, &sha256_hex(b"another jar"));
    assert_ne!(tampered, lock);
    let Some(played) = maven_lock("maven-lock/executor.yaml", &tampered) else {
        return;
    };
    assert_stopped(&played, 4, "sha256 mismatch");
}

/// The oci templates' artifact, pushed as their comment says (`oras push` of the jar and
/// log4j2.properties), to a plain-HTTP registry with htpasswd; the Secret's registry name
/// replaced, and its credentials when `login` (else the example's placeholder ones).
fn oci(template: &str, login: bool) -> Option<(Played, Vec<u8>, Vec<u8>, Registry)> {
    let registry = Registry::start(false, true)?;
    let (jar, log4j) = (data(3802, 300_000), b"rootLogger.level=warn\n".to_vec());
    registry.push(
        "spark/celeborn-client",
        "0.5.1",
        &[
            Layer {
                title: CELEBORN_JAR,
                data: &jar,
                media_type: "application/java-archive",
            },
            Layer {
                title: "log4j2.properties",
                data: &log4j,
                media_type: "text/plain",
            },
        ],
    );
    let mut spec = Spec::new(template)
        .configmap("oci/registry-secret.yaml")
        .insecure_registry(&registry.host());
    if login {
        let example = crate::support::kube::documents("oci/registry-secret.yaml")[0]["stringData"]
            [".dockerconfigjson"]
            .as_str()
            .unwrap()
            .to_owned();
        spec = spec.replace(example, registry.docker_config(PASSWORD));
    }
    let played = spec
        .replace("registry.example.com", registry.host())
        .play()?;
    Some((played, jar, log4j, registry))
}

#[test]
fn oci_executor_and_driver_play() {
    for (template, args) in [
        ("oci/executor.yaml", "executor"),
        ("oci/driver.yaml", "driver"),
    ] {
        let Some((played, jar, log4j, _registry)) = oci(template, true) else {
            return;
        };
        let seen = assert_ran(&played, JARS, &[(CELEBORN_JAR, &jar)]);
        assert_eq!(seen.args, args);
        let files = "/opt/spark/extra-files";
        assert_eq!(
            seen.files.get(&format!("{files}/log4j2.properties")),
            Some(&sha256_hex(&log4j)),
            "{}",
            seen.raw
        );
        seen.assert_read_only(files);
    }
}

#[test]
fn oci_example_credentials_stop_the_pod_before_spark() {
    let Some((played, _, _, _registry)) = oci("oci/executor.yaml", false) else {
        return;
    };
    assert_stopped(
        &played,
        3,
        "HTTP 401 Unauthorized: the registry refused the credentials",
    );
}

/// The image-volume templates do not play on this podman: 4.3.1's `kube play` refuses any
/// `volumes[].image` before pulling it (here a local image's digest reference, so only the
/// volume type can be refused). Kept as a test so that a podman that plays them shows here
/// (then: bundle, push, and play them like the others).
#[test]
fn image_volume_templates_are_refused_by_podman_4_3() {
    let Some(kit) = crate::support::kube::kit() else {
        return;
    };
    let digest = podman_out(&[
        "image",
        "inspect",
        "--format",
        "{{.Digest}}",
        kit.localizer(),
    ]);
    let reference = format!("{}@{digest}", kit.localizer().rsplit_once(':').unwrap().0);
    for template in ["image-volume/executor.yaml", "image-volume/driver.yaml"] {
        let Some(played) = Spec::new(template)
            .replace(
                format!("registry.example.com/spark/deps@sha256:{ZEROS}"),
                reference.as_str(),
            )
            .play()
        else {
            return;
        };
        let (code, out) = played.play_output();
        assert_ne!(
            code,
            Some(0),
            "{template} played: test it as the others\n{out}"
        );
        assert!(
            out.contains(
                "HostPath, ConfigMap, EmptyDir, and PersistentVolumeClaim are currently the only supported VolumeSource"
            ),
            "{template}\n{out}"
        );
    }
}

fn podman_out(args: &[&str]) -> String {
    let out = crate::support::podman::podman()
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "podman {args:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A free port on 127.0.0.1, for a pod on the host's network.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The mirror's counters and gauges from its `/metrics`, by name without the prefix.
fn mirror_metrics(port: u16) -> std::collections::HashMap<String, u64> {
    crate::mirror::metrics_of(&format!("127.0.0.1:{port}"))
}

/// The mirror's DaemonSet pod (as its controller makes it, `kube::controller_pod`) serving
/// on `port` of the host's network, with `origin` allowed in place of the example's.
fn mirror_pod(origin: &str, port: u16) -> Option<Played> {
    let template = "mirror/daemonset.yaml";
    let set = crate::support::kube::documents(template).remove(0);
    let played = Spec::pod(
        template,
        Role::Daemon,
        crate::support::kube::controller_pod(&set),
    )
    .replace("0.0.0.0:10001", format!("127.0.0.1:{port}"))
    .replace("https://repo.example.com/", origin)
    .play()?;
    let (code, out) = played.play_output();
    assert_eq!(code, Some(0), "kube play\n{out}\n{}", played.yaml());
    let ready = crate::support::wait_for(std::time::Duration::from_secs(60), || {
        let addr = format!("127.0.0.1:{port}");
        std::net::TcpStream::connect(&addr).is_ok()
            && crate::mirror::request_bytes(&addr, "GET", "/healthz").0 == 200
    });
    let mirror = played.container("mirror");
    assert!(
        ready,
        "the mirror pod never answered:\n{}",
        played.logs(&mirror)
    );
    Some(played)
}

/// The mirror's executor template, played while the DaemonSet's pod runs, the Service's
/// address being that pod's on the host's network.
fn mirror_executor(mirror: &Played, port: u16, origin: &str, pin: &str) -> Played {
    Spec::new("mirror/executor.yaml")
        .configmap("http-maven/pins-configmap.yaml")
        .replace(
            "http://spark-localizer-mirror.spark-mirror.svc:10001",
            format!("http://127.0.0.1:{port}"),
        )
        .replace("https://repo.example.com/", origin)
        .replace(ZEROS, pin)
        .play_beside(mirror)
}

/// The mirror's DaemonSet pod plays and serves executor pods: the first executor's jar is
/// a miss the mirror fetched from the origin, the second's a hit from its store (the
/// origin asked once in all); a wrong pin through the mirror still stops the pod.
#[test]
fn mirror_daemonset_pod_serves_executor_pods() {
    let jar = data(3801, 400_000);
    let path = format!("maven2/{CELEBORN}");
    let Some((nginx, _root)) = serve(&[(&path, &jar)]) else {
        return;
    };
    let port = free_port();
    let Some(mirror) = mirror_pod(&nginx.url(""), port) else {
        return;
    };
    let pin = sha256_hex(&jar);
    for round in 1..=2 {
        let executor = mirror_executor(&mirror, port, &nginx.url(""), &pin);
        let seen = assert_ran(&executor, JARS, &[(CELEBORN_JAR, &jar)]);
        assert_eq!(seen.spark_classpath, format!("{JARS}/{CELEBORN_JAR}"));
        drop(executor);
        // Published once the client had its last byte.
        assert!(crate::support::wait_for(
            std::time::Duration::from_secs(60),
            || mirror_metrics(port)["transfers"] == 0
        ));
        let m = mirror_metrics(port);
        assert_eq!(
            (m["misses_total"], m["hits_total"], m["blobs"]),
            (1, round - 1, 1),
            "round {round}: {m:?}"
        );
    }
    let gets = nginx
        .access_log()
        .iter()
        .filter(|l| l.starts_with(&format!("GET /{path} ")))
        .count();
    assert_eq!(gets, 1, "{:#?}", nginx.access_log());

    let wrong = sha256_hex(b"not the jar");
    let executor = mirror_executor(&mirror, port, &nginx.url(""), &wrong);
    assert_stopped(&executor, 4, "sha256 mismatch");
}

/// The staging server (TLS from the test CA) with the jars and a file uploaded as the
/// staging templates' Secret says (`stage upload --secret-manifest spark-init`): what that
/// printed, the properties it lists, and what was uploaded.
struct Staged {
    _work: tempfile::TempDir,
    server: Server,
    /// The Secret manifest `stage upload` printed, parsed.
    secret: serde_json::Value,
    /// The properties the manifest lists, for `--conf` (and so `spark.properties`).
    properties: Vec<(String, String)>,
    ca_pem: String,
    jars: Vec<(&'static str, Vec<u8>)>,
    file: Vec<u8>,
}

/// Where the files were staged: `stage serve` on the host, or the staging server's own
/// template played as a pod (with the SeaweedFS it stores in).
enum Server {
    Host(#[allow(dead_code)] crate::stage_serve::Stage),
    Pod(Box<Played>, Keep),
}

/// What the staging server's pod needs kept running: its S3 store, or the Kubernetes API.
enum Keep {
    Store(crate::support::seaweed::Seaweed),
    Api(#[allow(dead_code)] crate::stage_auth::KubeApi),
}

impl Staged {
    fn property(&self, key: &str) -> &str {
        let found = self.properties.iter().find(|(k, _)| k == key);
        &found
            .unwrap_or_else(|| panic!("no {key} in {:?}", self.properties))
            .1
    }
}

/// Staged on `stage serve` run on the host.
fn staged() -> Staged {
    use crate::support::s;
    let pki = crate::support::pki::Pki::new();
    let work = tempfile::tempdir().unwrap();
    let (cert, key) = pki.write_leaf(work.path());
    let stage = crate::stage_serve::Stage::start(
        &work.path().join("store"),
        &["--tls-cert", &s(&cert), "--tls-key", &s(&key)],
    );
    let server = format!("https://{}", stage.addr);
    upload(work, &pki, &server, &[], Server::Host(stage))
}

/// Uploads the jars and the file to `url` (`more`: the upload's credentials) and reads
/// what `stage upload` printed.
fn upload(
    work: tempfile::TempDir,
    pki: &crate::support::pki::Pki,
    url: &str,
    more: &[&str],
    server: Server,
) -> Staged {
    use crate::support::s;
    let ca = work.path().join("ca.pem");
    std::fs::write(&ca, &pki.ca_pem).unwrap();
    let jars = vec![
        ("app.jar", data(3811, 200_000)),
        ("lib.jar", data(3812, 100_000)),
    ];
    let file = b"spark.app.conf=1\n".to_vec();
    let up = work.path().join("up");
    std::fs::create_dir_all(&up).unwrap();
    for (name, bytes) in &jars {
        std::fs::write(up.join(name), bytes).unwrap();
    }
    std::fs::write(up.join("app.conf"), &file).unwrap();
    let out = std::process::Command::new(crate::support::BIN)
        .args(["stage", "upload", "--server", url])
        .args(["--ca-cert", &s(&ca), "--namespace", "spark"])
        .args(more)
        .args(["--secret-manifest", "spark-init", "--jars"])
        .arg(format!(
            "{},{}",
            s(&up.join("app.jar")),
            s(&up.join("lib.jar"))
        ))
        .arg("--files")
        .arg(up.join("app.conf"))
        .output()
        .unwrap();
    let manifest = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let properties = manifest
        .lines()
        .filter_map(|l| l.strip_prefix("#   spark."))
        .map(|l| l.split("   (").next().unwrap())
        .map(|l| {
            let (k, v) = l.split_once('=').unwrap();
            (format!("spark.{k}"), v.to_owned())
        })
        .collect();
    let secret = serde_yaml_ng::from_str(&manifest).unwrap();
    Staged {
        _work: work,
        server,
        secret,
        properties,
        ca_pem: pki.ca_pem.clone(),
        jars,
        file,
    }
}

/// A staging server's Deployment (`staging-server/<template>`, one replica, as its
/// controller makes it): its TLS Secret with the test's certificate (from the test CA),
/// listening on a free port of 127.0.0.1, and `more` (the store's and the uploads'
/// substitutions). `None` when pods cannot be played.
fn staging_server_pod(
    template: &str,
    pki: &crate::support::pki::Pki,
    more: impl FnOnce(Spec) -> Spec,
) -> Option<(Played, u16)> {
    let template = format!("staging-server/{template}");
    let deployment = crate::support::kube::documents(&template)
        .into_iter()
        .find(|d| d["kind"] == "Deployment")
        .unwrap();
    let pod = crate::support::kube::controller_pod(&deployment);
    let port = free_port();
    let tls = "staging-server/secret.yaml";
    let example = crate::support::kube::documents(tls).remove(0);
    let example = |key: &str| example["stringData"][key].as_str().unwrap().to_owned();
    let spec = Spec::pod(&template, Role::Daemon, pod)
        .configmap(tls)
        .replace("0.0.0.0:10000", format!("127.0.0.1:{port}"))
        .replace(example("tls.crt"), pki.cert_pem.as_str())
        .replace(example("tls.key"), pki.key_pem.as_str());
    let played = more(spec).play()?;
    let (code, out) = played.play_output();
    assert_eq!(code, Some(0), "kube play\n{out}\n{}", played.yaml());
    Some((played, port))
}

/// `deployment-s3.yaml` on SeaweedFS: its Secrets with SeaweedFS's keys (`secret_key`) and
/// the upload `token`, the S3 endpoint and region SeaweedFS's.
fn staging_server_s3_pod(
    pki: &crate::support::pki::Pki,
    token: &str,
    secret_key: &str,
) -> Option<(Played, crate::support::seaweed::Seaweed, u16)> {
    use crate::support::seaweed::Seaweed;
    let sw = Seaweed::start()?;
    sw.create_bucket("spark-staging");
    let (played, port) = staging_server_pod("deployment-s3.yaml", pki, |spec| {
        spec.configmap("staging-server/s3-credentials-secret.yaml")
            .configmap("staging-server/upload-tokens-secret.yaml")
            .replace("REPLACE-WITH-ACCESS-KEY-ID", Seaweed::ACCESS_KEY)
            .replace("REPLACE-WITH-SECRET-ACCESS-KEY", secret_key)
            .replace("replace-me-with-openssl-rand-hex-24", token)
            // The template's region is AWS's; SeaweedFS has one, at its endpoint.
            .replace("eu-west-1", Seaweed::REGION)
            .env("AWS_ENDPOINT_URL", &sw.endpoint())
            .env("AWS_ALLOW_HTTP", "true")
    })?;
    Some((played, sw, port))
}

/// `deployment.yaml` (`--upload-auth kubernetes`, its store on the claim's volume) against
/// the suite's stand-in of the Kubernetes API (TokenReview, SubjectAccessReview): what a
/// cluster gives the pod, the API's address (`SPARK_LOCALIZER_STAGE_KUBE_API`: podman sets
/// no `KUBERNETES_SERVICE_HOST`) and its service account's token, mounted where Kubernetes
/// mounts it.
fn staging_server_kubernetes_pod(
    pki: &crate::support::pki::Pki,
    api: &crate::stage_auth::KubeApi,
    server_token: &str,
) -> Option<(Played, u16)> {
    staging_server_pod("deployment.yaml", pki, |spec| {
        spec.env("SPARK_LOCALIZER_STAGE_KUBE_API", &api.url())
            .identity(crate::support::kube::Identity {
                volume: "kube-api-access".into(),
                injected_at: Some("/var/run/secrets/kubernetes.io/serviceaccount".into()),
                files: vec![("token".into(), server_token.into())],
                env: Vec::new(),
            })
    })
}

/// The staging server pod answers `/healthz` over TLS (within a minute), or it stopped.
fn staging_server_healthy(played: &Played, port: u16, ca_pem: &str) -> bool {
    crate::support::wait_for(std::time::Duration::from_secs(60), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
            || played.state(&played.container("stage-serve"), "Running") == Some("false".into())
    }) && std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        && crate::support::cloud::request(
            "GET",
            &format!("https://127.0.0.1:{port}/healthz"),
            &reqwest::header::HeaderMap::new(),
            Vec::new(),
            Some(ca_pem),
        )
        .0 == 200
}

/// The staging server's own pod: `deployment-s3.yaml` (uploads with a listed token) or
/// `deployment.yaml` (uploads with a token the Kubernetes API authenticates and allows).
#[derive(Clone, Copy, PartialEq)]
enum ServerPod {
    S3,
    Kubernetes,
}

/// Staged on the staging server's own pod, a wrong upload token refused (401) first.
fn staged_on_pod(kind: ServerPod) -> Option<Staged> {
    let pki = crate::support::pki::Pki::new();
    let token = "0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a";
    let (played, port, keep) = match kind {
        ServerPod::S3 => {
            let (played, sw, port) =
                staging_server_s3_pod(&pki, token, crate::support::seaweed::Seaweed::SECRET_KEY)?;
            (played, port, Keep::Store(sw))
        }
        ServerPod::Kubernetes => {
            let server_token = "staging-server-service-account-token";
            let api = crate::stage_auth::KubeApi::start(server_token);
            let user = "system:serviceaccount:spark:spark-submitter";
            api.add_user(
                token,
                crate::stage_auth::KubeUser {
                    username: user,
                    uid: "4f2d8a51-0000-4000-8000-000000000001",
                    groups: &["system:serviceaccounts", "system:serviceaccounts:spark"],
                    extra: serde_json::json!({}),
                },
            );
            api.allow(user, "spark");
            let (played, port) = staging_server_kubernetes_pod(&pki, &api, server_token)?;
            (played, port, Keep::Api(api))
        }
    };
    let server = played.container("stage-serve");
    assert!(
        staging_server_healthy(&played, port, &pki.ca_pem),
        "the staging server pod never answered:\n{}",
        played.logs(&server)
    );
    let work = tempfile::tempdir().unwrap();
    let url = format!("https://127.0.0.1:{port}");
    let ca = work.path().join("ca.pem");
    std::fs::write(&ca, &pki.ca_pem).unwrap();
    let write = |name: &str, text: &str| {
        let path = work.path().join(name);
        std::fs::write(&path, text).unwrap();
        crate::support::s(&path)
    };
    let (wrong, right) = (
        write("wrong-token", "not-a-known-token\n"),
        write("token", token),
    );
    let x = write("x.jar", "x");
    let out = std::process::Command::new(crate::support::BIN)
        .args(["stage", "upload", "--server", &url, "--namespace", "spark"])
        .args(["--ca-cert", &crate::support::s(&ca)])
        .args(["--token-file", &wrong, "--jars", &x])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("401"), "{stderr}");
    Some(upload(
        work,
        &pki,
        &url,
        &["--token-file", &right],
        Server::Pod(Box::new(played), keep),
    ))
}

/// A staging template with the Secret `stage upload` printed (the example's placeholders
/// are its values), the test CA in the CA ConfigMap, and `more` for the role.
fn staging(template: &str, staged: &Staged, more: impl FnOnce(Spec) -> Spec) -> Option<Played> {
    let example_ca = crate::support::kube::documents("staging/staging-ca-configmap.yaml")[0]
        ["data"]["ca.crt"]
        .as_str()
        .unwrap()
        .to_owned();
    let pod = crate::support::kube::documents(template).remove(0);
    let role = if template.ends_with("driver.yaml") {
        Role::Driver
    } else {
        Role::Executor
    };
    let spec = Spec::pod(template, role, pod)
        .document(staged.secret.clone())
        .configmap("staging/staging-ca-configmap.yaml")
        .replace(example_ca, staged.ca_pem.as_str());
    match &staged.server {
        Server::Host(_) => more(spec).play(),
        Server::Pod(server, _) => Some(more(spec).play_beside(server)),
    }
}

/// Spark's driver pod: the template, and the volume Spark adds after reading it,
/// `spark-conf-volume-driver`, the ConfigMap of `spark.properties` every `--conf` goes
/// into (here the properties `stage upload` listed).
fn staging_driver(staged: &Staged) -> Option<Played> {
    let template = "staging/driver.yaml";
    let properties: String = staged
        .properties
        .iter()
        .map(|(k, v)| format!("{k}={v}\n"))
        .collect();
    staging(template, staged, |spec| {
        let mut spec = spec.document(serde_json::json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "spark-drv-conf-map"},
            "data": {"spark.properties": properties},
        }));
        let pod = spec.pod.as_mut().unwrap();
        pod["spec"]["volumes"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({
                "name": "spark-conf-volume-driver",
                "configMap": {"name": "spark-drv-conf-map"},
            }));
        spec
    })
}

/// Spark's executor pod: the template and the ConfigMap of the server and ids, its example
/// values replaced by what `stage upload` listed.
fn staging_executor(staged: &Staged) -> Option<Played> {
    staging("staging/executor.yaml", staged, |spec| {
        spec.configmap("staging/spark-init-configmap.yaml")
            .replace(
                "https://spark-staging.spark-staging.svc:10000",
                staged.property("spark.kubernetes.resourceStagingServer.uri"),
            )
            .replace(
                "0123456789abcdef0123456789abcdef",
                staged.property("spark.kubernetes.initcontainer.downloadJarsResourceIdentifier"),
            )
            .replace(
                "fedcba9876543210fedcba9876543210",
                staged.property("spark.kubernetes.initcontainer.downloadFilesResourceIdentifier"),
            )
    })
}

#[test]
fn staging_driver_and_executor_play() {
    if crate::support::kube::kit().is_none() {
        return;
    }
    let staged = staged();
    let jars: Vec<(&str, &[u8])> = staged.jars.iter().map(|(n, b)| (*n, &b[..])).collect();
    let (dir, files) = ("/var/spark-data/spark-jars", "/var/spark-data/spark-files");
    for args in ["driver", "executor"] {
        let played = match args {
            "driver" => staging_driver(&staged),
            _ => staging_executor(&staged),
        }
        .unwrap();
        let seen = assert_ran(&played, dir, &jars);
        assert_eq!(seen.args, args);
        assert_eq!(
            seen.files.get(&format!("{files}/app.conf")),
            Some(&sha256_hex(&staged.file)),
            "{}",
            seen.raw
        );
        seen.assert_read_only(files);
        drop(played);
    }
}

/// The staging server's own templates play as pods: `deployment-s3.yaml` storing in
/// SeaweedFS, `deployment.yaml` on its claim's volume with uploads authorized by the
/// Kubernetes API's stand-in. Each refuses an upload with a token it does not know, takes
/// one with a token it does, and serves the staging executor played beside it.
#[test]
fn staging_server_pods_serve_the_staging_executor() {
    if crate::support::kube::kit().is_none() {
        return;
    }
    for kind in [ServerPod::S3, ServerPod::Kubernetes] {
        let Some(staged) = staged_on_pod(kind) else {
            return;
        };
        let jars: Vec<(&str, &[u8])> = staged.jars.iter().map(|(n, b)| (*n, &b[..])).collect();
        let played = staging_executor(&staged).unwrap();
        let seen = assert_ran(&played, "/var/spark-data/spark-jars", &jars);
        assert_eq!(seen.args, "executor");
        assert_eq!(
            seen.files.get("/var/spark-data/spark-files/app.conf"),
            Some(&sha256_hex(&staged.file)),
            "{}",
            seen.raw
        );
        drop(played);
        let Server::Pod(_, keep) = &staged.server else {
            unreachable!()
        };
        match keep {
            // What was uploaded is in the bucket, under the template's prefix.
            Keep::Store(sw) => {
                let (status, listing) = sw.request(
                    "GET",
                    "/spark-staging?list-type=2&prefix=prod/",
                    crate::support::seaweed::Seaweed::SECRET_KEY,
                );
                assert_eq!(status, 200, "{listing}");
                assert!(listing.contains("<Key>prod/"), "{listing}");
            }
            // The server presented its service account's token and had the uploader's
            // token reviewed, and its permission in the namespace.
            Keep::Api(api) => {
                let seen = api.take_seen();
                assert!(
                    seen.iter().any(|r| r.path.ends_with("/tokenreviews")
                        && r.authorization == "Bearer staging-server-service-account-token"),
                    "{seen:#?}"
                );
                assert!(
                    seen.iter()
                        .any(|r| r.path.ends_with("/subjectaccessreviews")
                            && r.body["spec"]["resourceAttributes"]["namespace"] == "spark"),
                    "{seen:#?}"
                );
            }
        }
    }
}

/// With keys the store refuses, the staging server's pod stops at start-up (exit 6), naming
/// the store and why, the key not shown.
#[test]
fn staging_server_s3_pod_with_wrong_store_keys_stops() {
    let pki = crate::support::pki::Pki::new();
    let Some((played, _sw, port)) = staging_server_s3_pod(&pki, "t0ken", "a-wrong-secret-key")
    else {
        return;
    };
    let server = played.container("stage-serve");
    assert!(!staging_server_healthy(&played, port, &pki.ca_pem));
    let code = played.wait_exit(&server);
    let logs = played.logs(&server);
    eprintln!("stage-serve exited {code}:\n{logs}");
    // docs/staging-server.md: refused credentials stop the server with exit 6, named.
    assert_eq!(code, 6, "{logs}");
    assert!(
        logs.contains("--store s3://spark-staging/prod") && logs.contains("SignatureDoesNotMatch"),
        "{logs}"
    );
    assert!(!logs.contains("a-wrong-secret-key"), "{logs}");
}

#[test]
fn staging_wrong_secret_stops_the_pod_before_spark() {
    if crate::support::kube::kit().is_none() {
        return;
    }
    let mut staged = staged();
    let jars_secret = staged.secret["stringData"]["downloadSubmittedJarsSecret"]
        .as_str()
        .unwrap()
        .to_owned();
    staged.secret["stringData"]["downloadSubmittedJarsSecret"] =
        serde_json::json!(jars_secret.chars().rev().collect::<String>());
    let played = staging_executor(&staged).unwrap();
    assert_stopped(&played, 3, "401");
    let logs = played.logs(&played.init());
    assert!(
        !logs.contains(&jars_secret),
        "a secret in the logs:\n{logs}"
    );
}

/// The hdfs templates against the test HDFS: the template's HA nameservice `ns1` with its
/// two NameNodes (nn1 standby, nn2 active) at the test's addresses, the two jars at the
/// template's paths, and the token Secret holding a Hadoop token file with an HDFS
/// delegation token for `service` (binary: played as `binaryData`). The test HDFS speaks
/// SIMPLE (it answers the client's SASL negotiation with SUCCESS, as a simple-auth Hadoop
/// server does); the token is checked by the client before any traffic.
fn hdfs(template: &str, service: &str) -> Option<(Played, Jars, crate::support::hdfs::TestHdfs)> {
    let libs = hdfs_libs(3821);
    let mut config = libs.ns1();
    config["datanodes"] = serde_json::json!([{"id": "dn1", "port": 0}, {"id": "dn2", "port": 0}]);
    config["checksum"] = serde_json::json!("CRC32C");
    config["bytes_per_checksum"] = serde_json::json!(512);
    let cluster = crate::support::hdfs::TestHdfs::start(config)?;
    let secret = binary_secret(
        "hdfs/tokens-secret.yaml",
        "hadoop-tokens",
        &crate::hdfs::token_file(service),
    );
    let spec = Spec::new(template)
        .configmap("hdfs/hadoop-conf-configmap.yaml")
        .document(secret);
    let played = at_namenodes(spec, &cluster).play()?;
    Some((played, libs.jars, cluster))
}

/// The two jars the hdfs templates name, as files the test HDFS serves from.
struct HdfsLibs {
    src: tempfile::TempDir,
    jars: Jars,
}

/// The hdfs templates' jars, their bytes made from `seed` and `seed + 1`.
fn hdfs_libs(seed: u64) -> HdfsLibs {
    let src = tempfile::tempdir().unwrap();
    let jars: Jars = vec![
        (CELEBORN_JAR.to_owned(), data(seed, 1_200_000)),
        ("app-udfs-1.4.0.jar".to_owned(), data(seed + 1, 70_000)),
    ];
    for (name, bytes) in &jars {
        std::fs::write(src.path().join(name), bytes).unwrap();
    }
    HdfsLibs { src, jars }
}

impl HdfsLibs {
    /// The test HDFS config of the templates' HA nameservice `ns1` (nn1 standby, nn2
    /// active) serving the jars at the templates' paths.
    fn ns1(&self) -> serde_json::Value {
        let files: Vec<serde_json::Value> = self
            .jars
            .iter()
            .map(|(name, _)| {
                serde_json::json!({
                    "path": format!("/apps/spark/libs/{name}"),
                    "source": crate::support::s(&self.src.path().join(name)),
                    "block_size": 1 << 20,
                })
            })
            .collect();
        serde_json::json!({
            "nameservice": "ns1",
            "namenodes": [
                {"name": "nn1", "port": 0, "state": "standby"},
                {"name": "nn2", "port": 0, "state": "active"},
            ],
            "files": files,
        })
    }
}

/// The example Secret of `pod-templates/<rel>` holding `bytes` under `key` in place of its
/// placeholder `stringData` (a binary value: played as `binaryData`).
fn binary_secret(rel: &str, key: &str, bytes: &[u8]) -> serde_json::Value {
    use base64::Engine as _;
    let mut secret = crate::support::kube::documents(rel).remove(0);
    secret.as_object_mut().unwrap().remove("stringData");
    secret["data"] =
        serde_json::json!({ key: base64::engine::general_purpose::STANDARD.encode(bytes) });
    secret
}

/// The hadoop-conf examples' NameNodes replaced by the test HDFS's.
fn at_namenodes(spec: Spec, cluster: &crate::support::hdfs::TestHdfs) -> Spec {
    spec.replace(
        "namenode-1.hadoop.example.com:8020",
        cluster.namenode_addr(0).to_string(),
    )
    .replace(
        "namenode-2.hadoop.example.com:8020",
        cluster.namenode_addr(1).to_string(),
    )
}

#[test]
fn hdfs_executor_and_driver_play() {
    for (template, args) in [
        ("hdfs/executor.yaml", "executor"),
        ("hdfs/driver.yaml", "driver"),
    ] {
        let Some((played, jars, _cluster)) = hdfs(template, "ha-hdfs:ns1") else {
            return;
        };
        let jars: Vec<(&str, &[u8])> = jars.iter().map(|(n, b)| (n.as_str(), &b[..])).collect();
        let seen = assert_ran(&played, JARS, &jars);
        assert_eq!(seen.args, args);
    }
}

/// A token file with no delegation token for the template's nameservice: stopped before
/// any traffic, naming the file and what it holds.
#[test]
fn hdfs_token_for_another_cluster_stops_the_pod_before_spark() {
    let Some((played, _, _cluster)) = hdfs("hdfs/executor.yaml", "ha-hdfs:another") else {
        return;
    };
    assert_stopped(&played, 2, "no HDFS delegation token for it");
}

/// The hdfs-kerberos executor with the Kerberos-capable image against the Kerberos-only
/// test HDFS (GSSAPI, block tokens) and the real MIT KDC: the template's nameservice at
/// the test's NameNodes, the KDC's krb5.conf in place of the example's realm, its user's
/// principal and keytab (binary: the ConfigMap's `binaryData`) in place of the example's.
fn hdfs_kerberos(keytab: &Path) -> Option<(Played, Jars, crate::support::hdfs::TestHdfs)> {
    let image = crate::image::kerberos_image()?;
    let kdc = crate::support::kdc::kdc()?;
    let libs = hdfs_libs(3831);
    let cluster =
        crate::kerberos::secure_hdfs(kdc, &libs.src.path().join(CELEBORN_JAR), libs.ns1())?;
    let example_krb5 = crate::support::kube::documents("hdfs-kerberos/krb5-configmap.yaml")[0]
        ["data"]["krb5.conf"]
        .as_str()
        .unwrap()
        .to_owned();
    let secret = binary_secret(
        "hdfs-kerberos/keytab-secret.yaml",
        "keytab",
        &std::fs::read(keytab).unwrap(),
    );
    let spec = Spec::new("hdfs-kerberos/executor.yaml")
        .configmap("hdfs-kerberos/hadoop-conf-configmap.yaml")
        .configmap("hdfs-kerberos/krb5-configmap.yaml")
        .document(secret);
    let mut spec = at_namenodes(spec, &cluster)
        .replace(
            example_krb5,
            std::fs::read_to_string(kdc.krb5_conf()).unwrap(),
        )
        .replace("spark@EXAMPLE.COM", crate::support::kdc::USER);
    spec.kerberos = Some(image);
    let played = spec.play()?;
    Some((played, libs.jars, cluster))
}

#[test]
fn hdfs_kerberos_executor_plays() {
    let Some(kdc) = crate::support::kdc::kdc() else {
        return;
    };
    let Some((played, jars, cluster)) = hdfs_kerberos(&kdc.user_keytab()) else {
        return;
    };
    let jars: Vec<(&str, &[u8])> = jars.iter().map(|(n, b)| (n.as_str(), &b[..])).collect();
    let seen = assert_ran(&played, JARS, &jars);
    assert_eq!(seen.args, "executor");
    let authenticated = format!("authenticated {}", crate::support::kdc::USER);
    assert!(
        !cluster.log_lines(&authenticated).is_empty(),
        "{}",
        cluster.stderr()
    );
}

/// A keytab from before the user's key changed: the KDC refuses it, exit 3.
#[test]
fn hdfs_kerberos_stale_keytab_stops_the_pod_before_spark() {
    let Some(kdc) = crate::support::kdc::kdc() else {
        return;
    };
    let Some((played, _, _cluster)) = hdfs_kerberos(&kdc.stale_keytab()) else {
        return;
    };
    assert_stopped(&played, 3, "keytab");
}
