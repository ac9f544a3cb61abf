//! Following sampled Java objects until the GC collects them: each gets a JNI weak global
//! reference, and a sweeper thread tests them after each collection, taking the collected
//! ones out of the [`SiteTable`].
//!
//! Why not JVMTI's ObjectFree: on HotSpot 17.0.5+, 21 and 25 any call that flushes pending
//! ObjectFree events (turning the event off, disposing of the environment, a heap walk,
//! `GetObjectsWithTags`) waits, without letting a safepoint begin, for the Service Thread
//! to finish posting them, while the Service Thread stops for a safepoint a collection
//! asked for after its last callback: the JVM hangs. Seen with `jtap sites --leaks` on a
//! program that collects several times a second. Weak references have no such wait: a
//! sweep's JNI calls each let a safepoint through.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use jtap_jvmti::{sys, Env};

use super::sites::{SiteTable, Survivor, Tracked};
use crate::thread::Vm;
use crate::trace::ffi::Jni;

/// How often the sweeper looks for a collection that ended.
const SWEEP_PERIOD: Duration = Duration::from_millis(100);

/// Starts following `object` (a live local reference) as `table`'s next id; None when the
/// table is full or the VM has no memory for the reference.
pub fn track(jni: Jni, table: &SiteTable, object: sys::jobject) -> Option<Tracked> {
    let id = table.reserve_id()?;
    match jni.new_weak(object) {
        Some(weak) => Some(Tracked {
            id,
            weak: weak as usize,
        }),
        None => {
            table.release_id();
            None
        }
    }
}

/// Takes the collected objects out of `table` and deletes their references.
pub fn sweep(jni: Jni, table: &SiteTable) {
    for weak in table.sweep(|weak| jni.is_cleared(weak as sys::jweak)) {
        jni.delete_weak_ref(weak as sys::jweak);
    }
}

/// Stops following every object of `table`, deleting their references.
pub fn untrack_all(jni: Jni, table: &SiteTable) {
    for weak in table.untrack_all() {
        jni.delete_weak_ref(weak as sys::jweak);
    }
}

/// One of the survivors [`examine`] found alive.
pub struct Examined {
    pub survivor: Survivor,
    /// Its size in bytes.
    pub bytes: u64,
    /// Its length, for an array.
    pub array_length: Option<u32>,
}

/// The objects of `survivors` still alive, each tagged with its id in `env` (for a heap walk
/// to find them), with its size and, for an array, its length.
pub fn examine(env: &Env, jni: Jni, survivors: &[Survivor]) -> Vec<Examined> {
    let mut alive = Vec::with_capacity(survivors.len());
    for &survivor in survivors {
        let object = jni.local_of(survivor.object.weak as sys::jweak);
        if object.is_null() {
            continue;
        }
        // SAFETY: `object` is a live local reference of this thread.
        let tagged = unsafe { env.set_tag(object, survivor.object.id) }.is_ok();
        // SAFETY: as above.
        let bytes = unsafe { env.object_size(object) }.unwrap_or(0).max(0) as u64;
        let class = jni.object_class(object);
        let is_array = !class.is_null()
            && jni
                .class_signature(env, class)
                .is_some_and(|s| s.starts_with('['));
        jni.delete_local(class);
        let array_length = is_array.then(|| jni.array_length(object) as u32);
        jni.delete_local(object);
        if tagged {
            alive.push(Examined {
                survivor,
                bytes,
                array_length,
            });
        }
    }
    alive
}

/// The thread that sweeps `table` whenever a collection ended since its last sweep.
pub struct Sweeper {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

impl Sweeper {
    /// Starts the `jtap-sweep` thread.
    pub fn start(vm: Vm, table: &'static SiteTable) -> Result<Sweeper, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = crate::thread::spawn_attached(vm, "jtap-sweep".into(), move || {
            let Some(jni) = Jni::current(vm) else { return };
            let mut swept_after = table.collections();
            while !stopping.load(Ordering::SeqCst) {
                std::thread::sleep(SWEEP_PERIOD);
                let collections = table.collections();
                if collections != swept_after {
                    swept_after = collections;
                    sweep(jni, table);
                }
            }
        })
        .map_err(|e| format!("cannot start the jtap-sweep thread: {e}"))?;
        Ok(Sweeper { stop, thread })
    }

    /// Stops the thread and waits for it.
    pub fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.thread.join();
    }
}
