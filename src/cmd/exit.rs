//! The stable exit codes, in one place. Documented in docs/contract.md.

use crate::engine::FailureKind;

/// A process exit code with a stable meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub(crate) enum ExitCode {
    /// Everything was localized (or, for `check`, every probe succeeded).
    Ok = 0,
    /// A bug or an unexpected condition; the message says what.
    Internal = 1,
    /// Bad flags, environment or files; found before any network traffic.
    Config = 2,
    /// A source refused or failed: HTTP error, not found, auth, retries exhausted.
    Fetch = 3,
    /// A download did not match its pinned sha256 or its announced size.
    Integrity = 4,
    /// The overall `--deadline` passed before every artifact was localized.
    Deadline = 5,
    /// The destination could not be written (permissions, disk full).
    LocalIo = 6,
    /// SIGTERM or SIGINT arrived before every artifact was localized.
    Interrupted = 7,
    /// The classpath doctor found an error (`check`; `fetch --doctor-strict`).
    Doctor = 8,
}

impl ExitCode {
    /// How bad a failure is when several artifacts fail differently: the
    /// process exits with the most severe one (interrupted > deadline > integrity > local
    /// I/O > fetch > doctor: a jar that did not arrive outranks a finding about the others).
    pub(crate) fn severity(self) -> u8 {
        match self {
            ExitCode::Ok => 0,
            ExitCode::Doctor => 1,
            ExitCode::Fetch => 2,
            ExitCode::LocalIo => 3,
            ExitCode::Integrity => 4,
            ExitCode::Deadline => 5,
            ExitCode::Interrupted => 6,
            ExitCode::Config => 7,
            ExitCode::Internal => 8,
        }
    }

    /// The most severe of two codes.
    pub(crate) fn worst(self, other: ExitCode) -> ExitCode {
        if other.severity() > self.severity() {
            other
        } else {
            self
        }
    }

    /// The numeric code passed to `std::process::exit`.
    pub(crate) fn code(self) -> i32 {
        self as i32
    }
}

impl From<FailureKind> for ExitCode {
    fn from(kind: FailureKind) -> ExitCode {
        match kind {
            FailureKind::Internal => ExitCode::Internal,
            FailureKind::Fetch => ExitCode::Fetch,
            FailureKind::Integrity => ExitCode::Integrity,
            FailureKind::Deadline => ExitCode::Deadline,
            FailureKind::LocalIo => ExitCode::LocalIo,
            FailureKind::Interrupted => ExitCode::Interrupted,
        }
    }
}
