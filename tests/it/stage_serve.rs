//! `stage serve`: the resource staging server, spoken to at the wire level as the
//! original v0 clients do (hand-built multipart, raw `Authorization` header), over
//! plain TCP and TLS on 127.0.0.1: round trip, ranges, HEAD, DELETE, refusals,
//! a crash mid-upload, expiry, metrics, and no secret in the logs.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::pki::Pki;
use crate::support::{data, sha256_hex, wait_for, Listening, BIN};

const OWNER: &str =
    r#"{"namespace":"spark","labels":{"spark-app-selector":"app-1"},"ownerType":"Pod"}"#;
/// The original clients' spelling of the owner fields.
const ORIGINAL_OWNER: &str =
    r#"{"ownerNamespace":"spark","ownerLabels":{"a":"b"},"ownerType":"Pod"}"#;

/// A `stage serve` subprocess on 127.0.0.1 with its stderr collected (also used by
/// `stage_upload`).
pub(crate) struct Stage {
    child: Child,
    pub(crate) addr: String,
    stderr: Arc<Mutex<Vec<u8>>>,
    drain: Option<std::thread::JoinHandle<()>>,
}

impl Stage {
    /// Starts the server on `store` and waits for its `listening on` line.
    pub(crate) fn start(store: &Path, args: &[&str]) -> Stage {
        Stage::start_with_env(store, args, &[])
    }

    pub(crate) fn start_with_env(store: &Path, args: &[&str], env: &[(&str, &str)]) -> Stage {
        let mut cmd = Command::new(BIN);
        cmd.args(["stage", "serve", "--listen", "127.0.0.1:0", "--store"])
            .arg(store)
            .args(args);
        for (name, _) in std::env::vars() {
            // KUBERNETES_SERVICE_HOST too: in a CI pod it would turn owner checks on.
            if name.starts_with("SPARK_LOCALIZER_")
                || name == "RUST_LOG"
                || name.starts_with("KUBERNETES_SERVICE_")
            {
                cmd.env_remove(&name);
            }
        }
        // Uploads from anyone unless a test says otherwise (its flag wins).
        cmd.env("SPARK_LOCALIZER_STAGE_UPLOAD_AUTH", "none");
        cmd.envs(env.iter().copied());
        let server = Listening::spawn(cmd);
        Stage {
            child: server.child,
            addr: server.addr,
            stderr: server.stderr,
            drain: server.drain,
        }
    }

    pub(crate) fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    pub(crate) fn get(&self, path: &str, headers: &[(&str, &str)]) -> Reply {
        self.send("GET", path, headers, &[])
    }

    pub(crate) fn send(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Reply {
        exchange(
            TcpStream::connect(&self.addr).unwrap(),
            &request(method, path, &self.addr, headers, body),
        )
    }

    /// Uploads `bundle` with the owner JSON; parts in the given order.
    fn upload(&self, bundle: &[u8], owner_first: bool) -> Reply {
        let mut parts = vec![
            ("resources", "application/octet-stream", bundle),
            ("resourcesOwner", "application/json", OWNER.as_bytes()),
        ];
        if owner_first {
            parts.reverse();
        }
        let (content_type, body) = multipart(&parts);
        self.send(
            "POST",
            "/api/v0/resources",
            &[("Content-Type", &content_type)],
            &body,
        )
    }

    /// Uploads and returns (id, secret), asserting 201.
    pub(crate) fn stage(&self, bundle: &[u8]) -> (String, String) {
        let reply = self.upload(bundle, false);
        assert_eq!(reply.status, 201, "{reply:?}\n{}", self.stderr_text());
        let json = reply.json();
        (
            json["resourceId"].as_str().unwrap().to_owned(),
            json["resourceSecret"].as_str().unwrap().to_owned(),
        )
    }

    pub(crate) fn metric(&self, name: &str) -> u64 {
        let text = String::from_utf8(self.get("/metrics", &[]).body).unwrap();
        let full = format!("spark_localizer_stage_{name} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&full))
            .unwrap_or_else(|| panic!("no {full} in\n{text}"))
            .parse()
            .unwrap()
    }

    /// SIGTERM, then the exit code and the whole stderr.
    pub(crate) fn stop(mut self) -> (Option<i32>, String) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let status = self.child.wait().unwrap();
        if let Some(drain) = self.drain.take() {
            drain.join().unwrap();
        }
        (status.code(), self.stderr_text())
    }

    pub(crate) fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Stage {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) status: u16,
    headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl Reply {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", String::from_utf8_lossy(&self.body)))
    }

    fn error(&self) -> String {
        self.json()["error"].as_str().unwrap_or_default().to_owned()
    }
}

fn request(method: &str, path: &str, host: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if !body.is_empty() || method == "POST" {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    let mut raw = head.into_bytes();
    raw.extend_from_slice(body);
    raw
}

/// Writes one request, reads the answer to EOF (Connection: close).
fn exchange<S: Read + Write>(mut stream: S, raw: &[u8]) -> Reply {
    stream.write_all(raw).unwrap();
    stream.flush().unwrap();
    let mut all = Vec::new();
    let _ = stream.read_to_end(&mut all);
    parse_reply(&all)
}

fn parse_reply(all: &[u8]) -> Reply {
    let split = all
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no header end in {:?}", String::from_utf8_lossy(all)));
    let head = String::from_utf8_lossy(&all[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
        .collect();
    assert!(
        !headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("transfer-encoding")),
        "chunked answers are not expected: {head}"
    );
    Reply {
        status,
        headers,
        body: all[split + 4..].to_vec(),
    }
}

/// A multipart/form-data body with these (name, content type, data) parts.
pub(crate) fn multipart(parts: &[(&str, &str, &[u8])]) -> (String, Vec<u8>) {
    let boundary = "----sparkLocalizerTestBoundary7MA4YWxkTrZu0gW";
    let mut body = Vec::new();
    for (name, content_type, data) in parts {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"; filename=\"{name}\"\r\nContent-Type: {content_type}\r\n\r\n"
            )
            .as_bytes(),
        );
        body.extend_from_slice(data);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

/// A tar.gz of flat files.
pub(crate) fn bundle(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for (name, contents) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(contents.len() as u64);
        header.set_mode(0o644);
        builder.append_data(&mut header, name, *contents).unwrap();
    }
    gzip(&builder.into_inner().unwrap())
}

/// A tar.gz with one raw entry (the tar crate's setters refuse unsafe names).
fn hostile_bundle(name: &str, kind: u8, link: &str) -> Vec<u8> {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(tar::EntryType::new(kind));
    header.set_mode(0o644);
    header.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
    header.as_old_mut().linkname[..link.len()].copy_from_slice(link.as_bytes());
    let contents: &[u8] = if kind == b'0' { b"pwned" } else { b"" };
    header.set_size(contents.len() as u64);
    header.set_cksum();
    let mut builder = tar::Builder::new(Vec::new());
    builder.append(&header, contents).unwrap();
    gzip(&builder.into_inner().unwrap())
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(data).unwrap();
    gz.finish().unwrap()
}

/// Makes a fifo at `path` (nobody ever writes to it).
pub(crate) fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
}

/// Runs `stage serve ARGS` on `store`, which must exit (not start) within `within`:
/// its exit code and stderr. Killed and failed when it hangs.
pub(crate) fn serve_must_exit(store: &Path, args: &[&str], within: Duration) -> (i32, String) {
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut cmd = Command::new(BIN);
    cmd.args(["stage", "serve", "--listen", "127.0.0.1:0", "--store"])
        .arg(store)
        .args(args);
    for (name, _) in std::env::vars() {
        if name.starts_with("SPARK_LOCALIZER_")
            || name == "RUST_LOG"
            || name.starts_with("KUBERNETES_SERVICE_")
        {
            cmd.env_remove(&name);
        }
    }
    // Uploads from anyone unless a test says otherwise (its flag wins).
    cmd.env("SPARK_LOCALIZER_STAGE_UPLOAD_AUTH", "none");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log.reopen().unwrap())
        .spawn()
        .expect("spawn spark-localizer stage serve");
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > within {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "stage serve {args:?} still running after {within:?}\n{}",
                std::fs::read_to_string(log.path()).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stderr = std::fs::read_to_string(log.path()).unwrap();
    (status.code().unwrap_or(-1), stderr)
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

#[test]
fn v0_round_trip_range_head_delete_metrics() {
    let store = tempfile::tempdir().unwrap();
    let stage = Stage::start(store.path(), &[]);
    let ping = stage.get("/api/v0/ping", &[]);
    assert_eq!((ping.status, ping.body.as_slice()), (200, &b"pong"[..]));
    assert_eq!(stage.get("/healthz", &[]).body, b"ok");

    let payload = bundle(&[
        ("app.jar", &data(1, 300_000)),
        ("conf.properties", b"a=b\n"),
    ]);
    let (id, secret) = stage.stage(&payload);
    assert_eq!(id.len(), 32, "{id}");
    assert!(secret.len() >= 43, "a 256-bit secret: {secret}");
    // Parts in the other order, and the original clients' owner fields.
    let (content_type, body) = multipart(&[
        ("resourcesOwner", "text/plain", ORIGINAL_OWNER.as_bytes()),
        ("resources", "application/octet-stream", &payload),
    ]);
    let other = stage.send(
        "POST",
        "/api/v0/resources/",
        &[("Content-Type", &content_type)],
        &body,
    );
    assert_eq!(other.status, 201, "{other:?}");
    assert_ne!(other.json()["resourceId"].as_str().unwrap(), id);

    let path = format!("/api/v0/resources/{id}");
    let got = stage.get(&path, &[("Authorization", &secret)]);
    assert_eq!(got.status, 200);
    assert!(got.body == payload, "bundle differs");
    let sha = sha256_hex(&payload);
    assert_eq!(got.header("X-Resource-Sha256"), Some(sha.as_str()));
    assert_eq!(got.header("ETag"), Some(format!("\"{sha}\"").as_str()));
    assert_eq!(got.header("Content-Type"), Some("application/octet-stream"));

    let bearer = format!("Bearer {secret}");
    let part = stage.get(
        &path,
        &[("Authorization", &bearer), ("Range", "bytes=100-199")],
    );
    assert_eq!(part.status, 206);
    assert_eq!(part.body, payload[100..200]);
    let range = format!("bytes 100-199/{}", payload.len());
    assert_eq!(part.header("Content-Range"), Some(range.as_str()));
    let past = format!("bytes={}-", payload.len());
    let past = stage.get(&path, &[("Authorization", &secret), ("Range", &past)]);
    assert_eq!(past.status, 416);
    let star = format!("bytes */{}", payload.len());
    assert_eq!(past.header("Content-Range"), Some(star.as_str()));

    let head = stage.send("HEAD", &path, &[("Authorization", &secret)], &[]);
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
    assert_eq!(
        head.header("Content-Length"),
        Some(payload.len().to_string().as_str())
    );
    assert_eq!(head.header("X-Resource-Sha256"), Some(sha.as_str()));

    let wrong = stage.get(&path, &[("Authorization", "not-the-secret")]);
    assert_eq!(wrong.status, 401, "{wrong:?}");
    assert!(wrong.error().contains("secret"), "{wrong:?}");
    assert_eq!(stage.get(&path, &[]).status, 401);
    let unknown = stage.get(
        &format!("/api/v0/resources/{}", "0".repeat(32)),
        &[("Authorization", &secret)],
    );
    assert_eq!(unknown.status, 404);
    assert_eq!(
        stage
            .get(
                "/api/v0/resources/..%2f..%2fetc",
                &[("Authorization", &secret)]
            )
            .status,
        404
    );

    assert_eq!(
        stage
            .send("DELETE", &path, &[("Authorization", "nope")], &[])
            .status,
        401
    );
    assert_eq!(
        stage
            .send("DELETE", &path, &[("Authorization", &secret)], &[])
            .status,
        204
    );
    assert_eq!(stage.get(&path, &[("Authorization", &secret)]).status, 404);

    assert_eq!(stage.metric("uploads_total"), 2);
    assert_eq!(stage.metric("upload_bytes_total"), 2 * payload.len() as u64);
    assert_eq!(stage.metric("downloads_total"), 2);
    assert_eq!(
        stage.metric("download_bytes_total"),
        payload.len() as u64 + 100
    );
    assert_eq!(stage.metric("auth_failures_total"), 3);
    assert_eq!(stage.metric("bundles_stored"), 1);
    assert_eq!(stage.metric("expirations_total"), 0);

    let (code, stderr) = stage.stop();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!("path={path} status=200")),
        "{stderr}"
    );
    assert!(!stderr.contains(&secret), "the secret leaked:\n{stderr}");
    assert!(
        !stderr.contains("not-the-secret"),
        "a presented secret leaked:\n{stderr}"
    );
    // Only the hash is stored.
    let meta = std::fs::read_to_string(entries(&store.path().join("bundles"))[0].join("meta.json"))
        .unwrap();
    assert!(!meta.contains(other.json()["resourceSecret"].as_str().unwrap()));
}

#[test]
fn refusals_store_nothing() {
    let store = tempfile::tempdir().unwrap();
    let stage = Stage::start(store.path(), &["--max-upload-bytes", "65536"]);
    let big = gzip(&data(2, 400_000));

    // Declared larger than the limit plus the multipart slack: refused before the
    // body is read.
    let declared = stage.upload(&gzip(&data(2, 1_500_000)), false);
    assert_eq!(declared.status, 413, "{declared:?}");
    assert!(
        declared.error().contains("--max-upload-bytes"),
        "{declared:?}"
    );
    // Chunked, so only counting the bundle part finds it.
    let (content_type, body) = multipart(&[
        ("resourcesOwner", "application/json", OWNER.as_bytes()),
        ("resources", "application/octet-stream", &big),
    ]);
    let mut raw = format!(
        "POST /api/v0/resources HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: {content_type}\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    .into_bytes();
    for chunk in body.chunks(16 * 1024) {
        raw.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        raw.extend_from_slice(chunk);
        raw.extend_from_slice(b"\r\n");
    }
    raw.extend_from_slice(b"0\r\n\r\n");
    let chunked = exchange(TcpStream::connect(&stage.addr).unwrap(), &raw);
    assert_eq!(chunked.status, 413, "{chunked:?}");

    let not_gzip = stage.upload(b"PK\x03\x04 this is a zip, not a tar.gz", false);
    assert_eq!(not_gzip.status, 400);
    assert!(not_gzip.error().contains("not gzip"), "{not_gzip:?}");
    let not_tar = stage.upload(&gzip(&data(3, 5000)), false);
    assert_eq!(not_tar.status, 400, "{not_tar:?}");

    for (name, kind, link, needle) in [
        ("../escape", b'0', "", "climbs out"),
        ("/etc/cron.d/x", b'0', "", "absolute"),
        ("link", b'2', "../../etc/passwd", "outside"),
        ("abs-link", b'2', "/etc/passwd", "absolute"),
    ] {
        let reply = stage.upload(&hostile_bundle(name, kind, link), true);
        assert_eq!(reply.status, 400, "{name}: {reply:?}");
        assert!(reply.error().contains(needle), "{name}: {reply:?}");
    }

    let (content_type, body) = multipart(&[(
        "resources",
        "application/octet-stream",
        &bundle(&[("a", b"a")]),
    )]);
    let no_owner = stage.send(
        "POST",
        "/api/v0/resources",
        &[("Content-Type", &content_type)],
        &body,
    );
    assert_eq!(no_owner.status, 400);
    assert!(no_owner.error().contains("resourcesOwner"), "{no_owner:?}");
    let plain = stage.send(
        "POST",
        "/api/v0/resources",
        &[("Content-Type", "application/json")],
        b"{}",
    );
    assert_eq!(plain.status, 400);

    assert!(entries(&store.path().join("bundles")).is_empty());
    assert!(
        wait_for(Duration::from_secs(5), || entries(
            &store.path().join("tmp")
        )
        .is_empty()),
        "spooled uploads left: {:?}",
        entries(&store.path().join("tmp"))
    );
    assert_eq!(stage.metric("uploads_total"), 0);
    let (code, _) = stage.stop();
    assert_eq!(code, Some(0));
}

#[test]
fn sigkill_mid_upload_leaves_nothing_and_keeps_committed_bundles() {
    let store = tempfile::tempdir().unwrap();
    let stage = Stage::start(store.path(), &[]);
    let kept = bundle(&[("kept.jar", &data(4, 50_000))]);
    let (id, secret) = stage.stage(&kept);

    // A slow upload: the owner, then half of the bundle, then nothing.
    let slow = bundle(&[("big.jar", &data(5, 2_000_000))]);
    let (content_type, body) = multipart(&[
        ("resourcesOwner", "application/json", OWNER.as_bytes()),
        ("resources", "application/octet-stream", &slow),
    ]);
    let mut raw = request(
        "POST",
        "/api/v0/resources",
        &stage.addr,
        &[("Content-Type", &content_type)],
        &body,
    );
    raw.truncate(raw.len() - body.len() / 2);
    let mut conn = TcpStream::connect(&stage.addr).unwrap();
    conn.write_all(&raw).unwrap();
    let tmp = store.path().join("tmp");
    let spooling = wait_for(Duration::from_secs(10), || {
        entries(&tmp)
            .iter()
            .any(|p| std::fs::metadata(p).is_ok_and(|m| m.len() > 0))
    });
    assert!(spooling, "no upload spooled in {}", tmp.display());
    stage.kill();
    drop(conn);

    let stage = Stage::start(store.path(), &[]);
    assert!(entries(&tmp).is_empty(), "leftovers: {:?}", entries(&tmp));
    assert_eq!(entries(&store.path().join("bundles")).len(), 1);
    let got = stage.get(
        &format!("/api/v0/resources/{id}"),
        &[("Authorization", &secret)],
    );
    assert_eq!(got.status, 200);
    assert!(got.body == kept, "bundle differs after restart");
    assert_eq!(stage.metric("bundles_stored"), 1);
    let (code, stderr) = stage.stop();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("leftover upload"), "{stderr}");
}

#[test]
fn unused_bundles_expire() {
    let store = tempfile::tempdir().unwrap();
    // Set through the environment twin.
    let env = [("SPARK_LOCALIZER_STAGE_UNUSED_TTL", "2s")];
    let stage = Stage::start_with_env(store.path(), &[], &env);
    let payload = bundle(&[("a.txt", b"a")]);
    let (unused, unused_secret) = stage.stage(&payload);
    let (used, used_secret) = stage.stage(&payload);
    let used_path = format!("/api/v0/resources/{used}");
    assert_eq!(
        stage
            .get(&used_path, &[("Authorization", &used_secret)])
            .status,
        200
    );
    let expired = wait_for(Duration::from_secs(6), || {
        stage.metric("expirations_total") == 1
    });
    assert!(expired, "not expired:\n{}", stage.stderr_text());
    let gone = stage.get(
        &format!("/api/v0/resources/{unused}"),
        &[("Authorization", &unused_secret)],
    );
    assert_eq!(gone.status, 404);
    assert_eq!(
        stage
            .get(&used_path, &[("Authorization", &used_secret)])
            .status,
        200
    );
    assert_eq!(entries(&store.path().join("bundles")).len(), 1);
    assert_eq!(stage.metric("bundles_stored"), 1);
    let (_, stderr) = stage.stop();
    assert!(
        stderr.contains(&format!("bundle {unused} expired")),
        "{stderr}"
    );
}

#[test]
fn tls_from_pem_files() {
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = pki.write_leaf(dir.path());
    let store = dir.path().join("store");
    let stage = Stage::start(
        &store,
        &[
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
    );
    let mut roots = rustls::RootCertStore::empty();
    use rustls::pki_types::pem::PemObject;
    roots
        .add(rustls::pki_types::CertificateDer::from_pem_slice(pki.ca_pem.as_bytes()).unwrap())
        .unwrap();
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = Arc::new(
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    );
    let tls = |raw: &[u8]| {
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
        let conn = rustls::ClientConnection::new(config.clone(), name).unwrap();
        let tcp = TcpStream::connect(&stage.addr).unwrap();
        exchange(rustls::StreamOwned::new(conn, tcp), raw)
    };
    let payload = bundle(&[("secure.jar", &data(6, 10_000))]);
    let (content_type, body) = multipart(&[
        ("resources", "application/octet-stream", &payload),
        ("resourcesOwner", "application/json", OWNER.as_bytes()),
    ]);
    let up = tls(&request(
        "POST",
        "/api/v0/resources",
        "127.0.0.1",
        &[("Content-Type", &content_type)],
        &body,
    ));
    assert_eq!(up.status, 201, "{up:?}");
    let (id, secret) = (
        up.json()["resourceId"].as_str().unwrap().to_owned(),
        up.json()["resourceSecret"].as_str().unwrap().to_owned(),
    );
    let path = format!("/api/v0/resources/{id}");
    let got = tls(&request(
        "GET",
        &path,
        "127.0.0.1",
        &[("Authorization", &secret)],
        &[],
    ));
    assert_eq!(got.status, 200);
    assert!(got.body == payload);
    // Plain HTTP to the TLS port gets no HTTP answer.
    let mut plain = TcpStream::connect(&stage.addr).unwrap();
    plain
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    plain
        .write_all(&request("GET", "/healthz", "x", &[], &[]))
        .unwrap();
    let mut answer = Vec::new();
    let _ = plain.read_to_end(&mut answer);
    assert!(
        !answer.starts_with(b"HTTP/1.1 200"),
        "plain HTTP was served"
    );
    let (code, stderr) = stage.stop();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains(&secret));
}

#[test]
fn bad_tls_files_are_usage_errors_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let cert = dir.path().join("cert.pem");
    std::fs::write(&cert, "not a certificate\n").unwrap();
    let out = Command::new(BIN)
        .args(["stage", "serve", "--listen", "127.0.0.1:0", "--store"])
        .arg(dir.path().join("store"))
        .arg("--tls-cert")
        .arg(&cert)
        .arg("--tls-key")
        .arg(&cert)
        .env_remove("SPARK_LOCALIZER_LOG")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--tls-cert"), "{stderr}");
    let only_cert = Command::new(BIN)
        .args(["stage", "serve", "--tls-cert"])
        .arg(&cert)
        .output()
        .unwrap();
    assert_eq!(only_cert.status.code(), Some(2));
}

#[test]
fn fifo_tls_files_are_refused_at_once() {
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = pki.write_leaf(dir.path());
    let fifo = dir.path().join("fifo.pem");
    mkfifo(&fifo);
    let store = dir.path().join("store");
    for (cert, key, flag) in [(&fifo, &key, "--tls-cert"), (&cert, &fifo, "--tls-key")] {
        let args = [
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ];
        let (code, stderr) = serve_must_exit(&store, &args, Duration::from_secs(10));
        assert_eq!(code, 2, "{flag}: {stderr}");
        assert!(
            stderr.contains(&format!("{flag} {}", fifo.display()))
                && stderr.contains("not a regular file"),
            "{flag}: {stderr}"
        );
    }
}

/// A bundle of one repetitive 4 MiB CSV: it unpacks to over 300 times its size.
fn compressible_bundle() -> Vec<u8> {
    let csv = "id,name,value\n1,a,0\n".repeat((4 << 20) / 20);
    let mut builder = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(csv.len() as u64);
    header.set_mode(0o644);
    builder
        .append_data(&mut header, "data.csv", csv.as_bytes())
        .unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&builder.into_inner().unwrap()).unwrap();
    let bundle = gz.finish().unwrap();
    assert!(csv.len() > 300 * bundle.len(), "{}", bundle.len());
    bundle
}

#[test]
fn archive_limits_are_serve_flags() {
    let dir = tempfile::tempdir().unwrap();
    let payload = compressible_bundle();
    let stage = Stage::start(&dir.path().join("a"), &[]);
    let refused = stage.upload(&payload, false);
    assert_eq!(refused.status, 400, "{refused:?}");
    assert!(
        refused.error().contains("compression ratio")
            && refused.error().contains("--archive-max-ratio"),
        "{refused:?}"
    );
    drop(stage);

    let stage = Stage::start(&dir.path().join("b"), &["--archive-max-ratio", "5000"]);
    let (id, secret) = stage.stage(&payload);
    let got = stage.get(
        &format!("/api/v0/resources/{id}"),
        &[("Authorization", &secret)],
    );
    assert_eq!(got.status, 200);
    assert!(got.body == payload, "bundle differs");
    drop(stage);

    // The other two, through their environment twins.
    let env = [
        ("SPARK_LOCALIZER_STAGE_ARCHIVE_MAX_ENTRIES", "1"),
        ("SPARK_LOCALIZER_STAGE_ARCHIVE_MAX_BYTES", "1000"),
    ];
    let stage = Stage::start_with_env(&dir.path().join("c"), &[], &env);
    let two = stage.upload(&bundle(&[("a", b"a"), ("b", b"b")]), false);
    assert_eq!(two.status, 400, "{two:?}");
    assert!(two.error().contains("--archive-max-entries"), "{two:?}");
    let big = stage.upload(&bundle(&[("a", &data(7, 2000))]), false);
    assert_eq!(big.status, 400, "{big:?}");
    assert!(big.error().contains("--archive-max-bytes"), "{big:?}");
    assert_eq!(stage.metric("uploads_total"), 0);
}

#[test]
fn owner_types_other_than_pod_are_stored_as_given() {
    let store = tempfile::tempdir().unwrap();
    let stage = Stage::start(store.path(), &[]);
    let payload = bundle(&[("a.txt", b"a")]);
    let post = |owner: &str| {
        let (content_type, body) = multipart(&[
            ("resources", "application/octet-stream", &payload),
            ("resourcesOwner", "application/json", owner.as_bytes()),
        ]);
        stage.send(
            "POST",
            "/api/v0/resources",
            &[("Content-Type", &content_type)],
            &body,
        )
    };
    for owner_type in ["Deployment", "pod"] {
        let owner =
            format!(r#"{{"namespace":"spark","labels":{{"app":"x"}},"ownerType":"{owner_type}"}}"#);
        let reply = post(&owner);
        assert_eq!(reply.status, 201, "{owner_type}: {reply:?}");
        let id = reply.json()["resourceId"].as_str().unwrap().to_owned();
        let meta =
            std::fs::read_to_string(store.path().join("bundles").join(&id).join("meta.json"))
                .unwrap();
        let meta: serde_json::Value = serde_json::from_str(&meta).unwrap();
        assert_eq!(meta["owner"]["ownerType"], owner_type, "{meta}");
    }
    let empty = post(r#"{"namespace":"spark","labels":{"app":"x"},"ownerType":""}"#);
    assert_eq!(empty.status, 400, "{empty:?}");
    assert!(empty.error().contains("empty ownerType"), "{empty:?}");
}

#[test]
fn a_secret_in_place_of_an_id_is_not_logged() {
    let store = tempfile::tempdir().unwrap();
    let stage = Stage::start(store.path(), &[]);
    let (id, secret) = stage.stage(&bundle(&[("a.txt", b"a")]));
    // Id and secret swapped.
    let swapped = stage.get(
        &format!("/api/v0/resources/{secret}"),
        &[("Authorization", &id)],
    );
    assert_eq!(swapped.status, 404, "{swapped:?}");
    let deeper = stage.send(
        "DELETE",
        &format!("/api/v0/resources/{id}/{secret}"),
        &[],
        &[],
    );
    assert_eq!(deeper.status, 404, "{deeper:?}");
    let (code, stderr) = stage.stop();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains(&secret), "the secret leaked:\n{stderr}");
    assert!(
        stderr.contains("path=/api/v0/resources/<not an id> status=404"),
        "{stderr}"
    );
}

/// Issue 15, defect 5: a bundle that `fetch` would always refuse (anything but
/// regular files at its top level, a name reserved for fetch's outputs or its own
/// files) is refused at upload with the reason, so the submitter hears it, not
/// the pod. Before, every one of these was stored (201).
#[test]
fn bundles_fetch_would_refuse_are_refused_at_upload() {
    let store = tempfile::tempdir().unwrap();
    let stage = Stage::start(store.path(), &[]);
    for (name, kind, link, needle) in [
        ("lib/a.jar", b'0', "", "is inside a directory"),
        ("lib/", b'5', "", "is a directory"),
        ("a.jar", b'2', "b.jar", "is a symlink"),
        ("classpath", b'0', "", "name of an output of fetch"),
        (
            "spark-classpath.env",
            b'0',
            "",
            "name of an output of fetch",
        ),
        (".spark-localizer.x", b'0', "", "reserved"),
    ] {
        let reply = stage.upload(&hostile_bundle(name, kind, link), false);
        assert_eq!(reply.status, 400, "{name}: {reply:?}");
        let error = reply.error();
        assert!(
            error.contains(needle)
                && error.contains(&format!("entry '{}'", name.trim_end_matches('/'))),
            "{name}: {reply:?}"
        );
        assert!(error.contains("top level only"), "{name}: {reply:?}");
    }
    // A hard link to a file of the bundle (fetch publishes regular files only).
    let mut builder = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(3);
    header.set_mode(0o644);
    builder
        .append_data(&mut header, "a.jar", &b"abc"[..])
        .unwrap();
    let mut link = tar::Header::new_gnu();
    link.set_entry_type(tar::EntryType::Link);
    link.set_size(0);
    link.set_mode(0o644);
    builder.append_link(&mut link, "h.jar", "a.jar").unwrap();
    let reply = stage.upload(&gzip(&builder.into_inner().unwrap()), false);
    assert_eq!(reply.status, 400, "{reply:?}");
    assert!(
        reply.error().contains("entry 'h.jar' is a hard link"),
        "{reply:?}"
    );
    assert!(entries(&store.path().join("bundles")).is_empty());
    assert_eq!(stage.metric("uploads_total"), 0);
    // A flat bundle, its entries named "./x" as `tar -C dir .` writes them, is fine.
    let mut builder = tar::Builder::new(Vec::new());
    for name in ["./a.jar", "./notes.txt"] {
        let mut header = tar::Header::new_gnu();
        header.set_size(3);
        header.set_mode(0o644);
        builder.append_data(&mut header, name, &b"abc"[..]).unwrap();
    }
    stage.stage(&gzip(&builder.into_inner().unwrap()));
    assert_eq!(stage.metric("uploads_total"), 1);
}

/// Issue 15, defect 5: an upload whose body stops coming is answered 408 (not
/// 400) after --upload-idle-timeout, naming the flag; nothing is stored.
#[test]
fn a_stalled_upload_body_is_answered_408() {
    let store = tempfile::tempdir().unwrap();
    let stage = Stage::start(store.path(), &["--upload-idle-timeout", "1s"]);
    let (content_type, body) = multipart(&[
        ("resourcesOwner", "application/json", OWNER.as_bytes()),
        (
            "resources",
            "application/octet-stream",
            &bundle(&[("a.jar", b"a")]),
        ),
    ]);
    // The whole length is announced; half the body is sent, then nothing.
    let mut raw = request(
        "POST",
        "/api/v0/resources",
        &stage.addr,
        &[("Content-Type", &content_type)],
        &body,
    );
    raw.truncate(raw.len() - body.len() / 2);
    let started = std::time::Instant::now();
    let mut stream = TcpStream::connect(&stage.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream.write_all(&raw).unwrap();
    let mut all = Vec::new();
    let _ = stream.read_to_end(&mut all);
    let reply = parse_reply(&all);
    assert_eq!(reply.status, 408, "{reply:?}");
    assert!(reply.error().contains("--upload-idle-timeout"), "{reply:?}");
    assert!(started.elapsed() < Duration::from_secs(10), "{reply:?}");
    assert!(entries(&store.path().join("bundles")).is_empty());
}
