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

impl GcsSource {
    /// Configures every bucket the plan names; all problems are returned together.
    pub(crate) fn new<'a>(
        settings: &GcsSettings,
        client: &reqwest::Client,
        buckets: impl IntoIterator<Item = &'a str>,
    ) -> Result<Self, Vec<String>> {
        let mut problems = Vec::new();
        let mut out = BTreeMap::new();
        for bucket in buckets {
            if out.contains_key(bucket) {
                continue;
            }
            let opened = settings.resolve(bucket).and_then(|config| {
                GcsBucket::open(config, client)
                    .map_err(|e| vec![crate::util::redact::error_chain(&e)])
            });
            match opened {
                Ok(b) => {
                    out.insert(bucket.to_owned(), b);
                }
                Err(p) => {
                    problems.extend(p.into_iter().map(|p| format!("gs bucket '{bucket}': {p}")))
                }
            }
        }
        if problems.is_empty() {
            Ok(GcsSource { buckets: out })
        } else {
            Err(problems)
        }
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
        match super::object::head(&b.store, &key).await {
            Ok(probe) => Ok(probe),
            Err(e) => {
                let e = super::object::explain(&b.store, &key, e).await;
                Err(crate::cloud::classify(&b.place(&shown), &e))
            }
        }
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
