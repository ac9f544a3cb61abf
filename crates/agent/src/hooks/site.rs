//! Hooked calls recorded at their sites: the native frames along the caller's frame pointers
//! down to the first JIT-compiled frame, then the Java frames jtap's walker ([`crate::walk`])
//! finds from the thread's last Java frame (a thread the JVM does not know, or a walk that
//! stops, has native frames only), with the hooked function (or whatever the engine names)
//! as the leaf. The engines of native calls (`nativemem`, `io`, `nativelock`) each keep one
//! [`Sites`] and make it a profile at a dump.
//!
//! The walker names methods by their jmethodIDs, which exist only once asked for: while any
//! of these engines runs, one JVMTI environment of their own creates those of every loaded
//! class, and of each class the JVM prepares later; it also resolves the frames at a dump.
//! Native frames are symbolised when the profile is made, from the libraries' symbol tables
//! (`library!function`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use jtap_jvmti::{sys, Env, EnvRef};
use jtap_profile::{Frame, FrameKind, Metadata, Profile};
use jtap_protocol::Options;

use super::Caller;
use crate::gate::Gate;
use crate::heap::env::OwnEnv;
use crate::heap::sites::{self, Part, RawFrame, SiteTable, Tracked};
use crate::heap::stack;
use crate::sampling::methods;
use crate::sampling::native::Symbolizer;
use crate::thread::{current_jni, Vm};
use crate::walk;

/// Most frames of a sample: native ones, then Java ones.
const NATIVE_DEPTH: usize = 32;
const JAVA_DEPTH: usize = 64;
/// The location that marks a native frame's return address in a [`RawFrame`].
const NATIVE_LOCATION: i64 = i64::MIN;

/// The sites of one engine's hooked calls.
pub struct Sites {
    /// Open while the engine records; closing waits for recorders in flight.
    gate: Gate,
    /// The JVM (a `*mut JavaVM`), while the engine records; 0 when it does not.
    vm: AtomicUsize,
    table: OnceLock<SiteTable>,
}

/// One recording of a [`Sites`], from [`Sites::start`] to [`Sites::stop`].
pub struct Recording {
    name: &'static str,
    vm: Vm,
    /// The shared environment of [`Methods`], which lives while this recording is one of its
    /// users (until [`Sites::stop`] consumes it).
    env: EnvRef<'static>,
    timeline: bool,
    started: Instant,
    start_time_ns: u64,
}

impl Sites {
    /// Sites of an engine that does not record yet.
    pub const fn new() -> Sites {
        Sites {
            gate: Gate::new(),
            vm: AtomicUsize::new(0),
            table: OnceLock::new(),
        }
    }

    /// The table.
    pub fn table(&self) -> &SiteTable {
        self.table.get_or_init(SiteTable::new)
    }

    /// Starts recording for engine `name`, with the `start` options' timeline and threads.
    /// Install the hooks after this.
    pub fn start(
        &self,
        name: &'static str,
        vm: Vm,
        options: &Options,
    ) -> Result<Recording, String> {
        let env = Methods::join(vm)?;
        if let Ok(version) = env.version_number() {
            if let Err(why) = walk::walker(vm, version) {
                log!("{name}: native frames only: {why}");
            }
        }
        let table = self.table();
        table.clear();
        let timeline = options.keeps_timeline();
        if timeline {
            table.keep_timeline();
        }
        if options.threads {
            table.keep_threads();
        }
        table.set_live_limit(sites::MAX_LIVE);
        self.vm.store(vm.0 as usize, Ordering::SeqCst);
        self.gate.open();
        Ok(Recording {
            name,
            vm,
            env,
            timeline,
            started: Instant::now(),
            start_time_ns: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64),
        })
    }

    /// Stops recording (uninstall the hooks first): waits for recorders in flight, then
    /// empties the table.
    pub fn stop(&self, recording: Recording) {
        self.vm.store(0, Ordering::SeqCst);
        let stuck = self.gate.close_and_drain(std::time::Duration::from_secs(2));
        if stuck > 0 {
            log!(
                "{}: {stuck} recorders still running after 2 s",
                recording.name
            );
        } else {
            self.table().clear();
        }
        Methods::leave();
    }

    /// Records a call at its site, on the calling thread (inside [`super::on_hooked_thread`]):
    /// `leaf` as the leaf frame, then the caller's native and Java frames; `count` calls of
    /// total `weight`; with `block` (its address), tracked as live until [`SiteTable::freed`].
    pub fn record(&self, caller: &Caller, leaf: &str, count: f64, weight: f64, block: Option<i64>) {
        let Some(_pass) = self.gate.enter() else {
            return;
        };
        let vm = self.vm.load(Ordering::Acquire);
        if vm == 0 {
            return;
        }
        let mut frames = [(0usize, 0i64); NATIVE_DEPTH + JAVA_DEPTH];
        let walker = walk::resolved();
        let code = walker.map_or(0..0, |w| w.code_range());
        let mut native = [0u64; NATIVE_DEPTH];
        let count_native = caller.native_frames(&code, &mut native);
        for (frame, &pc) in frames.iter_mut().zip(&native[..count_native]) {
            *frame = (pc as usize, NATIVE_LOCATION);
        }
        let mut total = count_native;
        if let (Some(walker), Some(jni)) = (walker, current_jni(vm as *mut _)) {
            // SAFETY: `jni` is this thread's JNIEnv (the thread is attached), and the thread
            // is in native or VM code, where its last Java frame (if any) is recorded.
            if let Ok(java) = unsafe { walker.current(jni, &mut frames[total..]) } {
                total += java;
            }
        }
        let table = self.table();
        let class = table.intern(leaf);
        // A block is tracked by its address, until freed.
        let tracked = block
            .filter(|_| table.reserve_id().is_some())
            .map(|id| Tracked { id, weak: 0 });
        // Inside a hooked C function: the thread's virtual thread is not looked up.
        table.record(class, &frames[..total], count, weight, tracked, || None);
    }

    /// The sites recorded so far as a profile (`part`: all of them, or what is still live),
    /// with `metadata` (its duration, start and drops filled in here).
    pub fn profile(&self, recording: &Recording, part: Part, metadata: Metadata) -> Profile {
        let metadata = Metadata {
            duration_ns: recording.started.elapsed().as_nanos() as u64,
            start_time_ns: recording.start_time_ns,
            dropped: self.table().dropped.load(Ordering::Relaxed),
            ..metadata
        };
        let mut java = stack::resolver(&recording.env, recording.vm);
        let mut symbolizer = Symbolizer::default();
        let resolve = move |frame: RawFrame| {
            if frame.1 == NATIVE_LOCATION {
                symbolizer
                    .return_address_frame(frame.0 as u64)
                    .unwrap_or_else(|| Frame::new("[unknown]", FrameKind::Native))
            } else {
                java(frame)
            }
        };
        sites::to_profile(
            &self.table().snapshot(),
            part,
            recording.timeline,
            &self.table().virtual_threads(),
            metadata,
            resolve,
        )
    }
}

/// The JVMTI environment the engines of hooked calls share while any of them runs.
struct Methods {
    own: OwnEnv,
    users: usize,
}

static METHODS: Mutex<Option<Methods>> = Mutex::new(None);
/// ClassPrepare callbacks in flight on the shared environment.
static METHODS_GATE: Gate = Gate::new();

impl Methods {
    /// The shared environment, created (with the jmethodIDs of every loaded class, and a
    /// ClassPrepare callback creating those of later ones) for its first user.
    fn join(vm: Vm) -> Result<EnvRef<'static>, String> {
        // SAFETY: the environment stays alive (owned by METHODS) until its last user leaves,
        // and the caller is a user until it calls `leave`.
        let lend = |own: &OwnEnv| unsafe { Env::from_raw(own.env().raw()) };
        let mut methods = METHODS.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(methods) = methods.as_mut() {
            methods.users += 1;
            return Ok(lend(&methods.own));
        }
        let mut own = OwnEnv::new(vm, &["can_get_line_numbers"])?;
        METHODS_GATE.open();
        let callbacks = sys::jvmtiEventCallbacks {
            ClassPrepare: Some(on_class_prepare),
            ..Default::default()
        };
        if let Err(e) = own.enable(&callbacks, &[sys::JVMTI_EVENT_CLASS_PREPARE]) {
            own.retire(&METHODS_GATE, "hooks");
            return Err(e);
        }
        if let Err(e) = methods::prepare_loaded_classes(own.env(), vm) {
            log!("hooks: Java frames may be missing: {e}");
        }
        let env = lend(&own);
        *methods = Some(Methods { own, users: 1 });
        Ok(env)
    }

    /// One user fewer; the last one disposes of the environment.
    fn leave() {
        let mut methods = METHODS.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = methods.as_mut() {
            m.users -= 1;
            if m.users == 0 {
                if let Some(m) = methods.take() {
                    m.own.retire(&METHODS_GATE, "hooks");
                }
            }
        }
    }
}

/// ClassPrepare: create the new class's jmethodIDs, for the walker.
unsafe extern "C" fn on_class_prepare(
    jvmti: *mut sys::jvmtiEnv,
    _jni: *mut sys::JNIEnv,
    _thread: sys::jthread,
    class: sys::jclass,
) {
    crate::callback::guard_callback(|| {
        let Some(_pass) = METHODS_GATE.enter() else {
            return;
        };
        // SAFETY: the VM calls this with the shared environment, alive while the gate is open.
        let env = unsafe { Env::from_raw(jvmti) };
        methods::prepare_class(&env, class);
    })
}
