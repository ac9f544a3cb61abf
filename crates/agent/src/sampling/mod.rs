//! The sampling core shared by the sampling engines (`cpu`, `itimer`, `ctimer`, `wall`,
//! `perf`).
//!
//! - `asgct`: `AsyncGetCallTrace`, found with `dlsym` in `libjvm.so`, and its structures.
//! - `signal`: the SIGPROF handler (async-signal-safe, chains to the previous handler for
//!   signals that are not ours): jtap's walker ([`crate::walk`]) first, `AsyncGetCallTrace`
//!   where it stops (`walker=`), both compared with `walker=check`.
//! - `buffer`: the preallocated lock-free buffer handlers write samples into.
//! - `counters`: per-thread perf_event counters of any event (`cpu-clock` for `cpu`, the
//!   event named for `perf`), the signal source of those engines.
//! - `perf`: those counters' descriptors as the handler sees them, and the per-thread ring
//!   buffers the kernel writes each sample's call chain into, read by the handler.
//! - `native`: native and kernel frames from those call chains, symbolised by the
//!   processing thread.
//! - `unwind`: DWARF unwinding of the user stack copies perf_events takes with `cstack=dwarf`,
//!   into such call chains.
//! - `methods`: jmethodIDs for every loaded class (at start and on ClassPrepare), and their
//!   resolution to `pkg.Class.method:line`.
//! - `code`: the code map (the interpreter, installed nmethods and what they inlined, from
//!   CompiledMethodLoad/Unload and DynamicCodeGenerated) that tells interpreted, compiled
//!   and inlined frames apart.
//! - `recover`: walking the samples `AsyncGetCallTrace` gives up on from their caller.
//! - `frames`: the processing thread's frame table (each distinct frame named once).
//! - `threads`: the process's threads, their names, per-thread timers following ThreadStart
//!   and ThreadEnd.
//! - `timers`: the process's profiling timer, per-thread CPU-clock timers, and signals sent to
//!   one thread: the signal sources of `itimer`, `ctimer` and `wall`.
//! - `jvm`: the few raw JNI/JVMTI calls the rest needs.
//! - `shared_core`: what the samplers share (the code map, the events that keep it current)
//!   and how long it outlives the last one.
//!
//! An engine makes signals arrive (a perf_event counter, a timer, `tgkill`); a [`Sampler`]
//! turns them into a profile: handlers walk the stack into the buffer, and a `jtap-sampler`
//! thread drains the buffer every few milliseconds, off the hot path, resolving methods and
//! summing stacks into a [`Profile`].
//!
//! A stack is, root first: the thread (`threads`), the Java frames the walk found, each
//! interpreted, compiled, inlined or native (or the pseudo-frame of its failure),
//! the native frames under them, the kernel frames, and the thread's state (`wall`). A
//! sample outside Java (`AsyncGetCallTrace` finds no Java frame, e.g. on a GC thread) with
//! native frames is just those frames.
//!
//! Frame kinds: jtap's walker writes each frame's kind beside it. `AsyncGetCallTrace` does
//! not report them, so for its samples handlers also record the interrupted pc, and the
//! processing thread classifies the frames with the code map: the top physical frame exactly
//! (pc in the interpreter or in an nmethod's inlining scope), the others by what is installed
//! (see `code`).

pub mod armed;
pub(crate) mod asgct;
mod buffer;
mod code;
pub mod counters;
mod frames;
mod idle;
pub(crate) mod jvm;
pub(crate) mod methods;
pub(crate) mod native;
mod owed;
pub mod perf;
mod recover;
mod shared_core;
pub mod signal;
pub mod threads;
pub mod timers;
mod unwind;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use jtap_jvmti::{sys, Capabilities, Env};
use jtap_profile::{virtual_thread_key, Frame, FrameKind, Metadata, Profile, StackCounts};
use jtap_protocol::{JavaStacks, NativeStacks};
use regex::Regex;

use self::buffer::{SampleBuffer, SampleHeader, WALKED_BY_VM, WALKS_DIFFERED};
use self::frames::{Filter, FrameRef, FrameTable};
use self::idle::IdleThreads;
use self::shared_core::{acquire_core, release_core, rescan_stubs};
pub use self::shared_core::{
    core_kept_for, core_up, end_idle_core, on_class_load, on_class_prepare,
    on_compiled_method_load, on_compiled_method_unload, on_dynamic_code_generated, on_thread_end,
    on_thread_start, set_core_linger,
};
use self::signal::{Source, Target, ThreadState, Walks};
use self::threads::ThreadNames;
use crate::thread::{spawn_attached, Vm};
use crate::walk::{Kind, Mounted, Stats};

/// Default deepest Java stack recorded (`jstackdepth`).
pub const DEFAULT_DEPTH: usize = 2048;
/// Samples the buffer holds between two drains.
const SLOTS: usize = 1024;
/// How often the processing thread drains the buffer.
const DRAIN_EVERY: Duration = Duration::from_millis(10);
/// How long stopping waits for the processing thread's last drain.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// Capabilities every sampling engine holds while it runs: line numbers for frame names, and
/// compiled-method-load events (see [`EVENTS`]).
pub fn capabilities() -> Capabilities {
    Capabilities::of(&[
        "can_get_line_numbers",
        "can_generate_compiled_method_load_events",
    ])
}

/// How a sampler labels and filters what it records.
pub struct Settings {
    /// The event asked for (`cpu`, `page-faults`, …).
    pub event: String,
    /// The engine that runs (differs from `event` after a fallback).
    pub engine: &'static str,
    /// Sampling interval; also each sample's weight unless the engine changes it.
    pub interval: Duration,
    /// Where signals come from.
    pub source: Source,
    /// Thread name as each stack's root frame.
    pub threads: bool,
    /// Keep only stacks with a matching frame.
    pub include: Option<Regex>,
    /// Drop stacks with a matching frame.
    pub exclude: Option<Regex>,
    /// Deepest Java stack recorded.
    pub depth: usize,
    /// Leave kernel frames out (`alluser`).
    pub user_only: bool,
    /// How the `cpu` engine walks native frames (`cstack`).
    pub native: NativeStacks,
    /// Who walks Java frames (`walker`): jtap's walker, AsyncGetCallTrace, or both.
    pub java: JavaStacks,
    /// Keep the event log: each sample's time and thread (`timeline`).
    pub timeline: bool,
}

impl Settings {
    /// Settings from the `start` options: `threads`, `include`, `exclude`, `jstackdepth`,
    /// `alluser`, `cstack`.
    pub fn from_options(
        options: &jtap_protocol::Options,
        event: &str,
        engine: &'static str,
        interval: Duration,
        source: Source,
    ) -> Result<Settings, String> {
        let pattern = |p: &Option<String>, key: &str| -> Result<Option<Regex>, String> {
            p.as_deref()
                .map(|p| {
                    Regex::new(p).map_err(|e| format!("{key}=: not a regular expression: {e}"))
                })
                .transpose()
        };
        Ok(Settings {
            event: event.to_string(),
            engine,
            interval,
            source,
            threads: options.threads,
            include: pattern(&options.include, "include")?,
            exclude: pattern(&options.exclude, "exclude")?,
            depth: options.jstackdepth.map_or(DEFAULT_DEPTH, |d| d as usize),
            user_only: options.alluser,
            native: options.cstack.unwrap_or_default(),
            java: options.walker.unwrap_or_default(),
            timeline: options.keeps_timeline(),
        })
    }
}

/// What the processing thread and the commands share.
struct Shared {
    profile: Mutex<Profile>,
    names: ThreadNames,
    /// CLOCK_REALTIME minus CLOCK_MONOTONIC at the start: turns the handler's times into
    /// times since the Unix epoch.
    wall_offset_ns: u64,
    started: Instant,
    stop: AtomicBool,
    /// Samples drained and dropped so far, for progress reports.
    samples: AtomicU64,
    dropped: AtomicU64,
    /// Samples walked from the caller after `unknown_java` (see `recover`): pc in a stub,
    /// pc in a compiled method's prologue/epilogue, pc in a leaf native call, pc where a
    /// safepoint poll trapped; and samples left `unknown_java`.
    recovered_stub: AtomicU64,
    recovered_nmethod: AtomicU64,
    recovered_native: AtomicU64,
    recovered_poll: AtomicU64,
    unknown_java: AtomicU64,
    /// Threads last sampled asleep (wall clock), whose repeats need no signal.
    idle: IdleThreads,
    /// Samples that were such repeats.
    repeated: AtomicU64,
}

/// A running sampler. Dropping it without [`Sampler::stop`] is a bug (it would leave the
/// handler active), so engines always stop it.
pub struct Sampler {
    shared: Arc<Shared>,
    target: Arc<Target>,
    source: Source,
    finished: Mutex<mpsc::Receiver<()>>,
}

/// The samplers in progress, for ThreadStart names.
static CURRENT: Mutex<Vec<Arc<Shared>>> = Mutex::new(Vec::new());
impl Sampler {
    /// Whether thread `tid` is a Java thread (the VM's own threads are not).
    pub fn is_java_thread(&self, tid: i32) -> bool {
        self.shared.names.is_java(tid)
    }

    /// Prepares methods, installs the handler and starts the processing thread; the engine
    /// then makes signals arrive. Needs the live phase and [`capabilities`].
    pub fn start(env: &'static Env, vm: Vm, settings: Settings) -> Result<Sampler, String> {
        let asgct = asgct::function()?;
        signal::install()?;
        // Before the core: without DynamicCodeGenerated, the walker reads the stubs.
        let walker = stack_walker(env, vm);
        acquire_core(env)?;
        let classes = match methods::prepare_loaded_classes(env, vm) {
            Ok(n) => n,
            Err(e) => {
                release_core();
                return Err(format!("preparing method ids: {e}"));
            }
        };
        let vm_threads = match jvm::VmThreadKey::find(vm) {
            Ok(key) => key,
            Err(e) => {
                release_core();
                return Err(e);
            }
        };
        let target = Arc::new(Target {
            // Only perf_event counters deliver call chains; stack copies come from the kernel
            // with them, and the handler takes its own for the other sources.
            buffer: match (settings.source, settings.native) {
                (Source::PerfEvent, NativeStacks::Dwarf) => {
                    SampleBuffer::new(SLOTS, settings.depth, perf::MAX_CHAIN, perf::STACK_BYTES)
                }
                (Source::PerfEvent, NativeStacks::FramePointers) => {
                    SampleBuffer::new(SLOTS, settings.depth, perf::MAX_CHAIN, 0)
                }
                (_, NativeStacks::Dwarf) => {
                    SampleBuffer::new(SLOTS, settings.depth, 0, perf::STACK_BYTES)
                }
                _ => SampleBuffer::new(SLOTS, settings.depth, 0, 0),
            },
            asgct,
            vm: vm.0,
            vm_threads,
            weight: AtomicU64::new(settings.interval.as_nanos() as u64),
            owed: owed::OwedTicks::new(),
            copies_stacks: settings.source != Source::PerfEvent
                && settings.native == NativeStacks::Dwarf,
            walker,
            walks: match (walker, settings.java) {
                (None, _) | (_, JavaStacks::Jvmti) => Walks::Asgct,
                (Some(_), JavaStacks::Vm) => Walks::Vm,
                (Some(_), JavaStacks::Check) => Walks::Check,
            },
            stats: Stats::new(),
            unverified: AtomicU32::new(signal::VERIFIED_SAMPLES),
            distrusted: AtomicBool::new(false),
        });
        let start_time_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let wall_offset_ns = start_time_ns.saturating_sub(signal::monotonic_ns());
        let metadata = Metadata {
            event: settings.event.clone(),
            engine: settings.engine.into(),
            interval: settings.interval.as_nanos() as u64,
            weight_unit: jtap_profile::event::kind(&settings.event)
                .weight_unit
                .into(),
            start_time_ns,
            ..Metadata::default()
        };
        let shared = Arc::new(Shared {
            profile: Mutex::new(Profile::new(metadata)),
            names: ThreadNames::default(),
            wall_offset_ns,
            started: Instant::now(),
            stop: AtomicBool::new(false),
            samples: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            recovered_stub: AtomicU64::new(0),
            recovered_nmethod: AtomicU64::new(0),
            recovered_native: AtomicU64::new(0),
            recovered_poll: AtomicU64::new(0),
            unknown_java: AtomicU64::new(0),
            idle: IdleThreads::default(),
            repeated: AtomicU64::new(0),
        });
        let tasks: Vec<(i32, String)> = threads::tasks()
            .into_iter()
            .filter_map(|tid| Some((tid, threads::kernel_name(tid)?)))
            .collect();
        shared.names.adopt(&jvm::java_thread_names(env), &tasks);
        let (done, finished) = mpsc::channel();
        let source = settings.source;
        let mut symbolizer = native::Symbolizer::default();
        if let Some(vm) = symbolizer.code_mapping(target.asgct as usize as u64) {
            recover::STUBS.set_vm_library(vm.start as usize, vm.end as usize);
        }
        // The whole code cache, not only the code seen so far: HotSpot posts a new nmethod's
        // CompiledMethodLoad later, from its Service Thread, and until then a return address
        // into it (a caller of a stub, early in a program's life) would not count as code.
        if let Some(walker) = crate::walk::resolved() {
            let code = walker.code_range();
            if code.start < code.end {
                recover::STUBS.note_code(code.start, code.end);
            }
        }
        if source == Source::PerfEvent || target.copies_stacks {
            // Before samples arrive: the first time in a process this reads symbol tables
            // (tens of milliseconds), which the processing thread must not spend while the
            // buffer fills. Only perf_events samples have kernel frames.
            let started = Instant::now();
            symbolizer.preload(settings.user_only || source != Source::PerfEvent);
            if settings.native == NativeStacks::Dwarf {
                unwind::preload(&mut symbolizer);
            }
            log!("sampler: symbol tables ready in {:?}", started.elapsed());
        }
        let worker = Worker {
            shared: shared.clone(),
            target: target.clone(),
            settings,
            env,
            vm,
            symbolizer,
        };
        if let Err(e) = spawn_attached(vm, "jtap-sampler".into(), move || worker.run(done)) {
            release_core();
            return Err(format!("cannot start the jtap-sampler thread: {e}"));
        }
        current().push(shared.clone());
        signal::activate(&target, source);
        log!("sampler started: {classes} classes prepared");
        Ok(Sampler {
            shared,
            target,
            source,
            finished: Mutex::new(finished),
        })
    }

    /// Samples recorded and dropped so far, for progress reports.
    pub fn progress(&self) -> (u64, u64) {
        (
            self.shared.samples.load(Ordering::Relaxed),
            self.shared.dropped.load(Ordering::Relaxed),
        )
    }

    /// Weight the handler gives each sample from now on (the wall engine's share of threads).
    pub fn set_sample_weight(&self, nanos: u64) {
        self.target.weight.store(nanos, Ordering::Relaxed);
    }

    /// For a wall-clock ticker about to signal `tid`: true when the thread has not run since
    /// a sample found it asleep, which then counts once more without a signal (see
    /// [`idle`]).
    pub fn counted_asleep(&self, tid: i32) -> bool {
        let now = signal::monotonic_ns();
        self.shared
            .idle
            .repeat(tid, now, || idle::thread_cpu_ns(tid))
    }

    /// For a wall-clock ticker about to signal `tid`: one more tick the thread's next sample
    /// stands for (see [`owed`]).
    pub fn owe_tick(&self, tid: i32) {
        self.target.owed.owe(tid);
    }

    /// For a wall-clock ticker: forgets what it knew of the threads not in `alive`.
    pub fn forget_ended_threads(&self, alive: impl Fn(i32) -> bool) {
        self.target.owed.forgive(&alive);
        self.shared.idle.retain(alive);
    }

    /// The profile so far (samples still in the buffer arrive with the next drain).
    pub fn snapshot(&self) -> Profile {
        snapshot(&self.shared, &self.target)
    }

    /// Stops taking signals, waits for handlers to leave and for the last drain, and returns
    /// the profile. The engine has already stopped its signal source.
    pub fn stop(self) -> Profile {
        let stuck = signal::deactivate(self.source);
        current().retain(|shared| !Arc::ptr_eq(shared, &self.shared));
        self.shared.stop.store(true, Ordering::SeqCst);
        let finished = self
            .finished
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .recv_timeout(STOP_TIMEOUT);
        if finished.is_err() {
            log!("sampler: the processing thread did not finish its last drain in time");
        }
        let (ranges, capacity) = recover::STUBS.fill();
        log!("sampler: {ranges} of {capacity} stub ranges kept");
        release_core();
        log!(
            "sampler: unknown_java walked from the caller: {} in stubs and adapters, {} in compiled entries/exits, {} in leaf native calls; from the poll: {} at trapped safepoint polls; {} left",
            self.shared.recovered_stub.load(Ordering::Relaxed),
            self.shared.recovered_nmethod.load(Ordering::Relaxed),
            self.shared.recovered_native.load(Ordering::Relaxed),
            self.shared.recovered_poll.load(Ordering::Relaxed),
            self.shared.unknown_java.load(Ordering::Relaxed),
        );
        let engine = (self.shared.profile.lock())
            .unwrap_or_else(|e| e.into_inner())
            .metadata
            .engine
            .clone();
        log!(
            "{engine}: {}{}",
            self.target.stats.summary("AsyncGetCallTrace"),
            if self.target.distrusted.load(Ordering::Relaxed) {
                "; it differed on a verified sample: AsyncGetCallTrace only since"
            } else {
                ""
            }
        );
        let profile = snapshot(&self.shared, &self.target);
        if stuck != 0 {
            // A handler is stuck inside (it never should be): keep what it writes into alive.
            log!("sampler: {stuck} signal handlers still running; keeping their buffer");
            std::mem::forget(self.target);
        }
        profile
    }
}

/// jtap's stack walker of this VM, if it knows it (logged when not).
fn stack_walker(env: &Env, vm: Vm) -> Option<&'static crate::walk::Walker> {
    let walker = env
        .version_number()
        .map_err(|e| e.to_string())
        .and_then(|version| crate::walk::walker(vm, version));
    walker
        .inspect_err(|e| log!("sampler: no stack walker ({e}): stubs and adapters not walked"))
        .ok()
}

fn current() -> MutexGuard<'static, Vec<Arc<Shared>>> {
    CURRENT.lock().unwrap_or_else(|e| e.into_inner())
}

fn snapshot(shared: &Shared, target: &Target) -> Profile {
    let mut profile = shared
        .profile
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    profile.metadata.duration_ns = shared.started.elapsed().as_nanos() as u64;
    profile.metadata.dropped = target.buffer.dropped();
    profile
}

/// One drained sample: its frames (`FrameTable` references, root first) in
/// [`Processing::refs`].
struct Drained {
    frames: std::ops::Range<usize>,
    count: u64,
    weight: u64,
    tid: i32,
    /// The virtual thread the thread ran, if any.
    virtual_thread: Option<Mounted>,
    /// Nanoseconds since the Unix epoch.
    time_ns: u64,
}

/// The processing thread.
struct Worker {
    shared: Arc<Shared>,
    target: Arc<Target>,
    settings: Settings,
    env: &'static Env,
    vm: Vm,
    symbolizer: native::Symbolizer,
}

/// What the processing thread keeps from one drain to the next: its caches and buffers.
struct Processing {
    resolver: methods::Resolver<'static>,
    symbolizer: native::Symbolizer,
    unwinder: unwind::DwarfUnwinder,
    table: FrameTable,
    kinds: Vec<FrameKind>,
    user: Vec<FrameRef>,
    kernel: Vec<FrameRef>,
    /// The frames of every sample of a drain, one after the other.
    refs: Vec<FrameRef>,
    drained: Vec<Drained>,
    ids: Vec<jtap_profile::FrameId>,
    /// Samples of idle threads counted by the ticker since the last drain (thread, time).
    repeats: Vec<(i32, u64)>,
    /// The last sample of each thread found asleep: its frames, and the virtual thread.
    asleep: HashMap<i32, (Vec<FrameRef>, Option<Mounted>)>,
    /// Differences between the walks logged so far (`walker=check`).
    differences_logged: u32,
    /// A sample of the last drain was in code the map does not know (a stub made since the
    /// code cache was read, where it is read).
    unknown_code: bool,
    virtual_names: threads::VirtualNames,
}

/// Differences between the walks logged in full.
const LOGGED_DIFFERENCES: u32 = 5;

impl Worker {
    fn run(mut self, done: mpsc::Sender<()>) {
        let mut processing = Processing {
            resolver: methods::Resolver::new(self.env, self.vm),
            symbolizer: std::mem::take(&mut self.symbolizer),
            unwinder: unwind::DwarfUnwinder::default(),
            table: FrameTable::default(),
            kinds: Vec::new(),
            user: Vec::new(),
            kernel: Vec::new(),
            refs: Vec::new(),
            drained: Vec::new(),
            ids: Vec::new(),
            repeats: Vec::new(),
            asleep: HashMap::new(),
            differences_logged: 0,
            unknown_code: false,
            virtual_names: threads::VirtualNames::new(self.vm),
        };
        loop {
            let last = self.shared.stop.load(Ordering::SeqCst);
            self.drain(&mut processing);
            if std::mem::take(&mut processing.unknown_code) {
                rescan_stubs();
            }
            if last {
                break;
            }
            std::thread::sleep(DRAIN_EVERY);
        }
        let cpu = nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
            .map(Duration::from)
            .unwrap_or_default();
        let samples = self.shared.samples.load(Ordering::Relaxed).max(1);
        log!(
            "sampler: processing took {:?} of CPU for {samples} samples ({:.1} µs each; {} of them repeats of idle threads, not signalled)",
            cpu,
            cpu.as_secs_f64() * 1e6 / samples as f64,
            self.shared.repeated.load(Ordering::Relaxed)
        );
        let _ = done.send(());
    }

    fn drain(&self, p: &mut Processing) {
        let in_code = |pc: usize| {
            (self.target.walker).is_some_and(|walker| walker.code_range().contains(&pc))
        };
        p.refs.clear();
        p.drained.clear();
        // First the repeats of sleeping samples drained before: each is that sample again.
        self.shared.idle.take_repeats(&mut p.repeats);
        self.shared.idle.retain_known(&mut p.asleep);
        let weight = self.target.weight.load(Ordering::Relaxed);
        self.shared
            .repeated
            .fetch_add(p.repeats.len() as u64, Ordering::Relaxed);
        for &(tid, time_ns) in &p.repeats {
            if let Some((frames, virtual_thread)) = p.asleep.get(&tid) {
                let start = p.refs.len();
                p.refs.extend_from_slice(frames);
                p.drained.push(Drained {
                    frames: start..p.refs.len(),
                    count: 1,
                    weight,
                    tid,
                    virtual_thread: *virtual_thread,
                    time_ns: time_ns + self.shared.wall_offset_ns,
                });
            }
        }
        self.target.buffer.drain(|header, frames, chain, stack| {
            let used = header.num_frames.clamp(0, frames.len() as i32) as usize;
            let (frames, checked) = frames.split_at(used);
            if header.walker == WALKS_DIFFERED {
                self.log_difference(p, frames, checked);
            }
            let chain = if stack.is_empty() {
                std::borrow::Cow::Borrowed(chain)
            } else {
                p.unwinder
                    .chain(&mut p.symbolizer, chain, header.user_regs, stack)
            };
            p.user.clear();
            p.kernel.clear();
            p.table.native(
                &mut p.symbolizer,
                &chain,
                self.settings.user_only,
                &mut p.user,
                &mut p.kernel,
            );
            let mut top = None;
            match code::map().as_ref() {
                Some(map) => {
                    let pc = header.pc as usize;
                    if header.walker == WALKED_BY_VM {
                        // jtap's walker knew each frame's kind. A stack known by its hash
                        // is not read (`stack` takes it whole).
                        p.kinds.clear();
                        if !p.table.knows_java_stack(header.stack_hash) {
                            p.kinds.extend(frames.iter().map(|f| match f.kind() {
                                Some(Kind::Interpreted) => FrameKind::Interpreted,
                                Some(Kind::Inlined) => FrameKind::Inlined,
                                Some(Kind::Native) => FrameKind::Native,
                                Some(Kind::Compiled) | None => FrameKind::Compiled,
                            }));
                        }
                    } else if header.recovered == recover::FROM_POLL {
                        // The walk began at the poll.
                        map.classify(header.caller_pc as usize, frames, &mut p.kinds);
                    } else if header.recovered != recover::NOT_RECOVERED {
                        // The walk began at the return address: the caller's call site.
                        map.classify(
                            (header.caller_pc as usize).saturating_sub(1),
                            frames,
                            &mut p.kinds,
                        );
                    } else {
                        map.classify(pc, frames, &mut p.kinds);
                    }
                    // A leaf native call's frames come from the native unwinder.
                    if header.recovered != recover::FROM_NATIVE
                        && (header.recovered != recover::NOT_RECOVERED
                            || header.num_frames == UNKNOWN_JAVA)
                    {
                        let location = map.locate(pc);
                        if matches!(location, code::Location::Unknown) && in_code(pc) {
                            p.unknown_code = true;
                        }
                        top = Some(location.into_place());
                    }
                }
                None => p.kinds.clear(),
            }
            let counter = match header.recovered {
                recover::FROM_STUB => Some(&self.shared.recovered_stub),
                recover::FROM_NMETHOD => Some(&self.shared.recovered_nmethod),
                recover::FROM_NATIVE => Some(&self.shared.recovered_native),
                recover::FROM_POLL => Some(&self.shared.recovered_poll),
                _ if header.num_frames == UNKNOWN_JAVA => Some(&self.shared.unknown_java),
                _ => None,
            };
            if let Some(counter) = counter {
                counter.fetch_add(u64::from(header.count.max(1)), Ordering::Relaxed);
            }
            // Resolved with the code map unlocked (see `code::map`).
            let top = top.map(|place| {
                let place = place.resolve(&mut p.resolver);
                let frame = match header.recovered {
                    recover::NOT_RECOVERED => {
                        Frame::new(format!("[in {}]", place.label()), FrameKind::Cpp)
                    }
                    recover::FROM_POLL => Frame::new("[safepoint poll]", FrameKind::Cpp),
                    _ => place.frame(),
                };
                p.table.intern(frame)
            });
            p.kinds.resize(frames.len(), FrameKind::Compiled);
            let start = p.refs.len();
            let kept = self.stack(p, header, frames, top);
            if header.state != 0 {
                let asleep =
                    (kept && header.asleep_at_cpu_ns != 0).then_some(header.asleep_at_cpu_ns);
                if asleep.is_some() {
                    // The thread's previous stack's buffer is reused.
                    let kept = p.asleep.entry(header.tid).or_default();
                    kept.0.clear();
                    kept.0.extend_from_slice(&p.refs[start..]);
                    kept.1 = header.virtual_thread;
                }
                self.shared.idle.sampled(header.tid, asleep);
            }
            if kept {
                let count = u64::from(header.count.max(1));
                p.drained.push(Drained {
                    frames: start..p.refs.len(),
                    count,
                    weight: header.weight.saturating_mul(count),
                    tid: header.tid,
                    virtual_thread: header.virtual_thread,
                    time_ns: header.time_ns + self.shared.wall_offset_ns,
                });
            } else {
                p.refs.truncate(start);
            }
        });
        self.shared
            .samples
            .fetch_add(p.drained.iter().map(|s| s.count).sum(), Ordering::Relaxed);
        self.shared
            .dropped
            .store(self.target.buffer.dropped(), Ordering::Relaxed);
        if p.drained.is_empty() {
            return;
        }
        let mut profile = self
            .shared
            .profile
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        for sample in &p.drained {
            let frames = &p.refs[sample.frames.clone()];
            let first = frames
                .iter()
                .map(|&f| p.table.frame(f))
                .find(|f| f.kind != FrameKind::Thread);
            if let Some(Frame {
                kind: FrameKind::Error,
                name,
                ..
            }) = first
            {
                let reason = name.trim_matches(|c| c == '[' || c == ']').to_string();
                *profile.metadata.errors.entry(reason).or_default() += sample.count;
            }
            p.ids.clear();
            for &frame in frames {
                p.ids.push(p.table.profile_id(&mut profile, frame));
            }
            let counts = StackCounts::sampled(sample.count, sample.weight);
            if self.settings.timeline {
                let tid = match sample.virtual_thread {
                    Some(mounted) => virtual_thread_key(mounted.id),
                    None => sample.tid as u32,
                };
                if !profile.thread_names().contains_key(&tid) {
                    let name = match sample.virtual_thread {
                        Some(mounted) => p.virtual_names.label(&mounted),
                        None => self.shared.names.name(sample.tid),
                    };
                    profile.name_thread(tid, name);
                }
                profile.log(&p.ids, counts, sample.time_ns, tid);
            } else {
                profile.add_counts(&p.ids, counts);
            }
        }
    }

    /// Logs the first few samples whose two walks differed (`walker=check`): the frames
    /// `AsyncGetCallTrace` wrote and jtap's walker's, top first.
    fn log_difference(
        &self,
        p: &mut Processing,
        asgct: &[asgct::CallFrame],
        walker: &[asgct::CallFrame],
    ) {
        if p.differences_logged >= LOGGED_DIFFERENCES {
            return;
        }
        p.differences_logged += 1;
        let mut names = |frames: &[asgct::CallFrame]| {
            frames
                .iter()
                .map(|f| format!("{}@{}", p.resolver.frame(f).name, f.bci))
                .collect::<Vec<_>>()
                .join(" < ")
        };
        let (theirs, ours) = (names(asgct), names(walker));
        log!("sampler: walks differed: AsyncGetCallTrace {theirs}; jtap's walker {ours}");
    }

    /// Appends one sample's frames to `p.refs`, root first: the thread, its Java frames (top
    /// first in `frames`, of the kinds in `p.kinds`), `top` on them, the native frames in
    /// `p.user` and `p.kernel`, the thread's state. False when the filters drop it.
    fn stack(
        &self,
        p: &mut Processing,
        header: &SampleHeader,
        frames: &[asgct::CallFrame],
        top: Option<FrameRef>,
    ) -> bool {
        if let Some(text) = crate::label::name(header.label) {
            let label = p.table.intern(Frame::request_label(&text));
            p.refs.push(label);
        }
        if self.settings.threads {
            let label = match header.virtual_thread {
                Some(mounted) => format!("[{}]", p.virtual_names.label(&mounted)),
                None => self.shared.names.label(header.tid),
            };
            let thread = Frame::new(label, FrameKind::Thread);
            let thread = p.table.intern(thread);
            p.refs.push(thread);
        }
        let start = p.refs.len();
        if header.num_frames > 0 {
            p.table.java_stack(
                &mut p.resolver,
                frames,
                &p.kinds,
                header.stack_hash,
                &mut p.refs,
            );
        } else if !asgct::is_outside_java(header.num_frames)
            || (p.user.is_empty() && p.kernel.is_empty())
        {
            let failure = p.table.failure(header.num_frames);
            p.refs.push(failure);
        }
        // On top of the Java frames (or of the failure).
        if let Some(top) = top {
            let at = if header.num_frames > 0 {
                p.refs.len()
            } else {
                (start + 1).min(p.refs.len())
            };
            p.refs.insert(at, top);
        }
        p.refs.extend(p.user.iter().rev());
        p.refs.extend(p.kernel.iter().rev());
        let filters = [
            (&self.settings.include, Filter::Include, true),
            (&self.settings.exclude, Filter::Exclude, false),
        ];
        for (filter, which, keep_if_matched) in filters {
            if let Some(filter) = filter {
                let matched = p.table.any_matches(&p.refs[start..], which, filter);
                if matched != keep_if_matched {
                    return false;
                }
            }
        }
        if let Some(state) = ThreadState::from_byte(header.state) {
            let state = p.table.state(state);
            p.refs.push(state);
        }
        true
    }
}

/// `AsyncGetCallTrace`'s `ticks_unknown_Java`.
const UNKNOWN_JAVA: i32 = -5;

/// Where an unwalkable (or recovered) sample's pc was.
enum Place {
    /// A VM stub, by name.
    Stub(String),
    /// A compiled method: its jmethodID, then its frame.
    Nmethod(sys::jmethodID),
    Compiled(Frame),
    /// The code map does not know (e.g. an nmethod whose load event has not arrived).
    Unknown,
}

impl code::Location<'_> {
    fn into_place(self) -> Place {
        match self {
            code::Location::Stub(name) => Place::Stub(name.to_string()),
            code::Location::Nmethod { method, .. } => Place::Nmethod(method),
            code::Location::Unknown => Place::Unknown,
        }
    }
}

impl Place {
    /// Names the method of a compiled place (a JVMTI call: not with the code map locked).
    fn resolve(self, resolver: &mut methods::Resolver) -> Place {
        match self {
            Place::Nmethod(method) => {
                let frame = asgct::CallFrame::new(method, -1);
                Place::Compiled(resolver.frame_of_kind(&frame, FrameKind::Compiled))
            }
            place => place,
        }
    }

    /// For the leaf under `[unknown_java]`.
    fn label(&self) -> String {
        match self {
            Place::Stub(name) => name.clone(),
            Place::Compiled(frame) => format!("compiled {}", frame.name),
            Place::Nmethod(_) | Place::Unknown => "unknown code".into(),
        }
    }

    /// The frame on top of a recovered sample's Java frames.
    fn frame(self) -> Frame {
        match self {
            Place::Stub(name) => Frame::new(format!("[{name}]"), FrameKind::Cpp),
            Place::Compiled(frame) => frame,
            Place::Nmethod(_) | Place::Unknown => Frame::new("[unknown code]", FrameKind::Cpp),
        }
    }
}
