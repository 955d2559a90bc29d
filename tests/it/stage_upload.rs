//! `stage upload` against the real `stage serve` subprocess: the bundle fetched back
//! with a plain client and the printed secret is a tar.gz of exactly the given files,
//! flat and byte-exact (a 20 MiB one, a unicode name, an empty one); the Secret
//! manifest; refusals before any traffic (exit 2); an unreachable or refusing server
//! (exit 3); TLS with the test CA.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::stage_serve::Stage;
use crate::support::pki::Pki;
use crate::support::{data, refused_url, sha256_hex, BIN};

/// What one `stage upload` run did.
pub(crate) struct Upload {
    pub(crate) code: Option<i32>,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

/// Runs `spark-localizer stage upload ARGS FILES` with nothing from outside: no
/// SPARK_LOCALIZER_*, no KUBECONFIG, an empty HOME (no ~/.kube/config); `env` is
/// set last (also used by `stage_auth`).
pub(crate) fn upload(args: &[&str], files: &[&Path], env: &[(&str, &str)]) -> Upload {
    let home = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(BIN);
    cmd.args(["stage", "upload"]).args(args).args(files);
    for (name, _) in std::env::vars() {
        if name.starts_with("SPARK_LOCALIZER_")
            || name == "SSL_CERT_FILE"
            || name == "KUBECONFIG"
            || name == "RUST_LOG"
        {
            cmd.env_remove(&name);
        }
    }
    let out = cmd
        .env("HOME", home.path())
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("run spark-localizer stage upload");
    Upload {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

impl Upload {
    #[track_caller]
    pub(crate) fn expect(&self, code: i32) -> &Self {
        assert_eq!(
            self.code,
            Some(code),
            "--- stdout ---\n{}\n--- stderr ---\n{}",
            self.stdout,
            self.stderr
        );
        self
    }

    #[track_caller]
    pub(crate) fn says(&self, needle: &str) -> &Self {
        assert!(
            self.stderr.contains(needle),
            "no {needle:?} in\n{}",
            self.stderr
        );
        self
    }

    /// (id, secret) printed by a successful run.
    pub(crate) fn submitted(&self) -> (String, String) {
        let json = self.json();
        (
            json["resourceId"].as_str().unwrap().to_owned(),
            json["resourceSecret"].as_str().unwrap().to_owned(),
        )
    }

    fn json(&self) -> serde_json::Value {
        serde_json::from_str(self.stdout.trim())
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", self.stdout))
    }
}

/// Writes the given files into `dir`; returns their paths.
fn files(dir: &Path, files: &[(&str, &[u8])]) -> Vec<PathBuf> {
    files
        .iter()
        .map(|(name, contents)| {
            let path = dir.join(name);
            std::fs::write(&path, contents).unwrap();
            path
        })
        .collect()
}

/// The entries of a tar.gz: (name, entry type, contents), in order.
fn entries(bundle: &[u8]) -> Vec<(String, tar::EntryType, Vec<u8>)> {
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(bundle));
    archive
        .entries()
        .unwrap()
        .map(|e| {
            let mut e = e.unwrap();
            let name = String::from_utf8(e.path_bytes().into_owned()).unwrap();
            let kind = e.header().entry_type();
            let mut contents = Vec::new();
            e.read_to_end(&mut contents).unwrap();
            (name, kind, contents)
        })
        .collect()
}

#[test]
fn round_trip_flat_byte_exact() {
    let dir = tempfile::tempdir().unwrap();
    let stage = Stage::start(&dir.path().join("store"), &[]);
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("sub")).unwrap();
    let big = data(20, 20 << 20);
    let app = data(1, 300_000);
    let unicode = "конфиг ☃ é.properties";
    let mut paths = files(
        &src,
        &[
            ("app.jar", &app),
            (unicode, b"k=v\n"),
            ("big.bin", &big),
            ("empty.txt", b""),
        ],
    );
    // From a subdirectory: the entry is still flat.
    paths.extend(files(&src.join("sub"), &[("nested.jar", b"nested")]));
    let server = format!("http://{}", stage.addr);
    let refs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
    let out = upload(
        &[
            "--server",
            &server,
            "--namespace",
            "spark",
            "--label",
            "spark-app-selector=app-1",
            "--kind",
            "files",
        ],
        &refs,
        &[],
    );
    out.expect(0);
    let json = out.json();
    let id = json["resourceId"].as_str().unwrap();
    let secret = json["resourceSecret"].as_str().unwrap();
    assert_eq!(json["server"], server.as_str());
    assert_eq!(json["kind"], "files");
    let names = ["app.jar", unicode, "big.bin", "empty.txt", "nested.jar"];
    assert_eq!(json["files"], serde_json::json!(names));
    assert!(!out.stderr.contains(secret), "{}", out.stderr);

    let got = stage.get(
        &format!("/api/v0/resources/{id}"),
        &[("Authorization", secret)],
    );
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    let sha = sha256_hex(&got.body);
    assert_eq!(json["sha256"], sha.as_str());
    assert_eq!(got.header("X-Resource-Sha256"), Some(sha.as_str()));
    let got = entries(&got.body);
    let expected: Vec<(&str, &[u8])> = vec![
        ("app.jar", &app),
        (unicode, b"k=v\n"),
        ("big.bin", &big),
        ("empty.txt", b""),
        ("nested.jar", b"nested"),
    ];
    assert_eq!(got.len(), expected.len());
    for ((name, kind, contents), (want_name, want)) in got.iter().zip(&expected) {
        assert_eq!(name, want_name);
        assert_eq!(*kind, tar::EntryType::Regular, "{name}");
        assert!(contents == want, "{name}: contents differ");
    }
    // A wrong secret gets nothing.
    let wrong = stage.get(
        &format!("/api/v0/resources/{id}"),
        &[("Authorization", "not-the-secret")],
    );
    assert_eq!(wrong.status, 401);
    let (code, stderr) = stage.stop();
    assert_eq!(code, Some(0));
    assert!(!stderr.contains(secret));
}

#[test]
fn secret_manifest_and_env_twins() {
    let dir = tempfile::tempdir().unwrap();
    let stage = Stage::start(&dir.path().join("store"), &[]);
    let paths = files(dir.path(), &[("spark-app.jar", &data(2, 5000))]);
    let server = format!("http://{}/", stage.addr);
    let out = upload(
        &["--secret-manifest", "spark-init-app1"],
        &[&paths[0]],
        &[
            ("SPARK_LOCALIZER_STAGE_SERVER", &server),
            ("SPARK_LOCALIZER_STAGE_NAMESPACE", "spark"),
            ("SPARK_LOCALIZER_STAGE_LABELS", "a=b,spark-role=driver"),
        ],
    );
    out.expect(0);
    let yaml = &out.stdout;
    let value = |prefix: &str| -> String {
        yaml.lines()
            .find_map(|l| l.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("no line starting {prefix:?} in\n{yaml}"))
            .trim()
            .to_owned()
    };
    assert_eq!(value("apiVersion:"), "v1");
    assert_eq!(value("kind:"), "Secret");
    assert_eq!(value("  name:"), "spark-init-app1");
    assert_eq!(value("  namespace:"), "spark");
    assert_eq!(value("type:"), "Opaque");
    assert!(yaml.contains("\nstringData:\n"), "{yaml}");
    let quoted = value("  downloadSubmittedJarsSecret:");
    let secret: String = serde_json::from_str(&quoted).unwrap();
    assert!(!yaml.contains("downloadSubmittedFilesSecret"), "{yaml}");
    let id = value("#   spark.kubernetes.initcontainer.downloadJarsResourceIdentifier=");
    assert_eq!(id.len(), 32, "{yaml}");
    let base = server.trim_end_matches('/');
    assert_eq!(
        value("#   spark.kubernetes.resourceStagingServer.uri="),
        base
    );
    assert!(yaml.contains(
        "spark.kubernetes.initcontainer.downloadJarsSecretLocation=/mnt/secrets/spark-init/downloadSubmittedJarsSecret"
    ));
    assert!(
        yaml.contains("mountPath: /mnt/secrets/spark-init"),
        "{yaml}"
    );
    // Every non-comment line is `key: value` or a mapping opener: YAML-ish.
    for line in yaml.lines().filter(|l| !l.trim_start().starts_with('#')) {
        assert!(line.contains(": ") || line.ends_with(':'), "{line:?}");
    }
    assert!(!out.stderr.contains(&secret), "{}", out.stderr);
    let got = stage.get(
        &format!("/api/v0/resources/{id}"),
        &[("Authorization", &secret)],
    );
    assert_eq!(got.status, 200);
    let got = entries(&got.body);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, "spark-app.jar");
    assert!(got[0].2 == data(2, 5000));
}

#[test]
fn refusals_before_any_traffic_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let server = refused_url("");
    let ok = files(dir.path(), &[("ok.jar", b"x")]);
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let dup = files(&other, &[("ok.jar", b"y")]);
    let reserved = files(dir.path(), &[(".spark-localizer-x", b"z")]);
    let output = files(dir.path(), &[("classpath", b"z")]);
    let colon = files(dir.path(), &[("ab:c.jar", b"z")]);
    let missing = dir.path().join("missing.jar");
    let fifo = dir.path().join("fifo.jar");
    crate::stage_serve::mkfifo(&fifo);
    for (case, paths, needle) in [
        ("fifo", vec![fifo.clone()], "not a regular file"),
        (
            "directory",
            vec![ok[0].clone(), other.clone()],
            "is a directory",
        ),
        ("missing", vec![missing.clone()], "no such file"),
        ("duplicate", vec![ok[0].clone(), dup[0].clone()], "ok.jar"),
        ("reserved", vec![reserved[0].clone()], "reserved"),
        ("output name", vec![output[0].clone()], "output of fetch"),
        ("colon", vec![colon[0].clone()], "cannot go on a classpath"),
    ] {
        let refs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
        let out = upload(&["--server", &server], &refs, &[]);
        out.expect(2);
        assert!(out.stderr.contains(needle), "{case}: {}", out.stderr);
        let culprit = paths.last().unwrap().display().to_string();
        assert!(out.stderr.contains(&culprit), "{case}: {}", out.stderr);
        assert!(out.stdout.is_empty(), "{case}: {}", out.stdout);
    }
    for (args, needle) in [
        (vec!["--server", "ftp://h"], "--server"),
        (vec!["--server", &server, "--label", "nokey"], "--label"),
        (
            vec!["--server", &server, "--namespace", "Bad_NS"],
            "--namespace",
        ),
        (
            vec!["--server", &server, "--secret-manifest", "No Good"],
            "--secret-manifest",
        ),
        (vec!["--server", &server, "--kind", "archives"], "--kind"),
    ] {
        let out = upload(&args, &[&ok[0]], &[]);
        out.expect(2);
        assert!(out.stderr.contains(needle), "{args:?}: {}", out.stderr);
    }
    // No FILES at all.
    upload(&["--server", &server], &[], &[]).expect(2);
}

#[test]
fn unreachable_or_refusing_server_exit_3() {
    let dir = tempfile::tempdir().unwrap();
    let paths = files(dir.path(), &[("a.jar", b"tiny")]);
    let out = upload(&["--server", &refused_url("")], &[&paths[0]], &[]);
    out.expect(3);
    assert!(out.stderr.contains("cannot upload"), "{}", out.stderr);
    assert!(out.stdout.is_empty());

    let stage = Stage::start(&dir.path().join("store"), &["--max-upload-bytes", "10"]);
    let server = format!("http://{}", stage.addr);
    // The server's own JSON error message is shown.
    let out = upload(&["--server", &server], &[&paths[0]], &[]);
    out.expect(3);
    assert!(out.stderr.contains("413"), "{}", out.stderr);
    assert!(out.stderr.contains("refused the upload"), "{}", out.stderr);
    let wrong_path = format!("{server}/not-here");
    let out = upload(&["--server", &wrong_path], &[&paths[0]], &[]);
    out.expect(3);
    assert!(out.stderr.contains("404"), "{}", out.stderr);
    assert!(out.stderr.contains("no such endpoint"), "{}", out.stderr);
}

/// A server that accepts connections and never reads or answers (it drops them
/// after two minutes, so that a regression fails instead of hanging the suite).
fn silent_server() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming() {
            let Ok(conn) = conn else { break };
            held.push(conn);
            let dropper = std::mem::take(&mut held);
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_secs(120));
                drop(dropper);
            });
        }
    });
    format!("http://{addr}")
}

/// Against a server that accepts and never answers, `stage upload` gives up after
/// `--stall-timeout` (flag or env twin) with exit 3 naming the server (issue 35:
/// it waited until the peer closed): at the token probe, while the answer to a
/// small upload is awaited, and while a large body is not being taken.
#[test]
fn a_silent_server_is_given_up_on_after_the_stall_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let small = files(dir.path(), &[("a.jar", b"tiny")]);
    let large = dir.path().join("large.jar");
    std::fs::write(&large, data(35, 24 << 20)).unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "tok-silent\n").unwrap();
    let token = token.to_str().unwrap();
    for (what, args, file, env) in [
        ("the token probe", vec![], &small[0], vec![]),
        ("the answer", vec!["--token-file", token], &small[0], vec![]),
        ("the body", vec!["--token-file", token], &large, vec![]),
        (
            "the env twin",
            vec!["--token-file", token],
            &small[0],
            vec![("SPARK_LOCALIZER_STALL_TIMEOUT", "1s")],
        ),
    ] {
        let server = silent_server();
        let mut args: Vec<&str> = args.clone();
        args.extend(["--server", &server, "--connect-timeout", "5s"]);
        if env.is_empty() {
            args.extend(["--stall-timeout", "1s"]);
        }
        let started = std::time::Instant::now();
        let out = upload(&args, &[file.as_path()], &env);
        let took = started.elapsed();
        out.expect(3);
        assert!(
            out.stderr.contains(&server) && out.stderr.contains("--stall-timeout"),
            "{what}: {}",
            out.stderr
        );
        // 1 s of silence, on a busy machine; the default would be 30 s.
        assert!(
            took < std::time::Duration::from_secs(20),
            "{what}: {took:?}"
        );
        assert!(out.stdout.is_empty(), "{what}: {}", out.stdout);
    }
}

/// A server's error message with control characters (NUL, ESC, BEL, CR) reaches
/// the log escaped, never raw (issue 35: tracing escapes ESC and BEL, not NUL or CR).
#[test]
fn a_refusal_with_control_characters_is_logged_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let small = files(dir.path(), &[("a.jar", b"tiny")]);
    let server = crate::support::FaultServer::start();
    server.always(
        "/api/v0/resources",
        crate::support::Fault::StatusBody(
            400,
            vec![("Content-Type".into(), "application/json".into())],
            r#"{"error":"bad\u0000\u001b]0;pwn\u0007\rx"}"#.into(),
        ),
    );
    for format in ["text", "json"] {
        let out = upload(
            &["--server", &server.url(""), "--log-format", format],
            &[&small[0]],
            &[],
        );
        out.expect(3);
        let raw: Vec<char> = out
            .stderr
            .chars()
            .filter(|c| c.is_control() && *c != '\n')
            .collect();
        assert!(raw.is_empty(), "{format}: {raw:?} in {:?}", out.stderr);
        assert!(out.stderr.contains("bad"), "{format}: {}", out.stderr);
    }
}

#[test]
fn tls_with_the_test_ca() {
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = pki.write_leaf(dir.path());
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &pki.ca_pem).unwrap();
    let stage = Stage::start(
        &dir.path().join("store"),
        &[
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
    );
    let server = format!("https://{}", stage.addr);
    let paths = files(dir.path(), &[("secure.jar", &data(6, 1 << 20))]);
    let ca_arg = ca.to_str().unwrap();
    let out = upload(
        &["--server", &server, "--ca-cert", ca_arg],
        &[&paths[0]],
        &[],
    );
    out.expect(0);
    let json = out.json();
    assert_eq!(json["files"], serde_json::json!(["secure.jar"]));
    // The env twin works too; without the CA the server is not trusted (exit 3).
    upload(
        &["--server", &server],
        &[&paths[0]],
        &[("SPARK_LOCALIZER_STAGE_CA_CERT", ca_arg)],
    )
    .expect(0);
    let untrusted = upload(&["--server", &server], &[&paths[0]], &[]);
    untrusted.expect(3);
    assert!(
        untrusted.stderr.to_lowercase().contains("certificate"),
        "{}",
        untrusted.stderr
    );
    // A CA file that cannot be read is a usage error.
    let out = upload(
        &[
            "--server",
            &server,
            "--ca-cert",
            cert.with_extension("x").to_str().unwrap(),
        ],
        &[&paths[0]],
        &[],
    );
    out.expect(2);
    let (code, stderr) = stage.stop();
    assert_eq!(code, Some(0));
    assert!(!stderr.contains(json["resourceSecret"].as_str().unwrap()));
}
