//! The allocation engine (`start,event=alloc`): JVMTI heap sampling (JEP 331).
//!
//! `SetHeapSamplingInterval(alloc=, default 512 KiB)` makes HotSpot pick, on each thread, an
//! allocation after a random number of bytes (exponentially distributed with that mean) and
//! send SampledObjectAlloc for it, on the allocating thread. The callback takes the stack
//! (`GetStackTrace` into a buffer on its own stack, at most `jstackdepth=` frames, default 64)
//! and the class, and records the sample into the sharded [`SiteTable`]; the class is the
//! stack's leaf frame. Class signatures are looked up once per class: the class object is
//! tagged with its interned id in the engine's environment, so a sample costs one `GetTag`
//! instead of a `GetClassSignature`, and recording a known site allocates nothing.
//!
//! Weights: a byte-driven Poisson sampler with mean interval `I` samples an object of `s`
//! bytes with probability `p = 1 - exp(-s/I)`, so each sample stands for `1/p` objects and
//! `s/p` bytes (the Horvitz–Thompson estimator; async-profiler and JFR scale the same way).
//! For small objects that is about `I` bytes per sample, for objects larger than `I` about
//! the object itself.
//!
//! `live`: each sampled object is also tagged, ObjectFree removes it, and the profile then
//! holds only objects still alive (pprof `inuse_*`). `sites` (or a `file=` ending in `.txt`):
//! the result is a SITES report (live and allocated bytes and objects per site) instead of a
//! profile; it implies `live`.
//!
//! Everything runs in a JVMTI environment of the engine's own ([`OwnEnv`]): its capability
//! `can_generate_sampled_object_alloc_events` can be held by one environment only, so when
//! another agent (async-profiler, a second copy of jtap's agent) holds it, starting fails
//! with a message saying so. Stopping turns the events off, waits for callbacks in flight and
//! disposes of the environment, which drops all tags at once.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use jtap_jvmti::{sys, Capabilities, Env};
use jtap_profile::Metadata;
use jtap_protocol::Options;

use super::{Context, Engine, Report};
use crate::gate::Gate;
use crate::heap::env::OwnEnv;
use crate::heap::sites::{self, ClassId, Part, SiteTable};
use crate::heap::stack;
use crate::thread::Vm;

/// Default mean bytes between samples (HotSpot's own default).
pub const DEFAULT_INTERVAL: u64 = 512 * 1024;
/// Default deepest stack recorded.
pub const DEFAULT_DEPTH: usize = 64;
/// Sites a SITES report lists.
const SITES_SHOWN: usize = 100;

static GATE: Gate = Gate::new();
static TRACK_LIVE: AtomicBool = AtomicBool::new(false);
static DEPTH: AtomicUsize = AtomicUsize::new(DEFAULT_DEPTH);
/// The mean interval, as f64 bits (read by callbacks).
static INTERVAL_BITS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

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
    vm: Vm,
    interval: u64,
    live: bool,
    sites: bool,
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
        if options.interval.is_some() {
            return Err("interval= does not apply to event=alloc (use alloc=<bytes>)".into());
        }
        if options.lock.is_some() {
            return Err("lock= only applies to event=lock".into());
        }
        let interval = options.alloc.unwrap_or(DEFAULT_INTERVAL);
        let sites = options.sites || options.file.as_deref().is_some_and(|f| f.ends_with(".txt"));
        let live = options.live || sites;
        let depth = options.jstackdepth.map_or(DEFAULT_DEPTH, |d| d as usize);
        let mut capabilities = vec![
            "can_generate_sampled_object_alloc_events",
            "can_get_line_numbers",
            "can_tag_objects",
        ];
        if live {
            capabilities.push("can_generate_object_free_events");
        }
        let mut own = OwnEnv::new(context.vm, &capabilities)?;
        table().clear();
        TRACK_LIVE.store(live, Ordering::SeqCst);
        DEPTH.store(depth, Ordering::SeqCst);
        INTERVAL_BITS.store((interval as f64).to_bits(), Ordering::SeqCst);
        own.env()
            .set_heap_sampling_interval(interval as i32)
            .map_err(|e| e.to_string())?;
        let callbacks = sys::jvmtiEventCallbacks {
            SampledObjectAlloc: Some(on_sampled_alloc),
            ObjectFree: Some(on_object_free),
            ..Default::default()
        };
        let mut events = vec![sys::JVMTI_EVENT_SAMPLED_OBJECT_ALLOC];
        if live {
            events.push(sys::JVMTI_EVENT_OBJECT_FREE);
        }
        GATE.open();
        if let Err(e) = own.enable(&callbacks, &events) {
            own.disable();
            own.retire(&GATE, "alloc");
            return Err(e);
        }
        let start_time_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        self.run = Some(Run {
            own,
            vm: context.vm,
            interval,
            live,
            sites,
            depth,
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
        run.own.disable();
        let report = run.report();
        run.own.retire(&GATE, "alloc");
        table().clear();
        report
    }
}

impl Run {
    fn report(&self) -> Report {
        let sites = table().snapshot();
        let resolve = stack::resolver(self.own.env(), self.vm);
        let dropped = table().dropped.load(Ordering::Relaxed);
        if self.sites {
            let heading = format!(
                "(allocation sampling every {} bytes for {:.1} s; estimated; {} sampled objects tracked, {} untracked, {} samples dropped)",
                self.interval,
                self.started.elapsed().as_secs_f64(),
                table().live_objects(),
                table().untracked.load(Ordering::Relaxed),
                dropped
            );
            return Report::Text(sites::sites_report(
                &sites,
                &heading,
                SITES_SHOWN,
                self.depth,
                resolve,
            ));
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
        Report::Profile(sites::to_profile(&sites, part, metadata, resolve))
    }
}

/// How many objects and bytes one sample of a `size`-byte object stands for, with mean
/// sampling interval `interval` bytes (see the module doc).
pub fn estimate(size: f64, interval: f64) -> (f64, f64) {
    if size <= 0.0 || interval <= 0.0 {
        return (1.0, size.max(0.0));
    }
    let p = -(-size / interval).exp_m1();
    (1.0 / p, size / p)
}

/// SampledObjectAlloc: on the allocating thread, right after the allocation.
unsafe extern "C" fn on_sampled_alloc(
    jvmti: *mut sys::jvmtiEnv,
    _jni: *mut sys::JNIEnv,
    _thread: sys::jthread,
    object: sys::jobject,
    class: sys::jclass,
    size: sys::jlong,
) {
    crate::entry::guard_callback(|| {
        let Some(_pass) = GATE.enter() else { return };
        // SAFETY: the VM calls this with the engine's live environment.
        let env = unsafe { Env::from_raw(jvmti) };
        let Some(class) = class_id(&env, class) else {
            return;
        };
        let (count, weight) = estimate(
            size as f64,
            f64::from_bits(INTERVAL_BITS.load(Ordering::Relaxed)),
        );
        stack::with_current(&env, DEPTH.load(Ordering::Relaxed), |frames| {
            let tag = if TRACK_LIVE.load(Ordering::Relaxed) {
                tag_object(&env, object)
            } else {
                None
            };
            table().record(class, frames, count, weight, tag);
        })
    })
}

/// The interned id of `class`. The first sample of a class looks up its signature and tags
/// the class object with `-(id + 1)` in the engine's environment; later samples only read the
/// tag. (Object tags are positive, so they never clash; a class object that is itself a
/// tracked sampled object keeps its tag and is looked up by signature each time.)
fn class_id(env: &Env, class: sys::jclass) -> Option<ClassId> {
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

fn tag_object(env: &Env, object: sys::jobject) -> Option<i64> {
    let tag = table().reserve_tag()?;
    // SAFETY: `object` is the callback's valid local reference to the new object.
    match unsafe { env.set_tag(object, tag) } {
        Ok(()) => Some(tag),
        Err(_) => {
            table().release_tag();
            None
        }
    }
}

/// ObjectFree: a tagged object was collected (during the GC on JDK 11–16, later on a
/// service thread on 17+); only raw-monitor-level work is allowed, and this does none.
unsafe extern "C" fn on_object_free(_jvmti: *mut sys::jvmtiEnv, tag: sys::jlong) {
    crate::entry::guard_callback(|| {
        if let Some(_pass) = GATE.enter() {
            table().freed(tag);
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
