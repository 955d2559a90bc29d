//! Where a declared URI becomes something to fetch: its scheme (one `match` over
//! [`Scheme`]), the URL without its fragment, the `#alias`, the redacted form every
//! message shows, and each scheme's own rules, checked once, here.

use url::Url;

use crate::source::Scheme;
use crate::util::redact::{redact_url, register_url_secrets};

/// A declared URI, parsed.
#[derive(Debug)]
pub(super) struct Located {
    pub scheme: Scheme,
    /// The URL without its fragment (userinfo kept for the source to use).
    pub uri: Url,
    /// The URI as it may be shown: secrets redacted.
    pub display_uri: String,
    /// The `#alias`, percent-decoded.
    pub alias: Option<String>,
}

impl Located {
    /// Parses `raw`: control characters refused (the URL parser would drop tabs
    /// and newlines silently), a scheme required and supported, the fragment taken
    /// as the alias. Secrets in it are registered for redaction first.
    pub(super) fn parse(raw: &str) -> Result<Located, String> {
        register_url_secrets(raw);
        let shown = redact_url(raw);
        if raw.chars().any(char::is_control) {
            return Err(format!(
                "{} contains control characters (a newline or tab?)",
                shown.escape_debug()
            ));
        }
        let scheme = scheme_of(raw, &shown)?;
        let mut uri = Url::parse(raw).map_err(|e| format!("{shown} is not a valid URI: {e}"))?;
        let alias = uri.fragment().map(|fragment| {
            percent_encoding::percent_decode_str(fragment)
                .decode_utf8_lossy()
                .into_owned()
        });
        uri.set_fragment(None);
        Ok(Located {
            scheme,
            uri,
            display_uri: shown,
            alias,
        })
    }

    /// Each scheme's own rules: a host for http(s), a bucket and key for S3, a
    /// cluster for HDFS, no remote host for `file://`.
    pub(super) fn check_scheme(&self) -> Result<(), String> {
        let (uri, shown) = (&self.uri, &self.display_uri);
        match self.scheme {
            Scheme::Http | Scheme::Https if uri.host_str().is_none_or(str::is_empty) => {
                Err(format!("{shown} has no host"))
            }
            Scheme::S3 => crate::s3::client::locate(uri).map(|_| ()),
            Scheme::Gcs => crate::source::gcs::locate(uri).map(|_| ()),
            Scheme::Azure => crate::cloud::azure::locate(uri).map(|_| ()),
            Scheme::Hdfs => crate::source::hdfs::check_uri(uri),
            // A layer is named `oci://registry/repo@sha256:<layer>/<title>` once
            // its reference is resolved (before the plan).
            Scheme::Oci if !uri.path().contains("@sha256:") => Err(format!(
                "{shown}: the reference was not resolved (an earlier problem stopped it)"
            )),
            Scheme::File
                if uri
                    .host_str()
                    .is_some_and(|h| !h.is_empty() && h != "localhost") =>
            {
                Err(format!(
                    "{shown} names host '{}'; file:// URIs must be local (file:///path)",
                    uri.host_str().unwrap_or_default()
                ))
            }
            _ => Ok(()),
        }
    }
}

/// The scheme of `raw`: letters, digits, '+', '-', '.' before the first ':'
/// (RFC 3986). Spark also writes `file:/path` and `local:/path`; those parse as
/// URLs too.
fn scheme_of(raw: &str, shown: &str) -> Result<Scheme, String> {
    let scheme_text = raw.split_once(':').map(|(s, _)| s).filter(|s| {
        s.starts_with(|c: char| c.is_ascii_alphabetic())
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
    });
    let Some(scheme_text) = scheme_text else {
        return Err(format!(
            "{shown} has no scheme; write file:///path to copy a local file or local:///path for one already in the image (supported: {})",
            Scheme::supported_list()
        ));
    };
    Scheme::parse(scheme_text).ok_or_else(|| {
        format!(
            "unsupported scheme '{scheme_text}' in {shown} (supported: {})",
            Scheme::supported_list()
        )
    })
}
