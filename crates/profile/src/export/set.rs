//! The profiles of one session (one per event) in one format: one output where the format
//! holds several events, one per event where it holds one.

use std::path::{Path, PathBuf};

use super::{html, otlp, pprof, speedscope, ExportOptions, Format};
use crate::model::Profile;

/// Renders the profiles of one session (one per event, in the given order) for `path`
/// (None: standard output). Returns the files to write: one for formats that hold several
/// events (HTML with an event selector, pprof with a pair of sample types per event,
/// speedscope with a profile per event, text reports one after another), one per event for
/// collapsed stacks (`out.cpu.collapsed`; on standard output, each stack under its event's
/// name). One profile renders as [`Format::render`] renders it.
pub fn render_set(
    format: Format,
    profiles: &[Profile],
    options: &ExportOptions,
    path: Option<&Path>,
) -> Vec<(Option<PathBuf>, Vec<u8>)> {
    let path_of = || path.map(Path::to_owned);
    if let [profile] = profiles {
        return vec![(path_of(), format.render(profile, options))];
    }
    let labelled: Vec<Profile> = profiles.iter().map(|p| p.labelled(options.lines)).collect();
    let labelled: Vec<&Profile> = labelled.iter().collect();
    let together = match format {
        Format::Html => html::render(&labelled, options).into_bytes(),
        Format::Heatmap => html::render_heatmap(&labelled, options).into_bytes(),
        Format::Speedscope => speedscope::render(&labelled, options).into_bytes(),
        Format::Pprof => pprof::render(&profiles.iter().collect::<Vec<_>>()),
        Format::Otlp => otlp::render(&profiles.iter().collect::<Vec<_>>()),
        Format::Jfr => crate::jfr::write(&profiles.iter().collect::<Vec<_>>()),
        Format::Text | Format::Summary | Format::Traces | Format::Flat => profiles
            .iter()
            .map(|p| format.render(p, options))
            .collect::<Vec<_>>()
            .join(&b"\n"[..]),
        Format::Collapsed => {
            return match path {
                Some(path) => profiles
                    .iter()
                    .map(|p| {
                        let file = per_event(path, &p.metadata.event);
                        (Some(file), format.render(p, options))
                    })
                    .collect(),
                None => vec![(None, collapsed_under_events(profiles, options))],
            };
        }
    };
    vec![(path_of(), together)]
}

/// `out.collapsed` → `out.cpu.collapsed`; a name without extension gets `.cpu` appended.
fn per_event(path: &Path, event: &str) -> PathBuf {
    let stem = path.file_stem().unwrap_or_default().to_string_lossy();
    let name = match path.extension() {
        Some(extension) => format!("{stem}.{event}.{}", extension.to_string_lossy()),
        None => format!("{stem}.{event}"),
    };
    path.with_file_name(name)
}

/// Collapsed stacks of every profile in one stream, each under its event's name.
fn collapsed_under_events(profiles: &[Profile], options: &ExportOptions) -> Vec<u8> {
    let mut out = Vec::new();
    for profile in profiles {
        let text = Format::Collapsed.render(profile, options);
        for line in text.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            out.extend_from_slice(profile.metadata.event.as_bytes());
            out.push(b';');
            out.extend_from_slice(line);
            out.push(b'\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::tests::sample_profile;

    fn session() -> Vec<Profile> {
        let cpu = sample_profile();
        let mut wall = sample_profile();
        wall.metadata.event = "wall".into();
        vec![cpu, wall]
    }

    #[test]
    fn one_profile_renders_as_render_does() {
        let cpu = sample_profile();
        let options = ExportOptions::default();
        for (_, format) in Format::NAMES {
            let set = render_set(
                *format,
                std::slice::from_ref(&cpu),
                &options,
                Some(Path::new("p.x")),
            );
            assert_eq!(set.len(), 1);
            assert_eq!(set[0].0.as_deref(), Some(Path::new("p.x")));
            assert_eq!(set[0].1, format.render(&cpu, &options), "{format:?}");
        }
    }

    #[test]
    fn collapsed_files_are_one_per_event() {
        let set = render_set(
            Format::Collapsed,
            &session(),
            &ExportOptions::default(),
            Some(Path::new("/tmp/out.collapsed")),
        );
        let files: Vec<_> = set.iter().map(|(f, _)| f.clone().unwrap()).collect();
        assert_eq!(
            files,
            [
                PathBuf::from("/tmp/out.cpu.collapsed"),
                PathBuf::from("/tmp/out.wall.collapsed")
            ]
        );
        assert_eq!(
            per_event(Path::new("flame"), "cpu"),
            PathBuf::from("flame.cpu")
        );
        let stdout = render_set(
            Format::Collapsed,
            &session(),
            &ExportOptions::default(),
            None,
        );
        let text = String::from_utf8(stdout[0].1.clone()).unwrap();
        assert!(text
            .lines()
            .all(|l| l.starts_with("cpu;") || l.starts_with("wall;")));
        assert!(text.contains("wall;Main.main;Main.c 4"), "{text}");
    }

    #[test]
    fn html_holds_every_event_with_a_selector() {
        let set = render_set(Format::Html, &session(), &ExportOptions::default(), None);
        assert_eq!(set.len(), 1);
        let page = String::from_utf8(set[0].1.clone()).unwrap();
        assert!(page.contains("\"event\":\"cpu\"") && page.contains("\"event\":\"wall\""));
        assert!(page.contains("id=\"event\""));
    }

    #[test]
    fn pprof_has_a_pair_of_columns_per_event() {
        let set = render_set(Format::Pprof, &session(), &ExportOptions::default(), None);
        let decoded = pprof::decode(&set[0].1).unwrap();
        assert_eq!(decoded.sample_types.len(), 4);
        assert_eq!(decoded.totals[0], decoded.totals[2]);
    }

    #[test]
    fn text_reports_follow_one_another() {
        let set = render_set(Format::Summary, &session(), &ExportOptions::default(), None);
        let text = String::from_utf8(set[0].1.clone()).unwrap();
        assert_eq!(text.matches("Total samples").count(), 2, "{text}");
        assert!(text.contains("wall"), "{text}");
    }
}
