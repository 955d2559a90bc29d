//! One origin transfer per URI at a time, shared by every request that wants it.
//!
//! The first request for a URI starts a [`Fill`]: revalidate what the mirror
//! holds (a conditional request; unchanged → done at once), else stream the
//! origin's bytes into a temp file, hashing them, retrying and resuming as the
//! source allows. Every request for the URI meanwhile joins it and is served from
//! the temp file as it grows; the blob is published (and the index updated) only
//! once its digest is known and matches what was expected.

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use futures_util::StreamExt;
use sha2::{Digest, Sha256};
use tokio::sync::watch;
use tracing::{debug, warn};
use url::Url;

use super::store::{IndexEntry, Reading, Reservation};
use super::Mirror;
use crate::retry::RetryPolicy;
use crate::source::{OpenRequest, Source, SourceError};

/// Bytes received between two announcements of a fill's progress.
const ANNOUNCE_STEP: u64 = 256 << 10;

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
    /// The blob held for the URI, opened (and so kept from eviction) while it is
    /// revalidated and until every request of this fill has its answer.
    _held: Option<Reading>,
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
        _held: held,
    });
    let mirror = mirror.clone();
    tokio::spawn(async move {
        let key = uri.to_string();
        let end = run(&mirror, &uri, known, writer, temp.to_path_buf(), &tx).await;
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
    let (sha256, size, validator, room) = transfer(mirror, &source, uri, writer, tx).await?;
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
    let published = tokio::task::spawn_blocking(move || store.insert(&temp, &entry, room))
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r.map_err(|e| e.to_string()));
    if let Err(e) = published {
        // Served from the temp file all the same; only the cache missed out.
        warn!(uri = %uri, "mirror: cannot keep the blob: {e}");
    }
    Ok(done)
}

/// Streams the origin into `writer`, retrying transient failures (resuming when
/// the origin serves ranges of one version); returns the sha256, the size, the
/// origin's validator and the room reserved in the store for it.
async fn transfer(
    mirror: &Mirror,
    source: &Arc<dyn Source>,
    uri: &Url,
    writer: File,
    tx: &watch::Sender<State>,
) -> Result<(String, u64, Option<String>, Reservation), String> {
    let policy: RetryPolicy = mirror.retry;
    let mut out = std::io::BufWriter::with_capacity(256 << 10, writer);
    let mut hasher = Sha256::new();
    let mut written = 0u64;
    let mut validator: Option<String> = None;
    let mut size: Option<u64> = None;
    let mut attempt = 0u32;
    // What the joiners were told is readable.
    let mut announced = 0u64;
    let mut room = Reservation::none();
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
                if let Some(size) = size {
                    // Room on the volume before the first byte is written.
                    room = mirror.store.reserve(size);
                }
            }
            let mut stream = opened.stream;
            loop {
                let next = tokio::time::timeout(mirror.stall_timeout, stream.next())
                    .await
                    .map_err(|_| stalled(mirror))?;
                let Some(chunk) = next else { break };
                let chunk = chunk?;
                out.write_all(&chunk).map_err(local)?;
                hasher.update(&chunk);
                written += chunk.len() as u64;
                mirror.metrics.origin_bytes.add(chunk.len() as u64);
                if size.is_some_and(|s| written > s) {
                    return Err(SourceError::new(
                        crate::source::FaultKind::Integrity,
                        format!(
                            "the origin sent more than the announced {} bytes",
                            size.unwrap_or(0)
                        ),
                    ));
                }
                // Joiners may read what is flushed: announced in steps, so that
                // each wakes once per step, not once per network chunk.
                if written - announced >= ANNOUNCE_STEP || size == Some(written) {
                    out.flush().map_err(local)?;
                    announced = written;
                    tx.send_replace(State::Streaming { written, size });
                }
            }
            match size {
                Some(s) if written < s => Err(SourceError::new(
                    crate::source::FaultKind::Transient,
                    format!("the body ended after {written} of {s} bytes"),
                )),
                _ => Ok(()),
            }
        }
        .await;
        let error = match streamed {
            Ok(()) => break,
            Err(e) => e,
        };
        let can_resume = written > 0 && validator.is_some() && error.is_transient();
        if !can_resume && written > 0 {
            // Start over: truncate what we hold (joiners read only up to `written`,
            // which goes back to 0: they fail rather than splice two bodies).
            out.flush().map_err(|e| local(e).describe())?;
            out.get_mut().set_len(0).map_err(|e| local(e).describe())?;
            use std::io::Seek;
            out.get_mut().rewind().map_err(|e| local(e).describe())?;
            hasher = Sha256::new();
            written = 0;
            announced = 0;
            tx.send_replace(State::Failed(
                "the origin's body changed during the transfer".to_owned(),
            ));
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
    Ok((hex::encode(hasher.finalize()), written, validator, room))
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
