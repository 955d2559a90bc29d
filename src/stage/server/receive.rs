//! The upload handler (`POST /api/v0/resources`): the multipart body is streamed
//! to a spool file, the bundle part checked (gzip, the archive rules of
//! [`crate::archive`] with the `--archive-max-*` limits), given an id and a secret,
//! and committed to the store.
//!
//! Part content types are not checked (clients send the owner JSON as
//! `application/json` or `text/plain`); unknown parts are skipped. A refused upload
//! answers 400 for a malformed body, a part missing or repeated, data that is not
//! gzip, an archive the rules refuse, or a bundle `fetch` would refuse (anything
//! but regular files at its top level, names reserved for fetch's outputs); 413
//! past `--max-upload-bytes`; 408 when the body stalls for
//! `--upload-idle-timeout`. The rest of
//! a refused body is read and discarded for a few seconds, so a client still
//! sending reads the answer rather than a connection reset.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::Json;
use base64::Engine;
use futures_util::StreamExt;
use rustls::crypto::SecureRandom;
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;
use tracing::{info, warn};

use super::auth::{Caller, Refusal};
use super::handlers::ApiError;
use super::AppState;
use crate::archive;
use crate::stage::api::{self, ResourceOwner, SubmittedResource};
use crate::stage::store::{BundleMeta, META_VERSION};
use crate::util::time::now_ms;

/// Largest owner JSON part.
const OWNER_MAX_BYTES: usize = 64 * 1024;
/// Multipart framing and the owner part, on top of `--max-upload-bytes`.
const MULTIPART_SLACK: u64 = 1024 * 1024;
/// How long (and how much of) a refused request body is read and discarded.
const LINGER: Duration = Duration::from_secs(5);
const LINGER_BYTES: u64 = 256 * 1024 * 1024;
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Deletes the spooled upload unless it was committed (moved away).
struct Spool(PathBuf);

impl Drop for Spool {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// `POST /api/v0/resources`: stores a bundle and answers its id and secret (201).
pub(super) async fn upload(
    State(state): State<Arc<AppState>>,
    req: Request,
) -> Result<(StatusCode, Json<SubmittedResource>), ApiError> {
    // Who it is, before any of the body is read; and whether the store has room
    // for one more bundle of the announced size at all.
    let refused = |r: Refusal| {
        state.metrics.refused(r.reason);
        ApiError::new(r.status, r.message)
    };
    let declared_len = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    let empty = declared_len == Some(0)
        || (declared_len.is_none() && !req.headers().contains_key(header::TRANSFER_ENCODING));
    let caller = match state.auth.authenticate(req.headers()).await {
        Ok(caller) => caller,
        // `stage upload` asking whether a token is wanted: not a refusal.
        Err(r) if empty && r.reason == "no_token" => {
            return Err(ApiError::new(r.status, r.message))
        }
        Err(r) => {
            warn!("upload refused ({}): {}", r.reason, r.message);
            return Err(refuse_unread(req, refused(r)));
        }
    };
    let bundle_at_least = declared_len.map_or(0, |len| len.saturating_sub(MULTIPART_SLACK));
    if let Err(r) = state.quotas.check(None, bundle_at_least) {
        info!("upload refused by a quota: {}", r.message);
        return Err(refuse_unread(req, refused(r)));
    }
    let boundary = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|ct| multer::parse_boundary(ct).ok())
        .ok_or_else(|| {
            ApiError::bad(format!(
                "expected a multipart/form-data body with parts '{}' and '{}'",
                api::PART_RESOURCES,
                api::PART_OWNER
            ))
        })?;
    let body_limit = state.max_upload.saturating_add(MULTIPART_SLACK);
    if declared_len.is_some_and(|len| len > body_limit) {
        return Err(refuse_unread(req, ApiError::too_large(state.max_upload)));
    }
    let cut = Arc::new(OnceLock::new());
    let (tx, rx) = mpsc::channel(4);
    let reading = Reading {
        limit: body_limit,
        idle: state.upload_idle_timeout,
        cut: cut.clone(),
    };
    tokio::spawn(pump(req.into_body(), tx, reading));
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    let mut multipart = multer::Multipart::new(stream, boundary);
    let spool = Spool(state.store.spool_dir().join(format!(
        "upload-{}.part",
        hex::encode(random::<8>(state.rng)?)
    )));
    let received = receive(&state, &caller, &mut multipart, &spool.0).await;
    let received = received.map_err(|e| match cut.get() {
        Some(Cut::TooLarge) => ApiError::too_large(state.max_upload),
        Some(Cut::Idle) => ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "the upload sent nothing for {} (--upload-idle-timeout); send the body again",
                crate::util::duration::format_duration(state.upload_idle_timeout)
            ),
        ),
        None => e,
    })?;
    let submitted = commit(&state, &caller, &spool.0, received).await?;
    Ok((StatusCode::CREATED, Json(submitted)))
}

/// `refusal`, with the body read and discarded for a moment (unless the client
/// waits for "100 Continue"), so that a client still sending reads the answer
/// instead of a broken pipe.
fn refuse_unread(req: Request, refusal: ApiError) -> ApiError {
    if !req.headers().contains_key(header::EXPECT) {
        tokio::spawn(linger(req.into_body().into_data_stream()));
    }
    refusal
}

/// Why the server stopped reading a request body.
#[derive(Debug, Clone, Copy)]
enum Cut {
    /// Past the upload limit.
    TooLarge,
    /// Nothing came for the idle timeout.
    Idle,
}

/// How a request body is read.
struct Reading {
    /// The most bytes read.
    limit: u64,
    /// The longest wait for the next bytes.
    idle: Duration,
    /// Set when the body was cut off.
    cut: Arc<OnceLock<Cut>>,
}

/// Feeds the request body to the multipart parser, counting it against the
/// limit; then lingers on what the parser did not read.
async fn pump(body: Body, tx: mpsc::Sender<Result<Bytes, io::Error>>, reading: Reading) {
    let mut stream = body.into_data_stream();
    let mut total: u64 = 0;
    loop {
        let chunk = match tokio::time::timeout(reading.idle, stream.next()).await {
            Ok(Some(Ok(chunk))) => chunk,
            Ok(None) => break,
            Ok(Some(Err(e))) => {
                let _ = tx.send(Err(io::Error::other(e))).await;
                return;
            }
            Err(_) => {
                let _ = reading.cut.set(Cut::Idle);
                let stalled = format!("no data for {:?}", reading.idle);
                let _ = tx.send(Err(io::Error::other(stalled))).await;
                return;
            }
        };
        total = total.saturating_add(chunk.len() as u64);
        if total > reading.limit {
            let _ = reading.cut.set(Cut::TooLarge);
            let _ = tx
                .send(Err(io::Error::other("request body too large")))
                .await;
            break;
        }
        if tx.send(Ok(chunk)).await.is_err() {
            break; // the handler stopped reading: it has answered
        }
    }
    drop(tx);
    linger(stream).await;
}

/// Reads and discards the rest of a refused body for a moment, so that a client
/// still sending reads the answer instead of a connection reset.
async fn linger(mut stream: axum::body::BodyDataStream) {
    let drain = async {
        let mut drained: u64 = 0;
        while let Some(Ok(chunk)) = stream.next().await {
            drained += chunk.len() as u64;
            if drained > LINGER_BYTES {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(LINGER, drain).await;
}

/// An upload read to its end: the spooled bundle's size and sha256, and its owner.
struct Received {
    size: u64,
    sha256: String,
    owner: ResourceOwner,
}

async fn receive(
    state: &AppState,
    caller: &Caller,
    multipart: &mut multer::Multipart<'_>,
    spool: &Path,
) -> Result<Received, ApiError> {
    let mut bundle = None;
    let mut owner = None;
    while let Some(field) = multipart.next_field().await.map_err(multipart_error)? {
        match field.name() {
            Some(api::PART_RESOURCES) => {
                if bundle.is_some() {
                    return Err(repeated(api::PART_RESOURCES));
                }
                bundle = Some(spool_bundle(field, spool, state.max_upload).await?);
            }
            Some(api::PART_OWNER) => {
                if owner.is_some() {
                    return Err(repeated(api::PART_OWNER));
                }
                let read = read_owner(field).await?;
                // The namespace is known: allowed there? (Before the bundle is
                // spooled when the owner part comes first.)
                permit(state, caller, &read.namespace).await?;
                owner = Some(read);
            }
            _ => {} // skipped by the next next_field()
        }
    }
    let (size, sha256) = bundle.ok_or_else(|| {
        ApiError::bad(format!(
            "the body has no part '{}' (the tar.gz of the files)",
            api::PART_RESOURCES
        ))
    })?;
    let owner = owner.ok_or_else(|| {
        ApiError::bad(format!(
            "the body has no part '{}' (the owner JSON)",
            api::PART_OWNER
        ))
    })?;
    Ok(Received {
        size,
        sha256,
        owner,
    })
}

/// Whether `caller` may upload for `namespace`, and whether the namespace has
/// room for one more bundle; a refusal is counted and logged.
async fn permit(state: &AppState, caller: &Caller, namespace: &str) -> Result<(), ApiError> {
    let refused = |r: Refusal| {
        state.metrics.refused(r.reason);
        warn!("upload refused ({}): {}", r.reason, r.message);
        ApiError::new(r.status, r.message)
    };
    state
        .auth
        .authorize(caller, namespace)
        .await
        .map_err(refused)?;
    state.quotas.check(Some(namespace), 0).map_err(refused)
}

fn repeated(part: &str) -> ApiError {
    ApiError::bad(format!("part '{part}' appears more than once"))
}

fn multipart_error(e: multer::Error) -> ApiError {
    ApiError::bad(format!("malformed multipart body: {e}"))
}

fn not_gzip() -> ApiError {
    ApiError::bad(format!(
        "part '{}' is not gzip data (expected a tar.gz)",
        api::PART_RESOURCES
    ))
}

/// Streams the bundle part into `path` (fsynced); returns its size and sha256.
async fn spool_bundle(
    mut field: multer::Field<'_>,
    path: &Path,
    max: u64,
) -> Result<(u64, String), ApiError> {
    let storing = "cannot store the upload";
    let mut file = tokio::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .await
        .map_err(|e| ApiError::internal(storing, e))?;
    let mut hasher = Sha256::new();
    let mut size: u64 = 0;
    let mut head: Vec<u8> = Vec::with_capacity(2);
    while let Some(chunk) = field.chunk().await.map_err(multipart_error)? {
        size = size.saturating_add(chunk.len() as u64);
        if size > max {
            return Err(ApiError::too_large(max));
        }
        if head.len() < 2 {
            head.extend(chunk.iter().take(2 - head.len()));
            if head.len() == 2 && head != GZIP_MAGIC {
                return Err(not_gzip());
            }
        }
        hasher.update(&chunk);
        file.write_all(&chunk)
            .await
            .map_err(|e| ApiError::internal(storing, e))?;
    }
    if head != GZIP_MAGIC {
        return Err(not_gzip());
    }
    file.flush()
        .await
        .and(file.sync_all().await)
        .map_err(|e| ApiError::internal(storing, e))?;
    Ok((size, hex::encode(hasher.finalize())))
}

async fn read_owner(mut field: multer::Field<'_>) -> Result<ResourceOwner, ApiError> {
    let mut json = Vec::new();
    while let Some(chunk) = field.chunk().await.map_err(multipart_error)? {
        json.extend_from_slice(&chunk);
        if json.len() > OWNER_MAX_BYTES {
            return Err(ApiError::bad(format!(
                "part '{}' is larger than {OWNER_MAX_BYTES} bytes",
                api::PART_OWNER
            )));
        }
    }
    ResourceOwner::parse(&json).map_err(|e| ApiError::bad(e.to_string()))
}

/// Validates the spooled bundle, gives it an id and a secret, and commits it.
async fn commit(
    state: &AppState,
    caller: &Caller,
    spooled: &Path,
    received: Received,
) -> Result<SubmittedResource, ApiError> {
    let (path, limits) = (spooled.to_path_buf(), state.limits);
    let checked = tokio::task::spawn_blocking(move || archive::list_tar_gz(&path, &limits))
        .await
        .map_err(|e| ApiError::internal("cannot check the upload", e))?;
    let listing = match checked {
        Ok(listing) => listing,
        Err(e) if e.is_refusal() => {
            return Err(ApiError::bad(format!(
                "part '{}' is refused: {e}",
                api::PART_RESOURCES
            )));
        }
        Err(e) => return Err(ApiError::internal("cannot check the upload", e)),
    };
    api::check_bundle(&listing.entries).map_err(|why| {
        ApiError::bad(format!("part '{}' is refused: {why}", api::PART_RESOURCES))
    })?;
    let unpacked = listing.unpacked;
    let id = hex::encode(random::<{ api::RESOURCE_ID_BYTES }>(state.rng)?);
    let secret = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(random::<{ api::RESOURCE_SECRET_BYTES }>(state.rng)?);
    let meta = BundleMeta {
        version: META_VERSION,
        id: id.clone(),
        secret_sha256: hex::encode(Sha256::digest(secret.as_bytes())),
        size: received.size,
        sha256: received.sha256,
        owner: received.owner,
        created_ms: now_ms(),
        first_download_ms: None,
    };
    // Room for it, reserved under one lock: concurrent uploads never pass a quota.
    let reservation = state
        .quotas
        .reserve(&meta.owner.namespace, meta.size)
        .map_err(|r| {
            state.metrics.refused(r.reason);
            info!("upload refused by a quota: {}", r.message);
            ApiError::new(r.status, r.message)
        })?;
    state
        .store
        .commit(spooled, &meta)
        .await
        .map_err(|e| ApiError::internal("cannot store the upload", e))?;
    reservation.keep();
    state.metrics.uploads.fetch_add(1, Ordering::Relaxed);
    state
        .metrics
        .upload_bytes
        .fetch_add(meta.size, Ordering::Relaxed);
    info!(
        "stored bundle {id}: {} bytes, {} entries, sha256 {}, owner namespace \"{}\", from {}",
        meta.size,
        unpacked.entries,
        meta.sha256,
        meta.owner.namespace.escape_debug(),
        caller.name.escape_debug()
    );
    Ok(SubmittedResource {
        resource_id: id,
        resource_secret: secret,
    })
}

fn random<const N: usize>(rng: &dyn SecureRandom) -> Result<[u8; N], ApiError> {
    let mut buf = [0u8; N];
    rng.fill(&mut buf)
        .map_err(|e| ApiError::internal("no secure random numbers", format!("{e:?}")))?;
    Ok(buf)
}
