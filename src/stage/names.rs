//! Kubernetes name and label syntax, shared by `stage upload` (checking what it
//! sends) and the owner checks (which build label selectors from stored owners).

/// An RFC 1123 label (a namespace name): 1-63 of `[a-z0-9-]`, alphanumeric at both ends.
pub(crate) fn check_dns_label(s: &str) -> Result<(), &'static str> {
    let b = s.as_bytes();
    if b.is_empty() || b.len() > 63 {
        return Err("must be 1-63 characters");
    }
    if !b
        .iter()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        || !b[0].is_ascii_alphanumeric()
        || !b[b.len() - 1].is_ascii_alphanumeric()
    {
        return Err("must be lowercase letters, digits and '-', starting and ending alphanumeric");
    }
    Ok(())
}

/// An RFC 1123 subdomain (most Kubernetes object names, label key prefixes).
pub(crate) fn check_dns_subdomain(s: &str) -> Result<(), &'static str> {
    if s.is_empty() || s.len() > 253 {
        return Err("must be 1-253 characters");
    }
    for part in s.split('.') {
        check_dns_label(part).map_err(|_| {
            "must be lowercase letters, digits, '-' and '.', each part starting and ending alphanumeric"
        })?;
    }
    Ok(())
}

/// A label value: empty, or at most 63 of `[A-Za-z0-9._-]`, alphanumeric at both ends.
pub(crate) fn is_label_value(v: &str) -> bool {
    if v.is_empty() {
        return true;
    }
    let b = v.as_bytes();
    v.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// A label key: `[prefix/]name`, the prefix a DNS subdomain, the name a non-empty
/// label value.
pub(crate) fn check_label_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        check_dns_subdomain(prefix).map_err(|why| format!("the key's prefix {why}"))?;
    }
    if name.is_empty() || !is_label_value(name) {
        return Err(
            "the key's name must be 1-63 characters [A-Za-z0-9._-], starting and ending alphanumeric"
                .to_owned(),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(check_dns_label("spark-apps").is_ok());
        for bad in ["Spark", "-a", "a-", "", "a/b", "a.b"] {
            assert!(check_dns_label(bad).is_err(), "{bad}");
        }
        assert!(check_dns_label(&"a".repeat(64)).is_err());
        assert!(check_dns_subdomain("spark-init.app1").is_ok());
        assert!(check_dns_subdomain("a..b").is_err());
    }

    #[test]
    fn labels() {
        for ok in ["app", "spark-app-selector", "example.com/role", "a_b.c-d"] {
            assert!(check_label_key(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "/x",
            "Example.com/x",
            "a/b/c",
            "x/",
            "-a",
            "a b",
            "a,b=c",
        ] {
            assert!(check_label_key(bad).is_err(), "{bad}");
        }
        assert!(is_label_value(""));
        assert!(is_label_value("app-1"));
        assert!(!is_label_value("x y"));
        assert!(!is_label_value("v,k2=v2"));
        assert!(!is_label_value(&"a".repeat(64)));
    }
}
