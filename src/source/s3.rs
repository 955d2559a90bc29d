//! `s3://` and `s3a://` through object_store: one store per bucket (each bucket
//! may have its own endpoint, region and credentials, as S3A allows), sharing
//! the HTTP client of the HTTP source (same trust roots, proxies, pool; no
//! whole-request timeout: the engine's stall timeout rules the body).
//!
//! object_store's own retries are off: the engine retries, re-reading rotated
//! credentials and resuming with ranged, ETag-checked requests.

use std::collections::BTreeMap;

use async_trait::async_trait;
use futures_util::{StreamExt, TryStreamExt};
use object_store::client::HttpError;
use object_store::path::Path as KeyPath;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt};
use url::Url;

use super::{Body, FaultKind, Meta, OpenRequest, Probe, Source, SourceError};
use crate::s3::client::locate;
use crate::s3::client::{classify, credentials, find_cause, root_cause, Bucket};
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
        let mut problems = Vec::new();
        let mut out = BTreeMap::new();
        for bucket in buckets {
            if out.contains_key(bucket) {
                continue;
            }
            match settings.resolve(bucket) {
                Ok(config) => match Bucket::open(config, client) {
                    Ok(opened) => {
                        out.insert(bucket.to_owned(), opened);
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
