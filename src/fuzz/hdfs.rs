//! The files and text the HDFS source reads before any traffic: Hadoop token files,
//! keytabs and ticket caches, `*-site.xml`, and hdfs-native's replica warnings.

use crate::source::hdfs::{conf, keytab, replicas, token};

/// Fuzz entry point: a token file (`HADOOP_TOKEN_FILE_LOCATION`). An accepted
/// file re-serializes (Hadoop's layout, shortest encodings) to bytes that read
/// back to the same tokens and keys, and that are their own re-serialization;
/// what `check` prints is the same for both.
pub fn hadoop_token(data: &[u8]) {
    let Ok(infos) = token::parse(data) else {
        return;
    };
    let stored = token::read(data).expect("parse accepted what read refuses");
    assert_eq!(stored.tokens.len(), infos.len());
    let written = token::write(&stored);
    let again = token::read(&written).expect("the re-serialized file does not read");
    assert_eq!(
        again, stored,
        "a re-serialized token file reads differently"
    );
    assert_eq!(
        token::write(&again),
        written,
        "re-serializing is not stable"
    );
    assert_eq!(token::parse(&written).as_ref(), Ok(&infos));
}

/// Fuzz entry point: the same bytes as a keytab and as a ticket cache.
/// A keytab's principals are non-empty and unique, and a keytab written with them
/// lists them again; a ticket cache's principal is `name@REALM`, and a cache
/// written with it reads it again.
pub fn kerberos_files(data: &[u8]) {
    if let Ok(principals) = keytab::keytab_principals(data) {
        assert!(!principals.is_empty());
        for (i, p) in principals.iter().enumerate() {
            assert!(!principals[..i].contains(p), "{p} listed twice");
        }
        // No part holds '@', '/' or '\\' (refused since a QA round), so each
        // principal splits one way and a keytab written with them lists them again.
        for p in &principals {
            assert!(splits_one_way(p), "{p:?}");
        }
        let names: Vec<&str> = principals.iter().map(String::as_str).collect();
        let written = keytab::test_keytab(&names);
        assert_eq!(
            keytab::keytab_principals(&written).as_ref(),
            Ok(&principals)
        );
    }
    if let Ok(principal) = keytab::ccache_principal(data) {
        let (name, realm) = principal.rsplit_once('@').expect("no realm");
        assert!(!name.is_empty() && !realm.is_empty(), "{principal:?}");
        assert!(splits_one_way(&principal), "{principal:?}");
        let written = ccache(&principal);
        assert_eq!(keytab::ccache_principal(&written), Ok(principal));
    }
}

/// `a/b@REALM` with exactly one `@` and no empty component.
fn splits_one_way(principal: &str) -> bool {
    principal.split_once('@').is_some_and(|(name, realm)| {
        !realm.is_empty() && !realm.contains('@') && name.split('/').all(|c| !c.is_empty())
    })
}

/// A version 0x0504 ticket cache header with `principal` as its default one.
fn ccache(principal: &str) -> Vec<u8> {
    let (name, realm) = principal.split_once('@').unwrap();
    let mut out = vec![5, 4, 0, 0]; // version, no header tags
    out.extend(1u32.to_be_bytes()); // name type
    let components: Vec<&str> = name.split('/').collect();
    out.extend((components.len() as u32).to_be_bytes());
    for part in std::iter::once(realm).chain(components) {
        out.extend((part.len() as u32).to_be_bytes());
        out.extend(part.as_bytes());
    }
    out
}

/// Fuzz entry point: a `*-site.xml`. Its pairs, written back as a site file
/// (every character that needs it escaped), read back the same.
pub fn hadoop_conf(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(pairs) = conf::parse_site(text) else {
        return;
    };
    let mut written = String::from("<?xml version=\"1.0\"?>\n<configuration>\n");
    for (name, value) in &pairs {
        assert_eq!(name.trim(), name);
        assert_eq!(value.trim(), value);
        written += &format!(
            "<property><name>{}</name><value>{}</value></property>\n",
            escape(name),
            escape(value)
        );
    }
    written += "</configuration>\n";
    let again = conf::parse_site(&written)
        .unwrap_or_else(|e| panic!("the written site file does not parse: {e}\n{written}"));
    assert_eq!(again, pairs, "{written}");
}

/// XML character data with `&`, `<`, `>` and every control character as a
/// reference.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c if c.is_control() => out.push_str(&format!("&#{};", u32::from(c))),
            c => out.push(c),
        }
    }
    out
}

/// Fuzz entry point: a warning line as hdfs-native logs it for a failed replica
/// (its text holds what the NameNode said about the DataNode). The DataNode named
/// is `ip:port` with a port of digits, without quotes or line breaks; the reason
/// is one short line.
pub fn hdfs_warning(data: &[u8]) {
    let line = String::from_utf8_lossy(data);
    if let Some(node) = replicas::datanode_of(&line) {
        let (ip, port) = node.rsplit_once(':').expect("no port");
        assert!(
            !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()),
            "{node:?}"
        );
        assert!(!ip.contains('"'), "{node:?}");
    }
    let reason = replicas::short_reason(&line);
    assert!(
        reason.chars().count() <= 121,
        "{} chars",
        reason.chars().count()
    );
}
