//! The nativemem engine: native memory allocated by the JVM's libraries and JNI code
//! (`malloc`, `calloc`, `realloc`, `posix_memalign`, `aligned_alloc`), sampled by bytes through
//! the allocator hooks of [`crate::malloc`], with native and Java stacks.
//!
//! Each sample is recorded at its site: the allocating function as the leaf, then the native
//! frames along the caller's frame pointers down to the first JIT-compiled frame, then the
//! Java frames jtap's walker ([`crate::walk`]) finds from the thread's last Java frame (a thread
//! the JVM does not know, or a walk that stops, has native frames only). Like `-e alloc`, a
//! sample stands for about one interval of bytes (a larger block for itself). With `live`, a
//! sampled block is tracked until it is freed: the profile then holds only what is still
//! allocated at the end, the leaks.
//!
//! Native frames are symbolised when the profile is made, from the libraries' symbol tables
//! (`library!function`). Cost: one thread-local counter update per allocation, and per
//! sample about a microsecond for the stacks; with `live`, a table lookup per `free`.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use jtap_jvmti::{sys, Capabilities, Env};
use jtap_profile::{Frame, FrameKind, Metadata};
use jtap_protocol::Options;

use super::{Context, Engine, Report};
use crate::gate::Gate;
use crate::heap::env::OwnEnv;
use crate::heap::sites::{self, Part, RawFrame, SiteTable};
use crate::heap::stack;
use crate::malloc::{self, Allocation};
use crate::sampling::methods;
use crate::sampling::native::Symbolizer;
use crate::thread::{current_jni, Vm};
use crate::walk;

/// Default mean bytes between samples.
pub const DEFAULT_INTERVAL: u64 = 512 * 1024;
/// Most frames of a sample: native ones, then Java ones.
const NATIVE_DEPTH: usize = 32;
const JAVA_DEPTH: usize = 64;
/// The location that marks a native frame's return address in a [`RawFrame`].
const NATIVE_LOCATION: i64 = i64::MIN;

static GATE: Gate = Gate::new();
/// The JVM (a `*mut JavaVM`), while the engine runs; 0 when it does not.
static VM: AtomicUsize = AtomicUsize::new(0);
static INTERVAL: AtomicU64 = AtomicU64::new(DEFAULT_INTERVAL);
static TRACK_LIVE: AtomicBool = AtomicBool::new(false);

fn table() -> &'static SiteTable {
    static TABLE: OnceLock<SiteTable> = OnceLock::new();
    TABLE.get_or_init(SiteTable::new)
}

/// The engine.
#[derive(Default)]
pub struct NativeMemEngine {
    run: Option<Run>,
}

struct Run {
    own: OwnEnv,
    vm: Vm,
    interval: u64,
    live: bool,
    timeline: bool,
    started: Instant,
    start_time_ns: u64,
}

impl Engine for NativeMemEngine {
    fn name(&self) -> &'static str {
        "nativemem"
    }

    /// None on the agent's environment: the engine's own resolves methods.
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }

    fn start(&mut self, context: &Context, options: &Options) -> Result<(), String> {
        let interval = options.nativemem.flatten().unwrap_or(DEFAULT_INTERVAL);
        let mut own = OwnEnv::new(context.vm, &["can_get_line_numbers"])?;
        // The walker names methods by their jmethodIDs, which exist only once asked for:
        // those of every loaded class now, and of each class the JVM prepares later.
        GATE.open();
        let callbacks = sys::jvmtiEventCallbacks {
            ClassPrepare: Some(on_class_prepare),
            ..Default::default()
        };
        if let Err(e) = own.enable(&callbacks, &[sys::JVMTI_EVENT_CLASS_PREPARE]) {
            own.retire(&GATE, "nativemem");
            return Err(e);
        }
        if let Err(e) = methods::prepare_loaded_classes(&own.env(), context.vm) {
            log!("nativemem: Java frames may be missing: {e}");
        }
        if let Ok(version) = own.env().version_number() {
            if let Err(why) = walk::walker(context.vm, version) {
                log!("nativemem: native frames only: {why}");
            }
        }
        table().clear();
        let timeline = options.keeps_timeline();
        if timeline {
            table().keep_timeline();
        }
        if options.threads {
            table().keep_threads();
        }
        table().set_live_limit(sites::MAX_LIVE);
        INTERVAL.store(interval, Ordering::SeqCst);
        TRACK_LIVE.store(options.live, Ordering::SeqCst);
        VM.store(context.vm.0 as usize, Ordering::SeqCst);
        let on_free: Option<malloc::OnFree> = options.live.then_some(on_free as malloc::OnFree);
        if let Err(e) = malloc::install(interval, on_allocation, on_free) {
            VM.store(0, Ordering::SeqCst);
            own.retire(&GATE, "nativemem");
            return Err(format!("nativemem: {e}"));
        }
        self.run = Some(Run {
            own,
            vm: context.vm,
            interval,
            live: options.live,
            timeline,
            started: Instant::now(),
            start_time_ns: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64),
        });
        Ok(())
    }

    fn dump(&self) -> Report {
        match &self.run {
            Some(run) => run.report(),
            None => Report::Text("nativemem: not running".into()),
        }
    }

    fn stop(&mut self, _context: &Context) -> Report {
        let Some(run) = self.run.take() else {
            return Report::Text("nativemem: not running".into());
        };
        malloc::uninstall();
        VM.store(0, Ordering::SeqCst);
        let report = run.report();
        run.own.retire(&GATE, "nativemem");
        table().clear();
        report
    }
}

impl Run {
    fn report(&self) -> Report {
        let metadata = Metadata {
            event: if self.live {
                "nativemem-live"
            } else {
                "nativemem"
            }
            .into(),
            engine: "nativemem".into(),
            interval: self.interval,
            weight_unit: "bytes".into(),
            duration_ns: self.started.elapsed().as_nanos() as u64,
            start_time_ns: self.start_time_ns,
            dropped: table().dropped.load(Ordering::Relaxed),
            ..Metadata::default()
        };
        let mut java = stack::resolver(self.own.env(), self.vm);
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
        let part = if self.live { Part::Live } else { Part::Total };
        Report::Profile(Box::new(sites::to_profile(
            &table().snapshot(),
            part,
            self.timeline,
            &table().virtual_threads(),
            metadata,
            resolve,
        )))
    }
}

/// A sampled allocation, on the allocating thread: its stacks, recorded at its site.
fn on_allocation(allocation: &Allocation) {
    let Some(_pass) = GATE.enter() else { return };
    let vm = VM.load(Ordering::Acquire);
    if vm == 0 {
        return;
    }
    let mut frames = [(0usize, 0i64); NATIVE_DEPTH + JAVA_DEPTH];
    let walker = walk::resolved();
    let code = walker.map_or(0..0, |w| w.code_range());
    let mut native = [0u64; NATIVE_DEPTH];
    let count = malloc::native_frames(allocation, &code, &mut native);
    for (frame, &pc) in frames.iter_mut().zip(&native[..count]) {
        *frame = (pc as usize, NATIVE_LOCATION);
    }
    let mut total = count;
    if let (Some(walker), Some(jni)) = (walker, current_jni(vm as *mut _)) {
        // SAFETY: `jni` is this thread's JNIEnv (the thread is attached), and the thread is
        // in native or VM code, where its last Java frame (if any) is recorded.
        if let Ok(java) = unsafe { walker.current(jni, &mut frames[total..]) } {
            total += java;
        }
    }
    let interval = INTERVAL.load(Ordering::Relaxed) as f64;
    let (count, weight) = super::alloc::estimate(allocation.size as f64, interval);
    let class = table().intern(allocation.function.name());
    let tag = if TRACK_LIVE.load(Ordering::Relaxed) && table().reserve_tag().is_some() {
        Some(allocation.address as i64)
    } else {
        None
    };
    // Inside the C allocator: the thread's virtual thread is not looked up.
    table().record(class, &frames[..total], count, weight, tag, || None);
}

/// ClassPrepare: create the new class's jmethodIDs, for the walker.
unsafe extern "C" fn on_class_prepare(
    jvmti: *mut sys::jvmtiEnv,
    _jni: *mut sys::JNIEnv,
    _thread: sys::jthread,
    class: sys::jclass,
) {
    crate::callback::guard_callback(|| {
        let Some(_pass) = GATE.enter() else { return };
        // SAFETY: the VM calls this with the engine's live environment.
        let env = unsafe { Env::from_raw(jvmti) };
        methods::prepare_class(&env, class);
    })
}

/// A freed block (`live`): no longer tracked.
fn on_free(address: usize) {
    // No gate: the table lives for the process, and a free is far too frequent for a shared
    // counter.
    if table().live_objects() > 0 {
        table().freed(address as i64);
    }
}
