//! The deadline and the stop signal around the phases before and after the
//! transfers: parsing the configuration, resolving (`--packages`, `oci://`
//! references), planning, writing the outputs.

use std::sync::OnceLock;

use crate::cmd::exit::ExitCode;
use crate::config::Settings;

/// When the process started: `--deadline` is an overall limit, counted from here.
static STARTED: OnceLock<std::time::Instant> = OnceLock::new();

/// Starts the clock of `--deadline` (at the start of the process; later calls
/// change nothing).
pub(crate) fn start() {
    STARTED.get_or_init(std::time::Instant::now);
}

/// When a deadline of `length` passes: `length` after the process started.
pub(crate) fn at(length: std::time::Duration) -> tokio::time::Instant {
    let started = *STARTED.get_or_init(std::time::Instant::now);
    tokio::time::Instant::from_std(started) + length
}

/// A deadline one second from now (a length from the start of the process):
/// for the work that reports a stop that has already come (the report and the
/// termination message are still written, within a second).
pub(crate) fn grace() -> std::time::Duration {
    let started = *STARTED.get_or_init(std::time::Instant::now);
    started.elapsed() + std::time::Duration::from_secs(1)
}

/// What a phase does, as its stop messages say it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Phase {
    /// Resolving `--packages` or `oci://` references.
    Resolving,
    /// Reading the configuration (the properties file, the declared lists).
    Reading,
    /// Planning the artifacts.
    Planning,
    /// Writing the classpath outputs and the report.
    Writing,
    /// Pushing an image (`bundle`).
    Pushing,
}

impl Phase {
    fn words(self) -> (&'static str, &'static str) {
        match self {
            Phase::Resolving => ("resolved", "resolving"),
            Phase::Reading => ("read", "reading"),
            Phase::Planning => ("planned", "planning"),
            Phase::Writing => ("written", "writing"),
            Phase::Pushing => ("pushed", "pushing"),
        }
    }
}

/// Runs the CPU-bound `work` on a blocking thread, within the deadline and
/// until a stop signal (see [`within`]): a long list never keeps the runtime
/// that enforces them from running.
pub(crate) async fn within_blocking<T: Send + 'static>(
    settings: &Settings,
    cancel: Option<&tokio::sync::watch::Receiver<bool>>,
    (what, phase): (&str, Phase),
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, (ExitCode, String)> {
    let length = settings.deadline.value;
    blocking(length, cancel, (what, phase), work).await
}

/// [`within_blocking`] with the deadline's length given (before the settings exist).
pub(crate) async fn blocking<T: Send + 'static>(
    length: std::time::Duration,
    cancel: Option<&tokio::sync::watch::Receiver<bool>>,
    (what, phase): (&str, Phase),
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, (ExitCode, String)> {
    let work = async move {
        match tokio::task::spawn_blocking(work).await {
            Ok(done) => done,
            Err(failed) => std::panic::resume_unwind(failed.into_panic()),
        }
    };
    let task = tokio::spawn(work);
    match stoppable(length, cancel, (what, phase), task).await {
        Ok(Ok(done)) => Ok(done),
        Ok(Err(failed)) => std::panic::resume_unwind(failed.into_panic()),
        // The blocking thread is left to finish: the process exits without it.
        Err(stopped) => Err(stopped),
    }
}

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
    stoppable(
        settings.deadline.value,
        cancel,
        (what, Phase::Resolving),
        work,
    )
    .await
}

/// `work` until the deadline of `length` (counted from the start of the
/// process) or a stop signal.
pub(crate) async fn stoppable<T>(
    length: std::time::Duration,
    cancel: Option<&tokio::sync::watch::Receiver<bool>>,
    (what, phase): (&str, Phase),
    work: impl std::future::Future<Output = T>,
) -> Result<T, (ExitCode, String)> {
    let (done, doing) = phase.words();
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
        finished = tokio::time::timeout_at(at(length), work) => finished.map_err(|_| (
            ExitCode::Deadline,
            format!(
                "{what}: not {done} within the deadline ({}, --deadline)",
                crate::util::duration::format_duration(length)
            ),
        )),
        () = stop => Err((
            ExitCode::Interrupted,
            format!("{what}: stopped by a signal while {doing}"),
        )),
    }
}
