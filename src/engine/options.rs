//! How the engine behaves: parallelism, retries, timeouts, the deadline and the stop signal.

use std::time::Duration;

use tokio::time::Instant;

use crate::retry::RetryPolicy;

/// How the engine behaves.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    /// Transfers at once to start with (and ranges of one large object).
    pub parallelism: usize,
    /// Transfers at once at most: more are let in while the throughput grows
    /// with them (equal to `parallelism`: fixed).
    pub parallelism_max: usize,
    /// How often to try each transfer (and each part of a ranged one).
    pub retry: RetryPolicy,
    pub stall_timeout: Duration,
    pub deadline: Instant,
    /// The configured deadline, for messages.
    pub deadline_len: Duration,
    pub fsync: bool,
    /// Limits for unpacking archives.
    pub archive_limits: crate::archive::Limits,
    /// Whether the top-level jars of unpacked archives go on the classpath
    /// (`--archive-classpath`): the engine lists them in the outcomes.
    pub archive_classpath: bool,
    /// Becomes `true` when the process is asked to stop (SIGTERM/SIGINT).
    pub cancel: tokio::sync::watch::Receiver<bool>,
}
