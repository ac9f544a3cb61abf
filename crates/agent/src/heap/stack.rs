//! Stacks for the alloc and lock engines, taken inside event callbacks (which run on the
//! thread concerned, at a point where its stack is walkable) and resolved to
//! `pkg.Class.method:line` frames later, off the hot path. Taking a stack allocates nothing
//! (up to 128 frames).
//!
//! Stacks come from jtap's own walker ([`crate::walk`]) where it can walk, else from JVMTI's
//! `GetStackTrace` (`walker=jvmti` always). The walker is trusted only after its first
//! [`VERIFIED_WALKS`] stacks matched JVMTI's frame for frame; one difference and the process
//! goes back to JVMTI for good, saying so in the log. `walker=check` compares every stack.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering};

use jtap_jvmti::{sys, Env};
use jtap_profile::Frame;
use jtap_protocol::JavaStacks;

use crate::heap::sites::RawFrame;
use crate::sampling::asgct::{CallFrame, NATIVE_BCI};
use crate::sampling::methods;
use crate::sampling::methods::Resolver;
use crate::thread::Vm;
use crate::walk;

/// Frames a callback takes into a buffer on its own stack; deeper requests use the heap.
const ON_STACK: usize = 128;
/// Stacks of the walker compared with JVMTI's before it is trusted alone.
const VERIFIED_WALKS: u32 = 64;

/// How stacks are taken now: one of the `MODE_*`.
static MODE: AtomicU8 = AtomicU8::new(MODE_JVMTI);
const MODE_JVMTI: u8 = 0;
const MODE_VM: u8 = 1;
const MODE_CHECK: u8 = 2;
/// Walks still to be compared before the walker is trusted.
static UNVERIFIED: AtomicU32 = AtomicU32::new(VERIFIED_WALKS);
/// The walker once differed from JVMTI outside `check`: it is not used again.
static DISTRUSTED: AtomicBool = AtomicBool::new(false);
/// Differences logged in full (the rest are counted).
const LOGGED_DIFFERENCES: u64 = 5;

/// Chooses how callbacks take stacks from now on, on a thread attached to the VM; a note
/// when the choice cannot be had (the walker does not know this VM: JVMTI is used).
pub fn choose(vm: Vm, env: &Env, choice: JavaStacks, stats: &Stats) -> Option<String> {
    stats.reset();
    if choice == JavaStacks::Jvmti {
        MODE.store(MODE_JVMTI, Ordering::SeqCst);
        return None;
    }
    let walker = match env.version_number() {
        Ok(version) => walk::walker(vm, version),
        Err(_) => Err("JVMTI has no version number".to_string()),
    };
    match walker {
        Ok(_) if choice == JavaStacks::Vm && DISTRUSTED.load(Ordering::SeqCst) => {
            MODE.store(MODE_JVMTI, Ordering::SeqCst);
            Some("stacks by JVMTI: jtap's walker differed from it earlier (see the log)".into())
        }
        Ok(_) => {
            // The walker names methods by jmethodIDs, which exist only once asked for: those
            // of the loaded classes now (a class loaded later gets its own at its first stack,
            // which JVMTI takes).
            if let Err(e) = methods::prepare_loaded_classes(env, vm) {
                log!("stacks: jmethodIDs not created at start: {e}");
            }
            let mode = if choice == JavaStacks::Check {
                MODE_CHECK
            } else {
                MODE_VM
            };
            MODE.store(mode, Ordering::SeqCst);
            None
        }
        Err(why) => {
            MODE.store(MODE_JVMTI, Ordering::SeqCst);
            log!("stacks: jtap's walker cannot walk this VM ({why}); JVMTI takes them");
            Some(format!("stacks by JVMTI: {why}"))
        }
    }
}

/// How one engine's stacks were taken since [`choose`].
pub use crate::walk::Stats;

/// One line for the log: `stats`, and whether JVMTI takes every stack now.
pub fn summary(stats: &Stats) -> String {
    format!(
        "{}{}",
        stats.summary("JVMTI"),
        if MODE.load(Ordering::Relaxed) == MODE_JVMTI {
            "; JVMTI only now"
        } else {
            ""
        },
    )
}

/// Calls `f` with up to `depth` frames of the calling thread's Java stack, top first (empty if
/// the VM cannot say). `jni` is the calling thread's JNIEnv, and the thread is inside a JVMTI
/// event callback or a native method. Up to [`ON_STACK`] frames, nothing is allocated.
pub fn with_current<R>(
    env: &Env,
    jni: *mut sys::JNIEnv,
    depth: usize,
    stats: &Stats,
    f: impl FnOnce(&[RawFrame]) -> R,
) -> R {
    let mode = MODE.load(Ordering::Relaxed);
    if mode != MODE_JVMTI && depth <= ON_STACK && !jni.is_null() {
        if let Some(walker) = walk::resolved() {
            let mut walked = [(0usize, 0i64); ON_STACK];
            // SAFETY: (caller) `jni` is this thread's JNIEnv inside a callback or native
            // method.
            match unsafe { walker.current(jni, &mut walked[..depth]) } {
                Ok(count) => {
                    let walked = &walked[..count];
                    let verify = mode == MODE_CHECK
                        || (UNVERIFIED.load(Ordering::Relaxed) > 0
                            && UNVERIFIED
                                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                                    n.checked_sub(1)
                                })
                                .is_ok());
                    if !verify {
                        stats.walked();
                        return f(walked);
                    }
                    return with_jvmti(env, depth, |frames| {
                        let same = frames == walked;
                        let before = stats.compared(if same {
                            walk::Comparison::Same
                        } else {
                            walk::Comparison::Differed
                        });
                        if !same {
                            differed(walked, frames, mode, before);
                        }
                        f(frames)
                    });
                }
                Err(stop) => stats.stopped(stop),
            }
        }
    }
    with_jvmti(env, depth, f)
}

/// The walker's stack differs from JVMTI's: logged (the first few), and outside `check`
/// the walker is no longer used.
fn differed(walked: &[RawFrame], jvmti: &[RawFrame], mode: u8, n: u64) {
    if mode != MODE_CHECK {
        DISTRUSTED.store(true, Ordering::SeqCst);
        MODE.store(MODE_JVMTI, Ordering::Relaxed);
        log!("stacks: jtap's walker differed from JVMTI; JVMTI takes them from now on");
    }
    if n < LOGGED_DIFFERENCES {
        log!("stacks: walker {walked:x?}, JVMTI {jvmti:x?}");
    }
}

/// [`with_current`] by JVMTI's `GetStackTrace`.
fn with_jvmti<R>(env: &Env, depth: usize, f: impl FnOnce(&[RawFrame]) -> R) -> R {
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
pub fn resolver(env: &Env, vm: Vm) -> impl FnMut(RawFrame) -> Frame + '_ {
    let mut resolver = Resolver::new(env, vm);
    move |(method, location)| {
        // GetStackTrace gives -1 for a native method's location, AsyncGetCallTrace NATIVE_BCI.
        let bci = if location < 0 {
            NATIVE_BCI
        } else {
            location.min(i32::MAX as i64) as i32
        };
        resolver.frame(&CallFrame::new(method as sys::jmethodID, bci))
    }
}
