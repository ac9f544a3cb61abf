//! Exporters, one module per format, behind [`Format::render`]; [`render_set`] for the
//! profiles of several events of one session.

mod collapsed;
pub mod diff;
mod html;
pub mod otlp;
pub(crate) mod pprof;
mod set;
mod speedscope;
mod text;

use std::fs;
use std::io::{self, Write};
use std::path::Path;

use crate::model::{Counter, Profile};

pub use pprof::{decode as decode_pprof, PprofTotals};
pub use set::render_set;

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `frame;frame;frame count` lines (FlameGraph, speedscope, inferno).
    Collapsed,
    /// async-profiler-style text: summary, then the top traces and methods.
    Text,
    /// Only the summary.
    Summary,
    /// Top N stacks with counts and percentages.
    Traces,
    /// Top N methods by self count with percentages.
    Flat,
    /// Self-contained interactive HTML flame graph.
    Html,
    /// gzipped pprof `profile.proto`.
    Pprof,
    /// speedscope JSON.
    Speedscope,
    /// A JFR recording (`jfr`, JDK Mission Control, IntelliJ).
    Jfr,
    /// The HTML flame graph with a heatmap of samples over time above it.
    Heatmap,
    /// OpenTelemetry profiles (OTLP `ProfilesData`, protobuf).
    Otlp,
}

/// How to render.
#[derive(Debug, Clone, Copy)]
pub struct ExportOptions {
    /// What stacks are counted by; `None`: the profile's default
    /// ([`Metadata::default_counter`](crate::Metadata::default_counter)).
    pub counter: Option<Counter>,
    /// Add async-profiler's frame-type suffixes (`_[j]`, `_[i]`, `_[k]`, `_[0]`) in collapsed output.
    pub annotate: bool,
    /// How many entries `traces`/`flat` show.
    pub top: usize,
    /// Draw the flame graph inverted (icicle) by default.
    pub inverted: bool,
    /// Java frames per source line (`Class.method:line`), not per method.
    pub lines: bool,
}

impl ExportOptions {
    /// The counter these options count `profile`'s stacks by: the one asked for, else the
    /// event's default, or samples where the profile has no totals (a file that kept only
    /// counts).
    pub fn counter_for(&self, profile: &Profile) -> Counter {
        self.counter
            .unwrap_or_else(|| match profile.metadata.default_counter() {
                Counter::Total if profile.total_weight() == 0 => Counter::Samples,
                counter => counter,
            })
    }
}

impl Default for ExportOptions {
    fn default() -> Self {
        ExportOptions {
            counter: None,
            annotate: false,
            top: 10,
            inverted: false,
            lines: false,
        }
    }
}

impl Format {
    /// Every format with its name, as `--format` accepts it.
    pub const NAMES: &'static [(&'static str, Format)] = &[
        ("collapsed", Format::Collapsed),
        ("text", Format::Text),
        ("summary", Format::Summary),
        ("traces", Format::Traces),
        ("flat", Format::Flat),
        ("html", Format::Html),
        ("pprof", Format::Pprof),
        ("speedscope", Format::Speedscope),
        ("jfr", Format::Jfr),
        ("heatmap", Format::Heatmap),
        ("otlp", Format::Otlp),
    ];

    /// Parses a `--format` name.
    pub fn from_name(name: &str) -> Option<Format> {
        Self::NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, f)| *f)
    }

    /// The file name endings that name a format (the longer of two that overlap first).
    pub const SUFFIXES: &'static [(&'static str, Format)] = &[
        (".speedscope.json", Format::Speedscope),
        (".pb.gz", Format::Pprof),
        (".pprof", Format::Pprof),
        (".heatmap.html", Format::Heatmap),
        (".html", Format::Html),
        (".collapsed", Format::Collapsed),
        (".folded", Format::Collapsed),
        (".txt", Format::Text),
        (".jfr", Format::Jfr),
        (".otlp", Format::Otlp),
    ];

    /// Guesses the format from an output file name.
    pub fn from_path(path: &Path) -> Option<Format> {
        let name = path.file_name()?.to_str()?;
        Self::SUFFIXES
            .iter()
            .find(|(suffix, _)| name.ends_with(suffix))
            .map(|(_, f)| *f)
    }

    /// Renders the profile in this format: pprof, OTLP and JFR with every fact of each
    /// frame, the others with frames as [`Profile::labelled`] shows them.
    pub fn render(self, profile: &Profile, options: &ExportOptions) -> Vec<u8> {
        match self {
            Format::Pprof => return pprof::render(&[profile]),
            Format::Otlp => return otlp::render(&[profile]),
            Format::Jfr => return crate::jfr::write(&[profile]),
            _ => {}
        }
        let profile = &profile.labelled(options.lines);
        match self {
            Format::Collapsed => collapsed::render(profile, options).into_bytes(),
            Format::Text => text::render_all(profile, options).into_bytes(),
            Format::Summary => text::summary(profile).into_bytes(),
            Format::Traces => text::traces(profile, options).into_bytes(),
            Format::Flat => text::flat(profile, options).into_bytes(),
            Format::Html => html::render(&[profile], options).into_bytes(),
            Format::Heatmap => html::render_heatmap(&[profile], options).into_bytes(),
            Format::Pprof => pprof::render(&[profile]),
            Format::Otlp => otlp::render(&[profile]),
            Format::Jfr => crate::jfr::write(&[profile]),
            Format::Speedscope => speedscope::render(&[profile], options).into_bytes(),
        }
    }
}

/// Writes `bytes` to `path` through a temporary file in the same directory and a rename, so
/// readers never see a partial file. Not synced to the disk: the agent writes each period of
/// a looping recording this way, and an `fsync` behind other writers' journal commits held
/// it for up to 6.6 s (a loaded test run), where a crash of the whole machine may only lose
/// the last period's file, as with any profiler's output.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = (|| {
        let mut file = fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::model::{Frame, FrameKind, Metadata};

    /// A small profile: main → {a ×1, b ×2, c ×4}, plus one error sample.
    pub(crate) fn sample_profile() -> Profile {
        let mut p = Profile::new(Metadata {
            event: "cpu".into(),
            engine: "cpu".into(),
            interval: 10_000_000,
            weight_unit: "nanoseconds".into(),
            duration_ns: 1_000_000_000,
            ..Metadata::default()
        });
        let main = Frame::new("Main.main", FrameKind::Interpreted);
        for (name, n) in [("Main.a", 1), ("Main.b", 2), ("Main.c", 4)] {
            let leaf = Frame::new(name, FrameKind::Compiled);
            p.add_frames(&[main.clone(), leaf], n, n * 10_000_000);
        }
        p.add_frames(
            &[Frame::new("[gc_active]", FrameKind::Error)],
            1,
            10_000_000,
        );
        p.metadata.errors.insert("gc_active".into(), 1);
        p
    }

    #[test]
    fn formats_from_paths_and_names() {
        assert_eq!(
            Format::from_path(Path::new("/x/out.html")),
            Some(Format::Html)
        );
        assert_eq!(Format::from_path(Path::new("p.pb.gz")), Some(Format::Pprof));
        assert_eq!(
            Format::from_path(Path::new("p.speedscope.json")),
            Some(Format::Speedscope)
        );
        assert_eq!(Format::from_path(Path::new("p.unknown")), None);
        assert_eq!(Format::from_name("flat"), Some(Format::Flat));
    }

    #[test]
    fn writes_atomically() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.txt");
        write_atomically(&path, b"hello").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"hello");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
