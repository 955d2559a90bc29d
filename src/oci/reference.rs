//! `oci://registry/repository[:tag|@sha256:digest][#file]`, parsed and checked
//! by the distribution spec's grammar, before any network traffic.

/// A parsed `oci://` reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reference {
    /// `host[:port]`, as container runtimes name registries.
    pub registry: String,
    /// `path/to/repo` (lower case, `[a-z0-9]` runs joined by `.`, `_`, `__`, `-`).
    pub repository: String,
    /// The tag; `latest` when neither a tag nor a digest is given.
    pub tag: Option<String>,
    /// `sha256:<64 hex>`, when the reference pins the manifest.
    pub digest: Option<String>,
    /// `#file`: the one layer (by its title) wanted.
    pub file: Option<String>,
}

impl Reference {
    /// Parses `raw` (`oci://` prefix required, case-insensitive); the error says
    /// what is wrong with which part.
    pub(crate) fn parse(raw: &str) -> Result<Reference, String> {
        let rest = raw
            .get(..6)
            .filter(|p| p.eq_ignore_ascii_case("oci://"))
            .map(|_| &raw[6..])
            .ok_or_else(|| format!("{raw} does not start with oci://"))?;
        let (rest, file) = match rest.split_once('#') {
            Some((rest, file)) => {
                let file = percent_encoding::percent_decode_str(file)
                    .decode_utf8_lossy()
                    .into_owned();
                if file.is_empty() {
                    return Err(format!(
                        "{raw}: '#' names no file; write #<layer title> or leave it out"
                    ));
                }
                (rest, Some(file))
            }
            None => (rest, None),
        };
        let (registry, path) = rest.split_once('/').ok_or_else(|| {
            format!("{raw} names no repository; write oci://registry[:port]/repository[:tag|@sha256:digest]")
        })?;
        check_registry(registry).map_err(|why| format!("{raw}: registry '{registry}' {why}"))?;
        let (path, digest) = match path.split_once('@') {
            Some((path, digest)) => {
                check_digest(digest).map_err(|why| format!("{raw}: digest '{digest}' {why}"))?;
                (path, Some(digest.to_owned()))
            }
            None => (path, None),
        };
        let (repository, tag) = match path.rsplit_once(':') {
            Some((repo, tag)) if !tag.contains('/') => (repo, Some(tag.to_owned())),
            _ => (path, None),
        };
        if let Some(tag) = &tag {
            check_tag(tag).map_err(|why| format!("{raw}: tag '{tag}' {why}"))?;
        }
        let tag = match (&tag, &digest) {
            (None, None) => Some("latest".to_owned()),
            _ => tag,
        };
        let registry = registry.to_ascii_lowercase();
        // Docker Hub's official images live under library/, as runtimes name them.
        let hub = matches!(
            registry.as_str(),
            "docker.io" | "index.docker.io" | "registry-1.docker.io"
        );
        let repository = if hub && !repository.contains('/') {
            format!("library/{repository}")
        } else {
            repository.to_owned()
        };
        // Checked as the registry is asked for it: with Docker Hub's `library/`,
        // 247 characters are the most (the fuzzer found 250 accepted, then 258).
        check_repository(&repository)
            .map_err(|why| format!("{raw}: repository '{repository}' {why}"))?;
        Ok(Reference {
            registry,
            repository,
            tag,
            digest,
            file,
        })
    }

    /// What the registry is asked for: the digest when pinned, else the tag.
    pub(crate) fn reference(&self) -> &str {
        self.digest
            .as_deref()
            .or(self.tag.as_deref())
            .unwrap_or("latest")
    }

    /// `registry/repository[:tag][@digest]`, no `#file`.
    pub(crate) fn name(&self) -> String {
        let mut out = format!("{}/{}", self.registry, self.repository);
        if let Some(tag) = &self.tag {
            out.push(':');
            out.push_str(tag);
        }
        if let Some(digest) = &self.digest {
            out.push('@');
            out.push_str(digest);
        }
        out
    }
}

fn check_registry(registry: &str) -> Result<(), &'static str> {
    if registry.contains('@') {
        return Err("holds credentials; give them in a docker config.json (--registry-auth), never in the URI");
    }
    let (host, port) = match registry.rsplit_once(':') {
        Some((host, port)) if !host.ends_with(']') || registry.starts_with('[') => {
            (host, Some(port))
        }
        _ => (registry, None),
    };
    if host.is_empty() {
        return Err("is empty");
    }
    if let Some(port) = port {
        if port.parse::<u16>().map_or(true, |p| p == 0) {
            return Err("has an invalid port");
        }
    }
    let ok = host
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-.[]:".contains(c));
    if ok {
        Ok(())
    } else {
        Err("is not a host name or address")
    }
}

/// `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*`
fn check_repository(repo: &str) -> Result<(), &'static str> {
    const WHY: &str =
        "is not a valid repository name (lower-case letters, digits, '.', '_', '-' and '/' between components)";
    if repo.is_empty() || repo.len() > 255 {
        return Err(WHY);
    }
    for component in repo.split('/') {
        let bytes = component.as_bytes();
        let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
        if bytes.is_empty() || !alnum(&bytes[0]) || !alnum(&bytes[bytes.len() - 1]) {
            return Err(WHY);
        }
        let mut i = 0;
        while i < bytes.len() {
            if alnum(&bytes[i]) {
                i += 1;
                continue;
            }
            let start = i;
            while i < bytes.len() && !alnum(&bytes[i]) {
                i += 1;
            }
            let sep = &component[start..i];
            let dashes = sep.bytes().all(|b| b == b'-');
            if !(matches!(sep, "." | "_" | "__") || dashes) {
                return Err(WHY);
            }
        }
    }
    Ok(())
}

/// `[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`
fn check_tag(tag: &str) -> Result<(), &'static str> {
    let first_ok = tag
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    let rest_ok = tag
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
    if first_ok && rest_ok && tag.len() <= 128 {
        Ok(())
    } else {
        Err("is not a valid tag (letters, digits, '_', '.', '-'; at most 128)")
    }
}

/// `sha256:<64 lower-case hex>`: the only algorithm pins are verified with.
pub(crate) fn check_digest(digest: &str) -> Result<[u8; 32], &'static str> {
    let hex = digest
        .strip_prefix("sha256:")
        .ok_or("is not a sha256 digest (sha256:<64 hex digits>)")?;
    if hex.len() != 64
        || !hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err("is not a sha256 digest (sha256:<64 lower-case hex digits>)");
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).expect("hex checked");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    /// Docker Hub's `library/` counts toward the 255 characters (found by fuzzing:
    /// a name accepted, then refused when written back).
    #[test]
    fn a_hub_repository_is_checked_with_its_library_prefix() {
        let name = |n: usize| format!("oci://docker.io/{}", "a".repeat(n));
        assert_eq!(Reference::parse(&name(247)).unwrap().repository.len(), 255);
        assert!(Reference::parse(&name(248))
            .unwrap_err()
            .contains("is not a valid repository name"));
        let again = Reference::parse(&name(247)).unwrap();
        assert_eq!(
            Reference::parse(&format!("oci://{}", again.name())),
            Ok(again)
        );
    }

    #[test]
    fn parses_and_refuses() {
        let ok = |raw: &str| Reference::parse(raw).unwrap_or_else(|e| panic!("{raw}: {e}"));
        let r = ok("oci://reg.example:5000/team/app:1.0#app.jar");
        assert_eq!(r.registry, "reg.example:5000");
        assert_eq!(r.repository, "team/app");
        let hub = Reference::parse("oci://docker.io/busybox:1").unwrap();
        assert_eq!(hub.repository, "library/busybox");
        assert_eq!(r.tag.as_deref(), Some("1.0"));
        assert_eq!(r.file.as_deref(), Some("app.jar"));
        let r = ok("oci://127.0.0.1:5000/app");
        assert_eq!(r.reference(), "latest");
        let r = ok(&format!("OCI://reg/a/b@{D}"));
        assert_eq!((r.tag, r.digest.as_deref()), (None, Some(D)));
        let r = ok(&format!("oci://reg/a:v1@{D}"));
        assert_eq!(r.reference(), D);
        assert_eq!(r.name(), format!("reg/a:v1@{D}"));
        for (raw, part) in [
            ("oci://reg", "names no repository"),
            ("oci://reg/App", "not a valid repository"),
            ("oci://reg/a..b", "not a valid repository"),
            ("oci://reg/a/", "not a valid repository"),
            ("oci://reg/a:-x", "not a valid tag"),
            ("oci://reg/a@sha256:abc", "not a sha256 digest"),
            ("oci://reg/a@md5:abc", "not a sha256 digest"),
            ("oci://reg:0/a", "invalid port"),
            ("oci://reg:x/a", "invalid port"),
            ("oci:///a", "is empty"),
            ("oci://reg/a#", "names no file"),
            ("oci://u:pw@reg/a", "--registry-auth"),
        ] {
            let e = Reference::parse(raw).unwrap_err();
            assert!(e.contains(part), "{raw}: {e}");
        }
    }
}
