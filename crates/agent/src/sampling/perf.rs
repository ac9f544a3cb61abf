//! The perf_event descriptors of the `cpu` engine, as the signal handler sees them: which
//! descriptors are ours, and the ring buffer each one writes its samples' call chains into.
//!
//! # Native and kernel frames
//!
//! Every counter is opened with `PERF_SAMPLE_CALLCHAIN` and a small ring buffer mapped per
//! thread (one metadata page and one data page). When the counter overflows, the kernel
//! writes a sample record holding the interrupted thread's call chain — kernel frames when
//! it was in the kernel, then the user frames the kernel walks itself along the frame
//! pointers, with its own fault-safe user-memory reads — and then signals the thread. The
//! handler runs on that very thread, after the record was written: it copies the newest
//! sample's chain into the sample slot next to the Java frames (only its kernel part when
//! the thread was in the code cache: no native frame lies above a Java one there) and marks
//! the ring as read.
//!
//! This way no user memory is ever read by jtap inside a signal handler: the kernel's walk
//! cannot fault the JVM, and whatever it finds past the native frames (JIT-compiled code
//! without frame pointers, garbage) is cut off later by the processing thread, which keeps
//! only the leading user frames that lie in mapped libraries. Reading the ring is plain
//! loads and stores on memory mapped before sampling started, ordered by the ring's
//! `data_head`/`data_tail` protocol: async-signal-safe, no allocation, no lock. A ring is
//! only read by the handler on the thread that owns it (the counter signals its own
//! thread), so there is one reader per ring.
//!
//! Where the ring cannot be mapped (the locked-memory limit of an unprivileged user) the
//! descriptor still samples, without native frames.
//!
//! # DWARF unwinding
//!
//! Frame pointers lose the callers of code built without them (Debian's zlib). With
//! `cstack=dwarf` the counter also asks for the user registers the unwinder starts from
//! (`PERF_SAMPLE_REGS_USER`: bp, sp, ip) and a copy of the top [`STACK_BYTES`] of the user
//! stack (`PERF_SAMPLE_STACK_USER`), which the kernel takes with its own fault-safe reads. The
//! handler copies both into the sample slot; the processing thread unwinds that copy with the
//! libraries' call-frame information (see [`super::unwind`]). The ring then has
//! [`DWARF_DATA_PAGES`] data pages, room for one such record.

use std::ffi::c_int;
use std::io;
use std::num::NonZeroU64;
use std::sync::atomic::{fence, AtomicI32, AtomicUsize, Ordering};

use perf_event_open_sys::bindings::perf_event_mmap_page;

use super::native::CONTEXT_USER;

/// Most call-chain entries (frames and context markers) kept per sample: the kernel's
/// default `perf_event_max_stack` (127) plus its context markers.
pub const MAX_CHAIN: usize = 136;

/// Bytes of the user stack copied with each sample under `cstack=dwarf` (perf's own
/// default for `--call-graph dwarf`).
pub const STACK_BYTES: usize = 8192;
/// `sample_regs_user` under `cstack=dwarf`: bp, sp and ip (bits 6, 7, 8 of the x86-64
/// `perf_event_x86_regs` numbering); a record lists them in that order.
pub const USER_REGS: u64 = (1 << 6) | (1 << 7) | (1 << 8);
/// Data pages of a ring whose records carry a stack copy.
pub const DWARF_DATA_PAGES: usize = 4;

/// Descriptor numbers the table covers (higher ones cannot be used for sampling).
const MAX_FDS: usize = 65536;

/// Descriptor → ring: 0 not ours, [`NO_RING`] ours without a ring, else the ring's address
/// (page-aligned) with [`WITH_STACK`] set for a ring of stack-carrying records; either with
/// [`CONTINUOUS`] set for a counter the handler does not re-arm.
static RINGS: [AtomicUsize; MAX_FDS] = [const { AtomicUsize::new(0) }; MAX_FDS];
/// Descriptor → the thread whose counter it is (0: none). A signal can name another thread's
/// descriptor (one queued for a counter since closed, whose number a counter of another thread
/// took); that thread may unmap its ring at any time, so a handler reads only its own.
static OWNERS: [AtomicI32; MAX_FDS] = [const { AtomicI32::new(0) }; MAX_FDS];
const NO_RING: usize = 1;
const WITH_STACK: usize = 2;
const CONTINUOUS: usize = 4;

/// `PERF_RECORD_SAMPLE`.
const RECORD_SAMPLE: u32 = 9;

/// A perf_event ring buffer mapped for one descriptor; unmapped on drop.
pub struct Ring {
    base: *mut u8,
    len: usize,
    /// Its records carry user registers and a stack copy (`cstack=dwarf`).
    with_stack: bool,
}

// SAFETY: the mapping is plain shared memory; only its owner's thread's handler reads it.
unsafe impl Send for Ring {}

impl Ring {
    /// Maps the ring of `fd`: one metadata page and one data page, or [`DWARF_DATA_PAGES`]
    /// when the descriptor's records carry a stack copy.
    pub fn map(fd: c_int, with_stack: bool) -> io::Result<Ring> {
        let data_pages = if with_stack { DWARF_DATA_PAGES } else { 1 };
        let len = (1 + data_pages) * page_size();
        // SAFETY: a fresh shared mapping of a perf_event descriptor, as perf_event_open(2)
        // describes; nothing else is at the address the kernel picks.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Ring {
            base: base.cast(),
            len,
            with_stack,
        })
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping `map` made; callers unregister the descriptor
        // first, so no handler reads it any more.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// The page size, looked up once outside signal handlers (by [`Ring::map`]).
static PAGE_SIZE: AtomicUsize = AtomicUsize::new(0);

fn page_size() -> usize {
    let cached = PAGE_SIZE.load(Ordering::Relaxed);
    if cached != 0 {
        return cached;
    }
    // SAFETY: sysconf has no preconditions.
    let size = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
        .unwrap_or(4096)
        .max(4096);
    PAGE_SIZE.store(size, Ordering::Relaxed);
    size
}

/// Records `fd` as one of ours, the counter of thread `owner`, with its ring if it has one.
/// False when the descriptor number is too high to track.
pub fn register(fd: c_int, ring: Option<&Ring>, continuous: bool, owner: i32) -> bool {
    let Some(index) = usize::try_from(fd).ok().filter(|&fd| fd < MAX_FDS) else {
        return false;
    };
    let entry = &RINGS[index];
    // The owner first: a handler that finds the ring finds whose it is.
    OWNERS[index].store(owner, Ordering::SeqCst);
    let value = ring.map_or(NO_RING, |r| {
        r.base as usize | if r.with_stack { WITH_STACK } else { 0 }
    });
    let value = if continuous {
        value | CONTINUOUS
    } else {
        value
    };
    entry.store(value, Ordering::SeqCst);
    true
}

/// Forgets `fd` (before its ring is unmapped and the descriptor closed).
pub fn unregister(fd: c_int) {
    if let Some(index) = usize::try_from(fd).ok().filter(|&fd| fd < MAX_FDS) {
        RINGS[index].store(0, Ordering::SeqCst);
        OWNERS[index].store(0, Ordering::SeqCst);
    }
}

/// Whether the handler re-arms `fd` after its overflow (`PERF_EVENT_IOC_REFRESH`): every
/// counter but the continuous ones (tracepoints), which stay enabled. Async-signal-safe.
pub fn rearms(fd: c_int) -> bool {
    usize::try_from(fd)
        .ok()
        .and_then(|fd| RINGS.get(fd))
        .is_some_and(|e| e.load(Ordering::Acquire) & CONTINUOUS == 0)
}

/// Whether `fd` is one of ours. Async-signal-safe.
pub fn is_ours(fd: c_int) -> bool {
    usize::try_from(fd)
        .ok()
        .and_then(|fd| RINGS.get(fd))
        .is_some_and(|e| e.load(Ordering::Acquire) != 0)
}

/// Where the handler copies the newest sample's user registers and stack (`cstack=dwarf`).
pub struct UserStack<'a> {
    /// bp, sp, ip.
    pub regs: &'a mut [u64; 3],
    /// The stack from sp up.
    pub bytes: &'a mut [u8],
}

/// Copies the call chain of the newest sample in `fd`'s ring into `chain` (leaf first, with
/// the kernel's `PERF_CONTEXT_*` markers; its kernel part only, up to the user part's
/// marker, unless `with_user_frames`) and, when the ring's records carry them, its user
/// registers and as much of its stack as `user` has room for; then consumes every record in
/// the ring. Returns the chain entries and stack bytes written (0 without a ring or sample,
/// or when `fd` is not the counter of thread `tid`, the caller's). Async-signal-safe.
pub fn take_sample(
    fd: c_int,
    tid: i32,
    chain: &mut [u64],
    with_user_frames: bool,
    mut user: UserStack<'_>,
) -> (usize, usize) {
    let Some(index) = usize::try_from(fd).ok().filter(|&fd| fd < MAX_FDS) else {
        return (0, 0);
    };
    // Another thread's ring may be unmapped under us: only the caller's own is read (its
    // ring goes only on this thread, or once sampling has stopped).
    if OWNERS[index].load(Ordering::Acquire) != tid {
        return (0, 0);
    }
    let value = RINGS[index].load(Ordering::Acquire) & !CONTINUOUS;
    if value == 0 || value == NO_RING {
        return (0, 0);
    }
    let (base, with_stack) = (value & !WITH_STACK, value & WITH_STACK != 0);
    // Set by `Ring::map` before any ring was registered.
    let page = PAGE_SIZE.load(Ordering::Relaxed) as u64;
    if page == 0 {
        return (0, 0);
    }
    let data_size = if with_stack {
        page * DWARF_DATA_PAGES as u64
    } else {
        page
    };
    let meta = base as *mut perf_event_mmap_page;
    // SAFETY: the ring stays mapped while its descriptor is registered (unregistering comes
    // first, on this same thread or after sampling stopped); the metadata page is ours to
    // read, and data_tail ours to write.
    let (head, tail) = unsafe {
        (
            std::ptr::read_volatile(&(*meta).data_head),
            std::ptr::read_volatile(&(*meta).data_tail),
        )
    };
    // Pairs with the kernel's barrier after writing records and before publishing data_head.
    fence(Ordering::Acquire);
    let Some(size) = NonZeroU64::new(data_size) else {
        return (0, 0);
    };
    let ring = RingData {
        data: (base + page as usize) as *const u8,
        size,
    };
    let word = |offset: u64| ring.word(offset);
    let mut written = (0, 0);
    let mut at = tail;
    // A ring that is inconsistent (head behind tail, or more records than it holds) is
    // skipped whole.
    if head >= tail && head - tail <= data_size {
        while at + 8 <= head {
            let header = word(at);
            let (kind, size) = (header as u32, header >> 48);
            if size < 8 || at + size > head {
                break;
            }
            let end = at + size;
            if kind == RECORD_SAMPLE && size >= 16 {
                let nr = word(at + 8).min((size - 16) / 8);
                let mut n = 0;
                for (i, slot) in chain.iter_mut().take(nr as usize).enumerate() {
                    let entry = word(at + 16 + 8 * i as u64);
                    if entry == CONTEXT_USER && !with_user_frames {
                        break;
                    }
                    *slot = entry;
                    n += 1;
                }
                written = (n, 0);
                if with_stack {
                    written.1 = copy_user_stack(&ring, at + 16 + 8 * nr, end, &mut user);
                }
            }
            at = end;
        }
    }
    // Everything up to head is consumed, whatever was in it.
    fence(Ordering::Release);
    // SAFETY: as above; data_tail tells the kernel the space is free again.
    unsafe { std::ptr::write_volatile(&mut (*meta).data_tail, head) };
    written
}

/// Copies a sample record's `PERF_SAMPLE_REGS_USER` and `PERF_SAMPLE_STACK_USER` parts,
/// which start at `at` and end before `end`, into `user`; returns the stack bytes copied (0
/// when the sample has no user registers, e.g. a kernel thread's).
fn copy_user_stack(ring: &RingData, mut at: u64, end: u64, user: &mut UserStack<'_>) -> usize {
    let field = |at: u64| (at + 8 <= end).then(|| ring.word(at));
    // The ABI word: 0 (PERF_SAMPLE_REGS_ABI_NONE) when there are no user registers.
    let Some(abi) = field(at) else { return 0 };
    at += 8;
    if abi == 0 {
        return 0;
    }
    for reg in user.regs.iter_mut() {
        let Some(value) = field(at) else { return 0 };
        *reg = value;
        at += 8;
    }
    let Some(size) = field(at) else { return 0 };
    at += 8;
    // The dump is `size` bytes, of which the `dyn_size` word after it says how many are real.
    let Some(dynamic) = size.checked_add(at).and_then(field) else {
        return 0;
    };
    let n = dynamic.min(size).min(user.bytes.len() as u64) as usize;
    ring.copy(at, &mut user.bytes[..n]);
    n
}

/// The data area of a mapped ring: `size` bytes (a power of two) at `data`, which records
/// wrap around.
struct RingData {
    data: *const u8,
    size: NonZeroU64,
}

impl RingData {
    /// The 8-byte word at `offset` (records are 8-byte aligned).
    fn word(&self, offset: u64) -> u64 {
        // SAFETY: the offset is reduced modulo the data area, which stays mapped while the
        // ring is registered (see `take_sample`).
        unsafe {
            std::ptr::read_volatile(self.data.add((offset % self.size) as usize).cast::<u64>())
        }
    }

    /// Copies the bytes from `offset` on into `out`, in at most two pieces where they wrap.
    fn copy(&self, offset: u64, out: &mut [u8]) {
        let size = self.size.get() as usize;
        let len = out.len().min(size);
        let out = &mut out[..len];
        let start = (offset % self.size) as usize;
        let first = out.len().min(size - start);
        let (head, tail) = out.split_at_mut(first);
        // SAFETY: both pieces lie inside the data area (`start + first <= size`, and the
        // rest from 0, at most `len <= size` bytes in all), which does not overlap
        // `out`; the kernel wrote them before publishing data_head, which the caller read
        // with an acquire fence.
        unsafe {
            std::ptr::copy_nonoverlapping(self.data.add(start), head.as_mut_ptr(), head.len());
            std::ptr::copy_nonoverlapping(self.data, tail.as_mut_ptr(), tail.len());
        }
    }
}
