//! `http://` and `https://` source on one shared reqwest client (rustls).
//!
//! Redirects are followed here, not by reqwest, so that credentials (URL
//! userinfo and `--http-header-file` headers) are only ever sent to the URI's
//! own origin, and so `check` can show where a URI really leads.

use std::collections::HashSet;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine as _;
use futures_util::StreamExt;
use reqwest::header::{self, HeaderMap, HeaderName, HeaderValue};
use reqwest::{Method, Response, StatusCode};
use url::Url;

use super::{Body, FaultKind, Meta, OpenRequest, Probe, Source, SourceError};
use crate::net::{has_tls_cause, HttpConfig, HttpSetupError};
use crate::util::redact::{redact_url, register_secret};

/// Redirects followed before giving up.
const MAX_REDIRECTS: usize = 10;

/// Fetches over HTTP(S) with connection reuse, HTTP/2 when offered (ALPN), proxies
/// from `HTTP_PROXY`/`HTTPS_PROXY`/`NO_PROXY`, and origin-scoped credentials.
pub(crate) struct HttpSource {
    client: reqwest::Client,
    headers: Arc<Vec<(HeaderName, HeaderValue)>>,
    /// Decides whether a redirect may be followed (the mirror's allow-list).
    redirects: Option<Arc<RedirectCheck>>,
}

/// Says why a redirect to a URL may not be followed.
pub(crate) type RedirectCheck = dyn Fn(&Url) -> Result<(), String> + Send + Sync;

impl HttpSource {
    pub(crate) fn new(config: &HttpConfig) -> Result<Self, HttpSetupError> {
        let client = crate::net::client(config)?;
        Ok(HttpSource {
            client,
            headers: Arc::new(config.headers.clone()),
            redirects: None,
        })
    }

    /// A source on `client` that follows only the redirects `check` allows.
    pub(crate) fn guarded(
        client: reqwest::Client,
        config: &HttpConfig,
        check: Arc<RedirectCheck>,
    ) -> Self {
        HttpSource {
            client,
            headers: Arc::new(config.headers.clone()),
            redirects: Some(check),
        }
    }

    /// The client, shared with the S3 source (same roots, proxies and pool).
    pub(crate) fn client(&self) -> &reqwest::Client {
        &self.client
    }

    /// The same client (pool, roots) sending `headers` instead of the configured
    /// ones, still only to each URI's own origin.
    pub(crate) fn with_headers(&self, headers: Vec<(HeaderName, HeaderValue)>) -> HttpSource {
        HttpSource {
            client: self.client.clone(),
            headers: Arc::new(headers),
            redirects: self.redirects.clone(),
        }
    }

    /// Sends `method` to `uri`, following redirects; credentials only to the first origin.
    async fn send(
        &self,
        method: Method,
        uri: &Url,
        extra: &HeaderMap,
    ) -> Result<(Response, Option<Url>), SourceError> {
        let (start, basic) = split_userinfo(uri);
        let origin = start.origin();
        let mut current = start.clone();
        let mut seen = HashSet::new();
        for _ in 0..=MAX_REDIRECTS {
            let mut request = self.client.request(method.clone(), current.clone());
            request = request.headers(extra.clone());
            if current.origin() == origin {
                // The URI's own userinfo beats a header-file Authorization.
                let headers = self
                    .headers
                    .iter()
                    .filter(|(name, _)| basic.is_none() || *name != header::AUTHORIZATION);
                for (name, value) in headers {
                    request = request.header(name, value);
                }
                if let Some(basic) = &basic {
                    request = request.header(header::AUTHORIZATION, basic.clone());
                }
            }
            let request = request.build().map_err(|e| transport_error(uri, e))?;
            let turn = crate::net::origins::turn(&current).await;
            let response = crate::net::trail::execute(&self.client, request)
                .await
                .map_err(|e| transport_error(uri, e))?;
            crate::net::origins::answered(&current, &response);
            drop(turn);
            // 304 answers a conditional request; it is not a redirect.
            if !response.status().is_redirection() || response.status() == StatusCode::NOT_MODIFIED
            {
                let moved = (current != start).then_some(current);
                return Ok((response, moved));
            }
            let Some(next) = response
                .headers()
                .get(header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .and_then(|l| current.join(l).ok())
            else {
                return Err(SourceError::new(
                    FaultKind::Refused,
                    format!(
                        "{} answered {} without a usable Location",
                        redact_url(uri.as_str()),
                        response.status()
                    ),
                ));
            };
            if !matches!(next.scheme(), "http" | "https") {
                return Err(SourceError::new(
                    FaultKind::Refused,
                    format!(
                        "{} redirects to {}, which is not http(s); refusing to follow",
                        redact_url(uri.as_str()),
                        redact_url(next.as_str())
                    ),
                ));
            }
            if let Some(Err(reason)) = self.redirects.as_ref().map(|check| check(&next)) {
                return Err(SourceError::new(
                    FaultKind::Refused,
                    format!(
                        "{} redirects to {}: refused, {reason}",
                        redact_url(uri.as_str()),
                        redact_url(next.as_str())
                    ),
                ));
            }
            tracing::debug!(
                "{} redirects ({}) to {}",
                redact_url(current.as_str()),
                response.status(),
                redact_url(next.as_str())
            );
            if !seen.insert(next.clone()) {
                return Err(SourceError::new(
                    FaultKind::Refused,
                    format!(
                        "{}: redirect loop at {}",
                        redact_url(uri.as_str()),
                        redact_url(next.as_str())
                    ),
                ));
            }
            current = next;
        }
        Err(SourceError::new(
            FaultKind::Refused,
            format!(
                "{}: more than {MAX_REDIRECTS} redirects (last: {})",
                redact_url(uri.as_str()),
                redact_url(current.as_str())
            ),
        ))
    }
}

#[async_trait]
impl Source for HttpSource {
    async fn open(&self, uri: &Url, req: &OpenRequest) -> Result<Body, SourceError> {
        let mut extra = HeaderMap::new();
        if let Some(range) = req.range_header() {
            extra.insert(header::RANGE, HeaderValue::from_str(&range).expect("ascii"));
            if let Some(v) = req
                .validator
                .as_deref()
                .and_then(|v| HeaderValue::from_str(v).ok())
            {
                extra.insert(header::IF_RANGE, v);
            }
        }
        let (mut response, _) = self.send(Method::GET, uri, &extra).await?;
        if response.status() == StatusCode::RANGE_NOT_SATISFIABLE && req.offset > 0 {
            // What we hold is not a prefix of what is there now: start over.
            (response, _) = self.send(Method::GET, uri, &HeaderMap::new()).await?;
        }
        let status = response.status();
        let mut meta = meta_of(&response);
        let offset = match status {
            StatusCode::OK => 0,
            StatusCode::PARTIAL_CONTENT => {
                let (start, total) = content_range(&response).ok_or_else(|| {
                    SourceError::new(
                        FaultKind::Refused,
                        format!(
                            "{} answered 206 without a valid Content-Range",
                            redact_url(uri.as_str())
                        ),
                    )
                })?;
                meta.size = total;
                meta.ranges = true;
                start
            }
            _ => return Err(status_error(uri, &response)),
        };
        let shown = redact_url(uri.as_str());
        let stream = response
            .bytes_stream()
            .map(move |chunk| chunk.map_err(|e| transport_error_shown(&shown, e)));
        Ok(Body {
            meta,
            offset,
            stream: stream.boxed(),
        })
    }

    fn parallel_ranges(&self) -> bool {
        true
    }

    /// A password or user in the URI, a query string (presigned URLs and tokens
    /// live there), or any header of --http-header-file.
    fn credentialed(&self, uri: &Url) -> bool {
        !uri.username().is_empty()
            || uri.password().is_some()
            || uri.query().is_some()
            || !self.headers.is_empty()
    }

    /// A conditional HEAD: 304 means unchanged (an ETag is asked with
    /// If-None-Match, a Last-Modified date with If-Modified-Since).
    async fn unchanged(&self, uri: &Url, validator: &str) -> Result<bool, SourceError> {
        let mut extra = HeaderMap::new();
        let name = if validator.starts_with('"') || validator.starts_with("W/") {
            header::IF_NONE_MATCH
        } else {
            header::IF_MODIFIED_SINCE
        };
        let value = HeaderValue::from_str(validator).map_err(|_| {
            SourceError::new(
                FaultKind::Refused,
                format!("{}: unusable validator", redact_url(uri.as_str())),
            )
        })?;
        extra.insert(name, value);
        let (response, _) = self.send(Method::HEAD, uri, &extra).await?;
        match response.status() {
            StatusCode::NOT_MODIFIED => Ok(true),
            status if status.is_success() => {
                Ok(meta_of(&response).validator.as_deref() == Some(validator))
            }
            _ => Err(status_error(uri, &response)),
        }
    }

    async fn probe(&self, uri: &Url) -> Result<Probe, SourceError> {
        let (mut response, mut moved) = self.send(Method::HEAD, uri, &HeaderMap::new()).await?;
        if matches!(
            response.status(),
            StatusCode::FORBIDDEN | StatusCode::METHOD_NOT_ALLOWED | StatusCode::NOT_IMPLEMENTED
        ) {
            // Some servers (and URLs signed for GET only) refuse HEAD: ask for one byte.
            let mut extra = HeaderMap::new();
            extra.insert(header::RANGE, HeaderValue::from_static("bytes=0-0"));
            (response, moved) = self.send(Method::GET, uri, &extra).await?;
        }
        let status = response.status();
        if !status.is_success() {
            return Err(status_error(uri, &response));
        }
        let mut meta = meta_of(&response);
        if status == StatusCode::PARTIAL_CONTENT {
            meta.size = content_range(&response).and_then(|(_, total)| total);
            meta.ranges = true;
        }
        Ok(Probe {
            meta,
            status: status.to_string(),
            redirected_to: moved.map(|u| redact_url(u.as_str())),
        })
    }
}

/// Splits `user:password@` off a URL into a Basic `Authorization` value.
fn split_userinfo(uri: &Url) -> (Url, Option<HeaderValue>) {
    if uri.username().is_empty() && uri.password().is_none() {
        return (uri.clone(), None);
    }
    let decode = |s: &str| {
        percent_encoding::percent_decode_str(s)
            .decode_utf8_lossy()
            .into_owned()
    };
    let user = decode(uri.username());
    let password = decode(uri.password().unwrap_or(""));
    let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    register_secret(&token);
    let mut value = HeaderValue::from_str(&format!("Basic {token}")).expect("base64 is ascii");
    value.set_sensitive(true);
    let mut bare = uri.clone();
    let _ = bare.set_username("");
    let _ = bare.set_password(None);
    (bare, Some(value))
}

fn meta_of(response: &Response) -> Meta {
    let headers = response.headers();
    let text = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    // Only a strong ETag may validate a range (RFC 9110 13.1.5); else Last-Modified.
    let validator = text(header::ETAG)
        .filter(|e| !e.starts_with("W/"))
        .or_else(|| text(header::LAST_MODIFIED))
        .map(str::to_owned);
    // Read the header itself: for a HEAD answer the body (and content_length()) is empty.
    let length = text(header::CONTENT_LENGTH).and_then(|v| v.trim().parse::<u64>().ok());
    Meta {
        size: length.filter(|_| response.status() == StatusCode::OK),
        validator,
        ranges: text(header::ACCEPT_RANGES).is_some_and(|v| v.eq_ignore_ascii_case("bytes")),
    }
}

/// Parses `Content-Range: bytes START-END/TOTAL` into (START, TOTAL): only a range
/// inside the object ([`crate::net::ranges::parse_content_range`]).
pub(super) fn content_range(response: &Response) -> Option<(u64, Option<u64>)> {
    let value = response
        .headers()
        .get(header::CONTENT_RANGE)?
        .to_str()
        .ok()?;
    crate::net::ranges::parse_content_range(value)
}

/// Maps a final HTTP status to a fault, with a hint the user can act on.
fn status_error(uri: &Url, response: &Response) -> SourceError {
    let status = response.status();
    let shown = redact_url(uri.as_str());
    let message = format!("{shown}: HTTP {status}");
    match status.as_u16() {
        404 | 410 => SourceError::new(FaultKind::NotFound, message)
            .with_hint("check the URI; the server has no such object"),
        401 | 403 => SourceError::new(FaultKind::Auth, message).with_hint(
            "the server refused the credentials: check user:password in the URI or the token in --http-header-file",
        ),
        // Timeouts, throttling and server errors may pass: retried.
        408 | 429 | 500..=599 => {
            let mut error = SourceError::new(FaultKind::Transient, message);
            error.retry_after = retry_after(response);
            error
        }
        _ => SourceError::new(FaultKind::Refused, message),
    }
}

fn retry_after(response: &Response) -> Option<Duration> {
    let value = response.headers().get(header::RETRY_AFTER)?.to_str().ok()?;
    crate::retry::parse_retry_after(value, std::time::SystemTime::now())
}

fn transport_error(uri: &Url, err: reqwest::Error) -> SourceError {
    transport_error_shown(&redact_url(uri.as_str()), err)
}

/// Classifies a transport failure by walking its cause chain: a TLS problem is
/// final (it surfaces inside connect errors, so it is checked first); connect
/// errors, timeouts, resets and truncated bodies are transient.
fn transport_error_shown(shown: &str, err: reqwest::Error) -> SourceError {
    let err = err.without_url();
    let kind = if has_tls_cause(&err) {
        FaultKind::Tls
    } else if err.is_builder() || err.is_redirect() {
        FaultKind::Refused
    } else {
        // is_connect, is_timeout, is_request (send failed), is_body (reset or
        // truncated body), is_decode: the network let us down; try again.
        FaultKind::Transient
    };
    let hint = crate::net::transport_hint(&err, err.is_connect());
    let error = SourceError::new(kind, shown.to_owned()).with_source(err);
    match hint {
        Some(hint) => error.with_hint(hint),
        None => error,
    }
}
