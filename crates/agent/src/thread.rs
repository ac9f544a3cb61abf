//! The JVM handle, the calling thread's `JNIEnv`, and native threads attached to the JVM under
//! `jtap-...` names, so that they show up in thread dumps and may call JVMTI.

use std::ffi::{c_void, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use jtap_jvmti::sys;

/// The `JavaVM*` the JVM gave the agent; valid for the life of the process.
#[derive(Clone, Copy)]
pub struct Vm(pub *mut sys::JavaVM);

// SAFETY: the JavaVM invocation interface is process-global and thread safe.
unsafe impl Send for Vm {}
// SAFETY: as above.
unsafe impl Sync for Vm {}

impl Vm {
    /// A new JVMTI environment of the version jtap needs ([`sys::JVMTI_VERSION_11`]), owned by
    /// the caller (disposed of when dropped).
    pub fn jvmti_env(self) -> jtap_jvmti::Result<jtap_jvmti::Env> {
        // SAFETY: self.0 is the JavaVM the JVM handed to the agent's entry point.
        unsafe { jtap_jvmti::Env::from_vm(self.0, sys::JVMTI_VERSION_11) }
    }

    /// Pushes a JNI local frame on the calling thread, if it is attached to the VM: local
    /// references made in it (also those JVMTI functions return) are freed when it drops.
    pub fn local_frame(self, capacity: i32) -> Option<jtap_jvmti::LocalFrame<'static>> {
        // SAFETY: self.0 is the process's JavaVM. The environment is used only through the
        // frame, which is popped on this thread before it can detach (threads detach when
        // their code returns).
        let jni = unsafe { jtap_jvmti::Jni::current(self.0, sys::JNI_VERSION_1_6 as sys::jint) }?;
        jni.push_local_frame(capacity)
    }

    /// Attaches the calling native thread as a daemon named `name`; false if the VM refused
    /// (e.g. it is shutting down).
    fn attach_current_thread(&self, name: &str) -> bool {
        let name = CString::new(name).unwrap_or_default();
        let mut args = sys::JavaVMAttachArgs {
            version: sys::JNI_VERSION_1_8 as sys::jint,
            name: name.as_ptr() as *mut _,
            group: ptr::null_mut(),
        };
        let mut env: *mut c_void = ptr::null_mut();
        // SAFETY: self.0 is the VM's invocation interface; args and name outlive the call
        // (the VM copies the name into the new java.lang.Thread).
        let code = unsafe {
            match (**self.0).AttachCurrentThreadAsDaemon {
                Some(attach) => attach(
                    self.0,
                    &mut env,
                    (&mut args as *mut sys::JavaVMAttachArgs).cast(),
                ),
                None => sys::JNI_ERR,
            }
        };
        code == sys::JNI_OK as sys::jint
    }

    fn detach_current_thread(&self) {
        // SAFETY: called only on a thread this module attached, after its last JNI/JVMTI use.
        unsafe {
            if let Some(detach) = (**self.0).DetachCurrentThread {
                detach(self.0);
            }
        }
    }
}

/// The calling thread's `JNIEnv`, if it is attached to the VM.
///
/// Not async-signal-safe on every thread: HotSpot reads its current thread from a `__thread`
/// variable of `libjvm.so`, a `dlopen`ed library, and glibc allocates such a variable's block
/// with `malloc` the first time a thread touches it. A native thread the JVM never ran
/// (created by a JNI library, or one of jtap's own before it attaches) that is interrupted
/// inside `malloc` would deadlock on the allocator's lock. Signal handlers go through
/// `sampling::jvm::VmThreadKey::current_jni`.
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

thread_local! {
    /// The thread is one of jtap's own (see [`mark_own_thread`]).
    static OWN: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks the calling thread as one of jtap's own, whose work (e.g. the C allocations the VM
/// makes for its JVMTI calls) is not the application's: the native memory profile leaves it
/// out.
pub fn mark_own_thread() {
    OWN.with(|own| own.set(true));
}

/// Whether the calling thread is one of jtap's own.
pub fn is_own_thread() -> bool {
    OWN.with(|own| own.get())
}

/// Runs `body` on a new native thread named `name` (at most 15 bytes show in `top`), attached
/// to the VM as a daemon thread of the same name for its whole life. Panics in `body` are
/// caught and logged.
pub fn spawn_attached(
    vm: Vm,
    name: String,
    body: impl FnOnce() + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || {
            mark_own_thread();
            if !vm.attach_current_thread(&name) {
                log!("{name}: the VM refused to attach the thread; not running it");
                return;
            }
            if catch_unwind(AssertUnwindSafe(body)).is_err() {
                log!("{name}: stopped by an internal error");
            }
            vm.detach_current_thread();
        })
}
