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

use jtap_classfile::descriptor::java_name;
use rustc_hash::FxHashMap as HashMap;

use super::chunk::{CHECKPOINT, COMPRESSED_INTS, HEADER_SIZE, MAGIC, METADATA};
use super::encoding::{string, In, Malformed};
use super::traces::{FrameKey, Traces};
use crate::event;
use crate::model::{
    virtual_thread_key, Frame, FrameId, FrameKind, Metadata, Profile, StackCounts, StackId,
    TracedCall,
};
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
    let mut profiles = Profiles {
        times: wanted.times,
        ..Profiles::default()
    };
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
#[derive(Debug, Clone, PartialEq)]
enum Value {
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
struct Chunk {
    compressed: bool,
    types: HashMap<u64, Class>,
    string_type: Option<u64>,
    pools: HashMap<(u64, u64), Value>,
    /// The stack trace pool, read straight (see [`super::traces`]).
    traces: Traces,
    start_ns: i64,
    start_ticks: i64,
    ticks_per_second: i64,
}

/// Guards against malformed nesting.
const MAX_DEPTH: usize = 32;

impl Chunk {
    fn int(&self, input: &mut In) -> Result<i64, Malformed> {
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

    fn read_field(&self, input: &mut In, field: &Field, depth: usize) -> Result<Value, Malformed> {
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
    fn get<'v>(&'v self, value: &'v Value, name: &str) -> &'v Value {
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
    fn text(&self, value: &Value) -> Option<String> {
        match self.deref(value) {
            Value::Str(s) => Some(s.clone()),
            Value::Object(_, fields) if fields.len() == 1 => self.text(&fields[0]),
            _ => None,
        }
    }

    fn long(&self, value: &Value) -> Option<i64> {
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
    fn time_ns(&self, ticks: i64) -> u64 {
        self.start_ns
            .saturating_add(self.ns_of_ticks(ticks - self.start_ticks))
            .max(0) as u64
    }

    /// Nanoseconds of a duration in ticks.
    fn duration_ns(&self, ticks: i64) -> u64 {
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
    // Keys are the chunk's own.
    profiles.stacks.clear();
    profiles.threads.clear();
    profiles.frames.clear();
    let layouts: HashMap<u64, Layout> = chunk
        .types
        .iter()
        .filter_map(|(&id, class)| Some((id, Layout::of(class)?)))
        .filter(|(_, layout)| only.is_empty() || only.iter().any(|e| e == layout.kind.event()))
        .collect();
    let traced_call = chunk
        .types
        .iter()
        .find(|(_, class)| class.name == "jdk.MethodTrace")
        .map(|(&id, _)| id);
    let mut fields = Vec::new();
    for &(_, type_id, body) in &records {
        if Some(type_id) == traced_call && profiles.times {
            let mut input = In::new(bytes, body);
            let class = &chunk.types[&type_id];
            fields.clear();
            for field in &class.fields {
                fields.push(chunk.read_field(&mut input, field, 0)?);
            }
            profiles.add_call(&chunk, class, &fields);
        } else if let Some(layout) = layouts.get(&type_id) {
            let mut input = In::new(bytes, body);
            fields.clear();
            for field in &chunk.types[&type_id].fields {
                fields.push(chunk.read_field(&mut input, field, 0)?);
            }
            profiles.add(&chunk, layout, &fields, &settings);
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

/// What kind of profile an event type feeds.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
enum Kind {
    Cpu,
    Wall,
    Native,
    Alloc,
    /// Allocations seen by the TLAB events (the JDK's before 16, async-profiler's): read as
    /// `alloc` when the recording has no [`Kind::Alloc`] samples.
    TlabAlloc,
    Lock,
    NativeMemory,
}

impl Kind {
    fn of(event: &str) -> Option<Kind> {
        Some(match event {
            "jdk.ExecutionSample" => Kind::Cpu,
            "profiler.WallClockSample" => Kind::Wall,
            "jdk.NativeMethodSample" => Kind::Native,
            "jdk.ObjectAllocationSample" => Kind::Alloc,
            "jdk.ObjectAllocationInNewTLAB" | "jdk.ObjectAllocationOutsideTLAB" => Kind::TlabAlloc,
            "jdk.JavaMonitorEnter" | "jdk.ThreadPark" => Kind::Lock,
            "profiler.Malloc" => Kind::NativeMemory,
            _ => return None,
        })
    }

    fn event(self) -> &'static str {
        match self {
            Kind::Native => "native",
            kind => kind.event_kind().name,
        }
    }

    fn weight_unit(self) -> &'static str {
        self.event_kind().weight_unit
    }

    /// The profile event this kind reads as (JDK's native method samples: as CPU time).
    fn event_kind(self) -> &'static event::Kind {
        match self {
            Kind::Cpu | Kind::Native => &event::CPU,
            Kind::Wall => &event::WALL,
            Kind::Alloc | Kind::TlabAlloc => &event::ALLOC,
            Kind::Lock => &event::LOCK,
            Kind::NativeMemory => &event::NATIVEMEM,
        }
    }
}

/// What the recording's `jdk.ActiveSetting` events state, by kind: sampling periods (ns) and,
/// in jtap's recordings, the engine that ran.
#[derive(Default)]
struct Settings {
    periods: HashMap<Kind, u64>,
    engines: HashMap<Kind, String>,
}

impl Settings {
    fn of(
        chunk: &Chunk,
        bytes: &[u8],
        records: &[(usize, u64, usize)],
    ) -> Result<Settings, Malformed> {
        let mut settings = Settings::default();
        for &(_, type_id, body) in records {
            let Some(class) = chunk.types.get(&type_id) else {
                continue;
            };
            if class.name != "jdk.ActiveSetting" {
                continue;
            }
            let mut input = In::new(bytes, body);
            let mut fields = Vec::new();
            for field in &class.fields {
                fields.push(chunk.read_field(&mut input, field, 0)?);
            }
            let setting = Value::Object(type_id, fields);
            let event = chunk.long(chunk.get(&setting, "id")).unwrap_or(-1) as u64;
            let name = chunk.text(chunk.get(&setting, "name")).unwrap_or_default();
            let value = chunk.text(chunk.get(&setting, "value")).unwrap_or_default();
            let kind = chunk.types.get(&event).and_then(|c| Kind::of(&c.name));
            let Some(kind) = kind else { continue };
            match (name.as_str(), period_ns(&value)) {
                ("period" | "interval" | "threshold", Some(ns)) => {
                    settings.periods.insert(kind, ns);
                }
                ("engine", _) => {
                    settings.engines.insert(kind, value);
                }
                _ => {}
            }
        }
        Ok(settings)
    }
}

/// `20 ms`, `10000000 ns`, `1 s`, `10ms` as nanoseconds.
fn period_ns(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit() && c != '.')?;
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let scale = match unit.trim() {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => return None,
    };
    Some((number * scale) as u64)
}

/// The profiles being built, and per chunk the stacks already converted.
#[derive(Default)]
struct Profiles {
    by_kind: Vec<(Kind, Profile)>,
    /// Log each sample with its time and thread (else only counts per stack).
    times: bool,
    start_ns: Option<u64>,
    end_ns: u64,
    /// The chunk's stacks already converted: (kind, stack trace key, class key) → stack.
    stacks: HashMap<(Kind, Option<u64>, Option<u64>), StackId>,
    /// The chunk's threads already seen: (kind, thread key) → kernel id.
    threads: HashMap<(Kind, u64), u32>,
    /// The chunk's stack frames already resolved: (kind, frame's fields) → frame.
    frames: HashMap<(Kind, [u64; 4]), FrameId>,
    /// Traced calls, and the names of their threads.
    calls: Vec<TracedCall>,
    call_threads: Vec<(u32, String)>,
}

/// Where an event type's fields are.
struct Layout {
    kind: Kind,
    start: Option<usize>,
    duration: Option<usize>,
    thread: Option<usize>,
    stack: Option<usize>,
    class: Option<usize>,
    weight: Option<usize>,
    samples: Option<usize>,
}

impl Layout {
    fn of(class: &Class) -> Option<Layout> {
        let kind = Kind::of(&class.name)?;
        let at = |names: &[&str]| {
            names
                .iter()
                .find_map(|n| class.fields.iter().position(|f| f.name == *n))
        };
        Some(Layout {
            kind,
            start: at(&["startTime"]),
            duration: at(&["duration"]),
            thread: at(&["sampledThread", "eventThread"]),
            stack: at(&["stackTrace"]),
            class: at(&["objectClass", "monitorClass", "parkedClass"]),
            weight: at(&["weight", "tlabSize", "allocationSize", "size"]),
            samples: at(&["samples"]),
        })
    }
}

impl Profiles {
    fn profile(&mut self, kind: Kind, settings: &Settings) -> &mut Profile {
        let i = match self.by_kind.iter().position(|(k, _)| *k == kind) {
            Some(i) => i,
            None => {
                let metadata = Metadata {
                    event: kind.event().into(),
                    engine: settings
                        .engines
                        .get(&kind)
                        .cloned()
                        .unwrap_or_else(|| kind.event().into()),
                    interval: settings.periods.get(&kind).copied().unwrap_or(0),
                    weight_unit: kind.weight_unit().into(),
                    ..Metadata::default()
                };
                self.by_kind.push((kind, Profile::new(metadata)));
                self.by_kind.len() - 1
            }
        };
        &mut self.by_kind[i].1
    }

    /// Adds one event, its fields (in its type's order) where `layout` says.
    fn add(&mut self, chunk: &Chunk, layout: &Layout, fields: &[Value], settings: &Settings) {
        let kind = layout.kind;
        let field = |at: Option<usize>| at.and_then(|i| fields.get(i)).unwrap_or(&Value::Null);
        let long = |at: Option<usize>| chunk.long(field(at));
        let mut time = chunk.time_ns(long(layout.start).unwrap_or(chunk.start_ticks));
        let duration = chunk.duration_ns(long(layout.duration).unwrap_or(0));
        // A wait is logged when it ends, as the lock engine records it.
        time += duration;
        let tid = match self.times {
            true => self.thread(chunk, kind, field(layout.thread), settings),
            false => 0,
        };
        let period = settings.periods.get(&kind).copied().unwrap_or(0);
        let counts = match kind {
            Kind::Cpu | Kind::Native => StackCounts::sampled(1, period),
            Kind::Wall => {
                let samples = long(layout.samples).unwrap_or(1).max(1) as u64;
                StackCounts::sampled(samples, samples * period)
            }
            Kind::Alloc | Kind::TlabAlloc | Kind::NativeMemory => {
                StackCounts::sampled(1, long(layout.weight).unwrap_or(0).max(0) as u64)
            }
            Kind::Lock => StackCounts::sampled(1, duration),
        };
        let key_of = |value: &Value| match value {
            Value::Ref(_, key) => Some(*key),
            _ => None,
        };
        let trace = field(layout.stack);
        let class = field(layout.class);
        let key = (kind, key_of(trace), key_of(class));
        let stack = match self.stacks.get(&key).filter(|_| key.1.is_some()) {
            Some(&stack) => stack,
            None => {
                let mut ids = self.frame_ids(chunk, kind, trace, settings);
                if layout.class.is_some() {
                    let name = chunk
                        .text(chunk.get(class, "name"))
                        .map_or_else(|| "[unknown]".to_string(), |n| java_name(&n));
                    let profile = self.profile(kind, settings);
                    ids.push(profile.intern(Frame::new(name, FrameKind::Class)));
                }
                let profile = self.profile(kind, settings);
                let stack = profile.add_counts(&ids, StackCounts::default());
                self.stacks.insert(key, stack);
                stack
            }
        };
        let times = self.times;
        let profile = self.profile(kind, settings);
        match times {
            true => profile.log_id(stack, counts, time, tid),
            false => profile.add_to(stack, counts),
        }
        self.start_ns = Some(self.start_ns.map_or(time, |s| s.min(time)));
        self.end_ns = self.end_ns.max(time);
    }

    /// A stack trace's frames as ids of `kind`'s profile, root first; each frame (method,
    /// line and type of the chunk's pools) is resolved once per chunk.
    fn frame_ids(
        &mut self,
        chunk: &Chunk,
        kind: Kind,
        trace: &Value,
        settings: &Settings,
    ) -> Vec<FrameId> {
        if let Value::Ref(type_id, key) = trace {
            if let Some(frames) = chunk.traces.frames(*type_id, *key) {
                return self.keyed_frame_ids(chunk, kind, frames, settings);
            }
        }
        let Value::Array(frames) = chunk.get(trace, "frames") else {
            return Vec::new();
        };
        let mut ids = Vec::with_capacity(frames.len());
        for value in frames.iter().rev() {
            // A frame is its (up to four) fields: method, line, bytecode index, type.
            let key = match value {
                Value::Object(_, fields) if fields.len() <= 4 => {
                    let mut key = [u64::MAX; 4];
                    for (slot, field) in key.iter_mut().zip(fields) {
                        *slot = match field {
                            Value::Ref(_, key) => *key,
                            Value::Long(n) => *n as u64,
                            _ => u64::MAX - 1,
                        };
                    }
                    Some(key)
                }
                _ => None,
            };
            let cached = key.and_then(|key| self.frames.get(&(kind, key)).copied());
            let id = match cached {
                Some(id) => id,
                None => {
                    let id = self.profile(kind, settings).intern(frame(chunk, value));
                    if let Some(key) = key {
                        self.frames.insert((kind, key), id);
                    }
                    id
                }
            };
            ids.push(id);
        }
        ids
    }

    /// [`Profiles::frame_ids`] of a trace read straight: `frames` leaf first.
    fn keyed_frame_ids(
        &mut self,
        chunk: &Chunk,
        kind: Kind,
        frames: &[FrameKey],
        settings: &Settings,
    ) -> Vec<FrameId> {
        let (method_type, frame_type) = chunk.traces.frame_pools();
        let mut ids = Vec::with_capacity(frames.len());
        for key in frames.iter().rev() {
            let id = match self.frames.get(&(kind, *key)) {
                Some(&id) => id,
                None => {
                    let pooled = |pool: Option<u64>, key: u64| match pool {
                        Some(pool) if key != u64::MAX => Value::Ref(pool, key),
                        _ => Value::Null,
                    };
                    let method = pooled(method_type, key[0]);
                    let line = (key[1] != u64::MAX).then_some(key[1] as i64);
                    let frame_kind = chunk.text(&pooled(frame_type, key[3]));
                    let frame = frame_of(chunk, &method, line, frame_kind.as_deref());
                    let id = self.profile(kind, settings).intern(frame);
                    self.frames.insert((kind, *key), id);
                    id
                }
            };
            ids.push(id);
        }
        ids
    }

    /// The kernel id of an event's thread, naming it in the profile the first time.
    fn thread(&mut self, chunk: &Chunk, kind: Kind, thread: &Value, settings: &Settings) -> u32 {
        let key = match thread {
            Value::Ref(_, key) => Some(*key),
            _ => None,
        };
        if let Some(&tid) = key.and_then(|key| self.threads.get(&(kind, key))) {
            return tid;
        }
        let tid = thread_key(chunk, thread);
        let name = chunk
            .text(chunk.get(thread, "javaName"))
            .filter(|n| !n.is_empty())
            .or_else(|| chunk.text(chunk.get(thread, "osName")));
        let profile = self.profile(kind, settings);
        if let Some(name) = name {
            if !profile.thread_names().contains_key(&tid) {
                profile.name_thread(tid, name);
            }
        }
        if let Some(key) = key {
            self.threads.insert((kind, key), tid);
        }
        tid
    }

    /// Adds a `jdk.MethodTrace` event (fields in `class`'s order).
    fn add_call(&mut self, chunk: &Chunk, class: &Class, fields: &[Value]) {
        let field = |name: &str| {
            class
                .fields
                .iter()
                .position(|f| f.name == name)
                .and_then(|i| fields.get(i))
                .unwrap_or(&Value::Null)
        };
        let Some(start) = chunk.long(field("startTime")) else {
            return;
        };
        let thread = field("eventThread");
        let tid = thread_key(chunk, thread);
        if let Some(name) = chunk
            .text(chunk.get(thread, "javaName"))
            .filter(|n| !n.is_empty())
        {
            self.call_threads.push((tid, name));
        }
        let (class_name, method, descriptor) = method_of(chunk, field("method"));
        self.calls.push(TracedCall {
            time_ns: chunk.time_ns(start),
            duration_ns: chunk.duration_ns(chunk.long(field("duration")).unwrap_or(0)),
            tid,
            method: Frame::java(
                format!("{class_name}.{method}"),
                FrameKind::Compiled,
                descriptor,
                None,
            ),
        });
    }

    fn covered(&mut self, start_ns: u64, duration_ns: u64) {
        self.start_ns = Some(self.start_ns.map_or(start_ns, |s| s.min(start_ns)));
        self.end_ns = self.end_ns.max(start_ns + duration_ns);
    }

    fn finish(mut self) -> Vec<Profile> {
        let sampled =
            |(kind, profile): &(Kind, Profile)| *kind == Kind::Alloc && profile.stack_count() > 0;
        if self.by_kind.iter().any(sampled) {
            self.by_kind.retain(|(kind, _)| *kind != Kind::TlabAlloc);
        }
        self.by_kind.sort_by_key(|(kind, _)| *kind);
        let start = self.start_ns.unwrap_or(0);
        self.by_kind
            .into_iter()
            .map(|(_, mut profile)| {
                profile.metadata.start_time_ns = start;
                profile.metadata.duration_ns = self.end_ns.saturating_sub(start);
                for call in &self.calls {
                    profile.add_call(call.clone());
                }
                for (tid, name) in &self.call_threads {
                    if !profile.thread_names().contains_key(tid) {
                        profile.name_thread(*tid, name.clone());
                    }
                }
                profile
            })
            .collect()
    }
}

/// The event log's key of a `java.lang.Thread` value: its OS thread id, or for a virtual
/// thread (the JDK's and jtap's `virtual` field) the virtual thread key of its Java id.
fn thread_key(chunk: &Chunk, thread: &Value) -> u32 {
    let id = |field| chunk.long(chunk.get(thread, field)).unwrap_or(0);
    match chunk.get(thread, "virtual") {
        Value::Bool(true) => virtual_thread_key(id("javaThreadId") as u64),
        _ => id("osThreadId") as u32,
    }
}

/// A stack frame of a stack trace (a `jdk.types.StackFrame` value).
fn frame(chunk: &Chunk, frame: &Value) -> Frame {
    let line = chunk.long(chunk.get(frame, "lineNumber"));
    let kind = chunk.text(chunk.get(frame, "type"));
    frame_of(chunk, chunk.get(frame, "method"), line, kind.as_deref())
}

/// A frame of `method` (a `jdk.types.Method`) at `line`, of the frame type named `kind`.
fn frame_of(chunk: &Chunk, method: &Value, line: Option<i64>, kind: Option<&str>) -> Frame {
    let (class, name, descriptor) = method_of(chunk, method);
    let line = line.filter(|&l| l > 0).map(|l| l as u32);
    let kind = match kind {
        Some("Interpreted") => FrameKind::Interpreted,
        Some("Inlined") => FrameKind::Inlined,
        Some("Native") => FrameKind::Native,
        Some("C++") => FrameKind::Cpp,
        Some("Kernel") => FrameKind::Kernel,
        _ => FrameKind::Compiled,
    };
    match (class.is_empty(), kind.is_java()) {
        // A request label, which jtap writes as the stack's root frame.
        (true, _)
            if Frame::new(name.clone(), FrameKind::Label)
                .label_text()
                .is_some() =>
        {
            Frame::new(name, FrameKind::Label)
        }
        (true, _) => Frame::new(name, kind),
        (false, false) => Frame::new(format!("{class}.{name}"), kind),
        (false, true) => Frame::java(format!("{class}.{name}"), kind, descriptor, line),
    }
}

/// A `jdk.types.Method`'s class (Java name, empty when none), name and descriptor.
fn method_of(chunk: &Chunk, method: &Value) -> (String, String, Option<String>) {
    let class = chunk
        .text(chunk.get(chunk.get(method, "type"), "name"))
        .map(|internal| java_name(&internal))
        .unwrap_or_default();
    let name = chunk.text(chunk.get(method, "name")).unwrap_or_default();
    let descriptor = chunk
        .text(chunk.get(method, "descriptor"))
        .filter(|d| !d.is_empty());
    (class, name, descriptor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocation_samples_win_over_the_tlab_events_of_the_same_allocations() {
        let profile = |class: &str, bytes| {
            let mut profile = Profile::new(Metadata::default());
            profile.add_frames(&[Frame::new(class, FrameKind::Class)], 1, bytes);
            profile
        };
        let both = Profiles {
            by_kind: vec![
                (Kind::TlabAlloc, profile("int[]", 4096)),
                (Kind::Alloc, profile("long[]", 512)),
            ],
            ..Profiles::default()
        };
        let read = both.finish();
        assert_eq!(read.len(), 1);
        assert_eq!(read[0].frames()[0].name, "long[]");
        let tlab_only = Profiles {
            by_kind: vec![(Kind::TlabAlloc, profile("int[]", 4096))],
            ..Profiles::default()
        };
        assert_eq!(tlab_only.finish()[0].frames()[0].name, "int[]");
    }

    #[test]
    fn periods_and_names_read_as_settings_and_pools_write_them() {
        assert_eq!(period_ns("20 ms"), Some(20_000_000));
        assert_eq!(period_ns("10000000 ns"), Some(10_000_000));
        assert_eq!(period_ns("1 s"), Some(1_000_000_000));
        assert_eq!(period_ns("off"), None);
        assert_eq!(java_name("[I"), "int[]");
        assert_eq!(java_name("[[Ljava/lang/String;"), "java.lang.String[][]");
        assert_eq!(
            java_name("java/util/HashMap$Node"),
            "java.util.HashMap$Node"
        );
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(read(b"FLR\0\x00\x02\x00\x00", &Wanted::default()).is_err());
        let mut bytes = b"FLR\0\x00\x02\x00\x00".to_vec();
        bytes.extend_from_slice(&[0xff; 80]);
        assert!(read(&bytes, &Wanted::default()).is_err());
    }
}
