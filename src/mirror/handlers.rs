//! The mirror's requests: `GET`/`HEAD /v1/fetch` (a held blob, a revalidated
//! one, or a transfer joined as it fills) and `POST /v1/verify` (a client found
//! a blob damaged: hash it again, drop it if so).

use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use tracing::{debug, warn};
use url::Url;

use super::fill::{Fill, State as FillState};
use super::store::Reading;
use super::Mirror;
use crate::net::ranges::{if_range_matches, parse_range, Span};
use crate::source::mirror::{CACHE_HEADER, SHA256_HEADER};
use crate::util::redact::redact_url;

/// Bytes read from disk per chunk sent.
const CHUNK: u64 = 256 << 10;
/// An answer's headers go out within this long, decided or not.
const HEADERS_WITHIN: std::time::Duration = std::time::Duration::from_secs(1);

/// A plain-text answer (refusals, failures).
fn said(status: StatusCode, message: String) -> Response {
    (status, format!("{message}\n")).into_response()
}

/// The query of a request: the URI and the sha256 asked for.
fn query(uri: &Uri) -> Result<(Url, Option<String>), String> {
    let mut source = None;
    let mut sha256 = None;
    for (key, value) in url::form_urlencoded::parse(uri.query().unwrap_or("").as_bytes()) {
        match &*key {
            "uri" => source = Some(value.into_owned()),
            "sha256" => sha256 = Some(value.into_owned()),
            _ => {}
        }
    }
    let source = source.ok_or("no uri= in the query")?;
    let mut url = Url::parse(&source).map_err(|e| format!("uri= is not a URI: {e}"))?;
    // A fragment never reaches an origin: not part of what is cached.
    url.set_fragment(None);
    if !url.username().is_empty() || url.password().is_some() {
        return Err(
            "uri= carries credentials; the mirror never uses a client's credentials".to_owned(),
        );
    }
    if url.query().is_some() {
        return Err(
            "uri= has a query string, where tokens and signatures live; the mirror does not take them"
                .to_owned(),
        );
    }
    let sha256 = match sha256 {
        None => None,
        Some(s) if s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()) => {
            Some(s.to_ascii_lowercase())
        }
        Some(_) => return Err("sha256= is not 64 hex digits".to_owned()),
    };
    Ok((url, sha256))
}

/// `GET /v1/fetch?uri=…[&sha256=…]` (and `HEAD`).
pub(super) async fn fetch(
    State(mirror): State<Arc<Mirror>>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let (source, expected) = match query(&uri) {
        Ok(parsed) => parsed,
        Err(reason) => {
            mirror.metrics.refused.inc();
            return said(StatusCode::BAD_REQUEST, reason);
        }
    };
    let shown = redact_url(source.as_str());
    if !mirror.allow.permits(&source) {
        mirror.metrics.refused.inc();
        debug!(uri = %shown, "mirror: refused, not under an allowed origin");
        return said(
            StatusCode::FORBIDDEN,
            format!("{shown}: not under any --allow-origin of this mirror"),
        );
    }
    if let Some(sha256) = &expected {
        if let Some(reading) = mirror.store.read(sha256) {
            mirror.metrics.hits.inc();
            return serve_blob(&mirror, reading, &headers, "hit");
        }
    }
    let (fill, joined) = match mirror.join_or_start(&source) {
        Ok(started) => started,
        Err(e) => {
            return said(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("the mirror cannot start a transfer: {e}"),
            )
        }
    };
    if joined {
        mirror.metrics.coalesced.inc();
    }
    let mut state = fill.state.clone();
    let ranged = headers.contains_key(header::RANGE);
    let cache = if joined { "coalesced" } else { "miss" };
    // Wait until there is something to serve (a range only from a whole blob),
    // but answer within HEADERS_WITHIN all the same: a transfer waiting for an
    // origin slot or a slow revalidation must not look like a mirror that hangs.
    let waited = tokio::time::timeout(
        HEADERS_WITHIN,
        state.wait_for(|s| match s {
            FillState::Starting => false,
            FillState::Streaming { .. } => !ranged,
            _ => true,
        }),
    )
    .await;
    let current = match waited {
        Ok(decided) => decided
            .map(|s| s.clone())
            .unwrap_or_else(|_| FillState::Failed("the transfer stopped".to_owned())),
        Err(_) => {
            // Not decided yet: whether it will be a miss or a revalidated blob.
            let cache = if joined { "coalesced" } else { "pending" };
            let builder = known_digest(Response::builder(), expected.as_deref(), cache);
            return builder
                .status(StatusCode::OK)
                .body(Body::from_stream(decided_body(
                    mirror.clone(),
                    fill,
                    expected,
                    joined,
                    shown,
                )))
                .unwrap_or_else(|e| said(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()));
        }
    };
    match decide(&mirror, current, expected, joined, &shown) {
        Decision::Refused(status, message) => said(status, message),
        Decision::Blob(reading, cache) => serve_blob(&mirror, reading, &headers, cache),
        Decision::Fill { digest, size } => serve_fill(&mirror, fill, digest, size, cache),
    }
}

/// What a decided transfer gives one request.
enum Decision {
    /// No bytes for it: why, and the status a whole answer would carry.
    Refused(StatusCode, String),
    /// The held blob (unchanged, or just published), and what the mirror did.
    Blob(Reading, &'static str),
    /// The transfer's own file, as it fills: the digest the answer must have (the
    /// one asked for, else the transfer's when known) and the size, if announced.
    Fill {
        digest: Option<String>,
        size: Option<u64>,
    },
}

/// The one decision of what a request gets from its transfer's `state`: the same
/// for an answer sent once decided and for one sent early (whose body waits).
fn decide(
    mirror: &Mirror,
    state: FillState,
    expected: Option<String>,
    joined: bool,
    shown: &str,
) -> Decision {
    match state {
        FillState::Failed(message) => {
            Decision::Refused(StatusCode::BAD_GATEWAY, format!("{shown}: {message}"))
        }
        FillState::Starting => Decision::Refused(
            StatusCode::BAD_GATEWAY,
            format!("{shown}: the transfer never started"),
        ),
        FillState::Done { sha256, .. } if expected.as_ref().is_some_and(|e| *e != sha256) => {
            Decision::Refused(
                StatusCode::BAD_GATEWAY,
                format!(
                    "{shown}: the origin has sha256 {sha256}, not the {} asked for",
                    expected.unwrap_or_default()
                ),
            )
        }
        FillState::Done {
            sha256,
            size,
            revalidated,
        } => match mirror.store.read(&sha256) {
            Some(reading) if revalidated => Decision::Blob(reading, "revalidated"),
            Some(reading) => Decision::Blob(reading, if joined { "coalesced" } else { "miss" }),
            // Unchanged at the origin, but dropped since (found damaged): nothing
            // holds it now. (409: a client fetches this artifact at its origin,
            // and keeps asking the mirror for the others.)
            None if revalidated => Decision::Refused(
                StatusCode::CONFLICT,
                format!("{shown}: dropped while it was revalidated; ask again"),
            ),
            // Not kept (larger than the store, or evicted already): the
            // transfer's own file still holds it.
            None => Decision::Fill {
                digest: Some(sha256),
                size: Some(size),
            },
        },
        FillState::Streaming { size, .. } | FillState::PassThrough { size, .. } => Decision::Fill {
            digest: expected,
            size,
        },
    }
}

/// Common headers: the digest when known (also the strong ETag ranges need).
fn known_digest(
    builder: axum::http::response::Builder,
    sha256: Option<&str>,
    cache: &str,
) -> axum::http::response::Builder {
    let builder = builder.header(CACHE_HEADER, cache);
    match sha256 {
        Some(sha) => builder
            .header(SHA256_HEADER, sha)
            .header(header::ETAG, format!("\"{sha}\""))
            .header(header::ACCEPT_RANGES, "bytes"),
        None => builder,
    }
}

/// A held blob, whole or one range of it.
fn serve_blob(
    mirror: &Arc<Mirror>,
    reading: Reading,
    headers: &HeaderMap,
    cache: &str,
) -> Response {
    let size = reading.size;
    let etag = format!("\"{}\"", reading.sha256);
    let span = match headers.get(header::RANGE).and_then(|v| v.to_str().ok()) {
        Some(range) if if_range_matches(headers, &etag) => parse_range(range, size),
        _ => Span::Full,
    };
    let builder = known_digest(Response::builder(), Some(&reading.sha256), cache);
    let (status, start, end, builder) = match span {
        Span::Full => (StatusCode::OK, 0, size, builder),
        Span::Part(first, last) => (
            StatusCode::PARTIAL_CONTENT,
            first,
            last + 1,
            builder.header(
                header::CONTENT_RANGE,
                format!("bytes {first}-{last}/{size}"),
            ),
        ),
        Span::Unsatisfiable => {
            return (
                StatusCode::RANGE_NOT_SATISFIABLE,
                [(header::CONTENT_RANGE, format!("bytes */{size}"))],
            )
                .into_response()
        }
    };
    let body = match blob_stream(mirror.clone(), reading, start, end) {
        Ok(body) => body,
        Err(e) => {
            return said(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("cannot read the blob: {e}"),
            )
        }
    };
    builder
        .status(status)
        .header(header::CONTENT_LENGTH, end - start)
        .body(Body::from_stream(body))
        .unwrap_or_else(|e| said(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
}

/// The body of a held blob's bytes `start..end`; the reading guard lives as long
/// as the body, so the blob is not evicted meanwhile.
fn blob_stream(
    mirror: Arc<Mirror>,
    reading: Reading,
    start: u64,
    end: u64,
) -> io::Result<impl Stream<Item = io::Result<Bytes>> + Send> {
    let chunks = blob_bytes(&reading, start, end)?;
    Ok(futures_util::stream::iter(chunks).map(move |chunk| {
        let _held = &reading;
        mirror.metrics.served_bytes.add(chunk.len() as u64);
        Ok::<_, io::Error>(chunk)
    }))
}

/// The body of an answer sent before its transfer was decided: it waits for the
/// decision, then streams the blob (unchanged or published), the transfer as it
/// fills, or ends short on failure or on a digest that is not the one asked for.
fn decided_body(
    mirror: Arc<Mirror>,
    fill: Arc<Fill>,
    expected: Option<String>,
    joined: bool,
    shown: String,
) -> impl Stream<Item = io::Result<Bytes>> + Send {
    use futures_util::stream::BoxStream;
    futures_util::stream::once(async move {
        let mut state = fill.state.clone();
        let decided = state
            .wait_for(|s| !matches!(s, FillState::Starting))
            .await
            .map(|s| s.clone())
            .unwrap_or_else(|_| FillState::Failed("the transfer stopped".to_owned()));
        let body: BoxStream<'static, io::Result<Bytes>> =
            match decide(&mirror, decided, expected, joined, &shown) {
                Decision::Refused(_, why) => {
                    futures_util::stream::once(async move { Err(io::Error::other(why)) }).boxed()
                }
                Decision::Blob(reading, _) => {
                    let size = reading.size;
                    match blob_stream(mirror, reading, 0, size) {
                        Ok(body) => body.boxed(),
                        Err(e) => futures_util::stream::once(async move { Err(e) }).boxed(),
                    }
                }
                Decision::Fill { digest, .. } => fill_stream(mirror, fill, digest).boxed(),
            };
        body
    })
    .flatten()
}

/// Bytes `start..end` of a held blob, in chunks of the mapped file: the socket
/// writes copy them straight from the page cache (no read into a buffer, no
/// blocking-pool hop per chunk).
fn blob_bytes(reading: &Reading, start: u64, end: u64) -> io::Result<Vec<Bytes>> {
    if start >= end {
        return Ok(Vec::new());
    }
    // SAFETY: blobs are read-only files (0444) the mirror published by rename and
    // never writes, truncates or reuses; a damaged one is unlinked, which leaves the
    // mapping valid. Only another process with write access (the operator) could
    // shrink one under the map.
    let map = unsafe { memmap2::Mmap::map(&reading.file)? };
    if (map.len() as u64) < end {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the blob is shorter than recorded",
        ));
    }
    let _ = map.advise(memmap2::Advice::Sequential);
    let all = Bytes::from_owner(map).slice(start as usize..end as usize);
    Ok((0..all.len())
        .step_by(CHUNK as usize)
        .map(|at| all.slice(at..(at + CHUNK as usize).min(all.len())))
        .collect())
}

async fn read_at(file: Arc<std::fs::File>, at: u64, n: u64) -> io::Result<Bytes> {
    tokio::task::spawn_blocking(move || {
        let mut buf = vec![0u8; n as usize];
        let mut filled = 0;
        while filled < buf.len() {
            let read = file.read_at(&mut buf[filled..], at + filled as u64)?;
            if read == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the blob is shorter than recorded",
                ));
            }
            filled += read;
        }
        Ok(Bytes::from(buf))
    })
    .await
    .unwrap_or_else(|e| Err(io::Error::other(e)))
}

/// A transfer in progress, served as it fills. The last byte is held back until
/// the digest is known: a body whose digest is not the one asked for (or whose
/// transfer fails) ends short, so no client ever receives it whole.
fn serve_fill(
    mirror: &Arc<Mirror>,
    fill: Arc<Fill>,
    expected: Option<String>,
    size: Option<u64>,
    cache: &str,
) -> Response {
    let mut builder =
        known_digest(Response::builder(), expected.as_deref(), cache).status(StatusCode::OK);
    if let Some(size) = size {
        builder = builder.header(header::CONTENT_LENGTH, size);
    }
    let body = fill_stream(mirror.clone(), fill, expected);
    builder
        .body(Body::from_stream(body))
        .unwrap_or_else(|e| said(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
}

fn fill_stream(
    mirror: Arc<Mirror>,
    fill: Arc<Fill>,
    expected: Option<String>,
) -> impl Stream<Item = io::Result<Bytes>> + Send {
    // Two chunks in flight: the pump waits for a slow client (and stops when
    // it goes away).
    let (tx, rx) = tokio::sync::mpsc::channel(2);
    tokio::spawn(pump(mirror, fill, expected, tx));
    futures_util::stream::unfold(rx, |mut rx| async move {
        let chunk = rx.recv().await?;
        Some((chunk, rx))
    })
}

/// Sends the transfer's bytes to one answer as they arrive (the last one held
/// back until the digest is known), and, when the transfer is passed through,
/// the rest straight from the origin.
async fn pump(
    mirror: Arc<Mirror>,
    fill: Arc<Fill>,
    expected: Option<String>,
    tx: tokio::sync::mpsc::Sender<io::Result<Bytes>>,
) {
    let mut state = fill.state.clone();
    let mut at = 0u64;
    // The whole file, mapped once the transfer is done (it is final then).
    let mut mapped: Option<Bytes> = None;
    let attempt = fill.restarts();
    // Started over since this answer began: whatever the state says now is
    // another attempt's (a pass-through would resume it from our offset).
    let started_over = || fill.restarts() != attempt;
    loop {
        let current = state.borrow_and_update().clone();
        if started_over() {
            return cut(&tx, "the transfer started over").await;
        }
        let available = match &current {
            FillState::Starting => 0,
            FillState::Streaming { written, .. } if *written < at => {
                return cut(&tx, "the transfer started over").await;
            }
            // The last byte waits for the digest; before it, what is written.
            FillState::Streaming { written, size } if size.is_some_and(|s| *written < s) => {
                *written
            }
            FillState::Streaming { written, .. } => written.saturating_sub(1),
            FillState::Done { sha256, .. } if expected.as_ref().is_some_and(|e| e != sha256) => {
                warn!(uri = %redact_url(&fill.uri), "mirror: the origin's bytes are not the sha256 asked for; the answer is cut short");
                return cut(&tx, "digest mismatch").await;
            }
            FillState::Done { size, .. } => *size,
            FillState::PassThrough { written, .. } if at < *written => *written,
            FillState::PassThrough { validator, .. } => {
                let passed = PassThrough {
                    at,
                    validator: validator.clone(),
                    expected: expected.clone(),
                };
                passed.run(&mirror, &fill, &tx).await;
                return;
            }
            FillState::Failed(message) => return cut(&tx, message).await,
        };
        // The transfer announces whole chunks (a wake-up per network chunk
        // would cost more than the bytes): what it announced goes out at once.
        let read = if at >= available {
            None
        } else {
            match &current {
                FillState::Done { .. } => Some(done_bytes(&fill, &mut mapped, at, available)),
                _ => match fill.recent(at, available) {
                    // The chunk whose last byte waits for the digest goes whole,
                    // once the digest is known (not a chunk and then one byte).
                    Some((_, true)) if !matches!(current, FillState::PassThrough { .. }) => None,
                    Some((chunk, _)) => Some(Ok(chunk)),
                    None => Some(read_at(fill.file.clone(), at, (available - at).min(CHUNK)).await),
                },
            }
        };
        if let Some(read) = read {
            // Bytes of another attempt must not follow ours (the state may
            // not show the start-over when the new attempt overtook it).
            if started_over() {
                return cut(&tx, "the transfer started over").await;
            }
            if let Ok(bytes) = &read {
                mirror.metrics.served_bytes.add(bytes.len() as u64);
                at += bytes.len() as u64;
            }
            let stop = read.is_err();
            if tx.send(read).await.is_err() || stop {
                return;
            }
            continue;
        }
        if matches!(current, FillState::Done { .. }) {
            return;
        }
        if state.changed().await.is_err() && !settled_state(&state.borrow()) {
            return cut(&tx, "the transfer stopped").await;
        }
    }
}

/// Ends an answer's body with an error (the client sees a cut transfer).
async fn cut(tx: &tokio::sync::mpsc::Sender<io::Result<Bytes>>, why: &str) {
    let _ = tx.send(Err(io::Error::other(why.to_owned()))).await;
}

/// Up to a chunk of a finished transfer's file from `at`, from a mapping of the
/// whole file (made on the first call).
fn done_bytes(fill: &Fill, mapped: &mut Option<Bytes>, at: u64, end: u64) -> io::Result<Bytes> {
    let all = match mapped {
        Some(all) => all,
        None => {
            // SAFETY: a transfer that is done never writes to or truncates its
            // file again; it is published by rename (or unlinked), which leaves
            // the mapping valid.
            let map = unsafe { memmap2::Mmap::map(&*fill.file)? };
            if (map.len() as u64) < end {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the transfer's file is shorter than written",
                ));
            }
            let _ = map.advise(memmap2::Advice::Sequential);
            mapped.insert(Bytes::from_owner(map))
        }
    };
    let to = end.min(at + CHUNK).min(all.len() as u64);
    Ok(all.slice(at as usize..to as usize))
}

fn settled_state(state: &FillState) -> bool {
    matches!(
        state,
        FillState::Done { .. } | FillState::PassThrough { .. }
    )
}

/// The rest of one answer from the origin, for a transfer the store had no
/// room for: from offset `at` (a range of the same version), without writing.
struct PassThrough {
    at: u64,
    validator: Option<String>,
    expected: Option<String>,
}

impl PassThrough {
    async fn run(
        self,
        mirror: &Arc<Mirror>,
        fill: &Arc<Fill>,
        tx: &tokio::sync::mpsc::Sender<io::Result<Bytes>>,
    ) {
        if let Err(why) = self.stream(mirror, fill, tx).await {
            let shown = redact_url(&fill.uri);
            warn!(uri = %shown, "mirror: passing through from the origin: {why}");
            let _ = tx.send(Err(io::Error::other(why))).await;
        }
    }

    async fn stream(
        &self,
        mirror: &Arc<Mirror>,
        fill: &Arc<Fill>,
        tx: &tokio::sync::mpsc::Sender<io::Result<Bytes>>,
    ) -> Result<(), String> {
        use sha2::Digest;
        let at = self.at;
        if at > 0 && self.validator.is_none() {
            return Err("the origin names no version to resume from".to_owned());
        }
        // The bytes already sent count toward the digest asked for.
        let mut hasher = match &self.expected {
            Some(_) => Some(
                hash_prefix(fill.file.clone(), at)
                    .await
                    .map_err(|e| e.to_string())?,
            ),
            None => None,
        };
        let _slot = mirror
            .slots
            .acquire()
            .await
            .map_err(|_| "the mirror is stopping".to_owned())?;
        mirror.metrics.passed_through.inc();
        let stall = mirror.stall_timeout;
        let stalled = || {
            format!(
                "no data from the origin for {} (--stall-timeout)",
                crate::util::duration::format_duration(stall)
            )
        };
        let handed = match at {
            0 => fill.handoff.lock().expect("lock").take(),
            _ => None,
        };
        let mut stream = match handed {
            Some(stream) => stream,
            None => {
                let uri = Url::parse(&fill.uri).map_err(|e| e.to_string())?;
                let source = mirror.source(&uri)?;
                let request = crate::source::OpenRequest {
                    offset: at,
                    end: None,
                    validator: if at > 0 { self.validator.clone() } else { None },
                };
                let opened = tokio::time::timeout(stall, source.open(&uri, &request))
                    .await
                    .map_err(|_| stalled())?
                    .map_err(|e| e.describe())?;
                if opened.offset != at || (at > 0 && opened.meta.validator != self.validator) {
                    return Err("the origin changed during the transfer".to_owned());
                }
                opened.stream
            }
        };
        // One chunk held back until the digest is known.
        let mut held: Option<Bytes> = None;
        loop {
            let next = tokio::time::timeout(stall, stream.next())
                .await
                .map_err(|_| stalled())?;
            let Some(chunk) = next else { break };
            let chunk = chunk.map_err(|e| e.describe())?;
            mirror.metrics.origin_bytes.add(chunk.len() as u64);
            if let Some(h) = hasher.as_mut() {
                h.update(&chunk);
            }
            if let Some(previous) = held.replace(chunk) {
                mirror.metrics.served_bytes.add(previous.len() as u64);
                if tx.send(Ok(previous)).await.is_err() {
                    return Ok(());
                }
            }
        }
        if let (Some(expected), Some(h)) = (&self.expected, hasher) {
            let got = hex::encode(h.finalize());
            if got != *expected {
                return Err(format!(
                    "the origin has sha256 {got}, not the {expected} asked for"
                ));
            }
        }
        if let Some(last) = held {
            mirror.metrics.served_bytes.add(last.len() as u64);
            let _ = tx.send(Ok(last)).await;
        }
        Ok(())
    }
}

/// The sha256 state of the first `n` bytes of `file`.
async fn hash_prefix(file: Arc<std::fs::File>, n: u64) -> io::Result<sha2::Sha256> {
    tokio::task::spawn_blocking(move || {
        use sha2::Digest;
        let mut hasher = sha2::Sha256::new();
        let mut buf = vec![0u8; CHUNK as usize];
        let mut at = 0u64;
        while at < n {
            let want = (n - at).min(CHUNK) as usize;
            let read = file.read_at(&mut buf[..want], at)?;
            if read == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the transfer's file is shorter than written",
                ));
            }
            hasher.update(&buf[..read]);
            at += read as u64;
        }
        Ok(hasher)
    })
    .await
    .unwrap_or_else(|e| Err(io::Error::other(e)))
}

/// `POST /v1/verify?sha256=…`: a client found this blob damaged; hash it again
/// (one at a time) and drop it if it is.
pub(super) async fn verify(State(mirror): State<Arc<Mirror>>, uri: Uri) -> Response {
    let sha256 = url::form_urlencoded::parse(uri.query().unwrap_or("").as_bytes())
        .find(|(k, _)| k == "sha256")
        .map(|(_, v)| v.to_ascii_lowercase())
        .filter(|s| s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()));
    let Some(sha256) = sha256 else {
        return said(
            StatusCode::BAD_REQUEST,
            "sha256= is not 64 hex digits".to_owned(),
        );
    };
    let Ok(_one) = mirror.verifying.acquire().await else {
        return said(StatusCode::SERVICE_UNAVAILABLE, "stopping".to_owned());
    };
    let Some(reading) = mirror.store.read(&sha256) else {
        return said(StatusCode::NOT_FOUND, "no such blob".to_owned());
    };
    let file = reading.file.try_clone();
    let hashed = tokio::task::spawn_blocking(move || -> io::Result<String> {
        use sha2::Digest;
        let mut file = file?;
        let mut hasher = sha2::Sha256::new();
        io::copy(&mut file, &mut hasher)?;
        Ok(hex::encode(hasher.finalize()))
    })
    .await
    .unwrap_or_else(|e| Err(io::Error::other(e)));
    drop(reading);
    match hashed {
        Ok(got) if got == sha256 => said(StatusCode::OK, "intact".to_owned()),
        other => {
            let why = match other {
                Ok(got) => format!("its bytes hash to {got}"),
                Err(e) => format!("it cannot be read: {e}"),
            };
            warn!(sha256, "mirror: blob damaged on disk ({why}); dropped");
            mirror.metrics.corrupt.inc();
            mirror.store.drop_blob(&sha256);
            said(StatusCode::OK, "dropped".to_owned())
        }
    }
}
