//! Hooks on the C allocator of the JVM's libraries and JNI code: `malloc`, `calloc`,
//! `realloc`, `posix_memalign`, `aligned_alloc` and `free`, and on `mmap`/`munmap`, installed
//! through [`super::install`].
//!
//! Every hook calls the C library's own function first and then, for an allocation, counts
//! its bytes on the calling thread; each time the count passes the interval (0: every
//! allocation) it hands the allocation to the installed recorder with its [`Caller`].
//! `free` (and the old block of `realloc`) goes to the free recorder, if one is installed.
//!
//! A mapping counts as allocated memory unless it is `PROT_NONE` (HotSpot reserves its heap,
//! code cache and metaspace that way, then commits parts with `MAP_FIXED` mappings over the
//! reservation, and uncommits with `PROT_NONE` ones); a `MAP_FIXED` mapping first frees what
//! was mapped at its address, and `munmap` frees the mapping at its address (an unmap of part
//! of a mapping is not followed).
//!
//! Not hooked: the C library and the dynamic linker themselves (their internal allocations,
//! and code that holds their locks while allocating: `malloc`'s own large blocks, thread
//! stacks), this agent, and libraries loaded after the hooks were installed (they are hooked
//! at the next start). A hook entered again from inside a recorder (the recorder allocating)
//! only forwards.

use std::cell::Cell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use super::{entry_stub, on_hooked_thread, Caller, Hook, Installation};

/// The functions hooked: the allocation functions in the order of [`Function`], then the
/// others.
const NAMES: [&str; 9] = [
    "malloc",
    "calloc",
    "realloc",
    "posix_memalign",
    "aligned_alloc",
    "mmap",
    "free",
    "mmap64",
    "munmap",
];

/// An allocation function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Function {
    /// `malloc`.
    Malloc,
    /// `calloc`.
    Calloc,
    /// `realloc`.
    Realloc,
    /// `posix_memalign`.
    PosixMemalign,
    /// `aligned_alloc`.
    AlignedAlloc,
    /// `mmap` (or `mmap64`), a mapping that is not `PROT_NONE`.
    Mmap,
}

impl Function {
    /// Its C name.
    pub fn name(self) -> &'static str {
        NAMES[self as usize]
    }
}

/// A sampled allocation, as the recorder gets it.
#[derive(Debug, Clone, Copy)]
pub struct Allocation {
    /// What allocated.
    pub function: Function,
    /// Bytes asked for.
    pub size: usize,
    /// The block.
    pub address: usize,
    /// Where it was called from.
    pub caller: Caller,
}

/// Called for each sampled allocation, on the allocating thread.
pub type OnAllocation = fn(&Allocation);
/// Called with each freed block, on the freeing thread.
pub type OnFree = fn(usize);

/// Whether the hooks record (they forward only when not).
static RECORDING: AtomicBool = AtomicBool::new(false);
/// Sampling interval in bytes (0: every allocation).
static INTERVAL: AtomicU64 = AtomicU64::new(0);
/// The recorders (function pointers, 0 for none).
static ON_ALLOCATION: AtomicUsize = AtomicUsize::new(0);
static ON_FREE: AtomicUsize = AtomicUsize::new(0);
/// The hooks, while installed.
static INSTALLED: Mutex<Option<Installation>> = Mutex::new(None);

thread_local! {
    /// Bytes this thread may still allocate before its next sample.
    static UNTIL_SAMPLE: Cell<i64> = const { Cell::new(0) };
}

/// Installs the hooks into every loaded library but the C library, the dynamic linker and
/// this agent: sampled allocations go to `on_allocation` (one per `interval` bytes on
/// average, every one at 0), frees to `on_free`. Returns how many libraries were hooked.
pub fn install(
    interval: u64,
    on_allocation: OnAllocation,
    on_free: Option<OnFree>,
) -> Result<usize, String> {
    let mut installed = INSTALLED.lock().unwrap_or_else(|e| e.into_inner());
    if installed.is_some() {
        return Err("the allocator hooks are installed already".into());
    }
    INTERVAL.store(interval, Ordering::SeqCst);
    ON_ALLOCATION.store(on_allocation as usize, Ordering::SeqCst);
    ON_FREE.store(on_free.map_or(0, |f| f as usize), Ordering::SeqCst);
    RECORDING.store(true, Ordering::SeqCst);
    let stubs: [unsafe extern "C" fn(); NAMES.len()] = [
        jtap_malloc_hook,
        jtap_calloc_hook,
        jtap_realloc_hook,
        jtap_posix_memalign_hook,
        jtap_aligned_alloc_hook,
        jtap_mmap_hook,
        jtap_free_hook,
        jtap_mmap_hook,
        jtap_munmap_hook,
    ];
    let hooks: Vec<Hook> = NAMES
        .iter()
        .zip(stubs)
        .map(|(&name, stub)| Hook::new(name, stub))
        .collect();
    // SAFETY: each stub has its function's signature (see the stubs below).
    match unsafe { super::install("the allocator hooks", &hooks) } {
        Ok(installation) => {
            let libraries = installation.libraries();
            *installed = Some(installation);
            Ok(libraries)
        }
        Err(e) => {
            RECORDING.store(false, Ordering::SeqCst);
            Err(e)
        }
    }
}

/// Writes the old entries back and stops recording. Hooks already entered finish forwarding.
pub fn uninstall() {
    RECORDING.store(false, Ordering::SeqCst);
    let installation = INSTALLED.lock().unwrap_or_else(|e| e.into_inner()).take();
    drop(installation);
}

/// Counts `size` bytes on this thread; a sample when the interval is used up.
fn allocated(function: Function, size: usize, address: usize, fp: usize, ret: usize) {
    if address == 0 || !RECORDING.load(Ordering::Relaxed) || crate::thread::is_own_thread() {
        return;
    }
    let interval = INTERVAL.load(Ordering::Relaxed);
    if interval > 0 && !UNTIL_SAMPLE.with(|left| sample_now(left, size, interval)) {
        return;
    }
    on_hooked_thread(|| {
        let recorder = ON_ALLOCATION.load(Ordering::Acquire);
        if recorder == 0 {
            return;
        }
        // SAFETY: only `install` stores here, an `OnAllocation`.
        let recorder = unsafe { std::mem::transmute::<usize, OnAllocation>(recorder) };
        recorder(&Allocation {
            function,
            size,
            address,
            caller: Caller {
                return_address: ret,
                frame_pointer: fp,
            },
        });
    })
}

/// Takes `size` bytes off the thread's count `left`: whether they reach the next sample
/// (the count then starts again at an exponentially distributed number of bytes with mean
/// `interval`, so that allocation patterns cannot line up with the interval).
fn sample_now(left: &Cell<i64>, size: usize, interval: u64) -> bool {
    let now = left.get() - size as i64;
    if now > 0 {
        left.set(now);
        return false;
    }
    let next = -(interval as f64) * (1.0 - fastrand::f64()).ln();
    left.set(next.max(1.0) as i64);
    true
}

fn freed(address: usize) {
    if address == 0 || !RECORDING.load(Ordering::Relaxed) {
        return;
    }
    on_hooked_thread(|| {
        let recorder = ON_FREE.load(Ordering::Acquire);
        if recorder == 0 {
            return;
        }
        // SAFETY: only `install` stores here, an `OnFree`.
        let recorder = unsafe { std::mem::transmute::<usize, OnFree>(recorder) };
        recorder(address);
    })
}

// Entry stubs: each passes the caller's frame pointer and return address to its Rust hook.
entry_stub!(jtap_malloc_hook => malloc_hook, 1);
entry_stub!(jtap_calloc_hook => calloc_hook, 2);
entry_stub!(jtap_realloc_hook => realloc_hook, 2);
entry_stub!(jtap_posix_memalign_hook => posix_memalign_hook, 3);
entry_stub!(jtap_aligned_alloc_hook => aligned_alloc_hook, 2);
entry_stub!(jtap_mmap_hook => mmap_hook, 6);
entry_stub!(jtap_munmap_hook => munmap_hook, 2);
entry_stub!(jtap_free_hook => free_hook, 1);

extern "C" fn malloc_hook(size: usize, fp: usize, ret: usize) -> *mut c_void {
    // SAFETY: the C library's malloc, with the caller's argument.
    let block = unsafe { libc::malloc(size) };
    allocated(Function::Malloc, size, block as usize, fp, ret);
    block
}

extern "C" fn calloc_hook(count: usize, size: usize, fp: usize, ret: usize) -> *mut c_void {
    // SAFETY: the C library's calloc, with the caller's arguments.
    let block = unsafe { libc::calloc(count, size) };
    allocated(
        Function::Calloc,
        count.saturating_mul(size),
        block as usize,
        fp,
        ret,
    );
    block
}

extern "C" fn realloc_hook(old: *mut c_void, size: usize, fp: usize, ret: usize) -> *mut c_void {
    // The old block counts as freed before the call: once realloc returns, its address may
    // be handed out again by another thread (if realloc fails it stays allocated, untracked).
    freed(old as usize);
    // SAFETY: the C library's realloc, with the caller's arguments.
    let block = unsafe { libc::realloc(old, size) };
    allocated(Function::Realloc, size, block as usize, fp, ret);
    block
}

extern "C" fn posix_memalign_hook(
    out: *mut *mut c_void,
    align: usize,
    size: usize,
    fp: usize,
    ret: usize,
) -> i32 {
    // SAFETY: the C library's posix_memalign, with the caller's arguments.
    let result = unsafe { libc::posix_memalign(out, align, size) };
    if result == 0 && !out.is_null() {
        // SAFETY: on success the C library stored the block through `out`.
        let block = unsafe { *out } as usize;
        allocated(Function::PosixMemalign, size, block, fp, ret);
    }
    result
}

extern "C" fn aligned_alloc_hook(align: usize, size: usize, fp: usize, ret: usize) -> *mut c_void {
    // SAFETY: the C library's aligned_alloc, with the caller's arguments.
    let block = unsafe { libc::aligned_alloc(align, size) };
    allocated(Function::AlignedAlloc, size, block as usize, fp, ret);
    block
}

extern "C" fn free_hook(block: *mut c_void, _fp: usize, _ret: usize) {
    freed(block as usize);
    // SAFETY: the C library's free, with the caller's argument (recorded first: once freed the
    // address may be handed out again by another thread).
    unsafe { libc::free(block) };
}

// mmap's six arguments and the stub's two.
#[allow(clippy::too_many_arguments)]
extern "C" fn mmap_hook(
    address: *mut c_void,
    length: usize,
    protection: i32,
    flags: i32,
    fd: i32,
    offset: i64,
    fp: usize,
    ret: usize,
) -> *mut c_void {
    if flags & libc::MAP_FIXED != 0 {
        // Whatever was mapped there goes (recorded first, as for `free`).
        freed(address as usize);
    }
    // SAFETY: the C library's mmap, with the caller's arguments.
    let mapped = unsafe { libc::mmap(address, length, protection, flags, fd, offset) };
    if mapped != libc::MAP_FAILED && protection != libc::PROT_NONE {
        allocated(Function::Mmap, length, mapped as usize, fp, ret);
    }
    mapped
}

extern "C" fn munmap_hook(address: *mut c_void, length: usize, _fp: usize, _ret: usize) -> i32 {
    freed(address as usize);
    // SAFETY: the C library's munmap, with the caller's arguments.
    unsafe { libc::munmap(address, length) }
}
