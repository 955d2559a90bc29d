//! What can go wrong reading bytes from a source, in one vocabulary every layer
//! shares: the kind of fault (which decides retries and exit codes) and a message
//! already redacted, with its cause and a hint.

use std::fmt;

use crate::retry::Retryable;

/// How a source failure should be treated. The engine retries only [`FaultKind::Transient`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FaultKind {
    /// Connect errors, resets, timeouts, 5xx, 408/429, truncated bodies: retried.
    Transient,
    /// The object does not exist (404/410, ENOENT).
    NotFound,
    /// Credentials are missing or refused (401/403).
    Auth,
    /// TLS handshake or certificate failure.
    Tls,
    /// Any other final refusal (other 4xx, redirect loops, bad responses).
    Refused,
    /// The object changed or its size is not what was announced.
    Integrity,
    /// The local filesystem failed (reading a file:// source).
    LocalIo,
}

/// A source failure: what happened (already redacted), its kind, and the cause.
#[derive(Debug)]
pub(crate) struct SourceError {
    pub kind: FaultKind,
    pub message: String,
    pub hint: Option<&'static str>,
    /// How long the server asked us to wait before trying again.
    pub retry_after: Option<std::time::Duration>,
    pub source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl SourceError {
    pub(crate) fn new(kind: FaultKind, message: impl Into<String>) -> Self {
        SourceError {
            kind,
            message: message.into(),
            hint: None,
            retry_after: None,
            source: None,
        }
    }

    pub(crate) fn with_hint(mut self, hint: &'static str) -> Self {
        self.hint = Some(hint);
        self
    }

    pub(crate) fn with_source(
        mut self,
        err: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        self.source = Some(Box::new(err));
        self
    }

    /// Whether the engine should try again.
    pub(crate) fn is_transient(&self) -> bool {
        self.kind == FaultKind::Transient
    }
}

impl Retryable for SourceError {
    fn is_transient(&self) -> bool {
        SourceError::is_transient(self)
    }

    fn retry_after(&self) -> Option<std::time::Duration> {
        self.retry_after
    }
}

impl SourceError {
    /// The message, its causes (e.g. "connection refused") and the hint, scrubbed
    /// of secrets: what users read.
    pub(crate) fn describe(&self) -> String {
        let mut text = crate::util::redact::error_chain(self);
        if let Some(hint) = self.hint {
            text.push_str(&format!(" (hint: {hint})"));
        }
        text
    }
}

impl fmt::Display for SourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for SourceError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}
