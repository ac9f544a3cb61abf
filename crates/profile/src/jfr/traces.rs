//! A chunk's stack traces, read straight from its constant pools into frames of four numbers
//! (method key, line, bytecode index, frame type key) instead of generic values: the stack
//! trace pool is most of a profile's recording, and a value tree per frame (built and freed
//! again) was most of the time `jtap convert` took. Where a chunk's metadata lays stack traces
//! out otherwise than as `jdk.types.StackTrace` of `jdk.types.StackFrame` with those fields, its
//! traces are read as generic values like any other pool.

use rustc_hash::FxHashMap as HashMap;

use super::encoding::{In, Malformed};
use super::read::{Class, Primitive};

/// A frame as its four fields: the method's pool key, the line, the bytecode index and the
/// frame type's pool key (`u64::MAX` for a field the chunk's frames do not have).
pub type FrameKey = [u64; 4];

/// The slot of a [`FrameKey`] each of the frame type's fields goes to, and how it is read.
#[derive(Clone, Copy)]
struct FrameField {
    slot: usize,
    /// A 32-bit `int` (sign-extended as the generic reader does), else a pool key or a long.
    int: bool,
}

/// A field of the stack trace type.
#[derive(Clone, Copy)]
enum TraceField {
    /// `truncated`, or any other boolean.
    Boolean,
    /// The frames.
    Frames,
}

/// How a chunk lays out its stack traces, when it is the layout this module reads.
struct Layout {
    trace_type: u64,
    trace_fields: Vec<TraceField>,
    frame_fields: Vec<FrameField>,
    method_type: Option<u64>,
    frame_type_type: Option<u64>,
}

/// The chunk's stack traces read so far, by pool key.
#[derive(Default)]
pub struct Traces {
    layout: Option<Layout>,
    /// Each trace's frames, leaf first: a range of `frames`.
    by_key: HashMap<u64, (usize, usize)>,
    frames: Vec<FrameKey>,
}

impl Traces {
    /// Traces of a chunk of these types: read straight when its stack traces have the layout
    /// this module knows.
    pub fn new(types: &HashMap<u64, Class>) -> Traces {
        Traces {
            layout: Layout::of(types),
            ..Traces::default()
        }
    }

    /// Whether the pool of `type_id` is the stack traces, read by [`Traces::read`].
    pub fn reads(&self, type_id: u64) -> bool {
        self.layout
            .as_ref()
            .is_some_and(|l| l.trace_type == type_id)
    }

    /// Reads the stack trace of pool key `key` at `input`.
    pub fn read(&mut self, key: u64, input: &mut In, compressed: bool) -> Result<(), Malformed> {
        let Some(layout) = &self.layout else {
            return Err(Malformed("no stack trace layout".into()));
        };
        let start = self.frames.len();
        for field in &layout.trace_fields {
            match field {
                TraceField::Boolean => {
                    input.byte()?;
                }
                TraceField::Frames => {
                    let n = input.number(compressed)?;
                    // Each frame takes a byte at least: more than are left is no trace.
                    let n = usize::try_from(n)
                        .ok()
                        .filter(|&n| n <= input.left())
                        .ok_or_else(|| Malformed(format!("{n} frames")))?;
                    for _ in 0..n {
                        let mut frame = [u64::MAX; 4];
                        for field in &layout.frame_fields {
                            let n = input.number(compressed)?;
                            frame[field.slot] = match field.int {
                                true => i64::from(n as u32 as i32) as u64,
                                false => n as u64,
                            };
                        }
                        self.frames.push(frame);
                    }
                }
            }
        }
        self.by_key.insert(key, (start, self.frames.len()));
        Ok(())
    }

    /// The frames of the trace an event refers to by (pool type, key), leaf first; None when
    /// that is not a trace read here (the event then reads it as a generic value).
    pub fn frames(&self, type_id: u64, key: u64) -> Option<&[FrameKey]> {
        if !self.reads(type_id) {
            return None;
        }
        Some(match self.by_key.get(&key) {
            Some(&(start, end)) => &self.frames[start..end],
            None => &[],
        })
    }

    /// The pool types of a frame's method and frame type.
    pub fn frame_pools(&self) -> (Option<u64>, Option<u64>) {
        self.layout
            .as_ref()
            .map_or((None, None), |l| (l.method_type, l.frame_type_type))
    }
}

impl Layout {
    fn of(types: &HashMap<u64, Class>) -> Option<Layout> {
        let (&trace_type, trace) = types
            .iter()
            .find(|(_, class)| class.name == "jdk.types.StackTrace")?;
        let mut frame_type = None;
        let mut trace_fields = Vec::new();
        for field in &trace.fields {
            let class = types.get(&field.type_id)?;
            trace_fields.push(match (class.primitive, field.array, field.pooled) {
                (Some(Primitive::Boolean), false, false) => TraceField::Boolean,
                (None, true, false) if frame_type.is_none() => {
                    frame_type = Some(class);
                    TraceField::Frames
                }
                _ => return None,
            });
        }
        let frame = frame_type?;
        if frame.name != "jdk.types.StackFrame" || frame.fields.is_empty() {
            return None;
        }
        let (mut method_type, mut frame_type_type) = (None, None);
        let mut frame_fields = Vec::new();
        for field in &frame.fields {
            let slot = ["method", "lineNumber", "bytecodeIndex", "type"]
                .iter()
                .position(|name| *name == field.name)?;
            let primitive = types.get(&field.type_id)?.primitive;
            let int = match (field.array, field.pooled, primitive) {
                (false, true, _) => false,
                (false, false, Some(Primitive::Int)) => true,
                (false, false, Some(Primitive::Long)) => false,
                _ => return None,
            };
            match (slot, field.pooled) {
                (0, true) => method_type = Some(field.type_id),
                (3, true) => frame_type_type = Some(field.type_id),
                (0 | 3, _) => return None,
                _ => {}
            }
            frame_fields.push(FrameField { slot, int });
        }
        Some(Layout {
            trace_type,
            trace_fields,
            frame_fields,
            method_type,
            frame_type_type,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::read::Field;
    use super::*;

    fn class(name: &str, fields: &[(&str, u64, bool, bool)]) -> Class {
        Class {
            name: name.into(),
            fields: fields
                .iter()
                .map(|&(name, type_id, pooled, array)| Field {
                    name: name.into(),
                    type_id,
                    pooled,
                    array,
                })
                .collect(),
            primitive: Primitive::of(name),
        }
    }

    /// The JDK's types, with the stack frame's fields as given.
    fn types(frame_fields: &[(&str, u64, bool, bool)]) -> HashMap<u64, Class> {
        let mut types = HashMap::default();
        types.insert(1, class("boolean", &[]));
        types.insert(2, class("int", &[]));
        types.insert(3, class("jdk.types.Method", &[]));
        types.insert(4, class("jdk.types.FrameType", &[]));
        types.insert(
            5,
            class(
                "jdk.types.StackTrace",
                &[("truncated", 1, false, false), ("frames", 6, false, true)],
            ),
        );
        types.insert(6, class("jdk.types.StackFrame", frame_fields));
        types
    }

    #[test]
    fn the_jdks_stack_traces_are_read_straight_and_others_are_not() {
        let jdk = [
            ("method", 3, true, false),
            ("lineNumber", 2, false, false),
            ("bytecodeIndex", 2, false, false),
            ("type", 4, true, false),
        ];
        let mut traces = Traces::new(&types(&jdk));
        assert!(traces.reads(5) && !traces.reads(6));
        assert_eq!(traces.frame_pools(), (Some(3), Some(4)));
        // Key 7: not truncated, two frames (method 10 at line 5, bci 2, type 1; method 11 at
        // line -1, which the JDK writes as the varint of 0xffffffff, bci 0, type 2).
        let bytes = [0, 2, 10, 5, 2, 1, 11, 0xff, 0xff, 0xff, 0xff, 0x0f, 0, 2];
        traces.read(7, &mut In::new(&bytes, 0), true).unwrap();
        let minus_one = i64::from(-1i32) as u64;
        assert_eq!(
            traces.frames(5, 7),
            Some(&[[10, 5, 2, 1], [11, minus_one, 0, 2]][..])
        );
        assert_eq!(traces.frames(5, 8), Some(&[][..]));
        assert_eq!(traces.frames(3, 7), None);
        // A frame count past the end is malformed, not an allocation.
        assert!(traces.read(9, &mut In::new(&[0, 0x7f], 0), true).is_err());
        // A frame field this module does not know, or a method not in a pool: generic values.
        let extra = [("method", 3, true, false), ("locals", 2, false, false)];
        assert!(!Traces::new(&types(&extra)).reads(5));
        let inline = [("method", 3, false, false), ("lineNumber", 2, false, false)];
        assert!(!Traces::new(&types(&inline)).reads(5));
    }
}
