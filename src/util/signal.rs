//! Waiting for the process to be asked to stop. Only the command layer calls this;
//! library code is handed a future instead.

use tokio::signal::unix::{signal, Signal, SignalKind};

/// SIGTERM (the kubelet stopping the pod) and SIGINT handlers, installed when this
/// is made: a signal that comes before anyone waits is neither lost nor fatal.
pub(crate) struct Termination {
    term: Signal,
    int: Signal,
}

impl Termination {
    /// Installs the handlers (from inside the runtime). An error means they could
    /// not be installed: no signal will be seen.
    pub(crate) fn install() -> std::io::Result<Termination> {
        Ok(Termination {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    /// Waits for the next SIGTERM or SIGINT and names the one that came.
    pub(crate) async fn recv(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
        }
    }
}
