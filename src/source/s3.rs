//! `s3://` and `s3a://` through object_store: one store per bucket (each bucket
//! may have its own endpoint, region and credentials, as S3A allows), sharing
//! the HTTP client of the HTTP source (same trust roots, proxies, pool; no
//! whole-request timeout: the engine's stall timeout rules the body).
//!
//! object_store's own retries are off: the engine retries, re-reading rotated
//! credentials and resuming with ranged, ETag-checked requests.

use std::collections::BTreeMap;

use async_trait::async_trait;
use object_store::path::Path as KeyPath;
use url::Url;

use super::{Body, FaultKind, OpenRequest, Probe, Source, SourceError};
use crate::s3::client::locate;
use crate::s3::client::{classify, credentials, Bucket};
use crate::s3::settings::S3Settings;

pub(crate) struct S3Source {
    buckets: BTreeMap<String, Bucket>,
}

impl S3Source {
    /// Configures every bucket the plan names; all problems are returned together.
    pub(crate) fn new<'a>(
        settings: &S3Settings,
        client: &reqwest::Client,
        buckets: impl IntoIterator<Item = &'a str>,
    ) -> Result<Self, Vec<String>> {
        let items = buckets.into_iter().map(|b| (b.to_owned(), b));
        let buckets = super::object::configure_each(items, "bucket", |bucket| {
            let config = settings.resolve(bucket)?;
            Bucket::open(config, client).map_err(|e| vec![crate::util::redact::error_chain(&e)])
        })?;
        Ok(S3Source { buckets })
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

#[async_trait]
impl Source for S3Source {
    async fn open(&self, uri: &Url, req: &OpenRequest) -> Result<Body, SourceError> {
        let (b, key) = self.bucket(uri)?;
        credentials(b, uri).await?;
        super::object::open(&b.store, &key, uri, req, |e| classify(b, uri, e)).await
    }

    fn parallel_ranges(&self) -> bool {
        true
    }

    /// Only a bucket read anonymously (S3A's anonymous provider) is fetched
    /// without credentials.
    fn credentialed(&self, uri: &Url) -> bool {
        self.bucket(uri).map_or(true, |(b, _)| {
            !matches!(
                b.config.credentials,
                crate::s3::settings::Credentials::Anonymous
            )
        })
    }

    /// Every configured bucket: its credentials, endpoint and region.
    fn describe(&self) -> Vec<String> {
        self.buckets
            .values()
            .map(|b| {
                let c = &b.config;
                let chain: String = c
                    .credential_chain
                    .iter()
                    .map(|line| format!("\n      {line}"))
                    .collect();
                format!(
                    "  s3 bucket        {}\n    credentials    {}\n    chain          the first source set is used:{chain}\n    endpoint       {}\n    region         {} ({})",
                    c.bucket, c.credential_source, c.shown_endpoint, c.region, c.region_origin
                )
            })
            .collect()
    }

    async fn probe(&self, uri: &Url) -> Result<Probe, SourceError> {
        let (b, key) = self.bucket(uri)?;
        credentials(b, uri).await?;
        super::object::probe(&b.store, &key, |e| classify(b, uri, e)).await
    }
}
