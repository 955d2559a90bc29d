//! Java `.properties` files, read with the rules of `java.util.Properties.load`.
//!
//! Spark reads `spark-defaults.conf` and the `spark.properties` file it mounts
//! into driver pods with `Properties.load`, so this module follows the same
//! rules: `=`, `:` or whitespace separators, backslash escapes (including
//! `\uXXXX`), line continuation with a trailing backslash, `#`/`!` comment
//! lines and any line ending (`\n`, `\r\n`, `\r`).

use std::hash::BuildHasher;
use std::path::{Path, PathBuf};

/// Key/value pairs of one properties file.
///
/// A key that appears more than once keeps its last value, at the position
/// of its first appearance (as if inserted into an ordered map).
///
/// Held compactly, as files of millions of short keys are accepted: every key
/// and value in one string, 12 bytes and an index slot per distinct key (the
/// text they come from is never held as a `char` per byte).
#[derive(Clone, Default)]
pub(crate) struct Properties {
    /// Each key followed by its value, unescaped (a repeated key's new value
    /// is appended with its key again: at most the size of the input in all).
    text: String,
    /// The distinct keys in file order: where the key starts, where it ends
    /// (and its value starts) and where the value ends, in `text`.
    entries: Vec<[u32; 3]>,
    /// `entries` by key.
    index: hashbrown::HashTable<u32>,
    hasher: std::hash::RandomState,
    path: Option<PathBuf>,
}

impl std::fmt::Debug for Properties {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl PartialEq for Properties {
    fn eq(&self, other: &Self) -> bool {
        self.path == other.path && self.iter().eq(other.iter())
    }
}

impl Eq for Properties {}

/// Why a properties file could not be loaded.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PropertiesError {
    /// The file could not be read.
    #[error(
        "cannot read properties file {}; check the path and that the ConfigMap/Secret is mounted",
        path.display()
    )]
    Read {
        /// The file that was asked for.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The file is larger than spark-localizer reads.
    #[error(
        "properties file {} is larger than {} MiB, the most spark-localizer reads (Spark's properties are far smaller): check that it is the file meant",
        path.display(),
        limit >> 20
    )]
    TooLarge {
        /// The file that was asked for.
        path: PathBuf,
        /// The most that is read, in bytes.
        limit: u64,
    },
    /// A `\uXXXX` escape is not followed by four hex digits.
    #[error("invalid properties file {path}, line {line}: {message}")]
    Malformed {
        /// The file, or `<input>` for text given to [`Properties::parse`].
        path: String,
        /// 1-based line number of the bad escape.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

/// A character of a logical line and the 1-based natural line it came from.
type Located = (char, usize);

impl Properties {
    /// Parses properties text with the rules of `java.util.Properties.load`.
    ///
    /// Fails only on a malformed `\uXXXX` escape; the error names `<input>`
    /// and the line.
    pub(crate) fn parse(text: &str) -> Result<Properties, PropertiesError> {
        parse_with_origin(text, "<input>")
    }

    /// Reads and parses the properties file at `path` (UTF-8, as Spark reads
    /// it; invalid bytes become U+FFFD and a leading byte-order mark is
    /// skipped).
    pub(crate) fn load(path: &Path) -> Result<Properties, PropertiesError> {
        let limit = crate::util::fs::CONFIG_LIMIT;
        let bytes = crate::util::fs::read_regular(path, limit).map_err(|source| {
            if crate::util::fs::too_large(&source) {
                PropertiesError::TooLarge {
                    path: path.to_path_buf(),
                    limit,
                }
            } else {
                PropertiesError::Read {
                    path: path.to_path_buf(),
                    source,
                }
            }
        })?;
        let text = String::from_utf8_lossy(&bytes);
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        let mut properties = parse_with_origin(text, &path.display().to_string())?;
        properties.path = Some(path.to_path_buf());
        Ok(properties)
    }

    /// Returns the value of `key` (the last one when the key repeats).
    ///
    /// Values are exactly what Java loads, trailing whitespace included;
    /// Spark itself trims them when it reads `spark-defaults.conf`, so
    /// callers mirroring Spark should `trim()` the result.
    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        let hash = self.hasher.hash_one(key);
        let (text, entries) = (&self.text, &self.entries);
        self.index
            .find(hash, |&i| key_of(text, entries[i as usize]) == key)
            .map(|&i| value_of(text, entries[i as usize]))
    }

    /// Iterates over `(key, value)` pairs in file order, each key once.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries
            .iter()
            .map(|&span| (key_of(&self.text, span), value_of(&self.text, span)))
    }

    /// The bytes held for the keys and values (their text, their positions
    /// and index), which stay within a small multiple of the input's size.
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn retained_bytes(&self) -> usize {
        self.text.capacity()
            + self.entries.capacity() * std::mem::size_of::<[u32; 3]>()
            + self.index.capacity() * (std::mem::size_of::<u32>() + 1)
    }

    /// The file these properties were loaded from, if they came from a file.
    pub(crate) fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    #[cfg(test)]
    /// Number of distinct keys.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    #[cfg(test)]
    /// Whether there are no keys at all.
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Sets `key` to `value`; false when the text outgrows the 4 GiB that
    /// positions can name.
    fn insert(&mut self, key: &str, value: &str) -> bool {
        let start = self.text.len();
        self.text.push_str(key);
        self.text.push_str(value);
        let (Ok(start), Ok(key_end), Ok(end)) = (
            u32::try_from(start),
            u32::try_from(start + key.len()),
            u32::try_from(self.text.len()),
        ) else {
            return false;
        };
        let span = [start, key_end, end];
        let Properties {
            text,
            entries,
            index,
            hasher,
            ..
        } = self;
        let hash = hasher.hash_one(key);
        match index.find(hash, |&i| key_of(text, entries[i as usize]) == key) {
            Some(&i) => {
                // The first value's bytes stay behind: a repeat is rare.
                entries[i as usize] = span;
            }
            None => {
                let Ok(next) = u32::try_from(entries.len()) else {
                    return false;
                };
                index.insert_unique(hash, next, |&i| {
                    hasher.hash_one(key_of(text, entries[i as usize]))
                });
                entries.push(span);
            }
        }
        true
    }
}

fn key_of(text: &str, [start, key_end, _]: [u32; 3]) -> &str {
    &text[start as usize..key_end as usize]
}

fn value_of(text: &str, [_, key_end, end]: [u32; 3]) -> &str {
    &text[key_end as usize..end as usize]
}

fn parse_with_origin(text: &str, origin: &str) -> Result<Properties, PropertiesError> {
    let mut properties = Properties::default();
    // Keys and values unescaped take no more than the text: held at once.
    properties.text.reserve_exact(text.len());
    for line in logical_lines(text) {
        let (key, value) = split_key_value(&line);
        let malformed = |(line, message)| PropertiesError::Malformed {
            path: origin.to_string(),
            line,
            message,
        };
        let key = unescape(key).map_err(malformed)?;
        let value = unescape(value).map_err(malformed)?;
        if !properties.insert(&key, &value) {
            return Err(malformed((
                line.last().map_or(0, |&(_, n)| n),
                "the keys and values hold more than 4 GiB".to_owned(),
            )));
        }
    }
    Ok(properties)
}

/// Whitespace as `Properties.load` sees it (not newlines: they end lines).
fn is_blank(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\u{c}')
}

/// Splits text into natural lines at `\r\n`, `\r` or `\n`, numbered from 1.
fn natural_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut rest = Some(text);
    std::iter::from_fn(move || {
        let current = rest?;
        match current.find(['\r', '\n']) {
            Some(i) => {
                let after = if current[i..].starts_with("\r\n") {
                    i + 2
                } else {
                    i + 1
                };
                rest = Some(&current[after..]);
                Some(&current[..i])
            }
            None => {
                rest = None;
                Some(current)
            }
        }
    })
    .enumerate()
    .map(|(i, line)| (i + 1, line))
}

/// Joins natural lines into logical lines: drops blank and comment lines,
/// leading whitespace, and the backslash of continued lines. A continuation with
/// nothing before it (a line of just `\\`) is no line yet, as in Java (its `len`
/// is 0): the next line may still be blank or a comment, which ends it as nothing,
/// unless the text ends right after its line break, which leaves an empty line
/// (an empty key).
///
/// One line at a time: a line's characters are held only while it is split.
fn logical_lines(text: &str) -> impl Iterator<Item = Vec<Located>> + '_ {
    let mut current: Option<Vec<Located>> = None;
    let mut naturals = natural_lines(text).peekable();
    std::iter::from_fn(move || {
        while let Some((number, natural)) = naturals.next() {
            let segment = natural.trim_start_matches(is_blank);
            let buffer = match current.as_mut() {
                Some(buffer) if !buffer.is_empty() => buffer,
                _ => {
                    if segment.is_empty() || segment.starts_with(['#', '!']) {
                        // Java looks for the end of the text right after a `\n` or a lone
                        // `\r`, but after `\r\n` only once it has skipped the `\n`.
                        let text_ends_here = natural.is_empty()
                            && naturals.peek().is_none()
                            && !text.ends_with("\r\n");
                        if !text_ends_here {
                            current = None;
                        }
                        continue;
                    }
                    current.insert(Vec::new())
                }
            };
            buffer.extend(segment.chars().map(|c| (c, number)));
            let trailing_backslashes = segment.chars().rev().take_while(|&c| c == '\\').count();
            if trailing_backslashes % 2 == 1 {
                buffer.pop();
            } else if let Some(done) = current.take() {
                return Some(done);
            }
        }
        current.take()
    })
}

/// Finds the key and value (still escaped) of a logical line.
fn split_key_value(line: &[Located]) -> (&[Located], &[Located]) {
    let mut key_end = line.len();
    let mut value_start = line.len();
    let mut has_separator = false;
    let mut escaped = false;
    for (i, &(c, _)) in line.iter().enumerate() {
        if !escaped && (c == '=' || c == ':') {
            (key_end, value_start, has_separator) = (i, i + 1, true);
            break;
        }
        if !escaped && is_blank(c) {
            (key_end, value_start) = (i, i + 1);
            break;
        }
        escaped = c == '\\' && !escaped;
    }
    while let Some(&(c, _)) = line.get(value_start) {
        if !is_blank(c) {
            if has_separator || (c != '=' && c != ':') {
                break;
            }
            has_separator = true;
        }
        value_start += 1;
    }
    (&line[..key_end], &line[value_start..])
}

/// Resolves backslash escapes; a bad `\uXXXX` yields its line and a message.
fn unescape(text: &[Located]) -> Result<String, (usize, String)> {
    let mut units: Vec<u16> = Vec::with_capacity(text.len());
    let mut chars = text.iter().copied();
    let mut scratch = [0u16; 2];
    while let Some((c, line)) = chars.next() {
        let resolved = if c != '\\' {
            c
        } else {
            match chars.next() {
                None => '\\',
                Some(('t', _)) => '\t',
                Some(('n', _)) => '\n',
                Some(('r', _)) => '\r',
                Some(('f', _)) => '\u{c}',
                Some(('u', _)) => {
                    let digits: String = chars.clone().take(4).map(|(c, _)| c).collect();
                    match u16::from_str_radix(&digits, 16) {
                        Ok(unit) if digits.len() == 4 && digits.chars().all(|c| c.is_ascii_hexdigit()) => {
                            chars.nth(3);
                            units.push(unit);
                            continue;
                        }
                        _ => {
                            return Err((
                                line,
                                format!(
                                    "malformed \\uXXXX escape \\u{digits}: expected 4 hex digits after \\u"
                                ),
                            ))
                        }
                    }
                }
                Some((other, _)) => other,
            }
        };
        units.extend_from_slice(resolved.encode_utf16(&mut scratch));
    }
    Ok(String::from_utf16_lossy(&units))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(text: &str) -> Vec<(String, String)> {
        Properties::parse(text)
            .unwrap_or_else(|e| panic!("{text:?}: {e}"))
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn check(cases: &[(&str, &[(&str, &str)])]) {
        for (text, expected) in cases {
            let expected: Vec<(String, String)> = expected
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            assert_eq!(pairs(text), expected, "input {text:?}");
        }
    }

    #[test]
    fn separators() {
        check(&[
            ("a=b", &[("a", "b")]),
            ("a:b", &[("a", "b")]),
            ("a b", &[("a", "b")]),
            ("a\tb", &[("a", "b")]),
            ("a\u{c}b", &[("a", "b")]),
            ("a = b", &[("a", "b")]),
            ("a   :   b", &[("a", "b")]),
            ("a==b", &[("a", "=b")]),
            ("a=:b", &[("a", ":b")]),
            ("a = = b", &[("a", "= b")]),
            ("a  b c ", &[("a", "b c ")]),
            ("a=b=c", &[("a", "b=c")]),
            ("url=http://h:80/p", &[("url", "http://h:80/p")]),
            ("  indented=yes", &[("indented", "yes")]),
            ("\t\u{c} k v", &[("k", "v")]),
        ]);
    }

    #[test]
    fn keys_without_values() {
        check(&[
            ("lonely", &[("lonely", "")]),
            ("lonely=", &[("lonely", "")]),
            ("lonely:", &[("lonely", "")]),
            ("lonely   ", &[("lonely", "")]),
            ("lonely = ", &[("lonely", "")]),
            ("=value", &[("", "value")]),
            (":value", &[("", "value")]),
        ]);
    }

    #[test]
    fn escapes() {
        check(&[
            (r"k=a\tb", &[("k", "a\tb")]),
            (r"k=a\nb\rc\fd", &[("k", "a\nb\rc\u{c}d")]),
            (r"k=\u0041\u00e9\u20AC", &[("k", "Aé€")]),
            (r"k=\uD83D\uDE00", &[("k", "😀")]),
            (r"k=\uD83D", &[("k", "\u{fffd}")]),
            (r"k=a\\b", &[("k", r"a\b")]),
            (r"k=\q\z", &[("k", "qz")]),
            (r"k=\#not\!comment", &[("k", "#not!comment")]),
            (r"k=\ leading", &[("k", " leading")]),
            (r"a\=b=c", &[("a=b", "c")]),
            (r"a\:b:c", &[("a:b", "c")]),
            (r"a\ b c", &[("a b", "c")]),
            (r"a\\=b", &[(r"a\", "b")]),
            (r"a\\\=b=c", &[(r"a\=b", "c")]),
            (r"\#k=v", &[("#k", "v")]),
            (r"k\u003dx=v", &[("k=x", "v")]),
            ("k=é ü 😀", &[("k", "é ü 😀")]),
        ]);
    }

    #[test]
    fn comments_and_blank_lines() {
        check(&[
            ("# comment\na=b", &[("a", "b")]),
            ("! comment\na=b", &[("a", "b")]),
            ("   # indented comment\na=b", &[("a", "b")]),
            ("#comment \\\na=b", &[("a", "b")]),
            ("a=b # not a comment", &[("a", "b # not a comment")]),
            ("a=#b", &[("a", "#b")]),
            ("\n\n   \n\t\na=b\n\n", &[("a", "b")]),
            ("", &[]),
            ("# only\n! comments", &[]),
        ]);
    }

    #[test]
    fn line_endings() {
        check(&[
            ("a=1\nb=2", &[("a", "1"), ("b", "2")]),
            ("a=1\r\nb=2\r\n", &[("a", "1"), ("b", "2")]),
            ("a=1\rb=2\r", &[("a", "1"), ("b", "2")]),
            ("a=1\r\n\r\nb=2", &[("a", "1"), ("b", "2")]),
            ("a=1\n\rb=2", &[("a", "1"), ("b", "2")]),
        ]);
    }

    #[test]
    fn continuation_lines() {
        check(&[
            ("k=a,\\\n    b,\\\n    c", &[("k", "a,b,c")]),
            ("k=a\\\r\n  b", &[("k", "ab")]),
            ("k=a\\\r  b", &[("k", "ab")]),
            ("k=a\\\\\nb=c", &[("k", r"a\"), ("b", "c")]),
            ("k=a\\\\\\\n b", &[("k", r"a\b")]),
            ("k=a\\\n# not a comment", &[("k", "a# not a comment")]),
            ("k=a\\\n\nb=c", &[("k", "a"), ("b", "c")]),
            ("k=a\\\n   \nb=c", &[("k", "a"), ("b", "c")]),
            ("k=a\\", &[("k", "a")]),
            ("k=a\\\n", &[("k", "a")]),
            ("ke\\\n  y=v", &[("key", "v")]),
            ("k\\\n =v", &[("k", "v")]),
            ("\\\nk=v", &[("k", "v")]),
            // A continuation with nothing before it is no line yet (Java's `len == 0`):
            // a comment or blank line next ends it as nothing; the end of the text
            // right after its line break leaves an empty key (each checked with Java 17).
            ("\\\n#foo=bar\nx=1\n", &[("x", "1")]),
            ("  \\\n\nx=1", &[("x", "1")]),
            ("\\", &[("", "")]),
            ("\\\n", &[("", "")]),
            ("\\\n\n", &[]),
            ("\\\n   ", &[]),
            ("\\\r", &[("", "")]),
            ("\\\r\n", &[]),
            ("x\\\n#c", &[("x#c", "")]),
            (" \\\n!c\ny=2", &[("y", "2")]),
        ]);
    }

    #[test]
    fn last_occurrence_wins() {
        let p = Properties::parse("a=1\nb=2\na=3\n").unwrap();
        assert_eq!(p.get("a"), Some("3"));
        assert_eq!(p.get("b"), Some("2"));
        assert_eq!(p.get("c"), None);
        assert_eq!(p.iter().collect::<Vec<_>>(), vec![("a", "3"), ("b", "2")]);
        assert_eq!(p.len(), 2);
        assert!(!p.is_empty());
        assert!(p.path().is_none());
    }

    #[test]
    fn malformed_unicode_escape_reports_line() {
        for (text, line) in [
            ("a=1\nb=\\u12G4", 2),
            ("a=\\u12", 1),
            ("\n\na=ok\\\n  \\uZZ", 4),
            ("\\u00=x", 1),
            ("a=\\u+123", 1),
        ] {
            match Properties::parse(text) {
                Err(PropertiesError::Malformed {
                    path,
                    line: l,
                    message,
                }) => {
                    assert_eq!(path, "<input>");
                    assert_eq!(l, line, "{text:?}");
                    assert!(message.contains("\\uXXXX"), "{message}");
                }
                other => panic!("{text:?}: expected Malformed, got {other:?}"),
            }
        }
        let err = Properties::parse("x=\\u").unwrap_err().to_string();
        assert!(
            err.starts_with("invalid properties file <input>, line 1:"),
            "{err}"
        );
    }

    #[test]
    fn spark_properties_written_by_spark_on_kubernetes() {
        let text = "#Java properties built from Kubernetes config map with name: spark-drv-8f2a1c8b3e5d4f6a-conf-map\r\n\
#Mon Jan 15 10:23:45 UTC 2024\r\n\
spark.driver.port=7078\r\n\
spark.kubernetes.executor.podNamePrefix=spark-pi-8f2a1c8b3e5d4f6a\r\n\
spark.master=k8s\\://https\\://kubernetes.default.svc\\:443\r\n\
spark.jars=https\\://repo1.maven.org/maven2/org/apache/spark/spark-avro_2.12/3.5.0/spark-avro_2.12-3.5.0.jar,local\\:///opt/spark/examples/jars/spark-examples_2.12-3.5.0.jar\r\n\
spark.files=s3a\\://bucket/conf/app.conf\\#app.conf\r\n\
spark.kubernetes.mountdependencies.mountTimeout=300s\r\n\
spark.driver.extraJavaOptions=-Dfoo\\=bar -XX\\:+UseG1GC\r\n\
spark.app.name=Spark Pi \\u00e9t\\u00e9\r\n\
spark.kubernetes.driver.label.team=\\ data\r\n";
        let p = Properties::parse(text).unwrap();
        assert_eq!(
            p.get("spark.master"),
            Some("k8s://https://kubernetes.default.svc:443")
        );
        assert_eq!(
            p.get("spark.jars"),
            Some("https://repo1.maven.org/maven2/org/apache/spark/spark-avro_2.12/3.5.0/spark-avro_2.12-3.5.0.jar,local:///opt/spark/examples/jars/spark-examples_2.12-3.5.0.jar")
        );
        assert_eq!(
            p.get("spark.files"),
            Some("s3a://bucket/conf/app.conf#app.conf")
        );
        assert_eq!(
            p.get("spark.kubernetes.mountdependencies.mountTimeout"),
            Some("300s")
        );
        assert_eq!(
            p.get("spark.driver.extraJavaOptions"),
            Some("-Dfoo=bar -XX:+UseG1GC")
        );
        assert_eq!(p.get("spark.app.name"), Some("Spark Pi été"));
        assert_eq!(p.get("spark.kubernetes.driver.label.team"), Some(" data"));
        assert_eq!(p.len(), 9);
        assert_eq!(p.iter().next(), Some(("spark.driver.port", "7078")));
    }

    #[test]
    fn spark_defaults_conf_with_whitespace_separators() {
        let text = "\
# Default system properties included when running spark-submit.
# This is useful for setting default environmental settings.

# Example:
spark.master                     spark://master:7077
spark.eventLog.enabled           true
spark.eventLog.dir               hdfs://namenode:8021/directory
spark.serializer                 org.apache.spark.serializer.KryoSerializer
spark.driver.memory              5g
spark.executor.extraJavaOptions  -XX:+PrintGCDetails -Dkey=value -Dnumbers=\"one two three\"
spark.jars                       https://repo.example.com/a.jar,\\
                                 https://repo.example.com/b.jar
\tspark.files\tfile:///etc/app.conf   
";
        let p = Properties::parse(text).unwrap();
        let expected = [
            ("spark.master", "spark://master:7077"),
            ("spark.eventLog.enabled", "true"),
            ("spark.eventLog.dir", "hdfs://namenode:8021/directory"),
            (
                "spark.serializer",
                "org.apache.spark.serializer.KryoSerializer",
            ),
            ("spark.driver.memory", "5g"),
            (
                "spark.executor.extraJavaOptions",
                "-XX:+PrintGCDetails -Dkey=value -Dnumbers=\"one two three\"",
            ),
            (
                "spark.jars",
                "https://repo.example.com/a.jar,https://repo.example.com/b.jar",
            ),
            ("spark.files", "file:///etc/app.conf   "),
        ];
        assert_eq!(p.iter().collect::<Vec<_>>(), expected);
    }

    #[test]
    fn load_reads_files_and_names_unreadable_ones() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("spark.properties");
        std::fs::write(&file, b"\xef\xbb\xbfa=1\nb=\xff\n").unwrap();
        let p = Properties::load(&file).unwrap();
        assert_eq!(p.get("a"), Some("1"));
        assert_eq!(p.get("b"), Some("\u{fffd}"));
        assert_eq!(p.path(), Some(file.as_path()));

        std::fs::write(&file, "a=\\u00\n").unwrap();
        let err = Properties::load(&file).unwrap_err().to_string();
        assert!(err.contains(&file.display().to_string()), "{err}");
        assert!(err.contains("line 1"), "{err}");

        let missing = dir.path().join("missing.properties");
        let err = Properties::load(&missing).unwrap_err();
        assert!(matches!(err, PropertiesError::Read { .. }));
        assert!(std::error::Error::source(&err).is_some());
        let message = err.to_string();
        assert!(
            message.contains(&missing.display().to_string()),
            "{message}"
        );
        assert!(message.contains("ConfigMap/Secret is mounted"), "{message}");

        // Too large: said so, without the hint about mounting.
        let large = dir.path().join("large.properties");
        let f = std::fs::File::create(&large).unwrap();
        f.set_len(crate::util::fs::CONFIG_LIMIT + 1).unwrap();
        let message = Properties::load(&large).unwrap_err().to_string();
        assert!(message.contains("is larger than 16 MiB"), "{message}");
        assert!(!message.contains("mounted"), "{message}");
    }

    /// Many short keys are held in a small multiple of the text (they took
    /// 32 times its size: a `char` and a line number per byte, two `String`s
    /// and a cloned key per entry).
    #[test]
    fn many_short_keys_are_held_compactly() {
        let text: String = (0..200_000).map(|i| format!("k{i}=v\n")).collect();
        let p = Properties::parse(&text).unwrap();
        assert_eq!(p.get("k199999"), Some("v"));
        assert!(
            p.retained_bytes() <= 4 * text.len() + (64 << 10),
            "{} bytes held for {} bytes of text",
            p.retained_bytes(),
            text.len()
        );
    }

    #[test]
    fn never_panics_on_odd_input() {
        let pieces = [
            "", "\\", "\\\\", "\\u", "\\u1", "\\uFFFF", "\\uD800", "=", ":", " ", "\t", "\r", "\n",
            "\r\n", "#", "!", "é", "😀", "k", "v", "\u{c}", "\0", "\u{feff}",
        ];
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..5000 {
            let mut text = String::new();
            for _ in 0..(rng % 12) {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                text.push_str(pieces[(rng % pieces.len() as u64) as usize]);
            }
            let _ = Properties::parse(&text);
        }
    }
}
