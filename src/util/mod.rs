//! Small leaves every layer uses: durations, safe reads of small files, secret
//! redaction.

pub(crate) mod duration;
pub(crate) mod fs;
pub(crate) mod redact;
pub(crate) mod signal;
pub(crate) mod time;
