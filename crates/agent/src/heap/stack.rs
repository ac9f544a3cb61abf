//! Stacks for the alloc and lock engines: taken with JVMTI `GetStackTrace` inside event
//! callbacks (which run on the thread concerned, at a point where its stack is walkable), and
//! resolved to `pkg.Class.method:line` frames later, off the hot path. Taking a stack allocates
//! nothing (up to 128 frames).

use jtap_jvmti::{sys, Env};
use jtap_profile::Frame;

use crate::heap::sites::RawFrame;
use crate::sampling::asgct::{CallFrame, NATIVE_BCI};
use crate::sampling::methods::Resolver;
use crate::thread::Vm;

/// Frames a callback takes into a buffer on its own stack; deeper requests use the heap.
const ON_STACK: usize = 128;

/// Calls `f` with up to `depth` frames of the calling thread's Java stack, top first (empty if
/// the VM cannot say). Up to [`ON_STACK`] frames, nothing is allocated.
pub fn with_current<R>(env: &Env, depth: usize, f: impl FnOnce(&[RawFrame]) -> R) -> R {
    if depth > ON_STACK {
        // SAFETY: a null thread means the calling thread, a live Java thread inside an event
        // callback.
        let frames: Vec<RawFrame> = match unsafe { env.stack_trace(std::ptr::null_mut(), depth) } {
            Ok(frames) => frames
                .iter()
                .map(|f| (f.method as usize, f.location))
                .collect(),
            Err(_) => Vec::new(),
        };
        return f(&frames);
    }
    let mut infos = [sys::jvmtiFrameInfo {
        method: std::ptr::null_mut(),
        location: 0,
    }; ON_STACK];
    let mut count: sys::jint = 0;
    let raw = env.raw();
    // SAFETY: `raw` is a live JVMTI environment (its function table is valid); a null thread
    // means the calling thread, a live Java thread inside an event callback; the buffer holds
    // `depth` <= ON_STACK frames and `count` is a local out-parameter.
    let status = unsafe {
        match (**raw).GetStackTrace {
            Some(get) => get(
                raw,
                std::ptr::null_mut(),
                0,
                depth as sys::jint,
                infos.as_mut_ptr(),
                &mut count,
            ),
            None => sys::JVMTI_ERROR_NOT_AVAILABLE,
        }
    };
    let count = if status == sys::JVMTI_ERROR_NONE {
        count.clamp(0, depth as sys::jint) as usize
    } else {
        0
    };
    let mut frames = [(0usize, 0i64); ON_STACK];
    for (frame, info) in frames.iter_mut().zip(&infos[..count]) {
        *frame = (info.method as usize, info.location);
    }
    f(&frames[..count])
}

/// Resolves raw frames to profile frames, caching methods; use on one attached thread, with an
/// environment that holds `can_get_line_numbers`.
pub fn resolver(env: Env, vm: Vm) -> impl FnMut(RawFrame) -> Frame {
    let mut resolver = Resolver::new(env, vm);
    move |(method, location)| {
        // GetStackTrace gives -1 for a native method's location, AsyncGetCallTrace NATIVE_BCI.
        let bci = if location < 0 {
            NATIVE_BCI
        } else {
            location.min(i32::MAX as i64) as i32
        };
        resolver.frame(&CallFrame {
            bci,
            method: method as sys::jmethodID,
        })
    }
}
