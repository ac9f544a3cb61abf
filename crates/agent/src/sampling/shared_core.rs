//! The sampling core the samplers share: the code map, the JVMTI events that keep it and
//! the method ids current, and how long it outlives the last sampler. The first sampler sets
//! it up; the others find it up.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use jtap_jvmti::{sys, Env};

use super::{code, jvm, methods, recover, threads};
use crate::gate::Gate;

/// The core (events, code map) the samplers share: the first sets it up; it outlives the
/// last by its linger ([`set_core_linger`], [`end_idle_core`]).
static CORE: Mutex<Core> = Mutex::new(Core {
    users: 0,
    up: false,
    idle_since: None,
});

/// How long the core outlives its last sampler by default. Setting it up replays every
/// installed nmethod's CompiledMethodLoad, whose inline records HotSpot builds from the debug
/// information (~0.5 s of CPU for javac's 6,500 nmethods), so back-to-back recordings (a
/// loop's periods, `jtap profile` run again, a benchmark's windows) reuse it meanwhile. An
/// idle core costs the JVM the events of what it compiles (HotSpot builds each new
/// nmethod's record while the events are on) and the map's memory.
const DEFAULT_CORE_LINGER: Duration = Duration::from_secs(60);

/// The linger in force (`linger=`), in milliseconds.
static CORE_LINGER_MS: AtomicU64 = AtomicU64::new(DEFAULT_CORE_LINGER.as_millis() as u64);

/// Sets how long the core outlives its last sampler, from now on.
pub fn set_core_linger(linger: Duration) {
    CORE_LINGER_MS.store(linger.as_millis() as u64, Ordering::Relaxed);
}

fn core_linger() -> Duration {
    Duration::from_millis(CORE_LINGER_MS.load(Ordering::Relaxed))
}

struct Core {
    /// Samplers running.
    users: usize,
    /// Set up: events on, code map kept.
    up: bool,
    /// Since when no sampler runs, while the core is up.
    idle_since: Option<Instant>,
}
/// Lets ClassPrepare/ThreadStart/ThreadEnd callbacks in only while a sampler runs.
static EVENTS_GATE: Gate = Gate::new();

/// ClassLoad is enabled only because `AsyncGetCallTrace` refuses to walk (`no_class_load`)
/// unless some agent receives it; its callback does nothing. CompiledMethodLoad/Unload and
/// DynamicCodeGenerated feed the code map (`code`). While an agent receives
/// CompiledMethodLoad, HotSpot's JIT also records debug information at non-safepoint
/// locations (as `-XX:+DebugNonSafepoints` does, when that flag is left at its default), so
/// that samples in code compiled from then on are attributed to the right method and line.
/// (`DebugNonSafepoints` itself is a diagnostic flag, which the attach `setflag` operation
/// cannot change.)
const EVENTS: [sys::jvmtiEvent; 7] = [
    sys::JVMTI_EVENT_CLASS_LOAD,
    sys::JVMTI_EVENT_COMPILED_METHOD_LOAD,
    sys::JVMTI_EVENT_COMPILED_METHOD_UNLOAD,
    sys::JVMTI_EVENT_DYNAMIC_CODE_GENERATED,
    sys::JVMTI_EVENT_CLASS_PREPARE,
    sys::JVMTI_EVENT_THREAD_START,
    sys::JVMTI_EVENT_THREAD_END,
];

/// Sets up what every sampler shares, for the first one: the code map (filled with what was
/// compiled before) and the events that keep it and the method ids current.
pub(super) fn acquire_core(env: &Env) -> Result<(), String> {
    let mut core = CORE.lock().unwrap_or_else(|e| e.into_inner());
    if !core.up {
        recover::STUBS.clear();
        *code::map() = Some(code::CodeMap::default());
        EVENTS_GATE.open();
        let version = env.system_property(c"java.vm.version").unwrap_or_default();
        let stubs = code::stub_events_are_safe(&version);
        if !stubs {
            log!(
                "sampler: HotSpot {version} can crash when DynamicCodeGenerated is enabled (JDK-8212155, fixed in 17 and 11.0.29): its stubs are read from the code cache instead"
            );
            scan_stubs();
        }
        let events = EVENTS
            .into_iter()
            .filter(|&event| stubs || event != sys::JVMTI_EVENT_DYNAMIC_CODE_GENERATED);
        for event in events {
            if let Err(e) = env.set_event_enabled(event, true) {
                tear_down_core(env);
                return Err(e.to_string());
            }
        }
        replay_code_events(env, stubs);
        core.up = true;
    } else if core.users == 0 {
        log!("sampler: code map kept from the last recording");
    }
    core.users += 1;
    core.idle_since = None;
    Ok(())
}

/// Undoes [`acquire_core`]; the core stays up, idle, until [`end_idle_core`].
pub(super) fn release_core() {
    let mut core = CORE.lock().unwrap_or_else(|e| e.into_inner());
    core.users = core.users.saturating_sub(1);
    if core.users == 0 {
        core.idle_since = Some(Instant::now());
    }
}

/// Whether the core is up (in use or idle): its capabilities ([`capabilities`]) must stay.
pub fn core_up() -> bool {
    CORE.lock().unwrap_or_else(|e| e.into_inner()).up
}

/// How much longer the idle core is kept, if it is up and no sampler runs.
pub fn core_kept_for() -> Option<Duration> {
    let core = CORE.lock().unwrap_or_else(|e| e.into_inner());
    let idle = core.idle_since.filter(|_| core.up && core.users == 0)?;
    Some(core_linger().saturating_sub(idle.elapsed()))
}

/// Tears the core down if it has been idle for its linger; true if it did (its
/// capabilities may then go back).
pub fn end_idle_core(env: &Env) -> bool {
    let mut core = CORE.lock().unwrap_or_else(|e| e.into_inner());
    let due = core.up
        && core.users == 0
        && core
            .idle_since
            .is_some_and(|idle| idle.elapsed() >= core_linger());
    if due {
        tear_down_core(env);
        core.up = false;
        core.idle_since = None;
    }
    due
}

fn tear_down_core(env: &Env) {
    for event in EVENTS {
        let _ = env.set_event_enabled(event, false);
    }
    let stuck = EVENTS_GATE.close_and_drain(Duration::from_secs(2));
    if stuck != 0 {
        log!("sampler: {stuck} thread/class/code callbacks still running after 2 s");
    }
    *code::map() = None;
    *lock(&STUBS_SCANNED) = None;
}

/// The VM's stubs as jtap's walker reads them from the code cache, blob by blob, where
/// DynamicCodeGenerated is not safe to enable: the interpreter, adapters, runtime stubs, the
/// safepoint handlers and the blobs of vtable and itable stubs. The routines inside the
/// `StubRoutines` blobs (arraycopy and the like) are not told apart.
fn scan_stubs() {
    let Some(walker) = crate::walk::resolved() else {
        return;
    };
    let mut new = 0;
    for stub in walker.stubs() {
        let size = u32::try_from(stub.code.len()).unwrap_or(0);
        new += usize::from(code::record_stub(
            &stub.name,
            stub.code.start,
            size,
            &stub.first,
        ));
    }
    log!("sampler: {new} new stubs read from the code cache");
    *lock(&STUBS_SCANNED) = Some(Instant::now());
}

/// When the code cache was last read for stubs, where it is (see [`scan_stubs`]).
static STUBS_SCANNED: Mutex<Option<Instant>> = Mutex::new(None);
/// Least time between two readings of the code cache for stubs made since.
const RESCAN_EVERY: Duration = Duration::from_secs(1);

/// Reads the code cache for stubs again, where it is read and not within [`RESCAN_EVERY`]:
/// a sample was in code the map does not know (a vtable stub's blob or an adapter made since).
pub(super) fn rescan_stubs() {
    let due = lock(&STUBS_SCANNED).is_some_and(|at| at.elapsed() >= RESCAN_EVERY);
    if due {
        scan_stubs();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Fills the code map with what was compiled and generated (when `stubs`) before the sampler
/// started. Without it the map still learns from new events; frames of older code are then
/// classified by what is installed.
fn replay_code_events(env: &Env, stubs: bool) {
    let started = Instant::now();
    let events = [
        (sys::JVMTI_EVENT_COMPILED_METHOD_LOAD, true),
        (sys::JVMTI_EVENT_DYNAMIC_CODE_GENERATED, stubs),
    ];
    for (event, _) in events.into_iter().filter(|&(_, wanted)| wanted) {
        if let Err(e) = env.generate_events(event) {
            log!("sampler: {e}: frame kinds of older code are approximate");
        }
    }
    if let Some(map) = code::map().as_ref() {
        let (nmethods, inline_bytes, over_budget) = map.counts();
        log!(
            "sampler: code map of {nmethods} nmethods ({} KiB of inline information, {over_budget} nmethods without), interpreter {}, in {:?}",
            inline_bytes >> 10,
            if map.knows_interpreter() { "found" } else { "not found" },
            started.elapsed()
        );
    }
}

/// ClassLoad: nothing to do (see [`EVENTS`]).
pub extern "C" fn on_class_load(
    _env: *mut sys::jvmtiEnv,
    _jni: *mut sys::JNIEnv,
    _thread: sys::jthread,
    _class: sys::jclass,
) {
}

/// CompiledMethodLoad (also replayed at start): record the nmethod in the code map.
pub extern "C" fn on_compiled_method_load(
    env: *mut sys::jvmtiEnv,
    method: sys::jmethodID,
    code_size: sys::jint,
    code_address: *const std::ffi::c_void,
    _map_length: sys::jint,
    _map: *const sys::jvmtiAddrLocationMap,
    compile_info: *const std::ffi::c_void,
) {
    crate::callback::guard_callback(|| {
        let Some(_pass) = EVENTS_GATE.enter() else {
            return;
        };
        // SAFETY: the arguments are this callback's, valid while it runs.
        unsafe {
            let env = Env::from_raw(env);
            code::compiled_method_load(&env, method, code_size, code_address, compile_info);
        }
    })
}

/// CompiledMethodUnload: forget the nmethod.
pub extern "C" fn on_compiled_method_unload(
    _env: *mut sys::jvmtiEnv,
    method: sys::jmethodID,
    code_address: *const std::ffi::c_void,
) {
    crate::callback::guard_callback(|| {
        let Some(_pass) = EVENTS_GATE.enter() else {
            return;
        };
        if let Some(map) = code::map().as_mut() {
            map.remove(method, code_address as usize);
        }
    })
}

/// DynamicCodeGenerated (also replayed at start): remember the interpreter's code.
pub extern "C" fn on_dynamic_code_generated(
    _env: *mut sys::jvmtiEnv,
    name: *const std::ffi::c_char,
    address: *const std::ffi::c_void,
    length: sys::jint,
) {
    crate::callback::guard_callback(|| {
        let Some(_pass) = EVENTS_GATE.enter() else {
            return;
        };
        // SAFETY: the arguments are this callback's, valid while it runs.
        unsafe { code::dynamic_code_generated(name, address, length) };
    })
}

/// ClassPrepare: create the new class's jmethodIDs.
pub extern "C" fn on_class_prepare(
    jvmti: *mut sys::jvmtiEnv,
    _jni: *mut sys::JNIEnv,
    _thread: sys::jthread,
    class: sys::jclass,
) {
    crate::callback::guard_callback(|| {
        let Some(_pass) = EVENTS_GATE.enter() else {
            return;
        };
        // SAFETY: the environment this callback was called with.
        let env = unsafe { Env::from_raw(jvmti) };
        methods::prepare_class(&env, class);
    })
}

/// ThreadStart (on the new thread): remember its name, arm its timer.
pub extern "C" fn on_thread_start(
    jvmti: *mut sys::jvmtiEnv,
    _jni: *mut sys::JNIEnv,
    thread: sys::jthread,
) {
    crate::callback::guard_callback(|| {
        let Some(_pass) = EVENTS_GATE.enter() else {
            return;
        };
        // SAFETY: the environment this callback was called with.
        let env = unsafe { Env::from_raw(jvmti) };
        // SAFETY: the thread reference is valid for the callback.
        let name = unsafe { jvm::thread_name(&env, thread) }.unwrap_or_default();
        let tid = threads::current_tid();
        threads::thread_started(tid, &name);
        for shared in super::current().iter() {
            shared.names.started(tid, name.clone());
        }
    })
}

/// ThreadEnd (on the ending thread): disarm its timer.
pub extern "C" fn on_thread_end(
    _env: *mut sys::jvmtiEnv,
    _jni: *mut sys::JNIEnv,
    _thread: sys::jthread,
) {
    crate::callback::guard_callback(|| {
        let Some(_pass) = EVENTS_GATE.enter() else {
            return;
        };
        threads::thread_ended(threads::current_tid());
    })
}
