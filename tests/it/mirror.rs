//! `mirror serve` and `fetch --mirror`: real fetch processes through a real
//! mirror against nginx (origin requests counted in its access log) and the
//! misbehaving server: coalescing, revalidation, pinned hits, eviction, restart,
//! a damaged blob, a mirror killed mid-transfer, refused origins and redirects,
//! and credentials that bypass the mirror.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::nginx::Nginx;
use crate::support::seaweed::Seaweed;
use crate::support::server::{Fault, FaultServer};
use crate::support::{data, sha256_hex, wait_for, Listening, Sandbox, BIN};

/// The header the mirror announces a blob's sha256 in.
const SHA_HEADER: &str = "x-spark-localizer-sha256";

/// A `mirror serve` subprocess on 127.0.0.1 with its stderr collected.
struct Mirror {
    child: Child,
    addr: String,
    dir: PathBuf,
    stderr: Arc<Mutex<Vec<u8>>>,
}

impl Mirror {
    fn start(dir: &Path, args: &[&str]) -> Mirror {
        Mirror::start_with_env(dir, args, &[])
    }

    fn start_with_env(dir: &Path, args: &[&str], env: &[(&str, String)]) -> Mirror {
        let mut cmd = Command::new(BIN);
        cmd.args(["mirror", "serve", "--listen", "127.0.0.1:0", "--dir"])
            .arg(dir)
            .args(["--retry-delay", "10ms"])
            .args(args);
        for (name, _) in std::env::vars() {
            if name.starts_with("SPARK_LOCALIZER_")
                || name.starts_with("AWS_")
                || name == "RUST_LOG"
            {
                cmd.env_remove(&name);
            }
        }
        cmd.envs(env.iter().map(|(k, v)| (k, v)));
        let server = Listening::spawn(cmd);
        Mirror {
            child: server.child,
            addr: server.addr,
            dir: dir.to_owned(),
            stderr: server.stderr,
        }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    /// (status, body as text) of a plain HTTP/1.1 request.
    fn request(&self, method: &str, path_and_query: &str) -> (u16, String) {
        let (status, body) = self.request_bytes(method, path_and_query);
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    /// (status, body bytes) of a plain HTTP/1.1 request.
    fn request_bytes(&self, method: &str, path_and_query: &str) -> (u16, Vec<u8>) {
        request_bytes(&self.addr, method, path_and_query)
    }

    /// The `/metrics` counters, by name without the common prefix.
    fn metrics(&self) -> HashMap<String, u64> {
        metrics_of(&self.addr)
    }

    /// Waits until no transfer is in progress: every blob the answers so far
    /// came from is published (a publish ends after the client's last byte).
    fn settled(&self) {
        assert!(
            wait_for(Duration::from_secs(30), || self.metrics()["transfers"] == 0),
            "transfers still in progress: {:?}",
            self.metrics()
        );
    }

    fn blobs(&self) -> Vec<PathBuf> {
        std::fs::read_dir(self.dir.join("blobs"))
            .map(|d| d.map(|e| e.unwrap().path()).collect())
            .unwrap_or_default()
    }

    fn kill(&mut self, signal: &str) {
        let _ = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

impl Drop for Mirror {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Origin GETs of `path` answered 200, per nginx's access log.
fn origin_gets(nginx: &Nginx, path: &str) -> usize {
    let prefix = format!("GET /{path} ");
    nginx
        .access_log()
        .iter()
        .filter(|l| l.starts_with(&prefix) && l.ends_with(" 200"))
        .count()
}

/// A directory of jars served by nginx: (root, nginx, bodies by name).
fn origin(jars: &[(&str, usize)]) -> Option<(tempfile::TempDir, Nginx, HashMap<String, Vec<u8>>)> {
    let root = tempfile::tempdir().unwrap();
    let mut bodies = HashMap::new();
    for (i, (name, len)) in jars.iter().enumerate() {
        let body = data(700 + i as u64, *len);
        std::fs::write(root.path().join(name), &body).unwrap();
        bodies.insert(name.to_string(), body);
    }
    let nginx = Nginx::start(root.path())?;
    Some((root, nginx, bodies))
}

fn report_mirror(sb: &Sandbox, name: &str) -> String {
    sb.artifact(name)["mirror"]
        .as_str()
        .unwrap_or("none")
        .to_owned()
}

#[test]
fn twenty_pods_at_once_cost_the_origin_one_get_per_jar() {
    let Some((_root, nginx, bodies)) =
        origin(&[("big.jar", 24 << 20), ("a.jar", 300_000), ("b.jar", 5_000)])
    else {
        return;
    };
    let store = tempfile::tempdir().unwrap();
    let mirror = Mirror::start(store.path(), &["--allow-origin", &nginx.url("/")]);
    let jars = ["big.jar", "a.jar", "b.jar"]
        .map(|n| nginx.url(n))
        .join(",");
    let pods: Vec<Sandbox> = (0..20).map(|_| Sandbox::new()).collect();
    let running: Vec<_> = pods
        .iter()
        .map(|sb| {
            sb.fetch()
                .args(["--jars", &jars, "--mirror", &mirror.url()])
                .start()
        })
        .collect();
    for (sb, run) in pods.iter().zip(running) {
        run.finish().expect_code(0);
        for (name, body) in &bodies {
            assert_eq!(&std::fs::read(sb.jar(name)).unwrap(), body, "{name}");
            assert_eq!(report_mirror(sb, name), "served", "{name}");
        }
    }
    for name in bodies.keys() {
        assert_eq!(
            origin_gets(&nginx, name),
            1,
            "{name}: {:?}",
            nginx.access_log()
        );
    }
    let m = mirror.metrics();
    assert_eq!(m["misses_total"], 3, "{m:?}");
    assert_eq!(
        m["coalesced_total"] + m["revalidated_total"] + m["misses_total"],
        60,
        "every request joined a transfer or revalidated: {m:?}"
    );
    assert!(m["coalesced_total"] >= 1, "{m:?}");
    let unique: u64 = bodies.values().map(|b| b.len() as u64).sum();
    assert_eq!(m["origin_bytes_total"], unique, "{m:?}");
    assert_eq!(m["served_bytes_total"], 20 * unique, "{m:?}");
}

#[test]
fn revalidation_costs_the_origin_headers_and_a_pin_not_even_that() {
    let Some((root, nginx, bodies)) = origin(&[("a.jar", 200_000)]) else {
        return;
    };
    let store = tempfile::tempdir().unwrap();
    let mirror = Mirror::start(store.path(), &["--allow-origin", &nginx.url("/")]);
    let uri = nginx.url("a.jar");
    let fetch = |extra: &[&str]| {
        let sb = Sandbox::new();
        sb.fetch()
            .args(["--jars", &uri, "--mirror", &mirror.url()])
            .args(extra)
            .run()
            .expect_code(0);
        sb
    };
    fetch(&[]);
    mirror.settled();
    assert_eq!(origin_gets(&nginx, "a.jar"), 1);
    // Unpinned: a conditional HEAD, answered 304; no body leaves the origin.
    let sb = fetch(&[]);
    assert_eq!(std::fs::read(sb.jar("a.jar")).unwrap(), bodies["a.jar"]);
    assert_eq!(origin_gets(&nginx, "a.jar"), 1, "{:?}", nginx.access_log());
    assert!(
        nginx
            .access_log()
            .iter()
            .any(|l| l.starts_with("HEAD /a.jar ") && l.ends_with(" 304")),
        "{:?}",
        nginx.access_log()
    );
    assert_eq!(mirror.metrics()["revalidated_total"], 1);
    // Pinned: served by digest, the origin is not asked at all.
    let before = nginx.access_log().len();
    let pins = format!("{}  {uri}\n", sha256_hex(&bodies["a.jar"]));
    let pinned = Sandbox::new();
    let pins_file = pinned.write("pins", pins);
    pinned
        .fetch()
        .args(["--jars", &uri, "--mirror", &mirror.url(), "--checksums"])
        .arg(&pins_file)
        .run()
        .expect_code(0);
    assert_eq!(report_mirror(&pinned, "a.jar"), "served");
    assert_eq!(nginx.access_log().len(), before, "{:?}", nginx.access_log());
    assert_eq!(mirror.metrics()["hits_total"], 1);
    // Changed at the origin (nginx's ETag holds the size): the conditional
    // request says so, the new bytes come.
    let changed = data(9, 210_000);
    std::fs::write(root.path().join("a.jar"), &changed).unwrap();
    let sb = fetch(&[]);
    assert_eq!(std::fs::read(sb.jar("a.jar")).unwrap(), changed);
    assert_eq!(origin_gets(&nginx, "a.jar"), 2, "{:?}", nginx.access_log());
}

#[test]
fn the_store_stays_under_max_bytes_and_survives_a_restart() {
    let Some((_root, nginx, bodies)) =
        origin(&[("a.jar", 400_000), ("b.jar", 400_000), ("c.jar", 400_000)])
    else {
        return;
    };
    let store = tempfile::tempdir().unwrap();
    let args = ["--allow-origin", &nginx.url("/"), "--max-bytes", "1000000"];
    let mut mirror = Mirror::start(store.path(), &args);
    let mut pins = String::new();
    for name in ["a.jar", "b.jar", "c.jar"] {
        let sb = Sandbox::new();
        sb.fetch()
            .args(["--jars", &nginx.url(name), "--mirror", &mirror.url()])
            .run()
            .expect_code(0);
        // Published before the next one (the order of last use decides eviction).
        mirror.settled();
        assert_eq!(std::fs::read(sb.jar(name)).unwrap(), bodies[name]);
        pins.push_str(&format!(
            "{}  {}\n",
            sha256_hex(&bodies[name]),
            nginx.url(name)
        ));
    }
    // Two blobs fit: the least recently used (a) went.
    let m = mirror.metrics();
    assert_eq!((m["blobs"], m["stored_bytes"]), (2, 800_000), "{m:?}");
    assert_eq!(mirror.blobs().len(), 2);
    for blob in mirror.blobs() {
        let mode = std::fs::metadata(&blob).unwrap().permissions().mode();
        assert_eq!(mode & 0o222, 0, "{} is writable", blob.display());
    }
    mirror.kill("TERM");
    let mirror = Mirror::start(store.path(), &args);
    let before = nginx.access_log().len();
    let sb = Sandbox::new();
    let pins_file = sb.write("pins", &pins);
    let jars = ["b.jar", "c.jar"].map(|n| nginx.url(n)).join(",");
    sb.fetch()
        .args(["--jars", &jars, "--mirror", &mirror.url(), "--checksums"])
        .arg(&pins_file)
        .run()
        .expect_code(0);
    assert_eq!(
        nginx.access_log().len(),
        before,
        "held blobs survive a restart"
    );
    assert_eq!(mirror.metrics()["hits_total"], 2);
}

#[test]
fn a_damaged_blob_is_caught_by_the_client_which_falls_back_and_the_mirror_drops_it() {
    let Some((_root, nginx, bodies)) = origin(&[("a.jar", 300_000)]) else {
        return;
    };
    let store = tempfile::tempdir().unwrap();
    let mirror = Mirror::start(store.path(), &["--allow-origin", &nginx.url("/")]);
    let uri = nginx.url("a.jar");
    Sandbox::new()
        .fetch()
        .args(["--jars", &uri, "--mirror", &mirror.url()])
        .run()
        .expect_code(0);
    mirror.settled();
    let [blob] = mirror.blobs().try_into().unwrap();
    std::fs::set_permissions(&blob, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut damaged = bodies["a.jar"].clone();
    damaged[1234] ^= 0xff;
    std::fs::write(&blob, &damaged).unwrap();
    let sb = Sandbox::new();
    let pins = sb.write("pins", format!("{}  {uri}\n", sha256_hex(&bodies["a.jar"])));
    let out = sb
        .fetch()
        .args(["--jars", &uri, "--mirror", &mirror.url(), "--checksums"])
        .arg(&pins)
        .run();
    out.expect_code(0).expect_stderr("fetching from its origin");
    assert_eq!(std::fs::read(sb.jar("a.jar")).unwrap(), bodies["a.jar"]);
    assert_eq!(report_mirror(&sb, "a.jar"), "fallback");
    assert!(sb.artifact("a.jar")["mirror_error"]
        .as_str()
        .unwrap()
        .contains("sha256"));
    assert!(
        wait_for(Duration::from_secs(5), || !blob.exists()),
        "the mirror dropped it"
    );
    assert_eq!(mirror.metrics()["corrupt_blobs_total"], 1);
    // Unpinned, the mirror's announced digest catches it too; the next fill is whole.
    let sb = Sandbox::new();
    sb.fetch()
        .args(["--jars", &uri, "--mirror", &mirror.url()])
        .run()
        .expect_code(0);
    assert_eq!(std::fs::read(sb.jar("a.jar")).unwrap(), bodies["a.jar"]);
    assert_eq!(report_mirror(&sb, "a.jar"), "served");
}

#[test]
fn a_mirror_killed_mid_transfer_sends_every_client_to_the_origin() {
    let origin = FaultServer::start();
    let body = data(41, 3 << 20);
    origin.put("/slow.jar", body.clone());
    origin.put("/quick.jar", data(42, 10_000));
    // The mirror's transfer sends 1 MiB, then holds.
    origin.on("/slow.jar", 1, Fault::Hold(1 << 20));
    let store = tempfile::tempdir().unwrap();
    let mut mirror = Mirror::start(store.path(), &["--allow-origin", &origin.url("/")]);
    let jars = format!("{},{}", origin.url("/slow.jar"), origin.url("/quick.jar"));
    let pods: Vec<Sandbox> = (0..3).map(|_| Sandbox::new()).collect();
    let running: Vec<_> = pods
        .iter()
        .map(|sb| {
            sb.fetch()
                .args([
                    "--jars",
                    &jars,
                    "--mirror",
                    &mirror.url(),
                    "--parallelism",
                    "1",
                ])
                .start()
        })
        .collect();
    assert!(
        wait_for(Duration::from_secs(10), || mirror.metrics()
            ["served_bytes_total"]
            >= 3 << 19),
        "the clients are receiving from the mirror"
    );
    mirror.kill("KILL");
    for (sb, run) in pods.iter().zip(running) {
        let out = run.finish();
        out.expect_code(0).expect_stderr("unavailable");
        assert_eq!(std::fs::read(sb.jar("slow.jar")).unwrap(), body);
        assert_eq!(report_mirror(sb, "slow.jar"), "fallback");
    }
    origin.release();
}

#[test]
fn origins_not_allowed_and_redirects_into_the_node_are_refused() {
    let Some((_root, nginx, bodies)) = origin(&[("a.jar", 50_000)]) else {
        return;
    };
    let other = FaultServer::start();
    other.put("/b.jar", data(5, 20_000));
    other.always(
        "/meta",
        Fault::Redirect(302, "http://169.254.169.254/latest/meta-data/".into()),
    );
    other.always(
        "/private",
        Fault::Redirect(302, "http://10.11.12.13/x.jar".into()),
    );
    let store = tempfile::tempdir().unwrap();
    let mirror = Mirror::start(
        store.path(),
        &[
            "--allow-origin",
            &nginx.url("/"),
            "--allow-origin",
            &other.url("/meta"),
            "--allow-origin",
            &other.url("/private"),
        ],
    );
    // An origin not listed: refused, the client fetches it directly.
    let sb = Sandbox::new();
    let jars = format!("{},{}", nginx.url("a.jar"), other.url("/b.jar"));
    sb.fetch()
        .args(["--jars", &jars, "--mirror", &mirror.url()])
        .run()
        .expect_code(0);
    assert_eq!(std::fs::read(sb.jar("a.jar")).unwrap(), bodies["a.jar"]);
    assert_eq!(report_mirror(&sb, "a.jar"), "served");
    assert_eq!(report_mirror(&sb, "b.jar"), "fallback");
    let why = sb.artifact("b.jar")["mirror_error"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        why.contains("403") && why.contains("--allow-origin"),
        "{why}"
    );
    // No open proxy, no metadata service, no other scheme.
    for target in [
        "http://169.254.169.254/latest/meta-data/",
        "file:///etc/passwd",
        "http://127.0.0.1:1/x",
    ] {
        let q = format!("/v1/fetch?uri={}", urlencode(target));
        assert_eq!(mirror.request("GET", &q).0, 403, "{target}");
    }
    // An allowed origin redirecting into the node's link-local or private ranges.
    for path in ["/meta", "/private"] {
        let q = format!("/v1/fetch?uri={}", urlencode(&other.url(path)));
        let (status, text) = mirror.request("GET", &q);
        assert_eq!(status, 502, "{path}: {text}");
        assert!(text.contains("refused"), "{path}: {text}");
    }
    assert!(mirror.metrics()["refused_total"] >= 3);
}

#[test]
fn credentials_never_go_through_the_mirror() {
    let origin = FaultServer::start();
    origin.put("/a.jar", data(3, 40_000));
    origin.put("/b.jar", data(4, 40_000));
    let store = tempfile::tempdir().unwrap();
    let mirror = Mirror::start(store.path(), &["--allow-origin", &origin.url("/")]);
    let with_password = origin
        .url("/a.jar")
        .replace("http://", "http://user:s3cr3t-pw@");
    let sb = Sandbox::new();
    sb.fetch()
        .args(["--jars", &with_password, "--mirror", &mirror.url()])
        .run()
        .expect_code(0);
    assert_eq!(report_mirror(&sb, "a.jar"), "none");
    // A header file (a token for the origin) makes every HTTP artifact credentialed.
    let sb = Sandbox::new();
    let headers = sb.write("headers", "Authorization: Bearer t0ken-value\n");
    sb.fetch()
        .args([
            "--jars",
            &origin.url("/b.jar"),
            "--mirror",
            &mirror.url(),
            "--http-header-file",
        ])
        .arg(&headers)
        .run()
        .expect_code(0);
    assert_eq!(report_mirror(&sb, "b.jar"), "none");
    let m = mirror.metrics();
    assert_eq!(
        m["misses_total"] + m["refused_total"] + m["served_bytes_total"],
        0,
        "{m:?}"
    );
    for request in origin.requests() {
        let agent = request.header("user-agent").unwrap_or_default().to_owned();
        assert!(
            request.header("authorization").is_some(),
            "{agent}: the client itself fetched it"
        );
    }
    let logs = mirror.stderr_text();
    assert!(
        !logs.contains("s3cr3t-pw") && !logs.contains("t0ken-value"),
        "{logs}"
    );
    // A client asking the mirror with credentials in the URI is refused outright.
    let q = format!("/v1/fetch?uri={}", urlencode(&with_password));
    assert_eq!(mirror.request("GET", &q).0, 400);
}

#[test]
fn mirror_serve_refuses_flags_that_cannot_work() {
    let store = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        Command::new(BIN)
            .args(["mirror", "serve", "--listen", "127.0.0.1:0", "--dir"])
            .arg(store.path())
            .args(args)
            .env_remove("SPARK_LOCALIZER_MIRROR_ALLOW_ORIGINS")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let out = run(&[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--allow-origin"));
    let out = run(&[
        "--allow-origin",
        "ftp://x/",
        "--allow-origin",
        "https://u:p@repo/",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("scheme 'ftp'") && text.contains("credentials"),
        "{text}"
    );
    assert!(!text.contains("u:p@"), "{text}");
    // A store that cannot be created is a local I/O problem.
    let out = Command::new(BIN)
        .args([
            "mirror",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--dir",
            "/proc/self/no-such-store",
            "--allow-origin",
            "http://127.0.0.1:1/",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(6),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("--dir /proc/self/no-such-store"));
    // A --mirror that is not an http(s) URL is a usage error of fetch.
    let sb = Sandbox::new();
    sb.fetch()
        .args(["--jars", "http://127.0.0.1:1/a.jar", "--mirror", "s3://x"])
        .run()
        .expect_code(2);
}

/// Percent-encodes a query value.
fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[test]
fn check_says_whether_the_mirror_answers_and_what_would_go_through_it() {
    let origin = FaultServer::start();
    origin.put("/a.jar", data(6, 1000));
    let store = tempfile::tempdir().unwrap();
    let mirror = Mirror::start(store.path(), &["--allow-origin", &origin.url("/")]);
    let jars = format!(
        "{},{}",
        origin.url("/a.jar"),
        origin
            .url("/a.jar")
            .replace("http://", "http://u:pw@")
            .replace("a.jar", "a.jar#b.jar")
    );
    let sb = Sandbox::new();
    let out = sb
        .check()
        .args(["--jars", &jars, "--mirror", &mirror.url()])
        .run();
    out.expect_code(0);
    let text = out.stdout.clone();
    assert!(
        text.contains(&format!("mirror {}/: healthy", mirror.url())),
        "{text}"
    );
    assert!(text.contains("a.jar: asked of the mirror first"), "{text}");
    assert!(
        text.contains("b.jar: from its origin (fetched with credentials"),
        "{text}"
    );
    let out = sb
        .check()
        .args([
            "--jars",
            &origin.url("/a.jar"),
            "--mirror",
            &crate::support::server::refused_url("/"),
            "--mirror-timeout",
            "2s",
        ])
        .run();
    out.expect_code(0);
    assert!(out.stdout.contains("UNREACHABLE"), "{}", out.stdout);
}

#[test]
fn encoded_dots_slashes_and_redirects_cannot_leave_an_allowed_prefix() {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("repo")).unwrap();
    std::fs::write(root.path().join("repo/a.jar"), data(1, 1000)).unwrap();
    std::fs::write(root.path().join("secret.txt"), "SECRET").unwrap();
    let Some(nginx) = Nginx::start(root.path()) else {
        return;
    };
    let redirector = FaultServer::start();
    redirector.always(
        "/r/other-path",
        Fault::Redirect(302, nginx.url("secret.txt")),
    );
    let other_port = FaultServer::start();
    other_port.put("/internal", "INTERNAL");
    redirector.always(
        "/r/other-port",
        Fault::Redirect(302, other_port.url("/internal")),
    );
    redirector.always(
        "/r/credentials",
        Fault::Redirect(
            302,
            nginx.url("repo/a.jar").replace("http://", "http://u:pw@"),
        ),
    );
    let store = tempfile::tempdir().unwrap();
    let mirror = Mirror::start(
        store.path(),
        &[
            "--allow-origin",
            &nginx.url("repo/"),
            "--allow-origin",
            &redirector.url("/r/"),
        ],
    );
    let get = |uri: &str| mirror.request("GET", &format!("/v1/fetch?uri={}", urlencode(uri)));
    assert_eq!(get(&nginx.url("repo/a.jar")).0, 200);
    // A prefix ending in `/` allows what lies under it, nothing beside it.
    for beside in ["repo", "repository/a.jar", "repo.jar"] {
        assert_eq!(get(&nginx.url(beside)).0, 403, "{beside}");
    }
    for sneaky in [
        "repo/..%2fsecret.txt",
        "repo/..%252fsecret.txt",
        "repo/.%2e%2fsecret.txt",
        "repo/%2e./secret.txt",
        "repo/x/..%2f..%2fsecret.txt",
        "repo/..%5csecret.txt",
        "repo/..;/secret.txt",
    ] {
        let (status, body) = get(&nginx.url(sneaky));
        assert_eq!(status, 403, "{sneaky}: {body}");
        assert!(!body.contains("SECRET"), "{sneaky}");
    }
    // A listed host (127.0.0.1) is trusted for its listed ports and paths only.
    for path in ["/r/other-path", "/r/other-port", "/r/credentials"] {
        let (status, body) = get(&redirector.url(path));
        assert_eq!(status, 502, "{path}: {body}");
        assert!(
            !body.contains("SECRET") && !body.contains("INTERNAL"),
            "{path}: {body}"
        );
    }
    assert!(
        origin_gets(&nginx, "secret.txt") == 0,
        "{:?}",
        nginx.access_log()
    );
}

#[test]
fn a_stale_pin_is_cut_alone_and_costs_the_origin_nothing_more() {
    let Some((_root, nginx, bodies)) = origin(&[("a.jar", 100_000)]) else {
        return;
    };
    let store = tempfile::tempdir().unwrap();
    let mirror = Mirror::start(store.path(), &["--allow-origin", &nginx.url("/")]);
    let uri = urlencode(&nginx.url("a.jar"));
    let stale = "0".repeat(64);
    let whole = &bodies["a.jar"];
    let holds = |body: &[u8], part: &[u8]| body.windows(part.len()).any(|w| w == part);
    // Refused (502) when decided within a second, else answered early and cut
    // short: either way the last bytes never reach the stale requester.
    let tail = &whole[whole.len() - 1000..];
    let (status, body) =
        mirror.request_bytes("GET", &format!("/v1/fetch?uri={uri}&sha256={stale}"));
    assert!(status == 502 || !holds(&body, tail), "{status}");
    // The bytes were kept under their own digest: unpinned and rightly pinned
    // requests get them without another transfer, and the stale pin again costs
    // the origin a conditional request, not a body.
    let (status, body) = mirror.request_bytes("GET", &format!("/v1/fetch?uri={uri}"));
    assert!(status == 200 && holds(&body, whole), "{status}");
    let right = sha256_hex(whole);
    let (status, body) =
        mirror.request_bytes("GET", &format!("/v1/fetch?uri={uri}&sha256={right}"));
    assert!(status == 200 && holds(&body, whole), "{status}");
    let (status, body) =
        mirror.request_bytes("GET", &format!("/v1/fetch?uri={uri}&sha256={stale}"));
    assert!(status == 502 || !holds(&body, tail), "{status}");
    assert_eq!(origin_gets(&nginx, "a.jar"), 1, "{:?}", nginx.access_log());
}

#[test]
fn a_mirror_that_lies_or_hangs_mid_body_costs_one_stall_and_never_a_wrong_byte() {
    let origin = FaultServer::start();
    let bodies: Vec<Vec<u8>> = (0..6).map(|i| data(80 + i, 50_000)).collect();
    for (i, body) in bodies.iter().enumerate() {
        origin.put(&format!("/j{i}.jar"), body.clone());
    }
    let jars: Vec<String> = (0..6).map(|i| origin.url(&format!("/j{i}.jar"))).collect();
    // A mirror announcing the right digest in its header (no ETag) with other bytes.
    let liar = FaultServer::start();
    liar.always(
        "/v1/fetch",
        Fault::StatusBody(
            200,
            vec![(SHA_HEADER.into(), sha256_hex(&bodies[0]))],
            "not the jar".into(),
        ),
    );
    let sb = Sandbox::new();
    sb.fetch()
        .args(["--jars", &jars[0], "--mirror", &liar.url("/")])
        .run()
        .expect_code(0);
    assert_eq!(std::fs::read(sb.jar("j0.jar")).unwrap(), bodies[0]);
    assert_eq!(report_mirror(&sb, "j0.jar"), "fallback");
    // A mirror that sends a little and then nothing: the first artifacts wait one
    // stall, the mirror is dropped, the rest come straight from the origin.
    let hanging = FaultServer::start();
    hanging.put("/v1/fetch", data(9, 100_000));
    hanging.always(
        "/v1/fetch",
        Fault::StallAfter(1000, Duration::from_secs(60)),
    );
    let sb = Sandbox::new();
    let started = std::time::Instant::now();
    let out = sb
        .fetch()
        .args([
            "--jars",
            &jars.join(","),
            "--mirror",
            &hanging.url("/"),
            "--parallelism",
            "2",
            "--stall-timeout",
            "2s",
        ])
        .run();
    out.expect_code(0).expect_stderr("in the middle of a body");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    for (i, body) in bodies.iter().enumerate() {
        assert_eq!(&std::fs::read(sb.jar(&format!("j{i}.jar"))).unwrap(), body);
    }
    let skipped = sb.artifact("j5.jar")["mirror_error"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(skipped.contains("not asked"), "{skipped}");
}

#[test]
fn a_busy_mirror_answers_in_time_and_is_not_dropped() {
    let origin = FaultServer::start();
    let slow = data(11, 400_000);
    origin.put("/slow.jar", slow.clone());
    origin.put("/quick.jar", data(12, 20_000));
    origin.on("/slow.jar", 1, Fault::Hold(1000));
    let store = tempfile::tempdir().unwrap();
    // One origin transfer at a time: quick.jar waits for slow.jar's slot.
    let mirror = Mirror::start(
        store.path(),
        &["--allow-origin", &origin.url("/"), "--parallelism", "1"],
    );
    let jars = format!("{},{}", origin.url("/slow.jar"), origin.url("/quick.jar"));
    let sb = Sandbox::new();
    let run = sb
        .fetch()
        .args([
            "--jars",
            &jars,
            "--mirror",
            &mirror.url(),
            "--mirror-timeout",
            "2s",
            "--parallelism",
            "2",
        ])
        .start();
    // The scenario, not a wait: the origin holds longer than --mirror-timeout.
    std::thread::sleep(Duration::from_secs(4));
    origin.release();
    let out = run.finish();
    out.expect_code(0);
    assert!(!out.stderr.contains("unavailable"), "{}", out.stderr);
    assert_eq!(std::fs::read(sb.jar("slow.jar")).unwrap(), slow);
    assert_eq!(report_mirror(&sb, "slow.jar"), "served");
    assert_eq!(report_mirror(&sb, "quick.jar"), "served");
    assert_eq!(origin.gets("/quick.jar").len(), 1);
}

#[test]
fn an_anonymous_bucket_goes_through_the_mirror_and_a_credentialed_one_does_not() {
    let Some(sw) = Seaweed::start() else { return };
    sw.create_bucket(Seaweed::PUBLIC_BUCKET);
    let body = data(21, 300_000);
    sw.put(Seaweed::PUBLIC_BUCKET, "spark/a.jar", &body);
    let store = tempfile::tempdir().unwrap();
    let props = store.path().join("anonymous.properties");
    std::fs::write(
        &props,
        "spark.hadoop.fs.s3a.aws.credentials.provider=org.apache.hadoop.fs.s3a.AnonymousAWSCredentialsProvider\n",
    )
    .unwrap();
    let mut cmd_env = vec![
        ("AWS_ENDPOINT_URL", sw.endpoint()),
        ("AWS_ALLOW_HTTP", "true".to_owned()),
    ];
    // No instance metadata service to fall back on: an anonymous read needs none.
    cmd_env.push(("AWS_EC2_METADATA_DISABLED", "true".to_owned()));
    let mirror = Mirror::start_with_env(
        store.path().join("m").as_path(),
        &[
            "--allow-origin",
            "s3://public/spark/",
            "--properties-file",
            props.to_str().unwrap(),
        ],
        &cmd_env,
    );
    let uri = format!("s3a://{}/spark/a.jar", Seaweed::PUBLIC_BUCKET);
    for _ in 0..2 {
        let sb = Sandbox::new();
        let mut run = sb.fetch().args([
            "--jars",
            &uri,
            "--mirror",
            &mirror.url(),
            "--properties-file",
            props.to_str().unwrap(),
        ]);
        for (k, v) in &cmd_env {
            run = run.env(k, v);
        }
        run.run().expect_code(0);
        assert_eq!(std::fs::read(sb.jar("a.jar")).unwrap(), body);
        assert_eq!(report_mirror(&sb, "a.jar"), "served");
    }
    let m = mirror.metrics();
    assert_eq!(
        (m["misses_total"], m["origin_bytes_total"]),
        (1, 300_000),
        "{m:?}"
    );
    // With keys, the client fetches the bucket itself.
    let sb = Sandbox::new();
    let mut run = sb
        .fetch()
        .args(["--jars", &uri, "--mirror", &mirror.url()])
        .env("AWS_ACCESS_KEY_ID", Seaweed::ACCESS_KEY)
        .env("AWS_SECRET_ACCESS_KEY", Seaweed::SECRET_KEY);
    for (k, v) in &cmd_env {
        run = run.env(k, v);
    }
    run.run().expect_code(0);
    assert_eq!(report_mirror(&sb, "a.jar"), "none");
}

#[test]
fn an_object_replaced_during_a_fill_is_fetched_again_from_the_start() {
    let origin = FaultServer::start();
    origin.put("/a.jar", data(31, 200_000));
    let replaced = data(32, 150_000);
    // The first GET is cut after 1000 bytes and the object changes under it: the
    // resume's If-Range gets the new object whole, and the fill must start over
    // (not resume again and again until its retries run out).
    origin.on("/a.jar", 1, Fault::ResetAfter(1000));
    origin.replace_after("/a.jar", 1, replaced.clone(), "\"v2\"");
    let store = tempfile::tempdir().unwrap();
    let mirror = Mirror::start(store.path(), &["--allow-origin", &origin.url("/")]);
    let uri = urlencode(&origin.url("/a.jar"));
    // The request waiting on the fill is cut when it starts over (its client
    // falls back); the fill goes on and keeps the new object.
    let _ = mirror.request_bytes("GET", &format!("/v1/fetch?uri={uri}"));
    assert!(wait_for(Duration::from_secs(10), || mirror.metrics()
        ["blobs"]
        == 1));
    let (status, body) = mirror.request_bytes("GET", &format!("/v1/fetch?uri={uri}"));
    assert_eq!((status, body.len()), (200, replaced.len()));
    assert!(body == replaced);
    // The first GET, one resume (answered with the new object whole), the restart.
    assert_eq!(origin.gets("/a.jar").len(), 3);
}

/// Samples the bytes under `dir` (blobs and transfers in progress) on a thread
/// until the returned guard is finished; its largest sample.
struct DiskPeak {
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<u64>,
}

impl DiskPeak {
    fn watch(dir: &Path) -> DiskPeak {
        fn bytes(dir: &Path) -> u64 {
            ["blobs", "tmp"]
                .iter()
                .filter_map(|d| std::fs::read_dir(dir.join(d)).ok())
                .flatten()
                .filter_map(|e| e.ok()?.metadata().ok())
                .map(|m| m.len())
                .sum()
        }
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let dir = dir.to_owned();
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut peak = 0;
            // A sample, not a wait: the peak is whatever was seen.
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                peak = peak.max(bytes(&dir));
                std::thread::sleep(Duration::from_millis(2));
            }
            peak.max(bytes(&dir))
        });
        DiskPeak { stop, thread }
    }

    fn finish(self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}

#[test]
fn transfers_in_progress_stay_under_max_bytes_and_what_cannot_fit_is_passed_through() {
    // A slow origin (4 MB/s per connection): the transfers overlap.
    let origin = FaultServer::start();
    let big = data(51, 6_000_000);
    origin.put("/big.jar", big.clone());
    origin.always("/big.jar", Fault::Paced(4_000_000));
    let parts: Vec<Vec<u8>> = (0..3).map(|i| data(52 + i, 2_000_000)).collect();
    for (i, body) in parts.iter().enumerate() {
        origin.put(&format!("/p{i}.jar"), body.clone());
        origin.always(&format!("/p{i}.jar"), Fault::Paced(2_000_000));
    }
    let store = tempfile::tempdir().unwrap();
    let max = 5_000_000u64;
    let mirror = Mirror::start(
        store.path(),
        &[
            "--allow-origin",
            &origin.url("/"),
            "--max-bytes",
            &max.to_string(),
        ],
    );
    let peak = DiskPeak::watch(store.path());
    // Larger than the store: passed through whole, never written, asked once.
    let sb = Sandbox::new();
    sb.fetch()
        .args(["--jars", &origin.url("/big.jar"), "--mirror", &mirror.url()])
        .run()
        .expect_code(0);
    assert_eq!(std::fs::read(sb.jar("big.jar")).unwrap(), big);
    assert_eq!(report_mirror(&sb, "big.jar"), "served");
    assert_eq!(origin.gets("/big.jar").len(), 1);
    // Three at once, 6 MB for a 5 MB store: what does not fit is passed through.
    let jars: Vec<String> = (0..3).map(|i| origin.url(&format!("/p{i}.jar"))).collect();
    let sb = Sandbox::new();
    sb.fetch()
        .args(["--jars", &jars.join(","), "--mirror", &mirror.url()])
        .args(["--parallelism", "3"])
        .run()
        .expect_code(0);
    for (i, body) in parts.iter().enumerate() {
        let name = format!("p{i}.jar");
        assert_eq!(&std::fs::read(sb.jar(&name)).unwrap(), body, "{name}");
        assert_eq!(report_mirror(&sb, &name), "served", "{name}");
        assert_eq!(origin.gets(&format!("/{name}")).len(), 1, "{name}");
    }
    let peak = peak.finish();
    assert!(peak <= max, "{peak} bytes on disk for --max-bytes {max}");
    mirror.settled();
    let m = mirror.metrics();
    assert!(m["passed_through_total"] >= 1, "{m:?}");
    assert_eq!(m["reserved_bytes"], 0, "{m:?}");
    assert!(m["stored_bytes"] <= max, "{m:?}");
}

#[test]
fn a_transfer_of_unknown_size_grows_its_room_and_is_passed_through_when_it_runs_out() {
    // No Content-Length: the mirror learns the size only at the end.
    let origin = FaultServer::start();
    let big = data(61, 5_000_000);
    let small = data(62, 1_000_000);
    origin.put("/big.jar", big.clone());
    origin.put("/small.jar", small.clone());
    origin.always("/big.jar", Fault::Unsized(4_000_000));
    origin.always("/small.jar", Fault::Unsized(4_000_000));
    let store = tempfile::tempdir().unwrap();
    let max = 3_000_000u64;
    let mirror = Mirror::start(
        store.path(),
        &[
            "--allow-origin",
            &origin.url("/"),
            "--max-bytes",
            &max.to_string(),
        ],
    );
    let peak = DiskPeak::watch(store.path());
    // The big one's first 3 MB are written, the rest comes straight from the
    // origin as a range of the same version.
    let sb = Sandbox::new();
    sb.fetch()
        .args(["--jars", &origin.url("/big.jar"), "--mirror", &mirror.url()])
        .run()
        .expect_code(0);
    assert_eq!(std::fs::read(sb.jar("big.jar")).unwrap(), big);
    assert_eq!(report_mirror(&sb, "big.jar"), "served");
    let peak = peak.finish();
    assert!(peak <= max, "{peak} bytes on disk for --max-bytes {max}");
    // Its room is given back once its last reader is done; then the small one
    // fits and is kept.
    assert!(
        wait_for(Duration::from_secs(30), || mirror.metrics()
            ["reserved_bytes"]
            == 0),
        "{:?}",
        mirror.metrics()
    );
    let sb = Sandbox::new();
    sb.fetch()
        .args([
            "--jars",
            &origin.url("/small.jar"),
            "--mirror",
            &mirror.url(),
        ])
        .run()
        .expect_code(0);
    assert_eq!(std::fs::read(sb.jar("small.jar")).unwrap(), small);
    mirror.settled();
    let m = mirror.metrics();
    assert_eq!(m["passed_through_total"], 1, "{m:?}");
    assert_eq!(m["blobs"], 1, "{m:?}");
    assert_eq!(m["reserved_bytes"], 0, "{m:?}");
    let big_gets = origin.gets("/big.jar");
    assert_eq!(big_gets.len(), 2, "one whole, one range: {big_gets:?}");
    assert!(big_gets[1].header("range").is_some(), "{big_gets:?}");
}

/// A chunked body's bytes (`raw` is the whole encoded body).
fn dechunk(raw: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    let mut at = 0;
    loop {
        let line_end = at + raw[at..].windows(2).position(|w| w == b"\r\n").unwrap();
        let size_text = String::from_utf8_lossy(&raw[at..line_end]).into_owned();
        let size = usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16).unwrap();
        at = line_end + 2;
        if size == 0 {
            return body;
        }
        body.extend_from_slice(&raw[at..at + size]);
        at += size + 2;
    }
}

/// A connection to `addr` that has sent a plain HTTP/1.1 request (no body,
/// `Connection: close`); the caller reads the answer at its own pace.
/// (status, body bytes) of a plain HTTP/1.1 request to a mirror at `addr` (also the
/// mirror's DaemonSet pod's, `pods.rs`).
pub(crate) fn request_bytes(addr: &str, method: &str, path_and_query: &str) -> (u16, Vec<u8>) {
    let mut stream = send_request(addr, method, path_and_query);
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(raw.len(), |p| p + 4);
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, raw[split..].to_vec())
}

/// The `/metrics` counters and gauges of a mirror at `addr`, by name without the common
/// prefix.
pub(crate) fn metrics_of(addr: &str) -> HashMap<String, u64> {
    let (status, body) = request_bytes(addr, "GET", "/metrics");
    let body = String::from_utf8_lossy(&body);
    assert_eq!(status, 200, "{body}");
    body.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (name, value) = l.split_once(' ')?;
            let name = name.strip_prefix("spark_localizer_mirror_")?;
            Some((name.to_owned(), value.trim().parse().ok()?))
        })
        .collect()
}

fn send_request(addr: &str, method: &str, path_and_query: &str) -> TcpStream {
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "{method} {path_and_query} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
    )
    .unwrap();
    stream
}

/// Reads an HTTP/1.1 answer's head from `stream`: the status, whether the body
/// is chunked, and the bytes of the body that came with the head.
fn read_head(stream: &mut TcpStream) -> (u16, bool, Vec<u8>) {
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = stream.read(&mut buf).unwrap();
        assert!(n > 0, "the mirror closed before the head");
        raw.extend_from_slice(&buf[..n]);
        if let Some(p) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&raw[..p]).to_ascii_lowercase();
            let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
            let chunked = head.contains("transfer-encoding: chunked");
            return (status, chunked, raw[p + 4..].to_vec());
        }
    }
}

#[test]
fn a_joiner_that_falls_behind_a_transfer_gets_every_byte_in_order() {
    // Two slow transfers (12 MB at 4 MB/s, one of unknown size). One client
    // reads a little, stops until the transfer is megabytes ahead of it (past the
    // chunks the mirror keeps in memory), then reads on: it is served from the
    // file, then from memory as it catches up, then from the finished file; a
    // second client keeps up all along. Every byte, in order, for both.
    let origin = FaultServer::start();
    let sized = data(61, 12_000_000);
    let no_size = data(62, 12_000_000);
    origin.put("/sized.jar", sized.clone());
    origin.always("/sized.jar", Fault::Paced(4_000_000));
    origin.put("/unsized.jar", no_size.clone());
    origin.always("/unsized.jar", Fault::Unsized(4_000_000));
    let store = tempfile::tempdir().unwrap();
    let mirror = Mirror::start(store.path(), &["--allow-origin", &origin.url("/")]);
    for (name, body) in [("/sized.jar", &sized), ("/unsized.jar", &no_size)] {
        let before = mirror.metrics()["origin_bytes_total"];
        let path = format!("/v1/fetch?uri={}", urlencode(&origin.url(name)));
        let mut lagging = send_request(&mirror.addr, "GET", &path);
        let (status, chunked, mut got) = read_head(&mut lagging);
        assert_eq!(status, 200, "{name}");
        let keeping_up = {
            let mirror_addr = mirror.addr.clone();
            let path = path.clone();
            std::thread::spawn(move || {
                let mut stream = send_request(&mirror_addr, "GET", &path);
                let (status, chunked, mut body) = read_head(&mut stream);
                stream.read_to_end(&mut body).unwrap();
                (status, if chunked { dechunk(&body) } else { body })
            })
        };
        // What the sockets and the answer's queue hold is well under 9 MB.
        assert!(
            wait_for(Duration::from_secs(30), || mirror.metrics()
                ["origin_bytes_total"]
                >= before + 9_000_000),
            "{name}: the transfer did not get ahead: {:?}",
            mirror.metrics()
        );
        lagging.read_to_end(&mut got).unwrap();
        if chunked {
            got = dechunk(&got);
        }
        assert!(
            got == *body,
            "{name}: the lagging client got other bytes ({} of {})",
            got.len(),
            body.len()
        );
        let (status, kept_up) = keeping_up.join().unwrap();
        assert_eq!(status, 200, "{name}");
        assert!(
            kept_up == *body,
            "{name}: the client that kept up got other bytes ({} of {})",
            kept_up.len(),
            body.len()
        );
    }
    assert_eq!(origin.gets("/sized.jar").len(), 1);
    assert_eq!(origin.gets("/unsized.jar").len(), 1);
}

#[test]
fn an_answer_stuck_behind_a_slow_client_is_cut_when_its_transfer_starts_over() {
    // The object changes mid-transfer and its new version does not fit in the
    // store, so the transfer starts over and then passes the new version
    // through. An answer whose client stopped reading (its pump blocked, so it
    // never sees the start-over's state) must end short on the old version's
    // bytes: not go on with the new version's from where it was.
    let origin = FaultServer::start();
    let v1 = data(71, 12_000_000);
    let v2 = data(72, 20_000_000);
    origin.put("/x.jar", v1.clone());
    origin.on("/x.jar", 1, Fault::ResetAfter(8_000_000));
    origin.replace_after("/x.jar", 1, v2.clone(), "\"v2\"");
    let store = tempfile::tempdir().unwrap();
    let mirror = Mirror::start(
        store.path(),
        &[
            "--allow-origin",
            &origin.url("/"),
            "--max-bytes",
            "16000000",
        ],
    );
    let path = format!("/v1/fetch?uri={}", urlencode(&origin.url("/x.jar")));
    let mut stuck = send_request(&mirror.addr, "GET", &path);
    let (status, chunked, mut got) = read_head(&mut stuck);
    assert_eq!((status, chunked), (200, false));
    // The start-over and the new version's pass-through have happened.
    assert!(
        wait_for(Duration::from_secs(30), || origin.gets("/x.jar").len() >= 3
            && mirror.metrics()["transfers"] == 0),
        "{:?} {:?}",
        origin.gets("/x.jar").len(),
        mirror.metrics()
    );
    let _ = stuck.read_to_end(&mut got);
    assert!(
        got.len() < v1.len() && v1.starts_with(&got),
        "the answer got {} bytes, {} of them the old version's",
        got.len(),
        got.iter().zip(&v1).take_while(|(a, b)| a == b).count()
    );
}
