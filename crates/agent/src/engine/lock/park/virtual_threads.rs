//! Virtual threads (JDK 21+) waiting for a `java.util.concurrent` lock. A virtual thread
//! parks by unmounting from its carrier, without `Unsafe.park` (the hook of the parent module
//! sees it only while pinned). HotSpot's JVMTI extension events bracket that wait:
//! `com.sun.hotspot.events.VirtualThreadUnmount`, posted on the virtual thread before it
//! leaves its carrier, and `VirtualThreadMount`, posted on it once it runs again (both need
//! `can_support_virtual_threads`). At an unmount whose park blocker is a lock the time is
//! noted by thread id; at the next mount of that thread the wait is measured and, if at least
//! the threshold, recorded with the virtual thread's stack and the blocker's class (the
//! blocker is cleared only after the park returns), as for a platform thread.
//!
//! Cost while the engine runs: every mount and unmount of a virtual thread calls into the VM
//! to post the event; an unmount reads the park blocker (JNI), a mount looks up the thread
//! only while some thread waits.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use jtap_jvmti::{sys, Capabilities, Env};

use super::{
    clear_exception, delete_local, exception_pending, lock_blocker, thread_blocker_lock_class,
    Handles, ENV, HANDLES, RUN, THRESHOLD_TICKS,
};
use crate::trace::clock;

const MOUNT: &str = "com.sun.hotspot.events.VirtualThreadMount";
const UNMOUNT: &str = "com.sun.hotspot.events.VirtualThreadUnmount";

/// When each virtual thread waiting for a lock unmounted ([`clock::ticks`]), by thread id.
static WAITING: Mutex<Option<HashMap<i64, u64>>> = Mutex::new(None);
/// Entries in [`WAITING`]: a mount looks only when some thread waits.
static WAITERS: AtomicUsize = AtomicUsize::new(0);

fn waiting() -> MutexGuard<'static, Option<HashMap<i64, u64>>> {
    WAITING.lock().unwrap_or_else(|e| e.into_inner())
}

/// Starts timing virtual threads' lock waits in the lock engine's environment `env`, once
/// the parent module tracks parks. Fails where the VM has no virtual threads (before JDK 21)
/// or refuses the capability.
pub fn start(env: &Env) -> Result<(), String> {
    let report = env
        .add_capabilities(&Capabilities::of(&["can_support_virtual_threads"]))
        .map_err(|e| e.to_string())?;
    if !report.refused.is_empty() {
        return Err("the JVM refused can_support_virtual_threads".into());
    }
    let index = |id: &str| match env.extension_event(id) {
        Ok(Some((index, 2))) => Ok(index),
        Ok(_) => Err(format!("the JVM has no extension event {id}")),
        Err(e) => Err(e.to_string()),
    };
    let (mount, unmount) = (index(MOUNT)?, index(UNMOUNT)?);
    *waiting() = Some(HashMap::new());
    WAITERS.store(0, Ordering::SeqCst);
    type Callback = unsafe extern "C" fn(*mut sys::jvmtiEnv, *mut sys::JNIEnv, sys::jthread);
    // SAFETY: both events pass (jvmtiEnv*, JNIEnv*, jthread), the callbacks' parameters; a
    // C function taking fixed arguments may be called through the variadic type on this ABI.
    let set = |index, callback: Callback| unsafe {
        env.set_extension_event_callback(
            index,
            Some(std::mem::transmute::<
                Callback,
                unsafe extern "C" fn(*mut sys::jvmtiEnv, ...),
            >(callback)),
        )
    };
    // SetExtensionEventCallback alone does not enable HotSpot's virtual thread events.
    let enable = |index: sys::jint| env.set_event_enabled(index as sys::jvmtiEvent, true);
    let started = set(unmount, on_unmount)
        .and_then(|()| set(mount, on_mount))
        .and_then(|()| enable(unmount))
        .and_then(|()| enable(mount));
    if let Err(e) = started {
        stop(env);
        return Err(e.to_string());
    }
    Ok(())
}

/// Stops posting the events to `env` and forgets the waits in progress.
pub fn stop(env: &Env) {
    for id in [UNMOUNT, MOUNT] {
        if let Ok(Some((index, _))) = env.extension_event(id) {
            let disabled = env.set_event_enabled(index as sys::jvmtiEvent, false);
            // SAFETY: clearing a callback.
            let cleared = unsafe { env.set_extension_event_callback(index, None) };
            if let Err(e) = disabled.and(cleared) {
                log!("lock engine: {id} not turned off: {e}");
            }
        }
    }
    *waiting() = None;
    WAITERS.store(0, Ordering::SeqCst);
}

/// `VirtualThreadUnmount`: on the virtual thread, about to leave its carrier.
unsafe extern "C" fn on_unmount(
    _jvmti: *mut sys::jvmtiEnv,
    jni: *mut sys::JNIEnv,
    thread: sys::jthread,
) {
    crate::callback::guard_callback(|| {
        let Some(_pass) = super::super::GATE.enter() else {
            return;
        };
        let Some(handles) = recording(jni) else {
            return;
        };
        let Some(blocker) = lock_blocker(jni, handles, thread) else {
            return;
        };
        delete_local(jni, blocker);
        let id = thread_id(jni, handles, thread);
        if let Some(waiting) = waiting().as_mut() {
            if waiting.insert(id, clock::ticks()).is_none() {
                WAITERS.fetch_add(1, Ordering::Relaxed);
            }
        }
    })
}

/// `VirtualThreadMount`: on the virtual thread, running again.
unsafe extern "C" fn on_mount(
    jvmti: *mut sys::jvmtiEnv,
    jni: *mut sys::JNIEnv,
    thread: sys::jthread,
) {
    crate::callback::guard_callback(|| {
        if WAITERS.load(Ordering::Relaxed) == 0 {
            return;
        }
        let Some(_pass) = super::super::GATE.enter() else {
            return;
        };
        let Some(handles) = recording(jni) else {
            return;
        };
        let id = thread_id(jni, handles, thread);
        let Some(started) = waiting().as_mut().and_then(|waiting| waiting.remove(&id)) else {
            return;
        };
        WAITERS.fetch_sub(1, Ordering::Relaxed);
        let waited = clock::ticks().saturating_sub(started);
        if waited < THRESHOLD_TICKS.load(Ordering::Relaxed) {
            return;
        }
        // SAFETY: the VM calls this with the engine's live environment.
        let env = unsafe { Env::from_raw(jvmti) };
        if let Some(class) = thread_blocker_lock_class(&env, jni, handles, thread) {
            super::super::record_wait(&env, jni, &class, clock::clock().ns(waited));
        }
        clear_exception(jni);
    })
}

/// The handles, while a run records and no exception is pending on this thread.
fn recording(jni: *mut sys::JNIEnv) -> Option<&'static Handles> {
    if RUN.load(Ordering::Acquire) == 0
        || ENV.load(Ordering::Acquire).is_null()
        || exception_pending(jni)
    {
        return None;
    }
    HANDLES.get()?.as_ref().ok()
}

/// `thread.tid`.
fn thread_id(jni: *mut sys::JNIEnv, handles: &Handles, thread: sys::jthread) -> i64 {
    // SAFETY: valid env; `thread` is a live java.lang.Thread and the field ID Thread's.
    unsafe { jni!(jni, GetLongField(thread, handles.thread_id)) }.unwrap_or(0)
}
