//! The properties reader against a second implementation: a literal port of Java's
//! `Properties.load` (JDK 17's `LineReader.readLine`, `load0` and `loadConvert`), one
//! character at a time as Java runs it, where [`crate::properties`] works in passes
//! (natural lines, logical lines, key/value, escapes). Both must give the same pairs in
//! the same order, or both refuse a malformed `\uXXXX`.

use crate::properties::Properties;

/// Fuzz entry point: any bytes (read as UTF-8, lossily, like a file).
pub fn properties(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let parsed = Properties::parse(&text).ok();
    // Held in a small multiple of the text (a file of millions of short keys
    // once took 32 times its size): the text once, 12 bytes and an index slot
    // per key, each at most doubled by growth.
    if let Some(p) = &parsed {
        let bound = 16 * text.len() + 4096;
        assert!(
            p.retained_bytes() <= bound,
            "{} bytes held for {} bytes of text",
            p.retained_bytes(),
            text.len()
        );
    }
    let ours = parsed.map(|p| {
        p.iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect::<Vec<_>>()
    });
    let java = java_load(&text);
    assert_eq!(
        ours, java,
        "properties disagree with Java's rules on {text:?}"
    );
}

fn is_blank(c: u16) -> bool {
    c == u16::from(b' ') || c == u16::from(b'\t') || c == 0x0c
}

fn is_eol(c: u16) -> bool {
    c == u16::from(b'\n') || c == u16::from(b'\r')
}

/// Java's `LineReader.readLine`: the next logical line (continuations joined, their
/// backslash and the next line's leading blanks dropped), `None` at the end.
fn read_line(chars: &[u16], off: &mut usize) -> Option<Vec<u16>> {
    let mut line: Vec<u16> = Vec::new();
    let mut skip_white = true;
    let mut appended_line_begin = false;
    let mut preceding_backslash = false;
    loop {
        let Some(&c) = chars.get(*off) else {
            if line.is_empty() {
                return None;
            }
            if preceding_backslash {
                line.pop();
            }
            return Some(line);
        };
        *off += 1;
        if skip_white {
            if is_blank(c) {
                continue;
            }
            if !appended_line_begin && is_eol(c) {
                continue;
            }
            skip_white = false;
            appended_line_begin = false;
        }
        if line.is_empty() && (c == u16::from(b'#') || c == u16::from(b'!')) {
            // A comment: the rest of the natural line.
            while let Some(&c) = chars.get(*off) {
                *off += 1;
                if is_eol(c) {
                    break;
                }
            }
            skip_white = true;
            continue;
        }
        if !is_eol(c) {
            line.push(c);
            preceding_backslash = c == u16::from(b'\\') && !preceding_backslash;
            continue;
        }
        if line.is_empty() {
            skip_white = true;
            continue;
        }
        if *off >= chars.len() {
            if preceding_backslash {
                line.pop();
            }
            return Some(line);
        }
        if !preceding_backslash {
            return Some(line);
        }
        // A continuation: the backslash is not part of the line.
        line.pop();
        skip_white = true;
        appended_line_begin = true;
        preceding_backslash = false;
        if c == u16::from(b'\r') && chars.get(*off) == Some(&u16::from(b'\n')) {
            *off += 1;
        }
    }
}

/// Java's `loadConvert`: escapes resolved; `None` for a malformed `\uXXXX`.
fn convert(chars: &[u16]) -> Option<String> {
    let mut out: Vec<u16> = Vec::with_capacity(chars.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        if c != u16::from(b'\\') {
            out.push(c);
            continue;
        }
        let Some(&next) = chars.get(i) else {
            // readLine never leaves an unescaped backslash at the end of a line.
            out.push(c);
            break;
        };
        i += 1;
        if next == u16::from(b'u') {
            if i + 4 > chars.len() {
                return None;
            }
            let mut value: u16 = 0;
            for &d in &chars[i..i + 4] {
                let digit = char::from_u32(u32::from(d))?.to_digit(16)?;
                value = (value << 4) | digit as u16;
            }
            i += 4;
            out.push(value);
            continue;
        }
        out.push(match char::from_u32(u32::from(next)) {
            Some('t') => u16::from(b'\t'),
            Some('r') => u16::from(b'\r'),
            Some('n') => u16::from(b'\n'),
            Some('f') => 0x0c,
            _ => next,
        });
    }
    Some(String::from_utf16_lossy(&out))
}

/// Java's `load0`: the pairs of `text`, a repeated key keeping its last value at its
/// first position (a `LinkedHashMap`'s order); `None` where Java throws.
fn java_load(text: &str) -> Option<Vec<(String, String)>> {
    let chars: Vec<u16> = text.encode_utf16().collect();
    let mut off = 0;
    let mut pairs: Vec<(String, String)> = Vec::new();
    while let Some(line) = read_line(&chars, &mut off) {
        let limit = line.len();
        let (mut key_len, mut value_start) = (0, limit);
        let (mut has_sep, mut preceding_backslash) = (false, false);
        while key_len < limit {
            let c = line[key_len];
            if (c == u16::from(b'=') || c == u16::from(b':')) && !preceding_backslash {
                value_start = key_len + 1;
                has_sep = true;
                break;
            } else if is_blank(c) && !preceding_backslash {
                value_start = key_len + 1;
                break;
            }
            preceding_backslash = c == u16::from(b'\\') && !preceding_backslash;
            key_len += 1;
        }
        while value_start < limit {
            let c = line[value_start];
            if !is_blank(c) {
                if !has_sep && (c == u16::from(b'=') || c == u16::from(b':')) {
                    has_sep = true;
                } else {
                    break;
                }
            }
            value_start += 1;
        }
        let key = convert(&line[..key_len])?;
        let value = convert(&line[value_start..])?;
        match pairs.iter_mut().find(|(k, _)| *k == key) {
            Some(pair) => pair.1 = value,
            None => pairs.push((key, value)),
        }
    }
    Some(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each case as Java 17's `Properties.load` loads it (checked with a JVM).
    #[test]
    fn the_port_follows_java() {
        let cases: &[(&str, &[(&str, &str)])] = &[
            ("a=b\n", &[("a", "b")]),
            ("\\", &[("", "")]),
            ("\\\n", &[("", "")]),
            ("\\\r", &[("", "")]),
            ("\\\r\n", &[]),
            ("\\\n\n", &[]),
            ("\\\n   ", &[]),
            ("  a : b \\\n   c\n", &[("a", "b c")]),
            // An empty line after a continuation ends the logical line.
            ("a=b\\\n\nc=d", &[("a", "b"), ("c", "d")]),
            // A continuation that leaves the line empty: the next line may be a comment.
            ("\\\n#foo=bar\nx=1\n", &[("x", "1")]),
            ("a\\=b=c", &[("a=b", "c")]),
            ("k\\u0041=\\u00e9", &[("kA", "é")]),
            ("a=1\na=2\nb=3", &[("a", "2"), ("b", "3")]),
        ];
        for (text, want) in cases {
            let want: Vec<(String, String)> = want
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            assert_eq!(java_load(text), Some(want), "{text:?}");
        }
        assert_eq!(java_load("a=\\u12"), None);
    }
}
