//! Large objects in parallel ranges: several requests at once, each a task of
//! its own, each part resumed on its own, all pinned to one version of the
//! object (If-Range / If-Match on its validator), all retried within the
//! artifact's one retry budget (see [`super::budget`]: ranges that fail together
//! cost one attempt, and only one of them probes while the others wait). The chunks received go,
//! as they are (no copy), to the file's one writer thread, which puts them in
//! place with positioned writes into the temp file (sized up front): one writer,
//! because concurrent writes to one file only queue on its inode lock, holding
//! the threads that should be receiving. The sha256 is computed in order on
//! another thread, off the transfer's path, reading each part back from the page
//! cache as soon as it and the parts before it are written, into one reused
//! buffer.

use std::collections::BTreeSet;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use bytes::Bytes;
use futures_util::StreamExt;
use tokio::time::timeout;
use tracing::{debug, warn};

use super::adapt::{HillClimb, WINDOW};
use super::budget::{Budget, Decision};
use super::digest::Hashes;
use super::options::Options;
use crate::plan::Artifact;
use crate::progress::Reporter;
use crate::source::{Body, FaultKind, OpenRequest, Source, SourceError};
use crate::util::duration::format_duration;

/// Objects at least this large are fetched in ranges (when the source serves them).
pub(super) const THRESHOLD: u64 = 32 << 20;
/// The size of one range.
pub(super) const PART: u64 = 8 << 20;
/// At most this many ranges of one object are in flight to start with.
pub(super) const MAX_STREAMS: usize = 8;
/// With an adaptive parallelism, at most this many once the throughput shows
/// that the origin caps each connection.
const MAX_STREAMS_ADAPTIVE: usize = 16;
/// The hasher's read size; progress is reported in steps of this size too.
const READ_CHUNK: usize = 1 << 20;
/// Chunks received and not yet written, at most (a chunk is what one socket read
/// gave: at most a few hundred KiB).
const WRITE_QUEUE: usize = 8;

/// Work for the file's writer thread.
enum Write {
    /// Bytes to put at an offset.
    At(u64, Bytes),
    /// Every byte of this part was handed over before this.
    Part(usize),
}

/// Why a ranged transfer stopped.
pub(super) enum Failure {
    Source(SourceError),
    Local(std::io::Error),
    /// A range came back as something else: another version of the object, or
    /// the whole object (a server that announces ranges but ignores them).
    Changed(SourceError),
    /// Stopped because another range spent the budget (its failure says why).
    Abandoned,
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
pub(super) struct Start {
    pub body: Body,
    pub size: u64,
    pub validator: String,
    /// The artifact's retry budget.
    pub budget: Arc<Budget>,
}

/// What one transfer shares between its range workers (each a task of its own,
/// so the ranges are received and written on every worker thread).
struct Shared {
    a: Artifact,
    source: Arc<dyn Source>,
    opts: Options,
    reporter: Arc<dyn Reporter>,
    id: usize,
    version: Version,
    parts: Vec<Range<u64>>,
    next: AtomicUsize,
    /// The first response (a whole-object stream) serves part 0.
    first: Mutex<Option<Body>>,
    /// Bytes reported to the progress display (rewound on failure).
    advanced: AtomicU64,
    budget: Arc<Budget>,
}

/// Fetches the whole object into `file` in ranges, starting from `first`, the
/// answer to a plain GET of the same version. Returns the sha256 state.
pub(super) async fn fetch(
    id: usize,
    a: &Artifact,
    source: Arc<dyn Source>,
    opts: &Options,
    reporter: Arc<dyn Reporter>,
    file: std::fs::File,
    start: Start,
) -> Result<Hashes, (Failure, u64)> {
    let Start {
        body: first,
        size,
        validator,
        budget,
    } = start;
    let version = Version { size, validator };
    let file = Arc::new(file);
    if let Err(e) = file.set_len(size) {
        return Err((Failure::Local(e), 0));
    }
    let parts: Vec<Range<u64>> = (0..size.div_ceil(PART))
        .map(|i| i * PART..((i + 1) * PART).min(size))
        .collect();
    let streams = opts.parallelism.clamp(1, MAX_STREAMS).min(parts.len());
    let shared = Arc::new(Shared {
        a: a.clone(),
        source,
        opts: opts.clone(),
        reporter,
        id,
        version,
        parts,
        next: AtomicUsize::new(0),
        first: Mutex::new(Some(first)),
        advanced: AtomicU64::new(0),
        budget,
    });
    let total = shared.parts.len();
    debug!(
        uri = %a.display_uri,
        "fetching {size} bytes in {total} ranges over {streams} connections"
    );

    // The writer ends when every worker's sender is gone (done, failed or
    // aborted), the hasher when the writer is.
    let (writes, queue) = tokio::sync::mpsc::channel(WRITE_QUEUE);
    let (done, completed) = mpsc::channel();
    let writing = {
        let file = file.clone();
        tokio::task::spawn_blocking(move || write_queue(&file, queue, &done))
    };
    let hashing = {
        let parts = shared.parts.clone();
        let hashes = Hashes::new(a.sha1.is_some());
        tokio::task::spawn_blocking(move || hash_in_order(&file, &parts, &completed, hashes))
    };
    // Dropped (the deadline, a signal), the set aborts its workers.
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..streams {
        workers.spawn(worker(shared.clone(), writes.clone()));
    }
    let failed = run_workers(&shared, &mut workers, writes, streams).await;
    let advanced = shared.advanced.load(Ordering::Relaxed);
    // A write error is the cause of any failure it comes with.
    match writing.await.map_err(std::io::Error::other) {
        Ok(Ok(())) => {}
        Ok(Err(e)) | Err(e) => return Err((Failure::Local(e), advanced)),
    }
    if let Some(failure) = failed {
        return Err((failure, advanced));
    }
    match hashing.await.map_err(std::io::Error::other) {
        Ok(Ok(hasher)) => Ok(hasher),
        Ok(Err(e)) | Err(e) => Err((Failure::Local(e), advanced)),
    }
}

/// Joins the range workers; while ranges wait and the throughput grows with the
/// streams (an origin that caps each connection), adds workers, up to
/// [`MAX_STREAMS_ADAPTIVE`] (only with an adaptive parallelism). Returns the
/// first failure that says why (not a range that stopped for it).
async fn run_workers(
    shared: &Arc<Shared>,
    workers: &mut tokio::task::JoinSet<Result<(), Failure>>,
    writes: tokio::sync::mpsc::Sender<Write>,
    streams: usize,
) -> Option<Failure> {
    let adaptive = shared.opts.parallelism_max > shared.opts.parallelism;
    let most = if adaptive {
        MAX_STREAMS_ADAPTIVE.min(shared.parts.len()).max(streams)
    } else {
        streams
    };
    let mut climb = HillClimb::new(streams, most, tokio::time::Instant::now());
    let mut ticks = tokio::time::interval(WINDOW);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Kept while more workers may come: the writer ends when every sender is gone.
    let mut writes = (most > streams).then_some(writes);
    let mut failed = None;
    loop {
        tokio::select! {
            joined = workers.join_next() => {
                let Some(joined) = joined else { break };
                let failure = match joined {
                    Ok(Ok(())) => continue,
                    Ok(Err(failure)) => failure,
                    Err(e) if e.is_cancelled() => Failure::Abandoned,
                    Err(e) => Failure::Local(std::io::Error::other(format!("a range worker failed: {e}"))),
                };
                workers.abort_all();
                writes = None;
                if matches!(failed, None | Some(Failure::Abandoned)) {
                    failed = Some(failure);
                }
            }
            _ = ticks.tick(), if writes.is_some() => {
                let waiting = shared.next.load(Ordering::Relaxed) < shared.parts.len();
                let before = climb.limit();
                let bytes = shared.advanced.load(Ordering::Relaxed);
                match (climb.sample(tokio::time::Instant::now(), bytes, waiting), &writes) {
                    (Some(limit), Some(sender)) => {
                        debug!(uri = %shared.a.display_uri, "throughput grew with {before} ranges at once: allowing {limit}");
                        for _ in before..limit {
                            workers.spawn(worker(shared.clone(), sender.clone()));
                        }
                    }
                    _ if !waiting || climb.limit() >= most => writes = None,
                    _ => {}
                }
            }
        }
    }
    failed
}

/// The file's writer: puts each chunk in place, and tells the hasher about each
/// part once all its bytes are written.
fn write_queue(
    file: &std::fs::File,
    mut queue: tokio::sync::mpsc::Receiver<Write>,
    done: &mpsc::Sender<usize>,
) -> std::io::Result<()> {
    while let Some(write) = queue.blocking_recv() {
        match write {
            Write::At(pos, bytes) => file.write_all_at(&bytes, pos)?,
            Write::Part(i) => {
                let _ = done.send(i);
            }
        }
    }
    Ok(())
}

/// Hashes the parts of `file` in order, each as soon as it and all before it are
/// written (the bytes are in the page cache), into one reused buffer.
fn hash_in_order(
    file: &std::fs::File,
    parts: &[Range<u64>],
    completed: &mpsc::Receiver<usize>,
    mut hasher: Hashes,
) -> std::io::Result<Hashes> {
    let mut buf = vec![0u8; READ_CHUNK];
    let mut ready = BTreeSet::new();
    let mut next = 0;
    while next < parts.len() {
        let Ok(part) = completed.recv() else {
            return Err(std::io::Error::other(
                "the transfer stopped before every range was written",
            ));
        };
        ready.insert(part);
        while ready.remove(&next) {
            let range = &parts[next];
            let mut pos = range.start;
            while pos < range.end {
                let n = (range.end - pos).min(buf.len() as u64) as usize;
                file.read_exact_at(&mut buf[..n], pos)?;
                hasher.update(&buf[..n]);
                pos += n as u64;
            }
            next += 1;
        }
    }
    Ok(hasher)
}

/// Takes parts off the queue until none is left.
async fn worker(s: Arc<Shared>, writes: tokio::sync::mpsc::Sender<Write>) -> Result<(), Failure> {
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
        part(&s, range, first, &writes).await?;
        writes
            .send(Write::Part(i))
            .await
            .map_err(|_| writer_gone())?;
    }
}

/// Why one attempt at a part stopped.
enum PartError {
    Source(SourceError),
    /// The answer is not the range of the version being fetched.
    Changed,
    /// The writer stopped (on a write error, reported by itself).
    WriterGone,
}

impl From<SourceError> for PartError {
    fn from(e: SourceError) -> Self {
        PartError::Source(e)
    }
}

/// The error a worker sees when the writer has stopped (its own error is reported).
fn writer_gone() -> Failure {
    Failure::Local(std::io::Error::other("the file's writer stopped"))
}

/// Where one part stands across its requests.
struct Cursor {
    range: Range<u64>,
    /// The next byte to receive.
    pos: u64,
    /// Handed to the writer but not yet reported to the progress display.
    unreported: u64,
    /// The budget's round the current request belongs to.
    round: u32,
    /// Whether the current request is its round's probe (its first bytes end
    /// the round).
    probing: bool,
}

/// Fetches one part, resuming within it as the artifact's budget allows.
async fn part(
    s: &Shared,
    range: Range<u64>,
    mut first: Option<Body>,
    writes: &tokio::sync::mpsc::Sender<Write>,
) -> Result<(), Failure> {
    // The first part continues the artifact's attempt; the others start when no
    // probe is out.
    let round = match first {
        Some(_) => s.budget.round(),
        None => s.budget.admit().await.ok_or(Failure::Abandoned)?,
    };
    let mut c = Cursor {
        pos: range.start,
        range,
        unreported: 0,
        round,
        probing: false,
    };
    loop {
        let e = match receive(s, &mut c, first.take(), writes).await {
            Ok(()) => return Ok(()),
            Err(PartError::WriterGone) => return Err(writer_gone()),
            Err(PartError::Changed) => {
                return Err(Failure::Changed(SourceError::new(
                    FaultKind::Transient,
                    format!(
                        "{}: a range request was not answered with that range of the same version (the object changed, or the server ignores ranges); starting over as one stream",
                        s.a.display_uri
                    ),
                )))
            }
            Err(PartError::Source(e)) => e,
        };
        match s.budget.failed(c.round, &e) {
            Decision::GiveUp => return Err(Failure::Source(e)),
            Decision::Stopped => return Err(Failure::Abandoned),
            Decision::Probe(delay) => {
                c.round = s.budget.round();
                c.probing = true;
                warn!(
                    uri = %s.a.display_uri,
                    "range {}-{}: attempt {}/{} failed: {}; retrying in {}, resuming at byte {} (the other ranges wait for this one)",
                    c.range.start,
                    c.range.end - 1,
                    c.round,
                    s.budget.allowed(),
                    e.describe(),
                    format_duration(delay),
                    c.pos
                );
                tokio::time::sleep(delay).await;
            }
            Decision::Wait => {
                debug!(
                    uri = %s.a.display_uri,
                    "range {}-{} failed in a round already counted: {}; waiting for the retried range",
                    c.range.start,
                    c.range.end - 1,
                    e.describe()
                );
                c.round = s.budget.admit().await.ok_or(Failure::Abandoned)?;
                c.probing = false;
            }
        }
    }
}

/// The error of a range that sent nothing for the stall timeout.
fn stalled(s: &Shared) -> SourceError {
    SourceError::new(
        FaultKind::Transient,
        format!(
            "{}: no data for {} (stall timeout)",
            s.a.display_uri,
            format_duration(s.opts.stall_timeout)
        ),
    )
}

/// One request for the rest of the part (or `first`, the answer that serves
/// part 0): its bytes go to the writer.
async fn receive(
    s: &Shared,
    c: &mut Cursor,
    first: Option<Body>,
    writes: &tokio::sync::mpsc::Sender<Write>,
) -> Result<(), PartError> {
    let mut body = match first {
        Some(body) => body,
        None => {
            let req = OpenRequest {
                offset: c.pos,
                end: Some(c.range.end),
                validator: Some(s.version.validator.clone()),
            };
            timeout(s.opts.stall_timeout, s.source.open(&s.a.uri, &req))
                .await
                .map_err(|_| stalled(s))??
        }
    };
    if body.offset != c.pos
        || body.meta.validator.as_deref() != Some(s.version.validator.as_str())
        || body.meta.size != Some(s.version.size)
    {
        return Err(PartError::Changed);
    }
    while c.pos < c.range.end {
        let Some(chunk) = timeout(s.opts.stall_timeout, body.stream.next())
            .await
            .map_err(|_| stalled(s))?
        else {
            break;
        };
        let chunk = chunk?;
        if c.probing {
            s.budget.recovered(c.round);
            c.probing = false;
        }
        let take = chunk.len().min((c.range.end - c.pos) as usize);
        writes
            .send(Write::At(c.pos, chunk.slice(..take)))
            .await
            .map_err(|_| PartError::WriterGone)?;
        c.pos += take as u64;
        c.unreported += take as u64;
        if c.unreported >= READ_CHUNK as u64 {
            report(s, &mut c.unreported);
        }
    }
    report(s, &mut c.unreported);
    if c.pos < c.range.end {
        return Err(SourceError::new(
            FaultKind::Transient,
            format!(
                "{}: the range {}-{} ended at byte {}",
                s.a.display_uri,
                c.range.start,
                c.range.end - 1,
                c.pos
            ),
        )
        .into());
    }
    Ok(())
}

/// Tells the progress display about the bytes handed to the writer since the last call.
fn report(s: &Shared, unreported: &mut u64) {
    if *unreported > 0 {
        s.reporter.advance(s.id, *unreported);
        s.advanced.fetch_add(*unreported, Ordering::Relaxed);
        *unreported = 0;
    }
}
