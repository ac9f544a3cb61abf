//! `timestamp(pattern)`: the date and time as Java's `SimpleDateFormat` writes them (en_US),
//! for the letters scripts use: `G y M d E a H k K h m s S D u Z X z` and `'quoted'` text.
//! Zones are written by their offset (`z` as `GMT+01:00`): the client knows the offset, not
//! the zone's name.

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

/// A moment's calendar fields.
struct Fields {
    year: i64,
    /// 1–12.
    month: usize,
    day: i64,
    /// 1 (January 1st) – 366.
    day_of_year: i64,
    /// 0 (Monday) – 6.
    weekday: usize,
    hour: i64,
    minute: i64,
    second: i64,
    milli: i64,
}

impl Fields {
    /// The fields of `ms` milliseconds after the Unix epoch, in a zone `offset_secs` east of
    /// UTC.
    fn of(ms: i64, offset_secs: i64) -> Fields {
        let local = ms + offset_secs * 1000;
        let days = local.div_euclid(86_400_000);
        let in_day = local.rem_euclid(86_400_000);
        let (year, month, day) = civil_from_days(days);
        let day_of_year = days - days_from_civil(year, 1, 1) + 1;
        Fields {
            year,
            month,
            day,
            day_of_year,
            // 1970-01-01 was a Thursday.
            weekday: (days + 3).rem_euclid(7) as usize,
            hour: in_day / 3_600_000,
            minute: in_day / 60_000 % 60,
            second: in_day / 1000 % 60,
            milli: in_day % 1000,
        }
    }
}

/// Year, month (1–12) and day of the day `days` after 1970-01-01 (proleptic Gregorian).
fn civil_from_days(days: i64) -> (i64, usize, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month as usize, day)
}

/// Days from 1970-01-01 to a date.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year.rem_euclid(400);
    let mp = if month > 2 { month - 3 } else { month + 9 };
    let day_of_year = (153 * mp + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// Formats `ms` (milliseconds since the epoch) in a zone `offset_secs` east of UTC by a
/// `SimpleDateFormat` pattern; an unknown letter is an error, as in Java.
pub fn format(pattern: &str, ms: i64, offset_secs: i64) -> Result<String, String> {
    let f = Fields::of(ms, offset_secs);
    let mut out = String::new();
    let chars: Vec<char> = pattern.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' {
            // '' is a quote; 'text' is text.
            if chars.get(i + 1) == Some(&'\'') {
                out.push('\'');
                i += 2;
                continue;
            }
            // Quoted text, in which '' is a quote too.
            i += 1;
            while i < chars.len() {
                match (chars[i], chars.get(i + 1)) {
                    ('\'', Some('\'')) => {
                        out.push('\'');
                        i += 2;
                    }
                    ('\'', _) => {
                        i += 1;
                        break;
                    }
                    (other, _) => {
                        out.push(other);
                        i += 1;
                    }
                }
            }
            continue;
        }
        if !c.is_ascii_alphabetic() {
            out.push(c);
            i += 1;
            continue;
        }
        let n = chars[i..].iter().take_while(|&&d| d == c).count();
        i += n;
        let number = |v: i64| format!("{v:0n$}");
        let offset = |colon: bool| {
            let sign = if offset_secs < 0 { '-' } else { '+' };
            let minutes = offset_secs.abs() / 60;
            match colon {
                true => format!("{sign}{:02}:{:02}", minutes / 60, minutes % 60),
                false => format!("{sign}{:02}{:02}", minutes / 60, minutes % 60),
            }
        };
        out.push_str(&match c {
            'G' => "AD".to_string(),
            'y' if n == 2 => format!("{:02}", f.year.rem_euclid(100)),
            'y' => number(f.year),
            'M' if n >= 4 => MONTHS[f.month - 1].to_string(),
            'M' if n == 3 => MONTHS[f.month - 1][..3].to_string(),
            'M' => number(f.month as i64),
            'd' => number(f.day),
            'D' => number(f.day_of_year),
            'E' if n >= 4 => DAYS[f.weekday].to_string(),
            'E' => DAYS[f.weekday][..3].to_string(),
            'u' => number(f.weekday as i64 + 1),
            'a' => if f.hour < 12 { "AM" } else { "PM" }.to_string(),
            'H' => number(f.hour),
            'k' => number(if f.hour == 0 { 24 } else { f.hour }),
            'K' => number(f.hour % 12),
            'h' => number(if f.hour % 12 == 0 { 12 } else { f.hour % 12 }),
            'm' => number(f.minute),
            's' => number(f.second),
            'S' => number(f.milli),
            'Z' => offset(false),
            'X' if offset_secs == 0 => "Z".to_string(),
            'X' if n == 1 => offset(false)[..3].to_string(),
            'X' => offset(n >= 3),
            'z' => format!("GMT{}", offset(true)),
            other => return Err(format!("timestamp: illegal pattern character '{other}'")),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_write_what_simple_date_format_writes() {
        // 2026-11-26T06:41:05.007Z, a Thursday.
        let ms = 1_795_675_265_007;
        assert_eq!(
            format("yyyy-MM-dd HH:mm:ss.SSS", ms, 0).unwrap(),
            "2026-11-26 06:41:05.007"
        );
        assert_eq!(
            format("M/d/yy, h:mm a", ms, 0).unwrap(),
            "11/26/26, 6:41 AM"
        );
        assert_eq!(
            format("EEE, d MMM yyyy HH:mm:ss Z", ms, 3600).unwrap(),
            "Thu, 26 Nov 2026 07:41:05 +0100"
        );
        assert_eq!(
            format("EEEE MMMM D 'day''s' k K X z", ms, -5 * 3600).unwrap(),
            "Thursday November 330 day's 1 1 -05 GMT-05:00"
        );
        assert_eq!(format("yy", 0, 0).unwrap(), "70");
        assert!(format("yyyy-q", ms, 0).unwrap_err().contains("'q'"));
    }

    #[test]
    fn days_map_back_and_forth() {
        for days in [-719_468, -1, 0, 59, 365, 11_016, 20_418, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m as i64, d), days, "{y}-{m}-{d}");
        }
    }
}
