//! The lock engine (`start,event=lock`): contended `synchronized` monitors and
//! `java.util.concurrent` locks.
//!
//! Monitors: MonitorContendedEnter (a thread is about to wait for a monitor another thread
//! owns) notes the time in a thread-local; MonitorContendedEntered (it got the monitor)
//! measures the wait. `java.util.concurrent` locks park their waiting threads in
//! `Unsafe.park`, which raises no JVMTI event: [`park`] rebinds that native method to a hook
//! that times HotSpot's own implementation and records waits whose park blocker is a lock
//! (`ReentrantLock`, `ReentrantReadWriteLock`, `Semaphore`, `StampedLock`, other AQS-based
//! locks; not `Condition` waits, idle pool workers or latches — see [`park`] for the choice);
//! virtual threads, which wait unmounted from their carrier, are timed from HotSpot's
//! mount and unmount events.
//! Where that is impossible (a stripped `libjvm.so` without `Unsafe_Park`), only monitors are
//! tracked and the profile's engine says why (`lock (monitors only: …)`).
//!
//! Waits of at least `lock=` (default 10 µs) are recorded with the waiting thread's stack
//! (`GetStackTrace`, at most `jstackdepth=` frames, default 64) and the class of the monitor
//! object or of the park blocker as leaf frame (e.g. `java.util.concurrent.locks.
//! ReentrantLock$NonfairSync`), weighted by the time waited (pprof `contentions`/`delay`).
//! Everything is recorded on the waiting thread itself, into the sharded [`SiteTable`].
//!
//! The engine holds `can_generate_monitor_events` in a JVMTI environment of its own
//! ([`OwnEnv`]), disposed of when it stops.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use jtap_jvmti::{sys, Capabilities, Env, Jni};
use jtap_profile::Metadata;
use jtap_protocol::Options;

mod park;

use super::{Context, Engine, Report};
use crate::gate::Gate;
use crate::heap::env::OwnEnv;
use crate::heap::sites::{self, Part, SiteTable};
use crate::heap::stack;
use crate::thread::Vm;

/// Default shortest wait recorded.
pub const DEFAULT_THRESHOLD: Duration = Duration::from_micros(10);
/// Default deepest stack recorded.
const DEFAULT_DEPTH: usize = 64;

static GATE: Gate = Gate::new();
/// How this engine's stacks were taken.
static STACKS: stack::Stats = stack::Stats::new();
static THRESHOLD_NS: AtomicU64 = AtomicU64::new(0);
/// When the running engine started ([`now_ns`]): a wait that began before it (in an
/// earlier run, whose MonitorContendedEnter left the thread's start behind) is not its own.
static STARTED_NS: AtomicU64 = AtomicU64::new(0);
static DEPTH: AtomicUsize = AtomicUsize::new(DEFAULT_DEPTH);

thread_local! {
    /// When this thread began waiting for a monitor (ns since [`epoch`]; 0: not waiting).
    static WAIT_START_NS: Cell<u64> = const { Cell::new(0) };
}

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn now_ns() -> u64 {
    epoch().elapsed().as_nanos() as u64 + 1
}

/// Whether the running engine tracks `java.util.concurrent` locks (None: no engine runs).
static PARKS: Mutex<Option<Parks>> = Mutex::new(None);

enum Parks {
    /// Started before the live phase (`-agentpath`): binding `Unsafe.park` needs JNI, so it
    /// waits for VMInit.
    Waiting { vm: Vm, threshold: Duration },
    /// Tracked: `Unsafe.park` is bound to the hook.
    Tracked,
    /// Not tracked, and why.
    Untracked(String),
}

fn parks() -> MutexGuard<'static, Option<Parks>> {
    PARKS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Binds `Unsafe.park` to the hook; the outcome.
fn track_parks(vm: Vm, env: &Env, threshold: Duration) -> Parks {
    match park::start(vm, env, threshold) {
        Ok(()) => {
            if let Err(e) = park::start_virtual(env) {
                log!("lock engine: virtual threads' waits seen only while pinned: {e}");
            }
            Parks::Tracked
        }
        Err(e) => {
            log!("lock engine: java.util.concurrent locks not tracked: {e}");
            Parks::Untracked(e)
        }
    }
}

/// The engine as the profile names it: `lock`, or why it tracks monitors only.
fn engine_name(parks: Option<&Parks>) -> String {
    match parks {
        Some(Parks::Tracked) => "lock".into(),
        Some(Parks::Untracked(why)) => format!("lock (monitors only: {why})"),
        Some(Parks::Waiting { .. }) | None => {
            "lock (monitors only: java.util.concurrent locks wait for VMInit)".into()
        }
    }
}

fn table() -> &'static SiteTable {
    static TABLE: OnceLock<SiteTable> = OnceLock::new();
    TABLE.get_or_init(SiteTable::new)
}

/// The engine.
#[derive(Default)]
pub struct LockEngine {
    run: Option<Run>,
}

struct Run {
    own: OwnEnv,
    vm: Vm,
    threshold: Duration,
    /// Keep the event log.
    timeline: bool,
    started: Instant,
    start_time_ns: u64,
}

impl Engine for LockEngine {
    fn name(&self) -> &'static str {
        "lock"
    }

    /// None on the agent's environment: the engine holds its own.
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }

    fn start(&mut self, context: &Context, options: &Options) -> Result<(), String> {
        let threshold = options.lock.flatten().unwrap_or(DEFAULT_THRESHOLD);
        let mut own = OwnEnv::new(
            context.vm,
            &["can_generate_monitor_events", "can_get_line_numbers"],
        )?;
        stack::choose(
            context.vm,
            own.env(),
            options.walker.unwrap_or_default(),
            &STACKS,
        );
        epoch();
        table().clear();
        let timeline = options.keeps_timeline();
        if timeline {
            table().keep_timeline();
        }
        if options.threads {
            table().keep_threads();
        }
        THRESHOLD_NS.store(
            threshold.as_nanos().min(u64::MAX as u128) as u64,
            Ordering::SeqCst,
        );
        STARTED_NS.store(now_ns(), Ordering::SeqCst);
        DEPTH.store(
            options.jstackdepth.map_or(DEFAULT_DEPTH, |d| d as usize),
            Ordering::SeqCst,
        );
        let callbacks = sys::jvmtiEventCallbacks {
            MonitorContendedEnter: Some(on_contended_enter),
            MonitorContendedEntered: Some(on_contended_entered),
            VMInit: Some(on_vm_init),
            ..Default::default()
        };
        let live = own.env().phase() == Ok(sys::JVMTI_PHASE_LIVE);
        let mut events = vec![
            sys::JVMTI_EVENT_MONITOR_CONTENDED_ENTER,
            sys::JVMTI_EVENT_MONITOR_CONTENDED_ENTERED,
        ];
        if !live {
            events.push(sys::JVMTI_EVENT_VM_INIT);
            *parks() = Some(Parks::Waiting {
                vm: context.vm,
                threshold,
            });
        }
        GATE.open();
        if let Err(e) = own.enable(&callbacks, &events) {
            own.disable();
            *parks() = None;
            own.retire(&GATE, "lock");
            return Err(e);
        }
        if live {
            *parks() = Some(track_parks(context.vm, own.env(), threshold));
        }
        let start_time_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        self.run = Some(Run {
            own,
            vm: context.vm,
            threshold,
            timeline,
            started: Instant::now(),
            start_time_ns,
        });
        Ok(())
    }

    fn dump(&self) -> Report {
        match &self.run {
            Some(run) => run.report(engine_name(parks().as_ref())),
            None => Report::Text("lock: not running".into()),
        }
    }

    fn stop(&mut self, _context: &Context) -> Report {
        let Some(mut run) = self.run.take() else {
            return Report::Text("lock: not running".into());
        };
        run.own.disable();
        let parks = parks().take();
        if let Some(Parks::Tracked) = parks {
            park::stop_virtual(run.own.env());
            park::stop(run.vm);
        }
        let report = run.report(engine_name(parks.as_ref()));
        run.own.retire(&GATE, "lock");
        // After the callbacks in flight have left.
        log!("lock: {}", stack::summary(&STACKS));
        table().clear();
        report
    }
}

impl Run {
    fn report(&self, engine: String) -> Report {
        let metadata = Metadata {
            event: "lock".into(),
            engine,
            interval: self.threshold.as_nanos() as u64,
            weight_unit: "nanoseconds".into(),
            duration_ns: self.started.elapsed().as_nanos() as u64,
            start_time_ns: self.start_time_ns,
            dropped: table().dropped.load(Ordering::Relaxed),
            ..Metadata::default()
        };
        let resolve = stack::resolver(self.own.env(), self.vm);
        Report::Profile(Box::new(sites::to_profile(
            &table().snapshot(),
            Part::Total,
            self.timeline,
            &table().virtual_threads(),
            metadata,
            resolve,
        )))
    }
}

/// VMInit (engine started with `-agentpath`): binds `Unsafe.park` now that JNI works.
unsafe extern "C" fn on_vm_init(
    jvmti: *mut sys::jvmtiEnv,
    _jni: *mut sys::JNIEnv,
    _thread: sys::jthread,
) {
    crate::callback::guard_callback(|| {
        let Some(_pass) = GATE.enter() else { return };
        let mut parks = parks();
        if let Some(Parks::Waiting { vm, threshold }) = *parks {
            // SAFETY: the engine's environment, which this callback was called with; the
            // gate pass keeps it from being disposed of.
            let env = unsafe { Env::from_raw(jvmti) };
            *parks = Some(track_parks(vm, &env, threshold));
        }
    })
}

/// MonitorContendedEnter: this thread starts waiting.
unsafe extern "C" fn on_contended_enter(
    _jvmti: *mut sys::jvmtiEnv,
    _jni: *mut sys::JNIEnv,
    _thread: sys::jthread,
    _object: sys::jobject,
) {
    crate::callback::guard_callback(|| {
        if let Some(_pass) = GATE.enter() {
            WAIT_START_NS.with(|start| start.set(now_ns()));
        }
    })
}

/// MonitorContendedEntered: this thread got the monitor; record the wait if long enough.
unsafe extern "C" fn on_contended_entered(
    jvmti: *mut sys::jvmtiEnv,
    jni: *mut sys::JNIEnv,
    _thread: sys::jthread,
    object: sys::jobject,
) {
    crate::callback::guard_callback(|| {
        let Some(_pass) = GATE.enter() else { return };
        let started = WAIT_START_NS.with(|start| start.replace(0));
        if started == 0 || started < STARTED_NS.load(Ordering::Relaxed) {
            return; // began waiting before the engine started
        }
        let waited = now_ns().saturating_sub(started);
        if waited < THRESHOLD_NS.load(Ordering::Relaxed) {
            return;
        }
        // SAFETY: the VM calls this with the engine's live environment.
        let env = unsafe { Env::from_raw(jvmti) };
        // SAFETY: jni is this thread's JNIEnv and object the callback's valid local reference.
        let class = unsafe { monitor_class_signature(&env, jni, object) }
            .unwrap_or_else(|| "[unknown class]".into());
        record_wait(&env, jni, &class, waited);
    })
}

/// Records a wait of `waited` ns for a lock of class `class` (JVM signature) at the calling
/// thread's stack (`jni` its JNIEnv, in a callback or native method). Call inside the gate.
fn record_wait(env: &Env, jni: *mut sys::JNIEnv, class: &str, waited: u64) {
    let class = table().intern(class);
    stack::with_current(env, jni, DEPTH.load(Ordering::Relaxed), &STACKS, |frames| {
        // SAFETY: `jni` is this thread's, inside a callback or native method.
        let mounted = || unsafe { table().current_virtual_thread(env, jni) };
        table().record(class, frames, 1.0, waited as f64, None, mounted)
    });
}

/// The JVM signature of `object`'s class.
///
/// # Safety
/// `jni` is the calling thread's JNIEnv and `object` a valid reference on this thread.
unsafe fn monitor_class_signature(
    env: &Env,
    jni: *mut sys::JNIEnv,
    object: sys::jobject,
) -> Option<String> {
    // SAFETY: caller's contract: this thread's environment, during its callback.
    let jni = unsafe { Jni::from_raw(jni) };
    // SAFETY: caller's contract; the class is a local reference deleted when it drops.
    let class = unsafe { jni.object_class(object) }?;
    // SAFETY: a live class reference.
    unsafe { env.class_signature(class.raw()) }.ok()
}
