//! The handlers of one bundle (`GET`, `HEAD`, `DELETE /api/v0/resources/{id}`) and
//! the error answer every handler gives.
//!
//! An unknown (or malformed, or expired) id is 404 whatever the secret; a known id
//! with a missing or wrong secret is 401, as in the original server. Ids carry 128
//! random bits, so telling the two apart does not help anyone guess one. Downloads
//! carry `ETag` (the quoted sha256), [`api::HEADER_SHA256`] and `Accept-Ranges`; one
//! `bytes=` range is served as 206 (honouring `If-Range`), a range past the end is
//! 416, several ranges get the whole bundle.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path as UrlPath, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures_util::StreamExt;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tracing::{error, info, warn};

use super::sweeper::expire;
use super::AppState;
use crate::net::ranges::{if_range_matches, parse_range, Span};
use crate::stage::api::{self, ErrorBody};
use crate::stage::store::BundleMeta;
use crate::util::time::now_ms;

/// An error answer: JSON `{"error": ...}`.
#[derive(Debug)]
pub(super) struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    pub(super) fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
        }
    }

    pub(super) fn bad(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }

    pub(super) fn not_found() -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "no such resource")
    }

    pub(super) fn too_large(max: u64) -> ApiError {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the bundle is larger than the server's limit of {max} bytes (--max-upload-bytes)"
            ),
        )
    }

    /// A server-side failure: the detail goes to the log, not to the client.
    pub(super) fn internal(what: &str, e: impl std::fmt::Display) -> ApiError {
        error!("{what}: {e}");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("{what} (see the server log)"),
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (
            self.status,
            Json(ErrorBody {
                error: self.message,
            }),
        )
            .into_response();
        let headers = response.headers_mut();
        if self.status == StatusCode::UNAUTHORIZED {
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if self.status == StatusCode::PAYLOAD_TOO_LARGE {
            headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        response
    }
}

/// The bundle `id` if it exists and has not expired (404 otherwise).
async fn find(state: &AppState, id: &str) -> Result<BundleMeta, ApiError> {
    if !api::is_resource_id(id) {
        return Err(ApiError::not_found());
    }
    let meta = state
        .store
        .meta(id)
        .await
        .map_err(|e| ApiError::internal("cannot read the store", e))?
        .ok_or_else(ApiError::not_found)?;
    if let Some(why) = state.policy.expired(&meta, now_ms()) {
        expire(state, &meta, why).await;
        return Err(ApiError::not_found());
    }
    Ok(meta)
}

/// [`find`], then the secret: 401 when it is missing or wrong (compared as sha256
/// hashes, in constant time).
async fn authorize(
    state: &AppState,
    id: &str,
    headers: &HeaderMap,
) -> Result<BundleMeta, ApiError> {
    let meta = find(state, id).await?;
    let presented = api::presented_secret(headers);
    let refusal = if presented.is_empty() {
        Some("missing the resource secret (header Authorization)")
    } else {
        let hash = Sha256::digest(presented.as_bytes());
        let stored = hex::decode(&meta.secret_sha256).unwrap_or_default();
        let same = stored.len() == hash.len() && bool::from(hash.as_slice().ct_eq(&stored));
        (!same).then_some("wrong resource secret")
    };
    if let Some(why) = refusal {
        state.metrics.auth_failures.fetch_add(1, Ordering::Relaxed);
        return Err(ApiError::new(StatusCode::UNAUTHORIZED, why));
    }
    Ok(meta)
}

/// `GET` and `HEAD` of a bundle, with one `Range` honoured.
pub(super) async fn download(
    State(state): State<Arc<AppState>>,
    UrlPath(id): UrlPath<String>,
    method: Method,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let meta = authorize(&state, &id, &headers).await?;
    let etag = format!("\"{}\"", meta.sha256);
    let range = headers
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok())
        .filter(|_| if_range_matches(&headers, &etag))
        .map_or(Span::Full, |r| parse_range(r, meta.size));
    let (status, start, len) = match range {
        Span::Full => (StatusCode::OK, 0, meta.size),
        Span::Part(start, end) => (StatusCode::PARTIAL_CONTENT, start, end - start + 1),
        Span::Unsatisfiable => {
            let response = Response::builder()
                .status(StatusCode::RANGE_NOT_SATISFIABLE)
                .header(header::CONTENT_RANGE, format!("bytes */{}", meta.size))
                .body(Body::empty());
            return response.map_err(|e| ApiError::internal("cannot answer", e));
        }
    };
    let mut response = Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/octet-stream")
        .header(header::CONTENT_LENGTH, len)
        .header(header::ACCEPT_RANGES, "bytes")
        .header(header::ETAG, &etag)
        .header(api::HEADER_SHA256, &meta.sha256)
        .header(header::CACHE_CONTROL, "no-store");
    if status == StatusCode::PARTIAL_CONTENT {
        let range = format!("bytes {start}-{}/{}", start + len - 1, meta.size);
        response = response.header(header::CONTENT_RANGE, range);
    }
    let body = if method == Method::HEAD {
        Body::empty()
    } else {
        bundle_body(&state, &meta, start, len).await?
    };
    response
        .body(body)
        .map_err(|e| ApiError::internal("cannot answer", e))
}

/// Bytes read from the store per body chunk.
const DOWNLOAD_CHUNK: usize = 64 * 1024;

/// The bundle's bytes as a response body; counts the download and marks the
/// bundle used.
async fn bundle_body(
    state: &Arc<AppState>,
    meta: &BundleMeta,
    start: u64,
    len: u64,
) -> Result<Body, ApiError> {
    let reader = state
        .store
        .open(&meta.id, start, len)
        .await
        .map_err(|e| ApiError::internal("cannot read the bundle", e))?
        .ok_or_else(ApiError::not_found)?;
    state.metrics.downloads.fetch_add(1, Ordering::Relaxed);
    if meta.first_download_ms.is_none() {
        if let Err(e) = state.store.mark_downloaded(&meta.id, now_ms()).await {
            warn!("cannot record the first download of {}: {e}", meta.id);
        }
    }
    let counter = state.clone();
    // 64 KiB reads: far fewer trips to the blocking pool than the default 4 KiB,
    // and 200 downloads at once still hold only ~25 MiB of buffers.
    let stream =
        tokio_util::io::ReaderStream::with_capacity(reader, DOWNLOAD_CHUNK).inspect(move |chunk| {
            if let Ok(chunk) = chunk {
                let n = chunk.len() as u64;
                counter
                    .metrics
                    .download_bytes
                    .fetch_add(n, Ordering::Relaxed);
            }
        });
    Ok(Body::from_stream(stream))
}

/// `DELETE` of a bundle.
pub(super) async fn remove(
    State(state): State<Arc<AppState>>,
    UrlPath(id): UrlPath<String>,
    headers: HeaderMap,
) -> Result<StatusCode, ApiError> {
    let meta = authorize(&state, &id, &headers).await?;
    let _deleting = state.quotas.deleting();
    let deleted = state
        .store
        .delete(&id)
        .await
        .map_err(|e| ApiError::internal("cannot delete the bundle", e))?;
    if !deleted {
        return Err(ApiError::not_found());
    }
    state.quotas.release(&meta.owner.namespace, meta.size);
    info!("deleted bundle {id} on request");
    Ok(StatusCode::NO_CONTENT)
}
