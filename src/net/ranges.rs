//! What a download's `Range` (and `If-Range`) header asks of a stored object (a
//! staging bundle, a mirror blob): one `bytes=` range, served as 206; anything else
//! gets the whole object.

use axum::http::{header, HeaderMap};

/// What a `Range` header asks of a bundle.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Span {
    Full,
    /// First and last byte, inclusive.
    Part(u64, u64),
    Unsatisfiable,
}

/// One `bytes=` range; anything else (other units, several ranges, nonsense) is
/// served whole, as RFC 9110 allows.
pub(crate) fn parse_range(value: &str, size: u64) -> Span {
    let Some(spec) = value.trim().strip_prefix("bytes=") else {
        return Span::Full;
    };
    let Some((first, last)) = spec.split_once('-') else {
        return Span::Full;
    };
    if spec.contains(',') {
        return Span::Full;
    }
    let (first, last) = (first.trim(), last.trim());
    if first.is_empty() {
        return match last.parse::<u64>() {
            Ok(0) => Span::Unsatisfiable,
            Ok(_) if size == 0 => Span::Unsatisfiable,
            Ok(n) => Span::Part(size - n.min(size), size - 1),
            Err(_) => Span::Full,
        };
    }
    let Ok(start) = first.parse::<u64>() else {
        return Span::Full;
    };
    let end = if last.is_empty() {
        u64::MAX
    } else {
        match last.parse::<u64>() {
            Ok(end) if end >= start => end,
            _ => return Span::Full,
        }
    };
    if start >= size {
        return Span::Unsatisfiable;
    }
    Span::Part(start, end.min(size - 1))
}

/// A `Content-Range: bytes FIRST-LAST/TOTAL` (TOTAL may be `*`): the first byte and
/// the total, when the range is well formed and lies inside the object (FIRST ≤ LAST,
/// and LAST < TOTAL when the total is known). Anything else is no range: a server
/// that answers 206 with it is not trusted with the bytes.
pub(crate) fn parse_content_range(value: &str) -> Option<(u64, Option<u64>)> {
    let rest = value.trim().strip_prefix("bytes ")?;
    let (range, total) = rest.split_once('/')?;
    let (first, last) = range.split_once('-')?;
    let digits = |s: &str| -> Option<u64> {
        let s = s.trim();
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    let (first, last) = (digits(first)?, digits(last)?);
    let total = match total.trim() {
        "*" => None,
        other => Some(digits(other)?),
    };
    if first > last || total.is_some_and(|total| last >= total) {
        return None;
    }
    Some((first, total))
}

/// No `If-Range`, or one naming the current ETag (a date never matches: the whole
/// bundle is sent, which is always correct).
pub(crate) fn if_range_matches(headers: &HeaderMap, etag: &str) -> bool {
    headers
        .get(header::IF_RANGE)
        .is_none_or(|v| v.as_bytes() == etag.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        let cases = [
            ("bytes=0-9", 100, Span::Part(0, 9)),
            ("bytes=90-", 100, Span::Part(90, 99)),
            ("bytes=90-200", 100, Span::Part(90, 99)),
            ("bytes=-10", 100, Span::Part(90, 99)),
            ("bytes=-1000", 100, Span::Part(0, 99)),
            ("bytes=100-", 100, Span::Unsatisfiable),
            ("bytes=-0", 100, Span::Unsatisfiable),
            ("bytes=0-", 0, Span::Unsatisfiable),
            ("bytes=5-1", 100, Span::Full),
            ("bytes=0-1,5-6", 100, Span::Full),
            ("items=0-1", 100, Span::Full),
            ("bytes=x-", 100, Span::Full),
        ];
        for (header, size, want) in cases {
            assert_eq!(parse_range(header, size), want, "{header} of {size}");
        }
    }
}
