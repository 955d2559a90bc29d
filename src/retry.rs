//! Backoff between attempts: exponential, capped, with jitter.
//!
//! Whether a fault is worth retrying is decided where it is understood (each
//! source classifies its errors into [`crate::source::FaultKind`]); how long to
//! wait is decided here, once.

use std::time::Duration;

/// The longest Retry-After a server may ask for; longer asks wait this long (the
/// deadline still rules).
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// Exponential backoff with "equal jitter": the n-th delay is uniform in
/// `[d/2, d]` where `d = min(cap, initial * 2^(n-1))`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Backoff {
    pub initial: Duration,
    pub cap: Duration,
}

impl Backoff {
    /// The cap used unless configured otherwise.
    pub(crate) const DEFAULT_CAP: Duration = Duration::from_secs(30);

    pub(crate) fn new(initial: Duration) -> Self {
        Backoff {
            initial,
            cap: Self::DEFAULT_CAP.max(initial),
        }
    }

    /// The delay before retry number `retry` (1-based).
    pub(crate) fn delay(&self, retry: u32) -> Duration {
        let exp = retry.saturating_sub(1).min(30);
        let full = self
            .initial
            .checked_mul(1u32 << exp)
            .unwrap_or(self.cap)
            .min(self.cap);
        let half = full / 2;
        half + full.mul_f64(fastrand::f64() * 0.5)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_and_is_capped() {
        let b = Backoff {
            initial: Duration::from_millis(100),
            cap: Duration::from_secs(1),
        };
        for _ in 0..100 {
            let d1 = b.delay(1);
            assert!(d1 >= Duration::from_millis(50) && d1 <= Duration::from_millis(100));
            let d3 = b.delay(3);
            assert!(d3 >= Duration::from_millis(200) && d3 <= Duration::from_millis(400));
            let d40 = b.delay(40);
            assert!(d40 >= Duration::from_millis(500) && d40 <= Duration::from_secs(1));
        }
    }

    #[test]
    fn zero_delay_stays_zero() {
        assert_eq!(Backoff::new(Duration::ZERO).delay(5), Duration::ZERO);
    }
}
