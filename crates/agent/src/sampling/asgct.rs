//! `AsyncGetCallTrace`, HotSpot's unofficial stack walker that may run inside a signal handler:
//! its structures (declared here, as no header ships them), lookup in `libjvm.so`, and the
//! names of its failure codes.

use std::ffi::{c_void, CString};
use std::sync::OnceLock;

use jtap_jvmti::sys;

use crate::walk::{Frames, JavaFrame, Kind};

/// One frame: the bytecode index (negative for special frames, `-3` for a native method)
/// and the method. `#[repr(C)]` as HotSpot's `ASGCT_CallFrame`, whose padding after the
/// index holds the frame's kind when jtap's walker wrote it.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CallFrame {
    /// Bytecode index (`lineno` in some declarations).
    pub bci: i32,
    /// jtap's walker's [`Kind`] as a byte (`Kind as u8 + 1`); AsyncGetCallTrace never writes
    /// it, so it means something only in a sample jtap's walker took.
    pub kind: u8,
    /// The method, or null when HotSpot has no jmethodID for it.
    pub method: sys::jmethodID,
}

impl CallFrame {
    /// A frame of `method` at `bci`, of no known kind.
    pub fn new(method: sys::jmethodID, bci: i32) -> CallFrame {
        CallFrame {
            bci,
            kind: 0,
            method,
        }
    }

    /// Its kind, when jtap's walker wrote it.
    pub fn kind(&self) -> Option<Kind> {
        [
            Kind::Interpreted,
            Kind::Compiled,
            Kind::Inlined,
            Kind::Native,
        ]
        .get(usize::from(self.kind).checked_sub(1)?)
        .copied()
    }
}

/// jtap's walker writes its frames as AsyncGetCallTrace does, kinds added.
impl Frames for [CallFrame] {
    fn room(&self) -> usize {
        self.len()
    }
    fn put(&mut self, index: usize, frame: JavaFrame) {
        let Some(slot) = self.get_mut(index) else {
            return;
        };
        *slot = CallFrame {
            bci: if frame.kind == Kind::Native {
                NATIVE_BCI
            } else {
                frame.bci
            },
            kind: frame.kind as u8 + 1,
            method: frame.method as sys::jmethodID,
        };
    }
}

/// `bci` HotSpot gives a frame of a native method.
pub const NATIVE_BCI: i32 = -3;

/// A trace: filled by [`AsyncGetCallTrace`]. `#[repr(C)]` as HotSpot's `ASGCT_CallTrace`.
#[repr(C)]
pub struct CallTrace {
    /// The sampled thread's JNI environment.
    pub env: *mut sys::JNIEnv,
    /// Frames written, or a failure code (≤ 0).
    pub num_frames: i32,
    /// Room for `depth` frames, top first.
    pub frames: *mut CallFrame,
}

/// `void AsyncGetCallTrace(ASGCT_CallTrace*, jint depth, void* ucontext)`.
pub type AsyncGetCallTrace =
    unsafe extern "C" fn(trace: *mut CallTrace, depth: i32, ucontext: *mut c_void);

/// `AsyncGetCallTrace` from the `libjvm.so` mapped in this process (looked up once).
pub fn function() -> Result<AsyncGetCallTrace, String> {
    static FOUND: OnceLock<Result<usize, String>> = OnceLock::new();
    let address = FOUND.get_or_init(lookup).clone()?;
    // SAFETY: the address is the exported AsyncGetCallTrace, whose C signature is the type's.
    Ok(unsafe { std::mem::transmute::<usize, AsyncGetCallTrace>(address) })
}

fn lookup() -> Result<usize, String> {
    let maps = std::fs::read_to_string("/proc/self/maps")
        .map_err(|e| format!("reading /proc/self/maps: {e}"))?;
    let library = maps
        .lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .find(|path| path.ends_with("/libjvm.so"))
        .ok_or("libjvm.so is not mapped in this process")?;
    let path = CString::new(library).map_err(|_| "odd libjvm.so path".to_string())?;
    // SAFETY: RTLD_NOLOAD only returns a handle to the already-loaded libjvm.so (its reference
    // count is raised, which keeps it, as the JVM does anyway); dlsym reads its symbol table.
    let address = unsafe {
        let handle = libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD);
        if handle.is_null() {
            return Err(format!("dlopen({library}) failed"));
        }
        libc::dlsym(handle, c"AsyncGetCallTrace".as_ptr())
    };
    if address.is_null() {
        return Err(format!("{library} does not export AsyncGetCallTrace"));
    }
    Ok(address as usize)
}

/// The name of an `AsyncGetCallTrace` failure (`num_frames` ≤ 0), as HotSpot's `forte.cpp`
/// names the codes, for error pseudo-frames like `[gc_active]`.
pub fn failure_name(num_frames: i32) -> &'static str {
    match num_frames {
        0 => "no_java_frame",
        -1 => "no_class_load",
        -2 => "gc_active",
        -3 => "unknown_not_java",
        -4 => "not_walkable_not_java",
        -5 => "unknown_java",
        -6 => "not_walkable_java",
        -7 => "unknown_state",
        -8 => "thread_exit",
        -9 => "deopt",
        -10 => "safepoint",
        _ => "unknown_failure",
    }
}

/// Whether a failure code means the thread was not running Java code at all (no Java frame,
/// or not a Java thread), rather than a Java stack that could not be walked.
pub fn is_outside_java(num_frames: i32) -> bool {
    matches!(num_frames, 0 | -3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_codes_have_names() {
        assert_eq!(failure_name(-2), "gc_active");
        assert_eq!(failure_name(-9), "deopt");
        assert_eq!(failure_name(-42), "unknown_failure");
        assert_eq!(std::mem::size_of::<CallFrame>(), 16);
        assert_eq!(std::mem::size_of::<CallTrace>(), 24);
    }
}
