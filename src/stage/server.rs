//! `stage serve`: the HTTP(S) listener, the v0 handlers, metrics, request logs and
//! the expiry sweeper.
//!
//! Choices on the wire:
//! - An unknown (or malformed, or expired) id is 404 whatever the secret; a known id
//!   with a missing or wrong secret is 401, as in the original server. Ids carry 128
//!   random bits, so telling the two apart does not help anyone guess one.
//! - Uploads answer 201. Part content types are not checked (clients send the owner
//!   JSON as `application/json` or `text/plain`); unknown parts are skipped.
//! - A refused upload answers JSON `{"error": ...}`: 400 for a malformed body, a part
//!   missing or repeated, data that is not gzip, or an archive that [`crate::archive`]
//!   refuses (with the `--archive-max-*` limits of `stage serve`); 413 past `--max-upload-bytes`. The rest of a refused
//!   body is read and discarded for a few seconds, so a client still sending reads the
//!   answer rather than a connection reset.
//! - Downloads carry `ETag` (the quoted sha256), [`api::HEADER_SHA256`] and
//!   `Accept-Ranges`; one `bytes=` range is served as 206 (honouring `If-Range`),
//!   a range past the end is 416, several ranges get the whole bundle.
//! - Logs: one line per request (method, path, status, bytes in and out, duration);
//!   never a header value, so never a secret, and a resource path's segment that is
//!   not a valid id (a secret sent in its place) shows as `<not an id>`.

use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::{Body, Bytes};
use axum::extract::{Path as UrlPath, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine;
use futures_util::StreamExt;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use hyper_util::service::TowerToHyperService;
use rustls::crypto::SecureRandom;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tracing::{debug, error, info, warn};

use super::api::{self, ErrorBody, ResourceOwner, SubmittedResource};
use super::owners::OwnerChecker;
use super::store::{BundleMeta, LocalStore, Store, META_VERSION};
use super::store_s3::{OpenError, S3Store, StoreLocation};
use crate::archive::{self, Limits};
use crate::cli::ServeArgs;
use crate::cmd::exit::ExitCode;
use crate::origin::Origin;
use crate::s3::settings::S3Settings;
use crate::util::fs::{read_regular, CONFIG_LIMIT};
use crate::util::redact::error_chain;

/// Largest owner JSON part.
const OWNER_MAX_BYTES: usize = 64 * 1024;
/// Multipart framing and the owner part, on top of `--max-upload-bytes`.
const MULTIPART_SLACK: u64 = 1024 * 1024;
/// How long (and how much of) a refused request body is read and discarded.
const LINGER: Duration = Duration::from_secs(5);
const LINGER_BYTES: u64 = 256 * 1024 * 1024;
/// Requests in flight get this long to finish after SIGTERM/SIGINT.
const GRACE: Duration = Duration::from_secs(10);
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// An upload that sends nothing for this long is abandoned.
const BODY_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
const SWEEP_MAX_INTERVAL: Duration = Duration::from_secs(60);
const SWEEP_MIN_INTERVAL: Duration = Duration::from_millis(100);
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Runs the staging server until SIGTERM or SIGINT; 0 after a clean stop.
pub(crate) async fn serve(args: &ServeArgs) -> ExitCode {
    match start(args).await {
        Ok(()) => ExitCode::Ok,
        Err(Failure { code, message }) => {
            error!("{message}");
            code
        }
    }
}

/// Why the server could not start.
struct Failure {
    code: ExitCode,
    message: String,
}

async fn start(args: &ServeArgs) -> Result<(), Failure> {
    let config_error = |message| Failure {
        code: ExitCode::Config,
        message,
    };
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(tls_config(cert, key).map_err(config_error)?),
        _ => None,
    };
    let owners = OwnerChecker::from_args(args).map_err(|e| config_error(error_chain(&e)))?;
    let store = open_store(args).await?;
    let listener = TcpListener::bind(args.listen)
        .await
        .map_err(|e| config_error(format!("--listen {}: cannot listen: {e}", args.listen)))?;
    let addr = listener
        .local_addr()
        .map_err(|e| config_error(format!("--listen {}: {e}", args.listen)))?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    announce(&format!("listening on {scheme}://{addr}"));
    let state = Arc::new(AppState {
        store,
        metrics: Metrics::default(),
        policy: Policy {
            unused_ttl: args.unused_ttl,
            max_ttl: args.max_ttl,
        },
        owners,
        max_upload: args.max_upload_bytes,
        limits: Limits {
            max_bytes: args.archive_max_bytes,
            max_entries: args.archive_max_entries,
            max_ratio: args.archive_max_ratio,
        },
        rng: rustls::crypto::aws_lc_rs::default_provider().secure_random,
    });
    let stored = state.store.list().await.map(|l| l.len()).unwrap_or(0);
    info!(
        "staging server on {scheme}://{addr}: store {}, {stored} bundle(s), uploads up to {} bytes, unused bundles kept {:?}, any bundle kept {:?}",
        args.store.display(),
        args.max_upload_bytes,
        args.unused_ttl,
        args.max_ttl
    );
    let sweeper = tokio::spawn(sweeper(state.clone()));
    let store = state.store.clone();
    accept_loop(
        listener,
        tls.map(tokio_rustls::TlsAcceptor::from),
        router(state),
    )
    .await;
    sweeper.abort();
    store.close();
    info!("staging server stopped");
    Ok(())
}

/// Prints the one stdout line tests and wrappers wait for.
fn announce(line: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Opens `--store`: a directory, or a bucket (`s3://`, `s3a://`). A store that
/// cannot be used is exit 6, a `--store` or S3 setting that cannot work exit 2.
async fn open_store(args: &ServeArgs) -> Result<Arc<dyn Store>, Failure> {
    let failure = |code, message| Failure { code, message };
    let root = match StoreLocation::parse(&args.store) {
        Ok(StoreLocation::Dir(root)) => root,
        Ok(StoreLocation::Bucket(bucket)) => {
            let settings = S3Settings::new(s3_credentials_dir(args), None);
            return match S3Store::open(bucket, &settings).await {
                Ok(store) => Ok(Arc::new(store)),
                Err(e @ OpenError::Config(_)) => Err(failure(ExitCode::Config, e.to_string())),
                Err(e @ OpenError::Unusable(_)) => Err(failure(ExitCode::LocalIo, e.to_string())),
            };
        }
        Err(why) => {
            let shown = crate::util::redact::redact_url(&args.store.to_string_lossy());
            return Err(failure(ExitCode::Config, format!("--store {shown}: {why}")));
        }
    };
    let dir = root.clone();
    let opened = tokio::task::spawn_blocking(move || LocalStore::open(&dir)).await;
    let local_io = |e: &dyn std::fmt::Display| {
        failure(
            ExitCode::LocalIo,
            format!("--store {}: {e}", root.display()),
        )
    };
    match opened {
        Ok(Ok(store)) => Ok(Arc::new(store)),
        Ok(Err(e)) => Err(local_io(&e)),
        Err(e) => Err(local_io(&e)),
    }
}

/// `--s3-credentials-dir` of `stage serve` and where it came from.
fn s3_credentials_dir(args: &ServeArgs) -> Option<(PathBuf, Origin)> {
    let dir = args.s3_credentials_dir.clone()?;
    let from_env = std::env::var_os(crate::env_vars::STAGE_S3_CREDENTIALS_DIR)
        .is_some_and(|v| Path::new(&v) == dir);
    let origin = if from_env {
        Origin::Env(crate::env_vars::STAGE_S3_CREDENTIALS_DIR)
    } else {
        Origin::Flag("s3-credentials-dir")
    };
    Some((dir, origin))
}

/// A rustls server configuration from PEM files (HTTP/1.1 over ALPN). Each file
/// must be a regular file (a fifo is refused rather than waited on).
fn tls_config(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>, String> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let read = |flag: &str, path: &Path| {
        read_regular(path, CONFIG_LIMIT)
            .map_err(|e| format!("{flag} {}: cannot read: {e}", path.display()))
    };
    let cert_pem = read("--tls-cert", cert)?;
    let key_pem = read("--tls-key", key)?;
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("--tls-cert {}: {e}", cert.display()))?;
    if chain.is_empty() {
        return Err(format!(
            "--tls-cert {}: no CERTIFICATE block found",
            cert.display()
        ));
    }
    let key_der = PrivateKeyDer::from_pem_slice(&key_pem)
        .map_err(|e| format!("--tls-key {}: {e}", key.display()))?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("--tls-cert: {e}"))?
        .with_no_client_auth()
        .with_single_cert(chain, key_der)
        .map_err(|e| {
            format!(
                "--tls-cert {} / --tls-key {}: {e}",
                cert.display(),
                key.display()
            )
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Accepts connections until a signal, then lets requests in flight finish (at
/// most [`GRACE`]).
async fn accept_loop(listener: TcpListener, tls: Option<tokio_rustls::TlsAcceptor>, app: Router) {
    let graceful = GracefulShutdown::new();
    let mut signal = std::pin::pin!(wait_for_signal());
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors and the like: do not spin.
                    warn!("cannot accept a connection: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            name = &mut signal => {
                info!("received {name}: finishing requests in flight, then stopping");
                break;
            }
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(app.clone());
        let watcher = graceful.watcher();
        let tls = tls.clone();
        tokio::spawn(async move {
            let Some(acceptor) = tls else {
                return serve_connection(stream, service, watcher).await;
            };
            match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(stream)) => serve_connection(stream, service, watcher).await,
                Ok(Err(e)) => debug!("TLS handshake with {peer} failed: {e}"),
                Err(_) => debug!("TLS handshake with {peer} timed out"),
            }
        });
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(GRACE) => {
            warn!("requests still in flight after {GRACE:?}; stopping anyway");
        }
    }
}

async fn serve_connection<S>(stream: S, service: TowerToHyperService<Router>, watcher: Watcher)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    if let Err(e) = watcher.watch(conn).await {
        debug!("connection ended: {e}");
    }
}

async fn wait_for_signal() -> &'static str {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        warn!("cannot install signal handlers; stop the server with SIGKILL");
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    }
}

/// What every handler shares.
struct AppState {
    store: Arc<dyn Store>,
    metrics: Metrics,
    policy: Policy,
    /// Owner checks against the Kubernetes API; `None` when off.
    owners: Option<Arc<OwnerChecker>>,
    max_upload: u64,
    limits: Limits,
    rng: &'static dyn SecureRandom,
}

fn router(state: Arc<AppState>) -> Router {
    let resource = format!("{}/{{id}}", api::RESOURCES_PATH);
    Router::new()
        .route(api::RESOURCES_PATH, post(upload))
        .route(&format!("{}/", api::RESOURCES_PATH), post(upload))
        .route(&resource, get(download).delete(remove))
        .route(api::PING_PATH, get(|| async { text("pong") }))
        .route(api::HEALTHZ_PATH, get(|| async { text("ok") }))
        .route(api::METRICS_PATH, get(metrics))
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "no such endpoint") })
        .with_state(state)
        .layer(middleware::from_fn(log_request))
}

fn text(body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], body).into_response()
}

/// An error answer: JSON `{"error": ...}`.
#[derive(Debug)]
struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
        }
    }

    fn bad(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }

    fn not_found() -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "no such resource")
    }

    fn too_large(max: u64) -> ApiError {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the bundle is larger than the server's limit of {max} bytes (--max-upload-bytes)"
            ),
        )
    }

    /// A server-side failure: the detail goes to the log, not to the client.
    fn internal(what: &str, e: impl std::fmt::Display) -> ApiError {
        error!("{what}: {e}");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("{what} (see the server log)"),
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (
            self.status,
            Json(ErrorBody {
                error: self.message,
            }),
        )
            .into_response();
        let headers = response.headers_mut();
        if self.status == StatusCode::UNAUTHORIZED {
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if self.status == StatusCode::PAYLOAD_TOO_LARGE {
            headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        response
    }
}

// ---- upload ----

/// Deletes the spooled upload unless it was committed (moved away).
struct Spool(PathBuf);

impl Drop for Spool {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

async fn upload(
    State(st): State<Arc<AppState>>,
    req: Request,
) -> Result<(StatusCode, Json<SubmittedResource>), ApiError> {
    let boundary = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|ct| multer::parse_boundary(ct).ok())
        .ok_or_else(|| {
            ApiError::bad(format!(
                "expected a multipart/form-data body with parts '{}' and '{}'",
                api::PART_RESOURCES,
                api::PART_OWNER
            ))
        })?;
    let body_limit = st.max_upload.saturating_add(MULTIPART_SLACK);
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|len| len > body_limit) {
        // Unless the client waits for "100 Continue", it is sending the body anyway.
        let expects = req.headers().contains_key(header::EXPECT);
        if !expects {
            tokio::spawn(linger(req.into_body().into_data_stream()));
        }
        return Err(ApiError::too_large(st.max_upload));
    }
    let too_large = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel(4);
    tokio::spawn(pump(req.into_body(), tx, body_limit, too_large.clone()));
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    let mut multipart = multer::Multipart::new(stream, boundary);
    let spool = Spool(
        st.store
            .spool_dir()
            .join(format!("upload-{}.part", hex::encode(random::<8>(st.rng)?))),
    );
    let received = receive(&st, &mut multipart, &spool.0).await;
    let received = received.map_err(|e| {
        if too_large.load(Ordering::SeqCst) {
            ApiError::too_large(st.max_upload)
        } else {
            e
        }
    })?;
    let submitted = commit(&st, &spool.0, received).await?;
    Ok((StatusCode::CREATED, Json(submitted)))
}

/// Feeds the request body to the multipart parser, counting it against `limit`;
/// then lingers on what the parser did not read.
async fn pump(
    body: Body,
    tx: mpsc::Sender<Result<Bytes, io::Error>>,
    limit: u64,
    too_large: Arc<AtomicBool>,
) {
    let mut stream = body.into_data_stream();
    let mut total: u64 = 0;
    loop {
        let chunk = match tokio::time::timeout(BODY_IDLE_TIMEOUT, stream.next()).await {
            Ok(Some(Ok(chunk))) => chunk,
            Ok(None) => break,
            Ok(Some(Err(e))) => {
                let _ = tx.send(Err(io::Error::other(e))).await;
                return;
            }
            Err(_) => {
                let stalled = format!("no data for {BODY_IDLE_TIMEOUT:?}");
                let _ = tx.send(Err(io::Error::other(stalled))).await;
                return;
            }
        };
        total = total.saturating_add(chunk.len() as u64);
        if total > limit {
            too_large.store(true, Ordering::SeqCst);
            let _ = tx
                .send(Err(io::Error::other("request body too large")))
                .await;
            break;
        }
        if tx.send(Ok(chunk)).await.is_err() {
            break; // the handler stopped reading: it has answered
        }
    }
    drop(tx);
    linger(stream).await;
}

/// Reads and discards the rest of a refused body for a moment, so that a client
/// still sending reads the answer instead of a connection reset.
async fn linger(mut stream: axum::body::BodyDataStream) {
    let drain = async {
        let mut drained: u64 = 0;
        while let Some(Ok(chunk)) = stream.next().await {
            drained += chunk.len() as u64;
            if drained > LINGER_BYTES {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(LINGER, drain).await;
}

/// An upload read to its end: the spooled bundle's size and sha256, and its owner.
struct Received {
    size: u64,
    sha256: String,
    owner: ResourceOwner,
}

async fn receive(
    st: &AppState,
    multipart: &mut multer::Multipart<'_>,
    spool: &Path,
) -> Result<Received, ApiError> {
    let mut bundle = None;
    let mut owner = None;
    while let Some(field) = multipart.next_field().await.map_err(multipart_error)? {
        match field.name() {
            Some(api::PART_RESOURCES) => {
                if bundle.is_some() {
                    return Err(repeated(api::PART_RESOURCES));
                }
                bundle = Some(spool_bundle(field, spool, st.max_upload).await?);
            }
            Some(api::PART_OWNER) => {
                if owner.is_some() {
                    return Err(repeated(api::PART_OWNER));
                }
                owner = Some(read_owner(field).await?);
            }
            _ => {} // skipped by the next next_field()
        }
    }
    let (size, sha256) = bundle.ok_or_else(|| {
        ApiError::bad(format!(
            "the body has no part '{}' (the tar.gz of the files)",
            api::PART_RESOURCES
        ))
    })?;
    let owner = owner.ok_or_else(|| {
        ApiError::bad(format!(
            "the body has no part '{}' (the owner JSON)",
            api::PART_OWNER
        ))
    })?;
    Ok(Received {
        size,
        sha256,
        owner,
    })
}

fn repeated(part: &str) -> ApiError {
    ApiError::bad(format!("part '{part}' appears more than once"))
}

fn multipart_error(e: multer::Error) -> ApiError {
    ApiError::bad(format!("malformed multipart body: {e}"))
}

fn not_gzip() -> ApiError {
    ApiError::bad(format!(
        "part '{}' is not gzip data (expected a tar.gz)",
        api::PART_RESOURCES
    ))
}

/// Streams the bundle part into `path` (fsynced); returns its size and sha256.
async fn spool_bundle(
    mut field: multer::Field<'_>,
    path: &Path,
    max: u64,
) -> Result<(u64, String), ApiError> {
    let storing = "cannot store the upload";
    let mut file = tokio::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .await
        .map_err(|e| ApiError::internal(storing, e))?;
    let mut hasher = Sha256::new();
    let mut size: u64 = 0;
    let mut head: Vec<u8> = Vec::with_capacity(2);
    while let Some(chunk) = field.chunk().await.map_err(multipart_error)? {
        size = size.saturating_add(chunk.len() as u64);
        if size > max {
            return Err(ApiError::too_large(max));
        }
        if head.len() < 2 {
            head.extend(chunk.iter().take(2 - head.len()));
            if head.len() == 2 && head != GZIP_MAGIC {
                return Err(not_gzip());
            }
        }
        hasher.update(&chunk);
        file.write_all(&chunk)
            .await
            .map_err(|e| ApiError::internal(storing, e))?;
    }
    if head != GZIP_MAGIC {
        return Err(not_gzip());
    }
    file.flush()
        .await
        .and(file.sync_all().await)
        .map_err(|e| ApiError::internal(storing, e))?;
    Ok((size, hex::encode(hasher.finalize())))
}

async fn read_owner(mut field: multer::Field<'_>) -> Result<ResourceOwner, ApiError> {
    let mut json = Vec::new();
    while let Some(chunk) = field.chunk().await.map_err(multipart_error)? {
        json.extend_from_slice(&chunk);
        if json.len() > OWNER_MAX_BYTES {
            return Err(ApiError::bad(format!(
                "part '{}' is larger than {OWNER_MAX_BYTES} bytes",
                api::PART_OWNER
            )));
        }
    }
    ResourceOwner::parse(&json).map_err(ApiError::bad)
}

/// Validates the spooled bundle, gives it an id and a secret, and commits it.
async fn commit(
    st: &AppState,
    spooled: &Path,
    received: Received,
) -> Result<SubmittedResource, ApiError> {
    let (path, limits) = (spooled.to_path_buf(), st.limits);
    let checked = tokio::task::spawn_blocking(move || archive::validate_tar_gz(&path, &limits))
        .await
        .map_err(|e| ApiError::internal("cannot check the upload", e))?;
    let unpacked = match checked {
        Ok(unpacked) => unpacked,
        Err(e) if e.is_refusal() => {
            return Err(ApiError::bad(format!(
                "part '{}' is refused: {e}",
                api::PART_RESOURCES
            )));
        }
        Err(e) => return Err(ApiError::internal("cannot check the upload", e)),
    };
    let id = hex::encode(random::<16>(st.rng)?);
    let secret = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(random::<{ api::RESOURCE_SECRET_BYTES }>(st.rng)?);
    let meta = BundleMeta {
        version: META_VERSION,
        id: id.clone(),
        secret_sha256: hex::encode(Sha256::digest(secret.as_bytes())),
        size: received.size,
        sha256: received.sha256,
        owner: received.owner,
        created_ms: now_ms(),
        first_download_ms: None,
    };
    st.store
        .commit(spooled, &meta)
        .await
        .map_err(|e| ApiError::internal("cannot store the upload", e))?;
    st.metrics.uploads.fetch_add(1, Ordering::Relaxed);
    st.metrics
        .upload_bytes
        .fetch_add(meta.size, Ordering::Relaxed);
    info!(
        "stored bundle {id}: {} bytes, {} entries, sha256 {}, owner namespace \"{}\"",
        meta.size,
        unpacked.entries,
        meta.sha256,
        meta.owner.namespace.escape_debug()
    );
    Ok(SubmittedResource {
        resource_id: id,
        resource_secret: secret,
    })
}

fn random<const N: usize>(rng: &dyn SecureRandom) -> Result<[u8; N], ApiError> {
    let mut buf = [0u8; N];
    rng.fill(&mut buf)
        .map_err(|e| ApiError::internal("no secure random numbers", format!("{e:?}")))?;
    Ok(buf)
}

// ---- download, HEAD, DELETE ----

/// The bundle `id` if it exists and has not expired (404 otherwise).
async fn find(st: &AppState, id: &str) -> Result<BundleMeta, ApiError> {
    if !api::is_resource_id(id) {
        return Err(ApiError::not_found());
    }
    let meta = st
        .store
        .meta(id)
        .await
        .map_err(|e| ApiError::internal("cannot read the store", e))?
        .ok_or_else(ApiError::not_found)?;
    if let Some(why) = st.policy.expired(&meta, now_ms()) {
        expire(st, &meta, why).await;
        return Err(ApiError::not_found());
    }
    Ok(meta)
}

/// [`find`], then the secret: 401 when it is missing or wrong (compared as sha256
/// hashes, in constant time).
async fn authorize(st: &AppState, id: &str, headers: &HeaderMap) -> Result<BundleMeta, ApiError> {
    let meta = find(st, id).await?;
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(api::secret_from_authorization)
        .unwrap_or("");
    let refusal = if presented.is_empty() {
        Some("missing the resource secret (header Authorization)")
    } else {
        let hash = Sha256::digest(presented.as_bytes());
        let stored = hex::decode(&meta.secret_sha256).unwrap_or_default();
        let same = stored.len() == hash.len() && bool::from(hash.as_slice().ct_eq(&stored));
        (!same).then_some("wrong resource secret")
    };
    if let Some(why) = refusal {
        st.metrics.auth_failures.fetch_add(1, Ordering::Relaxed);
        return Err(ApiError::new(StatusCode::UNAUTHORIZED, why));
    }
    Ok(meta)
}

async fn download(
    State(st): State<Arc<AppState>>,
    UrlPath(id): UrlPath<String>,
    method: Method,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let meta = authorize(&st, &id, &headers).await?;
    let etag = format!("\"{}\"", meta.sha256);
    let range = headers
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok())
        .filter(|_| if_range_matches(&headers, &etag))
        .map_or(Span::Full, |r| parse_range(r, meta.size));
    let (status, start, len) = match range {
        Span::Full => (StatusCode::OK, 0, meta.size),
        Span::Part(start, end) => (StatusCode::PARTIAL_CONTENT, start, end - start + 1),
        Span::Unsatisfiable => {
            let response = Response::builder()
                .status(StatusCode::RANGE_NOT_SATISFIABLE)
                .header(header::CONTENT_RANGE, format!("bytes */{}", meta.size))
                .body(Body::empty());
            return response.map_err(|e| ApiError::internal("cannot answer", e));
        }
    };
    let mut response = Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/octet-stream")
        .header(header::CONTENT_LENGTH, len)
        .header(header::ACCEPT_RANGES, "bytes")
        .header(header::ETAG, &etag)
        .header(api::HEADER_SHA256, &meta.sha256)
        .header(header::CACHE_CONTROL, "no-store");
    if status == StatusCode::PARTIAL_CONTENT {
        let range = format!("bytes {start}-{}/{}", start + len - 1, meta.size);
        response = response.header(header::CONTENT_RANGE, range);
    }
    let body = if method == Method::HEAD {
        Body::empty()
    } else {
        bundle_body(&st, &meta, start, len).await?
    };
    response
        .body(body)
        .map_err(|e| ApiError::internal("cannot answer", e))
}

/// The bundle's bytes as a response body; counts the download and marks the
/// bundle used.
/// Bytes read from the store per body chunk.
const DOWNLOAD_CHUNK: usize = 64 * 1024;

async fn bundle_body(
    st: &Arc<AppState>,
    meta: &BundleMeta,
    start: u64,
    len: u64,
) -> Result<Body, ApiError> {
    let reader = st
        .store
        .open(&meta.id, start, len)
        .await
        .map_err(|e| ApiError::internal("cannot read the bundle", e))?
        .ok_or_else(ApiError::not_found)?;
    st.metrics.downloads.fetch_add(1, Ordering::Relaxed);
    if meta.first_download_ms.is_none() {
        if let Err(e) = st.store.mark_downloaded(&meta.id, now_ms()).await {
            warn!("cannot record the first download of {}: {e}", meta.id);
        }
    }
    let counter = st.clone();
    // 64 KiB reads: far fewer trips to the blocking pool than the default 4 KiB,
    // and 200 downloads at once still hold only ~25 MiB of buffers.
    let stream =
        tokio_util::io::ReaderStream::with_capacity(reader, DOWNLOAD_CHUNK).inspect(move |chunk| {
            if let Ok(chunk) = chunk {
                let n = chunk.len() as u64;
                counter
                    .metrics
                    .download_bytes
                    .fetch_add(n, Ordering::Relaxed);
            }
        });
    Ok(Body::from_stream(stream))
}

async fn remove(
    State(st): State<Arc<AppState>>,
    UrlPath(id): UrlPath<String>,
    headers: HeaderMap,
) -> Result<StatusCode, ApiError> {
    authorize(&st, &id, &headers).await?;
    let deleted = st
        .store
        .delete(&id)
        .await
        .map_err(|e| ApiError::internal("cannot delete the bundle", e))?;
    if !deleted {
        return Err(ApiError::not_found());
    }
    info!("deleted bundle {id} on request");
    Ok(StatusCode::NO_CONTENT)
}

/// What a `Range` header asks of a bundle.
#[derive(Debug, PartialEq, Eq)]
enum Span {
    Full,
    /// First and last byte, inclusive.
    Part(u64, u64),
    Unsatisfiable,
}

/// One `bytes=` range; anything else (other units, several ranges, nonsense) is
/// served whole, as RFC 9110 allows.
fn parse_range(value: &str, size: u64) -> Span {
    let Some(spec) = value.trim().strip_prefix("bytes=") else {
        return Span::Full;
    };
    let Some((first, last)) = spec.split_once('-') else {
        return Span::Full;
    };
    if spec.contains(',') {
        return Span::Full;
    }
    let (first, last) = (first.trim(), last.trim());
    if first.is_empty() {
        return match last.parse::<u64>() {
            Ok(0) => Span::Unsatisfiable,
            Ok(_) if size == 0 => Span::Unsatisfiable,
            Ok(n) => Span::Part(size - n.min(size), size - 1),
            Err(_) => Span::Full,
        };
    }
    let Ok(start) = first.parse::<u64>() else {
        return Span::Full;
    };
    let end = if last.is_empty() {
        u64::MAX
    } else {
        match last.parse::<u64>() {
            Ok(end) if end >= start => end,
            _ => return Span::Full,
        }
    };
    if start >= size {
        return Span::Unsatisfiable;
    }
    Span::Part(start, end.min(size - 1))
}

/// No `If-Range`, or one naming the current ETag (a date never matches: the whole
/// bundle is sent, which is always correct).
fn if_range_matches(headers: &HeaderMap, etag: &str) -> bool {
    headers
        .get(header::IF_RANGE)
        .is_none_or(|v| v.as_bytes() == etag.as_bytes())
}

// ---- expiry ----

/// How long bundles are kept.
struct Policy {
    unused_ttl: Duration,
    max_ttl: Duration,
}

impl Policy {
    /// Which limit `meta` has passed at `now_ms`, if any.
    fn expired(&self, meta: &BundleMeta, now_ms: u64) -> Option<&'static str> {
        let age = Duration::from_millis(now_ms.saturating_sub(meta.created_ms));
        if age >= self.max_ttl {
            Some("older than --max-ttl")
        } else if meta.first_download_ms.is_none() && age >= self.unused_ttl {
            Some("never downloaded within --unused-ttl")
        } else {
            None
        }
    }

    /// A quarter of the shorter TTL, between 100ms and 60s.
    fn sweep_interval(&self) -> Duration {
        (self.unused_ttl.min(self.max_ttl) / 4).clamp(SWEEP_MIN_INTERVAL, SWEEP_MAX_INTERVAL)
    }
}

/// Runs the TTL sweep every [`Policy::sweep_interval`] and, when on, the owner
/// check every `--owner-check-interval`, one at a time.
async fn sweeper(st: Arc<AppState>) {
    use tokio::time::{interval, MissedTickBehavior};
    let mut ttl = interval(st.policy.sweep_interval());
    ttl.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut owner_tick = st.owners.as_ref().map(|owners| {
        let mut tick = interval(owners.interval());
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        tick
    });
    loop {
        tokio::select! {
            _ = ttl.tick() => sweep(&st).await,
            _ = async { owner_tick.as_mut().expect("guarded").tick().await }, if owner_tick.is_some() => {
                check_owners(&st).await;
            }
        }
    }
}

/// Expires the downloaded bundles whose owner pods are gone.
async fn check_owners(st: &AppState) {
    let Some(owners) = &st.owners else {
        return;
    };
    let all = match st.store.list().await {
        Ok(all) => all,
        Err(e) => {
            warn!("cannot list the store for the owner check: {e}");
            return;
        }
    };
    let outcome = owners.check(all, now_ms()).await;
    let metrics = &st.metrics;
    metrics
        .owner_checks
        .fetch_add(outcome.queries, Ordering::Relaxed);
    metrics
        .owner_check_errors
        .fetch_add(outcome.errors, Ordering::Relaxed);
    for (meta, why) in outcome.gone {
        expire(st, &meta, &why).await;
    }
}

async fn sweep(st: &AppState) {
    let all = match st.store.list().await {
        Ok(all) => all,
        Err(e) => {
            warn!("cannot list the store for expiry: {e}");
            return;
        }
    };
    let now = now_ms();
    for meta in all {
        if let Some(why) = st.policy.expired(&meta, now) {
            expire(st, &meta, why).await;
        }
    }
}

async fn expire(st: &AppState, meta: &BundleMeta, why: &str) {
    match st.store.delete(&meta.id).await {
        Ok(true) => {
            st.metrics.expirations.fetch_add(1, Ordering::Relaxed);
            info!("bundle {} expired ({why}); deleted", meta.id);
        }
        Ok(false) => {}
        Err(e) => warn!("cannot delete expired bundle {}: {e}", meta.id),
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

// ---- metrics ----

#[derive(Default)]
struct Metrics {
    uploads: AtomicU64,
    downloads: AtomicU64,
    upload_bytes: AtomicU64,
    download_bytes: AtomicU64,
    expirations: AtomicU64,
    auth_failures: AtomicU64,
    owner_checks: AtomicU64,
    owner_check_errors: AtomicU64,
}

impl Metrics {
    /// Prometheus text exposition (version 0.0.4).
    fn render(&self, stored: usize) -> String {
        let counters = [
            ("uploads_total", "Bundles stored.", &self.uploads),
            (
                "downloads_total",
                "Bundle downloads started (GET).",
                &self.downloads,
            ),
            (
                "upload_bytes_total",
                "Bytes of bundles stored.",
                &self.upload_bytes,
            ),
            (
                "download_bytes_total",
                "Bundle bytes sent.",
                &self.download_bytes,
            ),
            (
                "expirations_total",
                "Bundles deleted by expiry.",
                &self.expirations,
            ),
            (
                "auth_failures_total",
                "Requests refused for a missing or wrong secret.",
                &self.auth_failures,
            ),
            (
                "owner_checks_total",
                "Owner queries (pods lists) sent to the Kubernetes API.",
                &self.owner_checks,
            ),
            (
                "owner_check_errors_total",
                "Owner checks that failed (token, transport, refused or malformed answer); nothing is deleted for them.",
                &self.owner_check_errors,
            ),
        ];
        let mut out = String::new();
        for (name, help, value) in counters {
            let name = format!("spark_localizer_stage_{name}");
            let value = value.load(Ordering::Relaxed);
            out.push_str(&format!(
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}\n"
            ));
        }
        let name = "spark_localizer_stage_bundles_stored";
        out.push_str(&format!(
            "# HELP {name} Bundles in the store.\n# TYPE {name} gauge\n{name} {stored}\n"
        ));
        out
    }
}

async fn metrics(State(st): State<Arc<AppState>>) -> Response {
    let stored = st.store.list().await.map_or(0, |l| l.len());
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        st.metrics.render(stored),
    )
        .into_response()
}

// ---- request logs ----

/// Logs one line per request when its answer's body is done (or dropped).
async fn log_request(req: Request, next: Next) -> Response {
    let start = Instant::now();
    let method = req.method().clone();
    let path = logged_path(req.uri().path());
    let received = Arc::new(AtomicU64::new(0));
    let counter = received.clone();
    let req = req.map(|body| {
        Body::new(CountedBody {
            inner: body,
            count: counter,
        })
    });
    let response = next.run(req).await;
    let status = response.status().as_u16();
    let length = response
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse().ok());
    // Probes every few seconds would drown the rest.
    let quiet = path == api::HEALTHZ_PATH || path == api::METRICS_PATH;
    response.map(|body| {
        Body::new(LoggedBody {
            inner: body,
            sent: 0,
            done: false,
            line: RequestLine {
                method,
                path,
                status,
                received,
                start,
                quiet,
                length,
            },
        })
    })
}

/// What the log shows of a request path: a resource path's segment that is not a
/// valid id (say, a secret pasted in its place) is shown as `<not an id>`.
fn logged_path(path: &str) -> String {
    let resource = path
        .strip_prefix(api::RESOURCES_PATH)
        .and_then(|rest| rest.strip_prefix('/'));
    match resource {
        Some(rest) if !rest.is_empty() && !api::is_resource_id(rest) => {
            format!("{}/<not an id>", api::RESOURCES_PATH)
        }
        _ => path.to_owned(),
    }
}

struct CountedBody {
    inner: Body,
    count: Arc<AtomicU64>,
}

impl http_body::Body for CountedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled {
            if let Some(data) = frame.data_ref() {
                self.count.fetch_add(data.len() as u64, Ordering::Relaxed);
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

struct RequestLine {
    method: Method,
    path: String,
    status: u16,
    received: Arc<AtomicU64>,
    start: Instant,
    quiet: bool,
    /// The answer's Content-Length, if any.
    length: Option<u64>,
}

struct LoggedBody {
    inner: Body,
    sent: u64,
    /// The body ended (or was empty).
    done: bool,
    line: RequestLine,
}

impl http_body::Body for LoggedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    self.sent += data.len() as u64;
                }
            }
            Poll::Ready(None) => self.done = true,
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for LoggedBody {
    fn drop(&mut self) {
        let line = &self.line;
        let (method, path, status) = (&line.method, &line.path, line.status);
        let bytes_in = line.received.load(Ordering::Relaxed);
        let ms = line.start.elapsed().as_millis() as u64;
        let complete = self.done
            || http_body::Body::is_end_stream(&self.inner)
            || line.length == Some(self.sent);
        if line.quiet {
            debug!(%method, %path, status, bytes_in, bytes_out = self.sent, ms, "request");
        } else if complete {
            info!(%method, %path, status, bytes_in, bytes_out = self.sent, ms, "request");
        } else {
            info!(%method, %path, status, bytes_in, bytes_out = self.sent, ms, complete, "request");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        let cases = [
            ("bytes=0-9", 100, Span::Part(0, 9)),
            ("bytes=90-", 100, Span::Part(90, 99)),
            ("bytes=90-200", 100, Span::Part(90, 99)),
            ("bytes=-10", 100, Span::Part(90, 99)),
            ("bytes=-1000", 100, Span::Part(0, 99)),
            ("bytes=100-", 100, Span::Unsatisfiable),
            ("bytes=-0", 100, Span::Unsatisfiable),
            ("bytes=0-", 0, Span::Unsatisfiable),
            ("bytes=5-1", 100, Span::Full),
            ("bytes=0-1,5-6", 100, Span::Full),
            ("items=0-1", 100, Span::Full),
            ("bytes=x-", 100, Span::Full),
        ];
        for (header, size, want) in cases {
            assert_eq!(parse_range(header, size), want, "{header} of {size}");
        }
    }

    fn meta(created_ms: u64, first_download_ms: Option<u64>) -> BundleMeta {
        BundleMeta {
            version: META_VERSION,
            id: "0".repeat(32),
            secret_sha256: String::new(),
            size: 0,
            sha256: String::new(),
            owner: ResourceOwner::parse(br#"{"namespace":"ns"}"#).unwrap(),
            created_ms,
            first_download_ms,
        }
    }

    #[test]
    fn expiry() {
        let policy = Policy {
            unused_ttl: Duration::from_secs(10),
            max_ttl: Duration::from_secs(100),
        };
        assert_eq!(policy.expired(&meta(0, None), 9_999), None);
        assert!(policy.expired(&meta(0, None), 10_000).is_some());
        assert_eq!(policy.expired(&meta(0, Some(5)), 99_999), None);
        assert!(policy.expired(&meta(0, Some(5)), 100_000).is_some());
        assert_eq!(policy.sweep_interval(), Duration::from_millis(2500));
        let long = Policy {
            unused_ttl: Duration::from_secs(3600),
            max_ttl: Duration::from_secs(7200),
        };
        assert_eq!(long.sweep_interval(), SWEEP_MAX_INTERVAL);
    }

    #[test]
    fn logged_paths_hide_what_is_not_an_id() {
        let id = "0123456789abcdef0123456789abcdef";
        let cases = [
            (
                format!("/api/v0/resources/{id}"),
                format!("/api/v0/resources/{id}"),
            ),
            ("/api/v0/resources".into(), "/api/v0/resources".into()),
            ("/api/v0/resources/".into(), "/api/v0/resources/".into()),
            (
                "/api/v0/resources/q1w2e3-SECRET_x".into(),
                "/api/v0/resources/<not an id>".into(),
            ),
            (
                format!("/api/v0/resources/{id}/SECRET"),
                "/api/v0/resources/<not an id>".into(),
            ),
            ("/healthz".into(), "/healthz".into()),
        ];
        for (path, want) in cases {
            assert_eq!(logged_path(&path), want, "{path}");
        }
    }

    #[test]
    fn metrics_text() {
        let m = Metrics::default();
        m.uploads.fetch_add(2, Ordering::Relaxed);
        let text = m.render(1);
        assert!(
            text.contains("spark_localizer_stage_uploads_total 2\n"),
            "{text}"
        );
        assert!(text.contains("# TYPE spark_localizer_stage_bundles_stored gauge\nspark_localizer_stage_bundles_stored 1\n"));
    }
}
