//! `s3://` and `s3a://` through object_store: one store per bucket (each bucket
//! may have its own endpoint, region and credentials, as S3A allows), sharing
//! the HTTP client of the HTTP source (same trust roots, proxies, pool; no
//! whole-request timeout: the engine's stall timeout rules the body).
//!
//! object_store's own retries are off: the engine retries, re-reading rotated
//! credentials and resuming with ranged, ETag-checked requests.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use futures_util::{StreamExt, TryStreamExt};
use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey};
use object_store::client::{HttpClient, HttpConnector, HttpError};
use object_store::path::Path as KeyPath;
use object_store::{ClientOptions, GetOptions, GetRange, ObjectStore, ObjectStoreExt, RetryConfig};
use url::Url;

use super::{Body, FaultKind, Meta, OpenRequest, Probe, Source, SourceError};
use crate::s3::secret_dir;
use crate::s3::settings::{self, BucketConfig, Credentials, S3Settings};

/// Where an `s3://bucket/key` URI points: the bucket and the object key.
pub(crate) fn locate(uri: &Url) -> Result<(String, KeyPath), String> {
    let shown = crate::util::redact::redact_url(uri.as_str());
    let bucket = uri.host_str().unwrap_or_default();
    if bucket.is_empty() {
        return Err(format!(
            "{shown} has no bucket (write s3a://bucket/path/to/file)"
        ));
    }
    if !uri.username().is_empty() || uri.password().is_some() {
        return Err(format!(
            "{shown} holds credentials; give them with --s3-credentials-dir, spark.hadoop.fs.s3a.access.key/secret.key or AWS_* variables instead"
        ));
    }
    if uri.port().is_some() {
        return Err(format!(
            "{shown} has a port; the S3 endpoint is set with spark.hadoop.fs.s3a.endpoint or AWS_ENDPOINT_URL"
        ));
    }
    if uri.query().is_some() {
        return Err(format!(
            "{shown} has a query ('?'); S3 keys with '?' must be percent-encoded (%3F)"
        ));
    }
    let key = uri.path().trim_start_matches('/');
    if key.is_empty() {
        return Err(format!("{shown} names a bucket, not an object"));
    }
    let key =
        KeyPath::from_url_path(key).map_err(|e| format!("{shown} is not a usable S3 key: {e}"))?;
    Ok((bucket.to_owned(), key))
}

/// A bucket's store and how it was configured.
struct Bucket {
    store: AmazonS3,
    config: BucketConfig,
}

/// What `check` prints about one bucket.
pub(crate) struct BucketInfo {
    pub bucket: String,
    pub endpoint: String,
    pub region: String,
    pub credentials: String,
}

pub(crate) struct S3Source {
    buckets: BTreeMap<String, Bucket>,
}

/// Hands object_store the HTTP source's client.
#[derive(Debug)]
struct Shared(reqwest::Client);

impl HttpConnector for Shared {
    fn connect(&self, _: &ClientOptions) -> object_store::Result<HttpClient> {
        Ok(HttpClient::new(self.0.clone()))
    }
}

impl S3Source {
    /// Configures every bucket the plan names; all problems are returned together.
    pub(crate) fn new<'a>(
        settings: &S3Settings,
        client: &reqwest::Client,
        buckets: impl IntoIterator<Item = &'a str>,
    ) -> Result<Self, Vec<String>> {
        let mut problems = Vec::new();
        let mut out = BTreeMap::new();
        for bucket in buckets {
            if out.contains_key(bucket) {
                continue;
            }
            match settings.resolve(bucket) {
                Ok(config) => match build(&config, client) {
                    Ok(store) => {
                        out.insert(bucket.to_owned(), Bucket { store, config });
                    }
                    Err(e) => problems.push(format!(
                        "bucket '{bucket}': {}",
                        crate::util::redact::error_chain(&e)
                    )),
                },
                Err(p) => problems.extend(p.into_iter().map(|p| format!("bucket '{bucket}': {p}"))),
            }
        }
        if problems.is_empty() {
            Ok(S3Source { buckets: out })
        } else {
            Err(problems)
        }
    }

    /// Every configured bucket, for `check`.
    pub(crate) fn describe(&self) -> Vec<BucketInfo> {
        self.buckets
            .values()
            .map(|b| BucketInfo {
                bucket: b.config.bucket.clone(),
                endpoint: b.config.shown_endpoint.clone(),
                region: format!("{} ({})", b.config.region, b.config.region_origin),
                credentials: b.config.credential_source.clone(),
            })
            .collect()
    }

    fn bucket(&self, uri: &Url) -> Result<(&Bucket, KeyPath), SourceError> {
        let (bucket, key) = locate(uri).map_err(|e| SourceError::new(FaultKind::Refused, e))?;
        let b = self.buckets.get(&bucket).ok_or_else(|| {
            SourceError::new(
                FaultKind::Refused,
                format!("bucket '{bucket}' was not configured"),
            )
        })?;
        Ok((b, key))
    }
}

/// The bucket's store, its credentials checked before use (a value that cannot
/// go into a header would make object_store panic).
fn build(c: &BucketConfig, client: &reqwest::Client) -> object_store::Result<AmazonS3> {
    build_retrying(c, client, None)
}

/// [`build`], with object_store's own retries when `retry` is given.
fn build_retrying(
    c: &BucketConfig,
    client: &reqwest::Client,
    retry: Option<&RetryConfig>,
) -> object_store::Result<AmazonS3> {
    let configured = || {
        configure(c, client).map(|b| match retry {
            Some(r) => b.with_retry(r.clone()),
            None => b,
        })
    };
    let plain = configured()?.build()?;
    let checked = Checked(plain.credentials().clone());
    configured()?.with_credentials(Arc::new(checked)).build()
}

/// A credential that cannot be sent (a control character in the key id or token).
#[derive(Debug, thiserror::Error)]
#[error("the {0} it gave contains a control character")]
pub(crate) struct MalformedCredential(&'static str);

#[derive(Debug)]
struct Checked(object_store::aws::AwsCredentialProvider);

#[async_trait]
impl object_store::CredentialProvider for Checked {
    type Credential = object_store::aws::AwsCredential;

    async fn get_credential(&self) -> object_store::Result<Arc<Self::Credential>> {
        let c = self.0.get_credential().await?;
        let bad = if settings::has_control(&c.key_id) {
            Some("access key id")
        } else if c.token.as_deref().is_some_and(settings::has_control) {
            Some("session token")
        } else {
            None
        };
        match bad {
            Some(what) => Err(object_store::Error::Generic {
                store: "S3",
                source: Box::new(MalformedCredential(what)),
            }),
            None => Ok(c),
        }
    }
}

fn configure(c: &BucketConfig, client: &reqwest::Client) -> object_store::Result<AmazonS3Builder> {
    let retry = RetryConfig {
        max_retries: 0,
        ..RetryConfig::default()
    };
    let mut b = AmazonS3Builder::new()
        .with_bucket_name(&c.bucket)
        .with_region(&c.region)
        .with_virtual_hosted_style_request(c.virtual_hosted)
        .with_allow_http(c.allow_http)
        .with_retry(retry)
        .with_http_connector(Shared(client.clone()));
    if let Some(endpoint) = &c.endpoint {
        b = b.with_endpoint(endpoint);
    }
    let key = |name: &str| name.parse::<AmazonS3ConfigKey>();
    b = match &c.credentials {
        Credentials::Dir(dir) => b.with_credentials(Arc::new(secret_dir::SecretDir::new(dir))),
        Credentials::Static {
            key_id,
            secret,
            token,
        } => {
            let b = b.with_access_key_id(key_id).with_secret_access_key(secret);
            match token {
                Some(t) => b.with_token(t),
                None => b,
            }
        }
        Credentials::WebIdentity {
            token_file,
            role_arn,
            session_name,
            sts_endpoint,
        } => {
            let mut b = b
                .with_config(key("aws_web_identity_token_file")?, token_file)
                .with_config(key("aws_role_arn")?, role_arn);
            if let Some(s) = session_name {
                b = b.with_config(key("aws_role_session_name")?, s);
            }
            if let Some(s) = sts_endpoint {
                b = b.with_config(key("aws_endpoint_url_sts")?, s);
            }
            b
        }
        Credentials::PodIdentity {
            full_uri,
            token_file,
        } => b
            .with_config(key("aws_container_credentials_full_uri")?, full_uri)
            .with_config(key("aws_container_authorization_token_file")?, token_file),
        Credentials::EcsTask { relative_uri } => {
            b.with_config(key("aws_container_credentials_relative_uri")?, relative_uri)
        }
        Credentials::Instance { endpoint } => match endpoint {
            Some(e) => b.with_metadata_endpoint(e),
            None => b,
        },
        Credentials::Anonymous => b.with_skip_signature(true),
    };
    Ok(b)
}

#[async_trait]
impl Source for S3Source {
    async fn open(&self, uri: &Url, req: &OpenRequest) -> Result<Body, SourceError> {
        let (b, key) = self.bucket(uri)?;
        credentials(b, uri).await?;
        let range = match (req.offset, req.end) {
            (0, None) => None,
            (start, None) => Some(GetRange::Offset(start)),
            (start, Some(end)) => Some(GetRange::Bounded(start..end)),
        };
        // A range continues a version: If-Match its ETag. When the object changed,
        // answer from the start, as If-Range does over HTTP.
        let if_match = range.as_ref().and(req.validator.clone());
        let ranged = range.is_some();
        let options = GetOptions {
            range,
            if_match,
            ..GetOptions::default()
        };
        let result = match b.store.get_opts(&key, options).await {
            Err(object_store::Error::Precondition { .. }) if ranged => {
                b.store.get_opts(&key, GetOptions::default()).await
            }
            other => other,
        }
        .map_err(|e| classify(b, uri, e))?;
        let meta = Meta {
            size: Some(result.meta.size),
            validator: result.meta.e_tag.clone(),
            ranges: true,
        };
        let offset = result.range.start;
        let shown = crate::util::redact::redact_url(uri.as_str());
        let stream = result.into_stream().map_err(move |e| {
            SourceError::new(
                FaultKind::Transient,
                format!("{shown}: reading the body: {}", root_cause(&e)),
            )
        });
        Ok(Body {
            meta,
            offset,
            stream: stream.boxed(),
        })
    }

    fn parallel_ranges(&self) -> bool {
        true
    }

    async fn probe(&self, uri: &Url) -> Result<Probe, SourceError> {
        let (b, key) = self.bucket(uri)?;
        credentials(b, uri).await?;
        match b.store.head(&key).await {
            Ok(meta) => Ok(Probe {
                meta: Meta {
                    size: Some(meta.size),
                    validator: meta.e_tag,
                    ranges: true,
                },
                status: "200 OK".to_owned(),
                redirected_to: None,
            }),
            Err(e) => {
                // A HEAD answer has no body, so no S3 error code: ask for one byte
                // to tell NoSuchBucket from NoSuchKey, a bad key from a bad secret,
                // a wrong region from a bad request.
                if find_cause::<HttpError>(&e).is_none() {
                    let one = GetOptions {
                        range: Some(GetRange::Bounded(0..1)),
                        ..GetOptions::default()
                    };
                    if let Err(e) = b.store.get_opts(&key, one).await {
                        return Err(classify(b, uri, e));
                    }
                }
                Err(classify(b, uri, e))
            }
        }
    }
}

/// Gets the bucket's credentials (cached by object_store for temporary ones), so a
/// failure of the credential source is reported as such, not as the endpoint's.
async fn credentials(b: &Bucket, uri: &Url) -> Result<(), SourceError> {
    let Err(err) = b.store.credentials().get_credential().await else {
        return Ok(());
    };
    let shown = crate::util::redact::redact_url(uri.as_str());
    let source = &b.config.credential_source;
    if let Some(e) = find_cause::<secret_dir::SecretDirError>(&err) {
        return Err(SourceError::new(FaultKind::Auth, format!("{shown}: {e}")).with_hint(
            "the Secret mounted at --s3-credentials-dir needs the keys access-key and secret-key",
        ));
    }
    if let Some(e) = find_cause::<MalformedCredential>(&err) {
        return Err(SourceError::new(
            FaultKind::Auth,
            format!("{shown}: cannot use the S3 credentials from {source}: {e}"),
        ));
    }
    let text = crate::util::redact::error_chain(&err);
    let what = format!("{shown}: cannot get S3 credentials from {source}");
    if let Some(http) = find_cause::<HttpError>(&err) {
        use object_store::client::HttpErrorKind as K;
        let root = root_cause(http);
        if crate::net::has_tls_cause(http) {
            return Err(
                SourceError::new(FaultKind::Tls, format!("{what}: TLS failure: {root}"))
                    .with_hint("trust the credential service's CA with --ca-cert or SSL_CERT_FILE"),
            );
        }
        if matches!(b.config.credentials, Credentials::Instance { .. }) && http.kind() == K::Connect
        {
            return Err(SourceError::new(
                FaultKind::Auth,
                format!("{what}: instance metadata did not answer ({root})"),
            )
            .with_hint("give credentials: --s3-credentials-dir, spark.hadoop.fs.s3a.access.key/secret.key, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or IRSA"));
        }
        if http.kind() == K::Decode {
            return Err(SourceError::new(
                FaultKind::Auth,
                format!("{what}: its answer is not usable: {root}"),
            ));
        }
        let e = SourceError::new(
            FaultKind::Transient,
            format!(
                "{what}: {}: {root}",
                transport_kind(http).trim_end_matches(" to")
            ),
        );
        return Err(if http.kind() == K::Connect && crate::net::proxied() {
            e.with_hint(crate::net::PROXY_HINT)
        } else {
            e
        });
    }
    let code = s3_code(&text)
        .map(|c| format!(" ({c})"))
        .unwrap_or_default();
    let kind = match status_of(&text) {
        Some(s) if s >= 500 || s == 408 || s == 429 => FaultKind::Transient,
        _ => FaultKind::Auth,
    };
    Err(SourceError::new(
        kind,
        format!("{what}: {}{code}", detail(&text)),
    ))
}

/// S3 error codes that mean the credentials are wrong, whatever the status.
const AUTH_CODES: &[&str] = &[
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "AccessDenied",
    "ExpiredToken",
    "TokenRefreshRequired",
    "InvalidToken",
];

/// The S3 error code in an error response body (`<Code>NoSuchKey</Code>`).
fn s3_code(text: &str) -> Option<&str> {
    let start = text.find("<Code>")? + "<Code>".len();
    let len = text[start..].find("</Code>")?;
    Some(&text[start..start + len])
}

/// The HTTP status in object_store's error text (`status code: 503 ...`).
fn status_of(text: &str) -> Option<u16> {
    let at = text.find("status code: ")? + "status code: ".len();
    text.get(at..at + 3)?.parse().ok()
}

/// A readable detail of an error response: its `<Message>` if any, else the text.
fn detail(text: &str) -> String {
    let message = text.find("<Message>").and_then(|s| {
        let s = s + "<Message>".len();
        text[s..].find("</Message>").map(|l| &text[s..s + l])
    });
    match message {
        Some(m) => m.to_owned(),
        None => text.to_owned(),
    }
}

/// Turns an object_store error into what the engine understands.
fn classify(b: &Bucket, uri: &Url, err: object_store::Error) -> SourceError {
    let shown = crate::util::redact::redact_url(uri.as_str());
    let text = crate::util::redact::error_chain(&err);
    let code = s3_code(&text).map(str::to_owned);
    let status = status_of(&text);
    let bucket = &b.config.bucket;
    let creds = &b.config.credential_source;
    // A known S3 error code says it all; otherwise the whole error text helps.
    let cause = |kind, message: String| {
        let e = SourceError::new(kind, message);
        if code.is_some() {
            e
        } else {
            e.with_source(err_box(&text))
        }
    };

    if let Some(e) = find_cause::<secret_dir::SecretDirError>(&err) {
        return SourceError::new(FaultKind::Auth, format!("{shown}: {e}")).with_hint(
            "the Secret mounted at --s3-credentials-dir needs the keys access-key and secret-key",
        );
    }
    let not_found = matches!(err, object_store::Error::NotFound { .. }) || status == Some(404);
    if not_found {
        return match code.as_deref() {
            Some("NoSuchBucket") => SourceError::new(
                FaultKind::NotFound,
                format!(
                    "{shown}: bucket '{bucket}' does not exist at {} (NoSuchBucket)",
                    b.config.shown_endpoint
                ),
            ),
            Some("NoSuchKey") => SourceError::new(
                FaultKind::NotFound,
                format!("{shown}: no such object in bucket '{bucket}' (NoSuchKey)"),
            ),
            _ => SourceError::new(
                FaultKind::NotFound,
                format!(
                    "{shown}: not found (HTTP 404 from {})",
                    b.config.shown_endpoint
                ),
            ),
        };
    }
    let denied = matches!(
        err,
        object_store::Error::PermissionDenied { .. } | object_store::Error::Unauthenticated { .. }
    ) || matches!(status, Some(401 | 403))
        || code.as_deref().is_some_and(|c| AUTH_CODES.contains(&c));
    if denied {
        let what = match code.as_deref() {
            Some("InvalidAccessKeyId") => "the server does not know the access key id",
            Some("SignatureDoesNotMatch") => {
                "the signature does not match: the secret key does not belong to this access key id"
            }
            Some("AccessDenied") => "access denied",
            Some("ExpiredToken") | Some("TokenRefreshRequired") => "the session token has expired",
            Some("InvalidToken") => "the session token is not valid",
            _ => "refused",
        };
        let code = code
            .as_deref()
            .map(|c| format!(" ({c})"))
            .unwrap_or_default();
        return cause(
            FaultKind::Auth,
            format!("{shown}: {what}{code}; credentials from {creds}"),
        )
        .with_hint("`spark-localizer check` shows which S3 credential source is used and why");
    }
    if matches!(
        code.as_deref(),
        Some("PermanentRedirect" | "AuthorizationHeaderMalformed")
    ) || status == Some(301)
        || text.contains("incorrectly configured region")
    {
        return cause(
            FaultKind::Refused,
            format!(
                "{shown}: bucket '{bucket}' is not in region '{}' or not at {}: {}",
                b.config.region,
                b.config.shown_endpoint,
                detail(&text)
            ),
        )
        .with_hint(
            "set the bucket's region with AWS_REGION or spark.hadoop.fs.s3a.endpoint.region",
        );
    }
    if let Some(http) = find_cause::<HttpError>(&err) {
        if crate::net::has_tls_cause(http) {
            return cause(
                FaultKind::Tls,
                format!(
                    "{shown}: TLS failure talking to {}: {text}",
                    b.config.shown_endpoint
                ),
            )
            .with_hint("add the endpoint's CA with --ca-cert or SSL_CERT_FILE");
        }
        let e = SourceError::new(
            FaultKind::Transient,
            format!(
                "{shown}: {} {}: {}",
                transport_kind(http),
                b.config.shown_endpoint,
                root_cause(http)
            ),
        );
        return if http.kind() == object_store::client::HttpErrorKind::Connect
            && crate::net::proxied()
        {
            e.with_hint(crate::net::PROXY_HINT)
        } else {
            e
        };
    }
    match status {
        Some(s) if s >= 500 || s == 408 || s == 429 => {
            cause(FaultKind::Transient, format!("{shown}: {}", detail(&text)))
        }
        _ => cause(
            FaultKind::Refused,
            format!(
                "{shown}: {}{}",
                detail(&text),
                code.as_deref()
                    .map(|c| format!(" ({c})"))
                    .unwrap_or_default()
            ),
        ),
    }
}

/// What went wrong on the wire, for messages.
fn transport_kind(e: &HttpError) -> &'static str {
    use object_store::client::HttpErrorKind as K;
    match e.kind() {
        K::Connect => "cannot connect to",
        K::Timeout => "timed out talking to",
        K::Interrupted => "connection interrupted by",
        K::Decode => "cannot read the response of",
        _ => "request failed to",
    }
}

/// The innermost cause (e.g. "Connection refused (os error 111)"), scrubbed.
fn root_cause(err: &(dyn std::error::Error + 'static)) -> String {
    let mut last = err;
    while let Some(next) = last.source() {
        last = next;
    }
    crate::util::redact::scrub(&last.to_string())
}

/// The error text as a cause (object_store's errors are not `'static`-friendly
/// once classified; the text is what users need).
fn err_box(text: &str) -> std::io::Error {
    std::io::Error::other(text.to_owned())
}

/// The first cause of type `T` in `err`'s chain.
fn find_cause<'a, T: std::error::Error + 'static>(
    err: &'a (dyn std::error::Error + 'static),
) -> Option<&'a T> {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = current {
        if let Some(t) = e.downcast_ref::<T>() {
            return Some(t);
        }
        current = e.source();
    }
    None
}

/// One bucket for the staging server's object-store backend (`stage serve --store
/// s3://…`), configured exactly as the S3 source configures a bucket (credentials,
/// endpoint, region, addressing from [`S3Settings`]), but with object_store's own
/// retries on: no engine above it retries.
pub(crate) struct StoreBucket(Bucket);

impl StoreBucket {
    /// Resolves `bucket` and builds its client; otherwise every problem found.
    pub(crate) fn new(
        settings: &S3Settings,
        client: &reqwest::Client,
        bucket: &str,
        retry: &RetryConfig,
    ) -> Result<StoreBucket, Vec<String>> {
        let config = settings.resolve(bucket)?;
        let store = build_retrying(&config, client, Some(retry)).map_err(|e| {
            vec![format!(
                "bucket '{bucket}': {}",
                crate::util::redact::error_chain(&e)
            )]
        })?;
        Ok(StoreBucket(Bucket { store, config }))
    }

    /// The bucket's client.
    pub(crate) fn store(&self) -> Arc<dyn ObjectStore> {
        Arc::new(self.0.store.clone())
    }

    /// Where the bucket is and how requests to it are signed (names, never values).
    pub(crate) fn describe(&self) -> String {
        let c = &self.0.config;
        format!(
            "endpoint {}, region {}, credentials from {}",
            c.shown_endpoint, c.region, c.credential_source
        )
    }

    /// Gets the credentials once, so that a broken credential source is reported
    /// as such rather than as the endpoint's refusal.
    pub(crate) async fn check_credentials(&self, uri: &Url) -> Result<(), SourceError> {
        credentials(&self.0, uri).await
    }

    /// What `err`, met on `uri`, means, worded as `fetch` words it (redacted).
    pub(crate) fn explain(&self, uri: &Url, err: object_store::Error) -> SourceError {
        classify(&self.0, uri, err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locate_splits_bucket_and_key() {
        let (b, k) = locate(&Url::parse("s3a://my-bucket/dir/a%20b.jar").unwrap()).unwrap();
        assert_eq!((b.as_str(), k.as_ref()), ("my-bucket", "dir/a b.jar"));
        for (uri, why) in [
            ("s3://b/", "names a bucket"),
            ("s3:///k.jar", "no bucket"),
            ("s3://ak:sk@b/k.jar", "holds credentials"),
            ("s3://b:9000/k.jar", "has a port"),
            ("s3://b/k.jar?x=1", "has a query"),
            ("s3://b/a//k.jar", "not a usable S3 key"),
        ] {
            let e = locate(&Url::parse(uri).unwrap()).unwrap_err();
            assert!(e.contains(why), "{uri}: {e}");
            assert!(!e.contains("sk@"), "{e}");
        }
    }

    #[test]
    fn error_text_parsing() {
        let t = "Server returned non-2xx status code: 404 Not Found: <?xml version=\"1.0\"?><Error><Code>NoSuchBucket</Code><Message>The specified bucket does not exist</Message></Error>";
        assert_eq!(s3_code(t), Some("NoSuchBucket"));
        assert_eq!(status_of(t), Some(404));
        assert_eq!(detail(t), "The specified bucket does not exist");
        assert_eq!(status_of("nothing"), None);
    }
}
