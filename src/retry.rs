//! The retry policy, used by whole-file transfers and by each part of a ranged
//! transfer alike: how many attempts, and how long to wait before the next one
//! (exponential backoff with jitter, or the server's Retry-After within a cap).
//!
//! Whether a fault is worth retrying is decided where it is understood (each
//! source classifies its errors, see [`Retryable`]); whether and when to try
//! again is decided here, once. The overall deadline is the caller's: it cuts a
//! transfer wherever it is, sleeping included.

use std::time::Duration;

/// The longest Retry-After a server may ask for; longer asks wait this long (the
/// deadline still rules).
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// A `Retry-After` value (429/503 from rate-limiting registries and CDNs):
/// seconds, or an HTTP-date (the wait from `now` until then; none when it has
/// passed). [`RetryPolicy`] caps it ([`MAX_RETRY_AFTER`]).
pub(crate) fn parse_retry_after(value: &str, now: std::time::SystemTime) -> Option<Duration> {
    let value = value.trim();
    // `1*DIGIT` (u64's parser would also take a sign).
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        return value.parse().ok().map(Duration::from_secs);
    }
    let at = httpdate::parse_http_date(value).ok()?;
    at.duration_since(now).ok()
}

/// A failure an attempt can end with, as the retry policy sees it.
pub(crate) trait Retryable {
    /// Whether another attempt may succeed (connection faults, 5xx, 408/429,
    /// truncated bodies); never for 4xx, TLS, auth or integrity failures.
    fn is_transient(&self) -> bool;
    /// How long the server asked to wait (`Retry-After`), if it did.
    fn retry_after(&self) -> Option<Duration>;
}

/// How often to try and how long to wait between attempts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RetryPolicy {
    /// Retries after the first attempt.
    pub retries: u32,
    pub backoff: Backoff,
}

impl RetryPolicy {
    /// Attempts in all (the first one and the retries).
    pub(crate) fn attempts(&self) -> u32 {
        self.retries + 1
    }

    /// After attempt number `attempt` (1-based) failed with `error`: the wait
    /// before the next attempt, or `None` when there is to be none (a final
    /// error, or no retries left). A Retry-After longer than the backoff is
    /// honoured up to [`MAX_RETRY_AFTER`].
    pub(crate) fn next_delay(&self, attempt: u32, error: &impl Retryable) -> Option<Duration> {
        if !error.is_transient() || attempt > self.retries {
            return None;
        }
        let asked = error.retry_after().map(|d| d.min(MAX_RETRY_AFTER));
        Some(self.backoff.delay(attempt).max(asked.unwrap_or_default()))
    }
}

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
    fn retry_after_is_digits_or_a_date() {
        let now = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        assert_eq!(
            parse_retry_after(" 120 ", now),
            Some(Duration::from_secs(120))
        );
        let later = httpdate::fmt_http_date(now + Duration::from_secs(30));
        assert_eq!(
            parse_retry_after(&later, now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now),
            None
        );
        // A sign is no delay-seconds (u64's parser took "+5"; found by fuzzing).
        for bad in ["+5", "-1", "1.5", "", "99999999999999999999999"] {
            assert_eq!(parse_retry_after(bad, now), None, "{bad:?}");
        }
    }

    struct Fault {
        transient: bool,
        retry_after: Option<Duration>,
    }

    impl Retryable for Fault {
        fn is_transient(&self) -> bool {
            self.transient
        }
        fn retry_after(&self) -> Option<Duration> {
            self.retry_after
        }
    }

    #[test]
    fn retries_transient_faults_until_the_attempts_are_spent() {
        let policy = RetryPolicy {
            retries: 2,
            backoff: Backoff::new(Duration::from_millis(100)),
        };
        let transient = Fault {
            transient: true,
            retry_after: None,
        };
        assert!(policy.next_delay(1, &transient).is_some());
        assert!(policy.next_delay(2, &transient).is_some());
        assert_eq!(policy.next_delay(3, &transient), None);
        let final_fault = Fault {
            transient: false,
            retry_after: None,
        };
        assert_eq!(policy.next_delay(1, &final_fault), None);
        assert_eq!(policy.attempts(), 3);
    }

    #[test]
    fn honours_retry_after_up_to_the_cap() {
        let policy = RetryPolicy {
            retries: 5,
            backoff: Backoff::new(Duration::from_millis(100)),
        };
        let asks = |secs| Fault {
            transient: true,
            retry_after: Some(Duration::from_secs(secs)),
        };
        assert_eq!(policy.next_delay(1, &asks(3)), Some(Duration::from_secs(3)));
        assert_eq!(policy.next_delay(1, &asks(3600)), Some(MAX_RETRY_AFTER));
    }

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
