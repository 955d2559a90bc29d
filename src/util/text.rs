//! Text from untrusted sources (jar entries, property values, server answers) made
//! safe for a terminal: control characters shown as escapes, never written raw.

use std::borrow::Cow;
use std::fmt::Write as _;

/// `s` with every control character (C0 including NUL, DEL, C1) escaped: `\n`,
/// `\r`, `\t`, `\x1b`, `\u{9b}`. Borrowed when there is none. For one value
/// (a name, a message) inside a line of human-readable output.
pub(crate) fn escape_controls(s: &str) -> Cow<'_, str> {
    escape(s, false)
}

/// Like [`escape_controls`], but line breaks (`\n`) are kept: for a whole block
/// of human-readable output about to be written to stdout or stderr.
pub(crate) fn terminal_safe(s: &str) -> Cow<'_, str> {
    escape(s, true)
}

/// For a formatted log line: what tracing's own escaping leaves raw (NUL, CR,
/// VT and the other C0 controls) escaped; line breaks, tabs and ESC (tracing
/// escapes it in values, so an ESC here is its own colouring) kept.
pub(crate) fn log_safe(s: &str) -> Cow<'_, str> {
    escape_except(s, |c| matches!(c, '\n' | '\t' | '\x1b'))
}

fn escape(s: &str, keep_newlines: bool) -> Cow<'_, str> {
    escape_except(s, |c| keep_newlines && c == '\n')
}

fn escape_except(s: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    let unsafe_char = |c: char| c.is_control() && !keep(c);
    if !s.chars().any(unsafe_char) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        match c {
            c if !unsafe_char(c) => out.push(c),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_escaped_and_the_rest_kept() {
        let cases = [
            ("com.ex.Plug", "com.ex.Plug"),
            ("é😀 a/b", "é😀 a/b"),
            (
                "com.ex.Plug\u{1b}[2J\u{1b}]0;pwn\u{7}",
                "com.ex.Plug\\x1b[2J\\x1b]0;pwn\\x07",
            ),
            ("a\0b", "a\\x00b"),
            ("a\rb\tc\nd", "a\\rb\\tc\\nd"),
            ("\u{7f}\u{9b}", "\\x7f\\u{9b}"),
        ];
        for (raw, shown) in cases {
            assert_eq!(escape_controls(raw), shown, "{raw:?}");
        }
        assert!(matches!(escape_controls("plain"), Cow::Borrowed(_)));
        assert_eq!(terminal_safe("a\u{1b}b\nc\0\n"), "a\\x1bb\nc\\x00\n");
        assert_eq!(
            log_safe("\u{1b}[2mINFO\u{1b}[0m a\0b\rc\td\u{7}\n"),
            "\u{1b}[2mINFO\u{1b}[0m a\\x00b\\rc\td\\x07\n"
        );
    }
}
