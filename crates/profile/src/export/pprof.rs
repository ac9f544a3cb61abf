//! pprof: gzipped `profile.proto`, read by `go tool pprof`, Pyroscope and many UIs; written
//! by [`render`] and read back (jtap's, Go's, Pyroscope's) by [`read`].
//! The messages are hand-written prost structs (no protoc on the build machines); only the
//! fields jtap fills are declared, with their official tag numbers.

use std::collections::HashMap;
use std::io::{Read, Write};

use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use flate2::Compression;
use prost::Message;

use crate::event::{self, Kind};
use crate::model::{Frame, FrameId, FrameKind, Metadata, Profile, StackCounts};

#[derive(Clone, PartialEq, Message)]
struct PprofProfile {
    #[prost(message, repeated, tag = "1")]
    sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    sample: Vec<Sample>,
    #[prost(message, repeated, tag = "4")]
    location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    function: Vec<Function>,
    #[prost(string, repeated, tag = "6")]
    string_table: Vec<String>,
    #[prost(int64, tag = "9")]
    time_nanos: i64,
    #[prost(int64, tag = "10")]
    duration_nanos: i64,
    #[prost(message, optional, tag = "11")]
    period_type: Option<ValueType>,
    #[prost(int64, tag = "12")]
    period: i64,
    #[prost(int64, tag = "14")]
    default_sample_type: i64,
}

#[derive(Clone, PartialEq, Message)]
struct ValueType {
    #[prost(int64, tag = "1")]
    r#type: i64,
    #[prost(int64, tag = "2")]
    unit: i64,
}

#[derive(Clone, PartialEq, Message)]
struct Sample {
    #[prost(uint64, repeated, tag = "1")]
    location_id: Vec<u64>,
    #[prost(int64, repeated, tag = "2")]
    value: Vec<i64>,
    #[prost(message, repeated, tag = "3")]
    label: Vec<Label>,
}

/// A sample's label: `label` = the request it was taken for (`--by`).
#[derive(Clone, PartialEq, Message)]
struct Label {
    #[prost(int64, tag = "1")]
    key: i64,
    #[prost(int64, tag = "2")]
    str: i64,
}

#[derive(Clone, PartialEq, Message)]
struct Location {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(message, repeated, tag = "4")]
    line: Vec<Line>,
}

#[derive(Clone, PartialEq, Message)]
struct Line {
    #[prost(uint64, tag = "1")]
    function_id: u64,
    #[prost(int64, tag = "2")]
    line: i64,
}

#[derive(Clone, PartialEq, Message)]
struct Function {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(int64, tag = "2")]
    name: i64,
    #[prost(int64, tag = "3")]
    system_name: i64,
}

/// The pprof sample types (events, weight) for an event, as Go's tools name them; for the
/// time-based engines the events are the samples. A counted event's weight column is named
/// after it (`page-faults`).
pub(super) fn sample_types(event: &str, weight_unit: &str) -> [(String, String); 2] {
    let kind = event::kind(event);
    let weight = match kind == &event::COUNTED {
        true => event,
        false => kind.pprof.1,
    };
    [
        (kind.pprof.0.to_string(), "count".into()),
        (weight.to_string(), weight_unit.to_string()),
    ]
}

struct Strings {
    table: Vec<String>,
    index: HashMap<String, i64>,
}

impl Strings {
    fn new() -> Strings {
        // Index 0 must be the empty string.
        Strings {
            table: vec![String::new()],
            index: HashMap::from([(String::new(), 0)]),
        }
    }

    fn id(&mut self, s: &str) -> i64 {
        if let Some(&id) = self.index.get(s) {
            return id;
        }
        let id = self.table.len() as i64;
        self.table.push(s.to_string());
        self.index.insert(s.to_string(), id);
        id
    }
}

/// Encodes and gzips the profiles of one session (one per event) into one pprof file: each
/// profile has its pair of value columns (events, weight), zero in the other profiles'
/// samples; functions and locations are shared. A Java frame's function is its method (name
/// and descriptor as `system_name`), its location the line sampled.
pub fn render(profiles: &[&Profile]) -> Vec<u8> {
    let mut strings = Strings::new();
    let several = profiles.len() > 1;
    let mut sample_type = Vec::new();
    for profile in profiles {
        let m = &profile.metadata;
        for (name, unit) in sample_types(&m.event, &m.weight_unit) {
            // Two events' "samples" columns would read as one.
            let name = match several && name == "samples" {
                true => format!("{}_samples", m.event),
                false => name,
            };
            sample_type.push(ValueType {
                r#type: strings.id(&name),
                unit: strings.id(&unit),
            });
        }
    }
    let mut functions: HashMap<(&str, Option<&str>), u64> = HashMap::new();
    let mut locations: HashMap<&Frame, u64> = HashMap::new();
    let mut function = Vec::new();
    let mut location = Vec::new();
    let mut sample = Vec::new();
    for (column, profile) in profiles.iter().enumerate() {
        let ids: Vec<u64> = profile
            .frames()
            .iter()
            .map(|frame| {
                let next = location.len() as u64 + 1;
                *locations.entry(frame).or_insert_with(|| {
                    let key = (frame.name.as_str(), frame.signature.as_deref());
                    let next_function = function.len() as u64 + 1;
                    let function_id = *functions.entry(key).or_insert_with(|| {
                        let name = strings.id(&frame.name);
                        let system_name = match &frame.signature {
                            Some(signature) => strings.id(&format!("{}{signature}", frame.name)),
                            None => name,
                        };
                        function.push(Function {
                            id: next_function,
                            name,
                            system_name,
                        });
                        next_function
                    });
                    location.push(Location {
                        id: next,
                        line: vec![Line {
                            function_id,
                            line: frame.line.map_or(0, i64::from),
                        }],
                    });
                    next
                })
            })
            .collect();
        for (stack, counts) in profile.stacks() {
            let mut value = vec![0i64; sample_type.len()];
            value[2 * column] = counts.events as i64;
            value[2 * column + 1] = counts.weight as i64;
            // A request label at the root is the sample's label, not a location.
            let root = stack.first().map(|&f| profile.frame(f));
            let (label, stack) = match root.and_then(Frame::label_text) {
                Some(text) => (
                    vec![Label {
                        key: strings.id("label"),
                        str: strings.id(text),
                    }],
                    &stack[1..],
                ),
                None => (Vec::new(), stack),
            };
            sample.push(Sample {
                location_id: stack
                    .iter()
                    .rev()
                    .map(|&f: &FrameId| ids[f as usize])
                    .collect(),
                value,
                label,
            });
        }
    }
    let first = profiles.first().map(|p| &p.metadata);
    let message = PprofProfile {
        period_type: sample_type.get(1).cloned(),
        sample_type,
        sample,
        location,
        function,
        time_nanos: profiles
            .iter()
            .map(|p| p.metadata.start_time_ns)
            .min()
            .unwrap_or(0) as i64,
        duration_nanos: profiles
            .iter()
            .map(|p| p.metadata.duration_ns)
            .max()
            .unwrap_or(0) as i64,
        period: first.map_or(0, |m| m.interval as i64),
        default_sample_type: 1,
        string_table: strings.table,
    };
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    gz.write_all(&message.encode_to_vec())
        .expect("writing to a Vec cannot fail");
    gz.finish().expect("writing to a Vec cannot fail")
}

/// The profiles of a pprof file (gzipped or not), one per event its value columns hold:
/// jtap's column pairs, Go's and Pyroscope's names (`samples`/`cpu`, `alloc_objects`/
/// `alloc_space`, `inuse_*`, `contentions`/`delay`); other columns are skipped. Frames are
/// the location's lines (inlined ones first), Java methods by their `system_name`
/// descriptor.
pub fn read(bytes: &[u8], only: &[String]) -> Result<Vec<Profile>, String> {
    let mut raw = Vec::new();
    let bytes = if bytes.starts_with(&[0x1f, 0x8b]) {
        GzDecoder::new(bytes)
            .read_to_end(&mut raw)
            .map_err(|e| format!("not a readable pprof file: gunzip: {e}"))?;
        raw.as_slice()
    } else {
        bytes
    };
    let p = PprofProfile::decode(bytes).map_err(|e| format!("not a readable pprof file: {e}"))?;
    let s = |i: i64| p.string_table.get(i as usize).map_or("", String::as_str);
    let columns: Vec<(&str, &str)> = p
        .sample_type
        .iter()
        .map(|t| (s(t.r#type), s(t.unit)))
        .collect();
    let functions: HashMap<u64, &Function> = p.function.iter().map(|f| (f.id, f)).collect();
    // Each location's frames, caller first (pprof lists a location's inlined lines callee
    // first).
    let locations: HashMap<u64, Vec<Frame>> = p
        .location
        .iter()
        .map(|location| {
            let last = location.line.len().saturating_sub(1);
            let frames = location
                .line
                .iter()
                .enumerate()
                .rev()
                .map(|(i, line)| {
                    let (name, system_name) = functions
                        .get(&line.function_id)
                        .map_or(("[unknown]", ""), |f| (s(f.name), s(f.system_name)));
                    pprof_frame(name, system_name, line.line, i < last)
                })
                .collect();
            (location.id, frames)
        })
        .collect();
    let mut profiles = Vec::new();
    for (kind, counts_of) in pprof_events(&columns, p.period.max(0) as u64) {
        if !only.is_empty() && !only.iter().any(|e| kind.is(e)) {
            continue;
        }
        let mut profile = Profile::new(Metadata {
            event: kind.name.to_string(),
            engine: kind.name.to_string(),
            // The period is the first column pair's: a time-based event's sampling interval.
            interval: match profiles.is_empty() && kind.timed {
                true => p.period.max(0) as u64,
                false => 0,
            },
            weight_unit: kind.weight_unit.into(),
            duration_ns: p.duration_nanos.max(0) as u64,
            start_time_ns: p.time_nanos.max(0) as u64,
            ..Metadata::default()
        });
        for sample in &p.sample {
            let counts = counts_of(&sample.value);
            if counts == StackCounts::default() {
                continue;
            }
            let mut stack: Vec<Frame> = sample
                .location_id
                .iter()
                .rev()
                .flat_map(|id| locations.get(id).into_iter().flatten().cloned())
                .collect();
            if kind.class_leaf {
                if let Some(leaf) = stack.last_mut().filter(|f| is_class_leaf(f)) {
                    *leaf = Frame::new(std::mem::take(&mut leaf.name), FrameKind::Class);
                }
            }
            profile.add_frame_counts(&stack, counts);
        }
        profiles.push(profile);
    }
    if profiles.is_empty() && only.is_empty() {
        let names: Vec<&str> = columns.iter().map(|(t, _)| *t).collect();
        return Err(format!(
            "no sample type jtap reads in this pprof file (it has: {})",
            names.join(", ")
        ));
    }
    Ok(profiles)
}

/// How a value column pair (or single column) of a pprof file reads as one of jtap's events.
type CountsOf = Box<dyn Fn(&[i64]) -> StackCounts>;

/// The events a pprof file's columns hold, each with how to read a sample's counts.
/// `period` (the file's) turns a column of sample counts into time.
fn pprof_events(columns: &[(&str, &str)], period: u64) -> Vec<(&'static Kind, CountsOf)> {
    let at = |names: &[&str]| columns.iter().position(|(t, _)| names.contains(t));
    let counts = |i: usize| matches!(columns[i].1, "count" | "samples" | "");
    let value = |values: &[i64], i: usize| values.get(i).copied().unwrap_or(0).max(0) as u64;
    let mut events: Vec<(&'static Kind, CountsOf)> = Vec::new();
    // Time-based events: a nanoseconds column named by the event and a count column
    // ("samples", or jtap's "<event>_samples" in a session); async-profiler writes the
    // event's column as sample counts.
    for kind in event::KINDS.into_iter().filter(|k| k.timed) {
        let Some(time) = at(&[kind.name]) else {
            continue;
        };
        let own = format!("{}_samples", kind.name);
        let count = columns
            .iter()
            .position(|(t, _)| *t == own)
            .or_else(|| at(&["samples"]).filter(|_| events.is_empty()));
        let time_counts = counts(time);
        events.push((
            kind,
            Box::new(move |v| match (count, time_counts) {
                (_, true) => StackCounts::sampled(value(v, time), value(v, time) * period),
                (Some(count), false) => StackCounts::sampled(value(v, count), value(v, time)),
                (None, false) => {
                    StackCounts::sampled(u64::from(value(v, time) > 0), value(v, time))
                }
            }),
        ));
    }
    // Weighted events: an events column and a weight column, by their names or aliases. A
    // column read as one kind is not read again as another (live and nativemem-live share
    // `inuse_space`): kinds whose events column is there come first.
    let mut claimed: Vec<usize> = Vec::new();
    let mut weighted: Vec<&'static Kind> =
        event::KINDS.into_iter().filter(|k| k.weighted).collect();
    weighted.sort_by_key(|k| at(&[k.pprof.0]).is_none() && at(k.pprof_aliases.0).is_none());
    for kind in weighted {
        let named = |first: &str, more: &[&str]| {
            let names: Vec<&str> = std::iter::once(first).chain(more.iter().copied()).collect();
            at(&names).filter(|i| !claimed.contains(i))
        };
        let objects = named(kind.pprof.0, kind.pprof_aliases.0);
        let weight = named(kind.pprof.1, kind.pprof_aliases.1);
        if objects.is_none() && weight.is_none() {
            continue;
        }
        claimed.extend(objects.into_iter().chain(weight));
        events.push((
            kind,
            Box::new(move |v| {
                let events = objects.map_or(0, |i| value(v, i));
                StackCounts {
                    samples: events,
                    weight: weight.map_or(0, |i| value(v, i)),
                    events,
                }
            }),
        ));
    }
    events
}

/// A frame of a pprof location: a Java method when the function's system name is its name
/// followed by a descriptor (as jtap writes them) or its name is dotted (async-profiler
/// writes classes in their internal form, `java/lang/String.hashCode`), else native code.
/// The leaf of an allocation or lock stack whose last part is capitalised is the class.
fn pprof_frame(name: &str, system_name: &str, line: i64, inlined: bool) -> Frame {
    let signature = system_name
        .strip_prefix(name)
        .filter(|rest| rest.starts_with('('))
        .map(str::to_string);
    let line = u32::try_from(line).ok().filter(|&l| l > 0);
    let java =
        signature.is_some() || (name.contains('.') && !name.contains(".so") && !name.contains(' '));
    let name = if java {
        name.replace('/', ".")
    } else {
        name.to_string()
    };
    match (java, inlined) {
        (true, true) => Frame::java(name, FrameKind::Inlined, signature, line),
        (true, false) => Frame::java(name, FrameKind::Compiled, signature, line),
        (false, _) => Frame::new(name, FrameKind::Native),
    }
}

/// Whether a frame read as a method is the class an allocation or lock stack ends with
/// (`java.lang.String`, `byte[]`).
fn is_class_leaf(frame: &Frame) -> bool {
    let last = frame.name.rsplit('.').next().unwrap_or("");
    frame.name.ends_with("[]") || last.starts_with(|c: char| c.is_ascii_uppercase())
}

/// What a decoded pprof file holds, for checks: sample types and per-type totals.
#[derive(Debug, Clone, PartialEq)]
pub struct PprofTotals {
    /// `(type, unit)` of each value column.
    pub sample_types: Vec<(String, String)>,
    /// Sum of each value column over all samples.
    pub totals: Vec<i64>,
    /// Number of samples (distinct stacks).
    pub samples: usize,
    /// Leaf function names by descending weight (first column's tie-break).
    pub functions: Vec<String>,
}

/// Gunzips and decodes a pprof file.
pub fn decode(gzipped: &[u8]) -> Result<PprofTotals, String> {
    let mut raw = Vec::new();
    GzDecoder::new(gzipped)
        .read_to_end(&mut raw)
        .map_err(|e| format!("gunzip: {e}"))?;
    let p = PprofProfile::decode(raw.as_slice()).map_err(|e| format!("decode: {e}"))?;
    let s = |i: i64| p.string_table.get(i as usize).cloned().unwrap_or_default();
    let mut totals = vec![0i64; p.sample_type.len()];
    for sample in &p.sample {
        for (t, v) in totals.iter_mut().zip(&sample.value) {
            *t += v;
        }
    }
    Ok(PprofTotals {
        sample_types: p
            .sample_type
            .iter()
            .map(|t| (s(t.r#type), s(t.unit)))
            .collect(),
        totals,
        samples: p.sample.len(),
        functions: p.function.iter().map(|f| s(f.name)).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::tests::sample_profile;

    #[test]
    fn round_trips_totals() {
        let p = sample_profile();
        let decoded = decode(&render(&[&p])).unwrap();
        assert_eq!(
            decoded.sample_types[0],
            ("samples".to_string(), "count".to_string())
        );
        assert_eq!(
            decoded.sample_types[1],
            ("cpu".to_string(), "nanoseconds".to_string())
        );
        assert_eq!(
            decoded.totals,
            vec![p.total_samples() as i64, p.total_weight() as i64]
        );
        assert_eq!(decoded.samples, p.stack_count());
        assert!(decoded.functions.contains(&"Main.c".to_string()));
    }

    #[test]
    fn jtaps_pprof_reads_back_with_every_event_frame_and_count() {
        let cpu = sample_profile();
        let mut alloc = Profile::new(crate::Metadata {
            event: "alloc".into(),
            weight_unit: "bytes".into(),
            ..Default::default()
        });
        let main = Frame::java(
            "app.Main.main",
            FrameKind::Interpreted,
            Some("([Ljava/lang/String;)V".into()),
            Some(7),
        );
        alloc.add_frame_counts(
            &[main.clone(), Frame::new("byte[]", FrameKind::Class)],
            crate::StackCounts {
                samples: 2,
                weight: 4096,
                events: 9,
            },
        );
        let back = read(&render(&[&cpu, &alloc]), &[]).unwrap();
        let events: Vec<&str> = back.iter().map(|p| p.metadata.event.as_str()).collect();
        assert_eq!(events, ["cpu", "alloc"]);
        assert_eq!(back[0].total_samples(), cpu.total_samples());
        assert_eq!(back[0].total_weight(), cpu.total_weight());
        assert_eq!(back[0].stack_count(), cpu.stack_count());
        assert_eq!(
            (
                back[1].total_weight(),
                back[1].total(crate::Counter::Events)
            ),
            (4096, 9)
        );
        // The Java frame keeps its method, descriptor and line.
        let frame = back[1].frame(back[1].stack(0)[0]);
        assert_eq!(
            (frame.name.as_str(), frame.signature.as_deref(), frame.line),
            ("app.Main.main", Some("([Ljava/lang/String;)V"), Some(7))
        );
        // Only the events asked for; a file with nothing jtap reads says what it has.
        assert_eq!(
            read(&render(&[&cpu, &alloc]), &["alloc".into()])
                .unwrap()
                .len(),
            1
        );
        let mut strings = Strings::new();
        let odd = PprofProfile {
            sample_type: vec![ValueType {
                r#type: strings.id("goroutine"),
                unit: strings.id("count"),
            }],
            string_table: strings.table,
            ..PprofProfile::default()
        };
        let err = read(&odd.encode_to_vec(), &[]).unwrap_err();
        assert!(err.contains("it has: goroutine"), "{err}");
        assert!(read(b"\x1f\x8bgarbage", &[])
            .unwrap_err()
            .starts_with("not a readable pprof file"));
    }

    #[test]
    fn several_events_share_functions_and_keep_their_columns() {
        let cpu = sample_profile();
        let mut wall = sample_profile();
        wall.metadata.event = "wall".into();
        let mut alloc = Profile::new(crate::Metadata {
            event: "alloc".into(),
            weight_unit: "bytes".into(),
            ..Default::default()
        });
        let java = |line| {
            Frame::java(
                "Main.c",
                crate::FrameKind::Compiled,
                Some("()V".into()),
                Some(line),
            )
        };
        alloc.add_frame_counts(
            &[java(3)],
            crate::StackCounts {
                samples: 2,
                weight: 2048,
                events: 5,
            },
        );
        alloc.add_frame_counts(
            &[java(4)],
            crate::StackCounts {
                samples: 1,
                weight: 1024,
                events: 1,
            },
        );
        let decoded = decode(&render(&[&cpu, &wall, &alloc])).unwrap();
        let types: Vec<&str> = decoded
            .sample_types
            .iter()
            .map(|(t, _)| t.as_str())
            .collect();
        assert_eq!(
            types,
            [
                "cpu_samples",
                "cpu",
                "wall_samples",
                "wall",
                "alloc_objects",
                "alloc_space"
            ]
        );
        assert_eq!(
            decoded.totals,
            [
                8,
                cpu.total_weight() as i64,
                8,
                wall.total_weight() as i64,
                6,
                3072
            ]
        );
        // One Main.c function for the compiled frames of the cpu and wall profiles, one for
        // the alloc profile's frames, which carry a descriptor; its two lines are two
        // locations of that one function.
        assert_eq!(
            decoded.functions.iter().filter(|f| *f == "Main.c").count(),
            2
        );
    }
}
