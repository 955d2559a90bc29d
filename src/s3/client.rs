//! The S3 client both the `s3://` source and the staging server's S3 store use:
//! where an `s3://` URI points, one object_store client per bucket configured from
//! [`super::settings`] (credentials checked before use), and what an S3 error
//! means ([`classify`]: the kind of fault, worded for users).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey};
use object_store::client::HttpError;
use object_store::path::Path as KeyPath;
use object_store::{ObjectStore, RetryConfig};
use url::Url;

use super::secret_dir;
use super::settings::{self, BucketConfig, Credentials, S3Settings};
use crate::cloud::{find_cause, root_cause, status_of, tag, transport_kind, Traced};
use crate::fault::{FaultKind, SourceError};

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
pub(crate) struct Bucket {
    pub store: AmazonS3,
    pub config: BucketConfig,
    /// The region S3 last named in an `x-amz-bucket-region` header (on a
    /// redirect or a refusal: where the bucket really is).
    seen_region: Arc<Mutex<Option<String>>>,
    /// A final failure of the credential source (its kind, the message after the
    /// URI, the hint): every later artifact of the bucket fails with it at once
    /// instead of waiting out the same time limit again.
    credential_failure: Mutex<Option<(FaultKind, String, Option<&'static str>)>>,
}

impl Bucket {
    /// The bucket's store, its credentials checked before use.
    pub(crate) fn open(
        config: BucketConfig,
        client: &reqwest::Client,
    ) -> object_store::Result<Bucket> {
        Self::open_retrying(config, client, None)
    }

    /// [`Bucket::open`], with object_store's own retries when `retry` is given.
    fn open_retrying(
        config: BucketConfig,
        client: &reqwest::Client,
        retry: Option<&RetryConfig>,
    ) -> object_store::Result<Bucket> {
        let seen_region = Arc::new(Mutex::new(None));
        let seen = seen_region.clone();
        let observer: crate::cloud::Observer = Arc::new(move |headers| {
            let region = headers
                .get("x-amz-bucket-region")
                .and_then(|v| v.to_str().ok());
            if let Some(region) = region {
                *seen.lock().expect("lock") = Some(region.to_owned());
            }
        });
        let connector = Traced::new(client, Some(observer));
        let store = build(&config, &connector, retry)?;
        Ok(Bucket {
            store,
            config,
            seen_region,
            credential_failure: Mutex::new(None),
        })
    }

    /// The region S3 said the bucket is in, when it is not the configured one.
    fn other_region(&self) -> Option<String> {
        let seen = self.seen_region.lock().expect("lock").clone()?;
        (seen != self.config.region).then_some(seen)
    }
}

/// The bucket's store, its credentials checked before use (a value that cannot
/// go into a header would make object_store panic); object_store's own retries
/// when `retry` is given.
fn build(
    c: &BucketConfig,
    connector: &Traced,
    retry: Option<&RetryConfig>,
) -> object_store::Result<AmazonS3> {
    let configured = || {
        configure(c, connector).map(|b| match retry {
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

fn configure(c: &BucketConfig, connector: &Traced) -> object_store::Result<AmazonS3Builder> {
    let mut b = AmazonS3Builder::new()
        .with_bucket_name(&c.bucket)
        .with_region(&c.region)
        .with_virtual_hosted_style_request(c.virtual_hosted)
        .with_allow_http(c.allow_http)
        .with_retry(crate::cloud::no_retries())
        .with_http_connector(connector.clone());
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
        Credentials::Process { command } => {
            b.with_credentials(Arc::new(super::process::Process::new(command)))
        }
        Credentials::Anonymous => b.with_skip_signature(true),
    };
    Ok(b)
}

/// How long a metadata service (EC2 instance metadata, the EKS Pod Identity
/// agent, the ECS task role endpoint) may take to give credentials: it runs on
/// the node and answers in milliseconds, so one that does not is unreachable
/// (an IMDSv2 hop limit of 1 drops its answers inside pods; a NetworkPolicy
/// drops the packets), not slow.
pub(crate) const METADATA_TIMEOUT: Duration = Duration::from_secs(5);
/// How long STS may take to exchange a web identity token (a remote service).
pub(crate) const STS_TIMEOUT: Duration = Duration::from_secs(15);

/// How long `c` may take to give credentials, and what to do when it does not.
fn time_limit(c: &Credentials) -> (Duration, &'static str) {
    match c {
        Credentials::Instance { .. } => (
            METADATA_TIMEOUT,
            "when nothing answers inside a pod, IMDSv2 needs the instance's metadata hop limit at 2 or more (aws ec2 modify-instance-metadata-options --http-put-response-hop-limit 2), and a NetworkPolicy may block 169.254.169.254; or give credentials: IRSA, EKS Pod Identity, --s3-credentials-dir or spark.hadoop.fs.s3a.access.key/secret.key",
        ),
        Credentials::PodIdentity { .. } => (
            METADATA_TIMEOUT,
            "check the eks-pod-identity-agent DaemonSet on this node and that no NetworkPolicy blocks 169.254.170.23",
        ),
        Credentials::EcsTask { .. } => (
            METADATA_TIMEOUT,
            "the ECS agent answers at 169.254.170.2; check the task's network mode and security groups",
        ),
        Credentials::WebIdentity { .. } => (
            STS_TIMEOUT,
            "check that STS is reachable from the pod (AWS_ENDPOINT_URL_STS for a regional or private endpoint, HTTPS_PROXY)",
        ),
        Credentials::Process { .. } => (
            super::process::TIME_LIMIT,
            "the profile's credential_process did not finish: run it by hand to see what it waits for (a login prompt?)",
        ),
        Credentials::Dir(_) | Credentials::Static { .. } | Credentials::Anonymous => {
            (METADATA_TIMEOUT, "")
        }
    }
}

/// Gets the bucket's credentials (cached by object_store for temporary ones), so a
/// failure of the credential source is reported as such, not as the endpoint's;
/// each source has its own time limit ([`METADATA_TIMEOUT`], [`STS_TIMEOUT`]). A
/// final failure is remembered for the bucket: the next artifacts fail at once.
pub(crate) async fn credentials(b: &Bucket, uri: &Url) -> Result<(), SourceError> {
    // Unsigned requests need none (asking the store would walk the default chain,
    // the instance metadata service included).
    if matches!(b.config.credentials, Credentials::Anonymous) {
        return Ok(());
    }
    let shown = crate::util::redact::redact_url(uri.as_str());
    let remembered = b.credential_failure.lock().expect("lock").clone();
    if let Some((kind, message, hint)) = remembered {
        let e = SourceError::new(kind, format!("{shown}: {message}"));
        return Err(match hint {
            Some(hint) => e.with_hint(hint),
            None => e,
        });
    }
    let result = fresh_credentials(b, uri).await;
    // Files (a Secret directory, keys) are read again each time: a rotated Secret
    // is the fix. A credential service that failed for good stays failed.
    let service = matches!(
        b.config.credentials,
        Credentials::Instance { .. }
            | Credentials::PodIdentity { .. }
            | Credentials::EcsTask { .. }
            | Credentials::WebIdentity { .. }
            | Credentials::Process { .. }
    );
    if let Err(e) = &result {
        if service && !e.is_transient() {
            let chain = crate::util::redact::error_chain(e);
            let message = chain
                .strip_prefix(&format!("{shown}: "))
                .unwrap_or(&chain)
                .to_owned();
            *b.credential_failure.lock().expect("lock") = Some((e.kind, message, e.hint));
        }
    }
    result
}

/// [`credentials`], asked of the source.
async fn fresh_credentials(b: &Bucket, uri: &Url) -> Result<(), SourceError> {
    let (limit, hint) = time_limit(&b.config.credentials);
    let shown = crate::util::redact::redact_url(uri.as_str());
    let source = &b.config.credential_source;
    let asked = tokio::time::timeout(limit, b.store.credentials().get_credential()).await;
    let Ok(got) = asked else {
        // A remote STS may be slow for a while; a metadata service on the node
        // that does not answer will not.
        let kind = match b.config.credentials {
            Credentials::WebIdentity { .. } => FaultKind::Transient,
            _ => FaultKind::Auth,
        };
        let e = SourceError::new(
            kind,
            format!(
                "{shown}: cannot get S3 credentials from {source}: none within {} (no answer, or an answer that never completed: -v shows the requests)",
                crate::util::duration::format_duration(limit)
            ),
        );
        return Err(if hint.is_empty() {
            e
        } else {
            e.with_hint(hint)
        });
    };
    let Err(err) = got else {
        return Ok(());
    };
    if let Some(e) = find_cause::<secret_dir::SecretDirError>(&err) {
        return Err(SourceError::new(FaultKind::Auth, format!("{shown}: {e}")).with_hint(
            "the Secret mounted at --s3-credentials-dir needs the keys access-key and secret-key",
        ));
    }
    if let Some(e) = find_cause::<super::process::ProcessError>(&err) {
        return Err(SourceError::new(
            FaultKind::Auth,
            format!("{shown}: cannot get S3 credentials from {source}: {e}"),
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
        let failed = match http.kind() {
            K::Connect => "cannot connect".to_owned(),
            K::Timeout => "no connection within --connect-timeout".to_owned(),
            _ => transport_kind(http).trim_end_matches(" to").to_owned(),
        };
        let e = SourceError::new(FaultKind::Transient, format!("{what}: {failed}: {root}"));
        return Err(if http.kind() == K::Connect && crate::net::proxied() {
            e.with_hint(crate::net::PROXY_HINT)
        } else if !hint.is_empty() && matches!(http.kind(), K::Connect | K::Timeout) {
            e.with_hint(hint)
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

/// Turns an object_store error into what the engine understands: each case in
/// turn, the first that applies wins.
pub(crate) fn classify(b: &Bucket, uri: &Url, err: object_store::Error) -> SourceError {
    let text = crate::util::redact::error_chain(&err);
    let failure = S3Failure {
        bucket: b,
        display_uri: crate::util::redact::redact_url(uri.as_str()),
        code: s3_code(&text).map(str::to_owned),
        status: status_of(&text),
        text,
        err: &err,
    };
    failure
        .secret_dir()
        .or_else(|| failure.not_found())
        .or_else(|| failure.denied())
        .or_else(|| failure.wrong_region())
        .or_else(|| failure.transport())
        .unwrap_or_else(|| failure.by_status())
}

/// An S3 error and what is known of it: the S3 error code and HTTP status in its
/// text, the bucket it was met on.
struct S3Failure<'a> {
    bucket: &'a Bucket,
    display_uri: String,
    text: String,
    code: Option<String>,
    status: Option<u16>,
    err: &'a object_store::Error,
}

impl S3Failure<'_> {
    /// A known S3 error code says it all; otherwise the whole error text helps.
    fn cause(&self, kind: FaultKind, message: String) -> SourceError {
        let e = SourceError::new(kind, message);
        if self.code.is_some() {
            e
        } else {
            e.with_source(err_box(&self.text))
        }
    }

    /// The mounted credentials Secret could not be read.
    fn secret_dir(&self) -> Option<SourceError> {
        let e = find_cause::<secret_dir::SecretDirError>(self.err)?;
        Some(
            SourceError::new(FaultKind::Auth, format!("{}: {e}", self.display_uri)).with_hint(
                "the Secret mounted at --s3-credentials-dir needs the keys access-key and secret-key",
            ),
        )
    }

    /// 404: no such bucket, or no such object.
    fn not_found(&self) -> Option<SourceError> {
        let not_found =
            matches!(self.err, object_store::Error::NotFound { .. }) || self.status == Some(404);
        if !not_found {
            return None;
        }
        let (shown, bucket, endpoint) = (
            &self.display_uri,
            &self.bucket.config.bucket,
            &self.bucket.config.shown_endpoint,
        );
        let message = match self.code.as_deref() {
            Some("NoSuchBucket") => {
                format!("{shown}: bucket '{bucket}' does not exist at {endpoint} (NoSuchBucket)")
            }
            Some("NoSuchKey") => {
                format!("{shown}: no such object in bucket '{bucket}' (NoSuchKey)")
            }
            _ => format!("{shown}: not found (HTTP 404 from {endpoint})"),
        };
        Some(SourceError::new(FaultKind::NotFound, message))
    }

    /// 401/403 or an S3 code that means the credentials are wrong.
    fn denied(&self) -> Option<SourceError> {
        let denied = matches!(
            self.err,
            object_store::Error::PermissionDenied { .. }
                | object_store::Error::Unauthenticated { .. }
        ) || matches!(self.status, Some(401 | 403))
            || self
                .code
                .as_deref()
                .is_some_and(|c| AUTH_CODES.contains(&c));
        if !denied {
            return None;
        }
        let what = match self.code.as_deref() {
            Some("InvalidAccessKeyId") => "the server does not know the access key id",
            Some("SignatureDoesNotMatch") => {
                "the signature does not match: the secret key does not belong to this access key id"
            }
            Some("AccessDenied") => "access denied",
            Some("ExpiredToken") | Some("TokenRefreshRequired") => "the session token has expired",
            Some("InvalidToken") => "the session token is not valid",
            _ => "refused",
        };
        let code = self
            .code
            .as_deref()
            .map(|c| format!(" ({c})"))
            .unwrap_or_default();
        let message = format!(
            "{}: {what}{code}; credentials from {}",
            self.display_uri, self.bucket.config.credential_source
        );
        Some(
            self.cause(FaultKind::Auth, message).with_hint(
                "the first credential source set is used (see the S3 credential chain); make sure it is the one meant, and that it may read the object",
            ),
        )
    }

    /// The bucket lives in another region (or behind another endpoint).
    fn wrong_region(&self) -> Option<SourceError> {
        let wrong = matches!(
            self.code.as_deref(),
            Some("PermanentRedirect" | "AuthorizationHeaderMalformed")
        ) || self.status == Some(301)
            || self.text.contains("incorrectly configured region");
        if !wrong {
            return None;
        }
        let config = &self.bucket.config;
        // Where S3 says the bucket is: the x-amz-bucket-region header of its
        // answer, else the <Region> of the error body.
        let named = self.bucket.other_region().or_else(|| {
            tag(&self.text, "Region")
                .filter(|r| *r != config.region)
                .map(str::to_owned)
        });
        let Some(region) = named else {
            let message = format!(
                "{}: bucket '{}' is not in region '{}' or not at {}: {}",
                self.display_uri,
                config.bucket,
                config.region,
                config.shown_endpoint,
                detail(&self.text)
            );
            return Some(self.cause(FaultKind::Refused, message).with_hint(
                "set the bucket's region with AWS_REGION or spark.hadoop.fs.s3a.endpoint.region",
            ));
        };
        // Suggest the setting that decides: the one the region came from.
        let origin = &config.region_origin;
        let fix = if origin.starts_with("spark.hadoop.fs.s3a.") {
            let key = origin.split_whitespace().next().unwrap_or(origin);
            format!("set {key}={region}")
        } else if origin == "AWS_REGION" || origin == "AWS_DEFAULT_REGION" {
            format!("set {origin}={region}")
        } else {
            format!(
                "set AWS_REGION={region} or spark.hadoop.fs.s3a.bucket.{}.endpoint.region={region}",
                config.bucket
            )
        };
        let message = format!(
            "{}: bucket '{}' is in region '{region}' (so S3 says), not in '{}' ({origin}); {fix}",
            self.display_uri, config.bucket, config.region
        );
        // The message says it all: not object_store's "redirect without LOCATION".
        Some(SourceError::new(FaultKind::Refused, message))
    }

    /// No answer: TLS (final), else a connection fault (retried), naming the proxy
    /// when one is configured.
    fn transport(&self) -> Option<SourceError> {
        let http = find_cause::<HttpError>(self.err)?;
        let endpoint = &self.bucket.config.shown_endpoint;
        if crate::net::has_tls_cause(http) {
            let message = format!(
                "{}: TLS failure talking to {endpoint}: {}",
                self.display_uri, self.text
            );
            let hint = if crate::net::is_plain_http_answer(http) {
                "the endpoint answered in plain HTTP, not TLS: give it as http://… (with AWS_ALLOW_HTTP=true, or spark.hadoop.fs.s3a.connection.ssl.enabled=false)"
            } else {
                "add the endpoint's CA with --ca-cert or SSL_CERT_FILE"
            };
            return Some(self.cause(FaultKind::Tls, message).with_hint(hint));
        }
        let e = SourceError::new(
            FaultKind::Transient,
            format!(
                "{}: {} {endpoint}: {}",
                self.display_uri,
                transport_kind(http),
                root_cause(http)
            ),
        );
        let through_proxy =
            http.kind() == object_store::client::HttpErrorKind::Connect && crate::net::proxied();
        Some(if through_proxy {
            e.with_hint(crate::net::PROXY_HINT)
        } else {
            e
        })
    }

    /// Anything else: 5xx, 408 and 429 are retried, the rest is final.
    fn by_status(&self) -> SourceError {
        match self.status {
            Some(s) if s >= 500 || s == 408 || s == 429 => self.cause(
                FaultKind::Transient,
                format!(
                    "{}: {} answered {s}{}: {}",
                    self.display_uri,
                    self.bucket.config.shown_endpoint,
                    self.code
                        .as_deref()
                        .map(|c| format!(" {c}"))
                        .unwrap_or_default(),
                    detail(&self.text)
                ),
            ),
            _ => self.cause(
                FaultKind::Refused,
                format!(
                    "{}: {}{}",
                    self.display_uri,
                    detail(&self.text),
                    self.code
                        .as_deref()
                        .map(|c| format!(" ({c})"))
                        .unwrap_or_default()
                ),
            ),
        }
    }
}

/// The error text as a cause (object_store's errors are not `'static`-friendly
/// once classified; the text is what users need).
fn err_box(text: &str) -> std::io::Error {
    std::io::Error::other(text.to_owned())
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
        let bucket = Bucket::open_retrying(config, client, Some(retry)).map_err(|e| {
            vec![format!(
                "bucket '{bucket}': {}",
                crate::util::redact::error_chain(&e)
            )]
        })?;
        Ok(StoreBucket(bucket))
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
