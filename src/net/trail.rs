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

/// One request, sent at `started`, as the trail shows it.
pub(crate) struct Request<'a> {
    pub method: &'a Method,
    pub url: &'a str,
    pub headers: &'a HeaderMap,
    pub started: Instant,
}

impl Request<'_> {
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
        format!(
            "{} {}{range}",
            self.method,
            crate::util::redact::redact_url(self.url)
        )
    }

    /// The request was answered with `status` and `headers`.
    pub(crate) fn answered(&self, status: StatusCode, headers: &HeaderMap) {
        if !Self::wanted() {
            return;
        }
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
    pub(crate) fn failed(&self, error: &(dyn std::error::Error + 'static)) {
        if !Self::wanted() {
            return;
        }
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
    let shown = Request::wanted().then(|| {
        (
            request.method().clone(),
            request.url().to_string(),
            request.headers().clone(),
        )
    });
    let started = Instant::now();
    let result = client.execute(request).await;
    if let Some((method, url, headers)) = &shown {
        let r = Request {
            method,
            url,
            headers,
            started,
        };
        match &result {
            Ok(response) => r.answered(response.status(), response.headers()),
            Err(e) => r.failed(e),
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
