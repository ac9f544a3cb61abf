//! The events profiles are made of: which profile each feeds, where its fields are, and the
//! profiles they build, with their stacks, frames and threads resolved once per chunk.

use jtap_classfile::descriptor::java_name;
use rustc_hash::FxHashMap as HashMap;

use super::encoding::{In, Malformed};
use super::read::{Chunk, Class, Primitive, Value};
use super::traces::FrameKey;
use crate::event;
use crate::model::{
    virtual_thread_key, Frame, FrameId, FrameKind, Metadata, Profile, StackCounts, StackId,
    TracedCall,
};

/// What kind of profile an event type feeds.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub(super) enum Kind {
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

    pub(super) fn event(self) -> &'static str {
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
pub(super) struct Settings {
    periods: HashMap<Kind, u64>,
    engines: HashMap<Kind, String>,
}

impl Settings {
    pub(super) fn of(
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
pub(super) struct Profiles {
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

/// Which of an event's fields [`Profiles::add`] reads: an index of [`Slots`].
#[derive(Clone, Copy)]
enum Slot {
    Start,
    Duration,
    Thread,
    Stack,
    Class,
    Weight,
    Samples,
}

/// The fields of one event that [`Profiles::add`] reads, by [`Slot`].
pub(super) type Slots = [Field; 7];

/// A field an event's slot holds: a number or a constant-pool reference, copied without a
/// [`Value`] (millions of events, each dropping its values, took a tenth of a conversion).
#[derive(Clone, Copy, Default, Debug, PartialEq)]
pub(super) enum Field {
    #[default]
    Absent,
    Number(i64),
    /// Type id and key.
    Pooled(u64, u64),
}

impl Field {
    fn of(value: &Value) -> Field {
        match *value {
            Value::Long(n) => Field::Number(n),
            Value::Double(d) => Field::Number(d as i64),
            Value::Ref(type_id, key) => Field::Pooled(type_id, key),
            _ => Field::Absent,
        }
    }

    /// As a value of the chunk (a reference to follow, a number).
    fn value(self) -> Value {
        match self {
            Field::Absent => Value::Null,
            Field::Number(n) => Value::Long(n),
            Field::Pooled(type_id, key) => Value::Ref(type_id, key),
        }
    }

    /// Its constant-pool key.
    fn key(self) -> Option<u64> {
        match self {
            Field::Pooled(_, key) => Some(key),
            _ => None,
        }
    }

    /// Its number, through the constant pool if it is a reference.
    fn long(self, chunk: &Chunk) -> Option<i64> {
        match self {
            Field::Number(n) => Some(n),
            Field::Pooled(..) => chunk.long(&self.value()),
            Field::Absent => None,
        }
    }
}

/// How one field of an event is read.
#[derive(Clone, Copy)]
enum Read {
    /// A reference into the constant pool of this type.
    Pooled(u64),
    /// A `long` or `char`.
    Long,
    /// An `int` or `short`: 32 bits of two's complement (the JDK writes -1 as 0xffffffff).
    Int,
    /// Anything else, decoded whole: the type's field of this index.
    Whole(usize),
}

/// Where an event type's fields are and how each is read: the numbers and references events
/// are made of straight from the bytes, without a [`Value`] for the fields no slot takes.
pub(super) struct Layout {
    pub kind: Kind,
    /// Each field in order: how it is read, and the slot it fills.
    steps: Vec<(Read, Option<Slot>)>,
    /// Whether the event names a class (an allocation's, a lock's), put on top of its stack.
    has_class: bool,
    /// The sampling period the recording's settings state for its kind (0 when none).
    period: u64,
}

impl Layout {
    pub(super) fn of(
        class: &Class,
        types: &HashMap<u64, Class>,
        settings: &Settings,
    ) -> Option<Layout> {
        let kind = Kind::of(&class.name)?;
        // The first field present of each list fills the slot.
        let at = |names: &[&str]| {
            names
                .iter()
                .find_map(|n| class.fields.iter().position(|f| f.name == *n))
        };
        let slots = [
            (Slot::Start, at(&["startTime"])),
            (Slot::Duration, at(&["duration"])),
            (Slot::Thread, at(&["sampledThread", "eventThread"])),
            (Slot::Stack, at(&["stackTrace"])),
            (
                Slot::Class,
                at(&["objectClass", "monitorClass", "parkedClass"]),
            ),
            (
                Slot::Weight,
                at(&["weight", "tlabSize", "allocationSize", "size"]),
            ),
            (Slot::Samples, at(&["samples"])),
        ];
        let steps = class.fields.iter().enumerate().map(|(i, field)| {
            let slot = slots
                .iter()
                .find(|(_, at)| *at == Some(i))
                .map(|&(slot, _)| slot);
            let primitive = types.get(&field.type_id).and_then(|c| c.primitive);
            let read = match (field.array, field.pooled, primitive) {
                (false, true, _) => Read::Pooled(field.type_id),
                (false, false, Some(Primitive::Long | Primitive::Char)) => Read::Long,
                (false, false, Some(Primitive::Int)) => Read::Int,
                _ => Read::Whole(i),
            };
            (read, slot)
        });
        Some(Layout {
            kind,
            steps: steps.collect(),
            has_class: slots[4].1.is_some(),
            period: settings.periods.get(&kind).copied().unwrap_or(0),
        })
    }

    /// Reads an event of this layout's `class` at `input` into `slots`.
    pub(super) fn read(
        &self,
        chunk: &Chunk,
        class: &Class,
        input: &mut In,
        slots: &mut Slots,
    ) -> Result<(), Malformed> {
        *slots = Slots::default();
        for &(read, slot) in &self.steps {
            let field = match read {
                Read::Whole(field) => {
                    Field::of(&chunk.read_field(input, &class.fields[field], 0)?)
                }
                _ if slot.is_none() => {
                    chunk.int(input)?;
                    continue;
                }
                Read::Pooled(type_id) => Field::Pooled(type_id, chunk.int(input)? as u64),
                Read::Long => Field::Number(chunk.int(input)?),
                Read::Int => Field::Number(i64::from(chunk.int(input)? as u32 as i32)),
            };
            if let Some(slot) = slot {
                slots[slot as usize] = field;
            }
        }
        Ok(())
    }
}

impl Profiles {
    /// Profiles logging each sample with its time and thread when `times`.
    pub(super) fn new(times: bool) -> Profiles {
        Profiles {
            times,
            ..Profiles::default()
        }
    }

    /// Whether samples are logged with their times (and traced calls kept).
    pub(super) fn times(&self) -> bool {
        self.times
    }

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

    /// Adds one event, its fields read into `slots`.
    pub(super) fn add(
        &mut self,
        chunk: &Chunk,
        layout: &Layout,
        slots: &Slots,
        settings: &Settings,
    ) {
        let kind = layout.kind;
        let field = |slot: Slot| slots[slot as usize];
        let long = |slot: Slot| field(slot).long(chunk);
        let mut time = chunk.time_ns(long(Slot::Start).unwrap_or(chunk.start_ticks));
        let duration = chunk.duration_ns(long(Slot::Duration).unwrap_or(0));
        // A wait is logged when it ends, as the lock engine records it.
        time += duration;
        let tid = match self.times {
            true => self.thread(chunk, kind, &field(Slot::Thread).value(), settings),
            false => 0,
        };
        let period = layout.period;
        let counts = match kind {
            Kind::Cpu | Kind::Native => StackCounts::sampled(1, period),
            Kind::Wall => {
                let samples = long(Slot::Samples).unwrap_or(1).max(1) as u64;
                StackCounts::sampled(samples, samples * period)
            }
            Kind::Alloc | Kind::TlabAlloc | Kind::NativeMemory => {
                StackCounts::sampled(1, long(Slot::Weight).unwrap_or(0).max(0) as u64)
            }
            Kind::Lock => StackCounts::sampled(1, duration),
        };
        let (trace, class) = (field(Slot::Stack), field(Slot::Class));
        let key = (kind, trace.key(), class.key());
        let stack = match self.stacks.get(&key).filter(|_| key.1.is_some()) {
            Some(&stack) => stack,
            None => {
                let mut ids = self.frame_ids(chunk, kind, &trace.value(), settings);
                if layout.has_class {
                    let name = chunk
                        .text(chunk.get(&class.value(), "name"))
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
    pub(super) fn add_call(&mut self, chunk: &Chunk, class: &Class, fields: &[Value]) {
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

    /// Forgets the previous chunk's keys: stack traces, threads and frames are keyed by
    /// chunk.
    pub(super) fn new_chunk(&mut self) {
        self.stacks.clear();
        self.threads.clear();
        self.frames.clear();
    }

    pub(super) fn covered(&mut self, start_ns: u64, duration_ns: u64) {
        self.start_ns = Some(self.start_ns.map_or(start_ns, |s| s.min(start_ns)));
        self.end_ns = self.end_ns.max(start_ns + duration_ns);
    }

    pub(super) fn finish(mut self) -> Vec<Profile> {
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
}
