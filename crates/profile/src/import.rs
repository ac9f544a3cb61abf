//! Profiles read back from files: JFR recordings (jtap's, the JDK's, async-profiler's),
//! gzipped pprof (jtap's, Go's, Pyroscope's) and collapsed stacks (jtap's,
//! async-profiler's, FlameGraph's), for `jtap convert` and `jtap diff`.

use std::path::Path;

use crate::event;
use crate::model::{Frame, FrameKind, Metadata, Profile, StackCounts, LABEL_PREFIX};
pub use crate::select::Wanted;

/// The profiles in `bytes` (one per event; with `only`, those events), read as the content
/// says: a JFR recording by its magic, gzip or a pprof name (`.pb.gz`, `.pb`, `.pprof`) as
/// pprof, else collapsed stacks, whose event the file name may
/// say (`out.alloc.collapsed`).
pub fn read(bytes: &[u8], path: &Path, wanted: &Wanted) -> Result<Vec<Profile>, String> {
    let only = wanted.events;
    if crate::jfr::is_recording(bytes) {
        return crate::jfr::read(bytes, wanted);
    }
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let pprof_name = [".pb.gz", ".pb", ".pprof"]
        .iter()
        .any(|s| name.ends_with(s));
    // async-profiler's `.pb.gz` files are plain protobuf: the name says what they are.
    if bytes.starts_with(&[0x1f, 0x8b]) || pprof_name {
        return crate::export::pprof::read(bytes, only);
    }
    let text = std::str::from_utf8(bytes)
        .map_err(|_| "neither a JFR recording nor collapsed stacks (not text)".to_string())?;
    collapsed(text, event_of(path))
}

/// `out.alloc.collapsed` → `alloc`; any other name → `cpu`.
fn event_of(path: &Path) -> &'static event::Kind {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    event::KINDS
        .into_iter()
        .find(|kind| name.contains(&format!(".{}.", kind.name)))
        .unwrap_or(&event::CPU)
}

/// `frame;frame;frame count` lines; a frame's `_[j]`-style suffix gives its kind.
fn collapsed(text: &str, kind: &event::Kind) -> Result<Vec<Profile>, String> {
    let mut profile = Profile::new(Metadata {
        event: kind.name.to_string(),
        engine: "collapsed".into(),
        weight_unit: kind.weight_unit.into(),
        ..Metadata::default()
    });
    let weighted = kind.weighted;
    for (number, line) in text.lines().enumerate() {
        let line = line.trim_end();
        if line.is_empty() {
            continue;
        }
        let (stack, count) = line
            .rsplit_once(' ')
            .and_then(|(stack, count)| Some((stack, count.parse::<u64>().ok()?)))
            .ok_or_else(|| format!("line {}: not `frame;frame count`: {line}", number + 1))?;
        let mut frames: Vec<Frame> = stack.split(';').map(frame).collect();
        // A request label (`profile --by`) at the root.
        if let Some(root) = frames.first_mut() {
            let text = root
                .name
                .strip_prefix('[')
                .and_then(|n| n.strip_prefix(LABEL_PREFIX))
                .and_then(|l| l.strip_suffix(']'))
                .map(str::to_string);
            if let Some(text) = text {
                *root = Frame::request_label(&text);
            }
        }
        // Collapsed files hold one number: samples, or bytes and time for alloc and lock.
        let counts = match weighted {
            true => StackCounts {
                samples: 1,
                weight: count,
                events: 1,
            },
            false => StackCounts::sampled(count, 0),
        };
        profile.add_frame_counts(&frames, counts);
    }
    Ok(vec![profile])
}

/// A collapsed frame: async-profiler's suffixes name the kind (`_[j]` compiled, `_[i]`
/// inlined, `_[0]` interpreted, `_[k]` kernel, `_[n]` native).
fn frame(text: &str) -> Frame {
    let suffixes = [
        ("_[j]", FrameKind::Compiled),
        ("_[i]", FrameKind::Inlined),
        ("_[0]", FrameKind::Interpreted),
        ("_[k]", FrameKind::Kernel),
        ("_[n]", FrameKind::Native),
    ];
    for (suffix, kind) in suffixes {
        if let Some(name) = text.strip_suffix(suffix) {
            return Frame::new(name, kind);
        }
    }
    let kind = if text.contains('.') && !text.contains(".so") {
        FrameKind::Compiled
    } else {
        FrameKind::Native
    };
    Frame::new(text, kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collapsed_stacks_read_back_with_kinds_and_event() {
        let text = "a.Main.main_[0];a.Main.work_[j] 3\na.Main.main_[0] 1\n";
        let profiles = read(
            text.as_bytes(),
            Path::new("x.wall.collapsed"),
            &Wanted::default(),
        )
        .unwrap();
        let profile = &profiles[0];
        assert_eq!(profile.metadata.event, "wall");
        assert_eq!(profile.total_samples(), 4);
        assert_eq!(profile.frame(1).kind, FrameKind::Compiled);
        assert_eq!(profile.frame(0).name, "a.Main.main");
        let err = read(
            b"no count here\n",
            Path::new("x.collapsed"),
            &Wanted::default(),
        )
        .unwrap_err();
        assert!(err.starts_with("line 1:"), "{err}");
    }

    #[test]
    fn the_file_name_tells_the_event_and_its_unit() {
        for (name, event, unit) in [
            ("p.collapsed", "cpu", "nanoseconds"),
            ("p.alloc.collapsed", "alloc", "bytes"),
            ("p.nativemem.collapsed", event::NATIVEMEM.name, "bytes"),
            (
                "p.nativemem-live.collapsed",
                event::NATIVEMEM_LIVE.name,
                "bytes",
            ),
        ] {
            let profiles = read(b"f 7\n", Path::new(name), &Wanted::default()).unwrap();
            let metadata = &profiles[0].metadata;
            assert_eq!(
                (metadata.event.as_str(), metadata.weight_unit.as_str()),
                (event, unit)
            );
        }
    }
}
