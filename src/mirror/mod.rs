//! `mirror serve`: the node-local, pull-through, content-addressed cache.
//!
//! Run as a DaemonSet behind a Service with `internalTrafficPolicy: Local`, it
//! answers `fetch --mirror` for the artifacts pods fetch without credentials:
//! a request names the source URI (and the sha256 the client expects, when it
//! knows it). A held blob with that digest is served without asking the origin;
//! otherwise what the mirror holds for the URI is revalidated with a conditional
//! request, or fetched, once however many pods ask at the same time ([`fill`]).
//! Only allow-listed origins are fetched, with the mirror's own configuration
//! ([`allow`]); blobs live by digest on a bounded disk ([`store`]).
//!
//! The wire contract is [`crate::source::mirror`]'s.

pub(crate) mod allow;
mod fill;
mod handlers;
mod metrics;
mod store;

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::routing::{get, post};
use axum::Router;
use tracing::info;
use url::Url;

use crate::net::server;
use crate::retry::RetryPolicy;
use crate::source::{Scheme, Source, Sources};

pub(crate) use allow::AllowList;

/// How the mirror runs (from `mirror serve`'s flags).
pub(crate) struct Config {
    pub listen: SocketAddr,
    pub dir: PathBuf,
    pub max_bytes: u64,
    pub allow: AllowList,
    /// Origin transfers at once.
    pub parallelism: usize,
    pub retry: RetryPolicy,
    pub stall_timeout: Duration,
}

/// Why the mirror could not start; the message names the flag.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ServeError {
    #[error("--dir {}: cannot use it as the mirror's store", path.display())]
    Dir {
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

/// What every request shares.
pub(crate) struct Mirror {
    store: Arc<store::Store>,
    sources: Sources,
    allow: AllowList,
    fills: Mutex<HashMap<String, Arc<fill::Fill>>>,
    slots: tokio::sync::Semaphore,
    /// One re-hash of a suspect blob at a time.
    verifying: tokio::sync::Semaphore,
    retry: RetryPolicy,
    stall_timeout: Duration,
    metrics: metrics::Metrics,
}

impl Mirror {
    /// The source for `uri`'s scheme.
    fn source(&self, uri: &Url) -> Result<Arc<dyn Source>, String> {
        Scheme::parse(uri.scheme())
            .and_then(|scheme| self.sources.get(scheme))
            .ok_or_else(|| format!("scheme '{}' is not served", uri.scheme()))
    }

    /// The fill in progress for `uri`, or a new one; true when joined.
    fn join_or_start(self: &Arc<Self>, uri: &Url) -> io::Result<(Arc<fill::Fill>, bool)> {
        let key = uri.to_string();
        // Held while the fill starts: it cannot finish (and leave the map) before
        // it is in it.
        let mut fills = self.fills.lock().expect("lock");
        if let Some(fill) = fills.get(&key) {
            return Ok((fill.clone(), true));
        }
        // What the store holds for the URI is revalidated first, also when a
        // request asks for another digest: unchanged, the origin's bytes are
        // known not to be those, and nothing is fetched again.
        // Opened now, the held blob cannot be evicted before the requests that
        // revalidate it are answered.
        let known = self
            .store
            .lookup(&key)
            .and_then(|entry| Some((entry.clone(), self.store.read(&entry.sha256)?)));
        let fill = fill::start(self, uri.clone(), known)?;
        fills.insert(key, fill.clone());
        Ok((fill, false))
    }

    /// A fill ended: later requests start afresh.
    fn finish_fill(&self, key: &str) {
        self.fills.lock().expect("lock").remove(key);
    }
}

/// Runs the mirror until `shutdown` completes (with the name of what asked for
/// it), then lets requests in flight finish. The store is opened before the
/// listening line is printed.
pub(crate) async fn serve(
    config: Config,
    sources: Sources,
    shutdown: impl Future<Output = &'static str>,
) -> Result<(), ServeError> {
    let dir = config.dir.clone();
    let max_bytes = config.max_bytes;
    let store = tokio::task::spawn_blocking(move || store::Store::open(&dir, max_bytes))
        .await
        .unwrap_or_else(|e| Err(io::Error::other(e)))
        .map_err(|source| ServeError::Dir {
            path: config.dir.clone(),
            source,
        })?;
    let (listener, addr) =
        server::bind(config.listen)
            .await
            .map_err(|source| ServeError::Listen {
                addr: config.listen,
                source,
            })?;
    server::announce(&format!("listening on http://{addr}"));
    info!(
        "mirror on http://{addr}: store {} (at most {} bytes), origins allowed: {}",
        config.dir.display(),
        store.max_bytes(),
        config.allow.shown()
    );
    let mirror = Arc::new(Mirror {
        store: Arc::new(store),
        sources,
        allow: config.allow,
        fills: Mutex::new(HashMap::new()),
        slots: tokio::sync::Semaphore::new(config.parallelism),
        verifying: tokio::sync::Semaphore::new(1),
        retry: config.retry,
        stall_timeout: config.stall_timeout,
        metrics: metrics::Metrics::default(),
    });
    server::accept_loop(listener, None, router(mirror), shutdown).await;
    info!("mirror stopped");
    Ok(())
}

fn router(mirror: Arc<Mirror>) -> Router {
    use crate::source::mirror::{FETCH_PATH, VERIFY_PATH};
    Router::new()
        .route(FETCH_PATH, get(handlers::fetch))
        .route(VERIFY_PATH, post(handlers::verify))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/metrics", get(metrics::endpoint))
        .fallback(|| async { (axum::http::StatusCode::NOT_FOUND, "no such endpoint\n") })
        .with_state(mirror)
}
