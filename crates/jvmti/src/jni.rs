//! JNI, owned: the calling thread's environment ([`Jni`]), local frames that pop when dropped
//! ([`LocalFrame`]), local references that cannot outlive the frame they were made in and
//! are deleted when dropped ([`Local`]), and global references deleted when dropped
//! ([`GlobalRef`]). jni-rs's `JNIEnv<'local>`/`JObject<'local>` is the model: the `'local`
//! lifetime is the frame (a native method's or callback's call, or a pushed
//! [`LocalFrame`]) its references live in.
//!
//! [`jni!`](macro@crate::jni) calls a function of the table directly, for what has no wrapper.

use std::ffi::{c_void, CStr};
use std::marker::PhantomData;
use std::ptr;

use crate::sys;

/// Calls JNI function `$f` through the table of `$env` (a `*mut sys::JNIEnv`); `None` when
/// the VM lacks it. Use inside `unsafe`: the caller vouches for the environment (the calling
/// thread's) and the arguments.
#[macro_export]
macro_rules! jni {
    ($env:expr, $f:ident ( $($arg:expr),* $(,)? )) => {{
        let env: *mut $crate::sys::JNIEnv = $env;
        (**env).$f.map(|function| function(env $(, $arg)*))
    }};
}

/// The calling thread's JNI environment, valid for `'local`: the call it was given to (a
/// native method, an event callback) or the [`LocalFrame`] it came from. Neither `Send` nor
/// `Sync` (it holds a raw pointer): a `JNIEnv` belongs to one thread.
#[derive(Debug, Clone, Copy)]
pub struct Jni<'local> {
    raw: *mut sys::JNIEnv,
    _local: PhantomData<&'local ()>,
}

impl<'local> Jni<'local> {
    /// The environment a native method or event callback received.
    ///
    /// # Safety
    /// `raw` is the calling thread's `JNIEnv`, and stays valid (the thread attached) for
    /// `'local`.
    pub unsafe fn from_raw(raw: *mut sys::JNIEnv) -> Jni<'local> {
        Jni {
            raw,
            _local: PhantomData,
        }
    }

    /// The calling thread's environment, if it is attached to `vm`.
    ///
    /// # Safety
    /// `vm` is the process's `JavaVM`, and the thread stays attached for `'local`.
    pub unsafe fn current(vm: *mut sys::JavaVM, version: i32) -> Option<Jni<'local>> {
        let mut env: *mut c_void = ptr::null_mut();
        // SAFETY: the caller's contract; GetEnv only writes the out-parameter.
        let code = unsafe { (**vm).GetEnv.map(|get| get(vm, &mut env, version)) };
        // SAFETY: GetEnv answered with the calling thread's environment.
        (code == Some(sys::JNI_OK as sys::jint) && !env.is_null())
            .then(|| unsafe { Jni::from_raw(env.cast()) })
    }

    /// The raw environment, for calls this wrapper does not offer.
    pub fn raw(self) -> *mut sys::JNIEnv {
        self.raw
    }

    /// Whether an exception is pending.
    pub fn exception_check(self) -> bool {
        // SAFETY: the calling thread's environment; callable with an exception pending.
        let pending = unsafe { jni!(self.raw, ExceptionCheck()) };
        pending != Some(0)
    }

    /// Clears a pending exception; true if there was one.
    pub fn clear_exception(self) -> bool {
        if !self.exception_check() {
            return false;
        }
        // SAFETY: the calling thread's environment.
        unsafe { jni!(self.raw, ExceptionClear()) };
        true
    }

    /// Pushes a local frame with room for `capacity` references; None (exception cleared)
    /// when the VM is out of memory. References made through the frame's [`LocalFrame::jni`]
    /// cannot outlive it.
    pub fn push_local_frame(self, capacity: i32) -> Option<LocalFrame<'local>> {
        // SAFETY: the calling thread's environment.
        if unsafe { jni!(self.raw, PushLocalFrame(capacity)) } != Some(0) {
            self.clear_exception();
            return None;
        }
        Some(LocalFrame {
            jni: self,
            _not_send: PhantomData,
        })
    }

    /// Runs `body` inside a local frame of `capacity`, so every local reference made in it
    /// is freed; None when the frame could not be pushed.
    pub fn with_local_frame<T>(self, capacity: i32, body: impl FnOnce(Jni<'_>) -> T) -> Option<T> {
        let frame = self.push_local_frame(capacity)?;
        Some(body(frame.jni()))
    }

    /// Takes ownership of `raw`, a local reference of this thread (e.g. one a JVMTI function
    /// returned): it is deleted when the result drops. None for null.
    ///
    /// # Safety
    /// `raw` is null or a live local reference of this thread, not deleted elsewhere.
    pub unsafe fn own_local(self, raw: sys::jobject) -> Option<Local<'local>> {
        (!raw.is_null()).then_some(Local { raw, jni: self })
    }

    /// A loaded class by internal name (`java/lang/Thread`); None, exception cleared, when
    /// there is none.
    pub fn find_class(self, name: &CStr) -> Option<Local<'local>> {
        // SAFETY: the calling thread's environment, a NUL-terminated name.
        let class = unsafe { jni!(self.raw, FindClass(name.as_ptr())) }.unwrap_or(ptr::null_mut());
        if self.clear_exception() {
            return None;
        }
        // SAFETY: FindClass returns a new local reference (or null).
        unsafe { self.own_local(class) }
    }

    /// The class of `object` (a live, non-null reference).
    ///
    /// # Safety
    /// `object` is a live reference usable on this thread.
    pub unsafe fn object_class(self, object: sys::jobject) -> Option<Local<'local>> {
        // SAFETY: the caller's contract.
        let class = unsafe { jni!(self.raw, GetObjectClass(object)) }.unwrap_or(ptr::null_mut());
        // SAFETY: GetObjectClass returns a new local reference (or null).
        unsafe { self.own_local(class) }
    }

    /// A global reference to `object`, deleted when the result drops; None when the VM has
    /// no memory for it.
    ///
    /// # Safety
    /// `object` is a live reference usable on this thread; `vm` the process's `JavaVM`.
    pub unsafe fn new_global_ref(
        self,
        vm: *mut sys::JavaVM,
        object: sys::jobject,
    ) -> Option<GlobalRef> {
        // SAFETY: the caller's contract.
        let global = unsafe { jni!(self.raw, NewGlobalRef(object)) }.unwrap_or(ptr::null_mut());
        (!global.is_null()).then_some(GlobalRef { raw: global, vm })
    }

    /// Deletes a local reference early (null is ignored), e.g. one a JVMTI function returned.
    ///
    /// # Safety
    /// `object` is null or a live local reference of this thread, deleted only here.
    pub unsafe fn delete_local_ref(self, object: sys::jobject) {
        if !object.is_null() {
            // SAFETY: the caller's contract.
            unsafe { jni!(self.raw, DeleteLocalRef(object)) };
        }
    }
}

/// A JNI local frame on the calling thread, popped (freeing every local reference made in
/// it, also those JVMTI functions returned) when dropped.
#[derive(Debug)]
pub struct LocalFrame<'local> {
    jni: Jni<'local>,
    /// Popped on the thread that pushed it.
    _not_send: PhantomData<*mut ()>,
}

impl LocalFrame<'_> {
    /// The environment, for references that live in this frame (and no longer).
    pub fn jni(&self) -> Jni<'_> {
        Jni {
            raw: self.jni.raw,
            _local: PhantomData,
        }
    }
}

impl Drop for LocalFrame<'_> {
    fn drop(&mut self) {
        // SAFETY: pops the frame this value pushed, on the same thread (it is not Send).
        unsafe { jni!(self.jni.raw, PopLocalFrame(ptr::null_mut())) };
    }
}

/// A local reference, deleted when dropped; it cannot outlive the frame (`'local`) it was
/// made in.
#[derive(Debug)]
pub struct Local<'local> {
    raw: sys::jobject,
    jni: Jni<'local>,
}

impl Local<'_> {
    /// The reference, for JNI and JVMTI calls while this value lives.
    pub fn raw(&self) -> sys::jobject {
        self.raw
    }
}

impl Drop for Local<'_> {
    fn drop(&mut self) {
        // SAFETY: a live local reference of this thread, owned by this value alone.
        unsafe { jni!(self.jni.raw, DeleteLocalRef(self.raw)) };
    }
}

/// A JNI global reference, usable on any thread, deleted when dropped (from a thread attached
/// to the VM; on another one it is left, a few bytes). [`GlobalRef::leak`] keeps it for the
/// process.
#[derive(Debug)]
pub struct GlobalRef {
    raw: sys::jobject,
    vm: *mut sys::JavaVM,
}

// SAFETY: a global reference may be used and deleted from any thread; the JavaVM is
// process-global.
unsafe impl Send for GlobalRef {}
// SAFETY: as above; shared access only reads the pointer.
unsafe impl Sync for GlobalRef {}

impl GlobalRef {
    /// The reference, for JNI and JVMTI calls while this value lives.
    pub fn raw(&self) -> sys::jobject {
        self.raw
    }

    /// Keeps the reference for the life of the process.
    pub fn leak(self) -> sys::jobject {
        std::mem::ManuallyDrop::new(self).raw
    }
}

impl Drop for GlobalRef {
    fn drop(&mut self) {
        // SAFETY: the JavaVM this reference was made in; the environment is this thread's.
        if let Some(jni) = unsafe { Jni::current(self.vm, sys::JNI_VERSION_1_6 as i32) } {
            // SAFETY: a global reference owned by this value alone.
            unsafe { jni!(jni.raw, DeleteGlobalRef(self.raw)) };
        }
    }
}
