//! Manifests as registries serve them: the OCI image manifest (`layers`), the
//! OCI artifact manifest (`blobs`), Docker's schema 2, and indexes / manifest
//! lists, from which one manifest is picked by the documented rule.

use serde::Deserialize;

pub(crate) const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub(crate) const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub(crate) const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";

/// The `Accept` header of a manifest request: every kind understood.
pub(crate) const ACCEPT: &str = "application/vnd.oci.image.manifest.v1+json, application/vnd.oci.image.index.v1+json, application/vnd.oci.artifact.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json, application/vnd.docker.distribution.manifest.list.v2+json";

/// The annotation ORAS (and `oras push`) names a layer's file by.
pub(crate) const TITLE: &str = "org.opencontainers.image.title";

/// A content descriptor.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Descriptor {
    pub digest: String,
    /// The blob's size, as the manifest declares it (checked against the answer).
    #[serde(default)]
    pub size: Option<u64>,
    #[serde(default)]
    pub annotations: std::collections::HashMap<String, String>,
    #[serde(default)]
    pub platform: Option<Platform>,
}

impl Descriptor {
    /// The `org.opencontainers.image.title` annotation.
    pub(crate) fn title(&self) -> Option<&str> {
        self.annotations.get(TITLE).map(String::as_str)
    }
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Platform {
    #[serde(default)]
    pub os: String,
    #[serde(default)]
    pub architecture: String,
}

/// Any manifest body; which fields are present says what it is.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Body {
    #[serde(default)]
    media_type: Option<String>,
    #[serde(default)]
    manifests: Option<Vec<Descriptor>>,
    #[serde(default)]
    layers: Option<Vec<Descriptor>>,
    #[serde(default)]
    blobs: Option<Vec<Descriptor>>,
}

/// What a manifest body turned out to be.
#[derive(Debug)]
pub(crate) enum Parsed {
    /// An index or manifest list: the entries to pick from.
    Index(Vec<Descriptor>),
    /// An image or artifact manifest: its layers (blobs).
    Manifest(Vec<Descriptor>),
}

/// Parses a manifest body; `content_type` (the answer's) decides when the body
/// does not say.
pub(crate) fn parse(body: &[u8], content_type: &str) -> Result<Parsed, String> {
    let parsed: Body =
        serde_json::from_slice(body).map_err(|e| format!("the manifest is not valid JSON: {e}"))?;
    let kind = parsed.media_type.as_deref().unwrap_or(content_type);
    let kind = kind.split(';').next().unwrap_or_default().trim();
    match (parsed.manifests, parsed.layers, parsed.blobs) {
        (Some(list), _, _) if kind != OCI_MANIFEST && kind != DOCKER_MANIFEST => {
            // The entry picked is asked for by digest and checked against it:
            // only a sha256 digest can be (and a path-like one would leave the
            // manifests endpoint).
            if let Some(bad) = list
                .iter()
                .find(|d| super::reference::check_digest(&d.digest).is_err())
            {
                return Err(format!(
                    "the index lists manifest digest '{}', not a sha256 digest (sha256:<64 lower-case hex digits>)",
                    bad.digest.escape_debug()
                ));
            }
            Ok(Parsed::Index(list))
        }
        (_, Some(layers), _) => Ok(Parsed::Manifest(layers)),
        (_, _, Some(blobs)) => Ok(Parsed::Manifest(blobs)),
        _ => Err(format!(
            "the manifest ({}) has neither layers, blobs nor manifests",
            if kind.is_empty() {
                "no media type"
            } else {
                kind
            }
        )),
    }
}

/// The running platform as OCI names it (`linux`/`amd64`, `linux`/`arm64`).
pub(crate) fn running_platform() -> (&'static str, &'static str) {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        other => other,
    };
    (std::env::consts::OS, arch)
}

/// The index rule: the entry whose platform is the running OS and architecture,
/// else the first entry. `None` for an empty index.
pub(crate) fn pick<'a>(
    entries: &'a [Descriptor],
    platform: (&str, &str),
) -> Option<&'a Descriptor> {
    entries
        .iter()
        .find(|d| {
            d.platform
                .as_ref()
                .is_some_and(|p| p.os == platform.0 && p.architecture == platform.1)
        })
        .or_else(|| entries.first())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(digest: &str, platform: Option<(&str, &str)>) -> Descriptor {
        Descriptor {
            digest: digest.into(),
            size: None,
            annotations: Default::default(),
            platform: platform.map(|(os, arch)| Platform {
                os: os.into(),
                architecture: arch.into(),
            }),
        }
    }

    #[test]
    fn index_picks_running_platform_else_first() {
        let entries = [
            d("a", Some(("linux", "s390x"))),
            d("b", Some(("linux", "amd64"))),
            d("c", None),
        ];
        assert_eq!(pick(&entries, ("linux", "amd64")).unwrap().digest, "b");
        assert_eq!(pick(&entries, ("linux", "riscv64")).unwrap().digest, "a");
        assert!(pick(&[], ("linux", "amd64")).is_none());
    }

    #[test]
    fn parses_every_kind() {
        let image = br#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"x","digest":"sha256:1","size":2},"layers":[{"mediaType":"application/java-archive","digest":"sha256:2","size":3,"annotations":{"org.opencontainers.image.title":"a.jar"}}]}"#;
        match parse(image, "").unwrap() {
            Parsed::Manifest(l) => assert_eq!(l[0].title(), Some("a.jar")),
            other => panic!("{other:?}"),
        }
        let artifact = br#"{"mediaType":"application/vnd.oci.artifact.manifest.v1+json","blobs":[{"digest":"sha256:2","size":3}]}"#;
        assert!(matches!(parse(artifact, "").unwrap(), Parsed::Manifest(b) if b.len() == 1));
        let index = format!(
            r#"{{"manifests":[{{"digest":"sha256:{}","size":4}}]}}"#,
            "3".repeat(64)
        );
        assert!(
            matches!(parse(index.as_bytes(), "application/vnd.oci.image.index.v1+json").unwrap(), Parsed::Index(m) if m.len() == 1)
        );
        // An entry that is not a sha256 digest is refused before any request.
        for bad in ["sha256:3", "../../../v2/_catalog", "sha512:00", ""] {
            let index = format!(r#"{{"manifests":[{{"digest":"{bad}"}}]}}"#);
            assert!(
                parse(index.as_bytes(), "")
                    .unwrap_err()
                    .contains("not a sha256 digest"),
                "{bad}"
            );
        }
        assert!(parse(b"{}", "").unwrap_err().contains("neither"));
        assert!(parse(b"[", "").unwrap_err().contains("not valid JSON"));
    }
}
