//! The small secret files pods mount: an upload token file, a kubeconfig (which
//! user's token `stage upload` sends), a resource secret file.

use crate::source::staging::secret_header;
use crate::stage::upload::token::{choose, first_token, header_safe, How};

/// Fuzz entry point: the same bytes as a token file, a kubeconfig (for its
/// current context, and for a context named by the first line) and a resource
/// secret file. A token is one trimmed line, neither blank nor a comment; a
/// kubeconfig's choice is the context asked for and a user it defines, with a
/// non-empty token when it has one; a secret header is the trimmed text and only
/// visible characters. A leading byte-order mark is dropped by all three.
pub fn secret_files(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    // A leading byte-order mark is not part of any of them.
    let body = text.strip_prefix('\u{feff}').unwrap_or(&text);
    if let Some(token) = first_token(&text) {
        assert!(!token.is_empty() && !token.starts_with('#') && token.trim() == token);
        assert!(body.lines().any(|l| l.trim() == token));
        assert!(!token.contains('\n'));
        if header_safe(token) {
            assert!(axum::http::HeaderValue::from_str(&format!("Bearer {token}")).is_ok());
        }
    }
    let named = text.lines().next().filter(|l| !l.is_empty());
    for context in [None, named] {
        if let Ok(Some(chosen)) = choose(data, context, "fuzz") {
            if let Some(asked) = context {
                assert_eq!(chosen.context, asked);
            }
            if let How::Token(token) = &chosen.how {
                assert!(!token.is_empty());
            }
        }
    }
    if let Ok(header) = secret_header(&text) {
        let sent = header
            .to_str()
            .map(str::to_owned)
            .unwrap_or_else(|_| String::from_utf8_lossy(header.as_bytes()).into_owned());
        assert_eq!(sent, body.trim());
        assert!(header.is_sensitive());
        assert!(!sent.is_empty() && !sent.contains(['\r', '\n', '\0']));
    }
}
