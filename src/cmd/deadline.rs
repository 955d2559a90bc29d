//! The deadline and the stop signal around what is resolved before the
//! transfers (`--packages`, `oci://` references).

use crate::cmd::exit::ExitCode;
use crate::config::Settings;

/// Runs `work` (resolving `what` before the transfers) as a task of its own,
/// within the deadline and until a stop signal: the exit code and message of
/// the stop otherwise. A task of its own, so that work that holds its thread
/// (a large graph walked between two awaits) never keeps the deadline or a
/// signal from being served; it is aborted when they come first (and the
/// process exits without waiting for it).
pub(crate) async fn within<T: Send + 'static>(
    settings: &Settings,
    cancel: Option<&tokio::sync::watch::Receiver<bool>>,
    what: &str,
    work: impl std::future::Future<Output = T> + Send + 'static,
) -> Result<T, (ExitCode, String)> {
    let task = tokio::spawn(work);
    let abort = task.abort_handle();
    match within_here(settings, cancel, what, task).await {
        Ok(Ok(done)) => Ok(done),
        Ok(Err(failed)) => match failed.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            Err(_) => unreachable!("the task is aborted only after this returns"),
        },
        Err(stopped) => {
            abort.abort();
            Err(stopped)
        }
    }
}

/// [`within`] for work that awaits often (network-bound), polled in this task.
pub(crate) async fn within_here<T>(
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
