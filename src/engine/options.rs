//! How the engine behaves: parallelism, retries, timeouts, the deadline and the stop signal.

use std::time::Duration;

use tokio::time::Instant;

use crate::retry::Backoff;

/// How the engine behaves.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    pub parallelism: usize,
    /// Retries after the first attempt.
    pub retries: u32,
    pub backoff: Backoff,
    pub stall_timeout: Duration,
    /// Time to open a connection; also the budget for the size probes.
    pub connect_timeout: Duration,
    pub deadline: Instant,
    /// The configured deadline, for messages.
    pub deadline_len: Duration,
    pub fsync: bool,
    /// Limits for unpacking archives.
    pub archive_limits: crate::archive::Limits,
    /// Becomes `true` when the process is asked to stop (SIGTERM/SIGINT).
    pub cancel: tokio::sync::watch::Receiver<bool>,
}
