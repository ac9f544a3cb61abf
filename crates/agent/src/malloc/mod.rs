//! Hooks on the C allocator of the JVM's libraries and JNI code: `malloc`, `calloc`,
//! `realloc`, `posix_memalign`, `aligned_alloc` and `free`, and on `mmap`/`munmap`, installed
//! by rewriting the global offset table entries the loaded libraries call them through
//! ([`got`]) and removed by writing the old entries back, without restarting the JVM.
//!
//! Every hook calls the C library's own function first and then, for an allocation, counts
//! its bytes on the calling thread; each time the count passes the interval (0: every
//! allocation) it hands the allocation to the installed recorder with the caller's return
//! address and frame pointer, from which [`native_frames`] walks the caller's frame-pointer
//! chain. `free` (and the old block of `realloc`) goes to the free recorder, if one is
//! installed. Small assembly stubs catch the caller's frame pointer and return address on entry,
//! before any Rust code can change them.
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

mod got;

use std::cell::Cell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

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
    /// The caller's return address and frame pointer on entry to the hook.
    pub return_address: usize,
    pub frame_pointer: usize,
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
/// The entries rewritten and what they held, while installed.
static INSTALLED: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());

thread_local! {
    /// Bytes this thread may still allocate before its next sample.
    static UNTIL_SAMPLE: Cell<i64> = const { Cell::new(0) };
    /// Inside a recorder: hooks entered again only forward.
    static BUSY: Cell<bool> = const { Cell::new(false) };
    /// This thread's stack, for the frame-pointer walk (found once).
    static STACK: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
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
    if !installed.is_empty() {
        return Err("the allocator hooks are installed already".into());
    }
    INTERVAL.store(interval, Ordering::SeqCst);
    ON_ALLOCATION.store(on_allocation as usize, Ordering::SeqCst);
    ON_FREE.store(on_free.map_or(0, |f| f as usize), Ordering::SeqCst);
    RECORDING.store(true, Ordering::SeqCst);
    let hooks: [usize; NAMES.len()] = [
        jtap_malloc_hook as *const () as usize,
        jtap_calloc_hook as *const () as usize,
        jtap_realloc_hook as *const () as usize,
        jtap_posix_memalign_hook as *const () as usize,
        jtap_aligned_alloc_hook as *const () as usize,
        jtap_mmap_hook as *const () as usize,
        jtap_free_hook as *const () as usize,
        jtap_mmap_hook as *const () as usize,
        jtap_munmap_hook as *const () as usize,
    ];
    let slots = got::find(&NAMES, &|object| {
        let file = object.rsplit('/').next().unwrap_or(object);
        !(file.starts_with("libc.so")
            || file.starts_with("ld-linux")
            || file.starts_with("libjtap_agent")
            || file.starts_with("linux-vdso"))
    });
    let mut objects = std::collections::BTreeSet::new();
    for slot in &slots {
        // SAFETY: an entry `got::find` found for this function; the hook has its signature.
        match unsafe { got::exchange(slot.address, hooks[slot.function]) } {
            Ok(previous) => {
                installed.push((slot.address, previous));
                objects.insert(slot.object.as_str());
            }
            Err(e) => log!("nativemem: {}: {e}", slot.object),
        }
    }
    if installed.is_empty() {
        RECORDING.store(false, Ordering::SeqCst);
        return Err("no loaded library calls the C allocator through a table jtap can hook".into());
    }
    log!(
        "nativemem: hooked {} entries in {} libraries",
        installed.len(),
        objects.len()
    );
    Ok(objects.len())
}

/// Writes the old entries back and stops recording. Hooks already entered finish forwarding.
pub fn uninstall() {
    RECORDING.store(false, Ordering::SeqCst);
    let mut installed = INSTALLED.lock().unwrap_or_else(|e| e.into_inner());
    for (address, previous) in installed.drain(..) {
        // SAFETY: the entry was rewritten by `install` from this very value.
        if let Err(e) = unsafe { got::exchange(address, previous) } {
            log!("nativemem: restoring {address:#x}: {e}");
        }
    }
}

/// Up to `out.len()` return addresses of the caller's native frames, innermost first: the
/// hook's return address, then along the frame-pointer chain from `frame_pointer` while it
/// stays on this thread's stack and goes up, and until a return address enters `stop` (JIT
/// code, where Java frames begin). Called from a recorder.
pub fn native_frames(
    allocation: &Allocation,
    stop: &std::ops::Range<usize>,
    out: &mut [u64],
) -> usize {
    let (low, high) = stack_bounds();
    let mut count = 0;
    let mut pc = allocation.return_address;
    let mut fp = allocation.frame_pointer;
    while count < out.len() && pc != 0 && !stop.contains(&pc) {
        out[count] = pc as u64;
        count += 1;
        if !fp.is_multiple_of(8) || fp < low || fp + 16 > high {
            break;
        }
        // SAFETY: both words lie on this thread's stack (checked above), which is mapped.
        let (next, ret) = unsafe { (*(fp as *const usize), *((fp + 8) as *const usize)) };
        if next <= fp {
            break;
        }
        fp = next;
        pc = ret;
    }
    count
}

/// This thread's stack as (lowest, highest) address, found once per thread.
fn stack_bounds() -> (usize, usize) {
    STACK.with(|stack| {
        if stack.get().1 == 0 {
            // SAFETY: pthread_getattr_np fills the attribute object for the calling thread,
            // which is destroyed after its stack is read.
            unsafe {
                let mut attr: libc::pthread_attr_t = std::mem::zeroed();
                if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) == 0 {
                    let mut base: *mut c_void = std::ptr::null_mut();
                    let mut size = 0usize;
                    if libc::pthread_attr_getstack(&attr, &mut base, &mut size) == 0 {
                        stack.set((base as usize, base as usize + size));
                    }
                    libc::pthread_attr_destroy(&mut attr);
                }
            }
        }
        stack.get()
    })
}

/// Counts `size` bytes on this thread; a sample when the interval is used up.
fn allocated(function: Function, size: usize, address: usize, fp: usize, ret: usize) {
    if address == 0 || !RECORDING.load(Ordering::Relaxed) || crate::thread::is_own_thread() {
        return;
    }
    guarded(|| {
        let interval = INTERVAL.load(Ordering::Relaxed);
        if interval > 0 && !UNTIL_SAMPLE.with(|left| sample_now(left, size, interval)) {
            return;
        }
        let recorder = ON_ALLOCATION.load(Ordering::Acquire);
        let Some(_busy) = Busy::enter().filter(|_| recorder != 0) else {
            return;
        };
        // SAFETY: only `install` stores here, an `OnAllocation`.
        let recorder = unsafe { std::mem::transmute::<usize, OnAllocation>(recorder) };
        recorder(&Allocation {
            function,
            size,
            address,
            return_address: ret,
            frame_pointer: fp,
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
    guarded(|| {
        let recorder = ON_FREE.load(Ordering::Acquire);
        let Some(_busy) = Busy::enter().filter(|_| recorder != 0) else {
            return;
        };
        // SAFETY: only `install` stores here, an `OnFree`.
        let recorder = unsafe { std::mem::transmute::<usize, OnFree>(recorder) };
        recorder(address);
    })
}

/// Runs a hook's own work, which must never unwind into its C caller.
fn guarded(work: impl FnOnce()) {
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
}

/// This thread is inside a recorder until dropped: hooks it enters meanwhile only forward.
struct Busy;

impl Busy {
    /// None when the thread is inside a recorder already.
    fn enter() -> Option<Busy> {
        (!BUSY.with(|busy| busy.replace(true))).then_some(Busy)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        BUSY.with(|busy| busy.set(false));
    }
}

// Entry stubs: each passes the caller's frame pointer (rbp, untouched since the call) and
// return address (the word at rsp) as two extra arguments to its Rust hook, in the argument
// registers after the function's own, and jumps there (the Rust hook returns to the caller).
// `mmap` takes all six argument registers: its stub passes the two on the stack (the seventh
// and eighth arguments), calls its hook and returns.
std::arch::global_asm!(
    ".pushsection .text.jtap_malloc_hooks,\"ax\",@progbits",
    ".globl jtap_malloc_hook",
    ".hidden jtap_malloc_hook",
    "jtap_malloc_hook:",
    "    mov rsi, rbp",
    "    mov rdx, [rsp]",
    "    jmp {malloc}",
    ".globl jtap_calloc_hook",
    ".hidden jtap_calloc_hook",
    "jtap_calloc_hook:",
    "    mov rdx, rbp",
    "    mov rcx, [rsp]",
    "    jmp {calloc}",
    ".globl jtap_realloc_hook",
    ".hidden jtap_realloc_hook",
    "jtap_realloc_hook:",
    "    mov rdx, rbp",
    "    mov rcx, [rsp]",
    "    jmp {realloc}",
    ".globl jtap_posix_memalign_hook",
    ".hidden jtap_posix_memalign_hook",
    "jtap_posix_memalign_hook:",
    "    mov rcx, rbp",
    "    mov r8, [rsp]",
    "    jmp {posix_memalign}",
    ".globl jtap_aligned_alloc_hook",
    ".hidden jtap_aligned_alloc_hook",
    "jtap_aligned_alloc_hook:",
    "    mov rdx, rbp",
    "    mov rcx, [rsp]",
    "    jmp {aligned_alloc}",
    ".globl jtap_mmap_hook",
    ".hidden jtap_mmap_hook",
    "jtap_mmap_hook:",
    "    mov rax, [rsp]",
    "    sub rsp, 8",
    "    push rax",
    "    push rbp",
    "    call {mmap}",
    "    add rsp, 24",
    "    ret",
    ".globl jtap_free_hook",
    ".hidden jtap_free_hook",
    "jtap_free_hook:",
    "    jmp {free}",
    ".globl jtap_munmap_hook",
    ".hidden jtap_munmap_hook",
    "jtap_munmap_hook:",
    "    jmp {munmap}",
    ".popsection",
    malloc = sym malloc_hook,
    calloc = sym calloc_hook,
    realloc = sym realloc_hook,
    posix_memalign = sym posix_memalign_hook,
    aligned_alloc = sym aligned_alloc_hook,
    mmap = sym mmap_hook,
    free = sym free_hook,
    munmap = sym munmap_hook,
);

extern "C" {
    fn jtap_malloc_hook(size: usize) -> *mut c_void;
    fn jtap_calloc_hook(count: usize, size: usize) -> *mut c_void;
    fn jtap_realloc_hook(block: *mut c_void, size: usize) -> *mut c_void;
    fn jtap_posix_memalign_hook(out: *mut *mut c_void, align: usize, size: usize) -> i32;
    fn jtap_aligned_alloc_hook(align: usize, size: usize) -> *mut c_void;
    fn jtap_mmap_hook(
        address: *mut c_void,
        length: usize,
        protection: i32,
        flags: i32,
        fd: i32,
        offset: i64,
    ) -> *mut c_void;
    fn jtap_free_hook(block: *mut c_void);
    fn jtap_munmap_hook(address: *mut c_void, length: usize) -> i32;
}

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

extern "C" fn free_hook(block: *mut c_void) {
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

extern "C" fn munmap_hook(address: *mut c_void, length: usize) -> i32 {
    freed(address as usize);
    // SAFETY: the C library's munmap, with the caller's arguments.
    unsafe { libc::munmap(address, length) }
}
