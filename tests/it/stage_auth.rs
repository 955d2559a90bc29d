//! Upload authentication and quotas of `stage serve`: `--upload-auth none|token|
//! kubernetes`, the token file re-read when it changes, TokenReview +
//! SubjectAccessReview against `KubeApi` (an in-process STAND-IN for the
//! Kubernetes API server, not the real thing), the store and namespace quotas
//! under concurrent uploads, the refusal metrics, and the `stage upload` client's
//! bearer token (`--token-file`, the kubeconfig's `token`, `tokenFile` or `exec`).
//!
//! `KubeApi` speaks only the two review endpoints over plain HTTP/1.1 on
//! 127.0.0.1 (one request per connection, `Connection: close`). Like the real API
//! server it answers 401 unless `Authorization` is `Bearer <the server's own
//! token>`, authenticates the reviewed token from a map token -> user, and allows
//! `create` of `pods` to the (user, namespace) pairs it is given. It records every
//! request, and can be told to answer 500, a review-shaped answer whose `kind` is
//! `Status`, or nothing at all (it reads the request and hangs).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::stage_serve::{bundle, multipart, Stage};
use crate::stage_upload::upload;
use crate::support::{data, sha256_hex, wait_for, Listening, BIN};

const UPLOADS: &str = "/api/v0/resources";

// ---------------------------------------------------------------------------
// The Kubernetes API stand-in
// ---------------------------------------------------------------------------

/// How the stand-in misbehaves on one review endpoint.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    /// 500 with a `Status` body.
    Status500,
    /// 200 with a review-shaped body (authenticated, allowed) whose kind is `Status`.
    WrongKind,
    /// Read the request, never answer.
    Hang,
}

/// A user the stand-in authenticates.
pub(crate) struct KubeUser {
    pub(crate) username: &'static str,
    pub(crate) uid: &'static str,
    pub(crate) groups: &'static [&'static str],
    pub(crate) extra: Value,
}

/// One request the stand-in received.
#[derive(Clone, Debug)]
pub(crate) struct Seen {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) authorization: String,
    pub(crate) body: Value,
}

struct ApiState {
    /// The bearer token the staging server must present (its --kube-token-file).
    server_token: String,
    users: BTreeMap<String, KubeUser>,
    /// (username, namespace) pairs that may create pods.
    allowed: BTreeSet<(String, String)>,
    token_review_fault: Option<Fault>,
    access_review_fault: Option<Fault>,
    seen: Vec<Seen>,
}

const TOKEN_REVIEWS: &str = "/apis/authentication.k8s.io/v1/tokenreviews";
const ACCESS_REVIEWS: &str = "/apis/authorization.k8s.io/v1/subjectaccessreviews";

pub(crate) struct KubeApi {
    addr: SocketAddr,
    state: Arc<Mutex<ApiState>>,
    stop: Arc<AtomicBool>,
}

impl KubeApi {
    pub(crate) fn start(server_token: &str) -> KubeApi {
        let state = Arc::new(Mutex::new(ApiState {
            server_token: server_token.to_owned(),
            users: BTreeMap::new(),
            allowed: BTreeSet::new(),
            token_review_fault: None,
            access_review_fault: None,
            seen: Vec::new(),
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (shared, stopping) = (state.clone(), stop.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let state = shared.clone();
                std::thread::spawn(move || serve_connection(stream, &state));
            }
        });
        KubeApi { addr, state, stop }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub(crate) fn add_user(&self, token: &str, user: KubeUser) {
        self.state
            .lock()
            .unwrap()
            .users
            .insert(token.to_owned(), user);
    }

    pub(crate) fn allow(&self, username: &str, namespace: &str) {
        self.state
            .lock()
            .unwrap()
            .allowed
            .insert((username.to_owned(), namespace.to_owned()));
    }

    fn faults(&self, token_review: Option<Fault>, access_review: Option<Fault>) {
        let mut state = self.state.lock().unwrap();
        state.token_review_fault = token_review;
        state.access_review_fault = access_review;
    }

    /// The requests received since the last call.
    pub(crate) fn take_seen(&self) -> Vec<Seen> {
        std::mem::take(&mut self.state.lock().unwrap().seen)
    }
}

impl Drop for KubeApi {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr); // wakes the accept loop
    }
}

/// Reads one HTTP/1.1 request with a `Content-Length` body: (method, path,
/// lower-cased headers, body).
#[allow(clippy::type_complexity)]
fn read_request(
    stream: &mut TcpStream,
) -> Option<(String, String, Vec<(String, String)>, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let (method, path) = (first.next()?.to_owned(), first.next()?.to_owned());
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let len: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .map_or(0, |(_, v)| v.parse().unwrap_or(0));
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < len {
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some((method, path, headers, body))
}

fn serve_connection(mut stream: TcpStream, state: &Mutex<ApiState>) {
    let Some((method, path, headers, body)) = read_request(&mut stream) else {
        return;
    };
    let authorization = headers
        .iter()
        .find(|(n, _)| n == "authorization")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let answer = review_answer(state, method, path, authorization, body);
    let Some((code, body)) = answer else {
        // Hang: hold the connection until the client gives up on it.
        let _ = stream.read_to_end(&mut Vec::new());
        return;
    };
    let reason = match code {
        200 | 201 => "OK",
        401 => "Unauthorized",
        404 => "Not Found",
        _ => "Error",
    };
    let body = body.to_string();
    let _ = write!(
        stream,
        "HTTP/1.1 {code} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

fn status_body(code: u16, reason: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": reason, "reason": reason, "code": code})
}

/// The stand-in's answer (status, JSON), `None` to hang.
fn review_answer(
    state: &Mutex<ApiState>,
    method: String,
    path: String,
    authorization: String,
    body: Value,
) -> Option<(u16, Value)> {
    let mut state = state.lock().unwrap();
    state.seen.push(Seen {
        method: method.clone(),
        path: path.clone(),
        authorization: authorization.clone(),
        body: body.clone(),
    });
    let fault = match path.as_str() {
        TOKEN_REVIEWS => state.token_review_fault,
        ACCESS_REVIEWS => state.access_review_fault,
        _ => return Some((404, status_body(404, "NotFound"))),
    };
    if fault == Some(Fault::Hang) {
        return None;
    }
    if authorization != format!("Bearer {}", state.server_token) {
        return Some((401, status_body(401, "Unauthorized")));
    }
    if method != "POST" {
        return Some((405, status_body(405, "MethodNotAllowed")));
    }
    match fault {
        Some(Fault::Status500) => return Some((500, status_body(500, "InternalError"))),
        Some(Fault::WrongKind) => {
            let status = json!({"authenticated": true, "allowed": true,
                                "user": {"username": "mallory", "groups": ["system:masters"]}});
            return Some((
                200,
                json!({"kind": "Status", "apiVersion": "v1", "status": status}),
            ));
        }
        Some(Fault::Hang) | None => {}
    }
    if path == TOKEN_REVIEWS {
        if body["kind"] != "TokenReview" || body["apiVersion"] != "authentication.k8s.io/v1" {
            return Some((400, status_body(400, "BadRequest")));
        }
        let token = body["spec"]["token"].as_str().unwrap_or_default();
        let status = match state.users.get(token) {
            Some(u) => {
                json!({"authenticated": true, "audiences": ["https://kubernetes.default.svc"],
                "user": {"username": u.username, "uid": u.uid, "groups": u.groups, "extra": u.extra}})
            }
            None => json!({"user": {}, "error": "[invalid bearer token, token lookup failed]"}),
        };
        let mut answer = body.clone();
        answer["status"] = status;
        return Some((201, answer));
    }
    if body["kind"] != "SubjectAccessReview" || body["apiVersion"] != "authorization.k8s.io/v1" {
        return Some((400, status_body(400, "BadRequest")));
    }
    let spec = &body["spec"];
    let attrs = &spec["resourceAttributes"];
    let user = spec["user"].as_str().unwrap_or_default().to_owned();
    let namespace = attrs["namespace"].as_str().unwrap_or_default().to_owned();
    let allowed = attrs["verb"] == "create"
        && attrs["resource"] == "pods"
        && attrs.get("group").is_none_or(|g| g == "")
        && state.allowed.contains(&(user, namespace));
    let mut answer = body.clone();
    answer["status"] = if allowed {
        json!({"allowed": true, "reason": "RBAC: allowed by RoleBinding \"spark-submit\""})
    } else {
        json!({"allowed": false})
    };
    Some((201, answer))
}

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// An answer of `stage serve`, read off the wire.
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", String::from_utf8_lossy(&self.body)))
    }

    fn error(&self) -> String {
        self.json()["error"].as_str().unwrap_or_default().to_owned()
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// (id, secret) of a 201.
    fn submitted(&self) -> (String, String) {
        assert_eq!(self.status, 201, "{self:?}");
        let json = self.json();
        (
            json["resourceId"].as_str().unwrap().to_owned(),
            json["resourceSecret"].as_str().unwrap().to_owned(),
        )
    }
}

/// One request over its own connection (`Connection: close`), bounded in time. A
/// failed write (the server answered early and closed) still reads the answer.
fn http(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Answer {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    stream
        .set_write_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut raw = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        raw.push_str(&format!("{name}: {value}\r\n"));
    }
    raw.push_str("\r\n");
    let mut raw = raw.into_bytes();
    raw.extend_from_slice(body);
    let written = stream.write_all(&raw);
    let mut all = Vec::new();
    let read = stream.read_to_end(&mut all);
    let Some(split) = all.windows(4).position(|w| w == b"\r\n\r\n") else {
        panic!("no answer to {method} {path} (write: {written:?}, read: {read:?}): {all:?}");
    };
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
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
        .collect();
    Answer {
        status,
        headers,
        body: all[split + 4..].to_vec(),
    }
}

fn owner(namespace: &str) -> String {
    json!({"namespace": namespace, "labels": {"spark-app-selector": "app-1"}, "ownerType": "Pod"})
        .to_string()
}

/// POSTs `payload` for `namespace` as `stage upload` does (owner part first), with
/// `Authorization: Bearer <token>` when a token is given.
fn post_bundle(addr: &str, token: Option<&str>, namespace: &str, payload: &[u8]) -> Answer {
    let bearer = token.map(|t| format!("Bearer {t}"));
    post_parts(addr, bearer.as_deref(), namespace, payload, true)
}

/// POSTs `payload` for `namespace` with this `Authorization` header, if any.
fn post_parts(
    addr: &str,
    authorization: Option<&str>,
    namespace: &str,
    payload: &[u8],
    owner_first: bool,
) -> Answer {
    let owner = owner(namespace);
    let mut parts = vec![
        ("resourcesOwner", "application/json", owner.as_bytes()),
        ("resources", "application/octet-stream", payload),
    ];
    if !owner_first {
        parts.reverse();
    }
    let (content_type, body) = multipart(&parts);
    let mut headers = vec![("Content-Type", content_type.as_str())];
    if let Some(authorization) = authorization {
        headers.push(("Authorization", authorization));
    }
    http(addr, "POST", UPLOADS, &headers, &body)
}

fn download(stage: &Stage, id: &str, secret: &str) -> Vec<u8> {
    let got = http(
        &stage.addr,
        "GET",
        &format!("{UPLOADS}/{id}"),
        &[("Authorization", secret)],
        &[],
    );
    assert_eq!(got.status, 200, "{}", got.text());
    got.body
}

fn delete(stage: &Stage, id: &str, secret: &str) {
    let gone = http(
        &stage.addr,
        "DELETE",
        &format!("{UPLOADS}/{id}"),
        &[("Authorization", secret)],
        &[],
    );
    assert_eq!(gone.status, 204, "{}", gone.text());
}

/// The value of one sample of `/metrics` (`series` with its labels), if present.
fn sample(stage: &Stage, series: &str) -> Option<u64> {
    let text = http(&stage.addr, "GET", "/metrics", &[], &[]).text();
    let full = format!("spark_localizer_stage_{series} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&full))
        .map(|v| v.parse().unwrap())
}

/// Uploads refused for `reason` (0 when none was).
fn refusals(stage: &Stage, reason: &str) -> u64 {
    sample(
        stage,
        &format!("upload_refusals_total{{reason=\"{reason}\"}}"),
    )
    .unwrap_or(0)
}

/// Committed bundles in a local store (`bundles/<id>`).
fn stored(store: &Path) -> usize {
    std::fs::read_dir(store.join("bundles")).map_or(0, |d| d.count())
}

/// Leftover spool files in a local store.
fn spooled(store: &Path) -> usize {
    std::fs::read_dir(store.join("tmp")).map_or(0, |d| d.count())
}

/// Replaces `path` in one rename, as the kubelet swaps a mounted Secret.
fn replace_file(path: &Path, text: &str) {
    let tmp = path.with_extension("swap");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// The entries of a tar.gz: (name, contents).
fn entries(tar_gz: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(tar_gz));
    archive
        .entries()
        .unwrap()
        .map(|e| {
            let mut e = e.unwrap();
            assert_eq!(e.header().entry_type(), tar::EntryType::Regular);
            let name = String::from_utf8(e.path_bytes().into_owned()).unwrap();
            let mut contents = Vec::new();
            e.read_to_end(&mut contents).unwrap();
            (name, contents)
        })
        .collect()
}

/// `stage serve` on `store` with none of the test environment's SPARK_LOCALIZER_*
/// (unlike [`Stage::start`], no `--upload-auth none` by default).
fn bare_serve(store: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
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
    cmd.envs(env.iter().copied());
    cmd
}

/// A [`bare_serve`] that must exit within 20 s: its exit code and stderr.
fn bare_serve_exits(store: &Path, args: &[&str]) -> (i32, String) {
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut child = bare_serve(store, args, &[])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log.reopen().unwrap())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "stage serve {args:?} started instead of refusing\n{}",
                std::fs::read_to_string(log.path()).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stderr = std::fs::read_to_string(log.path()).unwrap();
    (status.code().unwrap_or(-1), stderr)
}

/// A [`bare_serve`] that is up; killed when dropped.
struct Bare(Listening);

impl Bare {
    fn start(store: &Path, args: &[&str], env: &[(&str, &str)]) -> Bare {
        Bare(Listening::spawn(bare_serve(store, args, env)))
    }

    fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.0.stderr.lock().unwrap()).into_owned()
    }
}

impl Drop for Bare {
    fn drop(&mut self) {
        let _ = self.0.child.kill();
        let _ = self.0.child.wait();
    }
}

/// The file `dir/name` holding `text`.
fn write(dir: &Path, name: &str, text: impl AsRef<[u8]>) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

// ---------------------------------------------------------------------------
// Token mode
// ---------------------------------------------------------------------------

#[test]
fn token_mode_with_the_upload_client_rotation_and_no_token_in_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let store = d.join("store");
    // Tokens that are easy to find in a log.
    let (alpha, beta, gamma) = (
        "tok-alpha-6c1f0e7d9b3a",
        "tok-beta-21d84b5f0c97",
        "tok-gamma-a94e3c7b1f02",
    );
    let wrong = "tok-wrong-55e0b9d1c3f8";
    let tokens = write(
        d,
        "upload-tokens",
        format!("# submitters of team a\n\n{alpha}\n   {beta}  \n# end\n"),
    );
    let stage = Stage::start(
        &store,
        &[
            "--upload-auth",
            "token",
            "--upload-token-file",
            tokens.to_str().unwrap(),
        ],
    );
    let server = format!("http://{}", stage.addr);
    let app = data(41, 200_000);
    let jar = write(d, "app.jar", &app);
    let conf = write(d, "app.conf", b"k=v\n");
    let files = [jar.as_path(), conf.as_path()];
    // Refused runs send a tiny bundle: a refusal given before the body is read
    // can reach a client streaming a larger one as a broken pipe (see
    // early_refusals_reach_a_client_streaming_a_large_body).
    let refused_files = [conf.as_path()];
    // The client's own token file, one per token.
    let mine = |token: &str| {
        write(
            d,
            &format!("my-{token}"),
            format!("# my upload token\n{token}\n"),
        )
    };

    // The right token, from the first non-comment line of --token-file.
    let mine_alpha = mine(alpha);
    let ok = upload(
        &[
            "--server",
            &server,
            "--namespace",
            "spark",
            "--token-file",
            mine_alpha.to_str().unwrap(),
        ],
        &files,
        &[],
    );
    ok.expect(0);
    assert!(
        !ok.stderr.contains(alpha),
        "the client logged its token:\n{}",
        ok.stderr
    );
    let (id, secret) = ok.submitted();
    let got = download(&stage, &id, &secret);
    assert_eq!(
        entries(&got),
        vec![
            ("app.jar".to_owned(), app.clone()),
            ("app.conf".to_owned(), b"k=v\n".to_vec())
        ]
    );
    assert_eq!(stored(&store), 1);

    // No token at all: 401 and a hint about --token-file.
    let none = upload(&["--server", &server], &refused_files, &[]);
    none.expect(3)
        .says("401")
        .says("no upload token")
        .says("--token-file");
    assert!(none.stdout.is_empty(), "{}", none.stdout);
    // Counted (the client may also have asked first with an empty POST, which
    // need not count: see the raw requests below for exact counts).
    let no_token_by_client = refusals(&stage, "no_token");
    assert!(no_token_by_client >= 1);

    // A token the server does not know.
    let mine_wrong = mine(wrong);
    let unknown = upload(
        &[
            "--server",
            &server,
            "--token-file",
            mine_wrong.to_str().unwrap(),
        ],
        &refused_files,
        &[],
    );
    unknown
        .expect(3)
        .says("401")
        .says("unknown upload token")
        .says("--token-file");
    assert!(!unknown.stderr.contains(wrong), "{}", unknown.stderr);

    // The second token (surrounding blanks trimmed) is as good; a comment is no token.
    let payload = bundle(&[("b.jar", b"beta")]);
    post_bundle(&stage.addr, Some(beta), "spark", &payload).submitted();
    let comment = post_bundle(&stage.addr, Some("# end"), "spark", &payload);
    assert_eq!(comment.status, 401, "{comment:?}");
    // The refusals JSON, with a WWW-Authenticate challenge, and no token echoed.
    let bare = post_bundle(&stage.addr, None, "spark", &payload);
    assert_eq!(bare.status, 401, "{bare:?}");
    assert_eq!(bare.header("WWW-Authenticate"), Some("Bearer"));
    assert!(bare.error().starts_with("no upload token: "), "{bare:?}");
    let wrong_raw = post_bundle(&stage.addr, Some(wrong), "spark", &payload);
    assert_eq!(wrong_raw.status, 401);
    assert!(
        wrong_raw.error().starts_with("unknown upload token: "),
        "{wrong_raw:?}"
    );
    assert!(!wrong_raw.text().contains(wrong), "{wrong_raw:?}");
    // Basic is not Bearer.
    let basic = post_parts(
        &stage.addr,
        Some(&format!("Basic {alpha}")),
        "spark",
        &payload,
        true,
    );
    assert_eq!(basic.status, 401, "{basic:?}");
    assert!(basic.error().starts_with("no upload token"), "{basic:?}");

    // Rotation: the Secret now holds gamma only; no restart.
    replace_file(&tokens, &format!("{gamma}\n"));
    let old = upload(
        &[
            "--server",
            &server,
            "--token-file",
            mine_alpha.to_str().unwrap(),
        ],
        &refused_files,
        &[],
    );
    old.expect(3).says("unknown upload token");
    let mine_gamma = mine(gamma);
    let new = upload(
        &[
            "--server",
            &server,
            "--token-file",
            mine_gamma.to_str().unwrap(),
        ],
        &files,
        &[],
    );
    new.expect(0);
    let (id, secret) = new.submitted();
    assert_eq!(entries(&download(&stage, &id, &secret))[0].1, app);
    assert_eq!(
        post_bundle(&stage.addr, Some(beta), "spark", &payload).status,
        401
    );

    // A token file that becomes unusable keeps the last good tokens.
    replace_file(&tokens, "# emptied by mistake\n");
    post_bundle(&stage.addr, Some(gamma), "spark", &payload).submitted();
    assert!(
        wait_for(Duration::from_secs(5), || stage
            .stderr_text()
            .contains("changed but cannot be used")),
        "{}",
        stage.stderr_text()
    );

    // no token: raw twice (bare, Basic) after the client; unknown: the client twice
    // (wrong, alpha after the rotation), raw thrice (comment, wrong, beta after it).
    assert_eq!(refusals(&stage, "no_token"), no_token_by_client + 2);
    assert_eq!(refusals(&stage, "unknown_token"), 5);
    assert_eq!(sample(&stage, "uploads_total"), Some(4));
    assert_eq!(stored(&store), 4);

    let (code, stderr) = stage.stop();
    assert_eq!(code, Some(0), "{stderr}");
    for token in [alpha, beta, gamma, wrong] {
        assert!(
            !stderr.contains(token),
            "token {token} in the server log:\n{stderr}"
        );
    }
    assert!(
        stderr.contains("upload refused (unknown_token)"),
        "{stderr}"
    );
}

// ---------------------------------------------------------------------------
// Start
// ---------------------------------------------------------------------------

/// One token file saved on Windows (a UTF-8 BOM, CRLF line ends) serves both
/// sides: `stage serve --upload-token-file` and `stage upload --token-file`
/// (issue 35: the client refused it, "only visible ASCII").
#[test]
fn a_windows_token_file_works_for_the_server_and_the_client() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let store = d.join("store");
    let token = "tok-windows-3f9a1c7e5b20";
    let file = write(d, "token.txt", format!("\u{feff}{token}\r\n"));
    let stage = Stage::start(&store, &["--upload-token-file", file.to_str().unwrap()]);
    let conf = write(d, "app.conf", b"k=v\n");
    let ok = upload(
        &[
            "--server",
            &format!("http://{}", stage.addr),
            "--token-file",
            file.to_str().unwrap(),
        ],
        &[conf.as_path()],
        &[],
    );
    ok.expect(0);
    let (id, secret) = ok.submitted();
    assert_eq!(
        entries(&download(&stage, &id, &secret)),
        vec![("app.conf".to_owned(), b"k=v\n".to_vec())]
    );
}

#[test]
fn serve_needs_an_upload_auth_choice_and_a_usable_token_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let store = d.join("store");

    let (code, stderr) = bare_serve_exits(&store, &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("uploads need authentication: give --upload-auth token"),
        "{stderr}"
    );
    assert!(!stderr.contains("listening on"), "{stderr}");

    let (code, stderr) = bare_serve_exits(&store, &["--upload-auth", "token"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("--upload-auth token needs --upload-token-file"),
        "{stderr}"
    );

    let empty = write(d, "empty-tokens", "# nobody yet\n\n   \n");
    let (code, stderr) =
        bare_serve_exits(&store, &["--upload-token-file", empty.to_str().unwrap()]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("holds no token"), "{stderr}");
    assert!(stderr.contains(empty.to_str().unwrap()), "{stderr}");

    let missing = d.join("missing-tokens");
    let (code, stderr) = bare_serve_exits(
        &store,
        &[
            "--upload-auth",
            "token",
            "--upload-token-file",
            missing.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(&format!("--upload-token-file {}", missing.display())),
        "{stderr}"
    );

    let (code, stderr) = bare_serve_exits(&store, &["--upload-auth", "kubernetes"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("--upload-auth kubernetes: no Kubernetes API"),
        "{stderr}"
    );

    // --upload-token-file alone is token mode.
    let tokens = write(d, "tokens", "tok-only-file-3e9a\n");
    let only_file = Bare::start(
        &store,
        &["--upload-token-file", tokens.to_str().unwrap()],
        &[],
    );
    let payload = bundle(&[("a.jar", b"a")]);
    let refused = post_bundle(&only_file.0.addr, None, "spark", &payload);
    assert_eq!(refused.status, 401, "{refused:?}");
    assert_eq!(
        post_bundle(
            &only_file.0.addr,
            Some("tok-only-file-3e9a"),
            "spark",
            &payload
        )
        .status,
        201
    );
    assert!(!only_file.stderr_text().contains("--upload-auth none"));
    drop(only_file);

    // The same through the environment.
    let by_env = Bare::start(
        &d.join("store-env"),
        &[],
        &[
            ("SPARK_LOCALIZER_STAGE_UPLOAD_AUTH", "token"),
            (
                "SPARK_LOCALIZER_STAGE_UPLOAD_TOKEN_FILE",
                tokens.to_str().unwrap(),
            ),
        ],
    );
    assert_eq!(
        post_bundle(&by_env.0.addr, None, "spark", &payload).status,
        401
    );
    assert_eq!(
        post_bundle(
            &by_env.0.addr,
            Some("tok-only-file-3e9a"),
            "spark",
            &payload
        )
        .status,
        201
    );
    drop(by_env);

    // none: a warning at start, and uploads from anyone.
    let open = Bare::start(&d.join("store-open"), &["--upload-auth", "none"], &[]);
    assert!(
        wait_for(Duration::from_secs(5), || open.stderr_text().contains(
            "--upload-auth none: anyone who can reach this server may upload"
        )),
        "{}",
        open.stderr_text()
    );
    assert_eq!(
        post_bundle(&open.0.addr, None, "spark", &payload).status,
        201
    );
}

// ---------------------------------------------------------------------------
// Kubernetes mode
// ---------------------------------------------------------------------------

const SA_TOKEN: &str = "sa-token-of-the-staging-server-0d7e41";
const ALICE: &str = "kube-token-alice-8c2f6a1e";
const BOB: &str = "kube-token-bob-4b9d0e37";
const CAROL: &str = "kube-token-carol-f15a7c29";
const STRANGER: &str = "kube-token-stranger-73e0b4d6";

/// The stand-in with alice (may create pods in spark), bob (in team-b) and the
/// service account carol (in spark, with extra).
fn kube_with_users() -> KubeApi {
    let kube = KubeApi::start(SA_TOKEN);
    kube.add_user(
        ALICE,
        KubeUser {
            username: "alice",
            uid: "uid-alice",
            groups: &["spark-users", "system:authenticated"],
            extra: json!({}),
        },
    );
    kube.add_user(
        BOB,
        KubeUser {
            username: "bob",
            uid: "uid-bob",
            groups: &["system:authenticated"],
            extra: json!({}),
        },
    );
    kube.add_user(
        CAROL,
        KubeUser {
            username: "system:serviceaccount:spark:submitter",
            uid: "uid-carol",
            groups: &[
                "system:serviceaccounts",
                "system:serviceaccounts:spark",
                "system:authenticated",
            ],
            extra: json!({"authentication.kubernetes.io/pod-name": ["submitter-0"]}),
        },
    );
    kube.allow("alice", "spark");
    kube.allow("bob", "team-b");
    kube.allow("system:serviceaccount:spark:submitter", "spark");
    kube
}

fn start_kube_stage(store: &Path, kube: &KubeApi, sa_token_file: &Path) -> Stage {
    Stage::start(
        store,
        &[
            "--upload-auth",
            "kubernetes",
            "--kube-api",
            &kube.url(),
            "--kube-token-file",
            sa_token_file.to_str().unwrap(),
            // Owner checks run against the same API: not during the test.
            "--owner-check-interval",
            "1h",
        ],
    )
}

/// The review requests of one upload: (TokenReview body, SubjectAccessReview body),
/// each sent with the server's own token.
#[track_caller]
fn reviews(seen: &[Seen]) -> (Value, Option<Value>) {
    for s in seen {
        assert_eq!(s.method, "POST", "{s:?}");
        assert_eq!(s.authorization, format!("Bearer {SA_TOKEN}"), "{s:?}");
    }
    let tr: Vec<&Seen> = seen.iter().filter(|s| s.path == TOKEN_REVIEWS).collect();
    let sar: Vec<&Seen> = seen.iter().filter(|s| s.path == ACCESS_REVIEWS).collect();
    assert_eq!(tr.len(), 1, "{seen:?}");
    assert!(sar.len() <= 1, "{seen:?}");
    assert_eq!(tr.len() + sar.len(), seen.len(), "{seen:?}");
    (tr[0].body.clone(), sar.first().map(|s| s.body.clone()))
}

#[test]
fn kubernetes_mode_reviews_the_submitters_token_for_the_upload_namespace() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let store = d.join("store");
    let kube = kube_with_users();
    let sa_token = write(d, "sa-token", format!("{SA_TOKEN}\n"));
    let stage = start_kube_stage(&store, &kube, &sa_token);
    let server = format!("http://{}", stage.addr);
    kube.take_seen();

    let bob_token = write(d, "bob-token", format!("{BOB}\n"));
    let plugin = write(
        d,
        "credential-plugin.sh",
        format!(
            "#!/bin/sh\nprintf '%s' '{{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{{\"token\":\"{CAROL}\"}}}}'\n"
        ),
    );
    std::fs::set_permissions(&plugin, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let kubeconfig = write(
        d,
        "kubeconfig",
        format!(
            "apiVersion: v1
kind: Config
current-context: alice
clusters:
- name: test
  cluster: {{server: '{api}'}}
contexts:
- name: alice
  context: {{cluster: test, user: alice}}
- name: bob
  context: {{cluster: test, user: bob}}
- name: carol
  context: {{cluster: test, user: carol}}
- name: stranger
  context: {{cluster: test, user: stranger}}
users:
- name: alice
  user: {{token: {ALICE}}}
- name: bob
  user: {{tokenFile: '{bob}'}}
- name: carol
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: '{plugin}'
      interactiveMode: Never
- name: stranger
  user: {{token: {STRANGER}}}
",
            api = kube.url(),
            bob = bob_token.display(),
            plugin = plugin.display()
        ),
    );
    let kc = kubeconfig.to_str().unwrap();
    let app = data(7, 150_000);
    let jar = write(d, "app.jar", &app);
    let files = [jar.as_path()];
    let tiny = write(d, "tiny.conf", b"k=v\n");
    // A 401 comes before the body is read: a tiny bundle (see
    // early_refusals_reach_a_client_streaming_a_large_body).
    let refused_files = [tiny.as_path()];

    // alice (the current context's user: token) in spark.
    let ok = upload(
        &[
            "--server",
            &server,
            "--kubeconfig",
            kc,
            "--namespace",
            "spark",
        ],
        &files,
        &[],
    );
    ok.expect(0);
    let (id, secret) = ok.submitted();
    assert_eq!(
        entries(&download(&stage, &id, &secret)),
        vec![("app.jar".to_owned(), app.clone())]
    );
    let (tr, sar) = reviews(&kube.take_seen());
    assert_eq!(
        tr,
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": ALICE}})
    );
    let sar = sar.expect("a SubjectAccessReview");
    assert_eq!(sar["apiVersion"], "authorization.k8s.io/v1");
    assert_eq!(sar["kind"], "SubjectAccessReview");
    assert_eq!(
        sar["spec"]["resourceAttributes"],
        json!({"namespace": "spark", "verb": "create", "resource": "pods"})
    );
    assert_eq!(sar["spec"]["user"], "alice");
    assert_eq!(sar["spec"]["uid"], "uid-alice");
    assert_eq!(
        sar["spec"]["groups"],
        json!(["spark-users", "system:authenticated"])
    );

    // bob through KUBECONFIG and --context: a tokenFile user, in his namespace.
    let ok = upload(
        &[
            "--server",
            &server,
            "--context",
            "bob",
            "--namespace",
            "team-b",
        ],
        &files,
        &[("KUBECONFIG", kc)],
    );
    ok.expect(0);
    let (_, sar) = reviews(&kube.take_seen());
    let sar = sar.unwrap();
    assert_eq!(sar["spec"]["user"], "bob");
    assert_eq!(sar["spec"]["resourceAttributes"]["namespace"], "team-b");

    // carol through an exec credential plugin; the user's extra is passed on.
    let ok = upload(
        &[
            "--server",
            &server,
            "--kubeconfig",
            kc,
            "--context",
            "carol",
            "--namespace",
            "spark",
        ],
        &files,
        &[],
    );
    ok.expect(0);
    let (tr, sar) = reviews(&kube.take_seen());
    assert_eq!(tr["spec"]["token"], CAROL);
    let sar = sar.unwrap();
    assert_eq!(sar["spec"]["user"], "system:serviceaccount:spark:submitter");
    assert_eq!(
        sar["spec"]["extra"],
        json!({"authentication.kubernetes.io/pod-name": ["submitter-0"]})
    );
    assert_eq!(
        sar["spec"]["groups"],
        json!([
            "system:serviceaccounts",
            "system:serviceaccounts:spark",
            "system:authenticated"
        ])
    );
    assert_eq!(stored(&store), 3);
    let stored_before = sample(&stage, "bundles_stored");
    assert_eq!(stored_before, Some(3));

    // bob in spark: authenticated, not allowed there: 403 naming the namespace.
    let forbidden = upload(
        &[
            "--server",
            &server,
            "--kubeconfig",
            kc,
            "--context",
            "bob",
            "--namespace",
            "spark",
        ],
        &files,
        &[],
    );
    forbidden
        .expect(3)
        .says("403")
        .says("bob is not allowed to create pods in namespace spark")
        .says("--namespace");
    let (_, sar) = reviews(&kube.take_seen());
    assert_eq!(
        sar.unwrap()["spec"]["resourceAttributes"]["namespace"],
        "spark"
    );
    // Raw, bundle part first: refused all the same, and nothing left in the spool.
    let payload = bundle(&[("x.jar", &data(8, 100_000))]);
    let raw = post_parts(
        &stage.addr,
        Some(&format!("Bearer {BOB}")),
        "spark",
        &payload,
        false,
    );
    assert_eq!(raw.status, 403, "{raw:?}");
    assert!(raw.error().contains("namespace spark"), "{raw:?}");
    kube.take_seen();
    assert_eq!(stored(&store), 3);
    assert_eq!(sample(&stage, "bundles_stored"), Some(3));
    assert!(wait_for(Duration::from_secs(5), || spooled(&store) == 0));

    // A token the cluster does not know: 401, and no SubjectAccessReview.
    let unknown = upload(
        &[
            "--server",
            &server,
            "--kubeconfig",
            kc,
            "--context",
            "stranger",
        ],
        &refused_files,
        &[],
    );
    unknown
        .expect(3)
        .says("401")
        .says("does not accept this token");
    let (tr, sar) = reviews(&kube.take_seen());
    assert_eq!(tr["spec"]["token"], STRANGER);
    assert!(sar.is_none());
    // No token at all: 401 before the API is asked.
    let no_token = refusals(&stage, "no_token");
    assert_eq!(
        post_bundle(&stage.addr, None, "spark", &payload).status,
        401
    );
    assert!(kube.take_seen().is_empty());
    assert_eq!(refusals(&stage, "no_token"), no_token + 1);

    assert_eq!(refusals(&stage, "forbidden"), 2);
    assert_eq!(refusals(&stage, "unknown_token"), 1);
    assert_eq!(stored(&store), 3);
    assert_eq!(
        sample(&stage, "namespace_bundles{namespace=\"spark\"}"),
        Some(2)
    );
    assert_eq!(
        sample(&stage, "namespace_bundles{namespace=\"team-b\"}"),
        Some(1)
    );

    let (code, stderr) = stage.stop();
    assert_eq!(code, Some(0), "{stderr}");
    for token in [SA_TOKEN, ALICE, BOB, CAROL, STRANGER] {
        assert!(
            !stderr.contains(token),
            "token {token} in the server log:\n{stderr}"
        );
    }
    for out in [&ok, &forbidden, &unknown] {
        for token in [ALICE, BOB, CAROL, STRANGER] {
            assert!(
                !out.stderr.contains(token),
                "token {token} in the client log:\n{}",
                out.stderr
            );
        }
    }
}

#[test]
fn kubernetes_api_failures_refuse_uploads() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let store = d.join("store");
    let kube = kube_with_users();
    let sa_token = write(d, "sa-token", format!("{SA_TOKEN}\n"));
    let stage = start_kube_stage(&store, &kube, &sa_token);
    let payload = bundle(&[("app.jar", &data(9, 50_000))]);
    let upload = || post_bundle(&stage.addr, Some(ALICE), "spark", &payload);
    let mut refused = 0;
    // One upload that must be refused 503 (never allowed); `detail` is what went
    // wrong, said in the answer or in what the server logged meanwhile. Returns
    // how long the answer took.
    let mut unavailable = |detail: &str| {
        let logged = stage.stderr_text().len();
        let started = Instant::now();
        let answer = upload();
        let took = started.elapsed();
        assert_eq!(answer.status, 503, "{answer:?}");
        let error = answer.error();
        assert!(
            error.starts_with("the Kubernetes API could not confirm"),
            "{error}"
        );
        assert!(
            !error.contains(ALICE) && !error.contains(SA_TOKEN),
            "{error}"
        );
        let logged_since = || {
            let log = stage.stderr_text();
            log.get(logged..).map(str::to_owned).unwrap_or(log)
        };
        let said = wait_for(Duration::from_secs(5), || {
            error.contains(detail) || logged_since().contains(detail)
        });
        assert!(
            said,
            "{detail:?} neither in {error:?} nor in the log:\n{}",
            logged_since()
        );
        refused += 1;
        took
    };

    for (token_review, access_review, detail) in [
        (
            Some(Fault::Status500),
            None,
            "answered 500 to the TokenReview",
        ),
        (Some(Fault::WrongKind), None, "answer is not a TokenReview"),
        // Authenticated, then the authorization cannot be had: never an allowance.
        (
            None,
            Some(Fault::Status500),
            "answered 500 to the SubjectAccessReview",
        ),
        (
            None,
            Some(Fault::WrongKind),
            "answer is not a SubjectAccessReview",
        ),
    ] {
        kube.faults(token_review, access_review);
        unavailable(detail);
        let seen = kube.take_seen();
        assert_eq!(
            seen.len(),
            1 + usize::from(access_review.is_some()),
            "{seen:?}"
        );
    }
    kube.faults(None, None);

    // The server's own token refused by the API (a wrong --kube-token-file).
    replace_file(&sa_token, "not-the-service-account-token\n");
    unavailable("the server's own token was refused");
    replace_file(&sa_token, &format!("{SA_TOKEN}\n"));

    // An API that never answers: refused once the review times out (10 s).
    kube.faults(Some(Fault::Hang), None);
    let took = unavailable("did not answer within");
    assert!(took < Duration::from_secs(15), "answered after {took:?}");
    kube.faults(None, None);

    assert_eq!(stored(&store), 0);
    assert_eq!(sample(&stage, "bundles_stored"), Some(0));
    assert_eq!(sample(&stage, "uploads_total"), Some(0));
    assert_eq!(refusals(&stage, "api_unavailable"), refused);
    assert!(wait_for(Duration::from_secs(5), || spooled(&store) == 0));

    // The API is back: the same upload goes through.
    kube.take_seen();
    upload().submitted();
    assert_eq!(stored(&store), 1);
    let (code, stderr) = stage.stop();
    assert_eq!(code, Some(0), "{stderr}");
    for token in [SA_TOKEN, ALICE] {
        assert!(
            !stderr.contains(token),
            "token {token} in the server log:\n{stderr}"
        );
    }
}

// ---------------------------------------------------------------------------
// Quotas
// ---------------------------------------------------------------------------

/// Sends `payloads` (namespace, bundle) all at once, one thread each.
fn race(addr: &str, payloads: &[(&str, &[u8])]) -> Vec<Answer> {
    let start = Barrier::new(payloads.len());
    std::thread::scope(|scope| {
        let running: Vec<_> = payloads
            .iter()
            .map(|(namespace, payload)| {
                let start = &start;
                scope.spawn(move || {
                    start.wait();
                    post_bundle(addr, None, namespace, payload)
                })
            })
            .collect();
        running.into_iter().map(|t| t.join().unwrap()).collect()
    })
}

#[test]
fn concurrent_uploads_never_pass_the_bundle_quotas() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let stage = Stage::start(
        &store,
        &["--max-bundles", "5", "--max-namespace-bundles", "3"],
    );
    let payload = bundle(&[("app.jar", &data(3, 256 * 1024))]);
    let uploads: Vec<(&str, &[u8])> = (0..16)
        .map(|i| (if i % 2 == 0 { "a" } else { "b" }, payload.as_slice()))
        .collect();
    let answers = race(&stage.addr, &uploads);

    let mut created = Vec::new();
    let mut per_namespace: BTreeMap<&str, usize> = BTreeMap::new();
    for ((namespace, _), answer) in uploads.iter().zip(&answers) {
        if answer.status == 201 {
            created.push(answer.submitted());
            *per_namespace.entry(namespace).or_default() += 1;
            continue;
        }
        assert_eq!(answer.status, 429, "{answer:?}");
        let error = answer.error();
        assert!(
            error.contains("(--max-bundles 5)") && error.contains("the store holds 5 bundles")
                || error.contains("(--max-namespace-bundles 3)")
                    && error.contains(&format!("namespace {namespace} holds 3 bundles")),
            "{error}"
        );
    }
    // 5 overall, at most 3 in a namespace (so at least 2 in the other).
    assert_eq!(created.len(), 5, "{answers:?}");
    assert!(
        per_namespace.values().all(|&n| (2..=3).contains(&n)),
        "{per_namespace:?}"
    );
    assert_eq!(stored(&store), 5);
    assert_eq!(sample(&stage, "store_bundles"), Some(5));
    assert_eq!(sample(&stage, "store_bundles_quota"), Some(5));
    assert_eq!(sample(&stage, "bundles_stored"), Some(5));
    assert_eq!(
        sample(&stage, "store_bytes"),
        Some(5 * payload.len() as u64)
    );
    for (namespace, n) in &per_namespace {
        let series = format!("namespace_bundles{{namespace=\"{namespace}\"}}");
        assert_eq!(sample(&stage, &series), Some(*n as u64));
    }
    assert_eq!(
        refusals(&stage, "quota_bundles") + refusals(&stage, "quota_namespace_bundles"),
        11
    );

    // Full: refused. A DELETE gives one place back, for one more upload.
    let full = post_bundle(&stage.addr, None, "c", &payload);
    assert_eq!(full.status, 429, "{full:?}");
    assert!(full.error().contains("--max-bundles 5"), "{full:?}");
    let (id, secret) = &created[0];
    delete(&stage, id, secret);
    assert_eq!(sample(&stage, "store_bundles"), Some(4));
    post_bundle(&stage.addr, None, "c", &payload).submitted();
    assert_eq!(post_bundle(&stage.addr, None, "c", &payload).status, 429);
    assert_eq!(stored(&store), 5);
    assert_eq!(sample(&stage, "store_bundles"), Some(5));
}

#[test]
fn concurrent_uploads_never_pass_the_byte_quotas() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let payload = bundle(&[("app.jar", &data(4, 200 * 1024))]);
    let size = payload.len() as u64;
    // Room for exactly 3 bundles in a namespace, 5 in the store.
    let namespace_max = (3 * size + size / 2).to_string();
    let store_max = (5 * size + size / 2).to_string();
    let stage = Stage::start(
        &store,
        &[
            "--max-namespace-bytes",
            &namespace_max,
            "--max-store-bytes",
            &store_max,
        ],
    );
    let uploads: Vec<(&str, &[u8])> = (0..16).map(|_| ("a", payload.as_slice())).collect();
    let answers = race(&stage.addr, &uploads);
    let created: Vec<(String, String)> = answers
        .iter()
        .filter(|a| a.status == 201)
        .map(Answer::submitted)
        .collect();
    assert_eq!(created.len(), 3, "{answers:?}");
    for answer in answers.iter().filter(|a| a.status != 201) {
        assert_eq!(answer.status, 507, "{answer:?}");
        let error = answer.error();
        assert!(
            error.contains(&format!(
                "namespace a holds {} bytes and this bundle has {size}",
                3 * size
            )) && error.contains(&format!("(--max-namespace-bytes {namespace_max})")),
            "{error}"
        );
    }
    assert_eq!(stored(&store), 3);
    assert_eq!(refusals(&stage, "quota_namespace_bytes"), 13);
    assert_eq!(
        sample(&stage, "namespace_bytes{namespace=\"a\"}"),
        Some(3 * size)
    );
    assert_eq!(
        sample(&stage, "namespace_bundles{namespace=\"a\"}"),
        Some(3)
    );
    assert_eq!(sample(&stage, "store_bytes"), Some(3 * size));
    assert_eq!(
        sample(&stage, "store_bytes_quota"),
        Some(5 * size + size / 2)
    );

    // Another namespace has its own room, up to the store's.
    post_bundle(&stage.addr, None, "b", &payload).submitted();
    post_bundle(&stage.addr, None, "b", &payload).submitted();
    let full = post_bundle(&stage.addr, None, "b", &payload);
    assert_eq!(full.status, 507, "{full:?}");
    assert!(
        full.error()
            .contains(&format!("(--max-store-bytes {store_max})")),
        "{full:?}"
    );
    assert_eq!(refusals(&stage, "quota_bytes"), 1);

    // A DELETE in namespace a gives its bytes back.
    let (id, secret) = &created[0];
    delete(&stage, id, secret);
    assert_eq!(
        sample(&stage, "namespace_bytes{namespace=\"a\"}"),
        Some(2 * size)
    );
    post_bundle(&stage.addr, None, "a", &payload).submitted();
    assert_eq!(stored(&store), 5);
    assert_eq!(sample(&stage, "store_bytes"), Some(5 * size));
}

// ---------------------------------------------------------------------------
// The original (fork) clients
// ---------------------------------------------------------------------------

#[test]
fn fork_v0_clients_upload_without_a_token_under_upload_auth_none() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let payload = bundle(&[
        ("spark-examples.jar", &data(11, 80_000)),
        ("log4j.properties", b"x=y\n"),
    ]);
    // As the apache-spark-on-k8s submission client sends it: the bundle first, the
    // owner with its field names, text/plain, no Authorization.
    let owner = r#"{"ownerNamespace":"default","ownerLabels":{"spark-app-selector":"spark-1"},"ownerType":"Pod"}"#;
    let (content_type, body) = multipart(&[
        ("resources", "application/octet-stream", &payload),
        ("resourcesOwner", "text/plain", owner.as_bytes()),
    ]);
    let headers = [("Content-Type", content_type.as_str())];

    let stage = Stage::start(&store, &["--upload-auth", "none"]);
    let created = http(&stage.addr, "POST", UPLOADS, &headers, &body);
    let (id, secret) = created.submitted();
    let got = download(&stage, &id, &secret);
    assert_eq!(sha256_hex(&got), sha256_hex(&payload));
    assert_eq!(
        sample(&stage, "namespace_bundles{namespace=\"default\"}"),
        Some(1)
    );
    let (code, stderr) = stage.stop();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("--upload-auth none: anyone who can reach this server may upload"),
        "{stderr}"
    );

    // The same client against a server that asks for a token: told so.
    let tokens = write(dir.path(), "tokens", "tok-fork-0a9b\n");
    let stage = Stage::start(
        &store,
        &[
            "--upload-auth",
            "token",
            "--upload-token-file",
            tokens.to_str().unwrap(),
        ],
    );
    let refused = http(&stage.addr, "POST", UPLOADS, &headers, &body);
    assert_eq!(refused.status, 401, "{refused:?}");
    assert!(
        refused.error().starts_with("no upload token"),
        "{refused:?}"
    );
    assert_eq!(stored(&store), 1);
    // Downloads keep working with the resource secret alone.
    assert_eq!(download(&stage, &id, &secret), got);
}

// ---------------------------------------------------------------------------
// Regressions: defects this file found in the first version (each fixed)
// ---------------------------------------------------------------------------

/// A refusal given before the body is read (no token, unknown token, a full store
/// at the pre-check) must still reach a client that is streaming a large body, as
/// the 413 and 403 refusals do (they linger on the body). The first version closed
/// the connection with the body unread, and `stage upload` often reported "Broken
/// pipe" instead of the 401 or 429 and its hint.
#[test]
fn early_refusals_reach_a_client_streaming_a_large_body() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let tokens = write(d, "tokens", "tok-early-7d1e\n");
    let mine = write(d, "mine", "tok-early-7d1e\n");
    let stage = Stage::start(
        &d.join("store"),
        &[
            "--upload-token-file",
            tokens.to_str().unwrap(),
            "--upload-auth",
            "token",
            "--max-bundles",
            "1",
        ],
    );
    let server = format!("http://{}", stage.addr);
    let small = write(d, "small.jar", b"small");
    let big = write(d, "big.bin", data(5, 24 << 20));
    for round in 0..8 {
        let out = upload(&["--server", &server], &[&big], &[]);
        assert!(out.stderr.contains("401"), "round {round}: {}", out.stderr);
    }
    upload(
        &["--server", &server, "--token-file", mine.to_str().unwrap()],
        &[&small],
        &[],
    )
    .expect(0);
    for round in 0..8 {
        let out = upload(
            &["--server", &server, "--token-file", mine.to_str().unwrap()],
            &[&big],
            &[],
        );
        assert!(out.stderr.contains("429"), "round {round}: {}", out.stderr);
    }
}

/// The sweep recounts the use from a store listing; an upload that reserved its
/// place before the listing started and commits after it (or a deletion whose
/// release comes after the listing) must not have its place handed out twice, as
/// the first version did. With a sweep every 100 ms
/// (`--unused-ttl 400ms`) uploads racing deletions take the store past
/// `--max-bundles` within seconds; with the default TTLs it takes longer, and with
/// an S3 store (slow commits) much less.
#[test]
fn the_sweep_recount_never_lets_the_store_pass_its_quota() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let stage = Stage::start(&store, &["--max-bundles", "3", "--unused-ttl", "400ms"]);
    let payload = bundle(&[("app.jar", &data(6, 2000))]);
    let until = Instant::now() + Duration::from_secs(10);
    let held: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());
    let most = std::thread::scope(|scope| {
        for _ in 0..6 {
            scope.spawn(|| {
                while Instant::now() < until {
                    let answer = post_bundle(&stage.addr, None, "a", &payload);
                    if answer.status == 201 {
                        let (id, secret) = answer.submitted();
                        // Downloaded: kept past --unused-ttl until deleted.
                        let _ = http(
                            &stage.addr,
                            "GET",
                            &format!("{UPLOADS}/{id}"),
                            &[("Authorization", &secret)],
                            &[],
                        );
                        held.lock().unwrap().push((id, secret));
                    }
                }
            });
        }
        scope.spawn(|| {
            let mut turn = 0u64;
            while Instant::now() < until {
                turn += 1;
                std::thread::sleep(Duration::from_millis(data(turn, 1)[0] as u64 % 30));
                let next = held.lock().unwrap().pop();
                if let Some((id, secret)) = next {
                    let _ = http(
                        &stage.addr,
                        "DELETE",
                        &format!("{UPLOADS}/{id}"),
                        &[("Authorization", &secret)],
                        &[],
                    );
                }
            }
        });
        let mut most = 0;
        while Instant::now() < until {
            most = most.max(stored(&store));
            std::thread::sleep(Duration::from_millis(1));
        }
        most
    });
    assert!(
        most <= 3,
        "the store held {most} bundles with --max-bundles 3"
    );
}

/// Without `--token-file`, `stage upload` first asks with an empty POST whether the
/// server wants a token (it sends the kubeconfig's only then). That question is
/// not a refusal: the server exempts an empty body from the no_token count and
/// the warning (the first version's probe carried no `Content-Length: 0`, so it
/// was counted).
#[test]
fn the_clients_token_probe_is_not_a_refusal() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let tokens = write(d, "tokens", "tok-probe-5f2c\n");
    let stage = Stage::start(
        &d.join("store"),
        &[
            "--upload-auth",
            "token",
            "--upload-token-file",
            tokens.to_str().unwrap(),
        ],
    );
    let kubeconfig = write(
        d,
        "kubeconfig",
        "apiVersion: v1\nkind: Config\ncurrent-context: me\ncontexts:\n- name: me\n  context: {cluster: c, user: me}\nusers:\n- name: me\n  user: {token: tok-probe-5f2c}\n",
    );
    let jar = write(d, "a.jar", b"a");
    let server = format!("http://{}", stage.addr);
    upload(
        &[
            "--server",
            &server,
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
        ],
        &[&jar],
        &[],
    )
    .expect(0);
    assert_eq!(refusals(&stage, "no_token"), 0);
    let (_, stderr) = stage.stop();
    assert!(!stderr.contains("upload refused (no_token)"), "{stderr}");
}
