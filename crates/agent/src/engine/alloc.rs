//! The allocation engine (`start,event=alloc`): JVMTI heap sampling (JEP 331).
//!
//! `SetHeapSamplingInterval(alloc=, default 512 KiB)` makes HotSpot pick, on each thread, an
//! allocation after a random number of bytes (exponentially distributed with that mean) and
//! send SampledObjectAlloc for it, on the allocating thread. The callback takes the stack
//! (jtap's walker, or `GetStackTrace`, into a buffer on its own stack, at most `jstackdepth=`
//! frames, default 64) and the class, and records the sample into the sharded [`SiteTable`];
//! the class is the stack's leaf frame. Class signatures are looked up once per class: the
//! class object is tagged with its interned id in the engine's environment, and each thread
//! remembers the id by the class's mirror and `Klass*` ([`classes`]), so a sample usually
//! makes no JVMTI call for its class, and recording a known site allocates nothing.
//!
//! Weights: a byte-driven Poisson sampler with mean interval `I` samples an object of `s`
//! bytes with probability `p = 1 - exp(-s/I)`, so each sample stands for `1/p` objects and
//! `s/p` bytes (the Horvitz–Thompson estimator; async-profiler and JFR scale the same way).
//! For small objects that is about `I` bytes per sample, for objects larger than `I` about
//! the object itself.
//!
//! `exact`: every allocation is recorded, the way heapTracker and HPROF's `heap=sites` did it,
//! and the counts are exact, not estimated. (Heap sampling at interval 0 is not enough:
//! HotSpot keeps each thread's distance to its next sample when the interval changes, so up
//! to several hundred KiB per thread would go unseen.) Every loaded class the tracer's policy
//! allows, and every class loaded later, is rewritten (the class-file engine, through
//! [`Tracing::install_for_allocations`]) to call `Probes.alloc(Object)` after each `new …
//! <init>`, `newarray`, `anewarray` and `multianewarray`; objects the VM allocates itself
//! (reflection, `clone`, `Array.newInstance`, …) arrive as VMObjectAlloc events. Both record
//! one object of its own size. Classes the policy never touches (`java.lang`, `jdk.internal`,
//! `sun.*`, … see `trace::select`) are not rewritten, so allocations made by their own code
//! are not seen; stopping restores every rewritten class. It costs a probe call and a stack
//! walk per allocation, and instrumenting takes about 0.5 s per thousand classes: for short
//! diagnostic runs. The sampling capability is not needed, so it works beside another agent
//! that holds it.
//!
//! `live`: each sampled object is also followed with a weak reference until a collection
//! clears it ([`live`]), and the profile then holds only objects still alive (pprof
//! `inuse_*`). `sites` (or a `file=` ending in `.txt`):
//! the result is a SITES report (live and allocated bytes and objects per site) instead of a
//! profile; it implies `live`.
//!
//! Everything runs in a JVMTI environment of the engine's own ([`OwnEnv`]): its capability
//! `can_generate_sampled_object_alloc_events` can be held by one environment only, so when
//! another agent (async-profiler, a second copy of jtap's agent) holds it, starting fails
//! with a message saying so. Stopping turns the events off, waits for callbacks in flight and
//! disposes of the environment, which drops all tags at once, then deletes the weak
//! references.

mod classes;

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use jtap_jvmti::{sys, Capabilities, Env};
use jtap_profile::Metadata;
use jtap_protocol::records::sites::{Amount, Holder, Leaks, Recording, RootPath};
use jtap_protocol::records::Record;
use jtap_protocol::{JavaStacks, Options};

use super::{Context, Engine, Report};
use crate::gate::Gate;
use crate::heap::env::OwnEnv;
use crate::heap::live::{self, Examined, Sweeper};
use crate::heap::sites::{self, ClassId, Part, SiteTable};
use crate::heap::stack;
use crate::heap::{reach, roots};
use crate::thread::Vm;
use crate::trace::ffi::Jni;
use crate::trace::instrument::Tracing;
use crate::trace::probes;

/// Default mean bytes between samples (HotSpot's own default).
pub const DEFAULT_INTERVAL: u64 = 512 * 1024;
/// Default deepest stack recorded.
pub const DEFAULT_DEPTH: usize = 64;
/// Sites a SITES report lists.
const SITES_SHOWN: usize = 100;
/// Leak suspects whose objects' paths from GC roots a leak report gives.
const SUSPECTS_WALKED: usize = 3;
/// Objects per suspect whose path it gives.
const PATHS_PER_SUSPECT: usize = 2;

static GATE: Gate = Gate::new();
/// How this engine's stacks were taken.
static STACKS: stack::Stats = stack::Stats::new();
static TRACK_LIVE: AtomicBool = AtomicBool::new(false);
static DEPTH: AtomicUsize = AtomicUsize::new(DEFAULT_DEPTH);
/// The mean interval, as f64 bits (read by callbacks); 0 when every allocation is recorded.
static INTERVAL_BITS: AtomicU64 = AtomicU64::new(0);
/// `live`: the thread sweeping collected objects out of the table, once the VM has started.
static SWEEPER: Mutex<Option<Sweeper>> = Mutex::new(None);
/// `live` from start-up: the VM, for VMInit to start the sweeper with.
static SWEEPER_VM: AtomicPtr<sys::JavaVM> = AtomicPtr::new(std::ptr::null_mut());
/// The engine's environment, for allocation probes (which get none from the VM); null when
/// not running.
static PROBE_ENV: AtomicPtr<sys::jvmtiEnv> = AtomicPtr::new(std::ptr::null_mut());

fn table() -> &'static SiteTable {
    static TABLE: OnceLock<SiteTable> = OnceLock::new();
    TABLE.get_or_init(SiteTable::new)
}

/// The engine.
#[derive(Default)]
pub struct AllocEngine {
    run: Option<Run>,
}

struct Run {
    own: OwnEnv,
    /// `exact`: the instrumentation calling the allocation probes.
    tracing: Option<Arc<Tracing>>,
    /// `exact`: loaded classes instrumented at start.
    classes: usize,
    exact: bool,
    vm: Vm,
    interval: u64,
    live: bool,
    /// Keep the event log.
    timeline: bool,
    sites: bool,
    /// `leaks`: the sites are ranked by the live objects that survived this many collections.
    leak_age: Option<u32>,
    depth: usize,
    started: Instant,
    start_time_ns: u64,
}

impl Engine for AllocEngine {
    fn name(&self) -> &'static str {
        "alloc"
    }

    /// None on the agent's environment: the engine holds its own (see the module doc).
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }

    fn start(&mut self, context: &Context, options: &Options) -> Result<(), String> {
        let interval = if options.exact {
            0
        } else {
            options.alloc.flatten().unwrap_or(DEFAULT_INTERVAL)
        };
        // A `.txt` file of an allocation recording alone holds the SITES report.
        let leak_age = options
            .leaks
            .map(|age| age.unwrap_or(jtap_protocol::DEFAULT_LEAK_AGE));
        let sites = options.sites
            || leak_age.is_some()
            || (options.events().len() == 1
                && options.file.as_deref().is_some_and(|f| f.ends_with(".txt")));
        let live = options.live || sites;
        let depth = options.jstackdepth.map_or(DEFAULT_DEPTH, |d| d as usize);
        let mut capabilities = vec![
            if options.exact {
                "can_generate_vm_object_alloc_events"
            } else {
                "can_generate_sampled_object_alloc_events"
            },
            "can_get_line_numbers",
            "can_tag_objects",
        ];
        if live {
            // Collections tell the sweeper when to look for collected objects.
            capabilities.push("can_generate_garbage_collection_events");
        }
        let mut own = OwnEnv::new(context.vm, &capabilities)?;
        let walker = options.walker.unwrap_or_default();
        stack::choose(context.vm, own.env(), walker, &STACKS);
        classes::start(
            context.vm,
            walker != JavaStacks::Jvmti,
            walker == JavaStacks::Check,
        );
        table().clear();
        let timeline = options.keeps_timeline();
        if timeline {
            table().keep_timeline();
        }
        if options.threads {
            table().keep_threads();
        }
        if let Some(age) = leak_age {
            table().rank_survivors(age);
        }
        table().set_live_limit(if options.exact {
            sites::MAX_LIVE_EXACT
        } else {
            sites::MAX_LIVE
        });
        TRACK_LIVE.store(live, Ordering::SeqCst);
        DEPTH.store(depth, Ordering::SeqCst);
        INTERVAL_BITS.store((interval as f64).to_bits(), Ordering::SeqCst);
        if !options.exact {
            own.env()
                .set_heap_sampling_interval(interval as i32)
                .map_err(|e| e.to_string())?;
        }
        // Same signature, same work: a VM-made object is one exact sample.
        let callbacks = sys::jvmtiEventCallbacks {
            SampledObjectAlloc: Some(on_sampled_alloc),
            VMObjectAlloc: Some(on_sampled_alloc),
            GarbageCollectionFinish: Some(on_collection_end),
            VMInit: Some(on_vm_init),
            ..Default::default()
        };
        let mut events = vec![if options.exact {
            sys::JVMTI_EVENT_VM_OBJECT_ALLOC
        } else {
            sys::JVMTI_EVENT_SAMPLED_OBJECT_ALLOC
        }];
        if live {
            events.push(sys::JVMTI_EVENT_GARBAGE_COLLECTION_FINISH);
        }
        // A thread can only attach once the VM has started: at start-up the sweeper waits.
        let live_phase = own.env().phase() == Ok(sys::JVMTI_PHASE_LIVE);
        if live && !live_phase {
            events.push(sys::JVMTI_EVENT_VM_INIT);
            SWEEPER_VM.store(context.vm.0, Ordering::SeqCst);
        }
        GATE.open();
        if let Err(e) = own.enable(&callbacks, &events) {
            own.disable();
            own.retire(&GATE, "alloc");
            return Err(e);
        }
        let (tracing, classes) = if options.exact {
            PROBE_ENV.store(own.env().raw(), Ordering::SeqCst);
            match instrument(context) {
                Ok((tracing, classes)) => (Some(tracing), classes),
                Err(e) => {
                    PROBE_ENV.store(std::ptr::null_mut(), Ordering::SeqCst);
                    own.disable();
                    own.retire(&GATE, "alloc");
                    return Err(e);
                }
            }
        } else {
            (None, 0)
        };
        if live && live_phase {
            if let Err(e) = start_sweeper(context.vm) {
                if let Some(tracing) = &tracing {
                    probes::deactivate();
                    tracing.restore();
                    tracing.uninstall();
                }
                PROBE_ENV.store(std::ptr::null_mut(), Ordering::SeqCst);
                own.disable();
                own.retire(&GATE, "alloc");
                return Err(e);
            }
        }
        let start_time_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        self.run = Some(Run {
            own,
            tracing,
            classes,
            exact: options.exact,
            vm: context.vm,
            interval,
            live,
            sites,
            leak_age,
            depth,
            timeline,
            started: Instant::now(),
            start_time_ns,
        });
        Ok(())
    }

    fn dump(&self) -> Report {
        match &self.run {
            Some(run) => run.report(),
            None => Report::Text("alloc: not running".into()),
        }
    }

    fn stop(&mut self, _context: &Context) -> Report {
        let Some(mut run) = self.run.take() else {
            return Report::Text("alloc: not running".into());
        };
        let restored = run.tracing.take().map(|tracing| {
            probes::deactivate();
            let restored = tracing.restore();
            tracing.uninstall();
            restored.summary()
        });
        run.own.disable();
        SWEEPER_VM.store(std::ptr::null_mut(), Ordering::SeqCst);
        if let Some(sweeper) = lock(&SWEEPER).take() {
            sweeper.stop();
        }
        let jni = Jni::current(run.vm);
        if let Some(jni) = jni.filter(|_| run.live) {
            live::sweep(jni, table());
        }
        let mut report = run.report();
        if let Report::Record(record) = &mut report {
            if let Record::Sites(sites) = record.as_mut() {
                sites.restored = restored;
                if run.leak_age.is_some() {
                    run.add_root_paths(sites);
                }
            }
        }
        PROBE_ENV.store(std::ptr::null_mut(), Ordering::SeqCst);
        run.own.retire(&GATE, "alloc");
        // After the callbacks in flight have left: none can track another object, nor start
        // a sweeper (a VMInit that came during the stop).
        if let Some(sweeper) = lock(&SWEEPER).take() {
            sweeper.stop();
        }
        if let Some(jni) = jni {
            live::untrack_all(jni, table());
        }
        // After the callbacks in flight have left.
        log!("alloc: {}; {}", stack::summary(&STACKS), classes::summary());
        table().clear();
        report
    }
}

impl Run {
    /// The paths from GC roots to the oldest objects of the first suspects of a leak report
    /// (a heap walk: the application pauses meanwhile).
    fn add_root_paths(&self, report: &mut jtap_protocol::records::Sites) {
        let Some(jni) = Jni::current(self.vm) else {
            return;
        };
        let snapshot = table().snapshot();
        let suspects = sites::leak_suspects(&snapshot);
        let chosen: Vec<Vec<Examined>> = suspects
            .iter()
            .take(SUSPECTS_WALKED)
            .map(|site| {
                let survivors = table().survivors(&site.key, PATHS_PER_SUSPECT);
                live::examine(self.own.env(), jni, &survivors)
            })
            .collect();
        let targets: Vec<i64> = chosen
            .iter()
            .flatten()
            .map(|e| e.survivor.object.id)
            .collect();
        let taken_ns = sites::now_ns();
        let started = Instant::now();
        let paths = roots::paths_to(self.own.env(), jni, &targets);
        log!("alloc: paths from GC roots in {:?}", started.elapsed());
        for (site, objects) in report.sites.iter_mut().zip(&chosen) {
            let found: Vec<(&Examined, &roots::RootPath)> = objects
                .iter()
                .filter_map(|object| Some((object, paths.get(&object.survivor.object.id)?)))
                .collect();
            site.paths = found
                .iter()
                .map(|(object, path)| {
                    let allocated_ns = object.survivor.allocated_ns;
                    RootPath {
                        steps: path.steps.clone(),
                        allocated_ns,
                        age_ns: taken_ns.saturating_sub(allocated_ns),
                        bytes: object.bytes,
                        array_length: object.array_length,
                    }
                })
                .collect();
            let tags: Vec<Vec<i64>> = found.iter().map(|(_, p)| p.objects.clone()).collect();
            site.holder = self.holder(jni, &tags, &site.paths);
        }
        log!("alloc: paths and holders in {:?}", started.elapsed());
    }

    /// The object a suspect's paths (`tags`, described as `paths`) meet in, and what it
    /// reaches (another pause, bounded by [`reach::MOST_COUNTED`]).
    fn holder(&self, jni: Jni, tags: &[Vec<i64>], paths: &[RootPath]) -> Option<Holder> {
        let (at, tag) = reach::holder(tags)?;
        let reached = reach::reachable_from(self.own.env(), jni, tag)?;
        Some(Holder {
            step: paths.first()?.steps.get(at)?.clone(),
            reaches: Amount {
                bytes: reached.bytes as f64,
                objects: reached.objects as f64,
            },
            capped: reached.capped,
        })
    }

    fn report(&self) -> Report {
        let sites = table().snapshot();
        let resolve = stack::resolver(self.own.env(), self.vm);
        let dropped = table().dropped.load(Ordering::Relaxed);
        if self.sites {
            let seconds = self.started.elapsed().as_secs_f64();
            let recorded = if self.exact {
                Recording::Exact {
                    seconds,
                    classes: self.classes as u64,
                }
            } else {
                Recording::Sampled {
                    seconds,
                    interval: self.interval,
                }
            };
            let leaks = self.leak_age.map(|min_age| Leaks {
                min_age,
                collections: table().collections(),
            });
            let shown = (SITES_SHOWN, self.depth);
            let mut report = sites::sites_report(&sites, recorded, leaks, shown, resolve);
            report.tracked_objects = table().live_objects() as u64;
            report.untracked_objects = table().untracked.load(Ordering::Relaxed);
            report.dropped_samples = dropped;
            return Report::Record(Box::new(Record::Sites(report)));
        }
        let metadata = Metadata {
            event: if self.live { "live" } else { "alloc" }.into(),
            engine: "alloc".into(),
            interval: self.interval,
            weight_unit: "bytes".into(),
            duration_ns: self.started.elapsed().as_nanos() as u64,
            start_time_ns: self.start_time_ns,
            dropped,
            ..Metadata::default()
        };
        let part = if self.live { Part::Live } else { Part::Total };
        Report::Profile(Box::new(sites::to_profile(
            &sites,
            part,
            self.timeline,
            &table().virtual_threads(),
            metadata,
            resolve,
        )))
    }
}

/// How many objects and bytes one sample of a `size`-byte object stands for, with mean
/// sampling interval `interval` bytes (see the module doc); with interval 0 (`exact`), one
/// object of `size` bytes.
pub fn estimate(size: f64, interval: f64) -> (f64, f64) {
    if size <= 0.0 || interval <= 0.0 {
        return (1.0, size.max(0.0));
    }
    let p = -(-size / interval).exp_m1();
    (1.0 / p, size / p)
}

/// `exact`: rewrites every class the policy allows to call the allocation probe; returns the
/// instrumentation and how many loaded classes it rewrote.
fn instrument(context: &Context) -> Result<(Arc<Tracing>, usize), String> {
    let tracing = Tracing::install_for_allocations(context.vm)?;
    probes::activate(&probes::Settings {
        mode: probes::Mode::Allocations,
        capture: 0,
        threshold_ns: 0,
        count: None,
        env: context.env,
        on_allocation: Some(record_allocated),
        labelled: false,
    });
    let started = Instant::now();
    match tracing.instrument_loaded() {
        Ok(classes) => {
            log!(
                "alloc: {classes} loaded classes instrumented in {:?}; {}",
                started.elapsed(),
                tracing.take_notes().len()
            );
            Ok((tracing, classes))
        }
        Err(e) => {
            probes::deactivate();
            tracing.restore();
            tracing.uninstall();
            Err(e)
        }
    }
}

/// SampledObjectAlloc (and, `exact`, VMObjectAlloc): on the allocating thread, right after
/// the allocation.
unsafe extern "C" fn on_sampled_alloc(
    jvmti: *mut sys::jvmtiEnv,
    jni: *mut sys::JNIEnv,
    _thread: sys::jthread,
    object: sys::jobject,
    class: sys::jclass,
    size: sys::jlong,
) {
    crate::callback::guard_callback(|| {
        let Some(_pass) = GATE.enter() else { return };
        // jtap's own threads' allocations are not the program's.
        if crate::thread::is_own_thread() {
            return;
        }
        // SAFETY: the VM calls this with the engine's live environment.
        let env = unsafe { Env::from_raw(jvmti) };
        if let Some(class) = class_id(&env, class) {
            record(&env, jni, class, object, size, 0);
        }
    })
}

/// `exact`: the allocation probe's work (see [`probes::alloc`]), on the allocating thread.
pub fn record_allocated(jni: Jni, object: sys::jobject) {
    if object.is_null() {
        return;
    }
    let Some(_pass) = GATE.enter() else { return };
    let raw = PROBE_ENV.load(Ordering::Acquire);
    if raw.is_null() {
        return;
    }
    // SAFETY: set while the engine runs; the gate pass keeps it from being disposed of.
    let env = unsafe { Env::from_raw(raw) };
    let class = jni.object_class(object);
    if class.is_null() {
        return;
    }
    let id = class_id(&env, class);
    jni.delete_local(class);
    // SAFETY: `object` is the probe's live local reference.
    let size = unsafe { env.object_size(object) }.unwrap_or(0);
    if let Some(id) = id {
        // The top frame is the probe itself.
        record(&env, jni.as_raw(), id, object, size, 1);
    }
}

/// Records one allocation of `object` (`size` bytes, class `class`) at the calling thread's
/// stack without its `skip` top frames; `jni` is the thread's JNIEnv, in a callback or native
/// method.
fn record(
    env: &Env,
    jni: *mut sys::JNIEnv,
    class: ClassId,
    object: sys::jobject,
    size: i64,
    skip: usize,
) {
    let (count, weight) = estimate(
        size as f64,
        f64::from_bits(INTERVAL_BITS.load(Ordering::Relaxed)),
    );
    let depth = DEPTH.load(Ordering::Relaxed) + skip;
    stack::with_current(env, jni, depth, &STACKS, |frames| {
        let tracked = match TRACK_LIVE.load(Ordering::Relaxed) {
            // SAFETY: `jni` is this thread's, inside its allocation callback or probe.
            true => live::track(unsafe { Jni::from_raw(jni) }, table(), object),
            false => None,
        };
        let frames = frames.get(skip..).unwrap_or(&[]);
        // SAFETY: `jni` is this thread's, inside its allocation callback.
        let mounted = || unsafe { table().current_virtual_thread(env, jni) };
        table().record(class, frames, count, weight, tracked, mounted);
    })
}

/// The interned id of `class`: remembered by the thread (see [`classes`]), or else
/// [`class_id_by_tag`].
fn class_id(env: &Env, class: sys::jclass) -> Option<ClassId> {
    classes::class_of(class, || class_id_by_tag(env, class))
}

/// The interned id of `class` through JVMTI. The first sample of a class looks up its signature and tags
/// the class object with `-(id + 1)` in the engine's environment; later samples only read the
/// tag. (Object tags are positive, so they never clash; a class object that is itself a
/// tracked sampled object keeps its tag and is looked up by signature each time.)
fn class_id_by_tag(env: &Env, class: sys::jclass) -> Option<ClassId> {
    // SAFETY: `class` is the callback's valid local reference to the class (so below too).
    let tag = unsafe { env.tag(class) }.unwrap_or(0);
    if tag < 0 {
        return ClassId::try_from(-(tag + 1)).ok();
    }
    // SAFETY: as above.
    let signature = unsafe { env.class_signature(class) }.ok()?;
    let id = table().intern(&signature);
    if tag == 0 {
        // A failure only means the next sample looks the signature up again.
        // SAFETY: as above.
        let _ = unsafe { env.set_tag(class, -(i64::from(id) + 1)) };
    }
    Some(id)
}

/// Starts the sweeper (see [`live`]).
fn start_sweeper(vm: Vm) -> Result<(), String> {
    let sweeper = Sweeper::start(vm, table())?;
    *lock(&SWEEPER) = Some(sweeper);
    Ok(())
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// VMInit (`live` from start-up): threads can attach now.
unsafe extern "C" fn on_vm_init(
    _jvmti: *mut sys::jvmtiEnv,
    _jni: *mut sys::JNIEnv,
    _thread: sys::jthread,
) {
    crate::callback::guard_callback(|| {
        let Some(_pass) = GATE.enter() else { return };
        let vm = SWEEPER_VM.swap(std::ptr::null_mut(), Ordering::SeqCst);
        if vm.is_null() {
            return;
        }
        if let Err(e) = start_sweeper(Vm(vm)) {
            log!("alloc: {e}; live objects are swept at the stop only");
        }
    })
}

/// GarbageCollectionFinish (`live`): in the collector's pause, where no JVMTI or JNI call is
/// allowed; it only counts the collection.
unsafe extern "C" fn on_collection_end(_jvmti: *mut sys::jvmtiEnv) {
    crate::callback::guard_callback(|| {
        if let Some(_pass) = GATE.enter() {
            table().collection_ended();
        }
    })
}

#[cfg(test)]
mod tests {
    use super::estimate;

    #[test]
    fn small_objects_stand_for_about_one_interval_large_ones_for_themselves() {
        let (objects, bytes) = estimate(16.0, 524_288.0);
        assert!((bytes - 524_288.0).abs() / 524_288.0 < 0.001, "{bytes}");
        assert!((objects - 32_768.0).abs() / 32_768.0 < 0.001, "{objects}");
        let (objects, bytes) = estimate(64.0 * 1024.0 * 1024.0, 524_288.0);
        assert!((objects - 1.0).abs() < 1e-9 && (bytes - 64.0 * 1024.0 * 1024.0).abs() < 1.0);
        let (objects, bytes) = estimate(524_288.0, 524_288.0);
        let p = 1.0 - (-1.0f64).exp();
        assert!((objects - 1.0 / p).abs() < 1e-9 && (bytes - 524_288.0 / p).abs() < 1e-6);
    }
}
