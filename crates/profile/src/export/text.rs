//! async-profiler-style text reports: `summary`, `traces=N`, `flat=N`.

use std::collections::HashMap;
use std::fmt::Write;

use super::ExportOptions;
use crate::event::{ALLOC, LIVE};
use crate::model::{Counter, FrameId, Profile, StackCounts};

fn percent(part: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        part as f64 * 100.0 / total as f64
    }
}

/// Totals, engine, interval, duration, failed stack walks by reason and dropped samples.
pub fn summary(profile: &Profile) -> String {
    let m = &profile.metadata;
    let total = profile.total_samples();
    let mut out = String::from("--- Execution profile ---\n");
    let _ = writeln!(out, "{:<22}: {}", "Event", m.event);
    // `live` (alloc) and `nativemem-live` are parts of their engines' results, not fallbacks.
    let part_of =
        m.event.starts_with(m.engine.as_str()) || (LIVE.is(&m.event) && ALLOC.is(&m.engine));
    if !m.engine.is_empty() && !part_of {
        let _ = writeln!(out, "{:<22}: {} (fallback)", "Engine used", m.engine);
    }
    let _ = writeln!(
        out,
        "{:<22}: {}",
        "Interval",
        format_interval(m.interval, &m.weight_unit)
    );
    let _ = writeln!(
        out,
        "{:<22}: {:.3} s",
        "Duration",
        m.duration_ns as f64 / 1e9
    );
    let _ = writeln!(out, "{:<22}: {}", "Total samples", total);
    let _ = writeln!(
        out,
        "{:<22}: {}",
        format!("Total {}", m.weight_unit),
        profile.total_weight()
    );
    let events = m.unit(Counter::Events);
    if events != "samples" {
        let _ = writeln!(
            out,
            "{:<22}: {}",
            format!("Estimated {events}"),
            profile.total(Counter::Events)
        );
    }
    let _ = writeln!(out, "{:<22}: {}", "Distinct stacks", profile.stack_count());
    for (reason, count) in &m.errors {
        let _ = writeln!(
            out,
            "{:<22}: {} ({:.2}%)",
            reason,
            count,
            percent(*count, total + m.dropped)
        );
    }
    let _ = writeln!(
        out,
        "{:<22}: {} ({:.2}%)",
        "Dropped samples",
        m.dropped,
        percent(m.dropped, total + m.dropped)
    );
    out
}

fn format_interval(interval: u64, unit: &str) -> String {
    match unit {
        "nanoseconds" if interval >= 1_000_000 && interval.is_multiple_of(1_000_000) => {
            format!("{} ms", interval / 1_000_000)
        }
        "nanoseconds" if interval >= 1_000 && interval.is_multiple_of(1_000) => {
            format!("{} us", interval / 1_000)
        }
        "nanoseconds" => format!("{interval} ns"),
        _ => format!("{interval} {unit}"),
    }
}

/// The top `options.top` stacks by the counter, leaf first, with the counter's value and
/// share (of the same counter) and the samples taken.
pub fn traces(profile: &Profile, options: &ExportOptions) -> String {
    let m = &profile.metadata;
    let counter = options.counter_for(profile);
    let total = profile.total(counter);
    let mut stacks = profile.stacks();
    stacks.sort_by_key(|(_, c)| std::cmp::Reverse(c.get(counter)));
    let mut out = String::new();
    for (stack, counts) in stacks.into_iter().take(options.top) {
        // Samples are shown beside any counter; with samples counted, the weight comes first.
        let (value, unit) = match counter {
            Counter::Samples => (counts.weight, m.weight_unit.as_str()),
            _ => (counts.get(counter), m.unit(counter)),
        };
        let _ = writeln!(
            out,
            "--- {value} {unit} ({:.2}%), {} samples",
            percent(counts.get(counter), total),
            counts.samples
        );
        for (depth, &id) in stack.iter().rev().enumerate() {
            let _ = writeln!(out, "  [{depth:>2}] {}", profile.frame(id).name);
        }
        out.push('\n');
    }
    out
}

/// The top `options.top` frames by self value of the counter (leaf frames), with their
/// share of the same counter and the samples taken.
pub fn flat(profile: &Profile, options: &ExportOptions) -> String {
    let m = &profile.metadata;
    let counter = options.counter_for(profile);
    let mut self_counts: HashMap<FrameId, StackCounts> = HashMap::new();
    for (stack, counts) in profile.stacks() {
        if let Some(&leaf) = stack.last() {
            let entry = self_counts.entry(leaf).or_default();
            entry.samples += counts.samples;
            entry.weight += counts.weight;
            entry.events += counts.events;
        }
    }
    let total = profile.total(counter);
    let mut rows: Vec<_> = self_counts.into_iter().collect();
    rows.sort_by(|a, b| {
        b.1.get(counter)
            .cmp(&a.1.get(counter))
            .then_with(|| profile.frame(a.0).name.cmp(&profile.frame(b.0).name))
    });
    // With samples counted, the first column is their weight (as async-profiler's).
    let shown = match counter {
        Counter::Samples => Counter::Total,
        other => other,
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>14}  {:>7}  {:>8}  top",
        m.unit(shown),
        "percent",
        "samples"
    );
    let _ = writeln!(
        out,
        "{:>14}  {:>7}  {:>8}  ---",
        "----------", "-------", "-------"
    );
    for (id, counts) in rows.into_iter().take(options.top) {
        let _ = writeln!(
            out,
            "{:>14}  {:>6.2}%  {:>8}  {}",
            counts.get(shown),
            percent(counts.get(counter), total),
            counts.samples,
            profile.frame(id).name
        );
    }
    out
}

/// Summary, then the top traces, then the flat profile: the default text output.
pub fn render_all(profile: &Profile, options: &ExportOptions) -> String {
    format!(
        "{}\n{}{}",
        summary(profile),
        traces(profile, options),
        flat(profile, options)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::tests::sample_profile;

    #[test]
    fn reports_show_shares() {
        let p = sample_profile();
        let s = summary(&p);
        assert!(s.contains("Total samples         : 8"), "{s}");
        assert!(s.contains("gc_active"));
        assert!(s.contains("Interval              : 10 ms"));
        let f = flat(&p, &ExportOptions::default());
        let first = f.lines().nth(2).unwrap();
        assert!(first.contains("50.00%") && first.ends_with("Main.c"), "{f}");
        let t = traces(
            &p,
            &ExportOptions {
                top: 1,
                ..ExportOptions::default()
            },
        );
        assert!(
            t.starts_with(
                "--- 40000000 nanoseconds (50.00%), 4 samples\n  [ 0] Main.c\n  [ 1] Main.main"
            ),
            "{t}"
        );
    }

    #[test]
    fn allocation_reports_count_bytes_with_shares_of_bytes_and_real_sample_counts() {
        let mut p = Profile::new(crate::Metadata {
            event: "alloc".into(),
            engine: "alloc".into(),
            interval: 524_288,
            weight_unit: "bytes".into(),
            ..crate::Metadata::default()
        });
        let frame = |name: &str| crate::Frame::new(name, crate::FrameKind::Compiled);
        let class = |name: &str| crate::Frame::new(name, crate::FrameKind::Class);
        // Many small objects (few bytes, many objects) and a few big ones (most bytes).
        let small = StackCounts {
            samples: 3,
            weight: 1_000,
            events: 90_000,
        };
        let big = StackCounts {
            samples: 5,
            weight: 3_000,
            events: 10,
        };
        p.add_frame_counts(&[frame("A.small"), class("java.lang.Integer")], small);
        p.add_frame_counts(&[frame("A.big"), class("byte[]")], big);
        let s = summary(&p);
        assert!(s.contains("Total samples         : 8\n"), "{s}");
        assert!(s.contains("Total bytes           : 4000\n"), "{s}");
        assert!(s.contains("Estimated objects     : 90010\n"), "{s}");
        let t = traces(&p, &ExportOptions::default());
        assert!(
            t.starts_with("--- 3000 bytes (75.00%), 5 samples\n  [ 0] byte[]"),
            "{t}"
        );
        let f = flat(&p, &ExportOptions::default());
        let rows: Vec<&str> = f.lines().collect();
        assert!(
            rows[0]
                .split_whitespace()
                .eq(["bytes", "percent", "samples", "top"]),
            "{f}"
        );
        assert!(
            rows[2]
                .split_whitespace()
                .eq(["3000", "75.00%", "5", "byte[]"]),
            "{f}"
        );
        let by_objects = ExportOptions {
            counter: Some(Counter::Events),
            ..ExportOptions::default()
        };
        let f = flat(&p, &by_objects);
        assert!(
            f.lines()
                .next()
                .unwrap()
                .trim_start()
                .starts_with("objects"),
            "{f}"
        );
        assert!(
            f.lines()
                .nth(2)
                .unwrap()
                .contains("90000   99.99%         3  java.lang.Integer"),
            "{f}"
        );
        let t = traces(&p, &by_objects);
        assert!(
            t.starts_with("--- 90000 objects (99.99%), 3 samples"),
            "{t}"
        );
    }
}
