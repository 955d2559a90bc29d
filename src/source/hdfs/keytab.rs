//! The two Kerberos files a pod mounts, read far enough to check them before any
//! GSSAPI call: a keytab (MIT's format, versions 0x0501 and 0x0502: which
//! principals it holds) and a `FILE:` ticket cache (versions 0x0501 to 0x0504: its
//! header and default principal). libkrb5 crashes on some malformed ticket caches
//! (a segmentation fault in `krb5_cccol_have_content`, seen with 1.20), so a cache
//! that does not parse here never reaches it.
//!
//! Neither reader looks at key material: keys and tickets are skipped by length.

use std::path::Path;

use super::reader::Reader;

/// Keytabs and ticket caches are Secrets: at most 1 MiB.
pub(crate) const FILE_LIMIT: u64 = crate::util::fs::SECRET_LIMIT;

/// `a/b@REALM` from a realm and components.
fn principal(components: &[String], realm: &str) -> String {
    format!("{}@{realm}", components.join("/"))
}

/// Whether the parts read make a principal one can name unambiguously: no empty
/// part, no control character, no `@`, `/` or `\` inside a part (MIT would
/// have to escape them; written plainly, `sp@rk/h/x@REALM` is another principal).
/// The fuzzer found caches whose "principal" was `@REALM` or held NULs, QA one
/// with `@` inside a name.
fn nameable(components: &[String], realm: &str) -> bool {
    let clean = |s: &str| {
        !s.is_empty()
            && !s
                .chars()
                .any(|c| c.is_control() || matches!(c, '@' | '/' | '\\'))
    };
    !components.is_empty() && components.iter().all(|c| clean(c)) && clean(realm)
}

/// A ticket cache's default principal [`nameable`] refuses.
const UNUSABLE: &str = "a default principal with an empty part, a control character, or '@', '/' or '\\' inside a part";

/// The principals a keytab holds, in file order without repeats (the first is
/// what `kinit -k` and GSSAPI use when none is named).
pub(crate) fn keytab_principals(data: &[u8]) -> Result<Vec<String>, String> {
    let mut r = Reader::new(data);
    let version = r
        .u16()
        .map_err(|_| "shorter than a keytab header".to_owned())?;
    if version != 0x0501 && version != 0x0502 {
        return Err("not a keytab (a keytab starts with the bytes 05 02; make one with kadmin's ktadd or ktutil)".to_owned());
    }
    let mut found: Vec<String> = Vec::new();
    while !r.done() {
        let size = r.u32()? as i32;
        if size < 0 {
            r.take(size.unsigned_abs() as usize)?; // a hole left by a removed entry
            continue;
        }
        if size == 0 {
            break; // MIT stops at a zero length (the end of what was written)
        }
        let entry = r.take(size as usize)?;
        let mut e = Reader::new(entry);
        let mut count = usize::from(e.u16()?);
        if version == 0x0501 {
            count = count.saturating_sub(1); // 0x0501 counts the realm too
        }
        let realm_len = usize::from(e.u16()?);
        let realm = e.text_of(realm_len)?;
        let mut components = Vec::with_capacity(count.min(16));
        for _ in 0..count {
            let len = usize::from(e.u16()?);
            components.push(e.text_of(len)?);
        }
        if version == 0x0502 {
            e.u32()?; // name type
        }
        e.take(4 + 1)?; // timestamp, 8-bit key version
        e.u16()?; // enctype
        let key_len = usize::from(e.u16()?);
        e.take(key_len)?;
        if !nameable(&components, &realm) {
            return Err(format!(
                "an entry at byte {} whose principal has an empty part, a control character, or '@', '/' or '\\' inside a part",
                r.at()
            ));
        }
        let name = principal(&components, &realm);
        if !found.contains(&name) {
            found.push(name);
        }
    }
    if found.is_empty() {
        return Err("holds no keys".to_owned());
    }
    Ok(found)
}

/// The default principal of a `FILE:` ticket cache, or why it is not one.
pub(crate) fn ccache_principal(data: &[u8]) -> Result<String, String> {
    let mut r = Reader::new(data);
    let version = r
        .u16()
        .map_err(|_| "empty or shorter than a ticket cache header".to_owned())?;
    if !(0x0501..=0x0504).contains(&version) {
        return Err("not a Kerberos ticket cache (one starts with the bytes 05 01 to 05 04; make one with kinit)".to_owned());
    }
    if version == 0x0504 {
        let header_len = usize::from(r.u16()?);
        r.take(header_len)?;
    }
    if version != 0x0501 {
        r.u32()?; // name type
    }
    let mut count = r.u32()? as usize;
    if version == 0x0501 {
        count = count.saturating_sub(1);
    }
    if count > 64 {
        return Err(format!("a principal of {count} components"));
    }
    let realm_len = r.u32()? as usize;
    let realm = r.text_of(realm_len)?;
    let mut components = Vec::with_capacity(count);
    for _ in 0..count {
        let len = r.u32()? as usize;
        components.push(r.text_of(len)?);
    }
    if components.is_empty() || realm.is_empty() {
        return Err("no default principal".to_owned());
    }
    if !nameable(&components, &realm) {
        return Err(UNUSABLE.to_owned());
    }
    Ok(principal(&components, &realm))
}

/// Whether principal `given` (as the user wrote it: the realm may be left out)
/// names `full` (`name@REALM`).
pub(crate) fn names(given: &str, full: &str) -> bool {
    if given.contains('@') {
        given == full
    } else {
        full.rsplit_once('@').is_some_and(|(name, _)| name == given)
    }
}

/// The path of a `FILE:` ticket cache named by `KRB5CCNAME` (or a bare path);
/// `None` for other kinds (`DIR:`, `KEYRING:`, `KCM:`, `MEMORY:`), which libkrb5 reads.
pub(crate) fn file_cache(name: &str) -> Option<&Path> {
    match name.split_once(':') {
        Some(("FILE", path)) => Some(Path::new(path)),
        Some((kind, _)) if kind.chars().all(|c| c.is_ascii_uppercase()) && !kind.is_empty() => None,
        _ => Some(Path::new(name)),
    }
}

/// One keytab entry (an aes256 key) for `principal` (`a/b@REALM`), for tests.
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn test_entry(principal: &str) -> Vec<u8> {
    let (name, realm) = principal.split_once('@').expect("name@REALM");
    let comps: Vec<&str> = name.split('/').collect();
    let mut e = Vec::new();
    e.extend((comps.len() as u16).to_be_bytes());
    e.extend((realm.len() as u16).to_be_bytes());
    e.extend(realm.as_bytes());
    for c in comps {
        e.extend((c.len() as u16).to_be_bytes());
        e.extend(c.as_bytes());
    }
    e.extend(1u32.to_be_bytes()); // name type
    e.extend(0u32.to_be_bytes()); // timestamp
    e.push(2); // kvno
    e.extend(18u16.to_be_bytes()); // enctype
    e.extend(32u16.to_be_bytes());
    e.extend([7u8; 32]);
    let mut out = (e.len() as u32).to_be_bytes().to_vec();
    out.extend(e);
    out
}

/// A keytab (version 0x0502) holding a key for each of `principals`, for tests.
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn test_keytab(principals: &[&str]) -> Vec<u8> {
    let mut kt = vec![5, 2];
    for p in principals {
        kt.extend(test_entry(p));
    }
    kt
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keytab_principals_in_order_without_repeats_and_holes_skipped() {
        let mut kt = vec![5, 2];
        kt.extend(test_entry("alice@EX.COM"));
        kt.extend((-6i32).to_be_bytes());
        kt.extend([0u8; 6]);
        kt.extend(test_entry("nn/host@EX.COM"));
        kt.extend(test_entry("alice@EX.COM"));
        assert_eq!(
            keytab_principals(&kt).unwrap(),
            vec!["alice@EX.COM", "nn/host@EX.COM"]
        );
        assert!(names("alice", "alice@EX.COM"));
        assert!(names("alice@EX.COM", "alice@EX.COM"));
        assert!(!names("alice@OTHER", "alice@EX.COM"));
        // Truncated anywhere: an error, never a panic.
        for cut in 0..kt.len() {
            let _ = keytab_principals(&kt[..cut]);
        }
        assert!(keytab_principals(&kt[..40])
            .unwrap_err()
            .contains("truncated"));
        assert_eq!(keytab_principals(&[5, 2]).unwrap_err(), "holds no keys");
        for bad in ["a//b@R", "sp@rk/h@R"] {
            let mut keytab = vec![5, 2];
            keytab.extend(test_entry(bad));
            assert!(
                keytab_principals(&keytab)
                    .unwrap_err()
                    .contains("whose principal has an empty part"),
                "{bad}"
            );
        }
        assert!(keytab_principals(b"garbage")
            .unwrap_err()
            .contains("not a keytab"));
    }

    #[test]
    fn ticket_cache_headers() {
        let mut cc = vec![5, 4, 0, 12];
        cc.extend([0u8; 12]);
        cc.extend(1u32.to_be_bytes());
        cc.extend(1u32.to_be_bytes());
        cc.extend(6u32.to_be_bytes());
        cc.extend(b"EX.COM");
        cc.extend(5u32.to_be_bytes());
        cc.extend(b"alice");
        assert_eq!(ccache_principal(&cc).unwrap(), "alice@EX.COM");
        for cut in 0..cc.len() {
            assert!(ccache_principal(&cc[..cut]).is_err());
        }
        assert!(ccache_principal(&[5, 4]).is_err());
        assert!(ccache_principal(&[]).is_err());
        // An empty name part (found by fuzzing: `@EX.COM` was a principal).
        let mut empty = cc[..cc.len() - 9].to_vec();
        empty.extend(0u32.to_be_bytes());
        assert_eq!(ccache_principal(&empty).unwrap_err(), UNUSABLE);
        // A realm holding '@', a name holding a NUL or '@' (found by QA).
        for (at, byte) in [(28, b'@'), (cc.len() - 1, 0), (cc.len() - 3, b'@')] {
            let mut bad = cc.clone();
            bad[at] = byte;
            assert_eq!(ccache_principal(&bad).unwrap_err(), UNUSABLE, "{at}");
        }
        assert!(ccache_principal(&[0xde, 0xad, 0xbe, 0xef])
            .unwrap_err()
            .contains("not a Kerberos ticket cache"));
        assert_eq!(file_cache("FILE:/tmp/x"), Some(Path::new("/tmp/x")));
        assert_eq!(file_cache("/tmp/x"), Some(Path::new("/tmp/x")));
        assert_eq!(file_cache("DIR:/tmp/d"), None);
        assert_eq!(file_cache("KEYRING:persistent:1"), None);
    }
}
