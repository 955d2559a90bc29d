//! The node-local mirror (`mirror serve`) as `fetch --mirror` sees it, and the
//! wire contract both sides share.
//!
//! A request names the artifact's own URI and, when the client knows it (a pin),
//! its sha256: `GET /v1/fetch?uri=<URI>&sha256=<HEX>`. The mirror answers with the
//! bytes (`Range` honoured on what it holds), the blob's sha256 in
//! [`SHA256_HEADER`] and as a strong ETag when it knows it, and what it did in
//! [`CACHE_HEADER`]. The client verifies every byte itself, so a mirror that lies
//! costs time, never correctness; any failure of the mirror sends the artifact to
//! its origin (the engine decides, [`MirrorSource::route`] says whether to ask).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures_util::StreamExt;
use reqwest::header::{self, HeaderValue};
use reqwest::StatusCode;
use url::Url;

use super::{Body, FaultKind, Meta, OpenRequest, Probe, Source, SourceError};
use crate::net::{HttpConfig, HttpSetupError};
use crate::util::redact::redact_url;

/// The one endpoint: fetch an artifact by its URI (and sha256).
pub(crate) const FETCH_PATH: &str = "/v1/fetch";
/// Asks the mirror to check a blob a client found damaged:
/// `POST /v1/verify?sha256=<HEX>` (the mirror hashes it again itself).
pub(crate) const VERIFY_PATH: &str = "/v1/verify";
/// The blob's sha256 (hex), when the mirror knows it before sending.
pub(crate) const SHA256_HEADER: &str = "x-spark-localizer-sha256";
/// What the mirror did: `hit`, `revalidated`, `miss` or `coalesced` (`pending`: answered
/// before it was decided).
pub(crate) const CACHE_HEADER: &str = "x-spark-localizer-mirror";

/// The request URL for `uri` (and its expected sha256).
pub(crate) fn request_url(base: &Url, uri: &Url, sha256: Option<&str>) -> Url {
    let mut url = base.clone();
    let path = format!("{}{}", base.path().trim_end_matches('/'), FETCH_PATH);
    url.set_path(&path);
    {
        let mut query = url.query_pairs_mut();
        query.clear().append_pair("uri", uri.as_str());
        if let Some(sha256) = sha256 {
            query.append_pair("sha256", sha256);
        }
    }
    url
}

/// The mirror client: its own HTTP client (the same trust roots, no header-file
/// headers: no credential ever goes to the mirror), the answer timeout, and
/// whether the mirror failed as a whole in this run (then nothing more is asked
/// of it).
pub(crate) struct MirrorSource {
    base: Url,
    client: reqwest::Client,
    timeout: Duration,
    /// A body that sends nothing for this long marks the mirror failed (a bit
    /// under the engine's stall timeout, which would only fail the artifact).
    stall: Duration,
    down: Mutex<Option<String>>,
    /// The sha256 the mirror announced per URI, to report a damaged blob.
    announced: Mutex<std::collections::HashMap<String, String>>,
}

impl MirrorSource {
    pub(crate) fn new(
        base: Url,
        http: &HttpConfig,
        timeout: Duration,
        stall_timeout: Duration,
    ) -> Result<Self, HttpSetupError> {
        let config = HttpConfig {
            headers: Vec::new(),
            connect_timeout: http.connect_timeout.min(timeout),
            ..http.clone()
        };
        Ok(MirrorSource {
            base,
            client: crate::net::client(&config)?,
            timeout,
            stall: stall_timeout.mul_f64(0.9),
            down: Mutex::new(None),
            announced: Mutex::new(Default::default()),
        })
    }

    /// The mirror's URL, as shown.
    pub(crate) fn shown(&self) -> String {
        redact_url(self.base.as_str())
    }

    /// Why the mirror is not asked any more in this run, if it failed as a whole.
    pub(crate) fn down(&self) -> Option<String> {
        self.down.lock().expect("lock").clone()
    }

    /// Marks the mirror failed as a whole; true the first time (to log it once).
    fn mark_down(&self, reason: &str) -> bool {
        let mut down = self.down.lock().expect("lock");
        let first = down.is_none();
        if first {
            *down = Some(reason.to_owned());
        }
        first
    }

    /// The source that asks the mirror for one artifact (with its pin, if any);
    /// `None` once the mirror has failed as a whole.
    pub(crate) fn route(self: &Arc<Self>, pin: Option<&[u8; 32]>) -> Option<Arc<dyn Source>> {
        if self.down().is_some() {
            return None;
        }
        Some(Arc::new(Via {
            mirror: self.clone(),
            sha256: pin.map(hex::encode),
        }))
    }

    /// Asks the mirror's `/healthz` (for `check`): how long it took, or why not.
    pub(crate) async fn health(&self) -> Result<Duration, String> {
        let mut url = self.base.clone();
        url.set_path(&format!(
            "{}/healthz",
            self.base.path().trim_end_matches('/')
        ));
        let started = std::time::Instant::now();
        match tokio::time::timeout(self.timeout, self.client.get(url).send()).await {
            Err(_) => Err(format!(
                "no answer within {} (--mirror-timeout)",
                crate::util::duration::format_duration(self.timeout)
            )),
            Ok(Err(e)) => Err(crate::util::redact::error_chain(&e.without_url())),
            Ok(Ok(r)) if r.status().is_success() => Ok(started.elapsed()),
            Ok(Ok(r)) => Err(format!("/healthz answered {}", r.status())),
        }
    }

    /// The bytes the mirror sent for `uri` did not hash to what it announced:
    /// ask it to check that blob (it hashes it again itself and drops it if
    /// damaged). Best effort, within the answer timeout.
    pub(crate) async fn report_damaged(&self, uri: &Url) {
        let Some(sha256) = self
            .announced
            .lock()
            .expect("lock")
            .get(uri.as_str())
            .cloned()
        else {
            return;
        };
        let mut url = self.base.clone();
        url.set_path(&format!(
            "{}{}",
            self.base.path().trim_end_matches('/'),
            VERIFY_PATH
        ));
        url.query_pairs_mut().clear().append_pair("sha256", &sha256);
        let sent = tokio::time::timeout(self.timeout, self.client.post(url).send()).await;
        let answer = match sent {
            Ok(Ok(response)) => response.text().await.unwrap_or_default(),
            Ok(Err(e)) => crate::util::redact::error_chain(&e.without_url()),
            Err(_) => "no answer".to_owned(),
        };
        tracing::info!(
            sha256,
            "told the mirror its blob is damaged: {}",
            answer.trim()
        );
    }

    /// A failure of the mirror itself (not of one artifact): it is not asked again.
    fn unavailable(&self, uri: &Url, reason: String) -> SourceError {
        if self.mark_down(&reason) {
            tracing::warn!(
                "mirror {} unavailable ({reason}); the remaining artifacts come from their origins",
                self.shown()
            );
        }
        SourceError::new(
            FaultKind::Transient,
            format!(
                "{} via mirror {}: {reason}",
                redact_url(uri.as_str()),
                self.shown()
            ),
        )
    }

    async fn send(
        &self,
        method: reqwest::Method,
        uri: &Url,
        sha256: Option<&str>,
        req: &OpenRequest,
    ) -> Result<reqwest::Response, SourceError> {
        let mut request = self
            .client
            .request(method, request_url(&self.base, uri, sha256));
        if let Some(range) = req.range_header() {
            request = request.header(header::RANGE, range);
            if let Some(v) = req.validator.as_deref() {
                request = request.header(header::IF_RANGE, v);
            }
        }
        let response = match tokio::time::timeout(self.timeout, request.send()).await {
            Err(_) => {
                return Err(self.unavailable(
                    uri,
                    format!(
                        "no answer within {} (--mirror-timeout)",
                        crate::util::duration::format_duration(self.timeout)
                    ),
                ))
            }
            Ok(Err(e)) => {
                return Err(
                    self.unavailable(uri, crate::util::redact::error_chain(&e.without_url()))
                )
            }
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let text = response.text().await.unwrap_or_default();
        let said = text.lines().next().unwrap_or("").trim().to_owned();
        let reason = format!("HTTP {status}: {said}");
        // The mirror is there but cannot serve this artifact (not allowed, the
        // origin failed, a digest mismatch): only this artifact goes to its origin.
        if matches!(status.as_u16(), 400..=499 | 502 | 504) {
            return Err(SourceError::new(
                FaultKind::Refused,
                format!(
                    "{} via mirror {}: {reason}",
                    redact_url(uri.as_str()),
                    self.shown()
                ),
            ));
        }
        Err(self.unavailable(uri, reason))
    }
}

/// `stream`, ended by an error that marks the mirror failed when it sends nothing
/// for the mirror's stall limit: a mirror that hangs mid-body costs one stall,
/// not one per artifact.
fn stalls_fail_the_mirror(
    mirror: Arc<MirrorSource>,
    uri: Url,
    stream: super::ByteStream,
) -> super::ByteStream {
    futures_util::stream::unfold(Some(stream), move |state| {
        let mirror = mirror.clone();
        let uri = uri.clone();
        async move {
            let mut stream = state?;
            match tokio::time::timeout(mirror.stall, stream.next()).await {
                Ok(Some(item)) => Some((item, Some(stream))),
                Ok(None) => None,
                Err(_) => {
                    let reason = format!(
                        "sent nothing for {} in the middle of a body",
                        crate::util::duration::format_duration(mirror.stall)
                    );
                    Some((Err(mirror.unavailable(&uri, reason)), None))
                }
            }
        }
    })
    .boxed()
}

/// One artifact asked of the mirror.
struct Via {
    mirror: Arc<MirrorSource>,
    sha256: Option<String>,
}

#[async_trait]
impl Source for Via {
    async fn open(&self, uri: &Url, req: &OpenRequest) -> Result<Body, SourceError> {
        let response = self
            .mirror
            .send(reqwest::Method::GET, uri, self.sha256.as_deref(), req)
            .await?;
        let status = response.status();
        let headers = response.headers();
        let text = |name: &str| {
            headers
                .get(name)
                .and_then(|v: &HeaderValue| v.to_str().ok())
                .map(str::to_owned)
        };
        let length =
            text(header::CONTENT_LENGTH.as_str()).and_then(|v| v.trim().parse::<u64>().ok());
        let (offset, size) = if status == StatusCode::PARTIAL_CONTENT {
            super::http::content_range(&response).ok_or_else(|| {
                SourceError::new(
                    FaultKind::Refused,
                    format!(
                        "mirror {} answered 206 without a valid Content-Range",
                        self.mirror.shown()
                    ),
                )
            })?
        } else {
            (0, length)
        };
        // The sha256 the mirror vouches for (its header, else a strong ETag that
        // is one) is the validator the engine checks the bytes against, and
        // what a resume must continue.
        let is_sha = |t: &str| t.len() == 64 && t.bytes().all(|b| b.is_ascii_hexdigit());
        let announced = text(SHA256_HEADER)
            .map(|t| t.trim().to_ascii_lowercase())
            .filter(|t| is_sha(t))
            .or_else(|| {
                text(header::ETAG.as_str())
                    .filter(|e| !e.starts_with("W/"))
                    .map(|e| e.trim_matches('"').to_ascii_lowercase())
                    .filter(|t| is_sha(t))
            });
        let validator = announced.as_ref().map(|sha| format!("\"{sha}\""));
        if let Some(sha256) = &announced {
            self.mirror
                .announced
                .lock()
                .expect("lock")
                .insert(uri.to_string(), sha256.clone());
        }
        let meta = Meta {
            size,
            ranges: validator.is_some()
                && text(header::ACCEPT_RANGES.as_str()).is_some_and(|v| v == "bytes"),
            validator,
        };
        tracing::debug!(
            uri = %redact_url(uri.as_str()),
            cache = text(CACHE_HEADER).unwrap_or_default(),
            "asked the mirror"
        );
        let shown = format!(
            "{} via mirror {}",
            redact_url(uri.as_str()),
            self.mirror.shown()
        );
        let stream = response.bytes_stream().map(move |chunk| {
            chunk.map_err(|e| {
                SourceError::new(FaultKind::Transient, shown.clone()).with_source(e.without_url())
            })
        });
        Ok(Body {
            meta,
            offset,
            stream: stalls_fail_the_mirror(self.mirror.clone(), uri.clone(), stream.boxed()),
        })
    }

    async fn probe(&self, uri: &Url) -> Result<Probe, SourceError> {
        let response = self
            .mirror
            .send(
                reqwest::Method::HEAD,
                uri,
                self.sha256.as_deref(),
                &OpenRequest::default(),
            )
            .await?;
        let size = response
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.trim().parse().ok());
        Ok(Probe {
            meta: Meta {
                size,
                ..Meta::default()
            },
            status: response.status().to_string(),
            redirected_to: None,
        })
    }

    fn announces_sha256(&self) -> bool {
        true
    }
}
