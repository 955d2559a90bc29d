//! Small leaves every layer uses: durations, safe reads of small files, secret
//! redaction, text made safe for a terminal.

pub(crate) mod duration;
pub(crate) mod fs;
pub(crate) mod redact;
pub(crate) mod signal;
pub(crate) mod text;
pub(crate) mod time;
