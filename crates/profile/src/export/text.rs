//! async-profiler-style text reports: `summary`, `traces=N`, `flat=N`.

use std::collections::HashMap;
use std::fmt::Write;

use super::ExportOptions;
use crate::model::{FrameId, Profile};

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
    if !m.engine.is_empty() && m.engine != m.event {
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
        "{:<22}: {} {}",
        "Total weight",
        profile.total_weight(),
        m.weight_unit
    );
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

fn count_of(options: &ExportOptions, samples: u64, weight: u64) -> u64 {
    if options.by_weight {
        weight
    } else {
        samples
    }
}

/// The top `options.top` stacks, leaf first, with their share.
pub fn traces(profile: &Profile, options: &ExportOptions) -> String {
    let unit = &profile.metadata.weight_unit;
    let total = count_of(options, profile.total_samples(), profile.total_weight());
    let mut stacks = profile.stacks();
    stacks.sort_by_key(|(_, c)| std::cmp::Reverse(count_of(options, c.samples, c.weight)));
    let mut out = String::new();
    for (stack, counts) in stacks.into_iter().take(options.top) {
        let count = count_of(options, counts.samples, counts.weight);
        let _ = writeln!(
            out,
            "--- {} {} ({:.2}%), {} samples",
            counts.weight,
            unit,
            percent(count, total),
            counts.samples
        );
        for (depth, &id) in stack.iter().rev().enumerate() {
            let _ = writeln!(out, "  [{depth:>2}] {}", profile.frame(id).name);
        }
        out.push('\n');
    }
    out
}

/// The top `options.top` frames by self count (leaf frames), with their share.
pub fn flat(profile: &Profile, options: &ExportOptions) -> String {
    let unit = &profile.metadata.weight_unit;
    let mut self_counts: HashMap<FrameId, (u64, u64)> = HashMap::new();
    for (stack, counts) in profile.stacks() {
        if let Some(&leaf) = stack.last() {
            let entry = self_counts.entry(leaf).or_default();
            entry.0 += counts.samples;
            entry.1 += counts.weight;
        }
    }
    let total = count_of(options, profile.total_samples(), profile.total_weight());
    let mut rows: Vec<_> = self_counts.into_iter().collect();
    rows.sort_by(|a, b| {
        count_of(options, b.1 .0, b.1 .1)
            .cmp(&count_of(options, a.1 .0, a.1 .1))
            .then_with(|| profile.frame(a.0).name.cmp(&profile.frame(b.0).name))
    });
    let mut out = String::new();
    let _ = writeln!(out, "{:>14}  {:>7}  {:>8}  top", unit, "percent", "samples");
    let _ = writeln!(
        out,
        "{:>14}  {:>7}  {:>8}  ---",
        "----------", "-------", "-------"
    );
    for (id, (samples, weight)) in rows.into_iter().take(options.top) {
        let share = percent(count_of(options, samples, weight), total);
        let _ = writeln!(
            out,
            "{weight:>14}  {share:>6.2}%  {samples:>8}  {}",
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
}
