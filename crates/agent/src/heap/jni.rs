//! A JNI local-reference frame. JVMTI functions such as `GetLoadedClasses` return JNI local
//! references; on a thread that never returns to Java (the attach listener running
//! `Agent_OnAttach`) nothing would ever free them, so they are made inside a frame of their own.

use std::ffi::c_void;
use std::ptr;

use jtap_jvmti::sys;

use crate::thread::Vm;

/// A pushed local frame; popping it on drop frees every local reference made since.
pub struct LocalFrame {
    jni: *mut sys::JNIEnv,
}

impl LocalFrame {
    /// Pushes a frame with room for `capacity` references on the calling thread, which must be
    /// attached to the VM. None if it is not, or the VM is out of memory.
    pub fn push(vm: Vm, capacity: usize) -> Option<LocalFrame> {
        let mut jni: *mut c_void = ptr::null_mut();
        // SAFETY: vm.0 is the VM's invocation interface (valid for the process's life); GetEnv
        // only fills the out-parameter, and leaves it null on a thread not attached.
        let code = unsafe {
            match (**vm.0).GetEnv {
                Some(get_env) => get_env(vm.0, &mut jni, sys::JNI_VERSION_1_8 as sys::jint),
                None => sys::JNI_ERR,
            }
        };
        if code != sys::JNI_OK as sys::jint || jni.is_null() {
            return None;
        }
        let jni: *mut sys::JNIEnv = jni.cast();
        let capacity = capacity.clamp(16, i32::MAX as usize) as sys::jint;
        // SAFETY: jni is the calling thread's JNIEnv, used on this thread only (LocalFrame is
        // neither Send nor Sync, holding a raw pointer).
        let pushed = unsafe {
            match (**jni).PushLocalFrame {
                Some(push) => push(jni, capacity) == 0,
                None => false,
            }
        };
        pushed.then_some(LocalFrame { jni })
    }
}

impl Drop for LocalFrame {
    fn drop(&mut self) {
        // SAFETY: the frame was pushed on this thread with this JNIEnv and is popped once; no
        // reference made inside it is used after the drop (they are locals of the caller's
        // scope, which outlives nothing that holds them).
        unsafe {
            if let Some(pop) = (**self.jni).PopLocalFrame {
                pop(self.jni, ptr::null_mut());
            }
        }
    }
}
