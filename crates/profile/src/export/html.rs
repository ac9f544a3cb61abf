//! Self-contained interactive HTML flame graph (no network, no CDN).
//!
//! The stacks are merged into a flame tree in Rust and shipped as one flat integer array per
//! depth (`[x, width, frame, kind]` quadruples, sorted by x), so the page only draws what is
//! visible and stays fast with hundreds of thousands of distinct stacks. The page itself
//! (canvas drawing, search, zoom, icicle toggle, tooltips) is `assets/flamegraph.html`.
//!
//! A differential flame graph ([`render_diff`]) draws the newer profile, each frame coloured
//! by how its share of the total changed from the base profile (red grew, blue shrank),
//! matching frames by name along the path from the root.

use std::collections::HashMap;

use serde_json::json;

use super::ExportOptions;
use crate::model::{Counter, FrameId, FrameKind, Profile};
use crate::select::Selection;

const TEMPLATE: &str = include_str!("../../assets/flamegraph.html");

/// Kinds in the order the page's colour table expects.
const KINDS: [FrameKind; 10] = [
    FrameKind::Interpreted,
    FrameKind::Compiled,
    FrameKind::Inlined,
    FrameKind::Native,
    FrameKind::Cpp,
    FrameKind::Kernel,
    FrameKind::Thread,
    FrameKind::Class,
    FrameKind::Error,
    FrameKind::Label,
];

fn kind_index(kind: FrameKind) -> u64 {
    KINDS.iter().position(|k| *k == kind).unwrap_or(0) as u64
}

/// Totals of a profile per path from the root (frames by name), to compare another with.
struct PathTotals {
    /// (parent node, frame name) → node; node 0 is the root.
    children: HashMap<(usize, String), usize>,
    totals: Vec<u64>,
}

impl PathTotals {
    fn of(profile: &Profile, counter: Counter) -> PathTotals {
        let mut paths = PathTotals {
            children: HashMap::new(),
            totals: vec![0],
        };
        for (stack, counts) in profile.stacks() {
            let count = counts.get(counter);
            paths.totals[0] += count;
            let mut node = 0;
            for &id in stack {
                let next = paths.totals.len();
                node = *paths
                    .children
                    .entry((node, profile.frame(id).name.clone()))
                    .or_insert(next);
                if node == next {
                    paths.totals.push(0);
                }
                paths.totals[node] += count;
            }
        }
        paths
    }

    /// The node under `parent` (None: no such path) named `name`.
    fn child(&self, parent: Option<usize>, name: &str) -> Option<usize> {
        self.children.get(&(parent?, name.to_string())).copied()
    }

    /// Share of the total at `node`, in percent.
    fn share(&self, node: Option<usize>) -> f64 {
        match (node, self.totals[0]) {
            (Some(node), total) if total > 0 => 100.0 * self.totals[node] as f64 / total as f64,
            _ => 0.0,
        }
    }
}

/// Merges stacks into per-depth rows of `[x, width, frame, kind]`; row 0 is the root.
fn flame_rows(profile: &Profile, counter: Counter) -> (Vec<Vec<u64>>, u64) {
    let (rows, _, total) = flame_rows_against(profile, counter, None);
    (rows, total)
}

/// [`flame_rows`], and with a `base` the change of each node's share from the base's, in
/// thousandths of a percentage point, per row in the rows' order.
fn flame_rows_against(
    profile: &Profile,
    counter: Counter,
    base: Option<&PathTotals>,
) -> (Vec<Vec<u64>>, Vec<Vec<i64>>, u64) {
    let mut stacks: Vec<(&[FrameId], u64)> = profile
        .stacks()
        .into_iter()
        .map(|(s, c)| (s, c.get(counter)))
        .filter(|(_, n)| *n > 0)
        .collect();
    // Sorted by frame names (ids break ties between kinds of one name), so that stacks
    // sharing a prefix are adjacent and alphabetical siblings read left to right.
    let key = |id: &FrameId| (profile.frame(*id).name.as_str(), *id);
    stacks.sort_by(|a, b| a.0.iter().map(key).cmp(b.0.iter().map(key)));
    let total: u64 = stacks.iter().map(|(_, n)| n).sum();
    let share = |width: u64| {
        if total == 0 {
            0.0
        } else {
            100.0 * width as f64 / total as f64
        }
    };
    let mut rows: Vec<Vec<u64>> = vec![Vec::new()];
    let mut deltas: Vec<Vec<i64>> = vec![Vec::new()];
    // Open frames: id, start, and the base's node on the same path.
    let mut open: Vec<(FrameId, u64, Option<usize>)> = Vec::new();
    let mut x = 0u64;
    let mut close =
        |depth: usize, (frame, start, node): (FrameId, u64, Option<usize>), end: u64| {
            if rows.len() <= depth + 1 {
                rows.resize(depth + 2, Vec::new());
                deltas.resize(depth + 2, Vec::new());
            }
            let kind = kind_index(profile.frame(frame).kind);
            rows[depth + 1].extend([start, end - start, frame as u64 + 1, kind]);
            if let Some(base) = base {
                let change = share(end - start) - base.share(node);
                deltas[depth + 1].push((change * 1000.0).round() as i64);
            }
        };
    for (stack, count) in stacks {
        let common = open
            .iter()
            .zip(stack)
            .take_while(|((open_frame, _, _), frame)| open_frame == *frame)
            .count();
        while open.len() > common {
            let depth = open.len() - 1;
            let node = open.pop().expect("non-empty");
            close(depth, node, x);
        }
        for &frame in &stack[common..] {
            let parent = open.last().map_or(Some(0), |(_, _, node)| *node);
            let node = base.and_then(|b| b.child(parent, &profile.frame(frame).name));
            open.push((frame, x, node));
        }
        x += count;
    }
    while let Some(node) = open.pop() {
        close(open.len(), node, x);
    }
    rows[0] = vec![0, x, 0, kind_index(FrameKind::Thread)];
    deltas[0] = vec![0];
    (rows, if base.is_some() { deltas } else { Vec::new() }, x)
}

/// Renders the flame graph page of one or more profiles (one per event of a session); with
/// several, a selector above the graph switches between them.
pub fn render(profiles: &[&Profile], options: &ExportOptions) -> String {
    let views: Vec<_> = profiles
        .iter()
        .flat_map(|p| std::iter::once(view(p, options)).chain(label_views(p, options)))
        .collect();
    let data = json!({ "inverted": options.inverted, "views": views });
    // The data sits inside a <script> element: keep "</" from closing it.
    let data = data.to_string().replace("</", "<\\/");
    TEMPLATE.replace("/*DATA*/null", &data)
}

/// A differential flame graph: `new`'s frames, coloured by the change of their share of the
/// total from `base` (both already labelled alike).
pub fn render_diff(base: &Profile, new: &Profile, options: &ExportOptions) -> String {
    let counter = options.counter_for(new);
    let paths = PathTotals::of(base, counter);
    let (rows, deltas, total) = flame_rows_against(new, counter, Some(&paths));
    let mut view = view_of(new, counter, rows, total);
    view["deltas"] = json!(deltas);
    view["title"] = json!(format!(
        "{} profile: change of each frame's share from the base (red grew, blue shrank)",
        new.metadata.event
    ));
    let data = json!({ "inverted": options.inverted, "views": [view] });
    TEMPLATE.replace("/*DATA*/null", &data.to_string().replace("</", "<\\/"))
}

/// The flame graph page with a heatmap above each profile that has an event log: one column
/// per second, and the flame graph of the time range dragged over.
pub fn render_heatmap(profiles: &[&Profile], options: &ExportOptions) -> String {
    let views: Vec<_> = profiles
        .iter()
        .map(|profile| {
            let mut view = view(profile, options);
            if !profile.logged().is_empty() {
                view["timeline"] = timeline(profile, options);
            }
            view
        })
        .collect();
    let data = json!({ "inverted": options.inverted, "views": views });
    TEMPLATE.replace("/*DATA*/null", &data.to_string().replace("</", "<\\/"))
}

/// A profile's event log for the page: its stacks (frame ids, root first), each frame's kind,
/// and the samples as `[ms since the start, stack, count]` triples.
fn timeline(profile: &Profile, options: &ExportOptions) -> serde_json::Value {
    let counter = options.counter_for(profile);
    // From the recording's start when it is known, so that the columns are its seconds.
    let first = profile
        .logged()
        .iter()
        .map(|s| s.time_ns)
        .min()
        .unwrap_or(0);
    let start = match profile.metadata.start_time_ns {
        0 => first,
        known => known.min(first),
    };
    let mut stacks: Vec<&[FrameId]> = Vec::new();
    let mut index: HashMap<u32, usize> = HashMap::new();
    let mut samples = Vec::with_capacity(profile.logged().len() * 3);
    let mut end = 0;
    for sample in profile.logged() {
        let stack = *index.entry(sample.stack).or_insert_with(|| {
            stacks.push(profile.stack(sample.stack));
            stacks.len() - 1
        });
        let ms = sample.time_ns.saturating_sub(start) / 1_000_000;
        end = end.max(ms);
        samples.extend([ms, stack as u64, sample.counts.get(counter)]);
    }
    let kinds: Vec<u64> = profile
        .frames()
        .iter()
        .map(|f| kind_index(f.kind))
        .collect();
    json!({
        "stacks": stacks,
        "kinds": kinds,
        "samples": samples,
        "duration_ms": (end + 1).max(profile.metadata.duration_ns / 1_000_000),
    })
}

/// Most request labels given a view of their own in the page.
const LABEL_VIEWS: usize = 20;

/// A view per request label (`--by`) of a profile whose stacks have them, the heaviest
/// first: the profile of that label's samples alone, as the selector's `cpu /compute`.
fn label_views(profile: &Profile, options: &ExportOptions) -> Vec<serde_json::Value> {
    profile
        .labels(options.counter_for(profile))
        .into_iter()
        .take(LABEL_VIEWS)
        .filter_map(|(label, _)| {
            let mut view = view(&profile.select(&Selection::of_label(label)).ok()?, options);
            let event = format!("{} {label}", profile.metadata.event);
            view["title"] = json!(format!("{event}: the samples labelled {label}"));
            view["event"] = json!(event);
            Some(view)
        })
        .collect()
}

/// One profile's flame graph: its rows, frame names, total and unit.
fn view(profile: &Profile, options: &ExportOptions) -> serde_json::Value {
    let counter = options.counter_for(profile);
    let (rows, total) = flame_rows(profile, counter);
    view_of(profile, counter, rows, total)
}

fn view_of(
    profile: &Profile,
    counter: Counter,
    rows: Vec<Vec<u64>>,
    total: u64,
) -> serde_json::Value {
    let m = &profile.metadata;
    let mut names = vec!["all".to_string()];
    names.extend(profile.frames().iter().map(|f| f.name.clone()));
    json!({
        "event": m.event,
        "title": format!("{} profile ({})", m.event, if m.engine.is_empty() { &m.event } else { &m.engine }),
        "unit": m.unit(counter),
        "total": total,
        "names": names,
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::tests::sample_profile;
    use crate::model::StackCounts;

    #[test]
    fn rows_merge_common_prefixes() {
        let p = sample_profile();
        let (rows, total) = flame_rows(&p, Counter::Samples);
        assert_eq!(total, p.total_samples());
        // Depth 1: [gc_active] and Main.main (merged), depth 2: a, b, c.
        assert_eq!(rows[1].len(), 2 * 4);
        assert_eq!(rows[2].len(), 3 * 4);
        let widths: u64 = rows[2].chunks(4).map(|q| q[1]).sum();
        assert_eq!(widths, 7);
        // Sorted by x within a row.
        assert!(rows[2]
            .chunks(4)
            .zip(rows[2].chunks(4).skip(1))
            .all(|(a, b)| a[0] + a[1] <= b[0]));
    }

    #[test]
    fn heatmap_pages_carry_the_event_log_from_the_recordings_start() {
        let mut p = sample_profile();
        p.metadata.start_time_ns = 5_000_000_000;
        let (a, b) = (
            crate::Frame::new("Main.a", FrameKind::Compiled),
            crate::Frame::new("Main.b", FrameKind::Compiled),
        );
        p.log_frames(&[a], StackCounts::sampled(1, 10), 5_250_000_000, 7);
        p.log_frames(
            std::slice::from_ref(&b),
            StackCounts::sampled(2, 20),
            6_500_000_000,
            7,
        );
        p.log_frames(&[b], StackCounts::sampled(1, 10), 6_600_000_000, 8);
        let timeline = timeline(&p, &ExportOptions::default());
        // [ms since the start, stack, samples]: Main.b's two samples share one stack.
        assert_eq!(
            timeline["samples"],
            json!([250, 0, 1, 1500, 1, 2, 1600, 1, 1])
        );
        assert_eq!(timeline["stacks"].as_array().unwrap().len(), 2);
        assert_eq!(timeline["duration_ms"], json!(1601));
        let page = render_heatmap(&[&p], &ExportOptions::default());
        assert!(page.contains("\"timeline\""));
        // A profile without an event log gets the plain flame graph.
        let plain = render_heatmap(&[&sample_profile()], &ExportOptions::default());
        assert!(!plain.contains("\"timeline\""));
    }

    #[test]
    fn page_embeds_data_safely() {
        let mut p = sample_profile();
        p.add_frames(
            &[crate::Frame::new("</script><b>", FrameKind::Native)],
            1,
            1,
        );
        let page = render(&[&p], &ExportOptions::default());
        assert!(!page.contains("/*DATA*/null"));
        assert!(!page.contains("</script><b>"));
        assert!(page.contains("Main.c"));
        assert!(
            !page.contains("http://") && !page.contains("https://"),
            "page must work offline"
        );
    }
}
