//! The staging server's wire contract: paths, part and header names, and the
//! JSON bodies, shared by the server, the upload client and the fetch source.
//!
//! v0 is the apache-spark-on-k8s staging server's API; its clients keep working:
//! - `POST /api/v0/resources` — multipart/form-data with part [`PART_RESOURCES`] (the
//!   tar.gz) and part [`PART_OWNER`] (JSON [`ResourceOwner`]); answers
//!   [`SubmittedResource`] with 201.
//! - `GET /api/v0/resources/{id}` with `Authorization: <secret>` (or `Bearer <secret>`)
//!   streams the bundle; also `HEAD`, `Range`, and `DELETE` with the same secret.
//! - `GET /api/v0/ping` answers `pong`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Upload (POST) and, with `/{id}`, download, HEAD and DELETE.
pub(crate) const RESOURCES_PATH: &str = "/api/v0/resources";
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

/// On GET and HEAD of a bundle: the hex sha256 of its bytes (the ETag, unquoted).
pub(crate) const HEADER_SHA256: &str = "X-Resource-Sha256";

/// Hex characters in a resource id (128 random bits).
pub(crate) const RESOURCE_ID_HEX_LEN: usize = 32;
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

impl ResourceOwner {
    /// Parses and checks the owner part; the error says what is wrong.
    pub(crate) fn parse(json: &[u8]) -> Result<ResourceOwner, String> {
        let owner: ResourceOwner = serde_json::from_slice(json)
            .map_err(|e| format!("part '{PART_OWNER}' is not a valid owner JSON: {e}"))?;
        if owner.namespace.trim().is_empty() {
            return Err(format!("part '{PART_OWNER}' has an empty namespace"));
        }
        let owner_type = &owner.owner_type;
        if owner_type.trim().is_empty() {
            return Err(format!(
                "part '{PART_OWNER}' has an empty ownerType (leave it out for {OWNER_TYPE_POD:?})"
            ));
        }
        if owner_type.len() > OWNER_TYPE_MAX_LEN {
            return Err(format!(
                "part '{PART_OWNER}' has an ownerType longer than {OWNER_TYPE_MAX_LEN} bytes"
            ));
        }
        if owner_type.chars().any(char::is_control) {
            return Err(format!(
                "part '{PART_OWNER}' has an ownerType with control characters"
            ));
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

/// True for a well-formed resource id (32 lowercase hex digits).
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
            let err = ResourceOwner::parse(json).unwrap_err();
            assert!(err.contains(needle), "{err}");
        }
        let long = format!(r#"{{"namespace":"n","ownerType":"{}"}}"#, "x".repeat(254));
        let err = ResourceOwner::parse(long.as_bytes()).unwrap_err();
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
