//! Stacks for the alloc and lock engines: taken with JVMTI `GetStackTrace` inside event
//! callbacks (which run on the thread concerned, at a point where its stack is walkable), and
//! resolved to `pkg.Class.method:line` frames later, off the hot path.

use jtap_jvmti::{sys, Env};
use jtap_profile::Frame;

use crate::heap::sites::RawFrame;
use crate::sampling::asgct::{CallFrame, NATIVE_BCI};
use crate::sampling::methods::Resolver;
use crate::thread::Vm;

/// Up to `depth` frames of the calling thread's Java stack, top first (empty if the VM
/// cannot say).
pub fn current(env: &Env, depth: usize) -> Box<[RawFrame]> {
    // SAFETY: a null thread means the calling thread, which is a live Java thread inside an
    // event callback.
    match unsafe { env.stack_trace(std::ptr::null_mut(), depth) } {
        Ok(frames) => frames.iter().map(|f| (f.method as usize, f.location)).collect(),
        Err(_) => Box::new([]),
    }
}

/// Resolves raw frames to profile frames, caching methods; use on one attached thread, with an
/// environment that holds `can_get_line_numbers`.
pub fn resolver(env: Env, vm: Vm) -> impl FnMut(RawFrame) -> Frame {
    let mut resolver = Resolver::new(env, vm);
    move |(method, location)| {
        // GetStackTrace gives -1 for a native method's location, AsyncGetCallTrace NATIVE_BCI.
        let bci = if location < 0 { NATIVE_BCI } else { location.min(i32::MAX as i64) as i32 };
        resolver.frame(&CallFrame { bci, method: method as sys::jmethodID })
    }
}
