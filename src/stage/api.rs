//! The staging server's wire contract: paths, part and header names, the id
//! syntax, the JSON bodies and the Secret layout the init containers read. The one
//! place they are written: the server (`stage serve`), the upload client (`stage
//! upload`) and the fetch source (`staging://`) all import them from here; this
//! module imports nothing of theirs.
//!
//! v0 is the apache-spark-on-k8s staging server's API; its clients keep working:
//! - `POST /api/v0/resources` — multipart/form-data with part [`PART_RESOURCES`] (the
//!   tar.gz) and part [`PART_OWNER`] (JSON [`ResourceOwner`]); answers
//!   [`SubmittedResource`] with 201.
//! - `GET /api/v0/resources/{id}` with `Authorization: <secret>` (or `Bearer <secret>`)
//!   streams the bundle; also `HEAD`, `Range`, and `DELETE` with the same secret.
//! - `GET /api/v0/ping` answers `pong`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use reqwest::header::{self, HeaderMap, HeaderName, HeaderValue, InvalidHeaderValue};
use serde::{Deserialize, Serialize};
use url::Url;

use crate::archive::EntryKind;

/// The tokens of a token file's text, with their 1-based line numbers: one per
/// line, a UTF-8 BOM dropped and each line trimmed (spaces, the CR of a file saved
/// on Windows), blank lines and `#` comments skipped. The one way token files are
/// read: the server's `--upload-token-file`, the client's `--token-file` and a
/// kubeconfig's `tokenFile`.
pub(crate) fn token_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    text.lines()
        .enumerate()
        .map(|(n, line)| (n + 1, line.trim()))
        .filter(|(_, line)| !line.is_empty() && !line.starts_with('#'))
}

/// Whether an `Authorization: Bearer` header can carry `token`: visible ASCII.
pub(crate) fn token_header_safe(token: &str) -> bool {
    token.bytes().all(|b| b.is_ascii_graphic())
}

/// Whether `fetch` can publish a bundle with these entries (see
/// [`crate::archive::list_tar_gz`]): regular files at its top level only, each
/// with a name a destination can take, none of the outputs' default names. The
/// server checks it at upload, so the submitter hears it, not the pod.
pub(crate) fn check_bundle(entries: &[(PathBuf, EntryKind)]) -> Result<(), String> {
    for (path, kind) in entries {
        let why = match kind {
            EntryKind::Dir => Err("is a directory"),
            EntryKind::Symlink => Err("is a symlink"),
            EntryKind::HardLink => Err("is a hard link"),
            EntryKind::File => crate::layout::bundle_file_name(path),
        }
        .and_then(|name| match crate::layout::OUTPUT_NAMES.contains(&name) {
            true => Err("is the name of an output of fetch (the classpath file, the env snippet, the report or the SBOM)"),
            false => Ok(name),
        });
        if let Err(why) = why {
            return Err(format!(
                "entry '{}' {why}; a staging bundle holds regular files at its top level only (as stage upload makes it), and fetch refuses any other",
                path.to_string_lossy().escape_debug()
            ));
        }
    }
    Ok(())
}

/// Upload (POST) and, with `/{id}`, download, HEAD and DELETE.
pub(crate) const RESOURCES_PATH: &str = "/api/v0/resources";
/// One bundle, as a route template (`{id}` is the resource id).
pub(crate) const RESOURCE_ROUTE: &str = "/api/v0/resources/{id}";
/// Answers `pong` (text/plain).
pub(crate) const PING_PATH: &str = "/api/v0/ping";
/// Liveness: answers `ok`.
pub(crate) const HEALTHZ_PATH: &str = "/healthz";
/// Prometheus text exposition.
pub(crate) const METRICS_PATH: &str = "/metrics";

/// The multipart part holding the tar.gz bundle.
pub(crate) const PART_RESOURCES: &str = "resources";
/// The multipart part holding the owner JSON.
pub(crate) const PART_OWNER: &str = "resourcesOwner";
/// The file name of the bundle part, as the original clients name it.
pub(crate) const BUNDLE_FILE_NAME: &str = "resources.tar.gz";

/// On GET and HEAD of a bundle: the hex sha256 of its bytes (the ETag, unquoted).
pub(crate) const HEADER_SHA256: &str = "X-Resource-Sha256";
/// The header carrying a bundle's secret: the raw secret, as the original clients
/// send it, or `Bearer <secret>` (see [`secret_from_authorization`]).
pub(crate) const HEADER_SECRET: HeaderName = header::AUTHORIZATION;
/// Longest id a client accepts from any staging server (see [`check_id`]).
pub(crate) const RESOURCE_ID_MAX_LEN: usize = 128;

/// Where the apache-spark-on-k8s init container reads the resource secrets (a
/// mounted Kubernetes Secret).
pub(crate) const SECRET_MOUNT_PATH: &str = "/mnt/secrets/spark-init";
/// The Secret key of the jars bundle's secret.
pub(crate) const JARS_SECRET_KEY: &str = "downloadSubmittedJarsSecret";
/// The Secret key of the files bundle's secret.
pub(crate) const FILES_SECRET_KEY: &str = "downloadSubmittedFilesSecret";

/// Random bytes in a resource id (128 bits, sent as lowercase hex).
pub(crate) const RESOURCE_ID_BYTES: usize = 16;
/// Hex characters in a resource id of this server.
pub(crate) const RESOURCE_ID_HEX_LEN: usize = 2 * RESOURCE_ID_BYTES;
/// Random bytes in a resource secret (256 bits, sent as unpadded base64url).
pub(crate) const RESOURCE_SECRET_BYTES: usize = 32;

/// The owner type the v0 API defines, and the only one owner checks understand.
pub(crate) const OWNER_TYPE_POD: &str = "Pod";
/// Longest `ownerType` accepted (as long as a Kubernetes name may be).
pub(crate) const OWNER_TYPE_MAX_LEN: usize = 253;

/// Who the bundle is for: pods in `namespace` matching `labels`.
///
/// Both spellings are read: this crate's `namespace`/`labels` and the original
/// clients' `ownerNamespace`/`ownerLabels`; a missing `ownerType` means `Pod`. Any
/// other `ownerType` is kept as given (such bundles are never owner-checked).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ResourceOwner {
    #[serde(alias = "ownerNamespace")]
    pub namespace: String,
    #[serde(default, alias = "ownerLabels")]
    pub labels: BTreeMap<String, String>,
    #[serde(rename = "ownerType", default = "pod")]
    pub owner_type: String,
}

fn pod() -> String {
    OWNER_TYPE_POD.to_owned()
}

/// Why an owner part is refused (the upload answers 400 with this message).
#[derive(Debug, thiserror::Error)]
pub(crate) enum OwnerError {
    #[error("part '{PART_OWNER}' is not a valid owner JSON: {0}")]
    Json(serde_json::Error),
    #[error("part '{PART_OWNER}' has an empty namespace")]
    EmptyNamespace,
    #[error("part '{PART_OWNER}' names namespace {0:?}, which is not a Kubernetes namespace name (lowercase letters, digits and '-', at most 63, starting and ending with a letter or digit)")]
    BadNamespace(String),
    #[error("part '{PART_OWNER}' has an empty ownerType (leave it out for {OWNER_TYPE_POD:?})")]
    EmptyOwnerType,
    #[error("part '{PART_OWNER}' has an ownerType longer than {OWNER_TYPE_MAX_LEN} bytes")]
    OwnerTypeTooLong,
    #[error("part '{PART_OWNER}' has an ownerType with control characters")]
    OwnerTypeControl,
}

/// A Kubernetes namespace name (an RFC 1123 label): what owner checks, quotas and
/// the SubjectAccessReview are keyed on.
pub(crate) fn is_namespace(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

impl ResourceOwner {
    /// Parses and checks the owner part.
    pub(crate) fn parse(json: &[u8]) -> Result<ResourceOwner, OwnerError> {
        let owner: ResourceOwner = serde_json::from_slice(json).map_err(OwnerError::Json)?;
        if owner.namespace.trim().is_empty() {
            return Err(OwnerError::EmptyNamespace);
        }
        if !is_namespace(&owner.namespace) {
            let shown: String = owner.namespace.chars().take(80).collect();
            return Err(OwnerError::BadNamespace(shown));
        }
        let owner_type = &owner.owner_type;
        if owner_type.trim().is_empty() {
            return Err(OwnerError::EmptyOwnerType);
        }
        if owner_type.len() > OWNER_TYPE_MAX_LEN {
            return Err(OwnerError::OwnerTypeTooLong);
        }
        if owner_type.chars().any(char::is_control) {
            return Err(OwnerError::OwnerTypeControl);
        }
        Ok(owner)
    }
}

/// The answer to an upload. `Debug` hides the secret.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SubmittedResource {
    pub resource_id: String,
    pub resource_secret: String,
}

impl std::fmt::Debug for SubmittedResource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubmittedResource")
            .field("resource_id", &self.resource_id)
            .field("resource_secret", &"***")
            .finish()
    }
}

/// Every error answer's body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ErrorBody {
    pub error: String,
}

/// `<base>/api/v0/resources`: the upload endpoint of the server at `base`, which may
/// carry a path prefix (a proxy); its query and fragment are dropped.
pub(crate) fn resources_url(base: &Url) -> Url {
    let mut url = base.clone();
    url.set_query(None);
    url.set_fragment(None);
    let prefix = url.path().trim_end_matches('/').to_owned();
    url.set_path(&format!("{prefix}{RESOURCES_PATH}"));
    url
}

/// `<base>/api/v0/resources/<id>`: bundle `id` on the server at `base` (see
/// [`resources_url`]). `id` is one path segment (see [`check_id`]).
pub(crate) fn resource_url(base: &Url, id: &str) -> Url {
    let mut url = resources_url(base);
    url.path_segments_mut()
        .expect("an http(s) URL has path segments")
        .push(id);
    url
}

/// Whether a client can use `id` as a bundle's id: a URL-safe path segment (the
/// original server used UUIDs, ours 32 hex digits).
pub(crate) fn check_id(id: &str) -> Result<(), &'static str> {
    if id.is_empty() {
        return Err("is empty");
    }
    if id.len() > RESOURCE_ID_MAX_LEN {
        return Err("is longer than 128 characters");
    }
    if id == "." || id == ".." {
        return Err("is not a resource id");
    }
    if !id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        return Err("may hold only letters, digits, '-', '_' and '.'");
    }
    Ok(())
}

/// A resource secret as the value of [`HEADER_SECRET`], marked sensitive.
pub(crate) fn secret_header(secret: &str) -> Result<HeaderValue, InvalidHeaderValue> {
    let mut value = HeaderValue::from_str(secret)?;
    value.set_sensitive(true);
    Ok(value)
}

/// The secret a request presents in [`HEADER_SECRET`]; empty when there is none.
pub(crate) fn presented_secret(headers: &HeaderMap) -> &str {
    headers
        .get(HEADER_SECRET)
        .and_then(|v| v.to_str().ok())
        .map_or("", secret_from_authorization)
}

/// The bundle's sha256 a download or HEAD answer announces in [`HEADER_SHA256`],
/// lowercased; `None` from a server that does not say (the original one).
pub(crate) fn announced_sha256(headers: &HeaderMap) -> Option<String> {
    headers
        .get(HEADER_SHA256)
        .and_then(|v| v.to_str().ok())
        .map(str::to_ascii_lowercase)
}

/// True for a well-formed resource id of this server (32 lowercase hex digits).
pub(crate) fn is_resource_id(id: &str) -> bool {
    id.len() == RESOURCE_ID_HEX_LEN && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The secret carried by an `Authorization` value: the raw secret (as the original
/// clients send it) or `Bearer <secret>`.
pub(crate) fn secret_from_authorization(value: &str) -> &str {
    let value = value.trim();
    match value.split_once(' ') {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("bearer") => rest.trim(),
        _ => value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_in_both_spellings() {
        let ours = br#"{"namespace":"ns","labels":{"a":"b"},"ownerType":"Pod"}"#;
        let original = br#"{"ownerNamespace":"ns","ownerLabels":{"a":"b"},"ownerType":"Pod"}"#;
        assert_eq!(
            ResourceOwner::parse(ours).unwrap(),
            ResourceOwner::parse(original).unwrap()
        );
        let bare = ResourceOwner::parse(br#"{"namespace":"ns"}"#).unwrap();
        assert_eq!(bare.owner_type, "Pod");
        assert!(bare.labels.is_empty());
    }

    #[test]
    fn owner_refusals() {
        for (json, needle) in [
            (&br#"{"labels":{}}"#[..], "namespace"),
            (br#"{"namespace":" "}"#, "empty namespace"),
            (br#"{"namespace":"n","ownerType":""}"#, "empty ownerType"),
            (br#"{"namespace":"n","ownerType":" "}"#, "empty ownerType"),
            (br#"{"namespace":"n","ownerType":"a\nb"}"#, "control"),
            (b"not json", "not a valid owner JSON"),
        ] {
            let err = ResourceOwner::parse(json).unwrap_err().to_string();
            assert!(err.contains(needle), "{err}");
        }
        let long = format!(r#"{{"namespace":"n","ownerType":"{}"}}"#, "x".repeat(254));
        let err = ResourceOwner::parse(long.as_bytes())
            .unwrap_err()
            .to_string();
        assert!(err.contains("longer than 253"), "{err}");
    }

    #[test]
    fn other_owner_types_are_kept_as_given() {
        for owner_type in ["Deployment", "pod", "Pod", "x".repeat(253).as_str()] {
            let json = format!(r#"{{"namespace":"n","ownerType":"{owner_type}"}}"#);
            let owner = ResourceOwner::parse(json.as_bytes()).unwrap();
            assert_eq!(owner.owner_type, owner_type);
        }
    }

    #[test]
    fn authorization_forms() {
        assert_eq!(secret_from_authorization("abc"), "abc");
        assert_eq!(secret_from_authorization("Bearer abc"), "abc");
        assert_eq!(secret_from_authorization("bearer  abc "), "abc");
        assert_eq!(secret_from_authorization(""), "");
    }

    #[test]
    fn resource_urls_keep_a_prefix() {
        let id = "0123456789abcdef0123456789abcdef";
        let at = |base: &str| resource_url(&Url::parse(base).unwrap(), id).to_string();
        assert_eq!(
            at("http://h:10000"),
            format!("http://h:10000/api/v0/resources/{id}")
        );
        assert_eq!(
            at("http://h:10000/"),
            format!("http://h:10000/api/v0/resources/{id}")
        );
        assert_eq!(
            at("https://h/staging"),
            format!("https://h/staging/api/v0/resources/{id}")
        );
        assert_eq!(
            at("https://h/staging/?x=1#f"),
            format!("https://h/staging/api/v0/resources/{id}")
        );
        let base = Url::parse("https://h/staging/").unwrap();
        assert_eq!(
            resources_url(&base).as_str(),
            "https://h/staging/api/v0/resources"
        );
    }

    #[test]
    fn client_side_ids() {
        assert!(check_id("0123456789abcdef0123456789abcdef").is_ok());
        assert!(check_id("7d3c9a2e-1b2c-4d5e-8f90-123456789abc").is_ok());
        for bad in ["", ".", "..", "a/b", "a b", "a%2F", "é"] {
            assert!(check_id(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn resource_ids() {
        assert!(is_resource_id("0123456789abcdef0123456789abcdef"));
        assert!(!is_resource_id("0123456789ABCDEF0123456789abcdef"));
        assert!(!is_resource_id("../etc/passwd"));
        assert!(!is_resource_id(""));
    }

    #[test]
    fn debug_hides_the_secret() {
        let r = SubmittedResource {
            resource_id: "id".into(),
            resource_secret: "SECRETTOK".into(),
        };
        assert!(!format!("{r:?}").contains("SECRETTOK"));
    }
}
