//! Two profiles compared: a differential flame graph (HTML) and a table of the methods whose
//! share of the samples (or bytes, or time waited) changed most.

use std::collections::HashMap;
use std::fmt::Write;

use super::{html, ExportOptions};
use crate::model::Profile;

/// The differential flame graph page of `new` against `base`.
pub fn render_html(base: &Profile, new: &Profile, options: &ExportOptions) -> Vec<u8> {
    let (base, new) = (base.labelled(options.lines), new.labelled(options.lines));
    html::render_diff(&base, &new, options).into_bytes()
}

/// The `top` frames whose self share changed most, as a table: frame, base %, new %, change.
pub fn render_table(base: &Profile, new: &Profile, options: &ExportOptions) -> String {
    let (base, new) = (base.labelled(options.lines), new.labelled(options.lines));
    let (base_self, new_self) = (self_shares(&base, options), self_shares(&new, options));
    let mut frames: Vec<(&str, f64, f64)> = base_self
        .keys()
        .chain(new_self.keys())
        .map(|name| {
            let share = |shares: &HashMap<&str, f64>| shares.get(name).copied().unwrap_or(0.0);
            (*name, share(&base_self), share(&new_self))
        })
        .collect();
    frames.sort_by(|a, b| {
        (b.2 - b.1)
            .abs()
            .total_cmp(&(a.2 - a.1).abs())
            .then(a.0.cmp(b.0))
    });
    frames.dedup_by(|a, b| a.0 == b.0);
    let mut text = String::from("    base %     new %    change  frame (self)\n");
    for (name, before, after) in frames.into_iter().take(options.top) {
        let _ = writeln!(
            text,
            "{before:>9.2}% {after:>8.2}% {:>+8.2}  {name}",
            after - before
        );
    }
    text
}

/// Each leaf frame's share of the total, in percent.
fn self_shares<'p>(profile: &'p Profile, options: &ExportOptions) -> HashMap<&'p str, f64> {
    let counter = options.counter_for(profile);
    let total = profile.total(counter).max(1) as f64;
    let mut shares = HashMap::new();
    for (stack, counts) in profile.stacks() {
        if let Some(&leaf) = stack.last() {
            *shares.entry(profile.frame(leaf).name.as_str()).or_default() +=
                100.0 * counts.get(counter) as f64 / total;
        }
    }
    shares
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Frame, FrameKind};

    fn profile(a: u64, b: u64) -> Profile {
        let mut p = Profile::default();
        let main = Frame::new("Main.main", FrameKind::Compiled);
        p.add_frames(
            &[main.clone(), Frame::new("Main.a", FrameKind::Compiled)],
            a,
            a,
        );
        p.add_frames(&[main, Frame::new("Main.b", FrameKind::Compiled)], b, b);
        p
    }

    #[test]
    fn changes_of_share_are_ranked_and_coloured() {
        let (base, new) = (profile(50, 50), profile(10, 90));
        let table = render_table(&base, &new, &ExportOptions::default());
        let lines: Vec<&str> = table.lines().collect();
        assert!(
            lines[1].ends_with("Main.a") && lines[1].contains("-40.00"),
            "{table}"
        );
        assert!(
            lines[2].ends_with("Main.b") && lines[2].contains("+40.00"),
            "{table}"
        );
        let page = String::from_utf8(render_html(&base, &new, &ExportOptions::default())).unwrap();
        assert!(
            page.contains("\"deltas\":[[0],[0],[-40000,40000]]"),
            "rows a, b"
        );
    }
}
