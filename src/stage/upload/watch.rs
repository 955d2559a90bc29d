//! `--stall-timeout` for an upload: the request fails when the server takes no
//! byte of the body and sends no answer for that long. The body stream marks
//! progress each time the connection asks for a chunk; once the whole body is
//! sent, the server has the stall timeout plus 1 s per 16 MiB sent (time to
//! store it: fsync, an S3 store's upload) to answer.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

/// Bytes sent per second of extra time the server gets to answer.
const STORE_RATE: u64 = 16 << 20;

/// When an upload last made progress, shared by the body stream and the watcher.
#[derive(Clone)]
pub(super) struct Progress(Arc<Inner>);

struct Inner {
    started: Instant,
    /// Milliseconds after `started` of the last progress.
    last: AtomicU64,
    sent: AtomicU64,
    done: AtomicBool,
}

impl Progress {
    pub(super) fn new() -> Progress {
        Progress(Arc::new(Inner {
            started: Instant::now(),
            last: AtomicU64::new(0),
            sent: AtomicU64::new(0),
            done: AtomicBool::new(false),
        }))
    }

    /// The connection asked for more of the body, or took `bytes` of it.
    pub(super) fn moved(&self, bytes: usize) {
        let at = self.0.started.elapsed().as_millis() as u64;
        self.0.last.fetch_max(at, Ordering::Relaxed);
        self.0.sent.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// The whole body is handed over: from now on the server owes an answer.
    pub(super) fn body_done(&self) {
        self.moved(0);
        self.0.done.store(true, Ordering::Relaxed);
    }

    /// How long since the last progress, and how long that may be.
    fn idle(&self, stall: Duration) -> (Duration, Duration) {
        let now = self.0.started.elapsed();
        let last = Duration::from_millis(self.0.last.load(Ordering::Relaxed));
        let allowed = if self.0.done.load(Ordering::Relaxed) {
            stall + Duration::from_secs(self.0.sent.load(Ordering::Relaxed) / STORE_RATE)
        } else {
            stall
        };
        (now.saturating_sub(last), allowed)
    }
}

/// Runs `work` to its end, or `None` once `progress` has not moved for the
/// allowed time.
pub(super) async fn watched<T>(
    work: impl Future<Output = T>,
    progress: &Progress,
    stall: Duration,
) -> Option<T> {
    tokio::pin!(work);
    loop {
        let (idle, allowed) = progress.idle(stall);
        if idle >= allowed {
            return None;
        }
        tokio::select! {
            out = &mut work => return Some(out),
            () = tokio::time::sleep(allowed - idle) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn once_the_body_is_sent_the_server_has_time_to_store_it() {
        let stall = Duration::from_secs(5);
        let progress = Progress::new();
        progress.moved(32 << 20);
        assert_eq!(progress.idle(stall).1, stall);
        progress.body_done();
        assert_eq!(progress.idle(stall).1, stall + Duration::from_secs(2));
    }

    #[tokio::test]
    async fn work_that_ends_is_returned() {
        let progress = Progress::new();
        let out = watched(async { 7 }, &progress, Duration::from_secs(60)).await;
        assert_eq!(out, Some(7));
    }
}
