//! The profile model: interned frames, stacks and their counts, and what was measured.

use std::borrow::Cow;
use std::collections::BTreeMap;

// Fx hashing: frames and stacks are hashed once per sample, and nobody picks them to collide.
use rustc_hash::FxHashMap as HashMap;

use crate::leak::OldObject;

/// What kind of code a frame stands for; exporters colour and annotate by it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum FrameKind {
    /// Java method running in the interpreter.
    Interpreted,
    /// JIT-compiled Java method.
    Compiled,
    /// Java method inlined into its caller.
    Inlined,
    /// Native (JNI) method or native library code.
    Native,
    /// C++ code of the JVM itself (libjvm).
    Cpp,
    /// Kernel code.
    Kernel,
    /// A thread name used as the root frame (`--threads`).
    Thread,
    /// The request a sample's thread worked for (`--by`), at the root of its stack: the
    /// entry method, or the value of its key.
    Label,
    /// The class of an allocated object or of a contended lock (leaf frame).
    Class,
    /// A pseudo-frame standing for a failed stack walk (e.g. `[gc_active]`).
    Error,
}

impl FrameKind {
    /// async-profiler's collapsed-output suffix for this kind, when annotations are on.
    pub fn annotation(self) -> &'static str {
        match self {
            FrameKind::Interpreted => "_[0]",
            FrameKind::Compiled => "_[j]",
            FrameKind::Inlined => "_[i]",
            FrameKind::Kernel => "_[k]",
            FrameKind::Class => "_[k]",
            FrameKind::Native
            | FrameKind::Cpp
            | FrameKind::Thread
            | FrameKind::Label
            | FrameKind::Error => "",
        }
    }

    /// Whether the frame is Java code.
    pub fn is_java(self) -> bool {
        matches!(
            self,
            FrameKind::Interpreted | FrameKind::Compiled | FrameKind::Inlined
        )
    }
}

/// One frame: what it shows, its kind, and for Java frames the facts the JVM gave (source
/// line, method descriptor), kept apart so that each report shows them as it wants (flame
/// graphs per method, `--lines` per line, pprof and JFR as their own fields).
///
/// The bytecode index is not kept: stacks differing only in it would multiply by the
/// bytecodes of every loop, for nothing a report shows.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct Frame {
    /// What the frame shows: `pkg.Class.method` for Java frames, a native symbol or library
    /// path, a thread or class name, or a bracketed pseudo-frame like `[gc_active]`.
    pub name: String,
    /// What kind of code (or pseudo-frame) it is.
    pub kind: FrameKind,
    /// Java frames: the source line of the bytecode sampled, when the class has line numbers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// Java frames: the method's descriptor, e.g. `(Ljava/lang/String;)V`, which tells
    /// overloads apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

impl Frame {
    /// A frame with this display name and kind, and no Java facts.
    pub fn new(name: impl Into<String>, kind: FrameKind) -> Frame {
        Frame {
            name: name.into(),
            kind,
            line: None,
            signature: None,
        }
    }

    /// A Java frame: `pkg.Class.method`, its descriptor and the line sampled, when known.
    pub fn java(
        name: impl Into<String>,
        kind: FrameKind,
        signature: Option<String>,
        line: Option<u32>,
    ) -> Frame {
        Frame {
            name: name.into(),
            kind,
            line,
            signature,
        }
    }

    /// The root frame of a request label (`--by`): `[label=TEXT]`.
    pub fn request_label(text: &str) -> Frame {
        Frame::new(format!("[{LABEL_PREFIX}{text}]"), FrameKind::Label)
    }

    /// A request label frame's text.
    pub fn label_text(&self) -> Option<&str> {
        match self.kind {
            FrameKind::Label => self
                .name
                .strip_prefix('[')
                .and_then(|n| n.strip_prefix(LABEL_PREFIX))
                .and_then(|n| n.strip_suffix(']')),
            _ => None,
        }
    }

    /// Java frames: the class, `pkg.Class` (method names hold no dot, so the class is all
    /// before the last one).
    pub fn class(&self) -> Option<&str> {
        self.kind
            .is_java()
            .then(|| self.name.rsplit_once('.').map(|(class, _)| class))
            .flatten()
    }

    /// Java frames: the method's name.
    pub fn method(&self) -> Option<&str> {
        self.kind
            .is_java()
            .then(|| self.name.rsplit_once('.').map(|(_, method)| method))
            .flatten()
    }

    /// What reports show: the name, with `:line` when `lines` is asked and the line known.
    pub fn label(&self, lines: bool) -> Cow<'_, str> {
        match self.line {
            Some(line) if lines => Cow::Owned(format!("{}:{line}", self.name)),
            _ => Cow::Borrowed(&self.name),
        }
    }
}

/// What a request label frame's name starts with, inside its brackets.
pub const LABEL_PREFIX: &str = "label=";

/// Index of an interned frame in its [`Profile`].
pub type FrameId = u32;

/// What one stack was measured at.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StackCounts {
    /// Samples actually taken.
    pub samples: u64,
    /// Their summed weight (nanoseconds of CPU or wall time, bytes, nanoseconds waited).
    pub weight: u64,
    /// The events they stand for: estimated objects allocated or lock waits; for the
    /// time-based engines, the samples themselves.
    pub events: u64,
}

impl StackCounts {
    /// `samples` samples of summed `weight`, each one event.
    pub fn sampled(samples: u64, weight: u64) -> StackCounts {
        StackCounts {
            samples,
            weight,
            events: samples,
        }
    }

    /// The value of one counter.
    pub fn get(&self, counter: Counter) -> u64 {
        match counter {
            Counter::Samples => self.samples,
            Counter::Total => self.weight,
            Counter::Events => self.events,
        }
    }

    fn add(&mut self, other: StackCounts) {
        self.samples += other.samples;
        self.weight += other.weight;
        self.events += other.events;
    }
}

/// Which of a stack's values a report counts (async-profiler's `--counter`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counter {
    /// Samples taken.
    Samples,
    /// The summed weight: time, bytes, time waited.
    Total,
    /// The events the samples stand for: objects allocated, lock waits.
    Events,
}

impl Counter {
    /// Names on the command line.
    pub const NAMES: [(&'static str, Counter); 3] = [
        ("samples", Counter::Samples),
        ("total", Counter::Total),
        ("objects", Counter::Events),
    ];

    /// The counter named `name` (`events` is a synonym of `objects`).
    pub fn from_name(name: &str) -> Option<Counter> {
        match name {
            "events" => Some(Counter::Events),
            _ => Counter::NAMES
                .iter()
                .find(|(n, _)| *n == name)
                .map(|&(_, c)| c),
        }
    }
}

/// What was measured and how the collection went.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Metadata {
    /// The event asked for: `cpu`, `wall`, `itimer`, `ctimer`, `alloc`, `lock`, …
    pub event: String,
    /// The engine that actually ran (differs from `event` after a fallback).
    pub engine: String,
    /// Sampling interval in the weight's unit (nanoseconds for time, bytes for alloc).
    pub interval: u64,
    /// Unit of the stack weights: `nanoseconds`, `bytes`, …
    pub weight_unit: String,
    /// Wall-clock duration of the collection, in nanoseconds.
    pub duration_ns: u64,
    /// Start of the collection, nanoseconds since the Unix epoch.
    pub start_time_ns: u64,
    /// Failed stack walks by reason (e.g. `gc_active` → 12); they are also in the stacks as
    /// error pseudo-frames.
    pub errors: BTreeMap<String, u64>,
    /// Samples lost because the sample buffer was full.
    pub dropped: u64,
    /// Samples counted in the stacks but left out of the event log, which was full.
    #[serde(default)]
    pub unlogged: u64,
}

impl Metadata {
    /// The counter reports show unless told otherwise, as async-profiler does: bytes for
    /// allocations, time waited for locks, samples for the time-based engines.
    pub fn default_counter(&self) -> Counter {
        match crate::event::kind(&self.event).weighted {
            true => Counter::Total,
            false => Counter::Samples,
        }
    }

    /// What a counter's values are, for report headers: `samples`, the weight's unit, or
    /// the events (`objects`, `waits`).
    pub fn unit(&self, counter: Counter) -> &str {
        match counter {
            Counter::Samples => "samples",
            Counter::Total => &self.weight_unit,
            Counter::Events => crate::event::kind(&self.event).events,
        }
    }
}

/// Distinct stacks with their counts, over interned frames, and (when the engine kept one) the
/// event log: each sample with its time and thread, for JFR, timelines and heatmaps.
#[derive(Debug, Clone, Default)]
pub struct Profile {
    /// What was measured and how the collection went.
    pub metadata: Metadata,
    frames: Vec<Frame>,
    frame_ids: HashMap<Frame, FrameId>,
    stacks: Vec<(Vec<FrameId>, StackCounts)>,
    stack_ids: HashMap<Vec<FrameId>, StackId>,
    log: Vec<LoggedSample>,
    thread_names: BTreeMap<u32, String>,
    calls: Vec<TracedCall>,
    old_objects: Vec<OldObject>,
}

/// A method call a trace reported beside the profile (a slow call, for a slow-call profile):
/// JFR carries it as a `jdk.MethodTrace` event.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TracedCall {
    /// When it started, nanoseconds since the Unix epoch.
    pub time_ns: u64,
    /// How long it took.
    pub duration_ns: u64,
    /// Kernel id of its thread.
    pub tid: u32,
    /// The method (a Java frame: `pkg.Class.method` with its signature).
    pub method: Frame,
}

impl TracedCall {
    /// When it ended.
    pub fn end_ns(&self) -> u64 {
        self.time_ns.saturating_add(self.duration_ns)
    }
}

/// Index of a distinct stack of a [`Profile`].
pub type StackId = u32;

/// Most samples an event log keeps (32 bytes each); later ones are counted in
/// [`Metadata::unlogged`].
pub const MAX_LOGGED: usize = 1 << 20;

/// The thread keys of an event log are kernel thread ids, except that a key with this bit
/// set is a virtual thread's (JDK 21+), its Java thread id in the other bits
/// ([`virtual_thread_key`]): kernel ids stay below 2^22.
pub const VIRTUAL_THREAD: u32 = 1 << 31;

/// The event log's key of the virtual thread whose `Thread.threadId()` is `id`.
pub fn virtual_thread_key(id: u64) -> u32 {
    VIRTUAL_THREAD | (id as u32 & !VIRTUAL_THREAD)
}

/// One sample of the event log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LoggedSample {
    /// When it was taken, nanoseconds since the Unix epoch.
    pub time_ns: u64,
    /// The thread it was taken on: its kernel id, or a virtual thread's key
    /// ([`VIRTUAL_THREAD`]).
    pub tid: u32,
    /// Its stack.
    pub stack: StackId,
    /// What it counts: samples (more than 1 after a timer overrun), weight, events.
    pub counts: StackCounts,
}

impl Profile {
    /// An empty profile (no frames, no stacks) of this collection.
    pub fn new(metadata: Metadata) -> Profile {
        Profile {
            metadata,
            ..Profile::default()
        }
    }

    /// Interns a frame, returning its id.
    pub fn intern(&mut self, frame: Frame) -> FrameId {
        if let Some(&id) = self.frame_ids.get(&frame) {
            return id;
        }
        let id = self.frames.len() as FrameId;
        self.frames.push(frame.clone());
        self.frame_ids.insert(frame, id);
        id
    }

    /// [`Profile::intern`] of a frame the caller keeps: cloned only when it is new (a
    /// sampler interns the same frames many times a second).
    pub fn intern_ref(&mut self, frame: &Frame) -> FrameId {
        match self.frame_ids.get(frame) {
            Some(&id) => id,
            None => self.intern(frame.clone()),
        }
    }

    /// Adds `samples` samples of total `weight`, each one event, to a stack given root first.
    pub fn add(&mut self, stack_root_first: &[FrameId], samples: u64, weight: u64) {
        self.add_counts(stack_root_first, StackCounts::sampled(samples, weight));
    }

    /// Adds counts to a stack given root first; returns the stack's id.
    pub fn add_counts(&mut self, stack_root_first: &[FrameId], counts: StackCounts) -> StackId {
        let id = match self.stack_ids.get(stack_root_first) {
            Some(&id) => id,
            None => {
                let id = self.stacks.len() as StackId;
                self.stacks
                    .push((stack_root_first.to_vec(), StackCounts::default()));
                self.stack_ids.insert(stack_root_first.to_vec(), id);
                id
            }
        };
        self.stacks[id as usize].1.add(counts);
        id
    }

    /// Adds counts to a stack, and the sample to the event log (while it has room).
    pub fn log(
        &mut self,
        stack_root_first: &[FrameId],
        counts: StackCounts,
        time_ns: u64,
        tid: u32,
    ) {
        let stack = self.add_counts(stack_root_first, counts);
        self.append_logged(LoggedSample {
            time_ns,
            tid,
            stack,
            counts,
        });
    }

    /// Adds counts to a stack already in the profile.
    pub fn add_to(&mut self, stack: StackId, counts: StackCounts) {
        self.stacks[stack as usize].1.add(counts);
    }

    /// [`Profile::log`] for a stack already in the profile.
    pub fn log_id(&mut self, stack: StackId, counts: StackCounts, time_ns: u64, tid: u32) {
        self.stacks[stack as usize].1.add(counts);
        self.append_logged(LoggedSample {
            time_ns,
            tid,
            stack,
            counts,
        });
    }

    /// [`Profile::log`] with the stack given as frames, root first.
    pub fn log_frames(
        &mut self,
        stack_root_first: &[Frame],
        counts: StackCounts,
        time_ns: u64,
        tid: u32,
    ) {
        let ids: Vec<FrameId> = stack_root_first
            .iter()
            .map(|f| self.intern_ref(f))
            .collect();
        self.log(&ids, counts, time_ns, tid);
    }

    /// Appends a sample to the event log whose counts are already in its stack (reading a
    /// profile back); beyond [`MAX_LOGGED`] it is counted as unlogged.
    pub fn append_logged(&mut self, sample: LoggedSample) {
        if self.log.len() < MAX_LOGGED {
            self.log.push(sample);
        } else {
            self.metadata.unlogged += sample.counts.samples;
        }
    }

    /// Names a thread of the event log.
    pub fn name_thread(&mut self, tid: u32, name: impl Into<String>) {
        self.thread_names.insert(tid, name.into());
    }

    /// The event log, in the order samples were logged (empty when none was kept).
    pub fn logged(&self) -> &[LoggedSample] {
        &self.log
    }

    /// Names of the event log's threads, by kernel id (or virtual thread key).
    pub fn thread_names(&self) -> &BTreeMap<u32, String> {
        &self.thread_names
    }

    /// The stack with this id, root first.
    pub fn stack(&self, id: StackId) -> &[FrameId] {
        &self.stacks[id as usize].0
    }

    /// Adds `samples` samples of total `weight`, each one event, to a stack given as frames,
    /// root first.
    pub fn add_frames(&mut self, stack_root_first: &[Frame], samples: u64, weight: u64) {
        self.add_frame_counts(stack_root_first, StackCounts::sampled(samples, weight));
    }

    /// Adds counts to a stack given as frames, root first; returns the stack's id.
    pub fn add_frame_counts(&mut self, stack_root_first: &[Frame], counts: StackCounts) -> StackId {
        let ids: Vec<FrameId> = stack_root_first
            .iter()
            .map(|f| self.intern_ref(f))
            .collect();
        self.add_counts(&ids, counts)
    }

    /// The frame with this id.
    pub fn frame(&self, id: FrameId) -> &Frame {
        &self.frames[id as usize]
    }

    /// All interned frames, indexed by id.
    pub fn frames(&self) -> &[Frame] {
        &self.frames
    }

    /// Distinct stacks (root first) with their counts, heaviest first, ties by stack.
    pub fn stacks(&self) -> Vec<(&[FrameId], StackCounts)> {
        let mut stacks: Vec<_> = self
            .stacks
            .iter()
            .map(|(s, c)| (s.as_slice(), *c))
            .collect();
        stacks.sort_by(|a, b| {
            b.1.weight
                .cmp(&a.1.weight)
                .then(b.1.samples.cmp(&a.1.samples))
                .then(a.0.cmp(b.0))
        });
        stacks
    }

    /// Distinct stacks (root first) with their counts, in [`StackId`] order.
    pub fn stacks_by_id(&self) -> impl Iterator<Item = (&[FrameId], StackCounts)> {
        self.stacks.iter().map(|(s, c)| (s.as_slice(), *c))
    }

    /// The traced calls recorded with the profile, in the order added.
    pub fn calls(&self) -> &[TracedCall] {
        &self.calls
    }

    /// Records a traced call.
    pub fn add_call(&mut self, call: TracedCall) {
        self.calls.push(call);
    }

    /// The old objects of a leak report recorded with the profile, in the order added.
    pub fn old_objects(&self) -> &[OldObject] {
        &self.old_objects
    }

    /// Records an old object (its stack must be this profile's).
    pub fn add_old_object(&mut self, object: OldObject) {
        self.old_objects.push(object);
    }

    /// Number of distinct stacks.
    pub fn stack_count(&self) -> usize {
        self.stacks.len()
    }

    /// Total samples over all stacks.
    pub fn total_samples(&self) -> u64 {
        self.stacks.iter().map(|(_, c)| c.samples).sum()
    }

    /// Total weight over all stacks.
    pub fn total_weight(&self) -> u64 {
        self.stacks.iter().map(|(_, c)| c.weight).sum()
    }

    /// Total of one counter over all stacks.
    pub fn total(&self, counter: Counter) -> u64 {
        self.stacks.iter().map(|(_, c)| c.get(counter)).sum()
    }

    /// The profile as reports show it: frames by their [`Frame::label`] (Java facts dropped),
    /// stacks that become alike merged. Without `lines`, a flame graph then has one frame
    /// per method, as async-profiler draws it by default.
    pub fn labelled(&self, lines: bool) -> Profile {
        let mut labelled = Profile::new(self.metadata.clone());
        let ids: Vec<FrameId> = self
            .frames
            .iter()
            .map(|f| labelled.intern(Frame::new(f.label(lines), f.kind)))
            .collect();
        let stacks: Vec<StackId> = self
            .stacks
            .iter()
            .map(|(stack, counts)| {
                let stack: Vec<FrameId> = stack.iter().map(|&id| ids[id as usize]).collect();
                labelled.add_counts(&stack, *counts)
            })
            .collect();
        labelled.take_log_of(self, &stacks);
        labelled
    }

    /// Merges another profile's stacks (and event log) into this one.
    pub fn merge(&mut self, other: &Profile) {
        let stacks: Vec<StackId> = other
            .stacks
            .iter()
            .map(|(stack, counts)| {
                let frames: Vec<Frame> = stack.iter().map(|&id| other.frame(id).clone()).collect();
                self.add_frame_counts(&frames, *counts)
            })
            .collect();
        self.take_log_of(other, &stacks);
    }

    /// Appends `other`'s event log, thread names and traced calls, its stack ids mapped
    /// through `stacks` (whose counts are already added).
    fn take_log_of(&mut self, other: &Profile, stacks: &[StackId]) {
        self.calls.extend(other.calls.iter().cloned());
        self.old_objects
            .extend(other.old_objects.iter().map(|object| OldObject {
                stack: stacks[object.stack as usize],
                ..object.clone()
            }));
        for sample in &other.log {
            self.append_logged(LoggedSample {
                stack: stacks[sample.stack as usize],
                ..*sample
            });
        }
        self.thread_names.extend(
            other
                .thread_names
                .iter()
                .map(|(&tid, name)| (tid, name.clone())),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_interned_by_reference_are_stored_once() {
        let mut profile = Profile::new(Metadata::default());
        let frame = Frame::new("app.Main.main", FrameKind::Interpreted);
        let first = profile.intern_ref(&frame);
        assert_eq!(profile.intern_ref(&frame), first);
        assert_eq!(profile.intern(frame.clone()), first);
        assert_eq!(profile.frames(), [frame]);
    }

    #[test]
    fn labels_merge_lines_unless_asked() {
        let mut p = Profile::default();
        let main = Frame::java(
            "app.Main.main",
            FrameKind::Compiled,
            Some("([Ljava/lang/String;)V".into()),
            Some(3),
        );
        let work = |line| {
            Frame::java(
                "app.Main.work",
                FrameKind::Compiled,
                Some("()V".into()),
                Some(line),
            )
        };
        p.add_frames(&[main.clone(), work(10)], 1, 10);
        p.add_frames(&[main.clone(), work(11)], 2, 20);
        assert_eq!(
            (main.class(), main.method()),
            (Some("app.Main"), Some("main"))
        );
        assert_eq!(Frame::new("libc.so.6", FrameKind::Native).class(), None);
        let by_method = p.labelled(false);
        assert_eq!(by_method.stack_count(), 1);
        assert_eq!(by_method.total_samples(), 3);
        assert_eq!(by_method.frame(1).name, "app.Main.work");
        let by_line = p.labelled(true);
        assert_eq!(by_line.stack_count(), 2);
        let names: Vec<&str> = by_line.frames().iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            ["app.Main.main:3", "app.Main.work:10", "app.Main.work:11"]
        );
    }

    #[test]
    fn the_event_log_follows_its_stacks_through_labels_and_merges() {
        let mut p = Profile::default();
        let work = |line| Frame::java("app.Main.work", FrameKind::Compiled, None, Some(line));
        let a = [p.intern(work(10))];
        let b = [p.intern(work(11))];
        p.log(&a, StackCounts::sampled(1, 10), 1_000, 7);
        p.log(&b, StackCounts::sampled(2, 20), 2_000, 8);
        p.name_thread(7, "main");
        assert_eq!(p.total_samples(), 3);
        assert_eq!(p.logged().len(), 2);
        let by_method = p.labelled(false);
        assert_eq!(by_method.stack_count(), 1);
        assert!(by_method.logged().iter().all(|s| s.stack == 0));
        assert_eq!(by_method.thread_names()[&7], "main");
        let mut merged = Profile::default();
        merged.add_frames(&[Frame::new("other", FrameKind::Native)], 1, 1);
        merged.merge(&p);
        let logged: Vec<(u64, &str)> = merged
            .logged()
            .iter()
            .map(|s| {
                (
                    s.time_ns,
                    merged.frame(merged.stack(s.stack)[0]).name.as_str(),
                )
            })
            .collect();
        assert_eq!(logged, [(1_000, "app.Main.work"), (2_000, "app.Main.work")]);
        assert_ne!(
            merged.logged()[0].stack,
            merged.logged()[1].stack,
            "lines kept apart"
        );
    }

    #[test]
    fn interns_and_sums() {
        let mut p = Profile::default();
        let main = Frame::new("Main.main", FrameKind::Interpreted);
        let work = Frame::new("Main.work", FrameKind::Compiled);
        p.add_frames(&[main.clone(), work.clone()], 1, 10);
        p.add_frames(&[main.clone(), work], 2, 20);
        p.add_frames(&[main], 1, 10);
        assert_eq!(p.frames().len(), 2);
        assert_eq!(p.stack_count(), 2);
        assert_eq!(p.total_samples(), 4);
        assert_eq!(p.total_weight(), 40);
        assert_eq!(
            p.stacks()[0].1,
            StackCounts {
                samples: 3,
                weight: 30,
                events: 3
            }
        );
    }
}
