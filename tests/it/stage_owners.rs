//! Owner expiry of `stage serve` (a downloaded bundle goes once no pod matches its
//! owner) against `FakeKube`: a small in-process STAND-IN for the Kubernetes API
//! server, not the real thing. It serves only `GET /api/v1/namespaces/{ns}/pods`
//! over HTTP or TLS on 127.0.0.1, from a pod list the test edits while the server
//! runs. Like the real API server it answers 401 unless `Authorization` is
//! `Bearer <the current token>`, reads `labelSelector` (equality terms only, `k=v`
//! or `k==v`, comma-separated: what the staging server sends; anything else is a
//! 400), and pages with `limit`/`continue` the way an etcd-backed list does: a page
//! covers `limit` pods of the namespace before filtering, so a page can come back
//! empty with a `continue` token. It can be told to answer a status, garbage, or a
//! JSON body that is not a pod list.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

use crate::stage_serve::{bundle, mkfifo, multipart, serve_must_exit, Stage};
use crate::support::pki::Pki;
use crate::support::{wait_for, BIN};

/// How the stand-in misbehaves.
#[derive(Clone, Copy, PartialEq)]
enum Fault {
    Status(u16),
    /// 200 with a body that is not a pod list.
    Garbage,
    /// 200 with this JSON body (well-formed, but not a pod list).
    Json(&'static str),
}

struct Pod {
    name: String,
    namespace: String,
    labels: BTreeMap<String, String>,
}

struct KubeState {
    pods: Vec<Pod>,
    token: String,
    fault: Option<Fault>,
    /// (namespace, labelSelector, Authorization) of every pods request.
    seen: Vec<(String, String, String)>,
}

struct FakeKube {
    addr: SocketAddr,
    state: Arc<Mutex<KubeState>>,
}

impl FakeKube {
    /// Starts the stand-in on its own thread and runtime; TLS when `tls` is given.
    fn start(token: &str, tls: Option<Arc<rustls::ServerConfig>>) -> FakeKube {
        let state = Arc::new(Mutex::new(KubeState {
            pods: Vec::new(),
            token: token.to_owned(),
            fault: None,
            seen: Vec::new(),
        }));
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        std_listener.set_nonblocking(true).unwrap();
        let addr = std_listener.local_addr().unwrap();
        let shared = state.clone();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(std_listener).unwrap();
                let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
                loop {
                    let Ok((stream, _)) = listener.accept().await else {
                        continue;
                    };
                    let state = shared.clone();
                    let acceptor = acceptor.clone();
                    tokio::spawn(async move {
                        let service = hyper::service::service_fn(move |req| {
                            let state = state.clone();
                            async move { Ok::<_, Infallible>(answer(&state, &req)) }
                        });
                        let http = hyper::server::conn::http1::Builder::new();
                        let _ = match acceptor {
                            Some(acceptor) => match acceptor.accept(stream).await {
                                Ok(stream) => {
                                    http.serve_connection(TokioIo::new(stream), service).await
                                }
                                Err(_) => return,
                            },
                            None => http.serve_connection(TokioIo::new(stream), service).await,
                        };
                    });
                }
            });
        });
        FakeKube { addr, state }
    }

    fn add_pod(&self, name: &str, namespace: &str, labels: &[(&str, &str)]) {
        self.state.lock().unwrap().pods.push(Pod {
            name: name.to_owned(),
            namespace: namespace.to_owned(),
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        });
    }

    fn remove_pod(&self, name: &str) {
        self.state.lock().unwrap().pods.retain(|p| p.name != name);
    }

    fn set_fault(&self, fault: Option<Fault>) {
        self.state.lock().unwrap().fault = fault;
    }

    fn set_token(&self, token: &str) {
        self.state.lock().unwrap().token = token.to_owned();
    }

    fn seen(&self) -> Vec<(String, String, String)> {
        self.state.lock().unwrap().seen.clone()
    }
}

fn json_answer(status: u16, body: String) -> Response<String> {
    Response::builder()
        .status(status)
        .header("Content-Type", "application/json")
        .body(body)
        .unwrap()
}

fn status_answer(code: u16, reason: &str) -> Response<String> {
    let body = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "status": "Failure",
        "reason": reason, "code": code,
    });
    json_answer(code, body.to_string())
}

/// Equality terms of a label selector; `None` for anything else.
fn parse_selector(selector: &str) -> Option<Vec<(String, String)>> {
    if selector.is_empty() {
        return Some(Vec::new());
    }
    selector
        .split(',')
        .map(|term| {
            let (k, v) = term.split_once("==").or_else(|| term.split_once('='))?;
            let bad = |s: &str| s.contains(['=', '!', '(', ')', ' ']);
            (!k.is_empty() && !bad(k) && !bad(v)).then(|| (k.to_owned(), v.to_owned()))
        })
        .collect()
}

fn answer<B>(state: &Mutex<KubeState>, req: &Request<B>) -> Response<String> {
    let mut state = state.lock().unwrap();
    let path = req.uri().path();
    let namespace = path
        .strip_prefix("/api/v1/namespaces/")
        .and_then(|rest| rest.strip_suffix("/pods"))
        .filter(|ns| !ns.contains('/'));
    let Some(namespace) = namespace.map(str::to_owned) else {
        return status_answer(404, "NotFound");
    };
    let query: BTreeMap<String, String> =
        url::form_urlencoded::parse(req.uri().query().unwrap_or("").as_bytes())
            .into_owned()
            .collect();
    let selector = query.get("labelSelector").cloned().unwrap_or_default();
    let authorization = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    state
        .seen
        .push((namespace.clone(), selector.clone(), authorization.clone()));
    if req.method() != hyper::Method::GET {
        return status_answer(405, "MethodNotAllowed");
    }
    if authorization != format!("Bearer {}", state.token) {
        return status_answer(401, "Unauthorized");
    }
    match state.fault {
        Some(Fault::Status(code)) => return status_answer(code, "InternalError"),
        Some(Fault::Garbage) => {
            return Response::builder()
                .status(StatusCode::OK)
                .body("<html>proxy error page</html>".to_owned())
                .unwrap()
        }
        Some(Fault::Json(body)) => return json_answer(200, body.to_owned()),
        None => {}
    }
    let Some(terms) = parse_selector(&selector) else {
        return status_answer(400, "BadRequest");
    };
    let in_namespace: Vec<&Pod> = state
        .pods
        .iter()
        .filter(|p| p.namespace == namespace)
        .collect();
    let offset: usize = query.get("continue").map_or(0, |c| c.parse().unwrap());
    let limit: usize = query
        .get("limit")
        .map_or(usize::MAX, |l| l.parse().unwrap());
    let end = offset.saturating_add(limit).min(in_namespace.len());
    let items: Vec<serde_json::Value> = in_namespace[offset.min(end)..end]
        .iter()
        .filter(|p| terms.iter().all(|(k, v)| p.labels.get(k) == Some(v)))
        .map(|p| {
            serde_json::json!({
                "metadata": {"name": p.name, "namespace": p.namespace, "labels": p.labels},
                "status": {"phase": "Running"},
            })
        })
        .collect();
    let mut metadata = serde_json::json!({"resourceVersion": "42"});
    if end < in_namespace.len() {
        metadata["continue"] = serde_json::Value::from(end.to_string());
    }
    let list = serde_json::json!({
        "kind": "PodList", "apiVersion": "v1", "metadata": metadata, "items": items,
    });
    json_answer(200, list.to_string())
}

/// Uploads a small bundle for `owner` (JSON); returns (id, secret).
fn upload(stage: &Stage, owner: &str) -> (String, String) {
    let payload = bundle(&[("app.jar", b"jar bytes")]);
    let (content_type, body) = multipart(&[
        ("resources", "application/octet-stream", &payload),
        ("resourcesOwner", "application/json", owner.as_bytes()),
    ]);
    let reply = stage.send(
        "POST",
        "/api/v0/resources",
        &[("Content-Type", &content_type)],
        &body,
    );
    assert_eq!(reply.status, 201, "{reply:?}\n{}", stage.stderr_text());
    let json = reply.json();
    (
        json["resourceId"].as_str().unwrap().to_owned(),
        json["resourceSecret"].as_str().unwrap().to_owned(),
    )
}

/// Downloads the bundle (marking it used); asserts 200.
fn download(stage: &Stage, (id, secret): &(String, String)) {
    let got = stage.get(
        &format!("/api/v0/resources/{id}"),
        &[("Authorization", secret)],
    );
    assert_eq!(got.status, 200, "{got:?}");
}

/// Whether the bundle is still stored (HEAD does not mark it used).
fn present(stage: &Stage, (id, secret): &(String, String)) -> bool {
    let head = stage.send(
        "HEAD",
        &format!("/api/v0/resources/{id}"),
        &[("Authorization", secret)],
        &[],
    );
    match head.status {
        200 => true,
        404 => false,
        other => panic!("HEAD {id}: {other}"),
    }
}

/// Replaces the token file in one rename, as the kubelet does.
fn write_token(path: &Path, token: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, format!("{token}\n")).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn start_stage(store: &Path, kube_api: &str, token_file: &Path, extra: &[&str]) -> Stage {
    let mut args = vec![
        "--kube-api",
        kube_api,
        "--kube-token-file",
        token_file.to_str().unwrap(),
        "--owner-check-interval",
        "1s",
        "--unused-ttl",
        "1h",
    ];
    args.extend_from_slice(extra);
    Stage::start(store, &args)
}

const DRIVER_OWNER: &str = r#"{"namespace":"spark","labels":{"spark-app-selector":"app-1","spark-role":"driver"},"ownerType":"Pod"}"#;
const LONELY_OWNER: &str = r#"{"namespace":"spark","labels":{"spark-app-selector":"app-2","spark-role":"driver"},"ownerType":"Pod"}"#;
const APP_OWNER: &str = r#"{"namespace":"spark","labels":{"spark-app-selector":"app-1"}}"#;
const WAIT: Duration = Duration::from_secs(15);

#[test]
fn downloaded_bundles_go_when_their_owner_pods_are_gone() {
    let kube = FakeKube::start("tok-1", None);
    // First in the namespace and not matching: the driver's query first gets an
    // empty page with a continue token.
    kube.add_pod("exec-1", "spark", &[("spark-app-selector", "app-1")]);
    kube.add_pod(
        "driver-1",
        "spark",
        &[
            ("spark-app-selector", "app-1"),
            ("spark-role", "driver"),
            ("extra", "x"),
        ],
    );
    // Close to LONELY_OWNER, but in another namespace or with other labels.
    kube.add_pod(
        "elsewhere",
        "other",
        &[("spark-app-selector", "app-2"), ("spark-role", "driver")],
    );
    kube.add_pod(
        "half",
        "spark",
        &[("spark-app-selector", "app-2"), ("spark-role", "executor")],
    );
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    write_token(&token, "tok-1");
    let api = format!("http://{}", kube.addr);
    let stage = start_stage(&dir.path().join("store"), &api, &token, &[]);

    let kept = upload(&stage, DRIVER_OWNER);
    let never_downloaded = upload(&stage, DRIVER_OWNER);
    let lonely = upload(&stage, LONELY_OWNER);
    // Kept by exec-1 throughout (so checks keep running).
    let app = upload(&stage, APP_OWNER);
    download(&stage, &kept);
    download(&stage, &lonely);
    download(&stage, &app);

    assert!(
        wait_for(WAIT, || !present(&stage, &lonely)),
        "a bundle without owner pods stayed:\n{}",
        stage.stderr_text()
    );
    // Several checks later, the driver's bundle is still there.
    let checks = stage.metric("owner_checks_total");
    assert!(wait_for(WAIT, || stage.metric("owner_checks_total") >= checks + 2));
    assert!(present(&stage, &kept), "{}", stage.stderr_text());
    assert!(present(&stage, &never_downloaded));

    kube.remove_pod("driver-1");
    assert!(
        wait_for(WAIT, || !present(&stage, &kept)),
        "the driver's bundle stayed after the driver pod was deleted:\n{}",
        stage.stderr_text()
    );
    // Never downloaded: left to --unused-ttl, whatever the pods.
    let checks = stage.metric("owner_checks_total");
    assert!(wait_for(WAIT, || stage.metric("owner_checks_total") > checks));
    assert!(present(&stage, &never_downloaded));
    assert!(present(&stage, &app));
    assert_eq!(stage.metric("expirations_total"), 2);
    assert_eq!(stage.metric("owner_check_errors_total"), 0);
    assert_eq!(stage.metric("bundles_stored"), 2);

    let seen = kube.seen();
    let selector = "spark-app-selector=app-1,spark-role=driver";
    assert!(
        seen.iter()
            .all(|(ns, _, auth)| ns == "spark" && auth == "Bearer tok-1"),
        "{seen:?}"
    );
    assert!(seen.iter().any(|(_, s, _)| s == selector), "{seen:?}");
    let (code, stderr) = stage.stop();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!("bundle {} expired (owner pods gone", kept.0)),
        "{stderr}"
    );
    assert!(!stderr.contains("tok-1"), "the token leaked:\n{stderr}");
}

#[test]
fn api_errors_delete_nothing_and_the_token_is_re_read() {
    let kube = FakeKube::start("tok-A", None);
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    write_token(&token, "tok-A");
    let api = format!("http://{}", kube.addr);
    let stage = start_stage(&dir.path().join("store"), &api, &token, &[]);
    let orphan = upload(&stage, DRIVER_OWNER);
    let errors = |n| wait_for(WAIT, || stage.metric("owner_check_errors_total") >= n);

    // No pod matches, but every answer is a failure: nothing may go.
    kube.set_fault(Some(Fault::Status(500)));
    download(&stage, &orphan);
    assert!(errors(2), "{}", stage.stderr_text());
    assert!(present(&stage, &orphan));
    kube.set_fault(Some(Fault::Garbage));
    let so_far = stage.metric("owner_check_errors_total");
    assert!(errors(so_far + 2), "{}", stage.stderr_text());
    assert!(present(&stage, &orphan));
    // The token rotates on the API side first: 401 until the file catches up.
    kube.set_fault(None);
    kube.set_token("tok-B");
    let so_far = stage.metric("owner_check_errors_total");
    assert!(errors(so_far + 2), "{}", stage.stderr_text());
    assert!(present(&stage, &orphan));
    assert_eq!(stage.metric("expirations_total"), 0);

    write_token(&token, "tok-B");
    assert!(
        wait_for(WAIT, || !present(&stage, &orphan)),
        "not expired after the token file was rotated:\n{}",
        stage.stderr_text()
    );
    assert!(kube
        .seen()
        .iter()
        .any(|(_, _, auth)| auth == "Bearer tok-B"));
    let (code, stderr) = stage.stop();
    assert_eq!(code, Some(0), "{stderr}");
    for needle in [
        "500 Internal Server Error",
        "not a pod list",
        "401 Unauthorized",
    ] {
        assert!(stderr.contains(needle), "no {needle:?} in:\n{stderr}");
    }
    assert!(
        !stderr.contains("tok-A") && !stderr.contains("tok-B"),
        "a token leaked:\n{stderr}"
    );
}

#[test]
fn answers_that_are_not_pod_lists_delete_nothing() {
    let kube = FakeKube::start("tok-L", None);
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    write_token(&token, "tok-L");
    let api = format!("http://{}", kube.addr);
    let stage = start_stage(&dir.path().join("store"), &api, &token, &[]);
    let orphan = upload(&stage, DRIVER_OWNER);
    let errors = |n| wait_for(WAIT, || stage.metric("owner_check_errors_total") >= n);
    download(&stage, &orphan);
    // No pod matches the owner: only the shape of the answer keeps the bundle.
    for body in [
        r#"{"kind":"ServiceList","apiVersion":"v1","metadata":{},"items":[]}"#,
        r#"{"items":[]}"#,
        r#"{"kind":"PodList","apiVersion":"v2","metadata":{},"items":[]}"#,
        r#"{"kind":"PodList","apiVersion":"v1","metadata":{}}"#,
    ] {
        kube.set_fault(Some(Fault::Json(body)));
        let so_far = stage.metric("owner_check_errors_total");
        assert!(errors(so_far + 2), "{body}: {}", stage.stderr_text());
        assert!(present(&stage, &orphan), "{body}: {}", stage.stderr_text());
    }
    assert_eq!(stage.metric("expirations_total"), 0);
    // A real (empty) pod list: now it goes.
    kube.set_fault(None);
    assert!(
        wait_for(WAIT, || !present(&stage, &orphan)),
        "{}",
        stage.stderr_text()
    );
    let (code, stderr) = stage.stop();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains(r#"not a pod list (kind "ServiceList""#),
        "{stderr}"
    );
}

#[test]
fn a_token_file_swapped_for_a_fifo_fails_the_check_without_hanging() {
    let kube = FakeKube::start("tok-F", None);
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    write_token(&token, "tok-F");
    let api = format!("http://{}", kube.addr);
    let stage = start_stage(&dir.path().join("store"), &api, &token, &[]);
    let orphan = upload(&stage, DRIVER_OWNER);
    download(&stage, &orphan);
    let fifo = dir.path().join("token.fifo");
    mkfifo(&fifo);
    std::fs::rename(&fifo, &token).unwrap();
    assert!(
        wait_for(WAIT, || stage.metric("owner_check_errors_total") >= 2),
        "{}",
        stage.stderr_text()
    );
    assert!(present(&stage, &orphan));
    let (code, stderr) = stage.stop();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("not a regular file"), "{stderr}");
}

#[test]
fn owner_checks_over_tls_trust_only_the_given_ca() {
    let pki = Pki::new();
    let kube = FakeKube::start("tok-tls", Some(pki.server_config()));
    kube.add_pod(
        "driver",
        "spark",
        &[("spark-app-selector", "app-1"), ("spark-role", "driver")],
    );
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    write_token(&token, "tok-tls");
    let ca = dir.path().join("ca.crt");
    std::fs::write(&ca, &pki.ca_pem).unwrap();
    let api = format!("https://127.0.0.1:{}", kube.addr.port());
    let ca_arg = ["--kube-ca-cert", ca.to_str().unwrap()];

    let stage = start_stage(&dir.path().join("store"), &api, &token, &ca_arg);
    let kept = upload(&stage, DRIVER_OWNER);
    let lonely = upload(&stage, LONELY_OWNER);
    download(&stage, &kept);
    download(&stage, &lonely);
    assert!(
        wait_for(WAIT, || !present(&stage, &lonely)),
        "{}",
        stage.stderr_text()
    );
    assert!(present(&stage, &kept));
    assert_eq!(stage.metric("owner_check_errors_total"), 0);
    drop(stage);

    // Another CA: the handshake fails, which deletes nothing.
    let other = dir.path().join("other-ca.crt");
    std::fs::write(&other, Pki::new().ca_pem).unwrap();
    let stage = start_stage(
        &dir.path().join("store2"),
        &api,
        &token,
        &["--kube-ca-cert", other.to_str().unwrap()],
    );
    let orphan = upload(&stage, LONELY_OWNER);
    download(&stage, &orphan);
    assert!(
        wait_for(WAIT, || stage.metric("owner_check_errors_total") >= 2),
        "{}",
        stage.stderr_text()
    );
    assert!(present(&stage, &orphan));
}

#[test]
fn owner_check_configuration() {
    let dir = tempfile::tempdir().unwrap();
    // Not in a cluster, no --kube-api: off, said once.
    let stage = Stage::start(&dir.path().join("store"), &[]);
    let (code, stderr) = stage.stop();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("owner checks off: not in a cluster and no --kube-api"),
        "{stderr}"
    );

    let serve = |args: &[&str]| {
        let out = std::process::Command::new(BIN)
            .args(["stage", "serve", "--listen", "127.0.0.1:0", "--store"])
            .arg(dir.path().join("store"))
            .args(args)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env_remove("SPARK_LOCALIZER_LOG")
            .env("SPARK_LOCALIZER_STAGE_UPLOAD_AUTH", "none")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let missing = dir.path().join("no-such-token");
    let cases: [(&[&str], &str); 4] = [
        (
            &[
                "--kube-api",
                "http://127.0.0.1:1",
                "--kube-token-file",
                missing.to_str().unwrap(),
            ],
            "--kube-token-file",
        ),
        (&["--kube-api", "ftp://x"], "--kube-api"),
        (&["--owner-check-interval", "0s"], "--owner-check-interval"),
        (
            &[
                "--kube-api",
                "https://127.0.0.1:1",
                "--kube-ca-cert",
                missing.to_str().unwrap(),
            ],
            "--kube-ca-cert",
        ),
    ];
    for (args, needle) in cases {
        let (code, stderr) = serve(args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }

    // A fifo is refused at once (not waited on for a writer).
    let fifo = dir.path().join("fifo");
    mkfifo(&fifo);
    let token = dir.path().join("token");
    write_token(&token, "tok");
    let fifo_cases: [(&[&str], &str); 2] = [
        (
            &[
                "--kube-api",
                "http://127.0.0.1:1",
                "--kube-token-file",
                fifo.to_str().unwrap(),
            ],
            "--kube-token-file",
        ),
        (
            &[
                "--kube-api",
                "https://127.0.0.1:1",
                "--kube-token-file",
                token.to_str().unwrap(),
                "--kube-ca-cert",
                fifo.to_str().unwrap(),
            ],
            "--kube-ca-cert",
        ),
    ];
    for (args, flag) in fifo_cases {
        let (code, stderr) =
            serve_must_exit(&dir.path().join("store"), args, Duration::from_secs(10));
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(
            stderr.contains(flag) && stderr.contains("not a regular file"),
            "{args:?}: {stderr}"
        );
    }
}
