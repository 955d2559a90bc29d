//! `Retry-After`, as every HTTP source and the Maven and OCI clients read it.

use std::time::{Duration, SystemTime};

use crate::retry::parse_retry_after;

/// Fuzz entry point: a `Retry-After` value. An accepted wait is the value's
/// seconds when it is all digits, else the time from now until the HTTP-date it
/// is; a date in the past is no wait.
pub fn retry_after(data: &[u8]) {
    let value = String::from_utf8_lossy(data);
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let Some(wait) = parse_retry_after(&value, now) else {
        return;
    };
    let trimmed = value.trim();
    if trimmed.bytes().all(|b| b.is_ascii_digit()) {
        assert_eq!(Some(wait.as_secs()), trimmed.parse().ok(), "{value:?}");
    } else {
        let at = httpdate::parse_http_date(trimmed)
            .expect("a wait from something neither seconds nor a date");
        assert_eq!(at, now + wait, "{value:?}");
    }
}
