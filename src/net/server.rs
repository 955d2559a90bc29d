//! Serving HTTP(S) with axum on hyper: the listener, the accept loop with its
//! graceful shutdown, and one HTTP/1.1 connection. Shared by `stage serve` and
//! `mirror serve`.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tracing::{debug, info, warn};

/// Requests in flight get this long to finish after the shutdown signal.
const GRACE: Duration = Duration::from_secs(10);
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Listens on `addr`; returns the listener and the address bound (port 0 picks one).
pub(crate) async fn bind(addr: SocketAddr) -> io::Result<(TcpListener, SocketAddr)> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    Ok((listener, bound))
}

/// Prints the one stdout line tests and wrappers wait for.
pub(crate) fn announce(line: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Accepts connections until `shutdown`, then lets requests in flight finish (at
/// most [`GRACE`]).
pub(crate) async fn accept_loop(
    listener: TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    app: Router,
    shutdown: impl Future<Output = &'static str>,
) {
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
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
            name = &mut shutdown => {
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
