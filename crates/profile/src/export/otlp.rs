//! OTLP profiles: the OpenTelemetry profiles signal (`opentelemetry/proto/profiles/
//! v1development/profiles.proto`, as PyPI's opentelemetry-proto 1.45.2 has it), a
//! `ProfilesData` message, which reads as an `ExportProfilesServiceRequest` too (the same
//! fields and tags).
//!
//! Each event of the session gives two `Profile`s, its events (`samples`, `alloc_objects`,
//! ... in `count`) and its weight (`cpu` in nanoseconds, `alloc_space` in bytes, ...), the
//! pprof sample types; tables are shared in the `ProfilesDictionary`, each with its zero
//! entry at index 0 as the format requires. A Java frame's function is its method (the
//! descriptor in `system_name`), its location the line sampled, and every location says its
//! kind of code in the `profile.frame.type` attribute (`jvm`, `native`, `kernel`). A request
//! label (`--by`, a stack's root frame) becomes its samples' `label` attribute.
//! The messages are hand-written prost structs, the fields jtap fills, official tags.

use std::collections::HashMap;

use prost::Message;

use crate::model::{Frame, FrameId, FrameKind, Profile};

#[derive(Clone, PartialEq, Message)]
struct ProfilesData {
    #[prost(message, repeated, tag = "1")]
    resource_profiles: Vec<ResourceProfiles>,
    #[prost(message, optional, tag = "2")]
    dictionary: Option<ProfilesDictionary>,
}

#[derive(Clone, PartialEq, Message)]
struct ResourceProfiles {
    #[prost(message, optional, tag = "1")]
    resource: Option<Resource>,
    #[prost(message, repeated, tag = "2")]
    scope_profiles: Vec<ScopeProfiles>,
}

/// `opentelemetry.proto.resource.v1.Resource`.
#[derive(Clone, PartialEq, Message)]
struct Resource {
    #[prost(message, repeated, tag = "1")]
    attributes: Vec<KeyValue>,
}

/// `opentelemetry.proto.common.v1.KeyValue`.
#[derive(Clone, PartialEq, Message)]
struct KeyValue {
    #[prost(string, tag = "1")]
    key: String,
    #[prost(message, optional, tag = "2")]
    value: Option<AnyValue>,
}

/// `opentelemetry.proto.common.v1.AnyValue`, its `string_value` only.
#[derive(Clone, PartialEq, Message)]
struct AnyValue {
    #[prost(string, tag = "1")]
    string_value: String,
}

#[derive(Clone, PartialEq, Message)]
struct ScopeProfiles {
    #[prost(message, optional, tag = "1")]
    scope: Option<InstrumentationScope>,
    #[prost(message, repeated, tag = "2")]
    profiles: Vec<OtlpProfile>,
}

/// `opentelemetry.proto.common.v1.InstrumentationScope`.
#[derive(Clone, PartialEq, Message)]
struct InstrumentationScope {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(string, tag = "2")]
    version: String,
}

#[derive(Clone, PartialEq, Message)]
struct OtlpProfile {
    #[prost(message, optional, tag = "1")]
    sample_type: Option<ValueType>,
    #[prost(message, repeated, tag = "2")]
    samples: Vec<Sample>,
    #[prost(fixed64, tag = "3")]
    time_unix_nano: u64,
    #[prost(uint64, tag = "4")]
    duration_nano: u64,
    #[prost(message, optional, tag = "5")]
    period_type: Option<ValueType>,
    #[prost(int64, tag = "6")]
    period: i64,
}

#[derive(Clone, PartialEq, Message)]
struct ValueType {
    #[prost(int32, tag = "1")]
    type_strindex: i32,
    #[prost(int32, tag = "2")]
    unit_strindex: i32,
}

#[derive(Clone, PartialEq, Message)]
struct Sample {
    #[prost(int32, tag = "1")]
    stack_index: i32,
    #[prost(int32, repeated, tag = "2")]
    attribute_indices: Vec<i32>,
    #[prost(int64, repeated, tag = "4")]
    values: Vec<i64>,
}

#[derive(Clone, PartialEq, Message)]
struct ProfilesDictionary {
    #[prost(message, repeated, tag = "1")]
    mapping_table: Vec<Mapping>,
    #[prost(message, repeated, tag = "2")]
    location_table: Vec<Location>,
    #[prost(message, repeated, tag = "3")]
    function_table: Vec<Function>,
    #[prost(message, repeated, tag = "4")]
    link_table: Vec<Link>,
    #[prost(string, repeated, tag = "5")]
    string_table: Vec<String>,
    #[prost(message, repeated, tag = "6")]
    attribute_table: Vec<KeyValueAndUnit>,
    #[prost(message, repeated, tag = "7")]
    stack_table: Vec<Stack>,
}

/// Unused beyond the zero entry: jtap's frames are symbolized.
#[derive(Clone, PartialEq, Message)]
struct Mapping {}

/// Unused beyond the zero entry: no trace links.
#[derive(Clone, PartialEq, Message)]
struct Link {}

#[derive(Clone, PartialEq, Message)]
struct Location {
    #[prost(message, repeated, tag = "3")]
    lines: Vec<Line>,
    #[prost(int32, repeated, tag = "4")]
    attribute_indices: Vec<i32>,
}

#[derive(Clone, PartialEq, Message)]
struct Line {
    #[prost(int32, tag = "1")]
    function_index: i32,
    #[prost(int64, tag = "2")]
    line: i64,
}

#[derive(Clone, PartialEq, Message)]
struct Function {
    #[prost(int32, tag = "1")]
    name_strindex: i32,
    #[prost(int32, tag = "2")]
    system_name_strindex: i32,
}

#[derive(Clone, PartialEq, Message)]
struct KeyValueAndUnit {
    #[prost(int32, tag = "1")]
    key_strindex: i32,
    #[prost(message, optional, tag = "2")]
    value: Option<AnyValue>,
}

#[derive(Clone, PartialEq, Message)]
struct Stack {
    #[prost(int32, repeated, tag = "1")]
    location_indices: Vec<i32>,
}

/// The dictionary being filled: each table with its zero entry, and the indexes of what it
/// holds.
struct Tables<'p> {
    dictionary: ProfilesDictionary,
    strings: HashMap<String, i32>,
    functions: HashMap<(&'p str, Option<&'p str>), i32>,
    locations: HashMap<&'p Frame, i32>,
    stacks: HashMap<Vec<i32>, i32>,
    /// Attribute table entries by key and value.
    attributes: HashMap<(String, String), i32>,
}

impl<'p> Tables<'p> {
    fn new() -> Tables<'p> {
        Tables {
            dictionary: ProfilesDictionary {
                mapping_table: vec![Mapping::default()],
                location_table: vec![Location::default()],
                function_table: vec![Function::default()],
                link_table: vec![Link::default()],
                string_table: vec![String::new()],
                attribute_table: vec![KeyValueAndUnit::default()],
                stack_table: vec![Stack::default()],
            },
            strings: HashMap::from([(String::new(), 0)]),
            functions: HashMap::new(),
            locations: HashMap::new(),
            stacks: HashMap::new(),
            attributes: HashMap::new(),
        }
    }

    fn string(&mut self, text: &str) -> i32 {
        if let Some(&index) = self.strings.get(text) {
            return index;
        }
        let index = self.dictionary.string_table.len() as i32;
        self.dictionary.string_table.push(text.to_string());
        self.strings.insert(text.to_string(), index);
        index
    }

    fn value_type(&mut self, name: &str, unit: &str) -> ValueType {
        ValueType {
            type_strindex: self.string(name),
            unit_strindex: self.string(unit),
        }
    }

    /// `profile.frame.type` of a kind of frame, in the attribute table.
    fn frame_type(&mut self, kind: FrameKind) -> i32 {
        let value = match kind {
            FrameKind::Interpreted | FrameKind::Compiled | FrameKind::Inlined => "jvm",
            FrameKind::Native | FrameKind::Cpp => "native",
            FrameKind::Kernel => "kernel",
            FrameKind::Thread | FrameKind::Label | FrameKind::Class | FrameKind::Error => "jtap",
        };
        self.attribute("profile.frame.type", value)
    }

    /// The attribute `key` = `value`, in the attribute table.
    fn attribute(&mut self, key: &str, value: &str) -> i32 {
        let pair = (key.to_string(), value.to_string());
        if let Some(&index) = self.attributes.get(&pair) {
            return index;
        }
        let key_strindex = self.string(key);
        let index = self.dictionary.attribute_table.len() as i32;
        self.dictionary.attribute_table.push(KeyValueAndUnit {
            key_strindex,
            value: Some(AnyValue {
                string_value: pair.1.clone(),
            }),
        });
        self.attributes.insert(pair, index);
        index
    }

    fn location(&mut self, frame: &'p Frame) -> i32 {
        if let Some(&index) = self.locations.get(frame) {
            return index;
        }
        let key = (frame.name.as_str(), frame.signature.as_deref());
        let function_index = match self.functions.get(&key) {
            Some(&index) => index,
            None => {
                let name_strindex = self.string(&frame.name);
                let system_name_strindex = match &frame.signature {
                    Some(signature) => self.string(&format!("{}{signature}", frame.name)),
                    None => name_strindex,
                };
                let index = self.dictionary.function_table.len() as i32;
                self.dictionary.function_table.push(Function {
                    name_strindex,
                    system_name_strindex,
                });
                self.functions.insert(key, index);
                index
            }
        };
        let attribute_indices = vec![self.frame_type(frame.kind)];
        let index = self.dictionary.location_table.len() as i32;
        self.dictionary.location_table.push(Location {
            lines: vec![Line {
                function_index,
                line: frame.line.map_or(0, i64::from),
            }],
            attribute_indices,
        });
        self.locations.insert(frame, index);
        index
    }

    /// A stack (leaf first) of location indexes, in the stack table.
    fn stack(&mut self, locations: Vec<i32>) -> i32 {
        if let Some(&index) = self.stacks.get(&locations) {
            return index;
        }
        let index = self.dictionary.stack_table.len() as i32;
        self.dictionary.stack_table.push(Stack {
            location_indices: locations.clone(),
        });
        self.stacks.insert(locations, index);
        index
    }
}

/// Encodes the profiles of one session (one per event) as one OTLP `ProfilesData`.
pub fn render(profiles: &[&Profile]) -> Vec<u8> {
    render_for(profiles, &[])
}

/// [`render`] with these resource attributes besides `process.runtime.name` (`service.name`
/// and labels, for `push=otlp://`).
pub fn render_for(profiles: &[&Profile], resource: &[(String, String)]) -> Vec<u8> {
    let mut tables = Tables::new();
    let mut otlp_profiles = Vec::new();
    for profile in profiles {
        let metadata = &profile.metadata;
        let locations: Vec<i32> = profile
            .frames()
            .iter()
            .map(|frame| tables.location(frame))
            .collect();
        let stacks: Vec<(i32, Vec<i32>, u64, u64)> = profile
            .stacks()
            .into_iter()
            .map(|(stack, counts)| {
                let label = stack.first().and_then(|&f| profile.frame(f).label_text());
                let stack = &stack[usize::from(label.is_some())..];
                let leaf_first = stack.iter().rev().map(|&f: &FrameId| locations[f as usize]);
                let index = tables.stack(leaf_first.collect());
                let attributes = (label.into_iter())
                    .map(|text| tables.attribute("label", text))
                    .collect();
                (index, attributes, counts.events, counts.weight)
            })
            .collect();
        let [events, weight] = super::pprof::sample_types(&metadata.event, &metadata.weight_unit);
        let period_type = tables.value_type(&weight.0, &weight.1);
        for (column, (name, unit)) in [events, weight].into_iter().enumerate() {
            otlp_profiles.push(OtlpProfile {
                sample_type: Some(tables.value_type(&name, &unit)),
                samples: stacks
                    .iter()
                    .map(|(stack_index, attributes, events, weight)| Sample {
                        stack_index: *stack_index,
                        attribute_indices: attributes.clone(),
                        values: vec![[*events, *weight][column] as i64],
                    })
                    .collect(),
                time_unix_nano: metadata.start_time_ns,
                duration_nano: metadata.duration_ns,
                period_type: Some(period_type.clone()),
                period: metadata.interval as i64,
            });
        }
    }
    let message = ProfilesData {
        resource_profiles: vec![ResourceProfiles {
            resource: Some(Resource {
                attributes: [("process.runtime.name".to_string(), "java".to_string())]
                    .iter()
                    .chain(resource)
                    .map(|(key, value)| KeyValue {
                        key: key.clone(),
                        value: Some(AnyValue {
                            string_value: value.clone(),
                        }),
                    })
                    .collect(),
            }),
            scope_profiles: vec![ScopeProfiles {
                scope: Some(InstrumentationScope {
                    name: "jtap".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                }),
                profiles: otlp_profiles,
            }],
        }],
        dictionary: Some(tables.dictionary),
    };
    message.encode_to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::tests::sample_profile;

    #[test]
    fn profiles_share_one_dictionary_with_zero_entries_first() {
        let profile = sample_profile();
        let bytes = render(&[&profile, &profile]);
        let data = ProfilesData::decode(bytes.as_slice()).unwrap();
        let dictionary = data.dictionary.unwrap();
        assert_eq!(dictionary.string_table[0], "");
        assert_eq!(dictionary.stack_table[0], Stack::default());
        assert_eq!(dictionary.location_table[0], Location::default());
        // Both copies of the profile use the same stacks.
        let profiles = &data.resource_profiles[0].scope_profiles[0].profiles;
        assert_eq!(profiles.len(), 4);
        assert_eq!(profiles[0].samples, profiles[2].samples);
        let name = |p: &OtlpProfile| {
            let t = p.sample_type.as_ref().unwrap();
            (
                dictionary.string_table[t.type_strindex as usize].as_str(),
                dictionary.string_table[t.unit_strindex as usize].as_str(),
            )
        };
        assert_eq!(name(&profiles[0]), ("samples", "count"));
        assert_eq!(name(&profiles[1]), ("cpu", "nanoseconds"));
        let events: i64 = profiles[0].samples.iter().map(|s| s.values[0]).sum();
        assert_eq!(events as u64, profile.total_samples());
        // Leaf first: the heaviest stack is main → c.
        let stack = &dictionary.stack_table[profiles[1].samples[0].stack_index as usize];
        let function_of = |location: i32| {
            let line = &dictionary.location_table[location as usize].lines[0];
            let function = &dictionary.function_table[line.function_index as usize];
            dictionary.string_table[function.name_strindex as usize].as_str()
        };
        let names: Vec<&str> = stack
            .location_indices
            .iter()
            .map(|&l| function_of(l))
            .collect();
        assert_eq!(names, ["Main.c", "Main.main"]);
    }

    #[test]
    fn a_request_label_is_its_samples_attribute_not_a_frame() {
        let mut profile = Profile::new(crate::Metadata {
            event: "cpu".into(),
            ..crate::Metadata::default()
        });
        let work = Frame::new("Main.work", FrameKind::Compiled);
        let counts = crate::StackCounts {
            samples: 3,
            weight: 3,
            events: 3,
        };
        profile.add_frame_counts(&[Frame::request_label("/a"), work.clone()], counts);
        profile.add_frame_counts(&[work], counts);
        let data = ProfilesData::decode(render(&[&profile]).as_slice()).unwrap();
        let dictionary = data.dictionary.unwrap();
        let samples = &data.resource_profiles[0].scope_profiles[0].profiles[0].samples;
        // One stack, the label's samples with the attribute.
        assert_eq!(samples[0].stack_index, samples[1].stack_index);
        let labelled: Vec<(&str, &str)> = samples
            .iter()
            .flat_map(|s| &s.attribute_indices)
            .map(|&i| {
                let attribute = &dictionary.attribute_table[i as usize];
                let key = dictionary.string_table[attribute.key_strindex as usize].as_str();
                (key, attribute.value.as_ref().unwrap().string_value.as_str())
            })
            .collect();
        assert_eq!(labelled, [("label", "/a")]);
    }
}
