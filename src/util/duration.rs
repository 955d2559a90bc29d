//! Durations on the command line and in Spark configuration: `500ms`, `30s`,
//! `5m`, `5min`, `2h`, `1.5s`, or a bare number of seconds.

use std::time::Duration;

const NANOS_PER_SEC: u128 = 1_000_000_000;

/// Longest fraction kept; more digits than this cannot change the result.
const MAX_FRACTION_DIGITS: usize = 18;

const EXAMPLES: &str = "expected a number with an optional unit ms, s, m/min or h, \
     e.g. 500ms, 30s, 1.5s, 5m, 2h (a bare number means seconds)";

/// The longest timeout or deadline accepted (30 days).
pub(crate) const MAX: Duration = Duration::from_secs(30 * 24 * 3600);

/// Parses a duration such as `500ms`, `30s`, `1.5s`, `5m`, `5min`, `2h` or
/// `300` (a bare number means seconds, as in Spark's time settings).
///
/// Units are case-insensitive and may be separated from the number by
/// whitespace; surrounding whitespace is ignored. Fractions finer than a
/// nanosecond are truncated. The error says what is wrong and shows examples.
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    let invalid = |what: &str| format!("invalid duration '{s}': {what}; {EXAMPLES}");
    let text = s.trim();
    if text.is_empty() {
        return Err(invalid("it is empty"));
    }
    if text.starts_with('-') {
        return Err(invalid("it is negative"));
    }
    let number_end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(number_end);
    if number.is_empty() {
        return Err(invalid("it does not start with a number"));
    }
    let unit = unit.trim_start();
    let nanos_per_unit: u128 = match unit.to_ascii_lowercase().as_str() {
        "ms" => 1_000_000,
        "" | "s" => NANOS_PER_SEC,
        "m" | "min" => 60 * NANOS_PER_SEC,
        "h" => 3600 * NANOS_PER_SEC,
        _ => {
            return Err(invalid(&format!(
                "unknown unit '{unit}' (supported: ms, s, m, min, h)"
            )))
        }
    };
    let (whole, fraction) = match number.split_once('.') {
        Some((whole, fraction)) => (whole, Some(fraction)),
        None => (number, None),
    };
    let well_formed = fraction.is_none_or(|f| !f.is_empty() && !f.contains('.'));
    if !well_formed {
        return Err(invalid(&format!("'{number}' is not a number")));
    }
    let too_large = || invalid("it is too large");
    let whole: u128 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| too_large())?
    };
    let mut nanos = whole.checked_mul(nanos_per_unit).ok_or_else(too_large)?;
    if let Some(fraction) = fraction {
        let digits = &fraction[..fraction.len().min(MAX_FRACTION_DIGITS)];
        let numerator: u128 = digits.parse().map_err(|_| too_large())?;
        let denominator = 10u128.pow(digits.len() as u32);
        nanos = nanos
            .checked_add(numerator * nanos_per_unit / denominator)
            .ok_or_else(too_large)?;
    }
    let secs = u64::try_from(nanos / NANOS_PER_SEC).map_err(|_| too_large())?;
    Ok(Duration::new(secs, (nanos % NANOS_PER_SEC) as u32))
}

/// Formats a duration for people: `350ms`, `1.2s`, `2m05s`, `1h05m`.
///
/// Below a second it shows whole milliseconds, below a minute tenths of a
/// second, below an hour minutes and seconds, otherwise hours and minutes
/// (each rounded to the nearest shown unit).
pub(crate) fn format_duration(d: Duration) -> String {
    let millis = d.as_millis();
    if millis < 1000 {
        return format!("{millis}ms");
    }
    let tenths = (millis + 50) / 100;
    if tenths < 600 {
        return format!("{}.{}s", tenths / 10, tenths % 10);
    }
    let secs = (millis + 500) / 1000;
    if secs < 3600 {
        return format!("{}m{:02}s", secs / 60, secs % 60);
    }
    let minutes = (secs + 30) / 60;
    format!("{}h{:02}m", minutes / 60, minutes % 60)
}

/// A duration of at most [`MAX`] (zero allowed).
pub(crate) fn bounded_duration(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d > MAX {
        return Err(format!("'{s}' is more than the maximum of 30 days"));
    }
    Ok(d)
}

/// A duration that must be more than zero (timeouts, intervals, deadlines)
/// and at most [`MAX`].
pub(crate) fn positive_duration(s: &str) -> Result<Duration, String> {
    let d = bounded_duration(s)?;
    if d.is_zero() {
        return Err(format!("'{s}' must be more than 0"));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_bare_seconds() {
        let ms = Duration::from_millis;
        let cases: &[(&str, Duration)] = &[
            ("500ms", ms(500)),
            ("1ms", ms(1)),
            ("0", Duration::ZERO),
            ("30", ms(30_000)),
            ("30s", ms(30_000)),
            ("300s", ms(300_000)),
            ("5m", ms(300_000)),
            ("5min", ms(300_000)),
            ("2h", ms(7_200_000)),
            ("1.5s", ms(1500)),
            ("1.5", ms(1500)),
            (".5s", ms(500)),
            ("0.25m", ms(15_000)),
            ("1.5ms", Duration::from_micros(1500)),
            ("0.000000001s", Duration::from_nanos(1)),
            ("0.0000000019s", Duration::from_nanos(1)),
            ("1.123456789123456789123s", Duration::new(1, 123_456_789)),
            ("  30s  ", ms(30_000)),
            ("30 s", ms(30_000)),
            ("30\tms", ms(30)),
            ("10S", ms(10_000)),
            ("10MS", ms(10)),
            ("2Min", ms(120_000)),
            ("1H", ms(3_600_000)),
            ("007s", ms(7000)),
            ("18446744073709551615", Duration::from_secs(u64::MAX)),
        ];
        for (input, expected) in cases {
            assert_eq!(parse_duration(input), Ok(*expected), "input {input:?}");
        }
    }

    #[test]
    fn rejects_garbage_with_a_helpful_message() {
        let cases: &[(&str, &str)] = &[
            ("", "it is empty"),
            ("   ", "it is empty"),
            ("-5s", "it is negative"),
            ("5d", "unknown unit 'd'"),
            ("5 sec", "unknown unit 'sec'"),
            ("5us", "unknown unit 'us'"),
            ("s", "it does not start with a number"),
            ("ms", "it does not start with a number"),
            (".", "'.' is not a number"),
            (".s", "'.' is not a number"),
            ("5.", "'5.' is not a number"),
            ("1.2.3s", "'1.2.3' is not a number"),
            ("1e3", "unknown unit 'e3'"),
            ("+5s", "it does not start with a number"),
            ("5s5", "unknown unit 's5'"),
            ("٣s", "it does not start with a number"),
            ("18446744073709551616", "it is too large"),
            ("99999999999999999999999999h", "it is too large"),
            (
                "99999999999999999999999999999999999999999",
                "it is too large",
            ),
        ];
        for (input, reason) in cases {
            let err = parse_duration(input).expect_err(input);
            assert!(err.contains(reason), "{input:?}: {err}");
            assert!(err.contains(&format!("'{input}'")), "{input:?}: {err}");
            assert!(err.contains("e.g. 500ms, 30s"), "{input:?}: {err}");
        }
    }

    #[test]
    fn formats_for_humans() {
        let ms = Duration::from_millis;
        let cases: &[(Duration, &str)] = &[
            (Duration::ZERO, "0ms"),
            (Duration::from_micros(999), "0ms"),
            (ms(350), "350ms"),
            (ms(999), "999ms"),
            (ms(1000), "1.0s"),
            (ms(1200), "1.2s"),
            (ms(1249), "1.2s"),
            (ms(1250), "1.3s"),
            (ms(59_949), "59.9s"),
            (ms(59_950), "1m00s"),
            (ms(60_000), "1m00s"),
            (ms(125_000), "2m05s"),
            (ms(3_599_499), "59m59s"),
            (ms(3_599_500), "1h00m"),
            (ms(3_900_000), "1h05m"),
            (Duration::from_secs(100 * 3600), "100h00m"),
            (Duration::MAX, "5124095576030431h00m"),
        ];
        for (d, expected) in cases {
            assert_eq!(format_duration(*d), *expected, "{d:?}");
        }
    }

    #[test]
    fn never_panics_on_odd_input() {
        let pieces = [
            "0",
            "9",
            ".",
            "-",
            "+",
            " ",
            "ms",
            "s",
            "m",
            "min",
            "h",
            "é",
            "\u{0}",
            "99999999999",
        ];
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..5000 {
            let mut text = String::new();
            for _ in 0..(rng % 8) {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                text.push_str(pieces[(rng % pieces.len() as u64) as usize]);
            }
            let _ = parse_duration(&text);
        }
    }
}
