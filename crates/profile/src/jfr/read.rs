//! Recordings as profiles: every chunk's metadata says how its records are laid out, so one
//! generic decoder reads jtap's recordings, the JDK's (`JFR.start`,
//! `-XX:StartFlightRecording`, JDK 11 to 25) and async-profiler's. The samples of the events
//! profiles are made of become one profile per kind, each sample logged with its time and
//! thread:
//!
//! | events | profile |
//! |---|---|
//! | `jdk.ExecutionSample` | `cpu` |
//! | `profiler.WallClockSample` | `wall` |
//! | `jdk.NativeMethodSample` | `native` |
//! | `jdk.ObjectAllocationSample`, else `jdk.ObjectAllocationInNewTLAB`/`OutsideTLAB` | `alloc` (bytes) |
//! | `jdk.JavaMonitorEnter`, `jdk.ThreadPark` | `lock` (time waited) |
//! | `profiler.Malloc` | `nativemem` (bytes) |
//!
//! Both kinds of allocation event stand for all allocations: a recording that holds both
//! (JDK 16+ with the TLAB events enabled) is read by its samples alone, else they would count
//! every allocation twice.
//!
//! Traced calls (`jdk.MethodTrace`: jtap's slow-call profiles, JDK 25's method tracing) go
//! with every profile of the recording, for `convert --latency`. Every other event is
//! skipped by its size.

use rustc_hash::FxHashMap as HashMap;

use super::chunk::{CHECKPOINT, COMPRESSED_INTS, HEADER_SIZE, MAGIC, METADATA};
use super::encoding::{string, In, Malformed};
use super::samples::{Layout, Profiles, Settings, Slots};
use super::traces::Traces;
use crate::model::Profile;
use crate::select::Wanted;

/// Whether `bytes` start like a JFR recording.
pub fn is_recording(bytes: &[u8]) -> bool {
    bytes.starts_with(MAGIC)
}

/// The profiles of a recording, one per kind of sample it holds (in the order of the table
/// of the module doc); with `only`, just those events (`cpu`, `alloc`, ...): the others are
/// skipped without decoding.
pub fn read(bytes: &[u8], wanted: &Wanted) -> Result<Vec<Profile>, String> {
    let only = wanted.events;
    let mut profiles = Profiles::new(wanted.times);
    let mut at = 0;
    while at < bytes.len() {
        let size = read_chunk(bytes, at, only, &mut profiles).map_err(|Malformed(why)| {
            format!("not a readable JFR recording: {why} (chunk at byte {at})")
        })?;
        at += size;
    }
    Ok(profiles.finish())
}

/// A decoded value.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) enum Value {
    #[default]
    Null,
    Long(i64),
    Double(f64),
    Bool(bool),
    Str(String),
    /// A constant-pool reference: type id and key.
    Ref(u64, u64),
    /// An object of a type: its fields in the metadata's order.
    Object(u64, Vec<Value>),
    Array(Vec<Value>),
}

/// A type of the chunk's metadata.
#[derive(Debug, Default)]
pub(super) struct Class {
    pub name: String,
    pub fields: Vec<Field>,
    /// A primitive (or `java.lang.String`), read by name.
    pub primitive: Option<Primitive>,
}

#[derive(Debug)]
pub(super) struct Field {
    pub name: String,
    pub type_id: u64,
    pub pooled: bool,
    pub array: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Primitive {
    Boolean,
    Byte,
    Char,
    /// `short` and `int`.
    Int,
    /// `long`.
    Long,
    Float,
    Double,
    String,
}

impl Primitive {
    pub(super) fn of(name: &str) -> Option<Primitive> {
        Some(match name {
            "boolean" => Primitive::Boolean,
            "byte" => Primitive::Byte,
            "char" => Primitive::Char,
            "short" | "int" => Primitive::Int,
            "long" => Primitive::Long,
            "float" => Primitive::Float,
            "double" => Primitive::Double,
            "java.lang.String" => Primitive::String,
            _ => return None,
        })
    }
}

/// One chunk's types and constant pools.
pub(super) struct Chunk {
    compressed: bool,
    pub types: HashMap<u64, Class>,
    string_type: Option<u64>,
    pools: HashMap<(u64, u64), Value>,
    /// The stack trace pool, read straight (see [`super::traces`]).
    pub traces: Traces,
    start_ns: i64,
    pub start_ticks: i64,
    ticks_per_second: i64,
}

/// Guards against malformed nesting.
const MAX_DEPTH: usize = 32;

impl Chunk {
    pub(super) fn int(&self, input: &mut In) -> Result<i64, Malformed> {
        input.number(self.compressed)
    }

    fn read_string(&self, input: &mut In) -> Result<Value, Malformed> {
        Ok(match input.byte()? {
            string::NULL => Value::Null,
            string::EMPTY => Value::Str(String::new()),
            string::CONSTANT => Value::Ref(
                self.string_type.unwrap_or(u64::MAX),
                self.int(input)? as u64,
            ),
            string::UTF8 => {
                let n = input.count()?;
                Value::Str(String::from_utf8_lossy(input.take(n)?).into_owned())
            }
            string::CHARS => {
                let n = input.count()?;
                let mut units = Vec::with_capacity(n);
                for _ in 0..n {
                    units.push(self.int(input)? as u16);
                }
                Value::Str(String::from_utf16_lossy(&units))
            }
            string::LATIN1 => {
                let n = input.count()?;
                Value::Str(input.take(n)?.iter().map(|&b| char::from(b)).collect())
            }
            other => return Err(Malformed(format!("string encoding {other}"))),
        })
    }

    /// A value of type `type_id` (a constant-pool reference when `pooled`).
    fn read_value(
        &self,
        input: &mut In,
        type_id: u64,
        pooled: bool,
        depth: usize,
    ) -> Result<Value, Malformed> {
        if depth > MAX_DEPTH {
            return Err(Malformed("values nested too deep".into()));
        }
        if pooled {
            return Ok(Value::Ref(type_id, self.int(input)? as u64));
        }
        let class = self
            .types
            .get(&type_id)
            .ok_or_else(|| Malformed(format!("unknown type {type_id}")))?;
        Ok(match class.primitive {
            Some(Primitive::Boolean) => Value::Bool(input.byte()? != 0),
            Some(Primitive::Byte) => Value::Long(i64::from(input.byte()? as i8)),
            Some(Primitive::Char | Primitive::Long) => Value::Long(self.int(input)?),
            // 32 bits of two's complement: the JDK writes an `int` -1 as 0xffffffff.
            Some(Primitive::Int) => Value::Long(i64::from(self.int(input)? as u32 as i32)),
            Some(Primitive::Float) => Value::Double(f64::from(f32::from_bits(input.fixed_u32()?))),
            Some(Primitive::Double) => Value::Double(f64::from_bits(input.fixed_u64()?)),
            Some(Primitive::String) => self.read_string(input)?,
            None => {
                let mut fields = Vec::with_capacity(class.fields.len());
                for field in &class.fields {
                    fields.push(self.read_field(input, field, depth + 1)?);
                }
                Value::Object(type_id, fields)
            }
        })
    }

    pub(super) fn read_field(
        &self,
        input: &mut In,
        field: &Field,
        depth: usize,
    ) -> Result<Value, Malformed> {
        if !field.array {
            return self.read_value(input, field.type_id, field.pooled, depth);
        }
        let n = self.int(input)?;
        let n = usize::try_from(n).map_err(|_| Malformed(format!("array of {n}")))?;
        let mut values = Vec::with_capacity(n.min(4096));
        for _ in 0..n {
            values.push(self.read_value(input, field.type_id, field.pooled, depth)?);
        }
        Ok(Value::Array(values))
    }

    /// Follows constant-pool references (a missing entry reads as null).
    fn deref<'v>(&'v self, mut value: &'v Value) -> &'v Value {
        for _ in 0..MAX_DEPTH {
            match value {
                Value::Ref(type_id, key) => match self.pools.get(&(*type_id, *key)) {
                    Some(next) => value = next,
                    None => return &Value::Null,
                },
                _ => return value,
            }
        }
        &Value::Null
    }

    /// Field `name` of an object (after references).
    pub(super) fn get<'v>(&'v self, value: &'v Value, name: &str) -> &'v Value {
        match self.deref(value) {
            Value::Object(type_id, fields) => self
                .types
                .get(type_id)
                .and_then(|class| class.fields.iter().position(|f| f.name == name))
                .and_then(|i| fields.get(i))
                .map_or(&Value::Null, |v| self.deref(v)),
            _ => &Value::Null,
        }
    }

    /// A string, also through a one-field object (a symbol).
    pub(super) fn text(&self, value: &Value) -> Option<String> {
        match self.deref(value) {
            Value::Str(s) => Some(s.clone()),
            Value::Object(_, fields) if fields.len() == 1 => self.text(&fields[0]),
            _ => None,
        }
    }

    pub(super) fn long(&self, value: &Value) -> Option<i64> {
        match self.deref(value) {
            Value::Long(n) => Some(*n),
            Value::Double(d) => Some(*d as i64),
            _ => None,
        }
    }

    /// Nanoseconds of `ticks` ticks (exact when ticks are nanoseconds; else to a fraction
    /// of a nanosecond over days, without a 128-bit division per event).
    fn ns_of_ticks(&self, ticks: i64) -> i64 {
        if self.ticks_per_second == 1_000_000_000 {
            ticks
        } else {
            (ticks as f64 * 1e9 / self.ticks_per_second.max(1) as f64) as i64
        }
    }

    /// Nanoseconds since the epoch of a tick count.
    pub(super) fn time_ns(&self, ticks: i64) -> u64 {
        self.start_ns
            .saturating_add(self.ns_of_ticks(ticks - self.start_ticks))
            .max(0) as u64
    }

    /// Nanoseconds of a duration in ticks.
    pub(super) fn duration_ns(&self, ticks: i64) -> u64 {
        self.ns_of_ticks(ticks).max(0) as u64
    }
}

/// Reads the chunk at `at`; returns its size.
fn read_chunk(
    bytes: &[u8],
    at: usize,
    only: &[String],
    profiles: &mut Profiles,
) -> Result<usize, Malformed> {
    let mut header = In::new(bytes, at);
    if header.take(4)? != MAGIC {
        return Err(Malformed("no FLR magic".into()));
    }
    let major = header.fixed_u16()?;
    let _minor = header.fixed_u16()?;
    if !(1..=2).contains(&major) {
        return Err(Malformed(format!("version {major} is not one jtap reads")));
    }
    let size = header.fixed_u64()? as usize;
    let _constant_pools = header.fixed_u64()?;
    let metadata_at = header.fixed_u64()? as usize;
    let start_ns = header.fixed_u64()? as i64;
    let duration_ns = header.fixed_u64()?;
    let start_ticks = header.fixed_u64()? as i64;
    let ticks_per_second = header.fixed_u64()? as i64;
    let flags = header.fixed_u32()?;
    let end = at
        .checked_add(size)
        .filter(|&end| end <= bytes.len() && size >= HEADER_SIZE)
        .ok_or_else(|| Malformed(format!("chunk size {size} past the end of the file")))?;
    let bytes = &bytes[..end];
    let mut chunk = Chunk {
        // JDK 11's chunks say nothing and compress; later ones set the flag.
        compressed: major == 2 && (flags & u32::from(COMPRESSED_INTS) != 0 || flags == 0),
        types: HashMap::default(),
        string_type: None,
        pools: HashMap::default(),
        traces: Traces::default(),
        start_ns,
        start_ticks,
        ticks_per_second,
    };
    read_metadata(&mut chunk, &mut In::new(bytes, at + metadata_at))?;
    chunk.traces = Traces::new(&chunk.types);
    // Every record in order: checkpoints first (events refer to any of them), then events.
    let mut records = Vec::new();
    let mut input = In::new(bytes, at + HEADER_SIZE);
    while input.at < end {
        let start = input.at;
        let record_size = chunk.int(&mut input)? as usize;
        if record_size == 0 || start + record_size > end {
            return Err(Malformed(format!(
                "record size {record_size} at byte {start}"
            )));
        }
        let type_id = chunk.int(&mut input)? as u64;
        records.push((start, type_id, input.at));
        input.at = start + record_size;
    }
    for &(_, type_id, body) in &records {
        if type_id == CHECKPOINT {
            read_checkpoint(&mut chunk, &mut In::new(bytes, body))?;
        }
    }
    let settings = Settings::of(&chunk, bytes, &records)?;
    profiles.new_chunk();
    let layouts: HashMap<u64, Layout> = chunk
        .types
        .iter()
        .filter_map(|(&id, class)| Some((id, Layout::of(class, &chunk.types, &settings)?)))
        .filter(|(_, layout)| only.is_empty() || only.iter().any(|e| e == layout.kind.event()))
        .collect();
    let traced_call = chunk
        .types
        .iter()
        .find(|(_, class)| class.name == "jdk.MethodTrace")
        .map(|(&id, _)| id);
    let mut fields = Vec::new();
    let mut slots: Slots = Default::default();
    for &(_, type_id, body) in &records {
        if Some(type_id) == traced_call && profiles.times() {
            let mut input = In::new(bytes, body);
            let class = &chunk.types[&type_id];
            fields.clear();
            for field in &class.fields {
                fields.push(chunk.read_field(&mut input, field, 0)?);
            }
            profiles.add_call(&chunk, class, &fields);
        } else if let Some(layout) = layouts.get(&type_id) {
            let mut input = In::new(bytes, body);
            layout.read(&chunk, &chunk.types[&type_id], &mut input, &mut slots)?;
            profiles.add(&chunk, layout, &slots, &settings);
        }
    }
    profiles.covered(start_ns.max(0) as u64, duration_ns);
    Ok(size)
}

/// The metadata record: the string table, then the element tree.
fn read_metadata(chunk: &mut Chunk, input: &mut In) -> Result<(), Malformed> {
    let _size = chunk.int(input)?;
    if chunk.int(input)? as u64 != METADATA {
        return Err(Malformed("the metadata offset holds no metadata".into()));
    }
    for _ in 0..3 {
        chunk.int(input)?; // start, duration, metadata id
    }
    let count = input.count()?;
    let mut strings = Vec::with_capacity(count);
    for _ in 0..count {
        strings.push(match chunk.read_string(input)? {
            Value::Str(s) => s,
            _ => String::new(),
        });
    }
    let root = read_element(chunk, input, &strings, 0)?;
    for metadata in root.children.iter().filter(|e| e.name == "metadata") {
        for class in metadata.children.iter().filter(|e| e.name == "class") {
            let id: u64 = class
                .attribute("id")
                .and_then(|id| id.parse().ok())
                .ok_or_else(|| Malformed("a class without id".into()))?;
            let name = class.attribute("name").unwrap_or_default().to_string();
            let fields = class
                .children
                .iter()
                .filter(|e| e.name == "field")
                .map(|f| Field {
                    name: f.attribute("name").unwrap_or_default().to_string(),
                    type_id: f
                        .attribute("class")
                        .and_then(|c| c.parse().ok())
                        .unwrap_or(u64::MAX),
                    pooled: f.attribute("constantPool") == Some("true"),
                    array: f.attribute("dimension") == Some("1"),
                })
                .collect();
            if name == "java.lang.String" {
                chunk.string_type = Some(id);
            }
            let primitive = Primitive::of(&name);
            chunk.types.insert(
                id,
                Class {
                    name,
                    fields,
                    primitive,
                },
            );
        }
    }
    Ok(())
}

/// An element of the metadata tree.
struct Element<'s> {
    name: &'s str,
    attributes: Vec<(&'s str, &'s str)>,
    children: Vec<Element<'s>>,
}

impl<'s> Element<'s> {
    fn attribute(&self, key: &str) -> Option<&'s str> {
        self.attributes
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| *v)
    }
}

fn read_element<'s>(
    chunk: &Chunk,
    input: &mut In,
    strings: &'s [String],
    depth: usize,
) -> Result<Element<'s>, Malformed> {
    if depth > MAX_DEPTH {
        return Err(Malformed("metadata nested too deep".into()));
    }
    let string = |input: &mut In| -> Result<&'s str, Malformed> {
        let i = chunk.int(input)? as usize;
        strings
            .get(i)
            .map(String::as_str)
            .ok_or_else(|| Malformed(format!("metadata string {i} out of range")))
    };
    let name = string(input)?;
    let count = input.count()?;
    let mut attributes = Vec::with_capacity(count);
    for _ in 0..count {
        attributes.push((string(input)?, string(input)?));
    }
    let count = input.count()?;
    let mut children = Vec::with_capacity(count);
    for _ in 0..count {
        children.push(read_element(chunk, input, strings, depth + 1)?);
    }
    Ok(Element {
        name,
        attributes,
        children,
    })
}

/// A checkpoint: start, duration, delta to the previous one, its kind, then the pools.
fn read_checkpoint(chunk: &mut Chunk, input: &mut In) -> Result<(), Malformed> {
    for _ in 0..3 {
        chunk.int(input)?;
    }
    input.byte()?; // flush / checkpoint kind
    let pools = chunk.int(input)?;
    for _ in 0..pools {
        let type_id = chunk.int(input)? as u64;
        let count = chunk.int(input)?;
        for _ in 0..count {
            let key = chunk.int(input)? as u64;
            if chunk.traces.reads(type_id) {
                chunk.traces.read(key, input, chunk.compressed)?;
                continue;
            }
            let value = chunk.read_value(input, type_id, false, 0)?;
            chunk.pools.insert((type_id, key), value);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(read(b"FLR\0\x00\x02\x00\x00", &Wanted::default()).is_err());
        let mut bytes = b"FLR\0\x00\x02\x00\x00".to_vec();
        bytes.extend_from_slice(&[0xff; 80]);
        assert!(read(&bytes, &Wanted::default()).is_err());
    }
}
