//! The native probe methods of the runtime class, called by instrumented code on application
//! threads. They never throw into the application (panics are caught, JNI exceptions
//! cleared), never block (per-thread state, atomics and a bounded queue whose `try_send`
//! drops when full), ignore re-entry (a probe running Java code — iterating a collection,
//! or `toString()` with `--to-string` — makes every probe on that thread a no-op until it
//! returns) and ignore jtap's own threads. Values are described by [`super::values`].
//!
//! Each thread keeps a stack of open calls: entry pushes `(method, start ticks)`, return and
//! exception exit pop the matching frame (frames whose exit was never seen, e.g. entered
//! before the class was instrumented, are dropped), and a call lasting at least the
//! threshold becomes a [`Record`] for the `jtap-trace` thread. Monitor mode folds durations
//! into per-method [`super::stats`] instead; calltree mode grows a tree per entry call.

use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, OnceLock};

use jtap_jvmti::{sys, Env, EnvRef};

use super::calltree::{self, Admission, Growing, Tree};
use super::clock::{self, ticks};
use super::ffi::Jni;
use super::stats;
use super::values::{Describer, SEPARATOR};

/// Probes do something only while this is set.
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// The JVMTI environment probes name threads, take stacks and describe values with
/// ([`Settings::env`]); null before the first session.
static ENV: AtomicPtr<sys::jvmtiEnv> = AtomicPtr::new(std::ptr::null_mut());
/// What the allocation probe hands each object to ([`Settings::on_allocation`]): an
/// [`AllocationSink`] as a pointer, or null.
static ALLOCATION_SINK: AtomicPtr<()> = AtomicPtr::new(std::ptr::null_mut());
/// Bumped by every session start and stop; per-thread state of older sessions is discarded.
static GENERATION: AtomicU32 = AtomicU32::new(0);
/// The session's [`Mode`].
static MODE: AtomicU8 = AtomicU8::new(0);
/// Capture flags ([`CAPTURE_ARGS`] ...).
static CAPTURE: AtomicU8 = AtomicU8::new(0);
/// Shortest call (tree) reported, in ticks.
static THRESHOLD: AtomicU64 = AtomicU64::new(0);
/// Probe calls so far, whether a session is active or not: one counter per cache line,
/// threads spread over them, each updated without a locked instruction (two threads sharing
/// a shard may lose a count now and then: the total is approximate).
static CALLS: [Shard; SHARDS] = [const { Shard(AtomicU64::new(0)) }; SHARDS];
/// The shard the next thread counts in.
static NEXT_SHARD: AtomicU32 = AtomicU32::new(0);
const SHARDS: usize = 64;

#[repr(align(64))]
struct Shard(AtomicU64);
/// Probes read the coarse clock (long thresholds), else [`ticks`].
static COARSE: AtomicBool = AtomicBool::new(false);
/// The probes' clock when the session started: marks older than that belong to an older
/// session.
static SESSION_START: AtomicU64 = AtomicU64::new(0);
/// The session's records carry their thread's request label ([`Settings::labelled`]).
static LABELLED: AtomicBool = AtomicBool::new(false);
/// A labelled session was activated and its probes wait for its labels ([`labels_ready`]).
static AWAITING_LABELS: AtomicBool = AtomicBool::new(false);
/// Records of the current session dropped because the queue was full.
static DROPPED: AtomicU64 = AtomicU64::new(0);
/// Calls (and points reached) the probes reported in the current session, queued or
/// dropped, by method id (methods from [`COUNTED_METHODS`] on are not counted): what a
/// script's client compares with the calls it received (see [`reported`]).
static REPORTED: [AtomicU64; COUNTED_METHODS] = [const { AtomicU64::new(0) }; COUNTED_METHODS];
/// Methods whose reported calls [`REPORTED`] counts.
const COUNTED_METHODS: usize = 1 << 16;
/// Calls of the current session not timed because their thread's stack of open calls was
/// full.
static UNTIMED: AtomicU64 = AtomicU64::new(0);

/// Capture `this` and the arguments (entry probes with values).
pub const CAPTURE_ARGS: u8 = 1;
/// Capture the return value.
pub const CAPTURE_RETURN: u8 = 2;
/// Describe thrown exceptions.
pub const CAPTURE_THROWN: u8 = 4;
/// Capture the Java stack of reported calls.
pub const CAPTURE_STACK: u8 = 8;
/// Describe application objects by their `toString()` (`--to-string`).
pub const CAPTURE_TO_STRING: u8 = 16;
/// With [`CAPTURE_ARGS`]: `this` and each argument as a value of its own (for scripts),
/// joined by [`super::values::SEPARATOR`].
pub const CAPTURE_VALUES: u8 = 32;
/// Each value (with [`CAPTURE_VALUES`]) and the value returned measured (see
/// [`Describer::measured`]).
pub const CAPTURE_SIZES: u8 = 64;

/// What a session does with calls.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum Mode {
    /// A record per call at or above the threshold.
    Trace = 0,
    /// A tree per entry call at or above the threshold.
    Calltree = 1,
    /// Statistics per method.
    Monitor = 2,
    /// Allocation probes only, handed to the alloc engine (`exact`).
    Allocations = 3,
}

/// Marks the ids of call sites on a thread's stack of open calls (method ids never reach it).
const SITE: u32 = 1 << 31;
/// Deepest stack of open calls kept per thread; deeper calls are not timed.
pub const MAX_DEPTH: usize = 256;
/// Deepest Java stack captured with `--stack`.
pub const STACK_DEPTH: usize = 64;
/// Thresholds from which trace mode times calls with the coarse clock: its resolution (4 ms
/// at HZ=250) is then a few percent of the shortest call reported.
pub const COARSE_THRESHOLD_NS: u64 = 100_000_000;
/// Records the queue holds before probes drop them.
const QUEUE: usize = 1 << 16;

/// How a call ended.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// Returned, with the value when captured.
    Returned(Option<String>),
    /// Threw, with the exception when captured.
    Threw(Option<String>),
}

/// What probes hand to the `jtap-trace` thread.
#[derive(Debug)]
pub enum Record {
    /// One call (trace mode).
    Call {
        /// Session generation.
        generation: u32,
        /// Thread name.
        thread: Arc<str>,
        /// Kernel id of the thread.
        tid: u32,
        /// Method id (of the caller, for a call traced at its call site).
        method: u32,
        /// The call site, for a call traced where it is made.
        site: Option<u32>,
        /// Start and duration in ticks.
        start: u64,
        /// Duration in ticks.
        ticks: u64,
        /// `this` and the arguments, when captured.
        args: Option<String>,
        /// How it ended.
        outcome: Outcome,
        /// Java stack (method id as an address, location), when captured.
        stack: Vec<(usize, i64)>,
        /// The thread's request label (0: none).
        label: u32,
    },
    /// A point inside a traced method reached (trace mode).
    Reached {
        /// Session generation.
        generation: u32,
        /// Thread name.
        thread: Arc<str>,
        /// Kernel id of the thread.
        tid: u32,
        /// Method id.
        method: u32,
        /// When, in ticks.
        at: u64,
        /// Where.
        point: Reached,
        /// The method's `this` (and at entry the arguments), joined by
        /// [`super::values::SEPARATOR`], when captured.
        values: Option<String>,
        /// Java stack (method id as an address, location), when captured.
        stack: Vec<(usize, i64)>,
    },
    /// One entry call with the calls inside it (calltree mode).
    Tree {
        /// Session generation.
        generation: u32,
        /// Thread name.
        thread: Arc<str>,
        /// The tree.
        tree: Tree,
        /// The thread's request label when the entry call ended (0: none).
        label: u32,
    },
}

impl Record {
    /// The session that made the record.
    pub fn generation(&self) -> u32 {
        match self {
            Record::Call { generation, .. }
            | Record::Reached { generation, .. }
            | Record::Tree { generation, .. } => *generation,
        }
    }
}

/// What a [`Record::Reached`] reached.
#[derive(Debug)]
pub enum Reached {
    /// The method's entry.
    Entry,
    /// A source line.
    Line(u32),
    /// An allocation site, and the object allocated, described (plans with values).
    New(u32, Option<String>),
    /// A monitor enter or exit site, and the monitor described.
    Sync(u32, String),
    /// A field read or write site, the object whose field it is and the value, described.
    Field(u32, String, String),
    /// An instruction site, the object it takes and its other operands, described.
    Insn(u32, String, Vec<String>),
}

struct Queue {
    sender: SyncSender<Record>,
    receiver: Mutex<Receiver<Record>>,
}

fn queue() -> &'static Queue {
    static QUEUE_: OnceLock<Queue> = OnceLock::new();
    QUEUE_.get_or_init(|| {
        let (sender, receiver) = sync_channel(QUEUE);
        Queue {
            sender,
            receiver: Mutex::new(receiver),
        }
    })
}

/// The receiving end of the record queue (only the `jtap-trace` thread takes it).
pub fn receiver() -> &'static Mutex<Receiver<Record>> {
    &queue().receiver
}

/// A record of a newer session that an older session's `jtap-trace` thread received while
/// finishing: it leaves the record here for the newer session's thread and ends.
static CARRIED: Mutex<Option<Record>> = Mutex::new(None);

/// Leaves `record` for the next `jtap-trace` thread.
pub fn carry(record: Record) {
    *CARRIED.lock().unwrap_or_else(|e| e.into_inner()) = Some(record);
}

/// The record an older session's thread left, if any.
pub fn take_carried() -> Option<Record> {
    CARRIED.lock().unwrap_or_else(|e| e.into_inner()).take()
}

/// Settings of a session, applied by [`activate`].
pub struct Settings {
    /// What happens with calls.
    pub mode: Mode,
    /// `CAPTURE_*` flags.
    pub capture: u8,
    /// Shortest call (tree) reported, in nanoseconds.
    pub threshold_ns: u64,
    /// Trees reported at most (calltree's `-n`).
    pub count: Option<u64>,
    /// The environment probes name threads, take stacks and describe values with: one that
    /// lives as long as the process (probes already running may still use it after the
    /// session ends).
    pub env: &'static Env,
    /// Where allocation probes hand each object ([`Mode::Allocations`]).
    pub on_allocation: Option<AllocationSink>,
    /// Calls, trees and statistics carry the request label (`by=`) their thread has when
    /// they end; the probes act once the labels are in place ([`labels_ready`]), so that a
    /// short session does not report calls made before any could carry one.
    pub labelled: bool,
}

/// Receives each object the allocation probes see, on the allocating thread.
pub type AllocationSink = fn(Jni, sys::jobject);

/// The environment of [`Settings::env`], once a session set it.
fn env() -> Option<EnvRef<'static>> {
    let raw = ENV.load(Relaxed);
    // SAFETY: only ever set from a live environment that lives as long as the process.
    (!raw.is_null()).then(|| unsafe { Env::from_raw(raw) })
}

/// Starts a session: probes act from now on. Returns the session's generation.
pub fn activate(settings: &Settings) -> u32 {
    let clock = clock::clock();
    queue();
    MODE.store(settings.mode as u8, Relaxed);
    CAPTURE.store(settings.capture, Relaxed);
    LABELLED.store(settings.labelled, Relaxed);
    THRESHOLD.store(clock.ticks_for(settings.threshold_ns), Relaxed);
    COARSE.store(
        settings.mode == Mode::Trace && settings.threshold_ns >= COARSE_THRESHOLD_NS,
        Relaxed,
    );
    DROPPED.store(0, Relaxed);
    UNTIMED.store(0, Relaxed);
    REPORTED.iter().for_each(|count| count.store(0, Relaxed));
    calltree::reset(settings.count);
    ENV.store(settings.env.raw(), Relaxed);
    let sink = settings
        .on_allocation
        .map_or(std::ptr::null_mut(), |f| f as *mut ());
    ALLOCATION_SINK.store(sink, Relaxed);
    SESSION_START.store(now(), Relaxed);
    let generation = GENERATION.fetch_add(1, Relaxed) + 1;
    AWAITING_LABELS.store(settings.labelled, Relaxed);
    ACTIVE.store(!settings.labelled, std::sync::atomic::Ordering::SeqCst);
    generation
}

/// Request labels are in place: the probes of a labelled session waiting for them act
/// from now on.
pub fn labels_ready() {
    if AWAITING_LABELS.swap(false, Relaxed) {
        SESSION_START.store(now(), Relaxed);
        ACTIVE.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Whether probes act (a session runs and has not reached its `-n`).
pub fn is_active() -> bool {
    ACTIVE.load(Relaxed)
}

/// Whether a labelled session's probes wait for its labels.
pub fn awaiting_labels() -> bool {
    AWAITING_LABELS.load(Relaxed)
}

/// Whether a session runs and has not reached its `-n`: its probes act, or wait for its
/// labels.
pub fn is_running() -> bool {
    is_active() || awaiting_labels()
}

/// Calltree mode: asks every thread inside an entry call to hand over its tree, unfinished
/// (the session is ending), waiting up to `wait` for them.
pub fn flush_open_trees(wait: std::time::Duration) {
    if ACTIVE.load(Relaxed) && mode() == Mode::Calltree {
        calltree::flush_open_trees(GENERATION.load(Relaxed), wait);
    }
}

/// Stops acting: probes return at once from now on (calls already inside finish).
pub fn deactivate() {
    AWAITING_LABELS.store(false, Relaxed);
    ACTIVE.store(false, std::sync::atomic::Ordering::SeqCst);
    GENERATION.fetch_add(1, Relaxed);
}

/// Whether the session's probes read the coarse clock (see [`COARSE_THRESHOLD_NS`]).
pub fn coarse() -> bool {
    COARSE.load(Relaxed)
}

/// Whether the session's durations are good to a millisecond or worse (the coarse clock, or
/// a field clock advancing every millisecond or more): they print in whole milliseconds.
pub fn whole_milliseconds() -> bool {
    coarse()
        || super::ticker::running_period()
            .is_some_and(|period| period >= std::time::Duration::from_millis(1))
}

/// The clock the session's probes read, as the summary names it.
pub fn clock_name() -> String {
    if let Some(period) = super::ticker::running_period() {
        return format!(
            "field clock every {} µs, exact at the end of calls it lets through",
            period.as_micros()
        );
    }
    if coarse() {
        let resolution = super::ffi::monotonic_coarse_resolution_ns();
        format!(
            "coarse clock, {} ms resolution",
            (resolution + 500_000) / 1_000_000
        )
    } else {
        format!("{} clock", clock::clock().name())
    }
}

/// Probe calls so far (approximate, see [`CALLS`]).
pub fn calls() -> u64 {
    CALLS.iter().map(|s| s.0.load(Relaxed)).sum()
}

/// Records dropped because the queue was full since the session started.
pub fn dropped() -> u64 {
    DROPPED.load(Relaxed)
}

/// Calls (and points reached) reported since the session started, queued or dropped, by
/// method id: the methods with some.
pub fn reported() -> Vec<(u32, u64)> {
    (0..)
        .zip(&REPORTED)
        .map(|(id, count)| (id, count.load(Relaxed)))
        .filter(|&(_, count)| count > 0)
        .collect()
}

/// Calls not timed because their thread's stack of open calls was full, since the session
/// started.
pub fn untimed() -> u64 {
    UNTIMED.load(Relaxed)
}

/// One open call (16 bytes: the per-thread stack is a fixed array).
#[derive(Clone, Copy)]
struct Frame {
    id: u32,
    /// The call's node in the tree being built (calltree), else `u32::MAX`.
    node: u32,
    start: u64,
}

const NO_FRAME: Frame = Frame {
    id: 0,
    node: u32::MAX,
    start: 0,
};

/// The per-thread state every probe touches: plain data without a destructor, so that
/// reaching it is one TLS lookup. Being borrowed is what makes a probe re-entered on the same
/// thread (by Java code a probe runs) do nothing.
struct Hot {
    generation: u32,
    /// Checked whether this is one of jtap's own threads.
    checked: bool,
    /// One of jtap's own threads: probes do nothing.
    own: bool,
    /// Index of the thread's [`CALLS`] shard.
    shard: u32,
    depth: u32,
    /// Entries not pushed because the stack was full; their exits are skipped.
    overflow: u32,
    frames: [Frame; MAX_DEPTH],
}

impl Hot {
    /// Counts a probe call; false when the probe should do nothing (no session, own thread).
    #[inline(always)]
    fn admit(&mut self) -> bool {
        if !self.checked {
            self.checked = true;
            self.own = crate::thread::is_own_thread();
            self.shard = NEXT_SHARD.fetch_add(1, Relaxed) % SHARDS as u32;
        }
        let counter = &CALLS[self.shard as usize % SHARDS].0;
        counter.store(counter.load(Relaxed) + 1, Relaxed);
        if !ACTIVE.load(Relaxed) || self.own {
            return false;
        }
        let generation = GENERATION.load(Relaxed);
        if self.generation != generation {
            self.generation = generation;
            self.depth = 0;
            self.overflow = 0;
        }
        true
    }

    /// Pushes a call; its index in the stack, or None when the stack is full.
    #[inline(always)]
    fn push(&mut self, id: u32, node: u32, start: u64) -> Option<u32> {
        let depth = self.depth as usize;
        match self.frames.get_mut(depth) {
            Some(frame) => {
                *frame = Frame { id, node, start };
                self.depth += 1;
                Some(depth as u32)
            }
            None => {
                self.overflow += 1;
                UNTIMED.fetch_add(1, Relaxed);
                None
            }
        }
    }

    /// Pops the frame of method `id` with its index: the innermost open one, dropping open
    /// frames above it (their exits were missed). None when there is none (entered before
    /// instrumentation).
    #[inline(always)]
    fn pop(&mut self, id: u32) -> Option<(u32, Frame)> {
        if self.overflow > 0 {
            self.overflow -= 1;
            return None;
        }
        let depth = self.depth as usize;
        let at = match depth.checked_sub(1).and_then(|top| self.frames.get(top)) {
            Some(top) if top.id == id => depth - 1,
            _ => self.frames.get(..depth)?.iter().rposition(|f| f.id == id)?,
        };
        self.depth = at as u32;
        Some((at as u32, self.frames[at]))
    }
}

/// The per-thread state only some probes need: the thread's name, captured arguments, the
/// call tree being built.
struct Cold {
    generation: u32,
    name: Option<Arc<str>>,
    /// Described arguments of open calls, by stack index.
    args: Vec<(u32, String)>,
    /// The call tree being built while inside an entry call (calltree mode).
    tree: Growing,
}

impl Cold {
    /// Forgets what belongs to an older session.
    fn refresh(&mut self, generation: u32) -> &mut Cold {
        if self.generation != generation {
            self.generation = generation;
            self.name = None;
            self.args.clear();
            self.tree.clear();
        }
        self
    }

    /// The thread's name, kept for the OS thread's life unless it carries virtual threads.
    fn thread_name(&mut self, jni: Jni) -> Arc<str> {
        if let Some(name) = &self.name {
            return name.clone();
        }
        let (name, carries) = env()
            .and_then(|env| super::ffi::current_thread_label(&env, jni))
            .unwrap_or_else(|| ("?".into(), false));
        let name: Arc<str> = name.into();
        if !carries {
            self.name = Some(name.clone());
        }
        name
    }

    /// The described arguments of the call at stack index `index` (dropping those of calls
    /// above it, whose exits were missed).
    fn take_args(&mut self, index: u32) -> Option<String> {
        while self.args.last().is_some_and(|(i, _)| *i > index) {
            self.args.pop();
        }
        match self.args.last() {
            Some((i, _)) if *i == index => self.args.pop().map(|(_, text)| text),
            _ => None,
        }
    }
}

thread_local! {
    static HOT: RefCell<Hot> = const {
        RefCell::new(Hot { generation: 0, checked: false, own: false, shard: 0, depth: 0, overflow: 0, frames: [NO_FRAME; MAX_DEPTH] })
    };
    static COLD: RefCell<Cold> = const {
        RefCell::new(Cold { generation: 0, name: None, args: Vec::new(), tree: Growing::new() })
    };
}

/// Runs `body` with this thread's hot state, unless a probe is already running on this
/// thread (re-entry) or no session is active. Panics are caught.
#[inline(always)]
fn with_state(body: impl FnOnce(&mut Hot)) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        HOT.with(|state| {
            if let Ok(mut state) = state.try_borrow_mut() {
                if state.admit() {
                    body(&mut state);
                }
            }
        });
    }));
}

/// Runs `body` with this thread's cold state (of the hot state's session).
fn with_cold<T>(hot: &Hot, body: impl FnOnce(&mut Cold) -> T) -> Option<T> {
    COLD.try_with(|cold| {
        cold.try_borrow_mut()
            .ok()
            .map(|mut cold| body(cold.refresh(hot.generation)))
    })
    .ok()
    .flatten()
}

/// The probes' clock reading.
#[inline(always)]
fn now() -> u64 {
    if COARSE.load(Relaxed) {
        clock::coarse_ticks()
    } else {
        ticks()
    }
}

fn mode() -> Mode {
    match MODE.load(Relaxed) {
        1 => Mode::Calltree,
        2 => Mode::Monitor,
        3 => Mode::Allocations,
        _ => Mode::Trace,
    }
}

/// A describer of values as this session captures them (`toString()`, sizes).
fn describer(jni: Jni) -> Option<Describer> {
    Describer::new(
        env()?,
        jni,
        captures(CAPTURE_TO_STRING),
        captures(CAPTURE_SIZES),
    )
}

fn captures(flag: u8) -> bool {
    CAPTURE.load(Relaxed) & flag != 0
}

/// `alloc(Object)`: the object or array instrumented code just allocated (and, for objects,
/// constructed), for the alloc engine's exact recording.
pub extern "system" fn alloc(env: *mut sys::JNIEnv, _class: sys::jclass, object: sys::jobject) {
    with_state(|_| {
        let sink = ALLOCATION_SINK.load(Relaxed);
        if mode() == Mode::Allocations && !sink.is_null() {
            // SAFETY: the pointer was made from an `AllocationSink` in `activate`.
            let sink: AllocationSink =
                unsafe { std::mem::transmute::<*mut (), AllocationSink>(sink) };
            // SAFETY: the VM passes this thread's JNI environment to the native method.
            sink(unsafe { Jni::from_raw(env) }, object);
        }
    });
}

/// `enter(int)`: method entry.
pub extern "system" fn enter(env: *mut sys::JNIEnv, _class: sys::jclass, id: sys::jint) {
    with_state(|hot| {
        let now = now();
        if mode() == Mode::Calltree {
            // Inner methods count only inside an entry call.
            if let Some(node) = with_cold(hot, |cold| {
                flush_if_asked(hot.generation, cold, env, now);
                cold.tree
                    .is_growing()
                    .then(|| cold.tree.open(id as u32, false, now))
            })
            .flatten()
            {
                hot.push(id as u32, node, now);
            }
            return;
        }
        hot.push(id as u32, u32::MAX, now);
    });
}

/// `enterArgs(int, Object this, Object[] args)`: method entry, describing `this` and the
/// arguments (before the call runs, so a method that mutates its arguments shows them as
/// they came in).
pub extern "system" fn enter_args(
    env: *mut sys::JNIEnv,
    _class: sys::jclass,
    id: sys::jint,
    this: sys::jobject,
    args: sys::jobjectArray,
) {
    with_state(|hot| {
        // SAFETY: the VM passes this thread's JNIEnv to native methods.
        let jni = unsafe { Jni::from_raw(env) };
        let text = jni
            .with_local_frame(32, || {
                describer(jni).map(|d| {
                    if captures(CAPTURE_VALUES) {
                        d.values(this, args)
                    } else {
                        d.call(this, args)
                    }
                })
            })
            .flatten();
        if let (Some(index), Some(text)) = (hot.push(id as u32, u32::MAX, now()), text) {
            with_cold(hot, |cold| cold.args.push((index, text)));
        }
    });
}

/// `exit(int)`: normal return.
pub extern "system" fn exit(env: *mut sys::JNIEnv, _class: sys::jclass, id: sys::jint) {
    with_state(|hot| {
        finish(
            hot,
            env,
            (id as u32, id as u32),
            false,
            std::ptr::null_mut(),
        )
    });
}

/// `exitValue(int, Object)`: normal return with the (boxed) value.
pub extern "system" fn exit_value(
    env: *mut sys::JNIEnv,
    _class: sys::jclass,
    id: sys::jint,
    value: sys::jobject,
) {
    with_state(|hot| finish(hot, env, (id as u32, id as u32), false, value));
}

/// `thrown(int, Throwable)`: the method ends by throwing.
pub extern "system" fn thrown(
    env: *mut sys::JNIEnv,
    _class: sys::jclass,
    id: sys::jint,
    exception: sys::jthrowable,
) {
    with_state(|hot| finish(hot, env, (id as u32, id as u32), true, exception));
}

/// `ticks()`: the probes' clock, which methods timed from their own frame read at entry
/// (the `Mark` of sessions without a field clock).
pub extern "system" fn ticks_now(_env: *mut sys::JNIEnv, _class: sys::jclass) -> i64 {
    // Nothing may unwind into the JVM; a mark of 0 is older than any session, so its call is
    // then not reported.
    catch_unwind(now).map_or(0, |ticks| ticks as i64)
}

/// `slow(long start, int id)`: a method returned that may have lasted the threshold; `start`
/// is its entry's mark, kept in its own frame: the field clock's reading (the call came
/// within one clock period of the threshold, see [`super::ticker`]), or in sessions without
/// one the probes' clock (every call).
pub extern "system" fn slow(env: *mut sys::JNIEnv, _class: sys::jclass, start: i64, id: sys::jint) {
    with_state(|hot| {
        finish_marked(
            hot,
            env,
            id as u32,
            start as u64,
            false,
            std::ptr::null_mut(),
        )
    });
}

/// `slowValue(long start, int id, Object value)`: as [`slow`], with the (boxed) value
/// returned.
pub extern "system" fn slow_value(
    env: *mut sys::JNIEnv,
    _class: sys::jclass,
    start: i64,
    id: sys::jint,
    value: sys::jobject,
) {
    with_state(|hot| finish_marked(hot, env, id as u32, start as u64, false, value));
}

/// `slowThrown(long start, int id, Throwable)`: as [`slow`], for a method ending by throwing.
pub extern "system" fn slow_thrown(
    env: *mut sys::JNIEnv,
    _class: sys::jclass,
    start: i64,
    id: sys::jint,
    exception: sys::jthrowable,
) {
    with_state(|hot| finish_marked(hot, env, id as u32, start as u64, true, exception));
}

/// A call timed from the mark its entry kept in its frame (no stack of open calls, so a
/// virtual thread that moved to another carrier meanwhile is timed right): with the exact
/// clock at its end under a field clock, else with the probes' clock; reported if it lasted
/// the threshold (trace), counted in its method's statistics (monitor).
#[inline(always)]
fn finish_marked(
    hot: &mut Hot,
    env: *mut sys::JNIEnv,
    id: u32,
    start: u64,
    threw: bool,
    value: sys::jobject,
) {
    let (end, current) = match super::ticker::running_period() {
        Some(_) => (ticks(), super::ticker::is_current(start)),
        None => (now(), start >= SESSION_START.load(Relaxed)),
    };
    let elapsed = end.saturating_sub(start);
    match mode() {
        Mode::Monitor if current => {
            // SAFETY: the VM passes this thread's JNIEnv to native methods.
            let label = request_label(unsafe { Jni::from_raw(env) });
            return stats::record(id, label, clock::clock().ns(elapsed), threw);
        }
        Mode::Trace if current && elapsed >= THRESHOLD.load(Relaxed) => {}
        _ => return,
    }
    let frame = Frame {
        id,
        node: u32::MAX,
        start,
    };
    report_call(hot, env, id, u32::MAX, frame, elapsed, threw, value);
}

/// `root(int)`: entry of the calltree entry method.
pub extern "system" fn root(env: *mut sys::JNIEnv, _class: sys::jclass, id: sys::jint) {
    with_state(|hot| {
        let now = now();
        let node = with_cold(hot, |cold| {
            flush_if_asked(hot.generation, cold, env, now);
            cold.tree.enter_root(id as u32, now)
        })
        .flatten();
        if let Some(node) = node {
            hot.push(id as u32, node, now);
        }
    });
}

/// `call(int method, int site)`: before a call site of the entry method (or a method it
/// calls, down to the depth asked for).
pub extern "system" fn call(
    env: *mut sys::JNIEnv,
    _class: sys::jclass,
    _method: sys::jint,
    site: sys::jint,
) {
    with_state(|hot| {
        let now = now();
        with_cold(hot, |cold| {
            flush_if_asked(hot.generation, cold, env, now);
            if cold.tree.is_growing() {
                cold.tree.open(site as u32, true, now);
            }
        });
    });
}

/// `called(int method, int site)`: after the call site returned or threw.
pub extern "system" fn called(
    _env: *mut sys::JNIEnv,
    _class: sys::jclass,
    _method: sys::jint,
    site: sys::jint,
) {
    with_state(|hot| {
        let now = now();
        with_cold(hot, |cold| cold.tree.close_site(site as u32, now));
    });
}

/// Hands over the tree this thread is growing, unfinished, when the session is ending and
/// asked for it ([`calltree::flush_open_trees`]).
fn flush_if_asked(generation: u32, cold: &mut Cold, env: *mut sys::JNIEnv, now: u64) {
    if let Some(tree) = cold.tree.take_if_flushing(generation, now) {
        // SAFETY: the VM passes this thread's JNIEnv to native methods.
        let jni = unsafe { Jni::from_raw(env) };
        send_tree(generation, cold.thread_name(jni), tree, request_label(jni));
    }
}

/// Hands a tree to the `jtap-trace` thread, unless the session has all it asked for or the
/// queue is full; switches the probes off at the last tree `-n` asked for.
fn send_tree(generation: u32, thread: Arc<str>, tree: Tree, label: u32) {
    match calltree::admit(tree.nodes.len()) {
        Admission::Drop => {
            DROPPED.fetch_add(1, Relaxed);
        }
        admission => {
            send(Record::Tree {
                generation,
                thread,
                tree,
                label,
            });
            if admission == Admission::SendLast {
                deactivate();
            }
        }
    }
}

/// `siteEnter(int method, int site)`: before a call traced where it is made.
pub extern "system" fn site_enter(
    _env: *mut sys::JNIEnv,
    _class: sys::jclass,
    _method: sys::jint,
    site: sys::jint,
) {
    with_state(|hot| {
        hot.push(site as u32 | SITE, u32::MAX, now());
    });
}

/// `siteEnterSelf(int method, int site, Object this)`: as [`site_enter`], describing the
/// caller's `this` (scripts' `@Self`).
pub extern "system" fn site_enter_self(
    env: *mut sys::JNIEnv,
    _class: sys::jclass,
    _method: sys::jint,
    site: sys::jint,
    this: sys::jobject,
) {
    with_state(|hot| {
        enter_site_described(hot, env, site, |d| d.values(this, std::ptr::null_mut()))
    });
}

/// `siteEnterCallee(int method, int site, Object this, Object target, Object[] args)`: as
/// [`site_enter_self`], also describing the called method's receiver and arguments (scripts'
/// `@TargetInstance` and arguments at `Kind.CALL`): the values are `this`, the receiver,
/// then the arguments.
pub extern "system" fn site_enter_callee(
    env: *mut sys::JNIEnv,
    _class: sys::jclass,
    _method: sys::jint,
    site: sys::jint,
    this: sys::jobject,
    target: sys::jobject,
    args: sys::jobjectArray,
) {
    with_state(|hot| {
        enter_site_described(hot, env, site, |d| {
            format!("{}{SEPARATOR}{}", d.measured(this), d.values(target, args))
        })
    });
}

/// Opens a call traced where it is made, with the values `describe` gives (kept until the
/// call ends).
fn enter_site_described(
    hot: &mut Hot,
    env: *mut sys::JNIEnv,
    site: sys::jint,
    describe: impl FnOnce(&Describer) -> String,
) {
    // SAFETY: the VM passes this thread's JNIEnv to native methods.
    let jni = unsafe { Jni::from_raw(env) };
    let text = jni
        .with_local_frame(16, || describer(jni).map(|d| describe(&d)))
        .flatten();
    if let (Some(index), Some(text)) = (hot.push(site as u32 | SITE, u32::MAX, now()), text) {
        with_cold(hot, |cold| cold.args.push((index, text)));
    }
}

/// `siteExit(int method, int site, Object returned, Throwable thrown)`: after a call traced
/// where it is made returned (with its boxed value, null for void) or threw.
pub extern "system" fn site_exit(
    env: *mut sys::JNIEnv,
    _class: sys::jclass,
    method: sys::jint,
    site: sys::jint,
    returned: sys::jobject,
    thrown: sys::jthrowable,
) {
    with_state(|hot| {
        let threw = !thrown.is_null();
        let value = if threw { thrown } else { returned };
        finish(hot, env, (site as u32 | SITE, method as u32), threw, value)
    });
}

/// `entryReached(int method, Object this)`: the entry of a method probed inside.
pub extern "system" fn entry_reached(
    env: *mut sys::JNIEnv,
    _class: sys::jclass,
    method: sys::jint,
    this: sys::jobject,
) {
    with_state(|hot| {
        let no_args = std::ptr::null_mut();
        report_reached(hot, env, method, (this, no_args), |_| Some(Reached::Entry))
    });
}

/// `entryReachedValues(int method, Object this, Object[] args)`: as [`entry_reached`], with
/// the arguments (described before the method runs).
pub extern "system" fn entry_reached_values(
    env: *mut sys::JNIEnv,
    _class: sys::jclass,
    method: sys::jint,
    this: sys::jobject,
    args: sys::jobjectArray,
) {
    with_state(|hot| report_reached(hot, env, method, (this, args), |_| Some(Reached::Entry)));
}

/// `lineReached(int method, int line, Object this)`: a line of a method probed inside.
pub extern "system" fn line_reached(
    env: *mut sys::JNIEnv,
    _class: sys::jclass,
    method: sys::jint,
    line: sys::jint,
    this: sys::jobject,
) {
    with_state(|hot| {
        let point = |_: Option<&Describer>| Some(Reached::Line(line as u32));
        report_reached(hot, env, method, (this, std::ptr::null_mut()), point)
    });
}

/// `newReached(int method, int site, Object this)`: an object allocated and constructed at an
/// allocation site of a method probed inside.
pub extern "system" fn new_reached(
    env: *mut sys::JNIEnv,
    _class: sys::jclass,
    method: sys::jint,
    site: sys::jint,
    this: sys::jobject,
) {
    with_state(|hot| {
        let point = |_: Option<&Describer>| Some(Reached::New(site as u32, None));
        report_reached(hot, env, method, (this, std::ptr::null_mut()), point)
    });
}

/// `newReachedValue(int method, int site, Object this, Object allocated)`: as
/// [`new_reached`], describing the object or array allocated (scripts' `@Return` at
/// `Kind.NEW` and `Kind.NEWARRAY` with `Where.AFTER`).
pub extern "system" fn new_reached_value(
    env: *mut sys::JNIEnv,
    _class: sys::jclass,
    method: sys::jint,
    site: sys::jint,
    this: sys::jobject,
    allocated: sys::jobject,
) {
    with_state(|hot| {
        let point =
            |d: Option<&Describer>| Some(Reached::New(site as u32, d.map(|d| d.value(allocated))));
        report_reached(hot, env, method, (this, std::ptr::null_mut()), point)
    });
}

/// `syncReached(int method, int site, Object lock, Object this)`: a monitor about to be
/// entered or left in a method probed inside.
pub extern "system" fn sync_reached(
    env: *mut sys::JNIEnv,
    _class: sys::jclass,
    method: sys::jint,
    site: sys::jint,
    lock: sys::jobject,
    this: sys::jobject,
) {
    with_state(|hot| {
        report_reached(
            hot,
            env,
            method,
            (this, std::ptr::null_mut()),
            |describer| Some(Reached::Sync(site as u32, describer?.value(lock))),
        )
    });
}

/// `fieldReached(int method, int site, Object this, Object target, Object value)`: a field
/// of `target` (null: a static field) read or about to be written with `value` (boxed) in a
/// method probed inside.
pub extern "system" fn field_reached(
    env: *mut sys::JNIEnv,
    _class: sys::jclass,
    method: sys::jint,
    site: sys::jint,
    this: sys::jobject,
    target: sys::jobject,
    value: sys::jobject,
) {
    with_state(|hot| {
        report_reached(
            hot,
            env,
            method,
            (this, std::ptr::null_mut()),
            |describer| {
                let describer = describer?;
                let (target, value) = (describer.value(target), describer.value(value));
                Some(Reached::Field(site as u32, target, value))
            },
        )
    });
}

/// `insnReached(int method, int site, Object this, Object target, Object[] operands, Object
/// loaded)`: an array access, throw, catch or type check of `target` (the array, exception
/// or object checked) in a method probed inside; `operands` an array access's index (and
/// value stored), `loaded` an array load's element (null elsewhere).
pub extern "system" fn insn_reached(
    env: *mut sys::JNIEnv,
    _class: sys::jclass,
    method: sys::jint,
    site: sys::jint,
    this: sys::jobject,
    target: sys::jobject,
    operands: sys::jobjectArray,
    loaded: sys::jobject,
) {
    with_state(|hot| {
        report_reached(
            hot,
            env,
            method,
            (this, std::ptr::null_mut()),
            |describer| {
                let describer = describer?;
                let mut values = describer.elements(operands);
                if !loaded.is_null() {
                    values.push(describer.value(loaded));
                }
                Some(Reached::Insn(site as u32, describer.value(target), values))
            },
        )
    });
}

/// Reports a point reached, with `this` (and `args`, when not null) and the stack when the
/// session captures them.
#[cold]
fn report_reached(
    hot: &mut Hot,
    env: *mut sys::JNIEnv,
    method: sys::jint,
    (this, args): (sys::jobject, sys::jobjectArray),
    point: impl FnOnce(Option<&Describer>) -> Option<Reached>,
) {
    if mode() != Mode::Trace {
        return;
    }
    let at = now();
    // SAFETY: the VM passes this thread's JNIEnv to native methods.
    let jni = unsafe { Jni::from_raw(env) };
    let described = jni
        .with_local_frame(16, || {
            let describer = describer(jni);
            let values = captures(CAPTURE_VALUES)
                .then(|| describer.as_ref().map(|d| d.values(this, args)))
                .flatten();
            point(describer.as_ref()).map(|point| (point, values))
        })
        .flatten();
    let Some((point, values)) = described else {
        return;
    };
    let stack = if captures(CAPTURE_STACK) {
        current_stack()
    } else {
        Vec::new()
    };
    let thread = with_cold(hot, |cold| cold.thread_name(jni)).unwrap_or_else(|| "?".into());
    send(Record::Reached {
        generation: hot.generation,
        thread,
        tid: crate::sampling::threads::current_tid() as u32,
        method: method as u32,
        at,
        point,
        values,
        stack,
    });
}

/// A method ended (returned or threw): time it, and report it as the mode says.
/// `(id, method)`: the frame's id on the stack of open calls and the method reported (the
/// same, or a call site marked with [`SITE`] and its caller).
#[inline(always)]
fn finish(
    hot: &mut Hot,
    env: *mut sys::JNIEnv,
    (id, method): (u32, u32),
    threw: bool,
    value: sys::jobject,
) {
    let now = now();
    let Some((index, frame)) = hot.pop(id) else {
        return;
    };
    let elapsed = now.saturating_sub(frame.start);
    match mode() {
        Mode::Trace if elapsed < THRESHOLD.load(Relaxed) => {
            if CAPTURE.load(Relaxed) & CAPTURE_ARGS != 0 {
                with_cold(hot, |cold| cold.take_args(index));
            }
        }
        Mode::Trace => report_call(hot, env, method, index, frame, elapsed, threw, value),
        Mode::Monitor => {
            // SAFETY: the VM passes this thread's JNIEnv to native methods.
            let label = request_label(unsafe { Jni::from_raw(env) });
            stats::record(id, label, clock::clock().ns(elapsed), threw)
        }
        // No entry or exit probes in this mode.
        Mode::Allocations => {}
        Mode::Calltree => {
            if frame.node == u32::MAX {
                return;
            }
            with_cold(hot, |cold| {
                cold.tree.close(frame.node, now);
                if frame.node != 0 {
                    return flush_if_asked(hot.generation, cold, env, now);
                }
                let tree = cold.tree.take();
                if elapsed >= THRESHOLD.load(Relaxed) {
                    // SAFETY: the VM passes this thread's JNIEnv to native methods.
                    let jni = unsafe { Jni::from_raw(env) };
                    send_tree(
                        hot.generation,
                        cold.thread_name(jni),
                        tree,
                        request_label(jni),
                    );
                }
            });
        }
    }
}

/// Trace mode: a call at or above the threshold becomes a record.
#[allow(clippy::too_many_arguments)]
#[cold]
fn report_call(
    hot: &mut Hot,
    env: *mut sys::JNIEnv,
    id: u32,
    index: u32,
    frame: Frame,
    elapsed: u64,
    threw: bool,
    value: sys::jobject,
) {
    // SAFETY: the VM passes this thread's JNIEnv to native methods.
    let jni = unsafe { Jni::from_raw(env) };
    let described = |flag: u8| -> Option<String> {
        if value.is_null() || !captures(flag) {
            return None;
        }
        jni.with_local_frame(32, || {
            describer(jni).map(|d| match flag {
                CAPTURE_RETURN => d.measured(value),
                _ => d.value(value),
            })
        })
        .flatten()
        .filter(|s| !s.is_empty())
    };
    let outcome = if threw {
        Outcome::Threw(described(CAPTURE_THROWN))
    } else {
        Outcome::Returned(described(CAPTURE_RETURN))
    };
    let stack = if captures(CAPTURE_STACK) {
        current_stack()
    } else {
        Vec::new()
    };
    let (thread, args) = with_cold(hot, |cold| (cold.thread_name(jni), cold.take_args(index)))
        .unwrap_or_else(|| ("?".into(), None));
    send(Record::Call {
        generation: hot.generation,
        thread,
        tid: crate::sampling::threads::current_tid() as u32,
        method: id,
        site: (frame.id & SITE != 0).then_some(frame.id & !SITE),
        start: frame.start,
        ticks: elapsed,
        args,
        outcome,
        stack,
        label: request_label(jni),
    });
}

/// The request label of the calling thread, when the session's records carry one (0: none).
fn request_label(jni: Jni) -> u32 {
    match LABELLED.load(Relaxed) && crate::label::is_active() {
        true => crate::label::current(super::label_probes::thread_key(jni)),
        false => 0,
    }
}

fn current_stack() -> Vec<(usize, i64)> {
    let Some(env) = env() else {
        return Vec::new();
    };
    // SAFETY: a null thread means the calling thread, which is a live Java thread.
    match unsafe { env.stack_trace(std::ptr::null_mut(), STACK_DEPTH + 2) } {
        Ok(frames) => frames
            .iter()
            .map(|f| (f.method as usize, f.location))
            .collect(),
        Err(_) => Vec::new(),
    }
}

fn send(record: Record) {
    if let Record::Call { method, .. } | Record::Reached { method, .. } = &record {
        if let Some(count) = REPORTED.get(*method as usize) {
            count.fetch_add(1, Relaxed);
        }
    }
    match queue().sender.try_send(record) {
        Ok(()) => {}
        Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
            DROPPED.fetch_add(1, Relaxed);
        }
    }
}
