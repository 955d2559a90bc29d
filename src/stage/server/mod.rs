//! `stage serve`: the HTTP(S) listener, the router and the serve loop. The v0
//! handlers are in [`handlers`] (one bundle) and [`receive`] (uploads), `Range`
//! parsing in [`ranges`], expiry in [`sweeper`], the counters in [`metrics`] and the
//! one-line-per-request log in [`access_log`].
//!
//! The server runs until the future the command layer hands it completes (SIGTERM
//! or SIGINT), then gives requests in flight a grace period to finish
//! ([`crate::net::server`]).

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::http::{header, StatusCode};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use rustls::crypto::SecureRandom;
use tracing::info;

use super::api;
use super::owners::{OwnerChecker, OwnerSetupError};
use super::store::{LocalStore, Store};
use super::store_s3::{OpenError, S3Store, StoreLocation};
use crate::archive::Limits;
use crate::cli::ServeArgs;
use crate::net::server;
use crate::origin::Origin;
use crate::s3::settings::S3Settings;

mod access_log;
mod auth;
mod handlers;
mod metrics;
mod quota;
mod receive;
mod review;
mod sweeper;
mod tls;

pub(crate) use auth::AuthSetupError;
pub(crate) use tls::TlsSetupError;

/// Why the staging server could not start; the message names the flag.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ServeError {
    #[error(transparent)]
    Tls(#[from] TlsSetupError),
    #[error(transparent)]
    Owners(#[from] OwnerSetupError),
    #[error(transparent)]
    Auth(#[from] AuthSetupError),
    #[error("--store {shown}: {reason}")]
    StoreLocation { shown: String, reason: String },
    #[error(transparent)]
    Bucket(#[from] OpenError),
    #[error("--store {path}")]
    Directory {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("--listen {addr}: cannot listen")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: io::Error,
    },
}

/// What kind of failure a [`ServeError`] is, for the command layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ServeErrorKind {
    /// A flag, variable or file that cannot work.
    Config,
    /// The store cannot be used (unreachable bucket, unwritable directory).
    StoreUnusable,
}

impl ServeError {
    /// Whether this is a configuration problem or an unusable store.
    pub(crate) fn kind(&self) -> ServeErrorKind {
        match self {
            ServeError::Bucket(OpenError::Unusable(_)) | ServeError::Directory { .. } => {
                ServeErrorKind::StoreUnusable
            }
            _ => ServeErrorKind::Config,
        }
    }
}

/// What every handler shares.
struct AppState {
    store: Arc<dyn Store>,
    metrics: metrics::Metrics,
    policy: sweeper::Policy,
    /// Owner checks against the Kubernetes API; `None` when off.
    owners: Option<Arc<OwnerChecker>>,
    /// Who may upload.
    auth: auth::UploadAuth,
    /// How much the store may hold, and how much it does.
    quotas: quota::Quotas,
    max_upload: u64,
    /// An upload body that sends nothing for this long is answered 408.
    upload_idle_timeout: Duration,
    limits: Limits,
    rng: &'static dyn SecureRandom,
}

impl AppState {
    fn new(
        args: &ServeArgs,
        store: Arc<dyn Store>,
        owners: Option<Arc<OwnerChecker>>,
        auth: auth::UploadAuth,
    ) -> AppState {
        AppState {
            store,
            auth,
            quotas: quota::Quotas::new(quota::Limits {
                store_bytes: args.max_store_bytes,
                bundles: args.max_bundles,
                namespace_bytes: args.max_namespace_bytes,
                namespace_bundles: args.max_namespace_bundles,
            }),
            metrics: metrics::Metrics::default(),
            policy: sweeper::Policy {
                unused_ttl: args.unused_ttl,
                max_ttl: args.max_ttl,
            },
            owners,
            max_upload: args.max_upload_bytes,
            upload_idle_timeout: args.upload_idle_timeout,
            limits: Limits {
                max_bytes: args.archive_max_bytes,
                max_entries: args.archive_max_entries,
                max_ratio: args.archive_max_ratio,
            },
            rng: rustls::crypto::aws_lc_rs::default_provider().secure_random,
        }
    }
}

/// Runs the staging server until `shutdown` completes (with the name of what asked
/// for it, for the log), then lets requests in flight finish. Everything is checked
/// and opened before the listening line is printed.
pub(crate) async fn serve(
    args: &ServeArgs,
    shutdown: impl Future<Output = &'static str>,
) -> Result<(), ServeError> {
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(tls::server_config(cert, key)?),
        _ => None,
    };
    let owners = OwnerChecker::from_args(args)?;
    let auth = auth::UploadAuth::new(args.upload_auth, args.upload_token_file.as_deref(), || {
        review::Reviewer::from_args(args)
    })?;
    if auth.is_open() {
        tracing::warn!("--upload-auth none: anyone who can reach this server may upload; keep it behind a NetworkPolicy");
    }
    let store = open_store(args).await?;
    let (listener, addr) =
        server::bind(args.listen)
            .await
            .map_err(|source| ServeError::Listen {
                addr: args.listen,
                source,
            })?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    server::announce(&format!("listening on {scheme}://{addr}"));
    let state = Arc::new(AppState::new(args, store, owners, auth));
    let listed = state.store.list().await.unwrap_or_default();
    state.quotas.recount(&listed);
    let stored = listed.len();
    info!(
        "staging server on {scheme}://{addr}: store {}, {stored} bundle(s), {}, uploads up to {} bytes, unused bundles kept {:?}, any bundle kept {:?}",
        args.store.display(),
        state.auth.describe(),
        args.max_upload_bytes,
        args.unused_ttl,
        args.max_ttl
    );
    let sweeper = tokio::spawn(sweeper::sweeper(state.clone()));
    let store = state.store.clone();
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    server::accept_loop(listener, acceptor, router(state), shutdown).await;
    sweeper.abort();
    store.close();
    info!("staging server stopped");
    Ok(())
}

/// Opens `--store`: a directory, or a bucket (`s3://`, `s3a://`).
async fn open_store(args: &ServeArgs) -> Result<Arc<dyn Store>, ServeError> {
    let root = match StoreLocation::parse(&args.store) {
        Ok(StoreLocation::Dir(root)) => root,
        Ok(StoreLocation::Bucket(bucket)) => {
            let settings = S3Settings::new(s3_credentials_dir(args), None);
            return Ok(Arc::new(S3Store::open(bucket, &settings).await?));
        }
        Err(reason) => {
            let shown = crate::util::redact::redact_url(&args.store.to_string_lossy());
            return Err(ServeError::StoreLocation { shown, reason });
        }
    };
    let dir = root.clone();
    let opened = tokio::task::spawn_blocking(move || LocalStore::open(&dir))
        .await
        .unwrap_or_else(|e| Err(io::Error::other(e)));
    match opened {
        Ok(store) => Ok(Arc::new(store)),
        Err(source) => Err(ServeError::Directory { path: root, source }),
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

fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route(api::RESOURCES_PATH, post(receive::upload))
        .route(&format!("{}/", api::RESOURCES_PATH), post(receive::upload))
        .route(
            api::RESOURCE_ROUTE,
            get(handlers::download).delete(handlers::remove),
        )
        .route(api::PING_PATH, get(|| async { text("pong") }))
        .route(api::HEALTHZ_PATH, get(|| async { text("ok") }))
        .route(api::METRICS_PATH, get(metrics::endpoint))
        .fallback(|| async { handlers::ApiError::new(StatusCode::NOT_FOUND, "no such endpoint") })
        .with_state(state)
        .layer(middleware::from_fn(access_log::log_request))
}

fn text(body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], body).into_response()
}

/// One upload of `body` (as `multipart/form-data; boundary=<boundary>`) to a fresh
/// server over `store_dir` with `--upload-auth none` and small archive limits,
/// in process: the answer's status and the bundles the store then holds. For
/// the upload fuzz target (`src/fuzz/upload.rs`).
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn upload_once(
    store_dir: &Path,
    boundary: &str,
    body: Vec<u8>,
) -> (StatusCode, Vec<crate::stage::store::BundleMeta>) {
    use tower::ServiceExt;
    let dir = store_dir.to_str().expect("a UTF-8 path");
    let argv = [
        "spark-localizer",
        "stage",
        "serve",
        "--store",
        dir,
        "--upload-auth",
        "none",
        "--archive-max-bytes",
        "1048576",
        "--archive-max-entries",
        "64",
        "--max-upload-bytes",
        "1048576",
    ];
    let (cli, _) = crate::cli::parse_from(argv).expect("serve arguments");
    let crate::cli::Command::Stage(crate::cli::StageArgs {
        command: crate::cli::StageCommand::Serve(args),
    }) = cli.command
    else {
        unreachable!("stage serve parses as stage serve")
    };
    // The store's blocking calls need a multi-threaded runtime; one for every call.
    static RUNTIME: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    let runtime = RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime")
    });
    runtime.block_on(async {
        let store: Arc<dyn Store> = Arc::new(LocalStore::open(store_dir).expect("the store"));
        let auth = auth::UploadAuth::new(args.upload_auth, None, || unreachable!("no reviews"))
            .expect("open uploads");
        let state = Arc::new(AppState::new(&args, store.clone(), None, auth));
        let request = axum::http::Request::post(api::RESOURCES_PATH)
            .header(
                axum::http::header::CONTENT_TYPE,
                format!("multipart/form-data; boundary={boundary}"),
            )
            .body(axum::body::Body::from(body))
            .expect("a request");
        let answer = router(state).oneshot(request).await.expect("infallible");
        (
            answer.status(),
            store.list().await.expect("the store lists"),
        )
    })
}
