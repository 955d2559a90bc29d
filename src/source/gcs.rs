//! `gs://bucket/path` through object_store's GCS backend (the XML API): one
//! store per bucket, configured by [`crate::cloud::gcs`], sharing the HTTP
//! source's client. object_store's own retries are off: the engine retries and
//! resumes with ranged, ETag-checked requests.

use std::collections::BTreeMap;

use async_trait::async_trait;
use object_store::path::Path as KeyPath;
use url::Url;

use super::{Body, FaultKind, OpenRequest, Probe, Source, SourceError};
use crate::cloud::gcs::{GcsBucket, GcsCredentials, GcsSettings};

#[derive(Default)]
pub(crate) struct GcsSource {
    buckets: BTreeMap<String, GcsBucket>,
}

/// Where a `gs://bucket/key` URI points.
pub(crate) fn locate(uri: &Url) -> Result<(String, KeyPath), String> {
    let shown = crate::util::redact::redact_url(uri.as_str());
    let bucket = uri.host_str().unwrap_or_default();
    if bucket.is_empty() {
        return Err(format!(
            "{shown} has no bucket (write gs://bucket/path/to/file)"
        ));
    }
    if !bucket_name_ok(bucket) {
        return Err(format!(
            "{shown}: '{bucket}' is not a bucket name (3 to 63 lower-case letters, digits, '-', '_' and '.', starting and ending with a letter or digit; not an IP address, not starting with goog, not containing google)"
        ));
    }
    if !uri.username().is_empty() || uri.password().is_some() || uri.port().is_some() {
        return Err(format!(
            "{shown}: a gs:// URI is gs://bucket/path; credentials are given with spark.hadoop.fs.gs.auth.service.account.json.keyfile or GOOGLE_APPLICATION_CREDENTIALS, an endpoint with STORAGE_EMULATOR_HOST"
        ));
    }
    if uri.query().is_some() {
        return Err(format!(
            "{shown} has a query ('?'); object names with '?' must be percent-encoded (%3F)"
        ));
    }
    let key = uri.path().trim_start_matches('/');
    if key.is_empty() {
        return Err(format!("{shown} names a bucket, not an object"));
    }
    let key = KeyPath::from_url_path(key)
        .map_err(|e| format!("{shown} is not a usable object name: {e}"))?;
    Ok((bucket.to_owned(), key))
}

/// Google's bucket naming rules (names with dots may be up to 222 characters,
/// each dot-separated part at most 63).
fn bucket_name_ok(name: &str) -> bool {
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let ip_like = name.split('.').count() == 4
        && name
            .split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    (3..=222).contains(&name.len())
        && name
            .split('.')
            .all(|part| !part.is_empty() && part.len() <= 63)
        && !name.starts_with("goog")
        && !name.contains("google")
        && !name.contains("g00gle")
        && !ip_like
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-_.".contains(c))
        && edge(name.chars().next())
        && edge(name.chars().last())
}

impl GcsSource {
    /// Configures every bucket the plan names; all problems are returned together.
    pub(crate) fn new<'a>(
        settings: &GcsSettings,
        client: &reqwest::Client,
        buckets: impl IntoIterator<Item = &'a str>,
    ) -> Result<Self, Vec<String>> {
        let items = buckets.into_iter().map(|b| (b.to_owned(), b));
        let buckets = super::object::configure_each(items, "gs bucket", |bucket| {
            let config = settings.resolve(bucket)?;
            let source = config.credential_source.clone();
            GcsBucket::open(config, client).map_err(|e| {
                vec![format!(
                    "cannot use {source}: {}",
                    crate::util::redact::error_chain(&e)
                )]
            })
        })?;
        Ok(GcsSource { buckets })
    }

    fn bucket(&self, uri: &Url) -> Result<(&GcsBucket, KeyPath, String), SourceError> {
        let (bucket, key) = locate(uri).map_err(|e| SourceError::new(FaultKind::Refused, e))?;
        let b = self.buckets.get(&bucket).ok_or_else(|| {
            SourceError::new(
                FaultKind::Refused,
                format!("gs bucket '{bucket}' was not configured"),
            )
        })?;
        Ok((b, key, crate::util::redact::redact_url(uri.as_str())))
    }
}

#[async_trait]
impl Source for GcsSource {
    async fn open(&self, uri: &Url, req: &OpenRequest) -> Result<Body, SourceError> {
        let (b, key, shown) = self.bucket(uri)?;
        b.credentials(&shown).await?;
        let classify = |e| crate::cloud::classify(&b.place(&shown), &e);
        super::object::open(&b.store, &key, uri, req, classify).await
    }

    async fn probe(&self, uri: &Url) -> Result<Probe, SourceError> {
        let (b, key, shown) = self.bucket(uri)?;
        b.credentials(&shown).await?;
        let classify = |e| crate::cloud::classify(&b.place(&shown), &e);
        super::object::probe(&b.store, &key, classify).await
    }

    fn parallel_ranges(&self) -> bool {
        true
    }

    fn credentialed(&self, uri: &Url) -> bool {
        self.bucket(uri).map_or(true, |(b, _, _)| {
            b.config.credentials != GcsCredentials::Anonymous
        })
    }

    /// Every configured bucket: its credentials and endpoint, and where each came from.
    fn describe(&self) -> Vec<String> {
        self.buckets
            .values()
            .map(|b| {
                let c = &b.config;
                format!(
                    "  gs bucket        {}\n    credentials    {}\n    endpoint       {} ({})",
                    c.bucket, c.credential_source, c.endpoint, c.endpoint_origin
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_names_follow_googles_rules() {
        for good in ["bk1", "my-spark_libs", "a.b.c", "0ab"] {
            assert!(bucket_name_ok(good), "{good}");
        }
        for bad in [
            "BK",
            "ab",
            "-ab",
            "ab-",
            "a b",
            &"x".repeat(64),
            "a..b",
            "goog-x",
            "my-google-jars",
            "192.168.1.1",
        ] {
            assert!(!bucket_name_ok(bad), "{bad}");
        }
        assert!(locate(&Url::parse("gs://BK/a.jar").unwrap()).is_err());
    }
}
