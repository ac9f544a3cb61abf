//! Parsing of human-friendly units on the command line.

use std::time::Duration;

/// A length of time to run for (`-d`, `--timeout`): `5s`, `500ms`, `250us`, `2m`, `1h`, or a
/// bare number of seconds as async-profiler's `-d` takes it. Zero is refused.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    parse(text, true)
}

/// A sampling interval or threshold (`-i`, `--threshold`): a number with its unit. A bare
/// number is refused with a hint, since async-profiler reads `-i 10` as 10 ns and a user
/// may mean 10 ms. Zero is refused.
pub fn parse_interval(text: &str) -> Result<Duration, String> {
    parse(text, false)
}

fn parse(text: &str, bare_seconds: bool) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("'{text}' is not a duration (try 5s, 500ms)"))?;
    let seconds = match unit {
        "" if bare_seconds => value,
        "" => {
            return Err(format!(
                "'{text}' needs a unit: {text}ms? {text}us? {text}s?"
            ))
        }
        "s" => value,
        "ms" => value / 1e3,
        "us" | "µs" => value / 1e6,
        "ns" => value / 1e9,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => {
            return Err(format!(
                "unknown time unit '{unit}' in '{text}' (use ns, us, ms, s, m, h)"
            ))
        }
    };
    let duration =
        Duration::try_from_secs_f64(seconds).map_err(|_| format!("'{text}' is out of range"))?;
    if duration.is_zero() {
        return Err(format!("'{text}' must be more than zero"));
    }
    Ok(duration)
}

/// Bytes as people read them: `512 B`, `1.5 KiB`, `12.0 MiB`, ...
pub fn bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_units_or_bare_seconds() {
        assert_eq!(parse_duration("5s").unwrap(), Duration::from_secs(5));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("ms").is_err());
        assert!(parse_duration("0s").unwrap_err().contains("more than zero"));
        assert!(parse_duration("0").is_err());
        assert!(parse_duration("99999999999999999999h").is_err());
    }

    #[test]
    fn intervals_need_a_unit_and_say_which() {
        assert_eq!(parse_interval("10ms").unwrap(), Duration::from_millis(10));
        assert_eq!(parse_interval("250us").unwrap(), Duration::from_micros(250));
        assert_eq!(
            parse_interval("10").unwrap_err(),
            "'10' needs a unit: 10ms? 10us? 10s?"
        );
        assert!(parse_interval("0ms")
            .unwrap_err()
            .contains("more than zero"));
    }
}
