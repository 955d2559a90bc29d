//! Keeping secrets out of every output: logs, progress, the report and the
//! termination log.
//!
//! Two tools: [`redact_url`] masks the credentials and query values of one
//! URI, and a process-wide registry ([`register_secret`],
//! [`register_url_secrets`]) lets [`scrub`] mask known secrets wherever they
//! show up in free text, such as an HTTP client's error message.

use std::sync::{Mutex, MutexGuard, PoisonError};

use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use url::Url;

/// What a secret is replaced with.
const MASK: &str = "***";

/// Shorter strings are not registered: masking them would garble everything.
const MIN_SECRET_CHARS: usize = 4;

/// Characters `encodeURIComponent` leaves alone, as many clients encode.
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'!')
    .remove(b'~')
    .remove(b'*')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')');

/// Query parameters of signed URLs (S3, GCS, Azure SAS) whose values are not
/// secret. [`redact_url`] still masks them, but they are not registered, so
/// that values like `host`, `3600` or `https` are not masked everywhere.
const PUBLIC_QUERY_KEYS: &[&str] = &[
    "x-amz-algorithm",
    "x-amz-date",
    "x-amz-expires",
    "x-amz-signedheaders",
    "x-goog-algorithm",
    "x-goog-date",
    "x-goog-expires",
    "x-goog-signedheaders",
    "sv",
    "ss",
    "srt",
    "sp",
    "sr",
    "spr",
    "st",
    "se",
];

/// Query parameters whose value starts with an access key id followed by `/`.
const CREDENTIAL_QUERY_KEYS: &[&str] = &["x-amz-credential", "x-goog-credential"];

/// Registered secrets, longest first.
static SECRETS: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn secrets() -> MutexGuard<'static, Vec<String>> {
    SECRETS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Returns `uri` with its credentials and query values replaced by `***`.
///
/// The whole userinfo becomes `***` (`https://***@host/p`), every query
/// value becomes `***` while keys stay (`?X-Amz-Signature=***&v=***`; a
/// parameter without `=` is masked whole); scheme, host, port, path and
/// fragment are kept. A URI with nothing to mask is returned unchanged; one
/// that is masked comes back in normalized form. Strings that do not parse
/// as URLs are masked best-effort: everything between `//` and the last `@`,
/// and every query value after the first `?`. Never panics.
pub(crate) fn redact_url(uri: &str) -> String {
    match Url::parse(uri) {
        Ok(url) => redact_parsed(url, uri),
        Err(_) => redact_loose(uri),
    }
}

/// Remembers `secret` for the rest of the process so that [`scrub`] masks
/// it, together with its percent-encoded and percent-decoded forms.
///
/// Strings shorter than four characters are ignored: masking them would
/// garble unrelated output.
pub(crate) fn register_secret(secret: &str) {
    let forms = secret_forms(secret);
    if forms.is_empty() {
        return;
    }
    let mut registry = secrets();
    for form in forms {
        if !registry.contains(&form) {
            registry.push(form);
        }
    }
    registry.sort_by_key(|s| std::cmp::Reverse(s.len()));
}

/// Registers the secrets a URI carries so that [`scrub`] masks them
/// wherever they appear later, even outside the URI.
///
/// From the userinfo it registers the password and the whole `user:password`,
/// or the user name alone when there is no password (a token used as user
/// name, as in `https://TOKEN@host`). From the query it registers every
/// value of at least four characters, except those of signing parameters
/// known to be public (`X-Amz-Date`, `X-Amz-SignedHeaders`, SAS `sv`, ...);
/// for `X-Amz-Credential`/`X-Goog-Credential` the access key id is
/// registered on its own as well.
pub(crate) fn register_url_secrets(uri: &str) {
    for secret in url_secrets(uri) {
        register_secret(&secret);
    }
}

/// Returns `text` with every registered secret replaced by `***` and the
/// credentials and query values of every `scheme://...` URL in it masked as
/// [`redact_url`] does. Use it on anything that leaves the process.
pub(crate) fn scrub(text: &str) -> String {
    let registry = secrets();
    let masked = mask_secrets(text, &registry);
    let redacted = redact_urls_in_text(&masked);
    if redacted == masked {
        masked
    } else {
        mask_secrets(&redacted, &registry)
    }
}

/// Whether the userinfo of `url` names a container, not a credential: Hadoop's
/// Azure URIs (`abfss://container@account.dfs.core.windows.net/…`), without a
/// password.
fn userinfo_is_container(url: &Url) -> bool {
    matches!(url.scheme(), "abfss" | "abfs" | "wasbs" | "wasb") && url.password().is_none()
}

fn redact_parsed(mut url: Url, original: &str) -> String {
    let has_userinfo =
        (!url.username().is_empty() || url.password().is_some()) && !userinfo_is_container(&url);
    let query = url.query().map(redact_query);
    if !has_userinfo && query.as_deref() == url.query() {
        return original.to_string();
    }
    if has_userinfo {
        let _ = url.set_password(None);
        let _ = url.set_username("");
        if !url.username().is_empty() || url.password().is_some() {
            return redact_loose(original);
        }
    }
    url.set_query(query.as_deref());
    let mut out = String::from(url);
    if has_userinfo {
        match out.find("://") {
            Some(i) => out.insert_str(i + 3, "***@"),
            None => return redact_loose(original),
        }
    }
    out
}

/// Masks what looks like userinfo and query values in a string that is not
/// a valid URL.
fn redact_loose(text: &str) -> String {
    let parts = LooseParts::split(text);
    let mut out = String::with_capacity(text.len());
    out.push_str(parts.head);
    if parts.userinfo.is_some() {
        out.push_str(MASK);
        out.push('@');
    }
    out.push_str(parts.middle);
    if let Some(query) = parts.query {
        out.push('?');
        out.push_str(&redact_query(query));
    }
    out.push_str(parts.tail);
    out
}

/// A string cut where a URL's userinfo and query would be, without parsing.
struct LooseParts<'a> {
    /// Up to and including `//`.
    head: &'a str,
    /// Between `//` and the last `@` after it.
    userinfo: Option<&'a str>,
    /// From after the userinfo to before the `?`.
    middle: &'a str,
    /// Between the first `?` and the next `#`.
    query: Option<&'a str>,
    /// The `#` and what follows, if anything.
    tail: &'a str,
}

impl<'a> LooseParts<'a> {
    fn split(text: &'a str) -> Self {
        let (head, rest) = match text.find("//") {
            Some(i) => text.split_at(i + 2),
            None => ("", text),
        };
        let (userinfo, rest) = match rest.rfind('@') {
            Some(at) if !head.is_empty() => (Some(&rest[..at]), &rest[at + 1..]),
            _ => (None, rest),
        };
        let (middle, query, tail) = match rest.find('?') {
            Some(q) => {
                let after = &rest[q + 1..];
                let end = after.find('#').unwrap_or(after.len());
                (&rest[..q], Some(&after[..end]), &after[end..])
            }
            None => (rest, None, ""),
        };
        LooseParts {
            head,
            userinfo,
            middle,
            query,
            tail,
        }
    }
}

/// `a=1&b&c=` -> `a=***&***&c=`.
fn redact_query(query: &str) -> String {
    query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((key, "")) => format!("{key}="),
            Some((key, _)) => format!("{key}={MASK}"),
            None if pair.is_empty() => String::new(),
            None => MASK.to_string(),
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// The forms of a secret worth registering: as given, percent-decoded and
/// percent-encoded; none when it is too short.
fn secret_forms(secret: &str) -> Vec<String> {
    if secret.chars().count() < MIN_SECRET_CHARS {
        return Vec::new();
    }
    let candidates = [
        secret.to_string(),
        percent_decode_str(secret).decode_utf8_lossy().into_owned(),
        utf8_percent_encode(secret, NON_ALPHANUMERIC).to_string(),
        utf8_percent_encode(secret, COMPONENT).to_string(),
    ];
    let mut forms: Vec<String> = Vec::with_capacity(candidates.len());
    for form in candidates {
        if form.chars().count() >= MIN_SECRET_CHARS && !forms.contains(&form) {
            forms.push(form);
        }
    }
    forms
}

/// The secrets [`register_url_secrets`] registers for `uri`.
fn url_secrets(uri: &str) -> Vec<String> {
    let mut found = Vec::new();
    let (user, password, query) = match Url::parse(uri) {
        Ok(url) if userinfo_is_container(&url) => {
            (String::new(), None, url.query().map(str::to_string))
        }
        Ok(url) => (
            url.username().to_string(),
            url.password().map(str::to_string),
            url.query().map(str::to_string),
        ),
        Err(_) => {
            let parts = LooseParts::split(uri);
            let (user, password) = match parts.userinfo {
                Some(info) => match info.split_once(':') {
                    Some((user, password)) => (user, Some(password.to_string())),
                    None => (info, None),
                },
                None => ("", None),
            };
            (user.to_string(), password, parts.query.map(str::to_string))
        }
    };
    match password {
        Some(password) => {
            found.push(format!("{user}:{password}"));
            found.push(password);
        }
        None if !user.is_empty() => found.push(user),
        None => {}
    }
    for (key, value) in query
        .iter()
        .flat_map(|q| q.split('&'))
        .filter_map(|p| p.split_once('='))
    {
        let key = percent_decode_str(key)
            .decode_utf8_lossy()
            .to_ascii_lowercase();
        if PUBLIC_QUERY_KEYS.contains(&key.as_str()) {
            continue;
        }
        if CREDENTIAL_QUERY_KEYS.contains(&key.as_str()) {
            let decoded = percent_decode_str(value).decode_utf8_lossy();
            if let Some((key_id, _)) = decoded.split_once('/') {
                found.push(key_id.to_string());
            }
        }
        found.push(value.to_string());
    }
    found
}

/// Replaces every occurrence of every secret (overlaps merged) with `***`.
fn mask_secrets(text: &str, secrets: &[String]) -> String {
    let mut spans: Vec<(usize, usize)> = Vec::new();
    for secret in secrets.iter().filter(|s| !s.is_empty()) {
        let mut from = 0;
        while let Some(found) = text[from..].find(secret.as_str()) {
            let start = from + found;
            spans.push((start, start + secret.len()));
            from = start + text[start..].chars().next().map_or(1, char::len_utf8);
        }
    }
    if spans.is_empty() {
        return text.to_string();
    }
    spans.sort_unstable();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut spans = spans.into_iter().peekable();
    while let Some((start, mut end)) = spans.next() {
        while let Some(&(next_start, next_end)) = spans.peek() {
            if next_start > end {
                break;
            }
            end = end.max(next_end);
            spans.next();
        }
        out.push_str(&text[copied..start]);
        out.push_str(MASK);
        copied = end;
    }
    out.push_str(&text[copied..]);
    out
}

/// Applies [`redact_url`] to every `scheme://...` token in free text.
fn redact_urls_in_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut search_from = 0;
    while let Some(found) = text[search_from..].find("://") {
        let separator = search_from + found;
        let start = scheme_start(text, separator);
        let end = token_end(text, separator + 3);
        search_from = end.max(separator + 3);
        let Some(start) = start.filter(|&s| s >= copied) else {
            continue;
        };
        let token = &text[start..end];
        let redacted = redact_url(token);
        if redacted != token {
            out.push_str(&text[copied..start]);
            out.push_str(&redacted);
            copied = end;
        }
    }
    out.push_str(&text[copied..]);
    out
}

/// Where the scheme ending at `separator` starts, if it is a valid scheme.
fn scheme_start(text: &str, separator: usize) -> Option<usize> {
    let before = &text[..separator];
    let scheme_len = before
        .chars()
        .rev()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        .count();
    let scheme = &before[before.len() - scheme_len..];
    let skip = scheme.find(|c: char| c.is_ascii_alphabetic())?;
    Some(before.len() - scheme_len + skip)
}

/// Where a URL starting before `from` ends in free text: at whitespace,
/// quotes or angle brackets, without trailing punctuation.
fn token_end(text: &str, from: usize) -> usize {
    let rest = &text[from..];
    let stop = rest
        .find(|c: char| {
            c.is_whitespace() || c.is_control() || matches!(c, '"' | '\'' | '<' | '>' | '`' | '\\')
        })
        .unwrap_or(rest.len());
    let mut token = &rest[..stop];
    loop {
        let trimmed = token.trim_end_matches(['.', ',', ';', ':', '!', '?']);
        let trimmed = match trimmed.chars().last() {
            Some(')') if trimmed.matches('(').count() < trimmed.matches(')').count() => {
                &trimmed[..trimmed.len() - 1]
            }
            Some(']') if trimmed.matches('[').count() < trimmed.matches(']').count() => {
                &trimmed[..trimmed.len() - 1]
            }
            _ => trimmed,
        };
        if trimmed.len() == token.len() {
            break;
        }
        token = trimmed;
    }
    from + token.len()
}

/// An error and its causes (`source()` chain) as one line, `: `-joined, with
/// causes already contained in the text skipped, scrubbed of secrets.
pub(crate) fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut next = err.source();
    while let Some(cause) = next {
        let part = cause.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        next = cause.source();
    }
    scrub(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redact_url_masks_userinfo_and_query_values() {
        let cases: &[(&str, &str)] = &[
            ("https://user:password@host/p", "https://***@host/p"),
            ("https://user@host/p", "https://***@host/p"),
            ("https://:password@host/p", "https://***@host/p"),
            ("https://user:p%40ss@host/p", "https://***@host/p"),
            ("https://user:pa ss@host/p", "https://***@host/p"),
            (
                "http://user:pw@host:8080/a/b.jar#alias.jar",
                "http://***@host:8080/a/b.jar#alias.jar",
            ),
            ("https://h/p?token=abc&v=1", "https://h/p?token=***&v=***"),
            ("https://h/p?flag&a=&b=1&&c=x=y", "https://h/p?***&a=&b=***&&c=***"),
            ("https://u:p@h/p?k=v#frag", "https://***@h/p?k=***#frag"),
            ("http://[::1]:8080/x.jar?k=v", "http://[::1]:8080/x.jar?k=***"),
            ("HTTPS://User:Pw@Example.COM/p?q=1", "https://***@example.com/p?q=***"),
            ("s3a://key:secret@bucket/p?x=1", "s3a://***@bucket/p?x=***"),
            (
                "https://bucket.s3.us-east-1.amazonaws.com/jars/app.jar?X-Amz-Algorithm=AWS4-HMAC-SHA256\
&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20240101%2Fus-east-1%2Fs3%2Faws4_request\
&X-Amz-Date=20240101T000000Z&X-Amz-Expires=3600&X-Amz-SignedHeaders=host\
&X-Amz-Security-Token=IQoJb3JpZ2luX2VjEHoaCXVzLWVhc3QtMSJHMEUCIQ%2BexampleToken%3D\
&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404",
                "https://bucket.s3.us-east-1.amazonaws.com/jars/app.jar?X-Amz-Algorithm=***\
&X-Amz-Credential=***&X-Amz-Date=***&X-Amz-Expires=***&X-Amz-SignedHeaders=***\
&X-Amz-Security-Token=***&X-Amz-Signature=***",
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(redact_url(input), *expected, "input {input:?}");
        }
    }

    #[test]
    fn redact_url_leaves_clean_uris_untouched() {
        for uri in [
            "https://repo1.maven.org/maven2/a/b/1.0/b-1.0.jar",
            "https://host/p/x.jar#renamed.jar",
            "https://HOST/p/../x.jar",
            "http://host",
            "local:///opt/spark/jars/app.jar",
            "file:///tmp/a%20b.jar",
            "https://h/p?",
            "https://h/p?a=",
            "/just/a/path",
            "garbage",
            "",
        ] {
            assert_eq!(redact_url(uri), uri);
        }
    }

    #[test]
    fn redact_url_is_best_effort_on_unparseable_strings() {
        let cases: &[(&str, &str)] = &[
            (
                "s3a://AKIA:sec/ret@bucket/p?x=1",
                "s3a://***@bucket/p?x=***",
            ),
            ("https://user:pa#ss@host/p", "https://***@host/p"),
            (
                "https://u:p@h:notaport/p?t=secret#f",
                "https://***@h:notaport/p?t=***#f",
            ),
            ("//user:pw@host/x.jar", "//***@host/x.jar"),
            ("/p/x.jar?token=abcd&v", "/p/x.jar?token=***&***"),
            ("not a url?token=abc", "not a url?token=***"),
            ("user@host", "user@host"),
            ("http://", "http://"),
            ("https://@", "https://***@"),
        ];
        for (input, expected) in cases {
            assert_eq!(redact_url(input), *expected, "input {input:?}");
        }
    }

    #[test]
    fn scrub_masks_urls_inside_free_text() {
        let cases: &[(&str, &str)] = &[
            (
                "error sending request for url (https://bob:Hunter2pw@h.example/x.jar?token=tok123456): connection refused",
                "error sending request for url (https://***@h.example/x.jar?token=***): connection refused",
            ),
            (
                r#"{"uri":"https://u:pw@h/x?sig=abc","n":1}"#,
                r#"{"uri":"https://***@h/x?sig=***","n":1}"#,
            ),
            (
                "fetching https://u:pw@a/x, then s3a://k:s@b/y.",
                "fetching https://***@a/x, then s3a://***@b/y.",
            ),
            ("see <https://h/x?t=1>", "see <https://h/x?t=***>"),
            ("[https://h/(x)?t=1]", "[https://h/(x)?t=***]"),
            ("http://a/x?u=http://b/y?t=2 done", "http://a/x?u=*** done"),
            ("nothing to see here", "nothing to see here"),
            ("odd ://user:pw@h and 9x://q?a=b", "odd ://user:pw@h and 9x://q?a=***"),
            ("é→https://u:p@h/ü?x=ä", "é→https://***@h/%C3%BC?x=***"),
        ];
        for (input, expected) in cases {
            assert_eq!(scrub(input), *expected, "input {input:?}");
        }
    }

    #[test]
    fn registered_url_secrets_are_scrubbed_everywhere() {
        register_url_secrets("https://alice:s3cr%40tPassW0rd@host.example/x.jar");
        assert_eq!(
            scrub("auth failed: s3cr@tPassW0rd / s3cr%40tPassW0rd / alice:s3cr%40tPassW0rd"),
            "auth failed: *** / *** / ***"
        );
        assert_eq!(scrub("user alice logged in"), "user alice logged in");

        register_url_secrets("https://ghp_TokenAsUserName42@github.example/o/r.jar");
        assert_eq!(
            scrub("bad credentials ghp_TokenAsUserName42"),
            "bad credentials ***"
        );

        register_url_secrets("https://h.example/x.jar?token=tokValue987&dl=1&flag");
        assert_eq!(
            scrub("got tokValue987 back, dl=1, flag"),
            "got *** back, dl=1, flag"
        );
    }

    #[test]
    fn registered_signed_s3_query_values_are_scrubbed() {
        register_url_secrets(
            "https://b.s3.amazonaws.com/k.jar?X-Amz-Algorithm=AWS4-HMAC-SHA256\
&X-Amz-Credential=AKIAREGISTEREDKEY1%2F20240101%2Fus-east-1%2Fs3%2Faws4_request\
&X-Amz-Date=20240101T000000Z&X-Amz-Expires=3600&X-Amz-SignedHeaders=host\
&X-Amz-Security-Token=FwoGZXIvYXdzEBYaD%2Bsess%2Fion%3D\
&X-Amz-Signature=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        );
        let text = "SignatureDoesNotMatch: expected 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef \
for AKIAREGISTEREDKEY1 with token FwoGZXIvYXdzEBYaD+sess/ion= via host, expires 3600 on 20240101T000000Z";
        assert_eq!(
            scrub(text),
            "SignatureDoesNotMatch: expected *** for *** with token *** via host, expires 3600 on 20240101T000000Z"
        );
    }

    #[test]
    fn register_secret_covers_encoded_forms_and_ignores_short_strings() {
        register_secret("p@ss w/rd+x");
        assert_eq!(
            scrub("a p@ss w/rd+x b p%40ss%20w%2Frd%2Bx c"),
            "a *** b *** c"
        );
        register_secret("abc");
        register_secret("");
        assert_eq!(scrub("abc def"), "abc def");
    }

    #[test]
    fn overlapping_secrets_are_masked_together() {
        let secrets = [
            "abcdef".to_string(),
            "cdefgh".to_string(),
            "aaaa".to_string(),
        ];
        let cases = [
            ("xabcdefghy", "x***y"),
            ("aaaaa!", "***!"),
            ("abcdef abcdef", "*** ***"),
            ("none", "none"),
            ("", ""),
        ];
        for (input, expected) in cases {
            assert_eq!(mask_secrets(input, &secrets), expected, "input {input:?}");
        }
    }

    #[test]
    fn url_secrets_skip_public_signing_parameters() {
        let found = url_secrets("https://h/x?X-Amz-Date=20240101T000000Z&X-Amz-SignedHeaders=host&sv=2020-08-04&spr=https&sig=SasSignature%3D");
        assert_eq!(found, vec!["SasSignature%3D".to_string()]);
        let found = url_secrets("s3a://KEY:se/cret@bucket/p");
        assert_eq!(
            found,
            vec!["KEY:se/cret".to_string(), "se/cret".to_string()]
        );
    }

    #[test]
    fn never_panics_on_odd_input() {
        let pieces = [
            "://", "//", "@", ":", "?", "=", "&", "#", "%", "%zz", "%4", "[", "]", "(", ")", "é",
            " ", "\n", "\"", "h", "https", "x.", "\u{0}", "\\", "ü", "+", "1",
        ];
        let mut rng = 0xdead_beef_cafe_f00du64;
        for _ in 0..5000 {
            let mut text = String::new();
            for _ in 0..(rng % 14) {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                text.push_str(pieces[(rng % pieces.len() as u64) as usize]);
            }
            let _ = redact_url(&text);
            let _ = redact_urls_in_text(&text);
            let _ = url_secrets(&text);
            let _ = secret_forms(&text);
            let _ = mask_secrets(&text, &["é".to_string(), "//".to_string()]);
        }
    }
}

#[cfg(test)]
mod azure_tests {
    use super::*;

    #[test]
    fn an_azure_container_is_not_a_credential() {
        let uri = "abfss://jars@acct.dfs.core.windows.net/a.jar";
        assert_eq!(redact_url(uri), uri);
        assert!(url_secrets(uri).is_empty());
        let with_password = "abfss://jars:pw1234@acct.dfs.core.windows.net/a.jar";
        assert_eq!(
            redact_url(with_password),
            "abfss://***@acct.dfs.core.windows.net/a.jar"
        );
        assert_eq!(
            redact_url("https://token1234@host/a.jar"),
            "https://***@host/a.jar"
        );
    }
}
