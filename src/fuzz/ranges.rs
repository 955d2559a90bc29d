//! The byte-range headers: `Range` as the staging server and the mirror serve it,
//! and `Content-Range` as every ranged download trusts it.

use crate::net::ranges::{parse_content_range, parse_range, Span};

/// Fuzz entry point: the first 8 bytes are the object's size (little-endian, folded
/// to at most 2^40 so that both ends of the range space get reached), the rest a
/// `Range` header value. A part lies inside the object; an unsatisfiable range starts
/// at or after its end (or asks for a suffix of nothing).
pub fn range(data: &[u8]) {
    let Some((size, value)) = split_size(data) else {
        return;
    };
    match parse_range(&value, size) {
        Span::Full => {}
        Span::Part(first, last) => {
            assert!(
                first <= last && last < size,
                "{value:?} on {size} bytes: {first}-{last}"
            );
        }
        Span::Unsatisfiable => {
            let spec = value
                .trim()
                .strip_prefix("bytes=")
                .expect("only bytes= ranges");
            let first = spec.split('-').next().unwrap().trim();
            match first.parse::<u64>() {
                Ok(first) => assert!(first >= size, "{value:?} on {size} bytes"),
                Err(_) => assert!(first.is_empty(), "{value:?}"),
            }
        }
    }
}

/// Fuzz entry point: a `Content-Range` header value. An accepted range lies inside the
/// object, and re-serialized it is accepted the same way.
pub fn content_range(data: &[u8]) {
    let value = String::from_utf8_lossy(data);
    let Some((first, total)) = parse_content_range(&value) else {
        return;
    };
    let last = value
        .trim()
        .strip_prefix("bytes ")
        .and_then(|r| r.split_once('/'))
        .and_then(|(range, _)| range.split_once('-'))
        .map(|(_, last)| last.trim().parse::<u64>().expect("an accepted last byte"))
        .expect("an accepted range has a last byte");
    assert!(first <= last, "{value:?}");
    if let Some(total) = total {
        assert!(last < total, "{value:?}");
    }
    let total_text = total.map_or("*".to_owned(), |t| t.to_string());
    let again = format!("bytes {first}-{last}/{total_text}");
    assert_eq!(
        parse_content_range(&again),
        Some((first, total)),
        "{again:?}"
    );
}

fn split_size(data: &[u8]) -> Option<(u64, String)> {
    let (size, rest) = data.split_first_chunk::<8>()?;
    let size = u64::from_le_bytes(*size) % (1 << 40);
    Some((size, String::from_utf8_lossy(rest).into_owned()))
}
