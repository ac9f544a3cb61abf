//! The few raw JNI/JVMTI calls the sampler makes that `jtap-jvmti` has no wrapper for: the
//! calling thread's `JNIEnv`, JNI local frames and references, and thread names.

use std::ffi::{c_void, CStr};
use std::ptr;

use jtap_jvmti::{sys, Env};

use crate::thread::Vm;

/// The calling thread's `JNIEnv`, if it is attached to the VM. Async-signal-safe in HotSpot
/// (it reads the current thread from thread-local storage), so handlers may call it.
pub fn current_jni(vm: *mut sys::JavaVM) -> Option<*mut sys::JNIEnv> {
    let mut env: *mut c_void = ptr::null_mut();
    // SAFETY: vm is the VM's invocation interface, valid for the life of the process.
    let code = unsafe {
        match (**vm).GetEnv {
            Some(get_env) => get_env(vm, &mut env, sys::JNI_VERSION_1_6 as sys::jint),
            None => sys::JNI_ERR,
        }
    };
    (code == sys::JNI_OK as sys::jint && !env.is_null()).then_some(env.cast())
}

/// A JNI local frame on the calling thread: local references made while it lives are freed
/// when it drops (also those JVMTI functions return, e.g. from `GetLoadedClasses`).
pub struct LocalFrame {
    jni: *mut sys::JNIEnv,
}

impl LocalFrame {
    /// Pushes a frame, if the calling thread is attached to `vm`.
    pub fn push(vm: Vm, capacity: i32) -> Option<LocalFrame> {
        let jni = current_jni(vm.0)?;
        // SAFETY: jni is the calling thread's environment.
        let code = unsafe { (**jni).PushLocalFrame.map(|push| push(jni, capacity)) };
        (code == Some(0)).then_some(LocalFrame { jni })
    }

    /// Frees one local reference early.
    pub fn delete(&self, object: sys::jobject) {
        if object.is_null() {
            return;
        }
        // SAFETY: the reference is a live local reference of this thread.
        unsafe {
            if let Some(delete) = (**self.jni).DeleteLocalRef {
                delete(self.jni, object);
            }
        }
    }
}

impl Drop for LocalFrame {
    fn drop(&mut self) {
        // SAFETY: pops the frame this value pushed, on the same thread (LocalFrame is !Send).
        unsafe {
            if let Some(pop) = (**self.jni).PopLocalFrame {
                pop(self.jni, ptr::null_mut());
            }
        }
    }
}

/// The name of a `java.lang.Thread`.
///
/// # Safety
/// `thread` is a valid reference to a thread object, on an attached thread.
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
