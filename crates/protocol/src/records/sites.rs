//! The SITES report of `jtap sites` (`start,event=alloc,sites`): allocation sites ranked by
//! live bytes, as HPROF's `heap=sites` printed them; with `leaks`, ranked by the live bytes of
//! objects that survived collections, the leak suspects.

use std::fmt::Write;

use serde::{Deserialize, Serialize};

/// Allocation sites, most live bytes first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sites {
    /// How the allocations were recorded.
    pub recorded: Recording,
    /// Objects whose frees were being watched at the end.
    pub tracked_objects: u64,
    /// Objects not watched (the live table was full).
    pub untracked_objects: u64,
    /// Samples dropped (the site table was full).
    pub dropped_samples: u64,
    /// The first sites by live bytes (then allocated bytes).
    pub sites: Vec<Site>,
    /// Sites recorded in all (not only those listed).
    pub site_count: u64,
    /// Live objects and bytes over all sites.
    pub live: Amount,
    /// Allocated objects and bytes over all sites.
    pub allocated: Amount,
    /// With `exact`: the tracer's check that every rewritten class got its bytes back.
    pub restored: Option<String>,
    /// With `leaks`: what the sites are ranked by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leaks: Option<Leaks>,
}

/// How a leak report ranks its sites: by the sampled objects still alive that survived at
/// least `min_age` of the `collections` seen while recording.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Leaks {
    /// Collections an object must have survived to count.
    pub min_age: u32,
    /// Collections that ended while recording.
    pub collections: u32,
}

impl Leaks {
    /// The collection intervals an old object can have been born in (after 0, 1, …
    /// `collections - min_age` collections).
    pub fn intervals(&self) -> u32 {
        match self.collections.checked_sub(self.min_age) {
            Some(last) => last + 1,
            None => 0,
        }
    }
}

/// What survived at a site (leak reports).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Survivors {
    /// Live objects and bytes that survived at least the report's `min_age` collections.
    pub old: Amount,
    /// Between how many collections those were allocated: a leak keeps objects from every
    /// interval, a cache filled once from one.
    pub born_in: u32,
    /// Collections the oldest of them survived.
    pub oldest: u32,
    /// Of `old`, those born in the later half of the collection intervals an old object can
    /// have been born in: a leak keeps about half of its old bytes there, a cache filled
    /// once none. Zero from agents before it.
    #[serde(default)]
    pub later: Amount,
    /// Of `old`, those born in each of up to eight equal parts of those intervals, oldest
    /// first: about even for a steady leak, all in the first for a cache filled once. Empty
    /// from agents before it.
    #[serde(default)]
    pub by_birth: Vec<Amount>,
}

/// How the allocations of a [`Sites`] report were recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "mode")]
pub enum Recording {
    /// Every allocation, by rewriting `classes` classes at start.
    Exact {
        /// Seconds recorded.
        seconds: f64,
        /// Classes rewritten at start.
        classes: u64,
    },
    /// One sample per `interval` bytes on average; counts are estimates.
    Sampled {
        /// Seconds recorded.
        seconds: f64,
        /// Mean bytes between samples.
        interval: u64,
    },
}

/// Objects and bytes (estimates when sampled).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Amount {
    /// Bytes.
    pub bytes: f64,
    /// Objects.
    pub objects: f64,
}

/// One allocation site: a class and the stack that allocated it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Site {
    /// Rank by live bytes, from 1.
    pub rank: u32,
    /// Java name of the class, e.g. `long[]`.
    pub class: String,
    /// What is still alive of it.
    pub live: Amount,
    /// Everything allocated there.
    pub allocated: Amount,
    /// The stack, top frame first, as `pkg.Class.method:line`.
    pub frames: Vec<String>,
    /// With `leaks`: what survived collections.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub survivors: Option<Survivors>,
    /// With `leaks`, for the first suspects: paths from a GC root to a few of their oldest
    /// objects.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<RootPath>,
    /// With `leaks`, for a suspect with paths: the object they last pass through together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder: Option<Holder>,
}

/// The object holding a leak suspect's survivors (a collection's element array, a map's
/// table), and what it reaches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Holder {
    /// Its step on the suspect's first path, as the path prints it (`.elementData:
    /// java.lang.Object[]`).
    pub step: String,
    /// Bytes and objects reachable from it through instance fields and array elements,
    /// itself included (classes and their statics not followed): for a collection whose
    /// elements nothing else holds, what it retains.
    pub reaches: Amount,
    /// Whether the count stopped at its limit: the amounts are then at least these.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub capped: bool,
}

/// A path from a GC root to one old object of a site, and what is known of the object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RootPath {
    /// Root first, each step as `how: class` (`system class: class app.Cache`, `static CACHE:
    /// java.util.ArrayList`, `.elementData: java.lang.Object[]`, `[12]: byte[]`, `local
    /// variable of app.Main.run: app.Cache`).
    pub steps: Vec<String>,
    /// When the object was allocated, in nanoseconds since the Unix epoch.
    pub allocated_ns: u64,
    /// How old it was when the path was taken, in nanoseconds.
    pub age_ns: u64,
    /// Its size in bytes.
    pub bytes: u64,
    /// Its length, for an array.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array_length: Option<u32>,
}

impl Sites {
    /// Keeps the first `top` sites.
    pub fn keep_first(&mut self, top: usize) {
        self.sites.truncate(top);
    }

    /// HPROF's columns: rank, self and accumulated share of live bytes, live and allocated
    /// bytes and objects, the class and its stack. A leak report (`leaks`) shows what
    /// survived instead: bytes, growth, ages, and paths from GC roots.
    pub fn to_text(&self) -> String {
        if let Some(leaks) = self.leaks {
            return self.leaks_text(leaks);
        }
        let recorded = self.recorded_text();
        let mut text = format!(
            "SITES BEGIN (ordered by live bytes) ({recorded}; {} objects tracked, {} untracked, {} samples dropped)\n",
            self.tracked_objects, self.untracked_objects, self.dropped_samples
        );
        text.push_str("            percent              live                   alloc'ed\n");
        text.push_str(
            " rank    self   accum         bytes    objs           bytes      objs  class / stack\n",
        );
        let share = |bytes: f64| {
            if self.live.bytes > 0.0 {
                100.0 * bytes / self.live.bytes
            } else {
                0.0
            }
        };
        let mut accum = 0.0;
        for site in &self.sites {
            accum += share(site.live.bytes);
            let _ = writeln!(
                text,
                "{:>5} {:>6.2}% {:>6.2}% {:>13.0} {:>7.0} {:>15.0} {:>9.0}  {}",
                site.rank,
                share(site.live.bytes),
                accum,
                site.live.bytes,
                site.live.objects,
                site.allocated.bytes,
                site.allocated.objects,
                site.class
            );
            for frame in &site.frames {
                let _ = writeln!(text, "{:>50}at {frame}", "");
            }
        }
        let _ = write!(
            text,
            "SITES END: {} sites; live {:.0} bytes in {:.0} objects; allocated {:.0} bytes in {:.0} objects",
            self.site_count,
            self.live.bytes + 0.0, // never print -0
            self.live.objects + 0.0,
            self.allocated.bytes + 0.0,
            self.allocated.objects + 0.0
        );
        if let Some(restored) = &self.restored {
            let _ = write!(text, "\n{restored}");
        }
        text
    }
}

impl Sites {
    fn recorded_text(&self) -> String {
        match self.recorded {
            Recording::Exact { seconds, classes } => format!(
                "every allocation recorded for {seconds:.1} s; exact; {classes} classes instrumented at start"
            ),
            Recording::Sampled { seconds, interval } => format!(
                "allocation sampling every {interval} bytes for {seconds:.1} s; estimated"
            ),
        }
    }

    /// The leak suspects: per site, the bytes and objects alive that survived `min_age`
    /// collections, how fast they grew, between how many collections they were born, the
    /// oldest's age and the share born in the later half, then what is live and was allocated there, the class and the stack.
    fn leaks_text(&self, leaks: Leaks) -> String {
        let seconds = match self.recorded {
            Recording::Exact { seconds, .. } | Recording::Sampled { seconds, .. } => seconds,
        };
        let mut text = format!(
            "LEAK SUSPECTS BEGIN (ordered by bytes alive after {} or more of the {} collections; {}; {} objects tracked, {} untracked)\n",
            leaks.min_age,
            leaks.collections,
            self.recorded_text(),
            self.tracked_objects,
            self.untracked_objects
        );
        text.push_str(
            " rank     old bytes    objs  bytes/min  born in  oldest  later  growth      live bytes   alloc'ed bytes  class / stack\n",
        );
        let per_minute = |bytes: f64| match seconds > 0.0 {
            true => bytes * 60.0 / seconds,
            false => 0.0,
        };
        for site in &self.sites {
            let survivors = site.survivors.clone().unwrap_or_default();
            let _ = writeln!(
                text,
                "{:>5} {:>13.0} {:>7.0} {:>10.0} {:>8} {:>7} {:>5.0}%  {:<8} {:>13.0} {:>16.0}  {}",
                site.rank,
                survivors.old.bytes,
                survivors.old.objects,
                per_minute(survivors.old.bytes),
                survivors.born_in,
                survivors.oldest,
                100.0 * survivors.later.bytes / survivors.old.bytes.max(1.0),
                sparkline(&survivors.by_birth, leaks.intervals()),
                site.live.bytes,
                site.allocated.bytes,
                site.class
            );
            for frame in &site.frames {
                let _ = writeln!(text, "{:>50}at {frame}", "");
            }
            for path in &site.paths {
                let _ = writeln!(
                    text,
                    "{:>50}path from a GC root to one of {} bytes, {:.1} s old:",
                    "",
                    path.bytes,
                    path.age_ns as f64 / 1e9
                );
                for step in &path.steps {
                    let _ = writeln!(text, "{:>52}{step}", "");
                }
            }
            if let Some(holder) = &site.holder {
                let _ = writeln!(
                    text,
                    "{:>50}held by {}, which reaches {}{:.0} bytes in {:.0} objects",
                    "",
                    holder.step,
                    if holder.capped { "at least " } else { "" },
                    holder.reaches.bytes,
                    holder.reaches.objects
                );
            }
        }
        let old: f64 = self
            .sites
            .iter()
            .filter_map(|s| s.survivors.as_ref())
            .map(|s| s.old.bytes)
            .sum();
        let _ = write!(
            text,
            "LEAK SUSPECTS END: {} sites; {:.0} bytes shown survived; live {:.0} bytes in {:.0} objects",
            self.site_count,
            old + 0.0,
            self.live.bytes + 0.0,
            self.live.objects + 0.0
        );
        text
    }
}

/// One character per part of the window, its height the old bytes born per collection
/// interval in that part (of `intervals` split as evenly as they go) against the most of any
/// part, `·` for none: `████████` a steady leak, `█·······` a cache filled once, `▁▂▃▄▅▆▇█`
/// a leak that speeds up; `-` from agents before the parts.
fn sparkline(parts: &[Amount], intervals: u32) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let (count, intervals) = (parts.len() as u64, u64::from(intervals.max(1)));
    // Interval b is in part b * count / intervals: part k begins at the first b reaching k.
    let begins = |k: u64| (k * intervals).div_ceil(count);
    let rates: Vec<f64> = (0..count)
        .map(|k| parts[k as usize].bytes / (begins(k + 1) - begins(k)).max(1) as f64)
        .collect();
    let most = rates.iter().copied().fold(0.0, f64::max);
    let line: String = rates
        .iter()
        .map(|&rate| match rate > 0.0 {
            true => BARS[((rate / most * 8.0).ceil() as usize).clamp(1, 8) - 1],
            false => '·',
        })
        .collect();
    match line.is_empty() {
        true => "-".to_string(),
        false => line,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn sites() -> Sites {
        let amount = |objects, bytes| Amount { bytes, objects };
        let site = |rank, class: &str, live, allocated, frames: &[&str]| Site {
            rank,
            class: class.into(),
            live,
            allocated,
            frames: frames.iter().map(|f| f.to_string()).collect(),
            survivors: None,
            paths: Vec::new(),
            holder: None,
        };
        Sites {
            recorded: Recording::Sampled {
                seconds: 2.0,
                interval: 1024,
            },
            tracked_objects: 4,
            untracked_objects: 0,
            dropped_samples: 0,
            sites: vec![
                site(
                    1,
                    "workloads.Sites$Kept",
                    amount(3.0, 750.0),
                    amount(5.0, 1000.0),
                    &["a.B.keep:4"],
                ),
                site(2, "long[]", amount(1.0, 250.0), amount(1.0, 500.0), &[]),
                site(3, "byte[]", amount(0.0, 0.0), amount(10.0, 3000.0), &[]),
            ],
            site_count: 3,
            live: amount(4.0, 1000.0),
            allocated: amount(16.0, 4500.0),
            restored: None,
            leaks: None,
        }
    }

    #[test]
    fn sites_read_as_hprof_printed_them() {
        let mut sites = sites();
        let text = sites.to_text();
        let rows: Vec<&str> = text
            .lines()
            .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
            .collect();
        assert_eq!(rows.len(), 3, "{text}");
        assert!(
            rows[0].contains("75.00%  75.00%") && rows[0].ends_with("workloads.Sites$Kept"),
            "{text}"
        );
        assert!(
            rows[1].contains("25.00% 100.00%") && rows[1].ends_with("long[]"),
            "{text}"
        );
        assert!(text.contains("at a.B.keep:4\n"), "{text}");
        assert!(
            text.ends_with("SITES END: 3 sites; live 1000 bytes in 4 objects; allocated 4500 bytes in 16 objects"),
            "{text}"
        );
        sites.keep_first(1);
        sites.restored = Some("restored 2 classes".into());
        let text = sites.to_text();
        assert!(
            !text.contains("long[]") && text.ends_with("SITES END: 3 sites; live 1000 bytes in 4 objects; allocated 4500 bytes in 16 objects\nrestored 2 classes"),
            "{text}"
        );
    }

    #[test]
    fn leak_reports_show_what_survived_and_how_fast_it_grew() {
        let mut sites = sites();
        sites.leaks = Some(Leaks {
            min_age: 2,
            collections: 12,
        });
        sites.sites[0].survivors = Some(Survivors {
            old: Amount {
                bytes: 600.0,
                objects: 2.0,
            },
            born_in: 9,
            oldest: 11,
            later: Amount {
                bytes: 300.0,
                objects: 1.0,
            },
            // 11 intervals in 8 parts: the 1st, 3rd and 6th hold two each, so as many bytes
            // per interval everywhere but the 7th.
            by_birth: [100.0, 50.0, 100.0, 50.0, 50.0, 100.0, 0.0, 50.0]
                .map(|bytes| Amount {
                    bytes,
                    objects: 1.0,
                })
                .to_vec(),
        });
        let text = sites.to_text();
        assert!(
            text.starts_with("LEAK SUSPECTS BEGIN (ordered by bytes alive after 2 or more of the 12 collections; allocation sampling every 1024 bytes for 2.0 s;"),
            "{text}"
        );
        let first = text.lines().nth(2).unwrap();
        let columns: Vec<&str> = first.split_whitespace().collect();
        assert_eq!(
            columns,
            [
                "1",
                "600",
                "2",
                "18000",
                "9",
                "11",
                "50%",
                "██████·█",
                "750",
                "1000",
                "workloads.Sites$Kept"
            ],
            "{text}"
        );
        assert!(text.ends_with("LEAK SUSPECTS END: 3 sites; 600 bytes shown survived; live 1000 bytes in 4 objects"), "{text}");
        let json = serde_json::to_string(&sites).unwrap();
        assert_eq!(serde_json::from_str::<Sites>(&json).unwrap(), sites);
    }
}
