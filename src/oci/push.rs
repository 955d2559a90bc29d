//! Pushing to a registry (Registry API v2, as `oras push` and `docker push`
//! do): a blob is skipped when the repository has it, else uploaded in one
//! `POST` + `PUT` (monolithic upload); manifests and indexes are `PUT` by tag
//! or digest, and the digest the registry computed is checked against ours.

use reqwest::header::{self, HeaderMap, HeaderValue};
use reqwest::{Method, StatusCode};
use url::Url;

use super::client::{status_error, Body, Registry};
use super::image::Document;
use crate::fault::{FaultKind, SourceError};
use crate::util::redact::{redact_url, scrub};

impl Registry {
    /// Whether `repo` of `registry` holds blob `digest`.
    pub(crate) async fn has_blob(
        &self,
        registry: &str,
        repo: &str,
        digest: &str,
    ) -> Result<bool, SourceError> {
        let response = self
            .blob(Method::HEAD, registry, repo, digest, HeaderMap::new())
            .await?;
        match response.status() {
            s if s.is_success() => Ok(true),
            StatusCode::NOT_FOUND => Ok(false),
            _ => Err(status_error(
                &format!("oci://{registry}/{repo}@{digest}"),
                "blob",
                &response,
                self.auth_file(),
            )),
        }
    }

    /// Uploads blob `digest` of `size` bytes, which `body` makes, to `repo`.
    pub(crate) async fn push_blob(
        &self,
        registry: &str,
        repo: &str,
        (digest, size): (&str, u64),
        body: &Body<'_>,
    ) -> Result<(), SourceError> {
        let shown = format!("oci://{registry}/{repo}@{digest}");
        let start = self.url(registry, repo, "blobs/uploads/")?;
        let mut extra = HeaderMap::new();
        extra.insert(header::CONTENT_LENGTH, HeaderValue::from_static("0"));
        let empty = || reqwest::Body::from(Vec::new());
        let response = self
            .send_to(Method::POST, registry, repo, &start, extra, Some(&empty))
            .await?;
        if response.status() != StatusCode::ACCEPTED {
            return Err(status_error(
                &format!("{shown}: starting the upload"),
                "repository",
                &response,
                self.auth_file(),
            ));
        }
        let mut location = response
            .headers()
            .get(header::LOCATION)
            .and_then(|l| l.to_str().ok())
            .and_then(|l| start.join(l).ok())
            .filter(|u| same_origin(u, &start))
            .ok_or_else(|| {
                SourceError::new(
                    FaultKind::Refused,
                    format!("{shown}: the registry started an upload without a Location on its own host"),
                )
            })?;
        location.query_pairs_mut().append_pair("digest", digest);
        let mut extra = HeaderMap::new();
        extra.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/octet-stream"),
        );
        extra.insert(header::CONTENT_LENGTH, HeaderValue::from(size));
        let response = self
            .send_to(Method::PUT, registry, repo, &location, extra, Some(body))
            .await?;
        if response.status() != StatusCode::CREATED {
            return Err(status_error(
                &format!("{shown}: uploading"),
                "upload",
                &response,
                self.auth_file(),
            ));
        }
        Ok(())
    }

    /// PUTs `document` (a manifest or an index) as `reference` (a tag or its
    /// digest) of `repo`.
    pub(crate) async fn push_manifest(
        &self,
        registry: &str,
        repo: &str,
        reference: &str,
        document: &Document,
    ) -> Result<(), SourceError> {
        let shown = format!("oci://{registry}/{repo}:{reference}").replace(":sha256:", "@sha256:");
        let url = self.url(registry, repo, &format!("manifests/{reference}"))?;
        let mut extra = HeaderMap::new();
        extra.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(document.media_type),
        );
        let bytes = document.bytes.clone();
        let body = move || reqwest::Body::from(bytes.clone());
        let response = self
            .send_to(Method::PUT, registry, repo, &url, extra, Some(&body))
            .await?;
        if response.status() != StatusCode::CREATED {
            let mut error = status_error(&shown, "repository", &response, self.auth_file());
            if let Ok(text) = response.text().await {
                let text = text.trim();
                if !text.is_empty() {
                    error.message = format!("{}: {}", error.message, cut(text, 300));
                }
            }
            return Err(error);
        }
        let said = response
            .headers()
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok());
        if let Some(said) = said.filter(|d| *d != document.digest) {
            return Err(SourceError::new(
                FaultKind::Integrity,
                format!(
                    "{shown}: the registry stored the manifest as {said}, not {}",
                    document.digest
                ),
            ));
        }
        Ok(())
    }
}

fn same_origin(a: &Url, b: &Url) -> bool {
    a.scheme() == b.scheme()
        && a.host_str() == b.host_str()
        && a.port_or_known_default() == b.port_or_known_default()
}

/// At most `max` bytes of `text`, on a character boundary (a registry's error
/// body, shown with the status).
fn cut(text: &str, max: usize) -> String {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    scrub(&redact_url(&text[..end]))
}

/// A body streamed from the file at `path` (opened again each time it is sent).
pub(crate) fn file_body(path: std::path::PathBuf) -> impl Fn() -> reqwest::Body + Send + Sync {
    move || match std::fs::File::open(&path) {
        Ok(file) => reqwest::Body::wrap_stream(tokio_util::io::ReaderStream::with_capacity(
            tokio::fs::File::from_std(file),
            1 << 20,
        )),
        Err(e) => reqwest::Body::wrap_stream(futures_util::stream::once(async move {
            Err::<bytes::Bytes, _>(e)
        })),
    }
}
