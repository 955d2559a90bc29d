//! One artifact's transfer: attempts with backoff, resuming with ranges only
//! when the answer continues the same object, sha256 while writing into a temp
//! file, pin check, then the atomic publish and its state record.

use std::io::{Seek, Write};
use std::sync::{Arc, Mutex};

use futures_util::StreamExt;
use tokio::time::timeout;
use tracing::{debug, warn};

use super::budget::{Budget, Decision};
use super::digest::Hashes;
use super::options::Options;
use super::outcome::{Failure, FailureKind};
use super::outcome::{Mirrored, Outcome, Status};
use super::ranged;
use crate::layout::{self, Record, TempFile};
use crate::plan::{Artifact, Target};
use crate::progress::Reporter;
use crate::retry::RetryPolicy;
use crate::source::{Body, FaultKind, OpenRequest, Scheme, Source, SourceError, Sources};
use crate::util::duration::format_duration;

/// Chunks smaller than this are gathered before a write; larger ones are written
/// as they come. Writes go to the page cache straight from the task that
/// receives the bytes: a memcpy, no hand-off to another thread (an emptyDir
/// write blocks only when the node is out of dirty-page room, and then the
/// transfer waits for the disk wherever the write runs).
const WRITE_BUFFER: usize = 64 << 10;

/// What an unfinished transfer got to, for the message when it is cut off.
pub(super) struct SoFar {
    /// The artifact's retry budget, which counts its attempts.
    budget: Arc<Budget>,
    last_error: Mutex<Option<String>>,
}

impl SoFar {
    pub(super) fn new(policy: RetryPolicy) -> Self {
        SoFar {
            budget: Arc::new(Budget::new(policy)),
            last_error: Mutex::new(None),
        }
    }

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
            attempts: self.budget.attempts(),
            failure,
            ..cut
        }
    }
}

/// The sha256 a staging server or the mirror vouches for: its ETag is the
/// sha256 (the original staging server sends none, and then there is nothing to
/// compare).
fn announced_sha256(announces: bool, validator: Option<&str>) -> Option<String> {
    if !announces {
        return None;
    }
    let tag = validator?.trim().trim_start_matches("W/").trim_matches('"');
    (tag.len() == 64 && tag.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| tag.to_ascii_lowercase())
}

pub(crate) fn new_record(a: &Artifact, size: u64, sha256: &str) -> Record {
    Record {
        uri_sha256: a.record_key(),
        size,
        sha256: sha256.to_owned(),
    }
}

/// The state of one transfer across attempts.
struct Transfer {
    file: std::io::BufWriter<std::fs::File>,
    hasher: Hashes,
    written: u64,
    validator: Option<String>,
    resumable: bool,
    expected: Option<u64>,
    /// Whether the reporter was told this transfer started.
    started: bool,
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
        self.hasher = self.hasher.fresh();
        self.written = 0;
        Ok(())
    }
}

/// An attempt failed either at the source or on local disk.
enum AttemptError {
    Source(SourceError),
    /// A source error after which the budget allows no other attempt (a ranged
    /// transfer spends it across its ranges).
    Spent(SourceError),
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
/// With a mirror, an artifact fetched without credentials is asked of it first
/// (once, no retries); any failure but a local one sends it to its origin.
pub(super) async fn fetch_one(
    id: usize,
    artifact: &Artifact,
    sources: &Sources,
    opts: &Options,
    reporter: &Arc<dyn Reporter>,
    so_far: &SoFar,
) -> Outcome {
    if !matches!(artifact.target, Target::Fetch { .. }) {
        return Outcome::new(Status::Local);
    }
    let mut fell_back = sources.mirror_skipped(artifact.scheme, &artifact.uri);
    if let Some(mirror) = sources.via_mirror(artifact.scheme, &artifact.uri, artifact.pin.as_ref())
    {
        let once = SoFar::new(RetryPolicy {
            retries: 0,
            ..opts.retry
        });
        let outcome = fetch_from(id, artifact, &mirror, opts, reporter, &once).await;
        let Some(failure) = &outcome.failure else {
            return Outcome {
                mirror: Some(Mirrored::Served),
                ..outcome
            };
        };
        if matches!(
            failure.kind,
            FailureKind::LocalIo | FailureKind::Deadline | FailureKind::Interrupted
        ) {
            return outcome;
        }
        if failure.kind == FailureKind::Integrity {
            if let Some(mirror) = sources.mirror() {
                mirror.report_damaged(&artifact.uri).await;
            }
        }
        // Logged once: when the mirror failed as a whole it said so already.
        if sources.mirror().is_some_and(|m| m.down().is_none()) {
            warn!(uri = %artifact.display_uri, "the mirror could not serve it ({}); fetching from its origin", failure.message);
        }
        fell_back = Some(failure.message.clone());
    }
    let source = sources
        .get(artifact.scheme)
        .expect("fetched schemes have a source");
    let outcome = fetch_from(id, artifact, &source, opts, reporter, so_far).await;
    Outcome {
        mirror: fell_back.map(Mirrored::FellBack),
        ..outcome
    }
}

/// Fetches one artifact from `source` into a temp file beside its destination,
/// then verifies and publishes it.
async fn fetch_from(
    id: usize,
    artifact: &Artifact,
    source: &Arc<dyn Source>,
    opts: &Options,
    reporter: &Arc<dyn Reporter>,
    so_far: &SoFar,
) -> Outcome {
    let Target::Fetch { path, .. } = &artifact.target else {
        return Outcome::new(Status::Local);
    };
    let (temp, file) = match TempFile::create(path) {
        Ok(pair) => pair,
        Err(e) => {
            return Outcome::from_failure(local_error(artifact, e, "create a temp file beside"))
        }
    };
    let mut transfer = Transfer {
        file: std::io::BufWriter::with_capacity(WRITE_BUFFER, file),
        hasher: Hashes::new(artifact.sha1.is_some()),
        written: 0,
        validator: None,
        resumable: false,
        expected: None,
        started: false,
        one_stream: false,
    };
    let attempts =
        match attempt_until_done(id, artifact, source, opts, reporter, &mut transfer, so_far).await
        {
            Ok(attempts) => attempts,
            Err(outcome) => {
                // What this source sent is dropped (another may follow).
                reporter.rewind(id, transfer.written);
                return outcome;
            }
        };
    let announces = source.announces_sha256();
    let written = transfer.written;
    let finished = finish(artifact, opts, transfer, temp, announces);
    if finished.is_err() {
        reporter.rewind(id, written);
    }
    Outcome {
        attempts,
        ..finished.unwrap_or_else(Outcome::from_failure)
    }
}

/// A local I/O failure at the artifact's destination.
fn local_error(artifact: &Artifact, e: std::io::Error, what: &str) -> Failure {
    Failure {
        kind: FailureKind::LocalIo,
        message: format!(
            "{}: cannot {what} {}: {e}; check free space and permissions of the volume",
            artifact.display_uri,
            artifact.target.path().display()
        ),
    }
}

/// Attempts until one delivers every byte, as the artifact's retry budget allows;
/// returns the number of attempts, or the failed outcome.
async fn attempt_until_done(
    id: usize,
    artifact: &Artifact,
    source: &Arc<dyn Source>,
    opts: &Options,
    reporter: &Arc<dyn Reporter>,
    transfer: &mut Transfer,
    so_far: &SoFar,
) -> Result<u32, Outcome> {
    let budget = &so_far.budget;
    loop {
        let error = match attempt(id, artifact, source, opts, reporter, transfer, budget).await {
            Ok(()) => return Ok(budget.attempts()),
            Err(AttemptError::Local(e)) => {
                return Err(Outcome {
                    attempts: budget.attempts(),
                    ..Outcome::from_failure(local_error(artifact, e, "write"))
                })
            }
            Err(AttemptError::Spent(e)) => return Err(gave_up(&e, budget.attempts())),
            Err(AttemptError::Source(e)) => e,
        };
        // One flow at this level: its failure is always the current round's.
        let Decision::Probe(delay) = budget.failed(budget.round(), &error) else {
            return Err(gave_up(&error, budget.attempts()));
        };
        let described = error.describe();
        *so_far.last_error.lock().expect("lock") = Some(described.clone());
        warn!(
            uri = %artifact.display_uri,
            "attempt {}/{} failed: {described}; retrying in {}{}",
            budget.round(),
            budget.allowed(),
            format_duration(delay),
            if transfer.resumable && transfer.written > 0 {
                format!(", resuming at byte {}", transfer.written)
            } else {
                String::new()
            }
        );
        tokio::time::sleep(delay).await;
        budget.recovered(budget.round());
    }
}

/// The outcome of a transfer that stopped on `error` after `attempts` attempts.
fn gave_up(error: &SourceError, attempts: u32) -> Outcome {
    let tried = if attempts > 1 {
        format!(" (after {attempts} attempts)")
    } else {
        String::new()
    };
    Outcome {
        attempts,
        ..Outcome::failed(
            FailureKind::of_fault(error.kind),
            format!("{}{tried}", error.describe()),
        )
    }
}

/// Every byte is in the temp file: flush (and fsync), check the digest against the
/// pin and what a staging server announced, then publish under the final name
/// with its state record.
fn finish(
    artifact: &Artifact,
    opts: &Options,
    mut transfer: Transfer,
    temp: TempFile,
    announces: bool,
) -> Result<Outcome, Failure> {
    let Target::Fetch { dir, path, .. } = &artifact.target else {
        unreachable!("only fetched artifacts are transferred");
    };
    let flushed = transfer.file.flush().and_then(|()| {
        if opts.fsync {
            transfer.file.get_ref().sync_all()
        } else {
            Ok(())
        }
    });
    flushed.map_err(|e| local_error(artifact, e, "write"))?;
    let (digest, sha1) = transfer.hasher.finalize();
    let hex_digest = hex::encode(digest);
    let announced = announced_sha256(announces, transfer.validator.as_deref());
    check_digest(artifact, &digest, &hex_digest, announced)?;
    check_sha1(artifact, sha1)?;
    drop(transfer.file);
    layout::remove_record(dir, &artifact.name);
    temp.publish(path)
        .map_err(|e| local_error(artifact, e, "rename into"))?;
    let record = new_record(artifact, transfer.written, &hex_digest);
    if let Err(e) = layout::write_record(dir, &artifact.name, &record, opts.fsync) {
        // The file is correct; only a restart will fetch it again.
        warn!(uri = %artifact.display_uri, "cannot write the state record for {}: {e}", path.display());
    }
    debug!(uri = %artifact.display_uri, bytes = transfer.written, sha256 = %hex_digest, "published {}", path.display());
    Ok(Outcome {
        status: if artifact.scheme == Scheme::File {
            Status::Copied
        } else {
            Status::Fetched
        },
        bytes: transfer.written,
        sha256: Some(hex_digest),
        ..Outcome::new(Status::Fetched)
    })
}

/// The digest of the bytes received against the pin, and against the sha256 a
/// staging server announced.
fn check_digest(
    artifact: &Artifact,
    digest: &[u8; 32],
    hex_digest: &str,
    announced: Option<String>,
) -> Result<(), Failure> {
    if let Some(pin) = &artifact.pin {
        if pin != digest {
            return Err(Failure {
                kind: FailureKind::Integrity,
                message: format!(
                    "{}: sha256 mismatch: expected {}, got {hex_digest}; the file was not published (check the pin in --checksums or the artifact)",
                    artifact.display_uri,
                    hex::encode(pin)
                ),
            });
        }
    }
    if let Some(announced) = announced {
        if announced != hex_digest {
            let what = if artifact.scheme == Scheme::Staging {
                "the server's copy is damaged: upload the bundle again"
            } else {
                "the server's copy is damaged"
            };
            return Err(Failure {
                kind: FailureKind::Integrity,
                message: format!(
                    "{}: the server announced sha256 {announced}, the bytes received hash to {hex_digest}; nothing was published ({what})",
                    artifact.display_uri
                ),
            });
        }
    }
    Ok(())
}

/// The bytes against the sha1 the Maven repository publishes for the jar.
fn check_sha1(artifact: &Artifact, got: Option<[u8; 20]>) -> Result<(), Failure> {
    match (artifact.sha1, got) {
        (Some(expected), Some(got)) if expected != got => Err(Failure {
            kind: FailureKind::Integrity,
            message: format!(
                "{}: sha1 {} does not match the repository's .sha1 ({}); the file was not published (the repository's copy is damaged or was replaced)",
                artifact.display_uri,
                hex::encode(got),
                hex::encode(expected)
            ),
        }),
        _ => Ok(()),
    }
}

/// One attempt: open (resuming when possible), then stream into the temp file, or
/// fetch in parallel ranges when the object is large and the source serves ranges.
async fn attempt(
    id: usize,
    artifact: &Artifact,
    source: &Arc<dyn Source>,
    opts: &Options,
    reporter: &Arc<dyn Reporter>,
    transfer: &mut Transfer,
    budget: &Arc<Budget>,
) -> Result<(), AttemptError> {
    let body = open(id, artifact, source, opts, reporter, transfer).await?;
    if let Some((size, validator)) = ranged_version(&body, transfer, source, opts) {
        let start = ranged::Start {
            body,
            size,
            validator,
            budget: budget.clone(),
        };
        return fetch_in_ranges(id, artifact, source, opts, reporter, transfer, start).await;
    }
    stream_body(id, artifact, opts, reporter, transfer, body).await
}

/// The error of a body that sent nothing for the stall timeout.
fn stalled(artifact: &Artifact, opts: &Options) -> SourceError {
    SourceError::new(
        FaultKind::Transient,
        format!(
            "{}: no data for {} (stall timeout)",
            artifact.display_uri,
            format_duration(opts.stall_timeout)
        ),
    )
}

/// Opens the artifact, resuming at what was received when the last answer allows
/// it; an answer that does not continue the same object is never spliced on.
async fn open(
    id: usize,
    artifact: &Artifact,
    source: &Arc<dyn Source>,
    opts: &Options,
    reporter: &Arc<dyn Reporter>,
    transfer: &mut Transfer,
) -> Result<Body, AttemptError> {
    if !transfer.resumable {
        transfer.reset(id, reporter.as_ref())?;
    }
    let request = OpenRequest {
        offset: transfer.written,
        end: None,
        validator: transfer.validator.clone(),
    };
    let body = timeout(opts.stall_timeout, source.open(&artifact.uri, &request))
        .await
        .map_err(|_| stalled(artifact, opts))??;
    if body.offset == 0 {
        // Asked to resume, answered from the start (no ranges, or If-Range said
        // the object changed): what we hold is discarded.
        transfer.reset(id, reporter.as_ref())?;
    } else if body.offset != transfer.written
        || body.meta.validator != transfer.validator
        || (transfer.expected.is_some() && body.meta.size != transfer.expected)
    {
        // A range of something else (another offset, version or size): never
        // splice it onto what we hold; start over on the next attempt.
        transfer.resumable = false;
        transfer.validator = None;
        transfer.expected = None;
        return Err(SourceError::new(
            FaultKind::Transient,
            format!(
                "{}: the resumed range does not continue what was received (the object changed?); starting over",
                artifact.display_uri
            ),
        )
        .into());
    }
    if body.offset == 0 {
        transfer.expected = body.meta.size;
    }
    if !transfer.started {
        reporter.start(id, &artifact.name, transfer.expected);
        transfer.started = true;
    }
    transfer.validator = body.meta.validator.clone();
    transfer.resumable = body.meta.ranges && transfer.validator.is_some();
    Ok(body)
}

/// For a large object, answered from its start by a source that serves parallel
/// ranges of one version: its size and validator.
fn ranged_version(
    body: &Body,
    transfer: &Transfer,
    source: &Arc<dyn Source>,
    opts: &Options,
) -> Option<(u64, String)> {
    let (0, 0, Some(size), Some(validator), true) = (
        body.offset,
        transfer.written,
        body.meta.size,
        body.meta.validator.clone(),
        body.meta.ranges,
    ) else {
        return None;
    };
    let worth_it = size >= ranged::THRESHOLD
        && opts.parallelism > 1
        && !transfer.one_stream
        && source.parallel_ranges();
    worth_it.then_some((size, validator))
}

/// Fetches the object in parallel ranges into the temp file; on failure what was
/// received is dropped and the next attempt starts over (as one stream when the
/// ranges did not come from one version).
async fn fetch_in_ranges(
    id: usize,
    artifact: &Artifact,
    source: &Arc<dyn Source>,
    opts: &Options,
    reporter: &Arc<dyn Reporter>,
    transfer: &mut Transfer,
    start: ranged::Start,
) -> Result<(), AttemptError> {
    let size = start.size;
    transfer.file.flush()?;
    let file = transfer.file.get_ref().try_clone()?;
    let fetched = ranged::fetch(
        id,
        artifact,
        source.clone(),
        opts,
        reporter.clone(),
        file,
        start,
    )
    .await;
    let (failure, advanced) = match fetched {
        Ok(hasher) => {
            transfer.hasher = hasher;
            transfer.written = size;
            return Ok(());
        }
        Err(failed) => failed,
    };
    reporter.rewind(id, advanced);
    transfer.file.get_mut().set_len(0)?;
    transfer.resumable = false;
    transfer.validator = None;
    transfer.expected = None;
    Err(match failure {
        ranged::Failure::Local(e) => AttemptError::Local(e),
        ranged::Failure::Source(e) => AttemptError::Spent(e),
        // Every range stops for a reason one of them gives; never left alone.
        ranged::Failure::Abandoned => {
            AttemptError::Local(std::io::Error::other("the ranged transfer stopped"))
        }
        ranged::Failure::Changed(e) => {
            transfer.one_stream = true;
            AttemptError::Source(e)
        }
    })
}

/// Streams `body` into the temp file, hashing as it goes; a body shorter than
/// announced is a transient failure (resumed), a longer one an integrity failure.
async fn stream_body(
    id: usize,
    artifact: &Artifact,
    opts: &Options,
    reporter: &Arc<dyn Reporter>,
    transfer: &mut Transfer,
    mut body: Body,
) -> Result<(), AttemptError> {
    while let Some(chunk) = timeout(opts.stall_timeout, body.stream.next())
        .await
        .map_err(|_| stalled(artifact, opts))?
    {
        let chunk = chunk?;
        transfer.file.write_all(&chunk)?;
        transfer.hasher.update(&chunk);
        transfer.written += chunk.len() as u64;
        reporter.advance(id, chunk.len() as u64);
        if transfer
            .expected
            .is_some_and(|expected| transfer.written > expected)
        {
            break;
        }
    }
    match transfer.expected {
        Some(expected) if transfer.written < expected => Err(SourceError::new(
            FaultKind::Transient,
            format!(
                "{}: body ended after {} of {expected} bytes",
                artifact.display_uri, transfer.written
            ),
        )
        .into()),
        Some(expected) if transfer.written > expected => {
            transfer.resumable = false;
            Err(SourceError::new(
                FaultKind::Integrity,
                format!(
                    "{}: received {} bytes, more than the announced {expected}",
                    artifact.display_uri, transfer.written
                ),
            )
            .into())
        }
        _ => Ok(()),
    }
}
