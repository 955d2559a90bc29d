//! What happened to each artifact: its status, bytes, digest, attempts and, when it
//! failed, why.

use std::path::PathBuf;
use std::time::Duration;

use crate::source::FaultKind;

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

/// What kind of failure stopped an artifact; the command layer maps each kind to
/// its exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FailureKind {
    /// A bug or an unexpected condition (a transfer task that panicked).
    Internal,
    /// A source refused or failed: HTTP error, not found, auth, retries exhausted.
    Fetch,
    /// The bytes did not match their pin or their announced size, or an archive
    /// broke the unpacking rules.
    Integrity,
    /// The overall deadline passed first.
    Deadline,
    /// The destination could not be written.
    LocalIo,
    /// The stop signal arrived first.
    Interrupted,
}

impl FailureKind {
    /// The kind of a source's failure: integrity problems are integrity failures,
    /// the rest fetch failures.
    pub(crate) fn of_fault(fault: FaultKind) -> FailureKind {
        match fault {
            FaultKind::Integrity => FailureKind::Integrity,
            _ => FailureKind::Fetch,
        }
    }
}

/// Why an artifact failed: its kind and a message naming the URI.
#[derive(Debug, Clone)]
pub(crate) struct Failure {
    pub kind: FailureKind,
    pub message: String,
}

/// One file a staging bundle published.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct BundleEntry {
    pub name: String,
    pub size: u64,
    pub sha256: String,
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
    /// A staging bundle's files, in the bundle's order, when it was published.
    pub bundle_files: Option<Vec<BundleEntry>>,
    /// The jars the artifact's contents put on the classpath: a jars bundle's, in
    /// the bundle's order; an unpacked archive's top-level ones with
    /// `--archive-classpath`.
    pub content_jars: Vec<PathBuf>,
    /// Whether the node-local mirror was asked, and what came of it.
    pub mirror: Option<Mirrored>,
}

/// What asking the node-local mirror for an artifact came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Mirrored {
    /// Its bytes came through the mirror (and verified).
    Served,
    /// The mirror failed for it (why); it came from its origin.
    FellBack(String),
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
            bundle_files: None,
            content_jars: Vec::new(),
            mirror: None,
        }
    }

    /// The outcome of an artifact that failed with `failure`.
    pub(crate) fn from_failure(failure: Failure) -> Self {
        Outcome::failed(failure.kind, failure.message)
    }

    pub(crate) fn failed(kind: FailureKind, message: String) -> Self {
        Outcome {
            failure: Some(Failure { kind, message }),
            ..Outcome::new(Status::Failed)
        }
    }
}
