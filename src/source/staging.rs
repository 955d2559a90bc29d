//! `staging://<resourceId>`: a bundle on the resource staging server.
//!
//! The bundle is `GET <staging-uri>/api/v0/resources/<id>` with the resource secret
//! as a raw `Authorization` header, as the apache-spark-on-k8s init container sent
//! it (our server also takes `Bearer`); paths, the id syntax, the secret header and
//! the Secret layout are the wire contract of [`crate::stage::api`]. Transfers are plain HTTP(S) on a client of
//! its own (the staging server's CA files join the usual trust roots), so ranges,
//! resume with `If-Range` on the bundle's ETag (its sha256) and redirects behave as
//! for any HTTP URI; the secret goes only to the staging server's origin and only
//! with the bundle it belongs to. The plan gives each bundle its real URL (see
//! [`api::resource_url`]); this source knows which secret goes with which URL.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use reqwest::header::HeaderValue;
use url::Url;

use super::http::HttpSource;
use super::{Body, FaultKind, OpenRequest, Probe, Source, SourceError};
use crate::stage::api;

/// Reads a resource secret from its (mounted Secret) file: surrounding whitespace
/// (a trailing newline) is dropped; registered for redaction.
pub(crate) fn read_secret(path: &Path) -> Result<HeaderValue, String> {
    let raw = crate::util::fs::read_regular(path, 64 * 1024).map_err(|e| match e.kind() {
        std::io::ErrorKind::InvalidData => format!(
            "{} is larger than 64 KiB: not a resource secret",
            path.display()
        ),
        std::io::ErrorKind::InvalidInput => format!("{} is not a regular file", path.display()),
        _ => format!("cannot read {}: {e}", path.display()),
    })?;
    let text =
        String::from_utf8(raw).map_err(|_| format!("{} is not UTF-8 text", path.display()))?;
    crate::util::redact::register_secret(text.trim());
    secret_header(&text).map_err(|why| format!("{} {why}", path.display()))
}

/// The header a resource secret file's text sends: the text without surrounding
/// whitespace (a trailing newline); the error says what is wrong with it.
pub(crate) fn secret_header(text: &str) -> Result<HeaderValue, &'static str> {
    // A byte-order mark some editors write is not part of the secret (as for
    // token files).
    let secret = text.strip_prefix('\u{feff}').unwrap_or(text).trim();
    if secret.is_empty() {
        return Err("is empty");
    }
    api::secret_header(secret).map_err(|_| "holds characters that cannot be sent in an HTTP header")
}

/// One bundle as the source knows it.
#[derive(Debug, Clone)]
pub(crate) struct Bundle {
    /// `staging://<id>`, as declared.
    pub display_uri: String,
    /// Where its secret was read from, and who named that file.
    pub secret_file: PathBuf,
    pub secret_origin: String,
}

/// Fetches bundles from the staging server, each with its own secret.
#[derive(Default)]
pub(crate) struct StagingSource {
    base: Option<Url>,
    /// Who named the server (for `check`).
    origin: String,
    by_url: HashMap<Url, (HttpSource, Bundle)>,
    ca_files: Vec<PathBuf>,
}

impl StagingSource {
    /// A source for the server at `base` using `http` (a client trusting the staging
    /// CA files too).
    pub(crate) fn new(base: Url, origin: String, ca_files: Vec<PathBuf>) -> Self {
        StagingSource {
            base: Some(base),
            origin,
            by_url: HashMap::new(),
            ca_files,
        }
    }

    /// Adds the bundle at `url`, sent with `secret`; false if `url` is already
    /// there (one bundle given as both jars and files).
    pub(crate) fn add(
        &mut self,
        http: &HttpSource,
        url: Url,
        secret: HeaderValue,
        bundle: Bundle,
    ) -> bool {
        if self.by_url.contains_key(&url) {
            return false;
        }
        let client = http.with_headers(vec![(api::HEADER_SECRET, secret)]);
        self.by_url.insert(url, (client, bundle));
        true
    }

    fn client(&self, uri: &Url) -> Result<&(HttpSource, Bundle), SourceError> {
        self.by_url.get(uri).ok_or_else(|| {
            SourceError::new(
                FaultKind::Refused,
                format!(
                    "{}: not a planned staging bundle",
                    crate::util::redact::redact_url(uri.as_str())
                ),
            )
        })
    }
}

/// Names the bundle in a failure, with what the staging server's 401/404 mean.
fn explain(bundle: &Bundle, mut e: SourceError) -> SourceError {
    let hint = match e.kind {
        FaultKind::Auth => format!(
            "; the staging server refused the secret in {} (from {}): the Secret does not belong to this bundle",
            bundle.secret_file.display(),
            bundle.secret_origin
        ),
        FaultKind::NotFound => "; the staging server does not have this bundle: check the id and --staging-uri (its path prefix, if any); or the bundle expired (never downloaded within the server's --unused-ttl, or its owner pods are gone): upload it again".to_owned(),
        _ => String::new(),
    };
    if !hint.is_empty() {
        e.hint = None;
    }
    e.message = format!("{}: {}{hint}", bundle.display_uri, e.message);
    e
}

#[async_trait]
impl Source for StagingSource {
    /// A bundle's ETag is its sha256 (servers that send one).
    fn announces_sha256(&self) -> bool {
        true
    }

    async fn open(&self, uri: &Url, req: &OpenRequest) -> Result<Body, SourceError> {
        let (client, bundle) = self.client(uri)?;
        client.open(uri, req).await.map_err(|e| explain(bundle, e))
    }

    async fn probe(&self, uri: &Url) -> Result<Probe, SourceError> {
        let (client, bundle) = self.client(uri)?;
        client.probe(uri).await.map_err(|e| explain(bundle, e))
    }

    fn parallel_ranges(&self) -> bool {
        true
    }

    /// The server, the CA files trusted for it, and each bundle's secret file.
    fn describe(&self) -> Vec<String> {
        let Some(base) = &self.base else {
            return Vec::new();
        };
        let mut lines = vec![format!(
            "  staging server   {}  ({})",
            crate::util::redact::redact_url(base.as_str()),
            self.origin
        )];
        for ca in &self.ca_files {
            lines.push(format!("    trusted CA     {}", ca.display()));
        }
        let mut bundles: Vec<&Bundle> = self.by_url.values().map(|(_, b)| b).collect();
        bundles.sort_by(|a, b| a.display_uri.cmp(&b.display_uri));
        for bundle in bundles {
            lines.push(format!(
                "    {:<14} secret from {}  ({})",
                bundle.display_uri.trim_start_matches("staging://"),
                bundle.secret_file.display(),
                bundle.secret_origin
            ));
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_trimmed_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s");
        std::fs::write(&p, "c2VjcmV0\n").unwrap();
        assert_eq!(read_secret(&p).unwrap(), "c2VjcmV0");
        // A byte-order mark (a Windows editor's) is not part of it.
        std::fs::write(&p, "\u{feff}c2VjcmV0\r\n").unwrap();
        assert_eq!(read_secret(&p).unwrap(), "c2VjcmV0");
        std::fs::write(&p, " \n").unwrap();
        assert!(read_secret(&p).unwrap_err().contains("is empty"));
        std::fs::write(&p, "a\u{1}b").unwrap();
        assert!(read_secret(&p).unwrap_err().contains("header"));
        assert!(read_secret(&dir.path().join("missing"))
            .unwrap_err()
            .contains("cannot read"));
        assert!(read_secret(dir.path())
            .unwrap_err()
            .contains("not a regular file"));
    }
}
