//! pprof: gzipped `profile.proto`, read by `go tool pprof`, Pyroscope and many UIs.
//! The messages are hand-written prost structs (no protoc on the build machines); only the
//! fields jtap fills are declared, with their official tag numbers.

use std::collections::HashMap;
use std::io::{Read, Write};

use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use flate2::Compression;
use prost::Message;

use crate::model::{FrameId, Profile};

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
/// time-based engines the events are the samples.
fn sample_types(event: &str, weight_unit: &str) -> [(&'static str, String); 2] {
    match event {
        "alloc" => [
            ("alloc_objects", "count".into()),
            ("alloc_space", "bytes".into()),
        ],
        "live" => [
            ("inuse_objects", "count".into()),
            ("inuse_space", "bytes".into()),
        ],
        "lock" => [
            ("contentions", "count".into()),
            ("delay", "nanoseconds".into()),
        ],
        "wall" => [("samples", "count".into()), ("wall", "nanoseconds".into())],
        _ => [
            ("samples", "count".into()),
            ("cpu", weight_unit.to_string()),
        ],
    }
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

/// Encodes and gzips the profile.
pub fn render(profile: &Profile) -> Vec<u8> {
    let m = &profile.metadata;
    let mut strings = Strings::new();
    let [count_type, weight_type] = sample_types(&m.event, &m.weight_unit);
    let sample_type = vec![
        ValueType {
            r#type: strings.id(count_type.0),
            unit: strings.id(&count_type.1),
        },
        ValueType {
            r#type: strings.id(weight_type.0),
            unit: strings.id(&weight_type.1),
        },
    ];
    // One function and one location per frame; ids are frame id + 1 (0 is reserved).
    let mut function = Vec::with_capacity(profile.frames().len());
    let mut location = Vec::with_capacity(profile.frames().len());
    for (i, frame) in profile.frames().iter().enumerate() {
        let id = i as u64 + 1;
        let name = strings.id(&frame.name);
        function.push(Function {
            id,
            name,
            system_name: name,
        });
        location.push(Location {
            id,
            line: vec![Line {
                function_id: id,
                line: 0,
            }],
        });
    }
    let sample = profile
        .stacks()
        .into_iter()
        .map(|(stack, counts)| Sample {
            location_id: stack
                .iter()
                .rev()
                .map(|&f: &FrameId| f as u64 + 1)
                .collect(),
            value: vec![counts.events as i64, counts.weight as i64],
        })
        .collect();
    let message = PprofProfile {
        period_type: Some(sample_type[1].clone()),
        sample_type,
        sample,
        location,
        function,
        time_nanos: m.start_time_ns as i64,
        duration_nanos: m.duration_ns as i64,
        period: m.interval as i64,
        default_sample_type: 1,
        string_table: strings.table,
    };
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    gz.write_all(&message.encode_to_vec())
        .expect("writing to a Vec cannot fail");
    gz.finish().expect("writing to a Vec cannot fail")
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
        let decoded = decode(&render(&p)).unwrap();
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
}
