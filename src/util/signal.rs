//! Waiting for the process to be asked to stop. Only the command layer calls this;
//! library code is handed a future instead.

use tokio::signal::unix::{signal, SignalKind};

/// Waits for SIGTERM (the kubelet stopping the pod) or SIGINT and names the one that
/// came. An error means the handlers could not be installed: no signal will be seen.
pub(crate) async fn terminated() -> std::io::Result<&'static str> {
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    })
}
