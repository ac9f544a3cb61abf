//! What every way into this library from the JVM needs: a guard so that no panic unwinds
//! into the VM, and the library kept mapped while its callbacks and threads may run.

use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Runs an event callback, swallowing a panic (already logged by the panic hook).
pub fn guard_callback(body: impl FnOnce()) {
    let _ = catch_unwind(AssertUnwindSafe(body));
}

/// Keeps this library mapped for the life of the process. The JVM `dlclose`s an agent whose
/// `Agent_OnAttach` fails, but our callbacks and threads may still be registered or running.
pub fn pin_library() {
    // SAFETY: dladdr only reads the address of one of our own functions and fills `info`;
    // dlopen with RTLD_NOLOAD just adds RTLD_NODELETE to the already-loaded library, and
    // the handle is deliberately never closed.
    unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr(pin_library as *const c_void, &mut info) != 0 && !info.dli_fname.is_null() {
            libc::dlopen(
                info.dli_fname,
                libc::RTLD_NOW | libc::RTLD_NOLOAD | libc::RTLD_NODELETE,
            );
        }
    }
}
