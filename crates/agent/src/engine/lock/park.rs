//! `java.util.concurrent` locks for the lock engine. A thread blocked on a `ReentrantLock`,
//! `ReentrantReadWriteLock`, `Semaphore`, `StampedLock`, … parks in `LockSupport.park*` →
//! `jdk.internal.misc.Unsafe.park(boolean, long)`, a native method that raises no JVMTI event.
//! While the engine runs, `Unsafe.park` is bound (JNI `RegisterNatives`) to [`park_hook`],
//! which times a call of HotSpot's own implementation (`Unsafe_Park`, a local symbol of
//! `libjvm.so`, see [`crate::libjvm`]). A wait of at least the threshold is recorded when the
//! park blocker (`Thread.parkBlocker`, which `LockSupport` clears only after `Unsafe.park`
//! returns) is a lock: an `AbstractOwnableSynchronizer` — every `AbstractQueuedSynchronizer`
//! or `AbstractQueuedLongSynchronizer` subclass: `ReentrantLock`, `ReentrantReadWriteLock`,
//! `Semaphore`, `ThreadPoolExecutor$Worker`, an application's own AQS lock — except
//! `CountDownLatch`'s, or a `StampedLock`. Waits for a `Condition` (blocker `ConditionObject`:
//! `Condition.await`, idle pool workers in `LinkedBlockingQueue.take`, `ArrayBlockingQueue`,
//! `CyclicBarrier.await`), for a `CountDownLatch`, a `FutureTask`, a `CompletableFuture`, in
//! `ForkJoinPool` and parks without a blocker are waits for work or for an event, not
//! contention, and are not recorded (async-profiler similarly keeps only `ReentrantLock`,
//! `ReentrantReadWriteLock` and `Semaphore`).
//!
//! Binding: HotSpot (JDK 15+) prints "Re-registering of platform native method" on the JVM's
//! stdout when a `java.base` native is rebound by code that is not itself in the boot loader
//! (JDK-8238460); the agent's own threads have no Java frames at all. So `RegisterNatives` is
//! called from `jtap/runtime/ParkBinding`, a class defined here in the boot loader whose static
//! `bind(long)` calls its native `bind0(long)`, bound to [`bind0`]. At stop `Unsafe.park` is
//! bound back to `Unsafe_Park`. Threads still parked inside the hook then return through it
//! later: the agent library is never unloaded, and the hook records only for the run it was
//! entered in ([`RUN`]).
//!
//! Cost while bound: an atomic load and two reads of the time-stamp counter per park (the
//! tracing probes' clock, [`clock::ticks`]: ~25 ns a read here against ~50 ns for
//! `clock_gettime`), next to a park that blocks for microseconds; JNI and JVMTI calls only for
//! waits of at least the threshold. Virtual threads (JDK 21+) park by unmounting from their
//! carrier, without `Unsafe.park` except while pinned to it: [`virtual_threads`] times those
//! waits from JVMTI's mount and unmount events. This is the FFI module of the lock engine's
//! `j.u.c.` part: every `unsafe` block of it lives here.

use std::ffi::{c_char, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use jtap_classfile::class_file::{Attribute, Member, ACC_STATIC};
use jtap_classfile::ClassFile;
use jtap_jvmti::{sys, Env};

use crate::thread::{current_jni, Vm};
use crate::trace::clock;

mod virtual_threads;

pub use virtual_threads::{start as start_virtual, stop as stop_virtual};

/// HotSpot's `Unsafe_Park(JNIEnv*, jobject unsafe, jboolean isAbsolute, jlong time)`.
type Park = unsafe extern "C" fn(*mut sys::JNIEnv, sys::jobject, sys::jboolean, sys::jlong);

/// Internal name of the binding class.
const BINDER: &CStr = c"jtap/runtime/ParkBinding";

/// The address of `Unsafe_Park` once found (0 before).
static ORIGINAL: AtomicUsize = AtomicUsize::new(0);
/// The run the hook records for; 0 when the engine is not tracking parks.
static RUN: AtomicU64 = AtomicU64::new(0);
/// The last run number handed out.
static LAST_RUN: AtomicU64 = AtomicU64::new(0);
/// The lock engine's JVMTI environment while a run tracks parks (null otherwise).
static ENV: AtomicPtr<sys::jvmtiEnv> = AtomicPtr::new(ptr::null_mut());
/// The shortest wait recorded, in [`clock::ticks`].
static THRESHOLD_TICKS: AtomicU64 = AtomicU64::new(0);

/// Classes, a method and a field looked up once per process: global references and IDs,
/// valid on every thread for the life of the JVM (boot classes are never unloaded).
struct Handles {
    unsafe_class: sys::jclass,
    binder: sys::jclass,
    bind: sys::jmethodID,
    park_blocker: sys::jfieldID,
    /// `Thread.tid`.
    thread_id: sys::jfieldID,
    synchronizer: sys::jclass,
    latch_sync: sys::jclass,
    stamped_lock: sys::jclass,
}

// SAFETY: global references and method/field IDs may be used from any thread.
unsafe impl Send for Handles {}
// SAFETY: as above; the handles are never changed after the lookup.
unsafe impl Sync for Handles {}

static HANDLES: OnceLock<Result<Handles, String>> = OnceLock::new();

/// Starts tracking parks of at least `threshold` for the lock engine, whose environment is
/// `env`: finds `Unsafe_Park` and binds `Unsafe.park` to the hook. On an error nothing is bound
/// and the error says why. Call on a thread attached to the VM, with no run tracking parks.
pub fn start(vm: Vm, env: &Env, threshold: Duration) -> Result<(), String> {
    let original = original(vm)?;
    let jni = current_jni(vm.0).ok_or("this thread is not attached to the JVM")?;
    let _frame = vm.local_frame(16).ok_or("no JNI local frame")?;
    let handles = HANDLES
        .get_or_init(|| Handles::look_up(jni))
        .as_ref()
        .map_err(Clone::clone)?;
    let ticks = clock::clock().ticks_for(threshold.as_nanos().min(u128::from(u64::MAX)) as u64);
    THRESHOLD_TICKS.store(ticks, Ordering::SeqCst);
    ENV.store(env.raw(), Ordering::SeqCst);
    RUN.store(
        LAST_RUN.fetch_add(1, Ordering::SeqCst) + 1,
        Ordering::SeqCst,
    );
    if let Err(e) = handles.bind(jni, park_hook as *const () as usize) {
        RUN.store(0, Ordering::SeqCst);
        ENV.store(ptr::null_mut(), Ordering::SeqCst);
        // Whatever the failure, Unsafe.park must end up with HotSpot's function.
        let _ = handles.bind(jni, original);
        return Err(e);
    }
    Ok(())
}

/// Stops tracking parks: binds `Unsafe.park` back to `Unsafe_Park`. The hook stops recording
/// at once; should the rebinding fail (logged), it stays bound but only passes calls on.
pub fn stop(vm: Vm) {
    RUN.store(0, Ordering::SeqCst);
    ENV.store(ptr::null_mut(), Ordering::SeqCst);
    let (Some(Ok(handles)), Some(jni)) = (HANDLES.get(), current_jni(vm.0)) else {
        log!("lock engine: cannot bind Unsafe.park back here; the inactive hook stays bound");
        return;
    };
    let Some(_frame) = vm.local_frame(16) else {
        return;
    };
    if let Err(e) = handles.bind(jni, ORIGINAL.load(Ordering::SeqCst)) {
        log!("lock engine: {e}; the inactive hook stays bound");
    }
}

/// The address of `Unsafe_Park`, looked up once per process.
fn original(vm: Vm) -> Result<usize, String> {
    static FOUND: OnceLock<Result<usize, String>> = OnceLock::new();
    let address = FOUND
        .get_or_init(|| crate::libjvm::local_function(vm, "Unsafe_Park"))
        .clone()?;
    ORIGINAL.store(address, Ordering::SeqCst);
    Ok(address)
}

impl Handles {
    /// Looks everything up and defines (or finds) the binding class; inside a local frame.
    fn look_up(jni: *mut sys::JNIEnv) -> Result<Handles, String> {
        let class = |name: &CStr| {
            // SAFETY: jni is this thread's environment; the name is NUL-terminated.
            let local = unsafe { jni!(jni, FindClass(name.as_ptr())) }.unwrap_or(ptr::null_mut());
            if clear_exception(jni) || local.is_null() {
                return Err(format!("class {} not found", name.to_string_lossy()));
            }
            global(jni, local)
        };
        let thread = class(c"java/lang/Thread")?;
        // SAFETY: valid env and class; NUL-terminated name and signature.
        let park_blocker = unsafe {
            jni!(
                jni,
                GetFieldID(
                    thread,
                    c"parkBlocker".as_ptr(),
                    c"Ljava/lang/Object;".as_ptr()
                )
            )
        }
        .unwrap_or(ptr::null_mut());
        if clear_exception(jni) || park_blocker.is_null() {
            return Err("field Thread.parkBlocker not found".into());
        }
        // SAFETY: as above.
        let thread_id = unsafe { jni!(jni, GetFieldID(thread, c"tid".as_ptr(), c"J".as_ptr())) }
            .unwrap_or(ptr::null_mut());
        if clear_exception(jni) || thread_id.is_null() {
            return Err("field Thread.tid not found".into());
        }
        let binder = define_binder(jni)?;
        // SAFETY: valid env and class; NUL-terminated name and signature.
        let bind = unsafe {
            jni!(
                jni,
                GetStaticMethodID(binder, c"bind".as_ptr(), c"(J)Z".as_ptr())
            )
        }
        .unwrap_or(ptr::null_mut());
        if clear_exception(jni) || bind.is_null() {
            return Err("ParkBinding.bind not found".into());
        }
        Ok(Handles {
            unsafe_class: class(c"jdk/internal/misc/Unsafe")?,
            binder,
            bind,
            park_blocker,
            thread_id,
            synchronizer: class(c"java/util/concurrent/locks/AbstractOwnableSynchronizer")?,
            latch_sync: class(c"java/util/concurrent/CountDownLatch$Sync")?,
            stamped_lock: class(c"java/util/concurrent/locks/StampedLock")?,
        })
    }

    /// Binds `Unsafe.park(ZJ)V` to `function` through `ParkBinding.bind`.
    fn bind(&self, jni: *mut sys::JNIEnv, function: usize) -> Result<(), String> {
        let argument = [sys::jvalue {
            j: function as sys::jlong,
        }];
        // SAFETY: valid env; `bind` is a static (J)Z method of `binder`, given one long.
        let bound = unsafe {
            jni!(
                jni,
                CallStaticBooleanMethodA(self.binder, self.bind, argument.as_ptr())
            )
        };
        if clear_exception(jni) || bound != Some(1) {
            return Err("RegisterNatives(Unsafe.park) failed".into());
        }
        Ok(())
    }

    /// Whether `blocker` (a live local reference) is a lock: see the module documentation.
    fn is_lock(&self, jni: *mut sys::JNIEnv, blocker: sys::jobject) -> bool {
        // SAFETY: valid env, live reference and global class references; IsInstanceOf
        // throws nothing.
        let instance = |class| unsafe { jni!(jni, IsInstanceOf(blocker, class)) } == Some(1);
        (instance(self.synchronizer) && !instance(self.latch_sync)) || instance(self.stamped_lock)
    }
}

/// Clears a pending exception on this thread; true if there was one.
fn clear_exception(jni: *mut sys::JNIEnv) -> bool {
    // SAFETY: jni is the calling thread's environment.
    unsafe {
        if jni!(jni, ExceptionCheck()) != Some(1) {
            return false;
        }
        jni!(jni, ExceptionClear());
    }
    true
}

/// Whether an exception is pending on this thread.
fn exception_pending(jni: *mut sys::JNIEnv) -> bool {
    // SAFETY: jni is the calling thread's environment; ExceptionCheck may be called with an
    // exception pending.
    let pending = unsafe { jni!(jni, ExceptionCheck()) };
    pending != Some(0)
}

/// A global reference to the local reference `local`, which is deleted.
fn global(jni: *mut sys::JNIEnv, local: sys::jobject) -> Result<sys::jobject, String> {
    // SAFETY: valid env; `local` is a live local reference of this thread.
    let global = unsafe { jni!(jni, NewGlobalRef(local)) }.unwrap_or(ptr::null_mut());
    delete_local(jni, local);
    if global.is_null() {
        return Err("NewGlobalRef failed".into());
    }
    Ok(global)
}

/// Deletes a local reference (null is ignored).
fn delete_local(jni: *mut sys::JNIEnv, local: sys::jobject) {
    if !local.is_null() {
        // SAFETY: valid env; `local` is a live local reference of this thread.
        unsafe { jni!(jni, DeleteLocalRef(local)) };
    }
}

/// Defines `jtap/runtime/ParkBinding` in the boot loader (or finds it, defined by another
/// copy of the agent library) and binds its `bind0` to [`bind0`]; a global reference to it.
fn define_binder(jni: *mut sys::JNIEnv) -> Result<sys::jclass, String> {
    let bytes = binder_bytes()?;
    // SAFETY: valid env; a null loader is the boot loader; the buffer outlives the call.
    let defined = unsafe {
        jni!(
            jni,
            DefineClass(
                BINDER.as_ptr(),
                ptr::null_mut(),
                bytes.as_ptr().cast(),
                bytes.len() as sys::jsize
            )
        )
    }
    .unwrap_or(ptr::null_mut());
    let local = if clear_exception(jni) || defined.is_null() {
        // SAFETY: valid env; NUL-terminated name.
        let found = unsafe { jni!(jni, FindClass(BINDER.as_ptr())) }.unwrap_or(ptr::null_mut());
        if clear_exception(jni) || found.is_null() {
            return Err("defining jtap/runtime/ParkBinding failed".into());
        }
        found
    } else {
        defined
    };
    let class = global(jni, local)?;
    let native = [sys::JNINativeMethod {
        name: c"bind0".as_ptr() as *mut c_char,
        signature: c"(J)Z".as_ptr() as *mut c_char,
        fnPtr: bind0 as *mut c_void,
    }];
    // SAFETY: valid env and class; the table and its strings outlive the call.
    let code = unsafe { jni!(jni, RegisterNatives(class, native.as_ptr(), 1)) };
    if clear_exception(jni) || code != Some(0) {
        return Err("RegisterNatives(ParkBinding.bind0) failed".into());
    }
    Ok(class)
}

/// The class file of `public final class jtap.runtime.ParkBinding` with `static boolean
/// bind(long entry) { return bind0(entry); }` and `private static native boolean
/// bind0(long)` (version 52: straight-line code needs no StackMapTable).
fn binder_bytes() -> Result<Vec<u8>, String> {
    const ACC_PUBLIC: u16 = 0x0001;
    const ACC_PRIVATE: u16 = 0x0002;
    const ACC_FINAL: u16 = 0x0010;
    const ACC_SUPER: u16 = 0x0020;
    const ACC_NATIVE: u16 = 0x0100;
    const LLOAD_0: u8 = 0x1e;
    const INVOKESTATIC: u8 = 0xb8;
    const IRETURN: u8 = 0xac;
    let name = BINDER.to_str().map_err(|e| e.to_string())?;
    // An empty class: magic, version 0.52, an empty constant pool, no members.
    let mut skeleton = vec![0xCA, 0xFE, 0xBA, 0xBE, 0, 0, 0, 52, 0, 1];
    skeleton.extend_from_slice(&[0; 14]);
    let mut cf = ClassFile::parse(&skeleton).map_err(|e| e.to_string())?;
    let error = |e: jtap_classfile::Error| e.to_string();
    let pool = &mut cf.constant_pool;
    cf.access_flags = ACC_PUBLIC | ACC_FINAL | ACC_SUPER;
    cf.this_class = pool.add_class(name).map_err(error)?;
    cf.super_class = pool.add_class("java/lang/Object").map_err(error)?;
    let bind0 = pool.add_method_ref(name, "bind0", "(J)Z").map_err(error)?;
    let mut code = Vec::new();
    code.extend_from_slice(&2u16.to_be_bytes()); // max_stack: one long
    code.extend_from_slice(&2u16.to_be_bytes()); // max_locals: one long
    code.extend_from_slice(&5u32.to_be_bytes());
    code.push(LLOAD_0);
    code.push(INVOKESTATIC);
    code.extend_from_slice(&bind0.to_be_bytes());
    code.push(IRETURN);
    code.extend_from_slice(&[0, 0, 0, 0]); // no exception table, no attributes
    cf.methods.push(Member {
        access_flags: ACC_STATIC,
        name_index: pool.add_utf8("bind").map_err(error)?,
        descriptor_index: pool.add_utf8("(J)Z").map_err(error)?,
        attributes: vec![Attribute {
            name_index: pool.add_utf8("Code").map_err(error)?,
            info: code,
        }],
    });
    cf.methods.push(Member {
        access_flags: ACC_PRIVATE | ACC_STATIC | ACC_NATIVE,
        name_index: pool.add_utf8("bind0").map_err(error)?,
        descriptor_index: pool.add_utf8("(J)Z").map_err(error)?,
        attributes: Vec::new(),
    });
    Ok(cf.write())
}

/// `ParkBinding.bind0(long function)`: binds `Unsafe.park(ZJ)V` to `function`. Runs under
/// the boot class's Java frame, so HotSpot takes the rebinding as the platform's own.
unsafe extern "C" fn bind0(
    jni: *mut sys::JNIEnv,
    _class: sys::jclass,
    function: sys::jlong,
) -> sys::jboolean {
    let bound = catch_unwind(AssertUnwindSafe(|| {
        let Some(Ok(handles)) = HANDLES.get() else {
            return false;
        };
        if function == 0 {
            return false;
        }
        let park = [sys::JNINativeMethod {
            name: c"park".as_ptr() as *mut c_char,
            signature: c"(ZJ)V".as_ptr() as *mut c_char,
            fnPtr: function as *mut c_void,
        }];
        // SAFETY: jni is this native method's environment; the class is a global reference;
        // the table and its strings outlive the call.
        let code = unsafe { jni!(jni, RegisterNatives(handles.unsafe_class, park.as_ptr(), 1)) };
        !clear_exception(jni) && code == Some(0)
    }));
    sys::jboolean::from(matches!(bound, Ok(true)))
}

/// `Unsafe.park` while the engine runs: HotSpot's park, timed; a long enough wait on a lock
/// is recorded.
unsafe extern "C" fn park_hook(
    jni: *mut sys::JNIEnv,
    receiver: sys::jobject,
    absolute: sys::jboolean,
    time: sys::jlong,
) {
    let original = ORIGINAL.load(Ordering::Relaxed);
    if original == 0 {
        return; // never bound without it; returning early is a permitted spurious wake-up
    }
    // SAFETY: ORIGINAL holds the address of Unsafe_Park, whose C signature is `Park`.
    let park = unsafe { std::mem::transmute::<usize, Park>(original) };
    let run = RUN.load(Ordering::Acquire);
    if run == 0 {
        // SAFETY: the VM's own arguments, passed on unchanged.
        unsafe { park(jni, receiver, absolute, time) };
        return;
    }
    let started = clock::ticks();
    // SAFETY: as above.
    unsafe { park(jni, receiver, absolute, time) };
    let waited = clock::ticks().saturating_sub(started);
    if waited >= THRESHOLD_TICKS.load(Ordering::Relaxed) {
        crate::callback::guard_callback(|| on_long_park(jni, run, clock::clock().ns(waited)));
    }
}

/// Records a park of `waited` ns entered in `run`, if that run still records and the park
/// blocker is a lock. Leaves no exception pending and no local reference behind.
fn on_long_park(jni: *mut sys::JNIEnv, run: u64, waited: u64) {
    let Some(_pass) = super::GATE.enter() else {
        return;
    };
    let raw = ENV.load(Ordering::Acquire);
    if RUN.load(Ordering::Acquire) != run || raw.is_null() || exception_pending(jni) {
        return; // another run, or an exception that is not ours to touch
    }
    let Some(Ok(handles)) = HANDLES.get() else {
        return;
    };
    // SAFETY: the engine's environment, alive while the gate is passed (the engine drains
    // the gate before disposing of it).
    let env = unsafe { Env::from_raw(raw) };
    if let Some(class) = blocker_lock_class(&env, jni, handles) {
        super::record_wait(&env, jni, &class, waited);
    }
    clear_exception(jni);
}

/// The JVM signature of the class of this thread's park blocker, if the blocker is a lock.
fn blocker_lock_class(env: &Env, jni: *mut sys::JNIEnv, handles: &Handles) -> Option<String> {
    let mut thread: sys::jthread = ptr::null_mut();
    let raw = env.raw();
    // SAFETY: a live environment; `thread` is a local out-parameter.
    let status = unsafe { (**raw).GetCurrentThread.map(|f| f(raw, &mut thread)) };
    if status != Some(sys::JVMTI_ERROR_NONE) || thread.is_null() {
        return None;
    }
    let class = thread_blocker_lock_class(env, jni, handles, thread);
    delete_local(jni, thread);
    class
}

/// The JVM signature of the class of `thread`'s park blocker, if the blocker is a lock.
fn thread_blocker_lock_class(
    env: &Env,
    jni: *mut sys::JNIEnv,
    handles: &Handles,
    thread: sys::jthread,
) -> Option<String> {
    let blocker = lock_blocker(jni, handles, thread)?;
    // SAFETY: valid env and live reference.
    let class = unsafe { jni!(jni, GetObjectClass(blocker)) }.unwrap_or(ptr::null_mut());
    delete_local(jni, blocker);
    if class.is_null() {
        return None;
    }
    // SAFETY: `class` is a live local class reference.
    let signature = unsafe { env.class_signature(class) }.ok();
    delete_local(jni, class);
    signature
}

/// `thread`'s park blocker (a local reference the caller deletes), if it is a lock.
fn lock_blocker(
    jni: *mut sys::JNIEnv,
    handles: &Handles,
    thread: sys::jthread,
) -> Option<sys::jobject> {
    // SAFETY: valid env; `thread` is a live java.lang.Thread and the field ID Thread's.
    let blocker = unsafe { jni!(jni, GetObjectField(thread, handles.park_blocker)) }
        .unwrap_or(ptr::null_mut());
    if blocker.is_null() {
        return None;
    }
    if handles.is_lock(jni, blocker) {
        Some(blocker)
    } else {
        delete_local(jni, blocker);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_binding_class_declares_bind_and_its_native() {
        let bytes = binder_bytes().unwrap();
        let cf = ClassFile::parse(&bytes).unwrap();
        assert_eq!(cf.name().unwrap(), BINDER.to_bytes());
        assert_eq!(cf.write(), bytes);
        let methods: Vec<(u16, String)> = cf
            .methods
            .iter()
            .map(|m| {
                (
                    m.access_flags,
                    cf.constant_pool
                        .utf8_str(m.name_index)
                        .unwrap()
                        .into_owned(),
                )
            })
            .collect();
        assert_eq!(methods, [(0x0008, "bind".into()), (0x010a, "bind0".into())]);
        assert_eq!(cf.methods[0].attributes[0].info.len(), 2 + 2 + 4 + 5 + 4);
    }
}
