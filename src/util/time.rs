//! The wall clock as the stores and the staging server record it.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch by the wall clock; 0 if the clock reads
/// earlier than 1970.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
