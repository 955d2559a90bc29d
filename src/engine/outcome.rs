//! What happened to each artifact: its status, bytes, digest, attempts and, when it
//! failed, why.

use std::time::Duration;

use crate::cmd::exit::ExitCode;

/// What happened to one artifact.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Status {
    /// Downloaded, verified and published.
    Fetched,
    /// Copied from a `file://` URI.
    Copied,
    /// Found complete and correct from an earlier run; not fetched again.
    Kept,
    /// `local://`: in the image, only listed in the classpath.
    Local,
    Failed,
}

/// Why an artifact failed: the exit code it maps to and a message naming the URI.
#[derive(Debug, Clone)]
pub(crate) struct Failure {
    pub code: ExitCode,
    pub message: String,
}

/// The outcome of one artifact, index-aligned with the plan.
#[derive(Debug, Clone)]
pub(crate) struct Outcome {
    pub status: Status,
    pub bytes: u64,
    pub sha256: Option<String>,
    pub attempts: u32,
    pub duration: Duration,
    pub failure: Option<Failure>,
}

impl Outcome {
    pub(crate) fn new(status: Status) -> Self {
        Outcome {
            status,
            bytes: 0,
            sha256: None,
            attempts: 0,
            duration: Duration::ZERO,
            failure: None,
        }
    }

    pub(crate) fn failed(code: ExitCode, message: String) -> Self {
        Outcome {
            failure: Some(Failure { code, message }),
            ..Outcome::new(Status::Failed)
        }
    }
}
