//! The few raw JNI/JVMTI calls the sampler makes that `jtap-jvmti` has no wrapper for: the
//! calling thread's `JNIEnv` from a signal handler (see [`VmThreadKey`]), JNI local frames and
//! references, and thread names (virtual threads' too).

use std::ffi::CStr;
use std::ptr;

use jtap_jvmti::{sys, Env, LocalFrame};

use crate::thread::{current_jni, spawn_attached, Vm};

/// HotSpot's pthread key for the current VM thread (`ThreadLocalStorage`, which HotSpot's own
/// signal handler reads with `pthread_getspecific` for the same reason): set on every thread
/// the JVM created or attached, and only after the thread's `libjvm.so` thread-local block
/// exists. A thread whose key is set can call `GetEnv` without allocating.
///
/// The key is not exported, so it is found by its value: the key whose value is a pointer a
/// little below the thread's `JNIEnv` (HotSpot's `JavaThread` holds its `JNIEnv` inline), at
/// the same distance on two attached threads should another key hold such a pointer by chance.
#[derive(Debug, Clone, Copy)]
pub struct VmThreadKey(libc::pthread_key_t);

/// glibc's `PTHREAD_KEYS_MAX`: keys are numbered below it.
const PTHREAD_KEYS_MAX: libc::pthread_key_t = 1024;
/// How far into a `JavaThread` its `JNIEnv` may lie (0x2b0–0x4a0 bytes in JDK 11–25).
const MAX_JNI_ENV_OFFSET: usize = 4096;

impl VmThreadKey {
    /// Finds the key, on a thread attached to `vm`.
    pub fn find(vm: Vm) -> Result<VmThreadKey, String> {
        let mut found = Self::candidates(vm.0)?;
        if found.len() > 1 {
            let (sender, receiver) = std::sync::mpsc::channel();
            spawn_attached(vm, "jtap-key-probe".into(), move || {
                let vm = vm; // the whole handle, which is Send, not its raw pointer
                let _ = sender.send(Self::candidates(vm.0));
            })
            .map_err(|e| format!("cannot start a thread: {e}"))?;
            let elsewhere = receiver
                .recv_timeout(std::time::Duration::from_secs(5))
                .map_err(|_| "the probing thread did not answer".to_string())??;
            found.retain(|candidate| elsewhere.contains(candidate));
        }
        match found[..] {
            [(key, offset)] => {
                log!("sampler: the JVM's current-thread key is {key} (JNIEnv at +{offset:#x})");
                Ok(VmThreadKey(key))
            }
            _ => Err(format!(
                "cannot tell the JVM's threads from native ones: {} candidate thread keys",
                found.len()
            )),
        }
    }

    /// The calling thread's keys whose value lies less than [`MAX_JNI_ENV_OFFSET`] below its
    /// `JNIEnv`, with that distance.
    fn candidates(vm: *mut sys::JavaVM) -> Result<Vec<(libc::pthread_key_t, usize)>, String> {
        let jni = current_jni(vm).ok_or("this thread is not attached to the JVM")? as usize;
        Ok((0..PTHREAD_KEYS_MAX)
            .filter_map(|key| {
                // SAFETY: pthread_getspecific only reads this thread's slot of `key` (null
                // for a key never created or not set here).
                let value = unsafe { libc::pthread_getspecific(key) } as usize;
                let offset = jni.checked_sub(value)?;
                (value != 0 && offset < MAX_JNI_ENV_OFFSET).then_some((key, offset))
            })
            .collect())
    }

    /// The calling thread's `JNIEnv`; None on a thread the JVM does not know or that is not
    /// attached. Async-signal-safe: glibc's `pthread_getspecific` reads the thread descriptor
    /// without locks or allocation, and `GetEnv` is only called where `libjvm.so`'s block
    /// exists. (glibc can still grow a thread's table of such blocks on its first access
    /// after a `dlopen`, but only once more than 14 libraries with thread-locals were loaded
    /// after the thread started, and the JVM's own threads read their current thread far
    /// more often than they are sampled.)
    pub fn current_jni(self, vm: *mut sys::JavaVM) -> Option<*mut sys::JNIEnv> {
        // SAFETY: as in `find`.
        let vm_thread = unsafe { libc::pthread_getspecific(self.0) };
        if vm_thread.is_null() {
            return None;
        }
        current_jni(vm)
    }
}

/// The name of a `java.lang.Thread`.
///
/// # Safety
/// `thread` is a valid reference to a thread object (null: the calling thread), on an
/// attached thread.
pub unsafe fn thread_name(env: &Env, thread: sys::jthread) -> Option<String> {
    let raw = env.raw();
    let mut info = sys::jvmtiThreadInfo::default();
    // SAFETY: caller's contract for `thread`; info is a local out-parameter.
    let code = unsafe { (**raw).GetThreadInfo.map(|f| f(raw, thread, &mut info)) };
    if code != Some(sys::JVMTI_ERROR_NONE) || info.name.is_null() {
        return None;
    }
    // SAFETY: JVMTI returned a NUL-terminated modified-UTF-8 string it allocated for us,
    // which we copy and give back. The two references in `info` are local references freed
    // with the caller's local frame.
    unsafe {
        let name = CStr::from_ptr(info.name).to_string_lossy().into_owned();
        if let Some(deallocate) = (**raw).Deallocate {
            deallocate(raw, info.name.cast());
        }
        Some(name)
    }
}

/// The names of every live Java thread (JVMTI GetAllThreads; the VM's own GC and compiler
/// threads are not Java threads). Empty when the VM will not say.
pub fn java_thread_names(env: &Env) -> Vec<String> {
    let raw = env.raw();
    let mut count: sys::jint = 0;
    let mut threads: *mut sys::jthread = std::ptr::null_mut();
    // SAFETY: out-parameters are locals; the array is ours to deallocate.
    let code = unsafe {
        (**raw)
            .GetAllThreads
            .map(|f| f(raw, &mut count, &mut threads))
    };
    if code != Some(sys::JVMTI_ERROR_NONE) || threads.is_null() {
        return Vec::new();
    }
    // SAFETY: JVMTI filled `count` thread references at `threads`.
    let list = unsafe { std::slice::from_raw_parts(threads, count.max(0) as usize) };
    // SAFETY: each element is a live thread reference of this call.
    let names = list
        .iter()
        .filter_map(|&t| unsafe { thread_name(env, t) })
        .collect();
    // SAFETY: the array was allocated by JVMTI for us; the references in it are local
    // references, freed with the caller's local frame.
    unsafe {
        if let Some(deallocate) = (**raw).Deallocate {
            deallocate(raw, threads.cast());
        }
    }
    names
}

/// The id and name of every live virtual thread the JDK tracks: those of its root thread
/// container (`jdk.internal.vm.ThreadContainers.root().threads()`, where every started
/// virtual thread is unless `-Djdk.trackAllThreads=false`), at most `limit` of them. Runs
/// Java code (the container's stream, into an array) on the calling thread, which must be
/// attached to `vm`. Empty before JDK 21, and when anything on the way fails or throws.
pub fn virtual_thread_names(vm: Vm, limit: usize) -> Vec<(u64, String)> {
    let Some(frame) = vm.local_frame(16) else {
        return Vec::new();
    };
    // SAFETY: `frame` is a local frame of this thread.
    let names = unsafe { virtual_thread_names_in(&frame, limit) };
    frame.jni().clear_exception();
    names.unwrap_or_default()
}

/// [`virtual_thread_names`] inside its local frame; None at the first failure or exception.
///
/// # Safety
/// `frame` is a local frame of the calling thread.
unsafe fn virtual_thread_names_in(
    frame: &LocalFrame<'_>,
    limit: usize,
) -> Option<Vec<(u64, String)>> {
    let local = frame.jni();
    let jni = local.raw();
    // SAFETY: (caller) valid env; every name and signature is NUL-terminated; each result is
    // checked (not null, no exception pending) before use; references are local ones of
    // `frame`, those made per thread deleted as the loop goes.
    unsafe {
        let class = |name: &CStr| checked(jni, jni!(jni, FindClass(name.as_ptr())));
        let containers = class(c"jdk/internal/vm/ThreadContainers")?;
        let container = class(c"jdk/internal/vm/ThreadContainer")?;
        let stream = class(c"java/util/stream/Stream")?;
        let thread = class(c"java/lang/Thread")?;
        let virtual_thread = class(c"java/lang/VirtualThread")?;
        let method = |class, name: &CStr, signature: &CStr| {
            checked(
                jni,
                jni!(jni, GetMethodID(class, name.as_ptr(), signature.as_ptr())),
            )
        };
        let root = jni!(
            jni,
            GetStaticMethodID(
                containers,
                c"root".as_ptr(),
                c"()Ljdk/internal/vm/ThreadContainer;".as_ptr()
            )
        );
        let root = checked(jni, root)?;
        let threads = method(container, c"threads", c"()Ljava/util/stream/Stream;")?;
        let to_array = method(stream, c"toArray", c"()[Ljava/lang/Object;")?;
        let get_name = method(thread, c"getName", c"()Ljava/lang/String;")?;
        let tid = checked(
            jni,
            jni!(jni, GetFieldID(thread, c"tid".as_ptr(), c"J".as_ptr())),
        )?;
        let root = checked(jni, jni!(jni, CallStaticObjectMethod(containers, root)))?;
        let all = checked(jni, jni!(jni, CallObjectMethod(root, threads)))?;
        let all = checked(jni, jni!(jni, CallObjectMethod(all, to_array)))?;
        let count = jni!(jni, GetArrayLength(all))?;
        let mut names = Vec::new();
        for i in 0..count {
            if names.len() >= limit {
                break;
            }
            let element = checked(jni, jni!(jni, GetObjectArrayElement(all, i)))?;
            if jni!(jni, IsInstanceOf(element, virtual_thread)) == Some(1) {
                let id = jni!(jni, GetLongField(element, tid))?;
                let name = checked(jni, jni!(jni, CallObjectMethod(element, get_name)))?;
                let utf = jni!(jni, GetStringUTFChars(name, ptr::null_mut()))?;
                if !utf.is_null() {
                    let text = CStr::from_ptr(utf).to_string_lossy().into_owned();
                    jni!(jni, ReleaseStringUTFChars(name, utf));
                    names.push((id as u64, text));
                }
                local.delete_local_ref(name);
            }
            local.delete_local_ref(element);
        }
        Some(names)
    }
}

/// A JNI call's result, if the function exists, returned something and threw nothing.
///
/// # Safety
/// `jni` is the calling thread's environment.
unsafe fn checked<T>(jni: *mut sys::JNIEnv, result: Option<*mut T>) -> Option<*mut T> {
    // SAFETY: (caller) valid env; ExceptionCheck may be called with an exception pending.
    result.filter(|r| !r.is_null() && unsafe { jni!(jni, ExceptionCheck()) } == Some(0))
}
