//! Self-contained interactive HTML flame graph (no network, no CDN).
//!
//! The stacks are merged into a flame tree in Rust and shipped as one flat integer array per
//! depth (`[x, width, frame, kind]` quadruples, sorted by x), so the page only draws what is
//! visible and stays fast with hundreds of thousands of distinct stacks. The page itself
//! (canvas drawing, search, zoom, icicle toggle, tooltips) is `assets/flamegraph.html`.

use serde_json::json;

use super::ExportOptions;
use crate::model::{Counter, FrameId, FrameKind, Profile};

const TEMPLATE: &str = include_str!("../../assets/flamegraph.html");

/// Kinds in the order the page's colour table expects.
const KINDS: [FrameKind; 9] = [
    FrameKind::Interpreted,
    FrameKind::Compiled,
    FrameKind::Inlined,
    FrameKind::Native,
    FrameKind::Cpp,
    FrameKind::Kernel,
    FrameKind::Thread,
    FrameKind::Class,
    FrameKind::Error,
];

fn kind_index(kind: FrameKind) -> u64 {
    KINDS.iter().position(|k| *k == kind).unwrap_or(0) as u64
}

/// Merges stacks into per-depth rows of `[x, width, frame, kind]`; row 0 is the root.
fn flame_rows(profile: &Profile, counter: Counter) -> (Vec<Vec<u64>>, u64) {
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
    let mut rows: Vec<Vec<u64>> = vec![Vec::new()];
    let mut open: Vec<(FrameId, u64)> = Vec::new();
    let mut x = 0u64;
    let close =
        |rows: &mut Vec<Vec<u64>>, depth: usize, (frame, start): (FrameId, u64), end: u64| {
            if rows.len() <= depth + 1 {
                rows.resize(depth + 2, Vec::new());
            }
            let kind = kind_index(profile.frame(frame).kind);
            rows[depth + 1].extend([start, end - start, frame as u64 + 1, kind]);
        };
    for (stack, count) in stacks {
        let common = open
            .iter()
            .zip(stack)
            .take_while(|((open_frame, _), frame)| open_frame == *frame)
            .count();
        while open.len() > common {
            let depth = open.len() - 1;
            let node = open.pop().expect("non-empty");
            close(&mut rows, depth, node, x);
        }
        open.extend(stack[common..].iter().map(|&f| (f, x)));
        x += count;
    }
    while let Some(node) = open.pop() {
        close(&mut rows, open.len(), node, x);
    }
    rows[0] = vec![0, x, 0, kind_index(FrameKind::Thread)];
    (rows, x)
}

/// Renders the flame graph page of one or more profiles (one per event of a session); with
/// several, a selector above the graph switches between them.
pub fn render(profiles: &[&Profile], options: &ExportOptions) -> String {
    let views: Vec<_> = profiles.iter().map(|p| view(p, options)).collect();
    let data = json!({ "inverted": options.inverted, "views": views });
    // The data sits inside a <script> element: keep "</" from closing it.
    let data = data.to_string().replace("</", "<\\/");
    TEMPLATE.replace("/*DATA*/null", &data)
}

/// One profile's flame graph: its rows, frame names, total and unit.
fn view(profile: &Profile, options: &ExportOptions) -> serde_json::Value {
    let counter = options.counter_for(profile);
    let (rows, total) = flame_rows(profile, counter);
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
