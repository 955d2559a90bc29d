//! What the object stores reached through object_store have in common (S3 in
//! [`crate::s3`], Google Cloud Storage in [`gcs`], Azure Blob Storage in
//! [`azure`]): the HTTP client handed to object_store, every request reported
//! to the trail; what an object_store error means ([`classify`]: the kind of
//! fault, worded for users); and how long a credential service may take.

pub(crate) mod azure;
pub(crate) mod gcs;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use object_store::client::{
    HttpClient, HttpConnector, HttpError, HttpErrorKind, HttpRequest, HttpResponse, HttpService,
};
use object_store::ClientOptions;
use reqwest::header::HeaderMap;

use crate::fault::{FaultKind, SourceError};

/// How long a credential service on the node (a metadata server) may take: it
/// answers in milliseconds, so one that does not is unreachable, not slow.
pub(crate) const METADATA_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a remote token service (Entra ID, STS) may take.
pub(crate) const TOKEN_TIMEOUT: Duration = Duration::from_secs(15);

/// object_store's own retries off: the engine retries, resuming with ranges.
pub(crate) fn no_retries() -> object_store::RetryConfig {
    object_store::RetryConfig {
        max_retries: 0,
        ..object_store::RetryConfig::default()
    }
}

/// Something told of every answer's headers (S3 notes the bucket's region).
pub(crate) type Observer = Arc<dyn Fn(&HeaderMap) + Send + Sync>;

/// Hands object_store the HTTP source's client (same trust roots, proxies,
/// pool; no whole-request timeout: the engine's stall timeout rules the body),
/// every request reported to the trail ([`crate::net::trail`]).
#[derive(Clone)]
pub(crate) struct Traced {
    client: reqwest::Client,
    observer: Option<Observer>,
}

impl std::fmt::Debug for Traced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Traced").finish_non_exhaustive()
    }
}

impl Traced {
    pub(crate) fn new(client: &reqwest::Client, observer: Option<Observer>) -> Self {
        Traced {
            client: client.clone(),
            observer,
        }
    }
}

impl HttpConnector for Traced {
    fn connect(&self, _: &ClientOptions) -> object_store::Result<HttpClient> {
        Ok(HttpClient::new(self.clone()))
    }
}

#[async_trait]
impl HttpService for Traced {
    async fn call(&self, req: HttpRequest) -> Result<HttpResponse, HttpError> {
        let entry =
            crate::net::trail::Request::start(req.method(), &req.uri().to_string(), req.headers());
        let result = HttpService::call(&self.client, req).await;
        if let Some(entry) = entry {
            match &result {
                Ok(response) => entry.answered(response.status(), response.headers()),
                Err(e) => entry.failed(e),
            }
        }
        if let (Ok(response), Some(observer)) = (&result, &self.observer) {
            observer(response.headers());
        }
        result
    }
}

/// The first cause of type `T` in an error's chain.
pub(crate) fn find_cause<'a, T: std::error::Error + 'static>(
    err: &'a (dyn std::error::Error + 'static),
) -> Option<&'a T> {
    let mut current = Some(err);
    while let Some(e) = current {
        if let Some(found) = e.downcast_ref::<T>() {
            return Some(found);
        }
        current = e.source();
    }
    None
}

/// The innermost cause (e.g. "Connection refused (os error 111)"), scrubbed.
pub(crate) fn root_cause(err: &(dyn std::error::Error + 'static)) -> String {
    let mut last = err;
    while let Some(next) = last.source() {
        last = next;
    }
    crate::util::redact::scrub(&last.to_string())
}

/// What went wrong on the wire, for messages.
pub(crate) fn transport_kind(e: &HttpError) -> &'static str {
    match e.kind() {
        HttpErrorKind::Connect => "cannot connect to",
        HttpErrorKind::Timeout => "timed out talking to",
        HttpErrorKind::Interrupted => "connection interrupted by",
        HttpErrorKind::Decode => "cannot read the response of",
        _ => "request failed to",
    }
}

/// The HTTP status in object_store's error text (`status code: 503 ...`,
/// `non-2xx status code: 403 Forbidden`).
pub(crate) fn status_of(text: &str) -> Option<u16> {
    let at = text.find("status code: ")? + "status code: ".len();
    text.get(at..at + 3)?.parse().ok()
}

/// The text of `<name>…</name>` in an error response body (S3, GCS's XML API
/// and Azure all answer errors in XML with a `<Code>` and a `<Message>`).
pub(crate) fn tag<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let open = format!("<{name}>");
    let start = text.find(&open)? + open.len();
    let len = text[start..].find(&format!("</{name}>"))?;
    Some(text[start..start + len].trim()).filter(|t| !t.is_empty())
}

/// Where a request went, for [`classify`]'s messages.
pub(crate) struct Place<'a> {
    /// The URI as shown (redacted).
    pub shown: &'a str,
    /// `GCS` or `Azure`.
    pub service: &'static str,
    /// The endpoint as shown.
    pub endpoint: &'a str,
    /// The bucket (GCS) or container (Azure).
    pub bucket: &'a str,
    /// How the credentials were picked, for an auth failure's message.
    pub credentials: &'a str,
    /// What to do about an auth failure.
    pub auth_hint: &'static str,
}

/// Turns an object_store error of GCS or Azure into what the engine
/// understands: a missing object or bucket (final), refused credentials (final,
/// naming their source), TLS (final), the transport and 5xx/408/429 (retried),
/// anything else (final).
pub(crate) fn classify(place: &Place<'_>, err: &object_store::Error) -> SourceError {
    let text = crate::util::redact::error_chain(err);
    let code = tag(&text, "Code");
    let status = status_of(&text);
    let shown = place.shown;
    let detail = tag(&text, "Message")
        .map(|m| m.lines().next().unwrap_or(m).to_owned())
        .unwrap_or_else(|| text.clone());
    let with_code = |s: String| match code {
        Some(c) => format!("{s} ({c})"),
        None => s,
    };
    if matches!(err, object_store::Error::NotFound { .. }) || status == Some(404) {
        let what = match code {
            Some(c) if c.contains("Bucket") || c.contains("Container") => format!(
                "{} '{}' does not exist at {}",
                if place.service == "Azure" {
                    "container"
                } else {
                    "bucket"
                },
                place.bucket,
                place.endpoint
            ),
            _ => format!("not found in '{}' at {}", place.bucket, place.endpoint),
        };
        return SourceError::new(FaultKind::NotFound, with_code(format!("{shown}: {what}")));
    }
    if matches!(status, Some(401 | 403)) {
        return SourceError::new(
            FaultKind::Auth,
            with_code(format!(
                "{shown}: {} refused the credentials from {} (HTTP {}): {detail}",
                place.service,
                place.credentials,
                status.unwrap_or_default()
            )),
        )
        .with_hint(place.auth_hint);
    }
    if let Some(http) = find_cause::<HttpError>(err) {
        return transport(place, http);
    }
    match status {
        Some(s) if s >= 500 || s == 408 || s == 429 => SourceError::new(
            FaultKind::Transient,
            with_code(format!(
                "{shown}: {} answered {s}: {detail}",
                place.endpoint
            )),
        ),
        _ => SourceError::new(FaultKind::Refused, with_code(format!("{shown}: {detail}"))),
    }
}

/// No answer: TLS (final), else a connection fault (retried), naming the proxy
/// when one is configured.
fn transport(place: &Place<'_>, http: &HttpError) -> SourceError {
    let (shown, endpoint) = (place.shown, place.endpoint);
    let root = root_cause(http);
    if crate::net::has_tls_cause(http) {
        let hint = if crate::net::is_plain_http_answer(http) {
            "the endpoint answered in plain HTTP, not TLS: give it as http://…"
        } else {
            "add the endpoint's CA with --ca-cert or SSL_CERT_FILE"
        };
        return SourceError::new(
            FaultKind::Tls,
            format!("{shown}: TLS failure talking to {endpoint}: {root}"),
        )
        .with_hint(hint);
    }
    let e = SourceError::new(
        FaultKind::Transient,
        format!("{shown}: {} {endpoint}: {root}", transport_kind(http)),
    );
    if http.kind() == HttpErrorKind::Connect && crate::net::proxied() {
        e.with_hint(crate::net::PROXY_HINT)
    } else {
        e
    }
}

/// Why getting a token failed: a transport fault reaching the token service is
/// retried (with `hint` when it is the service that did not answer); a refusal
/// or an unusable answer is final. `what` names the credential source.
pub(crate) fn credential_failure(
    shown: &str,
    what: &str,
    err: &object_store::Error,
    hint: &'static str,
) -> SourceError {
    let text = crate::util::redact::error_chain(err);
    let message = format!("{shown}: cannot get a token from {what}");
    if let Some(http) = find_cause::<HttpError>(err) {
        let root = root_cause(http);
        if crate::net::has_tls_cause(http) {
            return SourceError::new(FaultKind::Tls, format!("{message}: TLS failure: {root}"))
                .with_hint("trust the token service's CA with --ca-cert or SSL_CERT_FILE");
        }
        if http.kind() != HttpErrorKind::Decode {
            let e = SourceError::new(
                FaultKind::Transient,
                format!("{message}: {} it: {root}", transport_kind(http)),
            );
            return if hint.is_empty() {
                e
            } else {
                e.with_hint(hint)
            };
        }
    }
    let kind = match status_of(&text) {
        Some(s) if s >= 500 || s == 408 || s == 429 => FaultKind::Transient,
        _ => FaultKind::Auth,
    };
    let e = SourceError::new(kind, format!("{message}: {text}"));
    if hint.is_empty() {
        e
    } else {
        e.with_hint(hint)
    }
}

/// Waits for a token from `what` within `limit` (registering what `secret`
/// finds in it for scrubbing): a failure is classified by
/// [`credential_failure`]; no answer in time is final, with `hint`.
pub(crate) async fn token_within<T>(
    shown: &str,
    what: &str,
    limit: Duration,
    hint: &'static str,
    token: impl std::future::Future<Output = object_store::Result<T>>,
    secret: impl Fn(&T) -> Option<String>,
) -> Result<(), SourceError> {
    let with_hint = |e: SourceError| {
        if hint.is_empty() {
            e
        } else {
            e.with_hint(hint)
        }
    };
    match tokio::time::timeout(limit, token).await {
        Ok(Ok(got)) => {
            // A bearer token is a credential: scrubbed wherever a server echoes it.
            if let Some(value) = secret(&got) {
                crate::util::redact::register_secret(&value);
            }
            Ok(())
        }
        Ok(Err(e)) => Err(credential_failure(shown, what, &e, hint)),
        Err(_) => Err(with_hint(SourceError::new(
            FaultKind::Auth,
            format!(
                "{shown}: no token from {what} within {}",
                crate::util::duration::format_duration(limit)
            ),
        ))),
    }
}

/// The variables of `names` that are set (not blank), trimmed: a snapshot, so
/// `check` and `fetch` see the same.
pub(crate) fn env_snapshot(names: &[&'static str]) -> BTreeMap<&'static str, String> {
    names
        .iter()
        .filter_map(|&k| {
            std::env::var(k)
                .ok()
                .filter(|v| !v.trim().is_empty())
                .map(|v| (k, v.trim().to_owned()))
        })
        .collect()
}

/// The properties file's keys that `wanted` picks (not blank), values trimmed.
pub(crate) fn hadoop_keys(
    props: Option<&crate::properties::Properties>,
    wanted: impl Fn(&str) -> bool,
) -> BTreeMap<String, String> {
    props
        .map(|p| {
            p.iter()
                .filter(|(k, v)| wanted(k) && !v.trim().is_empty())
                .map(|(k, v)| (k.to_owned(), v.trim().to_owned()))
                .collect()
        })
        .unwrap_or_default()
}

/// The value of `key` or of its per-bucket form: `<prefix>bucket.<bucket>.<key>`
/// beats `<prefix><key>` (S3A's per-bucket convention, which spark-localizer
/// reads for every object store), with the key that held it.
pub(crate) fn per_bucket<'a>(
    hadoop: &'a BTreeMap<String, String>,
    prefix: &str,
    bucket: &str,
    key: &str,
) -> Option<(&'a str, String)> {
    let specific = format!("{prefix}bucket.{bucket}.{key}");
    let general = format!("{prefix}{key}");
    [specific, general]
        .into_iter()
        .find_map(|k| hadoop.get(&k).map(|v| (v.as_str(), k)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_and_tags_are_read_from_error_text() {
        let text = "Server returned non-2xx status code: 403 Forbidden: <?xml version=\"1.0\"?><Error><Code>AuthenticationFailed</Code><Message>Server failed\nRequestId:1</Message></Error>";
        assert_eq!(status_of(text), Some(403));
        assert_eq!(tag(text, "Code"), Some("AuthenticationFailed"));
        assert!(tag(text, "Nope").is_none());
        assert_eq!(status_of("no status"), None);
    }

    #[test]
    fn per_bucket_keys_beat_general_ones() {
        let mut h = std::collections::BTreeMap::new();
        h.insert("p.x".to_owned(), "general".to_owned());
        h.insert("p.bucket.b1.x".to_owned(), "specific".to_owned());
        assert_eq!(per_bucket(&h, "p.", "b1", "x").unwrap().0, "specific");
        assert_eq!(per_bucket(&h, "p.", "b2", "x").unwrap().0, "general");
        assert_eq!(per_bucket(&h, "p.", "b2", "x").unwrap().1, "p.x");
        assert!(per_bucket(&h, "p.", "b2", "y").is_none());
    }
}
