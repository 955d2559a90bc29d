//! One artifact's transfer: attempts with backoff, resuming with ranges only
//! when the answer continues the same object, sha256 while writing into a temp
//! file, pin check, then the atomic publish and its state record.

use std::io::{Seek, Write};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use sha2::{Digest, Sha256};
use tokio::time::timeout;
use tracing::{debug, warn};

use super::options::Options;
use super::outcome::FailureKind;
use super::outcome::{Outcome, Status};
use super::ranged;
use crate::layout::{self, Record, TempFile};
use crate::plan::{Artifact, Target};
use crate::progress::Reporter;
use crate::source::{FaultKind, OpenRequest, Scheme, Source, SourceError, Sources};
use crate::util::duration::format_duration;

/// Chunks smaller than this are gathered before a write; larger ones are written
/// as they come. Writes go to the page cache straight from the task that
/// receives the bytes: a memcpy, no hand-off to another thread (an emptyDir
/// write blocks only when the node is out of dirty-page room, and then the
/// transfer waits for the disk wherever the write runs).
const WRITE_BUFFER: usize = 64 << 10;

/// What an unfinished transfer got to, for the message when it is cut off.
#[derive(Default)]
pub(super) struct Trace {
    attempts: AtomicU32,
    last_error: Mutex<Option<String>>,
}

impl Trace {
    /// The outcome of a transfer cut off by the deadline or a signal, with the
    /// attempts made and the last error seen added.
    pub(super) fn failed(&self, cut: Outcome) -> Outcome {
        let last = self.last_error.lock().expect("lock").take();
        let failure = cut.failure.map(|mut f| {
            if let Some(last) = last {
                f.message = format!("{} (last error: {last})", f.message);
            }
            f
        });
        Outcome {
            attempts: self.attempts.load(Ordering::Relaxed),
            failure,
            ..cut
        }
    }
}

/// The sha256 a staging server vouches for: its ETag is the bundle's sha256 (the
/// original server sends none, and then there is nothing to compare).
fn announced_sha256(a: &Artifact, validator: Option<&str>) -> Option<String> {
    if a.scheme != Scheme::Staging {
        return None;
    }
    let tag = validator?.trim().trim_start_matches("W/").trim_matches('"');
    (tag.len() == 64 && tag.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| tag.to_ascii_lowercase())
}

pub(crate) fn new_record(a: &Artifact, size: u64, sha256: &str) -> Record {
    Record {
        uri_sha256: a.record_digest(),
        size,
        sha256: sha256.to_owned(),
    }
}

/// The state of one transfer across attempts.
struct Transfer {
    file: std::io::BufWriter<std::fs::File>,
    hasher: Sha256,
    written: u64,
    validator: Option<String>,
    resumable: bool,
    expected: Option<u64>,
    /// Whether the reporter was told this transfer started.
    started: bool,
    /// The size learned before the transfer (a probe), if any.
    probed: Option<u64>,
    /// Parallel ranges failed to give one version: fetch as one stream.
    one_stream: bool,
}

impl Transfer {
    /// Drops what was received so far (a retry that cannot resume).
    fn reset(&mut self, id: usize, reporter: &dyn Reporter) -> std::io::Result<()> {
        if self.written == 0 {
            return Ok(());
        }
        self.file.flush()?;
        let f = self.file.get_mut();
        f.set_len(0)?;
        f.rewind()?;
        reporter.rewind(id, self.written);
        self.hasher = Sha256::new();
        self.written = 0;
        Ok(())
    }
}

/// An attempt failed either at the source or on local disk.
enum AttemptError {
    Source(SourceError),
    Local(std::io::Error),
}

impl From<SourceError> for AttemptError {
    fn from(e: SourceError) -> Self {
        AttemptError::Source(e)
    }
}

impl From<std::io::Error> for AttemptError {
    fn from(e: std::io::Error) -> Self {
        AttemptError::Local(e)
    }
}

/// Fetches one artifact to its destination; never returns an error, only an outcome.
pub(super) async fn fetch_one(
    id: usize,
    a: &Artifact,
    sources: &Sources,
    opts: &Options,
    reporter: &Arc<dyn Reporter>,
    size: Option<u64>,
    trace: &Trace,
) -> Outcome {
    let Target::Fetch { dir, path, .. } = &a.target else {
        return Outcome::new(Status::Local);
    };
    let source = sources
        .get(a.scheme)
        .expect("fetched schemes have a source");
    let local_error = |e: std::io::Error, what: &str| {
        Outcome::failed(
            FailureKind::LocalIo,
            format!(
                "{}: cannot {what} {}: {e}; check free space and permissions of the volume",
                a.shown,
                path.display()
            ),
        )
    };
    let (tmp, file) = match TempFile::create(path) {
        Ok(pair) => pair,
        Err(e) => return local_error(e, "create a temp file beside"),
    };
    let mut t = Transfer {
        file: std::io::BufWriter::with_capacity(WRITE_BUFFER, file),
        hasher: Sha256::new(),
        written: 0,
        validator: None,
        resumable: false,
        expected: None,
        started: false,
        probed: size,
        one_stream: false,
    };

    let mut attempts = 0;
    loop {
        attempts += 1;
        trace.attempts.store(attempts, Ordering::Relaxed);
        match attempt(id, a, &source, opts, reporter, &mut t).await {
            Ok(()) => break,
            Err(AttemptError::Local(e)) => {
                let mut o = local_error(e, "write");
                o.attempts = attempts;
                return o;
            }
            Err(AttemptError::Source(e)) => {
                if !e.is_transient() || attempts > opts.retries {
                    let kind = FailureKind::of_fault(e.kind);
                    let tried = if attempts > 1 {
                        format!(" (after {attempts} attempts)")
                    } else {
                        String::new()
                    };
                    let mut o = Outcome::failed(kind, format!("{}{tried}", e.describe()));
                    o.attempts = attempts;
                    return o;
                }
                let described = e.describe();
                *trace.last_error.lock().expect("lock") = Some(described.clone());
                // Honour the server's Retry-After, within reason (the deadline still rules).
                let asked = e.retry_after.map(|d| d.min(crate::retry::MAX_RETRY_AFTER));
                let delay = opts.backoff.delay(attempts).max(asked.unwrap_or_default());
                warn!(
                    uri = %a.shown,
                    "attempt {attempts}/{} failed: {described}; retrying in {}{}",
                    opts.retries + 1,
                    format_duration(delay),
                    if t.resumable && t.written > 0 {
                        format!(", resuming at byte {}", t.written)
                    } else {
                        String::new()
                    }
                );
                tokio::time::sleep(delay).await;
            }
        }
    }

    let mut publish = || {
        t.file.flush()?;
        if opts.fsync {
            t.file.get_ref().sync_all()?;
        }
        std::io::Result::Ok(())
    };
    if let Err(e) = publish() {
        return local_error(e, "write");
    }
    let digest: [u8; 32] = t.hasher.finalize().into();
    let hex_digest = hex::encode(digest);
    if let Some(pin) = &a.pin {
        if *pin != digest {
            let mut o = Outcome::failed(
                FailureKind::Integrity,
                format!(
                    "{}: sha256 mismatch: expected {}, got {hex_digest}; the file was not published (check the pin in --checksums or the artifact)",
                    a.shown,
                    hex::encode(pin)
                ),
            );
            o.attempts = attempts;
            return o;
        }
    }
    if let Some(announced) = announced_sha256(a, t.validator.as_deref()) {
        if announced != hex_digest {
            let mut o = Outcome::failed(
                FailureKind::Integrity,
                format!(
                    "{}: the staging server announced sha256 {announced}, the bytes received hash to {hex_digest}; nothing was published (the server's copy is damaged: upload the bundle again)",
                    a.shown
                ),
            );
            o.attempts = attempts;
            return o;
        }
    }
    drop(t.file);
    layout::remove_record(dir, &a.name);
    if let Err(e) = tmp.publish(path) {
        return local_error(e, "rename into");
    }
    let record = new_record(a, t.written, &hex_digest);
    if let Err(e) = layout::write_record(dir, &a.name, &record, opts.fsync) {
        // The file is correct; only a restart will fetch it again.
        warn!(uri = %a.shown, "cannot write the state record for {}: {e}", path.display());
    }
    debug!(uri = %a.shown, bytes = t.written, sha256 = %hex_digest, "published {}", path.display());
    Outcome {
        status: if a.scheme == Scheme::File {
            Status::Copied
        } else {
            Status::Fetched
        },
        bytes: t.written,
        sha256: Some(hex_digest),
        attempts,
        duration: Duration::ZERO,
        failure: None,
    }
}

/// One attempt: open (resuming when possible) and stream into the temp file.
async fn attempt(
    id: usize,
    a: &Artifact,
    source: &Arc<dyn Source>,
    opts: &Options,
    reporter: &Arc<dyn Reporter>,
    t: &mut Transfer,
) -> Result<(), AttemptError> {
    if !t.resumable {
        t.reset(id, reporter.as_ref())?;
    }
    let request = OpenRequest {
        offset: t.written,
        end: None,
        validator: t.validator.clone(),
    };
    let stalled = || {
        SourceError::new(
            FaultKind::Transient,
            format!(
                "{}: no data for {} (stall timeout)",
                a.shown,
                format_duration(opts.stall_timeout)
            ),
        )
    };
    let mut body = timeout(opts.stall_timeout, source.open(&a.uri, &request))
        .await
        .map_err(|_| stalled())??;
    if body.offset == 0 {
        // Asked to resume, answered from the start (no ranges, or If-Range said
        // the object changed): what we hold is discarded.
        t.reset(id, reporter.as_ref())?;
    } else if body.offset != t.written
        || body.meta.validator != t.validator
        || (t.expected.is_some() && body.meta.size != t.expected)
    {
        // A range of something else (another offset, version or size): never
        // splice it onto what we hold; start over on the next attempt.
        t.resumable = false;
        t.validator = None;
        t.expected = None;
        return Err(SourceError::new(
            FaultKind::Transient,
            format!(
                "{}: the resumed range does not continue what was received (the object changed?); starting over",
                a.shown
            ),
        )
        .into());
    }
    if body.offset == 0 {
        t.expected = body.meta.size;
    }
    if !t.started {
        reporter.start(id, &a.name, t.expected.or(t.probed));
        t.started = true;
    }
    t.validator = body.meta.validator.clone();
    t.resumable = body.meta.ranges && t.validator.is_some();

    // A large object from a source that serves ranges: fetch it in parallel ranges.
    if let (0, 0, Some(size), Some(validator), true) = (
        body.offset,
        t.written,
        body.meta.size,
        body.meta.validator.clone(),
        body.meta.ranges,
    ) {
        if size >= ranged::THRESHOLD
            && opts.parallelism > 1
            && !t.one_stream
            && source.parallel_ranges()
        {
            t.file.flush()?;
            let file = t.file.get_ref().try_clone()?;
            let start = ranged::Start {
                body,
                size,
                validator,
            };
            let fetched =
                ranged::fetch(id, a, source.clone(), opts, reporter.clone(), file, start).await;
            return match fetched {
                Ok(hasher) => {
                    t.hasher = hasher;
                    t.written = size;
                    Ok(())
                }
                Err((failure, advanced)) => {
                    reporter.rewind(id, advanced);
                    t.file.get_mut().set_len(0)?;
                    t.resumable = false;
                    t.validator = None;
                    t.expected = None;
                    Err(match failure {
                        ranged::Failure::Local(e) => AttemptError::Local(e),
                        ranged::Failure::Source(e) => AttemptError::Source(e),
                        ranged::Failure::Changed(e) => {
                            t.one_stream = true;
                            AttemptError::Source(e)
                        }
                    })
                }
            };
        }
    }

    while let Some(chunk) = timeout(opts.stall_timeout, body.stream.next())
        .await
        .map_err(|_| stalled())?
    {
        let chunk = chunk?;
        t.file.write_all(&chunk)?;
        t.hasher.update(&chunk);
        t.written += chunk.len() as u64;
        reporter.advance(id, chunk.len() as u64);
        if t.expected.is_some_and(|expected| t.written > expected) {
            break;
        }
    }
    match t.expected {
        Some(expected) if t.written < expected => Err(SourceError::new(
            FaultKind::Transient,
            format!(
                "{}: body ended after {} of {expected} bytes",
                a.shown, t.written
            ),
        )
        .into()),
        Some(expected) if t.written > expected => {
            t.resumable = false;
            Err(SourceError::new(
                FaultKind::Integrity,
                format!(
                    "{}: received {} bytes, more than the announced {expected}",
                    a.shown, t.written
                ),
            )
            .into())
        }
        _ => Ok(()),
    }
}
