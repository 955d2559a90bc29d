//! Large objects in parallel ranges: several requests at once, each writing its
//! part with positioned writes into the (preallocated) temp file, each part
//! retried and resumed on its own, all pinned to one version of the object
//! (If-Range / If-Match on its validator). The sha256 is computed in order, off
//! the transfer's path, as soon as the parts before a part are complete.

use std::collections::BTreeSet;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures_util::StreamExt;
use sha2::{Digest, Sha256};
use tokio::time::timeout;
use tracing::{debug, warn};

use crate::duration::format_duration;
use crate::engine::Options;
use crate::plan::Artifact;
use crate::progress::Reporter;
use crate::source::{Body, FaultKind, OpenRequest, Source, SourceError};

/// Objects at least this large are fetched in ranges (when the source serves them).
pub const THRESHOLD: u64 = 32 << 20;
/// The size of one range.
pub const PART: u64 = 8 << 20;
/// At most this many ranges of one object are in flight.
pub const MAX_STREAMS: usize = 8;
/// Bytes gathered before one positioned write.
const WRITE_CHUNK: usize = 1 << 20;

/// Why a ranged transfer stopped.
pub enum Failure {
    Source(SourceError),
    Local(std::io::Error),
    /// A range came back as something else: another version of the object, or
    /// the whole object (a server that announces ranges but ignores them).
    Changed(SourceError),
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        Failure::Local(e)
    }
}

impl From<SourceError> for Failure {
    fn from(e: SourceError) -> Self {
        Failure::Source(e)
    }
}

/// The version of the object every range must come from.
struct Version {
    size: u64,
    validator: String,
}

/// The answer to a plain GET of a large object, which serves the first range.
pub struct Start {
    pub body: Body,
    pub size: u64,
    pub validator: String,
}

/// What one transfer shares between its range workers.
struct Shared<'a> {
    a: &'a Artifact,
    source: &'a dyn Source,
    opts: &'a Options,
    reporter: &'a dyn Reporter,
    id: usize,
    file: Arc<std::fs::File>,
    version: Version,
    parts: Vec<Range<u64>>,
    next: AtomicUsize,
    /// The first response (a whole-object stream) serves part 0.
    first: Mutex<Option<Body>>,
    /// Bytes reported to the progress display (rewound on failure).
    advanced: AtomicU64,
    done: tokio::sync::mpsc::UnboundedSender<usize>,
}

/// Fetches the whole object into `file` in ranges, starting from `first`, the
/// answer to a plain GET of the same version. Returns the sha256 state.
pub async fn fetch(
    id: usize,
    a: &Artifact,
    source: &dyn Source,
    opts: &Options,
    reporter: &dyn Reporter,
    file: std::fs::File,
    start: Start,
) -> Result<Sha256, (Failure, u64)> {
    let Start {
        body: first,
        size,
        validator,
    } = start;
    let version = Version { size, validator };
    let file = Arc::new(file);
    if let Err(e) = file.set_len(size) {
        return Err((Failure::Local(e), 0));
    }
    let parts: Vec<Range<u64>> = (0..size.div_ceil(PART))
        .map(|i| i * PART..((i + 1) * PART).min(size))
        .collect();
    let (done, mut completed) = tokio::sync::mpsc::unbounded_channel();
    let streams = opts.parallelism.clamp(1, MAX_STREAMS).min(parts.len());
    let shared = Shared {
        a,
        source,
        opts,
        reporter,
        id,
        file: file.clone(),
        version,
        parts,
        next: AtomicUsize::new(0),
        first: Mutex::new(Some(first)),
        advanced: AtomicU64::new(0),
        done,
    };
    let total = shared.parts.len();
    debug!(
        uri = %a.shown,
        "fetching {size} bytes in {total} ranges over {streams} connections"
    );

    let workers = futures_util::future::try_join_all((0..streams).map(|_| worker(&shared)));
    let hasher = async {
        let mut hasher = Sha256::new();
        let mut ready = BTreeSet::new();
        let mut next = 0;
        while next < total {
            let Some(part) = completed.recv().await else {
                break;
            };
            ready.insert(part);
            while ready.remove(&next) {
                let range = shared.parts[next].clone();
                let file = file.clone();
                hasher = tokio::task::spawn_blocking(move || hash_range(&file, range, hasher))
                    .await
                    .map_err(std::io::Error::other)??;
                next += 1;
            }
        }
        Ok::<_, std::io::Error>(hasher)
    };
    let result =
        futures_util::future::try_join(workers, async { hasher.await.map_err(Failure::Local) })
            .await;
    match result {
        Ok((_, hasher)) => Ok(hasher),
        Err(failure) => Err((failure, shared.advanced.load(Ordering::Relaxed))),
    }
}

/// Feeds `range` of `file` to the hasher (the bytes are in the page cache).
fn hash_range(
    file: &std::fs::File,
    range: Range<u64>,
    mut hasher: Sha256,
) -> std::io::Result<Sha256> {
    let mut buf = vec![0u8; WRITE_CHUNK];
    let mut pos = range.start;
    while pos < range.end {
        let n = (range.end - pos).min(buf.len() as u64) as usize;
        file.read_exact_at(&mut buf[..n], pos)?;
        hasher.update(&buf[..n]);
        pos += n as u64;
    }
    Ok(hasher)
}

/// Takes parts off the queue until none is left.
async fn worker(s: &Shared<'_>) -> Result<(), Failure> {
    let mut buf = Vec::with_capacity(WRITE_CHUNK);
    loop {
        let i = s.next.fetch_add(1, Ordering::Relaxed);
        let Some(range) = s.parts.get(i).cloned() else {
            return Ok(());
        };
        let first = if i == 0 {
            s.first.lock().expect("lock").take()
        } else {
            None
        };
        buf = part(s, range, first, buf).await?;
        let _ = s.done.send(i);
    }
}

/// Why one attempt at a part stopped.
enum PartError {
    Source(SourceError),
    /// The answer is not the range of the version being fetched.
    Changed,
    Local(std::io::Error),
}

impl From<SourceError> for PartError {
    fn from(e: SourceError) -> Self {
        PartError::Source(e)
    }
}

/// Fetches one part, retrying and resuming within it.
async fn part(
    s: &Shared<'_>,
    range: Range<u64>,
    mut first: Option<Body>,
    mut buf: Vec<u8>,
) -> Result<Vec<u8>, Failure> {
    let mut pos = range.start;
    let mut attempts = 0u32;
    let stalled = || {
        SourceError::new(
            FaultKind::Transient,
            format!(
                "{}: no data for {} (stall timeout)",
                s.a.shown,
                format_duration(s.opts.stall_timeout)
            ),
        )
    };
    loop {
        attempts += 1;
        buf.clear();
        let result: Result<(), PartError> = async {
            let mut body = match first.take() {
                Some(body) => body,
                None => {
                    let req = OpenRequest {
                        offset: pos,
                        end: Some(range.end),
                        validator: Some(s.version.validator.clone()),
                    };
                    timeout(s.opts.stall_timeout, s.source.open(&s.a.uri, &req))
                        .await
                        .map_err(|_| stalled())??
                }
            };
            if body.offset != pos
                || body.meta.validator.as_deref() != Some(s.version.validator.as_str())
                || body.meta.size != Some(s.version.size)
            {
                return Err(PartError::Changed);
            }
            while pos + (buf.len() as u64) < range.end {
                let Some(chunk) = timeout(s.opts.stall_timeout, body.stream.next())
                    .await
                    .map_err(|_| stalled())?
                else {
                    break;
                };
                let chunk = chunk?;
                let room = (range.end - pos) as usize - buf.len();
                buf.extend_from_slice(&chunk[..chunk.len().min(room)]);
                if buf.len() >= WRITE_CHUNK {
                    pos = write(s, &mut buf, pos).await.map_err(PartError::Local)?;
                }
            }
            pos = write(s, &mut buf, pos).await.map_err(PartError::Local)?;
            if pos < range.end {
                return Err(SourceError::new(
                    FaultKind::Transient,
                    format!(
                        "{}: the range {}-{} ended at byte {pos}",
                        s.a.shown,
                        range.start,
                        range.end - 1
                    ),
                )
                .into());
            }
            Ok(())
        }
        .await;
        match result {
            Ok(()) => return Ok(buf),
            Err(PartError::Local(e)) => return Err(Failure::Local(e)),
            Err(PartError::Changed) => {
                return Err(Failure::Changed(SourceError::new(
                    FaultKind::Transient,
                    format!(
                        "{}: a range request was not answered with that range of the same version (the object changed, or the server ignores ranges); starting over as one stream",
                        s.a.shown
                    ),
                )))
            }
            Err(PartError::Source(e)) if e.is_transient() && attempts <= s.opts.retries => {
                let asked = e.retry_after.map(|d| d.min(crate::transfer::MAX_RETRY_AFTER));
                let delay = s.opts.backoff.delay(attempts).max(asked.unwrap_or_default());
                warn!(
                    uri = %s.a.shown,
                    "range {}-{}: attempt {attempts}/{} failed: {}; retrying in {}, resuming at byte {pos}",
                    range.start,
                    range.end - 1,
                    s.opts.retries + 1,
                    e.describe(),
                    format_duration(delay)
                );
                tokio::time::sleep(delay).await;
            }
            Err(PartError::Source(e)) => return Err(Failure::Source(e)),
        }
    }
}

/// Writes `buf` at `pos` (off the async threads), empties it, returns the new position.
async fn write(s: &Shared<'_>, buf: &mut Vec<u8>, pos: u64) -> std::io::Result<u64> {
    if buf.is_empty() {
        return Ok(pos);
    }
    let n = buf.len() as u64;
    let file = s.file.clone();
    let data = std::mem::take(buf);
    let mut data =
        tokio::task::spawn_blocking(move || file.write_all_at(&data, pos).map(|()| data))
            .await
            .map_err(std::io::Error::other)??;
    data.clear();
    *buf = data;
    s.reporter.advance(s.id, n);
    s.advanced.fetch_add(n, Ordering::Relaxed);
    Ok(pos + n)
}
