//! Collapsed stacks: one `root;...;leaf count` line per distinct stack.

use std::fmt::Write;

use super::ExportOptions;
use crate::model::Profile;

/// Renders collapsed stacks, heaviest first.
pub fn render(profile: &Profile, options: &ExportOptions) -> String {
    let mut out = String::new();
    let counter = options.counter_for(profile);
    for (stack, counts) in profile.stacks() {
        let count = counts.get(counter);
        if count == 0 {
            continue;
        }
        for (i, &id) in stack.iter().enumerate() {
            if i > 0 {
                out.push(';');
            }
            let frame = profile.frame(id);
            // ';' separates frames and the last ' ' precedes the count: keep names parseable.
            out.extend(frame.name.chars().map(|c| if c == ';' { ':' } else { c }));
            if options.annotate {
                out.push_str(frame.kind.annotation());
            }
        }
        let _ = writeln!(out, " {count}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::tests::sample_profile;

    #[test]
    fn totals_match_and_annotations_apply() {
        let p = sample_profile();
        let text = render(&p, &ExportOptions::default());
        let total: u64 = text
            .lines()
            .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
            .sum();
        assert_eq!(total, p.total_samples());
        assert_eq!(text.lines().next().unwrap(), "Main.main;Main.c 4");
        let annotated = render(
            &p,
            &ExportOptions {
                annotate: true,
                ..ExportOptions::default()
            },
        );
        assert!(annotated.contains("Main.main_[0];Main.c_[j] 4"));
        let weighted = render(
            &p,
            &ExportOptions {
                counter: Some(crate::Counter::Total),
                ..ExportOptions::default()
            },
        );
        assert!(weighted.contains("Main.main;Main.c 40000000"));
    }
}
