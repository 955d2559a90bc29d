//! Pinned SHA-256 digests, read from a file in `sha256sum` format.
//!
//! Each line is `<64 hex digits>  <key>` (or `<hex> *<key>`, the binary
//! marker), where the key is a destination file name (`app.jar`) or a full
//! URI. Blank lines and `#` comments are ignored, CRLF line endings and
//! upper-case hex are accepted, and so are GNU's escaped names (a line
//! starting with `\`) and the BSD form `SHA256 (<key>) = <hex>`
//! (`sha256sum --tag`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::util::redact::redact_url;

/// Digests pinned by destination name or URI.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Checksums {
    pins: HashMap<String, Pin>,
    order: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Pin {
    digest: [u8; 32],
    line: usize,
}

/// Why a checksums file could not be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ChecksumsError {
    /// The file could not be read.
    #[error(
        "cannot read checksums file {}; check --checksums and that the ConfigMap/Secret is mounted",
        path.display()
    )]
    Read {
        /// The file that was asked for.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// A line is not `<64 hex digits>  <name or URI>`.
    #[error("invalid {kind} {origin}, line {line}: {message}")]
    Malformed {
        /// What the file is: `checksums file` or `lockfile`.
        kind: &'static str,
        /// The file, or whatever name the text was given.
        origin: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The same key is pinned twice to different digests.
    #[error(
        "invalid {kind} {origin}, line {line}: {key} is already pinned to a different \
         digest on line {first_line}; keep only the right one"
    )]
    Conflict {
        /// What the file is: `checksums file` or `lockfile`.
        kind: &'static str,
        /// The file, or whatever name the text was given.
        origin: String,
        /// The key pinned twice, with any credentials masked.
        key: String,
        /// 1-based line of the first pin.
        first_line: usize,
        /// 1-based line of the conflicting pin.
        line: usize,
    },
}

impl Checksums {
    /// Reads and parses the checksums file at `path`.
    pub(crate) fn load(path: &Path) -> Result<Checksums, ChecksumsError> {
        let bytes = crate::util::fs::read_regular(path, crate::util::fs::CONFIG_LIMIT).map_err(
            |source| ChecksumsError::Read {
                path: path.to_path_buf(),
                source,
            },
        )?;
        let text = String::from_utf8_lossy(&bytes);
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        Checksums::parse(text, &path.display().to_string())
    }

    /// Parses `sha256sum`-format text; `origin` names it in errors (usually
    /// the file path).
    pub(crate) fn parse(text: &str, origin: &str) -> Result<Checksums, ChecksumsError> {
        Checksums::parse_as(text, origin, "checksums file")
    }

    /// Parses a lockfile's pins (`sha256sum` format; a UTF-8 BOM is dropped);
    /// errors call it a lockfile.
    pub(crate) fn parse_lockfile(text: &str, origin: &str) -> Result<Checksums, ChecksumsError> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        Checksums::parse_as(text, origin, "lockfile")
    }

    fn parse_as(text: &str, origin: &str, kind: &'static str) -> Result<Checksums, ChecksumsError> {
        let mut checksums = Checksums::default();
        for (index, raw) in text.split('\n').enumerate() {
            let line = index + 1;
            let raw = raw.strip_suffix('\r').unwrap_or(raw);
            let parsed = parse_line(raw).map_err(|message| ChecksumsError::Malformed {
                kind,
                origin: origin.to_string(),
                line,
                message,
            })?;
            let Some((key, digest)) = parsed else {
                continue;
            };
            match checksums.pins.get(&key) {
                Some(pin) if pin.digest == digest => {}
                Some(pin) => {
                    return Err(ChecksumsError::Conflict {
                        kind,
                        origin: origin.to_string(),
                        key: redact_url(&key),
                        first_line: pin.line,
                        line,
                    })
                }
                None => {
                    checksums.pins.insert(key.clone(), Pin { digest, line });
                    checksums.order.push(key);
                }
            }
        }
        Ok(checksums)
    }

    /// Returns the digest pinned for an artifact: by its exact `uri` first,
    /// then by the `uri` without its `#fragment`, then by its destination
    /// `name`.
    pub(crate) fn lookup(&self, uri: &str, name: &str) -> Option<[u8; 32]> {
        self.lookup_key(uri, name).map(|(_, digest)| digest)
    }

    /// Like [`Checksums::lookup`], also returning the key that matched.
    pub(crate) fn lookup_key(&self, uri: &str, name: &str) -> Option<(&str, [u8; 32])> {
        let without_fragment = uri.split_once('#').map(|(base, _)| base);
        [Some(uri), without_fragment, Some(name)]
            .into_iter()
            .flatten()
            .find_map(|key| self.pins.get_key_value(key))
            .map(|(key, pin)| (key.as_str(), pin.digest))
    }

    /// Whether nothing is pinned.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.order.len()
    }

    /// Adds `other`'s pins (a lockfile's) after these; the same key pinned to
    /// another digest is a conflict.
    pub(crate) fn merge(&mut self, other: &Checksums, origin: &str) -> Result<(), ChecksumsError> {
        for key in &other.order {
            let pin = other.pins[key];
            match self.pins.get(key) {
                Some(mine) if mine.digest == pin.digest => {}
                Some(mine) => {
                    return Err(ChecksumsError::Conflict {
                        kind: "lockfile",
                        origin: origin.to_string(),
                        key: redact_url(key),
                        first_line: mine.line,
                        line: pin.line,
                    })
                }
                None => {
                    self.pins.insert(key.clone(), pin);
                    self.order.push(key.clone());
                }
            }
        }
        Ok(())
    }

    /// The digest pinned for exactly `key` (no fragment or name fallback).
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn pinned(&self, key: &str) -> Option<[u8; 32]> {
        self.pins.get(key).map(|pin| pin.digest)
    }

    /// The pinned keys in file order, each once, so callers can warn about
    /// pins that match no artifact.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &str> {
        self.order.iter().map(String::as_str)
    }
}

/// Parses one line: `None` for blank and comment lines, otherwise the key
/// and digest, or a message saying what is wrong.
fn parse_line(line: &str) -> Result<Option<(String, [u8; 32])>, String> {
    let body = line.trim_start();
    let indent = line.len() - body.len();
    let body = body.trim_end();
    if body.is_empty() || body.starts_with('#') {
        return Ok(None);
    }
    if let Some(parsed) = parse_tagged(body) {
        return parsed.map(Some);
    }
    let (escaped, body) = match body.strip_prefix('\\') {
        Some(rest) => (true, rest),
        None => (false, body),
    };
    let hex_end = body.find(char::is_whitespace).unwrap_or(body.len());
    let (hex, rest) = body.split_at(hex_end);
    let digest = parse_digest(hex).map_err(|(offset, message)| {
        let column = line[..indent + usize::from(escaped) + offset]
            .chars()
            .count()
            + 1;
        match offset {
            0 if hex.is_empty() => message,
            _ if hex.chars().all(|c| c.is_ascii_hexdigit()) => message,
            _ => format!("{message} at column {column}"),
        }
    })?;
    let rest = rest.trim_start();
    let key = rest.strip_prefix('*').unwrap_or(rest);
    if key.is_empty() {
        return Err(
            "missing the file name or URI after the digest (expected `<64 hex digits>  <name>`)"
                .to_string(),
        );
    }
    let key = if escaped {
        unescape_name(key)
    } else {
        key.to_string()
    };
    Ok(Some((key, digest)))
}

/// Parses the BSD form `SHA256 (<key>) = <hex>`; `None` if the line is not
/// in that form.
fn parse_tagged(body: &str) -> Option<Result<(String, [u8; 32]), String>> {
    let (algorithm, rest) = body.split_once(" (")?;
    let (key, hex) = rest.rsplit_once(") = ")?;
    if algorithm.is_empty()
        || !algorithm
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-')
    {
        return None;
    }
    if !algorithm.eq_ignore_ascii_case("SHA256") {
        return Some(Err(format!(
            "only SHA256 digests can be pinned, found {algorithm}; generate pins with `sha256sum`"
        )));
    }
    if key.is_empty() {
        return Some(Err(
            "missing the file name or URI between the parentheses".to_string()
        ));
    }
    Some(
        parse_digest(hex.trim())
            .map(|digest| (key.to_string(), digest))
            .map_err(|(_, message)| message),
    )
}

/// Decodes a SHA-256 hex digest; on failure returns the byte offset of the
/// first offending character and a message.
fn parse_digest(hex: &str) -> Result<[u8; 32], (usize, String)> {
    const EXPECTED: &str = "expected 64 hex digits (a SHA-256 digest)";
    if let Some((offset, c)) = hex.char_indices().find(|(_, c)| !c.is_ascii_hexdigit()) {
        return Err((offset, format!("{EXPECTED}, found {c:?}")));
    }
    let mut digest = [0u8; 32];
    if hex.len() != 64 || hex::decode_to_slice(hex, &mut digest).is_err() {
        let hint = match hex.len() {
            32 => " (looks like MD5)",
            40 => " (looks like SHA-1)",
            128 => " (looks like SHA-512)",
            _ => "",
        };
        return Err((
            0,
            format!(
                "{EXPECTED}, found {} digits{hint}; generate pins with `sha256sum`",
                hex.len()
            ),
        ));
    }
    Ok(digest)
}

/// Undoes GNU `sha256sum`'s escaping of names with `\`, newline or CR.
fn unescape_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut chars = name.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
    const B: &str = "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752";

    fn digest(hex: &str) -> [u8; 32] {
        let mut out = [0u8; 32];
        hex::decode_to_slice(hex, &mut out).unwrap();
        out
    }

    #[test]
    fn parses_sha256sum_output_and_variants() {
        let text = format!(
            "# pins for the job\r\n\
             \r\n\
             {A}  app.jar\r\n\
             {upper} *https://repo.example.com/libs/lib-1.0.jar\r\n\
             \t{B}   spaced name.txt  \n\
             SHA256 (tagged.jar) = {A}\n\
             \\{B}  dir\\\\with\\nnewline\n\
             {A}  app.jar\n",
            upper = B.to_uppercase()
        );
        let sums = Checksums::parse(&text, "pins.sha256").unwrap();
        assert_eq!(
            sums.keys().collect::<Vec<_>>(),
            vec![
                "app.jar",
                "https://repo.example.com/libs/lib-1.0.jar",
                "spaced name.txt",
                "tagged.jar",
                "dir\\with\nnewline",
            ]
        );
        assert_eq!(sums.len(), 5);
        assert!(!sums.is_empty());
        assert_eq!(sums.lookup("https://x/app.jar", "app.jar"), Some(digest(A)));
        assert_eq!(
            sums.lookup("https://x/y.jar", "tagged.jar"),
            Some(digest(A))
        );
        assert_eq!(sums.lookup("file:///z", "spaced name.txt"), Some(digest(B)));
    }

    #[test]
    fn lookup_prefers_the_uri_then_the_name() {
        let text = format!(
            "{A}  lib.jar\n{B}  https://repo.example.com/lib.jar\n{A}  https://mirror.example.com/x.jar\n"
        );
        let sums = Checksums::parse(&text, "t").unwrap();
        let cases: &[(&str, &str, Option<&str>)] = &[
            ("https://repo.example.com/lib.jar", "lib.jar", Some(B)),
            ("https://other.example.com/lib.jar", "lib.jar", Some(A)),
            (
                "https://repo.example.com/lib.jar#renamed.jar",
                "renamed.jar",
                Some(B),
            ),
            (
                "https://mirror.example.com/x.jar#lib.jar",
                "lib.jar",
                Some(A),
            ),
            ("https://other.example.com/none.jar", "none.jar", None),
            ("", "", None),
        ];
        for (uri, name, expected) in cases {
            assert_eq!(sums.lookup(uri, name), expected.map(digest), "{uri} {name}");
        }
    }

    #[test]
    fn empty_and_comment_only_inputs_pin_nothing() {
        for text in ["", "\n", "\r\n\r\n", "# nothing\n   # indented\n\t\n"] {
            let sums = Checksums::parse(text, "t").unwrap();
            assert!(sums.is_empty(), "{text:?}");
            assert_eq!(sums.keys().count(), 0);
        }
    }

    #[test]
    fn reports_malformed_lines_with_location_and_reason() {
        let short = &A[..40];
        let cases: Vec<(String, usize, &str)> = vec![
            (
                format!("{A}  ok.jar\n{short}  a.jar"),
                2,
                "found 40 digits (looks like SHA-1)",
            ),
            (format!("{}  a.jar", &A[..32]), 1, "(looks like MD5)"),
            (
                format!("{A}{A}  a.jar"),
                1,
                "found 128 digits (looks like SHA-512)",
            ),
            (format!("{}g  a.jar", &A[..63]), 1, "found 'g' at column 64"),
            (format!("  x{A}  a.jar"), 1, "found 'x' at column 3"),
            ("app.jar  abc".to_string(), 1, "found 'p' at column 2"),
            (A.to_string(), 1, "missing the file name or URI"),
            (format!("{A}  *"), 1, "missing the file name or URI"),
            (format!("\n\n{A}\t\r\n"), 3, "missing the file name or URI"),
            (
                format!("MD5 (a.jar) = {}", &A[..32]),
                1,
                "only SHA256 digests can be pinned, found MD5",
            ),
            (
                format!("SHA256 () = {A}"),
                1,
                "missing the file name or URI between",
            ),
            ("SHA256 (a.jar) = 12".to_string(), 1, "found 2 digits"),
            ("\\".to_string(), 1, "found 0 digits"),
        ];
        for (text, line, reason) in &cases {
            match Checksums::parse(text, "pins.sha256") {
                Err(err @ ChecksumsError::Malformed { .. }) => {
                    let message = err.to_string();
                    let prefix = format!("invalid checksums file pins.sha256, line {line}: ");
                    assert!(message.starts_with(&prefix), "{text:?}: {message}");
                    assert!(message.contains(reason), "{text:?}: {message}");
                }
                other => panic!("{text:?}: expected Malformed, got {other:?}"),
            }
        }
    }

    #[test]
    fn same_key_twice_must_agree() {
        let text = format!("{A}  a.jar\n{B}  b.jar\n{A}  a.jar\n{B}  a.jar\n");
        let err = Checksums::parse(&text, "pins").unwrap_err();
        assert!(matches!(
            err,
            ChecksumsError::Conflict {
                first_line: 1,
                line: 4,
                ..
            }
        ));
        assert_eq!(
            err.to_string(),
            "invalid checksums file pins, line 4: a.jar is already pinned to a different digest \
             on line 1; keep only the right one"
        );
        let text = format!(
            "{A}  https://u:hunter22@h/a.jar?t=s3cret\n{B}  https://u:hunter22@h/a.jar?t=s3cret\n"
        );
        let message = Checksums::parse(&text, "pins").unwrap_err().to_string();
        assert!(
            !message.contains("hunter22") && !message.contains("s3cret"),
            "{message}"
        );
    }

    #[test]
    fn load_reads_files_and_names_unreadable_ones() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("checksums.txt");
        std::fs::write(&file, format!("\u{feff}{A}  a.jar\n")).unwrap();
        let sums = Checksums::load(&file).unwrap();
        assert_eq!(sums.lookup("", "a.jar"), Some(digest(A)));

        std::fs::write(&file, "nope  a.jar\n").unwrap();
        let message = Checksums::load(&file).unwrap_err().to_string();
        assert!(
            message.contains(&format!("{}, line 1", file.display())),
            "{message}"
        );

        let missing = dir.path().join("missing.txt");
        let err = Checksums::load(&missing).unwrap_err();
        assert!(matches!(err, ChecksumsError::Read { .. }));
        assert!(std::error::Error::source(&err).is_some());
        assert!(err.to_string().contains(&missing.display().to_string()));
    }

    #[test]
    fn never_panics_on_odd_input() {
        let pieces = [
            A,
            &A[..10],
            " ",
            "  ",
            "*",
            "\\",
            "\\n",
            "#",
            "\n",
            "\r\n",
            "\r",
            "é",
            "😀",
            "g",
            "SHA256 (",
            ") = ",
            "x",
            "\t",
        ];
        let mut rng = 0x1234_5678_9abc_def1u64;
        for _ in 0..5000 {
            let mut text = String::new();
            for _ in 0..(rng % 10) {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                text.push_str(pieces[(rng % pieces.len() as u64) as usize]);
            }
            let _ = Checksums::parse(&text, "fuzz");
        }
    }
}
