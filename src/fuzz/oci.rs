//! What an OCI registry and the user hand the OCI client: manifests and
//! indexes, `oci://` references, and `WWW-Authenticate` challenges.

use crate::oci::auth::{parse_challenge, Challenge};
use crate::oci::manifest::{self, Parsed};
use crate::oci::reference::{check_digest, Reference};

/// Fuzz entry point: a manifest body; its first byte picks the answer's content
/// type. An accepted index names only sha256 digests (the picked entry is asked
/// for by digest and checked against it), and the pick is one of its entries.
pub fn oci_manifest(data: &[u8]) {
    let Some((&kind, body)) = data.split_first() else {
        return;
    };
    let content_type = [
        "",
        manifest::OCI_MANIFEST,
        manifest::DOCKER_MANIFEST,
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json; charset=utf-8",
    ][usize::from(kind) % 5];
    match manifest::parse(body, content_type) {
        Ok(Parsed::Index(entries)) => {
            for entry in &entries {
                assert!(check_digest(&entry.digest).is_ok(), "{:?}", entry.digest);
            }
            let picked = manifest::pick(&entries, ("linux", "amd64"));
            assert_eq!(picked.is_none(), entries.is_empty());
            if let Some(p) = picked {
                assert!(entries.iter().any(|e| std::ptr::eq(e, p)));
            }
        }
        Ok(Parsed::Manifest(_)) | Err(_) => {}
    }
}

/// Fuzz entry point: an `oci://` reference. An accepted one names a registry
/// with no path, query or credentials, a repository by the spec's grammar, a
/// sha256 digest when pinned; written back (`name()` and the `#file`) it parses
/// to the same reference.
pub fn oci_reference(data: &[u8]) {
    let Ok(raw) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(r) = Reference::parse(raw) else {
        return;
    };
    assert!(!r.registry.is_empty());
    assert!(
        !r.registry.contains(['/', '@', '#', '?', '%', ' ']),
        "{:?}",
        r.registry
    );
    assert!(!r.repository.is_empty() && !r.repository.contains(".."));
    assert!(r.tag.is_some() || r.digest.is_some());
    if let Some(d) = &r.digest {
        assert!(check_digest(d).is_ok(), "{d:?}");
    }
    let mut again = format!("oci://{}", r.name());
    if let Some(file) = &r.file {
        again.push('#');
        again.extend(percent_encoding::utf8_percent_encode(
            file,
            percent_encoding::NON_ALPHANUMERIC,
        ));
    }
    assert_eq!(
        Reference::parse(&again).as_ref(),
        Ok(&r),
        "{raw:?} -> {again:?}"
    );
}

/// Fuzz entry point: a `WWW-Authenticate` value. A Bearer challenge has a
/// realm; written back with quoted parameters it parses the same.
pub fn www_authenticate(data: &[u8]) {
    let header = String::from_utf8_lossy(data);
    let Some(challenge) = parse_challenge(&header) else {
        return;
    };
    let Challenge::Bearer {
        realm,
        service,
        scope,
    } = &challenge
    else {
        return;
    };
    let values = [Some(realm), service.as_ref(), scope.as_ref()];
    if values.iter().flatten().any(|v| v.contains('"')) {
        return; // an unquoted value may hold quotes; a quoted one cannot
    }
    let mut again = format!("Bearer realm=\"{realm}\"");
    if let Some(s) = service {
        again += &format!(",service=\"{s}\"");
    }
    if let Some(s) = scope {
        again += &format!(", scope=\"{s}\"");
    }
    assert_eq!(
        parse_challenge(&again).as_ref(),
        Some(&challenge),
        "{header:?} -> {again:?}"
    );
}
