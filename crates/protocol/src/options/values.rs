//! The values of the option grammar: items split at unescaped commas, and durations, byte
//! counts, counts and texts parsed and printed as the canonical string writes them. A
//! parser's error says what the key takes; the caller names the key and the value.

use std::time::Duration;

use super::ParseError;

/// One comma-separated item: its raw text, and for `key=value` the key and unescaped value.
pub(super) struct Item {
    pub raw: String,
    pub key: String,
    pub value: Option<String>,
}

/// The items of an option string, values unescaped.
pub(super) fn split_items(text: &str) -> Result<Vec<Item>, ParseError> {
    let mut items = Vec::new();
    let mut raw = String::new();
    let mut key = String::new();
    let mut value: Option<String> = None;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            ',' => items.push(Item {
                raw: std::mem::take(&mut raw),
                key: std::mem::take(&mut key),
                value: value.take(),
            }),
            '\\' => {
                let Some(escaped) = chars.next() else {
                    return Err(ParseError::DanglingEscape(raw));
                };
                raw.push(c);
                raw.push(escaped);
                match &mut value {
                    Some(v) => v.push(escaped),
                    None => key.push(escaped),
                }
            }
            '=' if value.is_none() => {
                raw.push(c);
                value = Some(String::new());
            }
            _ => {
                raw.push(c);
                match &mut value {
                    Some(v) => v.push(c),
                    None => key.push(c),
                }
            }
        }
    }
    items.push(Item { raw, key, value });
    Ok(items)
}

/// `value` with `,` and `\\` escaped.
pub(super) fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        if c == ',' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The largest `jstackdepth` accepted.
pub const MAX_JSTACKDEPTH: u32 = 4096;

/// A regular expression's text (checked by whoever compiles it).
pub(super) fn pattern(value: &str) -> Result<String, String> {
    match value.is_empty() {
        true => Err("a regular expression matching frame names".into()),
        false => Ok(value.to_string()),
    }
}

/// A non-empty path, URL or name.
pub(super) fn path(value: &str) -> Result<String, String> {
    match value.is_empty() {
        true => Err("a path".into()),
        false => Ok(value.to_string()),
    }
}

/// A positive count; `what` says what it counts for the error.
pub(super) fn count(value: &str, what: &str) -> Result<u32, String> {
    value
        .parse::<u32>()
        .ok()
        .filter(|&n| n > 0 && value.starts_with(|c: char| c.is_ascii_digit()))
        .ok_or_else(|| format!("expected {what}"))
}

const UNITS: [(&str, u64); 4] = [
    ("s", 1_000_000_000),
    ("ms", 1_000_000),
    ("us", 1_000),
    ("ns", 1),
];

/// A positive duration: an integer with a unit `ns`, `us`, `ms` or `s` (none: ns).
pub(super) fn duration(value: &str) -> Result<Duration, String> {
    let expected = "a positive duration like 10ms (units ns, us, ms, s; no unit: ns)";
    let digits_end = value
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(value.len());
    let (number, unit) = value.split_at(digits_end);
    let scale = if unit.is_empty() {
        Some(1)
    } else {
        UNITS.iter().find(|(u, _)| *u == unit).map(|(_, s)| *s)
    };
    let nanos = scale
        .zip(number.parse::<u64>().ok())
        .and_then(|(scale, n)| n.checked_mul(scale))
        .filter(|&n| n > 0)
        .ok_or(expected)?;
    Ok(Duration::from_nanos(nanos))
}

const BYTE_UNITS: [(&str, u64); 3] = [("g", 1 << 30), ("m", 1 << 20), ("k", 1 << 10)];

/// The largest `alloc=` interval: HotSpot takes it as a `jint`.
pub const MAX_ALLOC_INTERVAL: u64 = i32::MAX as u64;

/// A positive number of bytes with an optional suffix k, m or g, at most
/// [`MAX_ALLOC_INTERVAL`].
pub(super) fn bytes(value: &str) -> Result<u64, String> {
    let digits_end = value
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(value.len());
    let (number, unit) = value.split_at(digits_end);
    let scale = if unit.is_empty() {
        Some(1)
    } else {
        BYTE_UNITS.iter().find(|(u, _)| *u == unit).map(|(_, s)| *s)
    };
    scale
        .zip(number.parse::<u64>().ok())
        .and_then(|(scale, n)| n.checked_mul(scale))
        .filter(|&n| (1..=MAX_ALLOC_INTERVAL).contains(&n))
        .ok_or_else(|| {
            format!(
                "a positive number of bytes like 512k (suffixes k, m, g; at most {MAX_ALLOC_INTERVAL})"
            )
        })
}

/// Bytes as [`bytes`] reads them, with the largest suffix that divides them.
pub(super) fn format_bytes(bytes: u64) -> String {
    match BYTE_UNITS
        .iter()
        .find(|(_, s)| bytes > 0 && bytes.is_multiple_of(*s))
    {
        Some((unit, scale)) => format!("{}{unit}", bytes / scale),
        None => bytes.to_string(),
    }
}

/// A duration as [`duration`] reads it, in the largest unit that divides it.
pub(super) fn format_duration(duration: Duration) -> String {
    // Parsing caps durations at u64 nanoseconds; larger ones print in seconds, which parse.
    let Ok(nanos) = u64::try_from(duration.as_nanos()) else {
        return format!("{}s", duration.as_secs());
    };
    let (unit, scale) = UNITS
        .iter()
        .find(|(_, s)| nanos % s == 0)
        .copied()
        .unwrap_or(("ns", 1));
    format!("{}{unit}", nanos / scale)
}
