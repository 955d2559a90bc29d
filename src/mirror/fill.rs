//! One origin transfer per URI at a time, shared by every request that wants it.
//!
//! The first request for a URI starts a [`Fill`]: revalidate what the mirror
//! holds (a conditional request; unchanged → done at once), else stream the
//! origin's bytes into a temp file, hashing them, retrying and resuming as the
//! source allows. Every request for the URI meanwhile joins it and is served from
//! the temp file as it grows; the blob is published (and the index updated) only
//! once its digest is known and matches what was expected.
//!
//! Joiners that keep up are served from the last chunks written, held in memory
//! ([`Fill::recent`]): no read of the file, no buffer, no blocking-pool hop per
//! chunk. One that falls behind reads the file.
//!
//! The temp file never holds more than the room the store promised it: the
//! announced size before the first byte, or [`GROW_STEP`] at a time when the
//! origin did not say. A transfer that cannot get its room stops writing and is
//! passed through: each request streams the rest from the origin itself.

use std::collections::VecDeque;
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use sha2::{Digest, Sha256};
use tokio::sync::watch;
use tracing::{debug, warn};
use url::Url;

use super::store::{IndexEntry, Reading, Reservation};
use super::Mirror;
use crate::retry::RetryPolicy;
use crate::source::{ByteStream, OpenRequest, Source, SourceError};

/// Bytes received between two announcements of a fill's progress.
const ANNOUNCE_STEP: u64 = 256 << 10;
/// Announced chunks a fill keeps in memory for its joiners, each 256 KiB to
/// [`Spool::CAPACITY`] (or one network chunk larger than that): a joiner further
/// behind than that reads the temp file.
const RECENT_CHUNKS: usize = 8;
/// Room asked of the store at a time for a transfer of unknown size.
const GROW_STEP: u64 = 1 << 20;

/// Where a fill is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum State {
    /// Revalidating, or waiting for an origin slot.
    Starting,
    /// Bytes are arriving: `written` so far, of `size` when the origin said.
    Streaming { written: u64, size: Option<u64> },
    /// The blob is published (or was unchanged): serve it from the store.
    Done {
        sha256: String,
        size: u64,
        revalidated: bool,
    },
    /// No room in the store: bytes `0..written` are in the temp file, the rest
    /// is for each request to stream from the origin (a range from where it
    /// is, with the origin's `validator`), without writing.
    PassThrough {
        written: u64,
        size: Option<u64>,
        validator: Option<String>,
    },
    /// The origin failed (the message says how).
    Failed(String),
}

/// A transfer in progress.
pub(super) struct Fill {
    pub uri: String,
    /// The temp file, open for reading by joiners (still readable after the
    /// rename that publishes it).
    pub file: Arc<File>,
    pub state: watch::Receiver<State>,
    /// The last chunks written to the temp file while streaming, each with its
    /// offset; emptied when the transfer ends or starts over.
    recent: Mutex<VecDeque<(u64, Bytes)>>,
    /// How many times the transfer started over (and emptied the temp file).
    restarts: AtomicU32,
    /// The room the temp file may fill, kept until the last reader of the file
    /// is done (or handed to the blob when published).
    room: Mutex<Reservation>,
    /// A transfer passed through before its first byte: the origin's body as
    /// opened, for the first answer to take (the origin is asked once).
    pub handoff: Mutex<Option<ByteStream>>,
    /// The blob held for the URI, opened (and so kept from eviction) while it is
    /// revalidated and until every request of this fill has its answer.
    _held: Option<Reading>,
}

impl Fill {
    /// Bytes from `at` up to `end` (at most to the end of one chunk) if the
    /// chunk holding `at` is still in memory, and whether `end` cut the chunk.
    pub(super) fn recent(&self, at: u64, end: u64) -> Option<(Bytes, bool)> {
        let recent = self.recent.lock().expect("lock");
        let (offset, chunk) = recent
            .iter()
            .find(|(offset, chunk)| *offset <= at && at < offset + chunk.len() as u64)?;
        let chunk_end = offset + chunk.len() as u64;
        let to = end.min(chunk_end);
        (at < to).then(|| {
            let bytes = chunk.slice((at - offset) as usize..(to - offset) as usize);
            (bytes, to < chunk_end)
        })
    }

    /// How many times the transfer started over so far.
    pub(super) fn restarts(&self) -> u32 {
        self.restarts.load(Ordering::SeqCst)
    }

    fn remember(&self, offset: u64, chunk: Bytes) {
        let mut recent = self.recent.lock().expect("lock");
        if recent.len() == RECENT_CHUNKS {
            recent.pop_front();
        }
        recent.push_back((offset, chunk));
    }

    fn forget(&self) {
        self.recent.lock().expect("lock").clear();
    }
}

/// Starts the fill of `uri` (`known` is what the store holds for it) on its own task: it goes on when the
/// requests that wanted it go away.
pub(super) fn start(
    mirror: &Arc<Mirror>,
    uri: Url,
    known: Option<(IndexEntry, Reading)>,
) -> Result<Arc<Fill>, std::io::Error> {
    let temp = tempfile::Builder::new()
        .prefix("fill-")
        .tempfile_in(mirror.store.tmp_dir())?
        .into_temp_path();
    let writer = File::options().write(true).open(&temp)?;
    let reader = File::open(&temp)?;
    let (tx, rx) = watch::channel(State::Starting);
    let (known, held) = match known {
        Some((entry, reading)) => (Some(entry), Some(reading)),
        None => (None, None),
    };
    let fill = Arc::new(Fill {
        uri: uri.to_string(),
        file: Arc::new(reader),
        state: rx,
        recent: Mutex::new(VecDeque::new()),
        restarts: AtomicU32::new(0),
        room: Mutex::new(mirror.store.reservation()),
        handoff: Mutex::new(None),
        _held: held,
    });
    let mirror = mirror.clone();
    let ours = fill.clone();
    tokio::spawn(async move {
        let key = uri.to_string();
        let end = run(&mirror, &ours, &uri, known, writer, temp.to_path_buf(), &tx).await;
        // Joiners read what is left from the file now.
        ours.forget();
        drop(ours);
        let end = match end {
            Ok(done) => done,
            Err(message) => {
                mirror.metrics.origin_failures.inc();
                warn!(uri = %crate::util::redact::redact_url(&key), "mirror: {message}");
                State::Failed(message)
            }
        };
        // Joiners reading the temp file keep their handle; the name goes.
        drop(temp);
        mirror.finish_fill(&key);
        let _ = tx.send(end);
    });
    Ok(fill)
}

/// The fill's work; the final state, or why it failed.
async fn run(
    mirror: &Arc<Mirror>,
    fill: &Arc<Fill>,
    uri: &Url,
    known: Option<IndexEntry>,
    writer: File,
    temp: PathBuf,
    tx: &watch::Sender<State>,
) -> Result<State, String> {
    let source = mirror.source(uri)?;
    if let Some(entry) = known {
        if let Some(validator) = &entry.validator {
            let unchanged = source
                .unchanged(uri, validator)
                .await
                .map_err(|e| format!("revalidating with the origin: {}", e.describe()))?;
            if unchanged {
                mirror.metrics.revalidated.inc();
                return Ok(State::Done {
                    sha256: entry.sha256,
                    size: entry.size,
                    revalidated: true,
                });
            }
            debug!(uri = %uri, "mirror: changed at the origin; fetching again");
        }
    }
    let _slot = mirror
        .slots
        .acquire()
        .await
        .map_err(|_| "the mirror is stopping".to_owned())?;
    mirror.metrics.misses.inc();
    let (sha256, size, validator) = match transfer(mirror, fill, &source, uri, writer, tx).await? {
        Transferred::Whole {
            sha256,
            size,
            validator,
        } => (sha256, size, validator),
        Transferred::NoRoom(state) => {
            debug!(uri = %uri, "mirror: no room in the store; passed through");
            return Ok(state);
        }
    };
    // The digest is known: the answers in progress may end now (they read the
    // temp file); publishing (an fsync and a rename) is not their wait. The bytes
    // are kept under their own digest whatever a request expected: an answer
    // whose expectation differs is cut alone (a stale pin must not cost the
    // others their transfer, nor the origin another one).
    let done = State::Done {
        sha256: sha256.clone(),
        size,
        revalidated: false,
    };
    tx.send_replace(done.clone());
    let entry = IndexEntry {
        uri: uri.to_string(),
        sha256,
        size,
        validator,
    };
    let store = mirror.store.clone();
    let fill = fill.clone();
    let published = tokio::task::spawn_blocking(move || {
        store.insert(&temp, &entry, &mut fill.room.lock().expect("lock"))
    })
    .await
    .map_err(|e| e.to_string())
    .and_then(|r| r.map_err(|e| e.to_string()));
    if let Err(e) = published {
        // Served from the temp file all the same; only the cache missed out.
        warn!(uri = %uri, "mirror: cannot keep the blob: {e}");
    }
    Ok(done)
}

/// How a transfer ended well.
enum Transferred {
    /// Every byte is in the temp file.
    Whole {
        sha256: String,
        size: u64,
        validator: Option<String>,
    },
    /// The store has no room for it: [`State::PassThrough`].
    NoRoom(State),
}

/// Whether the fill's room covers `bytes` (asking the store for more, at least
/// `step` at a time).
fn room_for(fill: &Fill, bytes: u64, step: u64) -> bool {
    let mut room = fill.room.lock().expect("lock");
    let have = room.bytes();
    bytes <= have || room.grow((bytes - have).max(step)) || room.grow(bytes - have)
}

/// Streams the origin into `writer`, retrying transient failures (resuming when
/// the origin serves ranges of one version), never beyond the room the store
/// promised; the sha256, the size and the origin's validator, or where the
/// transfer stopped for want of room.
async fn transfer(
    mirror: &Mirror,
    fill: &Fill,
    source: &Arc<dyn Source>,
    uri: &Url,
    writer: File,
    tx: &watch::Sender<State>,
) -> Result<Transferred, String> {
    let policy: RetryPolicy = mirror.retry;
    let mut out = Spool::new(fill, writer);
    let mut hasher = Sha256::new();
    let mut written = 0u64;
    let mut validator: Option<String> = None;
    let mut size: Option<u64> = None;
    let mut attempt = 0u32;
    // What the joiners were told is readable.
    let mut announced = 0u64;
    let mut no_room = false;
    loop {
        attempt += 1;
        let resumable = written > 0 && validator.is_some();
        let request = OpenRequest {
            offset: if resumable { written } else { 0 },
            end: None,
            validator: validator.clone(),
        };
        let streamed = async {
            let opened = tokio::time::timeout(mirror.stall_timeout, source.open(uri, &request))
                .await
                .map_err(|_| stalled(mirror))??;
            if opened.offset != request.offset
                || (request.offset > 0 && opened.meta.validator != validator)
            {
                // Not the continuation of what we hold: start over (the engine
                // would have done the same), not resume again.
                if written > 0 {
                    validator = None;
                    return Err(SourceError::new(
                        crate::source::FaultKind::Transient,
                        "the origin answered from another offset or version; starting over",
                    ));
                }
            }
            if opened.offset == 0 {
                size = opened.meta.size;
                validator = opened.meta.validator.clone();
                // Room on the volume before the first byte is written.
                if size.is_some_and(|s| !room_for(fill, s, 0)) {
                    no_room = true;
                    *fill.handoff.lock().expect("lock") = Some(opened.stream);
                    return Err(full());
                }
            }
            let mut stream = opened.stream;
            loop {
                let next = tokio::time::timeout(mirror.stall_timeout, stream.next())
                    .await
                    .map_err(|_| stalled(mirror))?;
                let Some(chunk) = next else { break };
                let chunk = chunk?;
                let after = written + chunk.len() as u64;
                if let Some(s) = size.filter(|s| after > *s) {
                    return Err(oversized(s));
                }
                if !room_for(fill, after, GROW_STEP) {
                    no_room = true;
                    return Err(full());
                }
                out.push(&chunk).map_err(local)?;
                hasher.update(&chunk);
                written = after;
                mirror.metrics.origin_bytes.add(chunk.len() as u64);
                // Joiners may read what is flushed: announced in steps, so that
                // each wakes once per step, not once per network chunk.
                if written - announced >= ANNOUNCE_STEP || size == Some(written) {
                    out.flush().map_err(local)?;
                    announced = written;
                    tx.send_replace(State::Streaming { written, size });
                }
            }
            whole(written, size)
        }
        .await;
        let error = match streamed {
            Ok(()) => break,
            Err(_) if no_room => return passed(&mut out, written, size, validator),
            Err(e) => e,
        };
        let can_resume = written > 0 && validator.is_some() && error.is_transient();
        if !can_resume && written > 0 {
            // Start over: the answers in progress fail rather than splice two
            // bodies. Announced before the count of restarts moves, so an answer
            // that starts with the new count never sees the old bytes' state.
            tx.send_replace(State::Failed(
                "the origin's body changed during the transfer".to_owned(),
            ));
            out.truncate().map_err(|e| local(e).describe())?;
            hasher = Sha256::new();
            written = 0;
            announced = 0;
        }
        match policy.next_delay(attempt, &error) {
            Some(delay) => {
                debug!(uri = %uri, "mirror: attempt {attempt} failed ({}); retrying in {delay:?}", error.describe());
                tokio::time::sleep(delay).await;
            }
            None => return Err(format!("fetching from the origin: {}", error.describe())),
        }
    }
    out.flush().map_err(|e| local(e).describe())?;
    Ok(Transferred::Whole {
        sha256: hex::encode(hasher.finalize()),
        size: written,
        validator,
    })
}

/// The temp file as it is written: bytes gather in memory and go to the file a
/// chunk at a time, each chunk kept in [`Fill::recent`] for the joiners.
struct Spool<'a> {
    fill: &'a Fill,
    file: File,
    pending: BytesMut,
    /// Bytes in the file; the pending ones follow them.
    flushed: u64,
}

impl<'a> Spool<'a> {
    /// Room for one announced chunk and the network chunk that ends it.
    const CAPACITY: usize = (ANNOUNCE_STEP + (64 << 10)) as usize;

    fn new(fill: &'a Fill, file: File) -> Self {
        Spool {
            fill,
            file,
            pending: BytesMut::with_capacity(Self::CAPACITY),
            flushed: 0,
        }
    }

    /// Adds `data` to the pending chunk, written first if `data` would not fit
    /// (growing it would copy what it holds).
    fn push(&mut self, data: &[u8]) -> std::io::Result<()> {
        if !self.pending.is_empty() && self.pending.len() + data.len() > self.pending.capacity() {
            self.flush()?;
        }
        self.pending.extend_from_slice(data);
        Ok(())
    }

    /// Writes the pending bytes to the file as one chunk.
    fn flush(&mut self) -> std::io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let chunk = std::mem::replace(&mut self.pending, BytesMut::with_capacity(Self::CAPACITY));
        let chunk = chunk.freeze();
        self.file.write_all(&chunk)?;
        let offset = self.flushed;
        self.flushed += chunk.len() as u64;
        self.fill.remember(offset, chunk);
        Ok(())
    }

    /// Empties the temp file (and the chunks kept) to start over.
    fn truncate(&mut self) -> std::io::Result<()> {
        use std::io::Seek;
        // Counted before any byte of the new attempt can be read.
        self.fill.restarts.fetch_add(1, Ordering::SeqCst);
        self.pending.clear();
        self.fill.forget();
        self.file.set_len(0)?;
        self.file.rewind()?;
        self.flushed = 0;
        Ok(())
    }
}

/// A transfer without room: what is written stays readable, the rest comes
/// from the origin.
fn passed(
    out: &mut Spool<'_>,
    written: u64,
    size: Option<u64>,
    validator: Option<String>,
) -> Result<Transferred, String> {
    out.flush().map_err(|e| local(e).describe())?;
    Ok(Transferred::NoRoom(State::PassThrough {
        written,
        size,
        validator,
    }))
}

/// Whether a body that ended after `written` bytes was whole.
fn whole(written: u64, size: Option<u64>) -> Result<(), SourceError> {
    match size {
        Some(s) if written < s => Err(SourceError::new(
            crate::source::FaultKind::Transient,
            format!("the body ended after {written} of {s} bytes"),
        )),
        _ => Ok(()),
    }
}

fn oversized(size: u64) -> SourceError {
    SourceError::new(
        crate::source::FaultKind::Integrity,
        format!("the origin sent more than the announced {size} bytes"),
    )
}

fn full() -> SourceError {
    SourceError::new(
        crate::source::FaultKind::Refused,
        "no room in the mirror's store",
    )
}

fn stalled(mirror: &Mirror) -> SourceError {
    SourceError::new(
        crate::source::FaultKind::Transient,
        format!(
            "no data from the origin for {} (--stall-timeout)",
            crate::util::duration::format_duration(mirror.stall_timeout)
        ),
    )
}

fn local(e: std::io::Error) -> SourceError {
    SourceError::new(
        crate::source::FaultKind::Refused,
        format!("writing the mirror's temp file: {e}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill() -> Fill {
        let file = tempfile::tempfile().unwrap();
        let (_tx, rx) = watch::channel(State::Starting);
        Fill {
            uri: "http://origin.test/a.jar".to_owned(),
            file: Arc::new(file),
            state: rx,
            recent: Mutex::new(VecDeque::new()),
            restarts: AtomicU32::new(0),
            room: Mutex::new(Reservation::none()),
            handoff: Mutex::new(None),
            _held: None,
        }
    }

    #[test]
    fn recent_chunks_serve_what_they_hold_and_no_more() {
        let fill = fill();
        let body: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8).collect();
        for (i, chunk) in body.chunks(100).enumerate() {
            fill.remember(i as u64 * 100, Bytes::copy_from_slice(chunk));
        }
        // The last RECENT_CHUNKS chunks are kept: 200..1000.
        assert_eq!(fill.recent(199, 1000), None);
        assert_eq!(fill.recent(0, 1000), None);
        let got = |at, end| fill.recent(at, end).map(|(b, cut)| (b.to_vec(), cut));
        assert_eq!(got(250, 1000), Some((body[250..300].to_vec(), false)));
        assert_eq!(got(250, 260), Some((body[250..260].to_vec(), true)));
        assert_eq!(got(250, 300), Some((body[250..300].to_vec(), false)));
        assert_eq!(got(999, 1000), Some((body[999..1000].to_vec(), false)));
        assert_eq!(got(900, 999), Some((body[900..999].to_vec(), true)));
        assert_eq!(got(250, 250), None);
        assert_eq!(got(1000, 2000), None);
        fill.forget();
        assert_eq!(fill.recent(250, 1000), None);
    }

    #[test]
    fn a_spool_writes_whole_chunks_and_starting_over_forgets_them() {
        let fill = fill();
        let file = fill.file.try_clone().unwrap();
        let mut spool = Spool::new(&fill, file);
        spool.push(b"hello ").unwrap();
        spool.push(b"world").unwrap();
        assert_eq!(fill.recent(0, 100), None, "nothing is kept before a flush");
        spool.flush().unwrap();
        assert_eq!(fill.recent(0, 100).unwrap().0, &b"hello world"[..]);
        spool.push(b"!").unwrap();
        spool.flush().unwrap();
        assert_eq!(fill.recent(11, 100).unwrap().0, &b"!"[..]);
        // A push that would overflow the pending chunk writes it first.
        let big = vec![7u8; Spool::CAPACITY - 10];
        spool.push(&big).unwrap();
        spool.push(&[8u8; 20]).unwrap();
        assert_eq!(fill.recent(12, u64::MAX).unwrap().0.len(), big.len());
        spool.flush().unwrap();
        assert_eq!(
            fill.recent(12 + big.len() as u64, u64::MAX).unwrap().0,
            &[8u8; 20][..]
        );
        let mut on_disk = Vec::new();
        use std::io::{Read, Seek};
        let mut reader = fill.file.try_clone().unwrap();
        reader.rewind().unwrap();
        reader.read_to_end(&mut on_disk).unwrap();
        assert!(on_disk.starts_with(b"hello world!"));
        assert_eq!(on_disk.len(), 12 + big.len() + 20);
        assert!(on_disk[12..12 + big.len()] == big[..] && on_disk.ends_with(&[8u8; 20]));
        spool.truncate().unwrap();
        assert_eq!(fill.restarts(), 1);
        assert_eq!(fill.recent(0, 100), None);
        assert_eq!(fill.file.metadata().unwrap().len(), 0);
    }
}
