//! The request trail: with `-v`, one line per HTTP request (method, URL with
//! credentials and query values masked, the range asked for, the status or the
//! transport error, the time to the answer's headers); with `-vv`, also the
//! answer's headers that decide a transfer (size, range, version, the server's
//! request id). The retry decisions are the engine's warnings, in the same
//! stream. Every source that speaks HTTP (the HTTP and staging sources, S3 and
//! its credential services through object_store) reports here.

use std::time::Instant;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue, RANGE};
use reqwest::{Method, StatusCode};
use tracing::{debug, enabled, trace, Level};

/// The answer's headers `-vv` shows.
const SHOWN: &[&str] = &[
    "content-length",
    "content-range",
    "accept-ranges",
    "etag",
    "last-modified",
    "location",
    "retry-after",
    "x-amz-request-id",
    "x-amz-bucket-region",
];

/// One request, sent at `started`, as the trail shows it. Dropped before it was
/// answered or failed (a stall timeout, a credential service's time limit, a
/// stop cut it short), it says so: those are the requests a hang is made of.
pub(crate) struct Request {
    pub method: Method,
    pub url: String,
    pub headers: HeaderMap,
    pub started: Instant,
    done: bool,
}

impl Drop for Request {
    fn drop(&mut self) {
        if !self.done {
            debug!(
                "{} -> abandoned after {} (a time limit or a stop cut it short)",
                self.line(),
                took(self.started)
            );
        }
    }
}

impl Request {
    /// The trail entry of a request about to be sent, when anybody reads it.
    pub(crate) fn start(method: &Method, url: &str, headers: &HeaderMap) -> Option<Request> {
        Self::wanted().then(|| Request {
            method: method.clone(),
            url: url.to_owned(),
            headers: headers.clone(),
            started: Instant::now(),
            done: false,
        })
    }

    /// Whether anybody reads the trail (the line is not built otherwise).
    pub(crate) fn wanted() -> bool {
        enabled!(Level::DEBUG)
    }

    fn line(&self) -> String {
        let range = self
            .headers
            .get(RANGE)
            .and_then(|v| v.to_str().ok())
            .map(|r| format!(" (Range: {r})"))
            .unwrap_or_default();
        // The scheme only (Bearer, SharedKey, AWS4-HMAC-SHA256): whether and
        // how a request was signed, never the credential.
        let auth = self
            .headers
            .get(reqwest::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split_whitespace().next())
            .map(|scheme| format!(" [auth: {scheme}]"))
            .unwrap_or_default();
        format!(
            "{} {}{range}{auth}",
            self.method,
            crate::util::redact::redact_url(&self.url)
        )
    }

    /// The request was answered with `status` and `headers`.
    pub(crate) fn answered(mut self, status: StatusCode, headers: &HeaderMap) {
        self.done = true;
        let took = took(self.started);
        if enabled!(Level::TRACE) {
            let shown: Vec<String> = SHOWN
                .iter()
                .filter_map(|name| {
                    let value = headers.get(HeaderName::from_static(name))?;
                    Some(format!("{name}: {}", text(value)))
                })
                .collect();
            trace!(
                "{} -> {status} in {took} [{}]",
                self.line(),
                shown.join(", ")
            );
        } else {
            debug!("{} -> {status} in {took}", self.line());
        }
    }

    /// The request got no answer.
    pub(crate) fn failed(mut self, error: &(dyn std::error::Error + 'static)) {
        self.done = true;
        debug!(
            "{} -> no answer after {}: {}",
            self.line(),
            took(self.started),
            crate::util::redact::error_chain(error)
        );
    }
}

/// Sends `request` on `client`, reporting it to the trail.
pub(crate) async fn execute(
    client: &reqwest::Client,
    request: reqwest::Request,
) -> reqwest::Result<reqwest::Response> {
    let entry = Request::start(request.method(), request.url().as_str(), request.headers());
    let result = client.execute(request).await;
    if let Some(entry) = entry {
        match &result {
            Ok(response) => entry.answered(response.status(), response.headers()),
            Err(e) => entry.failed(e),
        }
    }
    result
}

/// Time to an answer: milliseconds with a decimal below a second.
fn took(started: Instant) -> String {
    let elapsed = started.elapsed();
    if elapsed < std::time::Duration::from_secs(1) {
        format!("{:.1}ms", elapsed.as_secs_f64() * 1000.0)
    } else {
        crate::util::duration::format_duration(elapsed)
    }
}

fn text(value: &HeaderValue) -> String {
    value
        .to_str()
        .map(crate::util::redact::redact_url)
        .unwrap_or_else(|_| "(not text)".to_owned())
}
