//! The nativelock engine: waits of the JVM's libraries and JNI code on pthread locks and
//! conditions that take at least a threshold (`nativelock=<duration>`, default 10us),
//! weighted by the time waited, with native and Java stacks (async-profiler 4.3's
//! `nativelock`, with condition waits too).
//!
//! Hooked ([`crate::hooks`]): `pthread_mutex_lock`, `pthread_rwlock_rdlock`,
//! `pthread_rwlock_wrlock`, `pthread_cond_wait` and `pthread_cond_timedwait`. A lock is tried
//! first (`pthread_mutex_trylock`, `pthread_rwlock_tryrdlock`, `pthread_rwlock_trywrlock`):
//! an uncontended lock costs that one call and nothing else; only when the try finds the lock
//! held is the wait timed, with two reads of the monotonic clock. A condition wait is always
//! timed. A wait at or above the threshold is recorded at its site
//! ([`crate::hooks::site`]): the function as the leaf, then the native and the Java frames.
//!
//! Condition waits are where threads idle (HotSpot's own monitors, `LockSupport.park`), so
//! they can outweigh lock contention: their leaf tells them apart. Not seen: locks the C
//! library takes inside itself, HotSpot's spin locks, and libraries loaded after the start.

use std::ffi::c_int;
use std::time::{Duration, Instant};

use jtap_profile::event;
use jtap_protocol::Options;

use super::timed::TimedEngine;
use crate::hooks::timed::TimedCalls;
use crate::hooks::{entry_stub, Caller, Hook};

/// Default threshold: shorter waits are not recorded.
pub const DEFAULT_THRESHOLD: Duration = Duration::from_micros(10);

static CALLS: TimedCalls = TimedCalls::new(&event::NATIVELOCK);

/// The engine.
pub fn engine() -> TimedEngine {
    let threshold = |options: &Options| options.nativelock.flatten().unwrap_or(DEFAULT_THRESHOLD);
    // SAFETY: each stub has the signature of the function it is named for (see below).
    unsafe { TimedEngine::new(&CALLS, threshold, hooked) }
}

/// A wait that began at `start`: recorded when it took the threshold or more.
fn waited(name: &'static str, start: Instant, fp: usize, ret: usize) {
    let caller = Caller {
        return_address: ret,
        frame_pointer: fp,
    };
    CALLS.took(
        start.elapsed().as_nanos() as u64,
        || name.to_string(),
        &caller,
    );
}

/// The hooks, by C name.
fn hooked() -> Vec<Hook> {
    vec![
        Hook::new("pthread_mutex_lock", jtap_lock_mutex),
        Hook::new("pthread_rwlock_rdlock", jtap_lock_rdlock),
        Hook::new("pthread_rwlock_wrlock", jtap_lock_wrlock),
        Hook::new("pthread_cond_wait", jtap_lock_cond_wait),
        Hook::new("pthread_cond_timedwait", jtap_lock_cond_timedwait),
    ]
}

entry_stub!(jtap_lock_mutex => mutex_lock_hook, 1);
entry_stub!(jtap_lock_rdlock => rdlock_hook, 1);
entry_stub!(jtap_lock_wrlock => wrlock_hook, 1);
entry_stub!(jtap_lock_cond_wait => cond_wait_hook, 2);
entry_stub!(jtap_lock_cond_timedwait => cond_timedwait_hook, 3);

// The hooks: each calls the C library's functions with the caller's arguments and returns
// what the lock or wait returned. A try that does not find the lock held (0, or an error the
// lock call would return too, e.g. EOWNERDEAD with the lock taken, EAGAIN, EINVAL) is the
// answer; EBUSY means held, and then the lock call is the answer. Condition waits are
// cancellation points ("C-unwind": a thread cancelled inside unwinds through the hook,
// which holds nothing to clean up).

extern "C" fn mutex_lock_hook(mutex: *mut libc::pthread_mutex_t, fp: usize, ret: usize) -> c_int {
    // SAFETY: the C library's functions, with the caller's argument.
    let tried = unsafe { libc::pthread_mutex_trylock(mutex) };
    if tried != libc::EBUSY {
        return tried;
    }
    let start = Instant::now();
    // SAFETY: as above.
    let result = unsafe { libc::pthread_mutex_lock(mutex) };
    waited("pthread_mutex_lock", start, fp, ret);
    result
}

extern "C" fn rdlock_hook(lock: *mut libc::pthread_rwlock_t, fp: usize, ret: usize) -> c_int {
    // SAFETY: the C library's functions, with the caller's argument.
    let tried = unsafe { libc::pthread_rwlock_tryrdlock(lock) };
    if tried != libc::EBUSY {
        return tried;
    }
    let start = Instant::now();
    // SAFETY: as above.
    let result = unsafe { libc::pthread_rwlock_rdlock(lock) };
    waited("pthread_rwlock_rdlock", start, fp, ret);
    result
}

extern "C" fn wrlock_hook(lock: *mut libc::pthread_rwlock_t, fp: usize, ret: usize) -> c_int {
    // SAFETY: the C library's functions, with the caller's argument.
    let tried = unsafe { libc::pthread_rwlock_trywrlock(lock) };
    if tried != libc::EBUSY {
        return tried;
    }
    let start = Instant::now();
    // SAFETY: as above.
    let result = unsafe { libc::pthread_rwlock_wrlock(lock) };
    waited("pthread_rwlock_wrlock", start, fp, ret);
    result
}

extern "C-unwind" fn cond_wait_hook(
    cond: *mut libc::pthread_cond_t,
    mutex: *mut libc::pthread_mutex_t,
    fp: usize,
    ret: usize,
) -> c_int {
    let start = Instant::now();
    // SAFETY: the C library's function, with the caller's arguments.
    let result = unsafe { libc::pthread_cond_wait(cond, mutex) };
    waited("pthread_cond_wait", start, fp, ret);
    result
}

extern "C-unwind" fn cond_timedwait_hook(
    cond: *mut libc::pthread_cond_t,
    mutex: *mut libc::pthread_mutex_t,
    deadline: *const libc::timespec,
    fp: usize,
    ret: usize,
) -> c_int {
    let start = Instant::now();
    // SAFETY: the C library's function, with the caller's arguments.
    let result = unsafe { libc::pthread_cond_timedwait(cond, mutex, deadline) };
    waited("pthread_cond_timedwait", start, fp, ret);
    result
}
