//! The deadline and the stop signal around what is resolved before the
//! transfers (`--packages`, `oci://` references).

use crate::cmd::exit::ExitCode;
use crate::config::Settings;

/// Runs `work` (resolving `what` before the transfers) within the deadline and
/// until a stop signal: the exit code and message of the stop otherwise.
pub(crate) async fn within<T>(
    settings: &Settings,
    cancel: Option<&tokio::sync::watch::Receiver<bool>>,
    what: &str,
    work: impl std::future::Future<Output = T>,
) -> Result<T, (ExitCode, String)> {
    let deadline = settings.deadline.value;
    let stop = async {
        match cancel {
            Some(cancel) => {
                let mut cancel = cancel.clone();
                if cancel.wait_for(|stop| *stop).await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
            None => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        done = tokio::time::timeout(deadline, work) => done.map_err(|_| (
            ExitCode::Deadline,
            format!(
                "{what}: not resolved within the deadline ({}, --deadline)",
                crate::util::duration::format_duration(deadline)
            ),
        )),
        () = stop => Err((
            ExitCode::Interrupted,
            format!("{what}: stopped by a signal while resolving"),
        )),
    }
}
