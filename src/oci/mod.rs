//! OCI registries (Registry API v2, ORAS conventions): references, manifests,
//! credentials as kubelet reads them, and one client that resolves a reference
//! to its layers and fetches blobs. The `oci://` source and the resolution step
//! before the plan both use it.

pub(crate) mod auth;
pub(crate) mod client;
pub(crate) mod image;
pub(crate) mod manifest;
pub(crate) mod push;
pub(crate) mod reference;

pub(crate) use client::{Registry, Resolved};
pub(crate) use reference::Reference;

/// Whether `uri` is an `oci://` reference (any case of the scheme).
pub(crate) fn is_oci(uri: &str) -> bool {
    uri.get(..6)
        .is_some_and(|p| p.eq_ignore_ascii_case("oci://"))
}

/// One layer of a resolved `oci://` reference, as the plan pins it and the
/// report records it.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Pinned {
    /// The reference as given, without `#file` (secrets redacted).
    pub reference: String,
    /// The digest of the manifest the reference resolved to (a tag's, recorded
    /// so a rerun gets the same bytes).
    pub digest: String,
    /// For an index: the manifest picked from it (running platform, else first).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub platform_digest: Option<String>,
    /// The layer's digest: the artifact's pin.
    pub layer: String,
    /// The layer's `org.opencontainers.image.title` (a bundle's layer: the
    /// last part of its path).
    pub title: String,
    /// A layer of a `bundle` image: the path in the image it holds
    /// (`jars/<name>`, `files/<name>`), unpacked into the jars or files directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// What logs and the report show: `<reference>#<title>`.
    #[serde(skip)]
    pub display_uri: String,
    /// The layer digest's bytes.
    #[serde(skip)]
    pub pin: [u8; 32],
}
