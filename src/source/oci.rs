//! `oci://` layers: each artifact is one blob of a registry, named internally
//! `oci://registry/repository@sha256:<layer digest>/<title>` once the reference
//! was resolved before the plan (see `cmd::oci`). Blobs are content-addressed:
//! the engine verifies every byte against the layer digest (the artifact's pin).

use std::sync::Arc;

use async_trait::async_trait;
use futures_util::StreamExt;
use reqwest::header::{self, HeaderMap, HeaderValue};
use reqwest::{Method, StatusCode};
use url::Url;

use super::{Body, FaultKind, Meta, OpenRequest, Probe, Source, SourceError};
use crate::oci::client::{status_error, transport_error};
use crate::oci::Registry;

/// Fetches layer blobs through the run's one [`Registry`] client.
pub(crate) struct OciSource {
    registry: Arc<Registry>,
    /// What `check` shows: each registry's scheme and credential, each
    /// reference's resolution.
    lines: Vec<String>,
    /// Each layer's size as its manifest declares it, by digest.
    sizes: std::collections::HashMap<String, u64>,
}

/// A blob as the internal URI names it.
struct Blob<'a> {
    registry: String,
    repo: &'a str,
    digest: &'a str,
}

impl OciSource {
    pub(crate) fn new(
        registry: Arc<Registry>,
        lines: Vec<String>,
        sizes: std::collections::HashMap<String, u64>,
    ) -> Self {
        OciSource {
            registry,
            lines,
            sizes,
        }
    }

    /// The size the registry announces against the manifest's: another size
    /// is an integrity failure; none announced, the manifest's bounds the body.
    fn sized(&self, blob: &Blob<'_>, announced: Option<u64>) -> Result<Option<u64>, SourceError> {
        let declared = self.sizes.get(blob.digest).copied();
        match (announced, declared) {
            (Some(got), Some(want)) if got != want => Err(SourceError::new(
                FaultKind::Integrity,
                format!(
                    "{}: the registry serves {got} bytes, the manifest declares {want}",
                    Self::shown(blob)
                ),
            )),
            (Some(got), _) => Ok(Some(got)),
            (None, declared) => Ok(declared),
        }
    }

    fn blob<'a>(&self, uri: &'a Url) -> Result<Blob<'a>, SourceError> {
        let bad = || {
            SourceError::new(
                FaultKind::Refused,
                format!("{uri} does not name a resolved OCI layer"),
            )
        };
        let host = uri.host_str().ok_or_else(bad)?;
        let registry = match uri.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_owned(),
        };
        let (repo, rest) = uri
            .path()
            .trim_start_matches('/')
            .split_once('@')
            .ok_or_else(bad)?;
        let digest = rest.split('/').next().ok_or_else(bad)?;
        Ok(Blob {
            registry,
            repo,
            digest,
        })
    }

    fn shown(blob: &Blob<'_>) -> String {
        format!("oci://{}/{}@{}", blob.registry, blob.repo, blob.digest)
    }
}

#[async_trait]
impl Source for OciSource {
    async fn open(&self, uri: &Url, req: &OpenRequest) -> Result<Body, SourceError> {
        let blob = self.blob(uri)?;
        let shown = Self::shown(&blob);
        let mut extra = HeaderMap::new();
        if let Some(range) = req.range_header() {
            extra.insert(header::RANGE, HeaderValue::from_str(&range).expect("ascii"));
        }
        let get = |extra| {
            self.registry
                .blob(Method::GET, &blob.registry, blob.repo, blob.digest, extra)
        };
        let mut response = get(extra).await?;
        if response.status() == StatusCode::RANGE_NOT_SATISFIABLE && req.offset > 0 {
            response = get(HeaderMap::new()).await?;
        }
        let status = response.status();
        let size = response
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        let mut meta = Meta {
            size: size.filter(|_| status == StatusCode::OK),
            validator: Some(blob.digest.to_owned()),
            ranges: true,
        };
        let offset = match status {
            StatusCode::OK => 0,
            StatusCode::PARTIAL_CONTENT => {
                let (start, total) = super::http::content_range(&response).ok_or_else(|| {
                    SourceError::new(
                        FaultKind::Refused,
                        format!("{shown} answered 206 without a valid Content-Range"),
                    )
                })?;
                meta.size = total;
                start
            }
            _ => {
                return Err(status_error(
                    &shown,
                    "blob",
                    &response,
                    self.registry.auth_file(),
                ))
            }
        };
        meta.size = self.sized(&blob, meta.size)?;
        let stream = response
            .bytes_stream()
            .map(move |chunk| chunk.map_err(|e| transport_error(&shown, e)));
        Ok(Body {
            meta,
            offset,
            stream: stream.boxed(),
        })
    }

    async fn probe(&self, uri: &Url) -> Result<Probe, SourceError> {
        let blob = self.blob(uri)?;
        let response = self
            .registry
            .blob(
                Method::HEAD,
                &blob.registry,
                blob.repo,
                blob.digest,
                HeaderMap::new(),
            )
            .await?;
        let status = response.status();
        if !status.is_success() {
            return Err(status_error(
                &Self::shown(&blob),
                "blob",
                &response,
                self.registry.auth_file(),
            ));
        }
        let size = response
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        let size = self.sized(&blob, size)?;
        Ok(Probe {
            meta: Meta {
                size,
                validator: Some(blob.digest.to_owned()),
                ranges: true,
            },
            status: status.to_string(),
            redirected_to: None,
        })
    }

    fn parallel_ranges(&self) -> bool {
        true
    }

    fn describe(&self) -> Vec<String> {
        self.lines.clone()
    }
}
