//! Continuous profiling (`loop=`): a recording's results go to a new file every period, named
//! by its `file=` pattern, and only the newest `keep=` files stay.

#![deny(unsafe_code)]

use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A recording's period that ended: where its results go and the time it spans.
pub struct Ended {
    /// Its file (`file=`, with `loop=` the pattern expanded), if any.
    pub file: Option<String>,
    /// When it began.
    pub began: SystemTime,
    /// When it ended.
    pub ended: SystemTime,
}

/// The files of one looping recording.
pub struct Rotation {
    /// The period.
    pub period: Duration,
    /// When the current period ends.
    pub due: Instant,
    /// When the current period began.
    pub began: SystemTime,
    pattern: Option<String>,
    keep: Option<usize>,
    sequence: u64,
    written: VecDeque<PathBuf>,
}

impl Rotation {
    /// A rotation of `period` writing to `pattern` (None: no files, the periods are only
    /// pushed), keeping `keep` files (all when None).
    pub fn new(period: Duration, pattern: Option<&str>, keep: Option<u32>) -> Rotation {
        Rotation {
            period,
            due: Instant::now() + period,
            began: SystemTime::now(),
            pattern: pattern.map(str::to_string),
            keep: keep.map(|k| k as usize),
            sequence: 0,
            written: VecDeque::new(),
        }
    }

    /// Ends the current period: its file's name (when there are files) and its span; the
    /// next period begins when this one ended, so that their spans meet.
    pub fn end_period(&mut self) -> Ended {
        self.sequence += 1;
        self.due = Instant::now() + self.period;
        let now = SystemTime::now();
        let began = std::mem::replace(&mut self.began, now);
        let file = self
            .pattern
            .as_deref()
            .map(|p| expand(p, self.sequence, now, std::process::id()));
        Ended {
            file,
            began,
            ended: now,
        }
    }

    /// Notes files written for a period; deletes the oldest beyond `keep`. Returns what it
    /// could not delete.
    pub fn written(&mut self, files: &[String]) -> Vec<String> {
        self.written.extend(files.iter().map(PathBuf::from));
        let mut failed = Vec::new();
        let Some(keep) = self.keep else {
            return failed;
        };
        // A period may write several files (one per event): keep whole periods.
        while self.written.len() > keep * files.len().max(1) {
            if let Some(old) = self.written.pop_front() {
                if let Err(e) = std::fs::remove_file(&old) {
                    failed.push(format!("cannot delete {}: {e}", old.display()));
                }
            }
        }
        failed
    }
}

/// `file=`'s pattern for one period: `%t` the time (UTC, `20261124-153000`), `%p` the JVM's
/// pid, `%n` the period's number from 1, `%%` a percent sign.
pub fn expand(pattern: &str, sequence: u64, now: SystemTime, pid: u32) -> String {
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push_str(&timestamp(now)),
            Some('p') => out.push_str(&pid.to_string()),
            Some('n') => out.push_str(&sequence.to_string()),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

/// `YYYYMMDD-HHMMSS` in UTC.
fn timestamp(now: SystemTime) -> String {
    let seconds = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rest) = (seconds / 86_400, seconds % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}-{:02}{:02}{:02}",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_expand_time_pid_and_sequence() {
        let at = UNIX_EPOCH + Duration::from_secs(1_795_530_600); // 2026-11-24 14:30:00 UTC
        assert_eq!(
            expand("/var/tmp/app-%t-%p-%n.jfr", 7, at, 42),
            "/var/tmp/app-20261124-143000-42-7.jfr"
        );
        assert_eq!(expand("100%%-%x-%", 1, at, 1), "100%-%x-%");
        assert_eq!(timestamp(UNIX_EPOCH), "19700101-000000");
        assert_eq!(
            timestamp(UNIX_EPOCH + Duration::from_secs(951_782_400)),
            "20000229-000000"
        );
    }

    #[test]
    fn only_the_newest_files_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let pattern = dir.path().join("p-%n.txt");
        let mut rotation = Rotation::new(Duration::from_secs(1), pattern.to_str(), Some(2));
        for _ in 0..4 {
            let file = rotation.end_period().file.unwrap();
            std::fs::write(&file, b"x").unwrap();
            assert!(rotation.written(&[file]).is_empty());
        }
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["p-3.txt", "p-4.txt"]);
    }
}
