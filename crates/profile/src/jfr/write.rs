//! Profiles as a JFR recording: one chunk holding the events of every profile of a session.
//!
//! Each logged sample (see [`Profile::logged`]) becomes one event: cpu, itimer and ctimer
//! samples `jdk.ExecutionSample`, wall-clock samples `profiler.WallClockSample` (as
//! async-profiler names them), allocation samples `jdk.ObjectAllocationSample` with their
//! weight in bytes, lock waits `jdk.JavaMonitorEnter` or, when the stack parks,
//! `jdk.ThreadPark`, with their duration, native memory samples `profiler.Malloc` (as
//! async-profiler names them) with their size and no address (jtap keeps none per sample;
//! the `--live` part of a profile is not written). Traced calls kept with a profile (a slow-call
//! profile's calls) become `jdk.MethodTrace` events, and a leak report's old objects
//! `jdk.OldObjectSample` events, each with its chain of referrers up to its GC root (as the
//! JDK's leak profiler writes them, for JDK Mission Control's memory leak page). A profile without an event log (read from a format
//! without times) gives its stacks' samples at the recording's start.
//!
//! Threads are known by their kernel id, which is also written as the Java thread id; a virtual
//! thread by its Java id, with no OS thread.

use std::collections::{HashMap, HashSet};

use super::chunk::{Chunk, Pool};
use super::encoding::Out;
use super::types::id;
use crate::event::JfrType as Kind;
use crate::leak::{OldObject, Via};
use crate::model::{Frame, FrameKind, Profile, StackCounts, StackId, TracedCall, VIRTUAL_THREAD};

/// The recording of `profiles` (one per event of a session).
pub fn render(profiles: &[&Profile]) -> Vec<u8> {
    let start_ns = profiles
        .iter()
        .map(|p| p.metadata.start_time_ns)
        .filter(|&t| t > 0)
        .min()
        .unwrap_or(0);
    let mut recording = Recording::new(start_ns);
    for (index, profile) in profiles.iter().enumerate() {
        recording.settings(profile);
        recording.events(index, profile);
    }
    // The profiles of one session share its traced calls: each written once.
    let mut written = HashSet::new();
    for profile in profiles {
        for call in profile.calls() {
            if written.insert(call) {
                recording.call(profile, call);
            }
        }
    }
    for (index, profile) in profiles.iter().enumerate() {
        for object in profile.old_objects() {
            recording.old_object(index, profile, object);
        }
    }
    recording.finish()
}

/// The chunk being written and its constant pools.
struct Recording {
    chunk: Chunk,
    pools: Pools,
    start_ns: u64,
}

/// Constant pools, with the keys already given out.
#[derive(Default)]
struct Pools {
    threads: Pool,
    thread_keys: HashMap<u32, u64>,
    symbols: Pool,
    symbol_keys: HashMap<String, u64>,
    packages: Pool,
    package_keys: HashMap<String, u64>,
    classes: Pool,
    class_keys: HashMap<String, u64>,
    methods: Pool,
    method_keys: HashMap<(String, String, String), u64>,
    stack_traces: Pool,
    /// By (profile index, stack id).
    stack_keys: HashMap<(usize, StackId), u64>,
    frame_types: Pool,
    thread_states: Pool,
    old_objects: Pool,
    references: Pool,
    old_object_arrays: Pool,
    old_object_fields: Pool,
    gc_roots: Pool,
}

/// Frame types, by the key of their pool entry.
const FRAME_TYPES: [&str; 6] = [
    "Interpreted",
    "JIT compiled",
    "Inlined",
    "Native",
    "C++",
    "Kernel",
];

/// Thread states, by the key of their pool entry.
const THREAD_STATES: [&str; 2] = ["STATE_RUNNABLE", "STATE_SLEEPING"];

/// The JFR type of a profile's samples, if JFR has one.
fn kind_of(profile: &Profile) -> Option<Kind> {
    crate::event::kind(&profile.metadata.event).jfr
}

impl Recording {
    fn new(start_ns: u64) -> Recording {
        let mut pools = Pools {
            frame_types: Pool::enumeration(),
            thread_states: Pool::enumeration(),
            ..Pools::default()
        };
        for name in FRAME_TYPES {
            let mut entry = Out::default();
            entry.string(name);
            pools.frame_types.push(entry);
        }
        for name in THREAD_STATES {
            let mut entry = Out::default();
            entry.string(name);
            pools.thread_states.push(entry);
        }
        Recording {
            chunk: Chunk::new(start_ns),
            pools,
            start_ns,
        }
    }

    /// `jdk.ActiveSetting` events saying how the profile was recorded.
    fn settings(&mut self, profile: &Profile) {
        let Some(kind) = kind_of(profile) else {
            return;
        };
        let event = match kind {
            Kind::Execution => id::EXECUTION_SAMPLE,
            Kind::Wall => id::WALL_CLOCK_SAMPLE,
            Kind::Allocation => id::ALLOCATION_SAMPLE,
            Kind::Lock => id::MONITOR_ENTER,
            Kind::NativeMemory => id::MALLOC,
        };
        let metadata = &profile.metadata;
        let interval = match kind {
            Kind::Allocation | Kind::NativeMemory => format!("{} bytes", metadata.interval),
            _ => format!("{} ns", metadata.interval),
        };
        let settings = [
            ("enabled", "true".to_string()),
            ("engine", metadata.engine.clone()),
            (
                if kind == Kind::Lock {
                    "threshold"
                } else {
                    "period"
                },
                interval,
            ),
        ];
        for (name, value) in settings {
            let mut fields = Out::default();
            fields.long(0); // the recording's start, in ticks
            fields.long(event as i64);
            fields.string(name);
            fields.string(&value);
            self.chunk.event(id::ACTIVE_SETTING, self.start_ns, &fields);
        }
    }

    /// The profile's samples as events.
    fn events(&mut self, index: usize, profile: &Profile) {
        let Some(kind) = kind_of(profile) else {
            return;
        };
        if profile.logged().is_empty() {
            let stacks: Vec<(StackId, StackCounts)> = profile
                .stacks_by_id()
                .enumerate()
                .map(|(id, (_, counts))| (id as StackId, counts))
                .collect();
            for (stack, counts) in stacks {
                for _ in 0..counts.samples {
                    let one = StackCounts {
                        samples: 1,
                        weight: counts.weight / counts.samples.max(1),
                        events: counts.events / counts.samples.max(1),
                    };
                    self.event(kind, index, profile, self.start_ns, 0, stack, one);
                }
            }
            return;
        }
        for sample in profile.logged() {
            let times = if kind == Kind::Execution {
                sample.counts.samples.max(1)
            } else {
                1
            };
            for _ in 0..times {
                self.event(
                    kind,
                    index,
                    profile,
                    sample.time_ns,
                    sample.tid,
                    sample.stack,
                    sample.counts,
                );
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn event(
        &mut self,
        kind: Kind,
        index: usize,
        profile: &Profile,
        time_ns: u64,
        tid: u32,
        stack: StackId,
        counts: StackCounts,
    ) {
        let frames: Vec<&Frame> = profile
            .stack(stack)
            .iter()
            .map(|&f| profile.frame(f))
            .collect();
        let state = frames
            .iter()
            .rev()
            .find(|f| f.kind == FrameKind::Thread && f.name == "[sleeping]")
            .map_or(0, |_| 1);
        let leaf_class = frames
            .last()
            .filter(|f| f.kind == FrameKind::Class)
            .map(|f| f.name.clone());
        // Ticks are nanoseconds since the recording's start: small numbers, short varints.
        let ticks = time_ns.saturating_sub(self.start_ns) as i64;
        let thread = self.pools.thread(tid, profile);
        let trace = self.pools.stack_trace(index, stack, &frames);
        let mut fields = Out::default();
        let type_id = match kind {
            Kind::Execution | Kind::Wall => {
                fields.long(ticks);
                fields.varint(thread);
                fields.varint(trace);
                fields.varint(state);
                if kind == Kind::Wall {
                    fields.int(counts.samples.min(i32::MAX as u64) as i32);
                    id::WALL_CLOCK_SAMPLE
                } else {
                    id::EXECUTION_SAMPLE
                }
            }
            Kind::Allocation => {
                let class = self
                    .pools
                    .class(leaf_class.as_deref().unwrap_or("[unknown]"));
                fields.long(ticks);
                fields.varint(thread);
                fields.varint(trace);
                fields.varint(class);
                fields.long(counts.weight as i64);
                id::ALLOCATION_SAMPLE
            }
            Kind::NativeMemory => {
                fields.long(ticks);
                fields.varint(thread);
                fields.varint(trace);
                fields.long(0);
                fields.long(counts.weight as i64);
                id::MALLOC
            }
            Kind::Lock => {
                let class = self
                    .pools
                    .class(leaf_class.as_deref().unwrap_or("[unknown]"));
                let parks = frames.iter().any(|f| {
                    f.name.ends_with("LockSupport.park")
                        || f.name.ends_with("LockSupport.parkNanos")
                        || f.name.ends_with("Unsafe.park")
                });
                // The wait is recorded when it ends.
                fields.long(ticks - counts.weight.min(ticks as u64) as i64);
                fields.long(counts.weight as i64);
                fields.varint(thread);
                fields.varint(trace);
                fields.varint(class);
                if parks {
                    fields.long(0); // timeout: unknown
                    fields.long(0); // until: unknown
                    fields.long(0); // address
                    id::THREAD_PARK
                } else {
                    fields.varint(0); // previous owner: unknown
                    fields.long(0); // address
                    id::MONITOR_ENTER
                }
            }
        };
        self.chunk.event(type_id, time_ns, &fields);
    }

    /// A traced call as a `jdk.MethodTrace` event.
    fn call(&mut self, profile: &Profile, call: &TracedCall) {
        let thread = self.pools.thread(call.tid, profile);
        let frame = &call.method;
        let (class, name) = match (frame.class(), frame.method()) {
            (Some(class), Some(name)) => (class, name),
            _ => ("", frame.name.as_str()),
        };
        let method = self
            .pools
            .method(class, name, frame.signature.as_deref().unwrap_or("()V"));
        let mut fields = Out::default();
        fields.long(call.time_ns.saturating_sub(self.start_ns) as i64);
        fields.long(call.duration_ns as i64);
        fields.varint(thread);
        fields.varint(0); // no stack trace
        fields.varint(method);
        self.chunk.event(id::METHOD_TRACE, call.end_ns(), &fields);
    }

    /// An old object as a `jdk.OldObjectSample` event: its referrers are written root first,
    /// each `jdk.types.OldObject` pointing to the `jdk.types.Reference` that holds it.
    fn old_object(&mut self, index: usize, profile: &Profile, object: &OldObject) {
        let frames: Vec<&Frame> = profile
            .stack(object.stack)
            .iter()
            .map(|&f| profile.frame(f))
            .collect();
        let trace = self.pools.stack_trace(index, object.stack, &frames);
        let (mut referrer, mut held) = (0, 0);
        let mut root = 0;
        for (i, step) in object.path.iter().enumerate() {
            let reference = match &step.via {
                Via::Root(kind) => {
                    root = self.pools.gc_root(kind);
                    0
                }
                via => self.pools.reference(via, referrer),
            };
            // The object itself is the path's last step (or the only one known).
            let class = match i + 1 == object.path.len() {
                true => object.class.as_str(),
                false => step.class.as_str(),
            };
            held = self.pools.old(class, reference);
            referrer = held;
        }
        if held == 0 {
            held = self.pools.old(&object.class, 0);
        }
        let taken_ns = object.allocated_ns.saturating_add(object.age_ns);
        let mut fields = Out::default();
        fields.long(taken_ns.saturating_sub(self.start_ns) as i64);
        fields.long(0); // duration
        fields.varint(0); // no event thread
        fields.varint(trace);
        fields.long(object.allocated_ns.saturating_sub(self.start_ns) as i64);
        fields.long(object.bytes as i64);
        fields.long(object.age_ns as i64);
        fields.long(0); // heap usage: not known
        fields.varint(held);
        fields.int(object.array_length.map_or(i32::MIN, |n| n as i32));
        fields.varint(root);
        self.chunk.event(id::OLD_OBJECT_SAMPLE, taken_ns, &fields);
    }

    fn finish(self) -> Vec<u8> {
        let p = &self.pools;
        self.chunk.finish(&[
            (id::THREAD, &p.threads),
            (id::SYMBOL, &p.symbols),
            (id::PACKAGE, &p.packages),
            (id::CLASS, &p.classes),
            (id::METHOD, &p.methods),
            (id::STACK_TRACE, &p.stack_traces),
            (id::FRAME_TYPE, &p.frame_types),
            (id::THREAD_STATE, &p.thread_states),
            (id::OLD_OBJECT, &p.old_objects),
            (id::REFERENCE, &p.references),
            (id::OLD_OBJECT_ARRAY, &p.old_object_arrays),
            (id::OLD_OBJECT_FIELD, &p.old_object_fields),
            (id::OLD_OBJECT_GC_ROOT, &p.gc_roots),
        ])
    }
}

impl Pools {
    /// A `jdk.types.OldObject` of class `class` (`class app.Cache` for a class object)
    /// referred to by `referrer` (0: none, a root).
    fn old(&mut self, class: &str, referrer: u64) -> u64 {
        let (class_key, description) = match class.strip_prefix("class ") {
            Some(name) => (self.class("java.lang.Class"), name),
            None => (self.class(class), ""),
        };
        let mut entry = Out::default();
        entry.long(0); // address: not known
        entry.varint(class_key);
        entry.string(description);
        entry.varint(referrer);
        self.old_objects.push(entry)
    }

    /// A `jdk.types.Reference` from the old object `from` through `via` (an element of an
    /// array, or a field).
    fn reference(&mut self, via: &Via, from: u64) -> u64 {
        let (mut array, mut field) = (0, 0);
        match via {
            Via::Element(index) => {
                let mut entry = Out::default();
                entry.int(-1); // the array's size: not known
                entry.int(*index as i32);
                array = self.old_object_arrays.push(entry);
            }
            Via::Field(name) | Via::StaticField(name) | Via::Other(name) | Via::Root(name) => {
                let mut entry = Out::default();
                entry.string(name);
                // ACC_STATIC for a static field; nothing else is known.
                entry.varint(u64::from(matches!(via, Via::StaticField(_))) * 8);
                field = self.old_object_fields.push(entry);
            }
        }
        let mut entry = Out::default();
        entry.varint(array);
        entry.varint(field);
        entry.varint(from);
        entry.int(0); // no hops skipped
        self.references.push(entry)
    }

    /// A `jdk.types.OldObjectGcRoot` of a root of `kind` (as leak reports name them).
    fn gc_root(&mut self, kind: &str) -> u64 {
        let (system, root_type) = match kind {
            "system class" => ("Class Loader Data", "Unknown"),
            "JNI global reference" => ("Strong OopStorage", "Global JNI Handle"),
            "JNI local reference" => ("Threads", "Local JNI Handle"),
            "monitor held" | "thread" => ("Threads", "Unknown"),
            kind if kind.starts_with("local variable") => ("Threads", "Stack Variable"),
            _ => ("Unknown", "Unknown"),
        };
        let mut entry = Out::default();
        entry.string(kind);
        entry.string(system);
        entry.string(root_type);
        self.gc_roots.push(entry)
    }

    fn symbol(&mut self, s: &str) -> u64 {
        if let Some(&key) = self.symbol_keys.get(s) {
            return key;
        }
        let mut entry = Out::default();
        entry.utf8(s);
        let key = self.symbols.push(entry);
        self.symbol_keys.insert(s.to_string(), key);
        key
    }

    fn thread(&mut self, tid: u32, profile: &Profile) -> u64 {
        if let Some(&key) = self.thread_keys.get(&tid) {
            return key;
        }
        let name = profile
            .thread_names()
            .get(&tid)
            .cloned()
            .unwrap_or_else(|| format!("tid={tid}"));
        // A virtual thread has no OS thread of its own: id 0, as the JDK writes it.
        let is_virtual = tid & VIRTUAL_THREAD != 0;
        let (os_id, java_id) = match is_virtual {
            true => (0, tid & !VIRTUAL_THREAD),
            false => (tid, tid),
        };
        let mut entry = Out::default();
        entry.string(&name);
        entry.long(i64::from(os_id));
        entry.string(&name);
        entry.long(i64::from(java_id));
        entry.boolean(is_virtual);
        let key = self.threads.push(entry);
        self.thread_keys.insert(tid, key);
        key
    }

    fn package(&mut self, internal: &str) -> u64 {
        if let Some(&key) = self.package_keys.get(internal) {
            return key;
        }
        let name = self.symbol(internal);
        let mut entry = Out::default();
        entry.varint(name);
        let key = self.packages.push(entry);
        self.package_keys.insert(internal.to_string(), key);
        key
    }

    /// A class by its Java name (`java.lang.String`, `int[]`), written in the JVM's
    /// internal form (`java/lang/String`, `[I`).
    fn class(&mut self, java_name: &str) -> u64 {
        if let Some(&key) = self.class_keys.get(java_name) {
            return key;
        }
        let internal = internal_name(java_name);
        let package = internal
            .rsplit_once('/')
            .filter(|_| !internal.starts_with('['))
            .map_or("", |(package, _)| package)
            .to_string();
        let name = self.symbol(&internal);
        let package = self.package(&package);
        let mut entry = Out::default();
        entry.varint(0); // no class loader
        entry.varint(name);
        entry.varint(package);
        entry.int(1); // public
        entry.boolean(false);
        let key = self.classes.push(entry);
        self.class_keys.insert(java_name.to_string(), key);
        key
    }

    fn method(&mut self, class: &str, name: &str, descriptor: &str) -> u64 {
        let k = (class.to_string(), name.to_string(), descriptor.to_string());
        if let Some(&key) = self.method_keys.get(&k) {
            return key;
        }
        let class = self.class(class);
        let name = self.symbol(name);
        let descriptor = self.symbol(descriptor);
        let mut entry = Out::default();
        entry.varint(class);
        entry.varint(name);
        entry.varint(descriptor);
        entry.int(1); // public
        entry.boolean(false);
        let key = self.methods.push(entry);
        self.method_keys.insert(k, key);
        key
    }

    /// The stack trace of stack `stack` of profile `index` (`frames` root first; thread,
    /// state and class frames are not code and are left out). A request label (`--by`) is
    /// its root frame, as in collapsed stacks: every reader shows it, and jtap reads it back
    /// as the label.
    fn stack_trace(&mut self, index: usize, stack: StackId, frames: &[&Frame]) -> u64 {
        if let Some(&key) = self.stack_keys.get(&(index, stack)) {
            return key;
        }
        let code: Vec<&&Frame> = frames
            .iter()
            .rev()
            .filter(|f| !matches!(f.kind, FrameKind::Thread | FrameKind::Class))
            .collect();
        let mut entry = Out::default();
        entry.boolean(false);
        entry.varint(code.len() as u64);
        for frame in code {
            let (class, method) = match (frame.class(), frame.method()) {
                (Some(class), Some(method)) if frame.kind.is_java() => (class, method),
                _ => ("", frame.name.as_str()),
            };
            // Readers parse the descriptor: one they can read when the frame has none.
            let descriptor = frame.signature.as_deref().unwrap_or("()V");
            let method = self.method(class, method, descriptor);
            let frame_type = match frame.kind {
                FrameKind::Interpreted => 0,
                FrameKind::Compiled => 1,
                FrameKind::Inlined => 2,
                FrameKind::Native | FrameKind::Error | FrameKind::Label => 3,
                FrameKind::Cpp => 4,
                FrameKind::Kernel => 5,
                FrameKind::Thread | FrameKind::Class => {
                    unreachable!("filtered out above")
                }
            };
            entry.varint(method);
            entry.int(frame.line.map_or(-1, |l| l as i32));
            entry.int(-1); // bytecode index: not kept
            entry.varint(frame_type);
        }
        let key = self.stack_traces.push(entry);
        self.stack_keys.insert((index, stack), key);
        key
    }
}

/// `java.lang.String` → `java/lang/String`; `int[]` → `[I`; `java.lang.String[][]` →
/// `[[Ljava/lang/String;`.
fn internal_name(java_name: &str) -> String {
    let mut name = java_name;
    let mut dimensions = 0;
    while let Some(element) = name.strip_suffix("[]") {
        name = element;
        dimensions += 1;
    }
    if dimensions == 0 {
        return name.replace('.', "/");
    }
    let element = match name {
        "boolean" => "Z".to_string(),
        "byte" => "B".to_string(),
        "char" => "C".to_string(),
        "short" => "S".to_string(),
        "int" => "I".to_string(),
        "long" => "J".to_string(),
        "float" => "F".to_string(),
        "double" => "D".to_string(),
        class => format!("L{};", class.replace('.', "/")),
    };
    format!("{}{element}", "[".repeat(dimensions))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_names_take_the_jvms_internal_form() {
        assert_eq!(internal_name("java.lang.String"), "java/lang/String");
        assert_eq!(internal_name("int[]"), "[I");
        assert_eq!(
            internal_name("java.lang.String[][]"),
            "[[Ljava/lang/String;"
        );
        assert_eq!(internal_name("Main$Inner"), "Main$Inner");
    }
}
