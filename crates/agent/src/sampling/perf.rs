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
//! sample's chain into the sample slot next to `AsyncGetCallTrace`'s Java frames and marks
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

use std::ffi::c_int;
use std::io;
use std::sync::atomic::{fence, AtomicUsize, Ordering};

use perf_event_open_sys::bindings::perf_event_mmap_page;

/// Most call-chain entries (frames and context markers) kept per sample: the kernel's
/// default `perf_event_max_stack` (127) plus its context markers.
pub const MAX_CHAIN: usize = 136;

/// Descriptor numbers the table covers (higher ones cannot be used for sampling).
const MAX_FDS: usize = 65536;

/// Descriptor → ring: 0 not ours, [`NO_RING`] ours without a ring, else the ring's address.
static RINGS: [AtomicUsize; MAX_FDS] = [const { AtomicUsize::new(0) }; MAX_FDS];
const NO_RING: usize = 1;

/// `PERF_RECORD_SAMPLE`.
const RECORD_SAMPLE: u32 = 9;

/// A perf_event ring buffer mapped for one descriptor; unmapped on drop.
pub struct Ring {
    base: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; only its owner's thread's handler reads it.
unsafe impl Send for Ring {}

impl Ring {
    /// Maps the ring of `fd` (one metadata page and one data page).
    pub fn map(fd: c_int) -> io::Result<Ring> {
        let len = 2 * page_size();
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

/// Records `fd` as one of ours, with its ring if it has one. False when the descriptor
/// number is too high to track.
pub fn register(fd: c_int, ring: Option<&Ring>) -> bool {
    let Some(entry) = usize::try_from(fd).ok().and_then(|fd| RINGS.get(fd)) else {
        return false;
    };
    entry.store(ring.map_or(NO_RING, |r| r.base as usize), Ordering::SeqCst);
    true
}

/// Forgets `fd` (before its ring is unmapped and the descriptor closed).
pub fn unregister(fd: c_int) {
    if let Some(entry) = usize::try_from(fd).ok().and_then(|fd| RINGS.get(fd)) {
        entry.store(0, Ordering::SeqCst);
    }
}

/// Whether `fd` is one of ours. Async-signal-safe.
pub fn is_ours(fd: c_int) -> bool {
    usize::try_from(fd)
        .ok()
        .and_then(|fd| RINGS.get(fd))
        .is_some_and(|e| e.load(Ordering::Acquire) != 0)
}

/// Copies the call chain of the newest sample in `fd`'s ring into `out` (leaf first, with
/// the kernel's `PERF_CONTEXT_*` markers) and consumes every record in the ring. Returns how
/// many entries it wrote (0 without a ring or sample). Async-signal-safe; call it only on
/// the thread the descriptor signals.
pub fn take_callchain(fd: c_int, out: &mut [u64]) -> usize {
    let Some(entry) = usize::try_from(fd).ok().and_then(|fd| RINGS.get(fd)) else {
        return 0;
    };
    let base = entry.load(Ordering::Acquire);
    if base == 0 || base == NO_RING {
        return 0;
    }
    // Set by `Ring::map` before any ring was registered.
    let data_size = PAGE_SIZE.load(Ordering::Relaxed) as u64;
    if data_size == 0 {
        return 0;
    }
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
    let data = (base + data_size as usize) as *const u8;
    // SAFETY: offsets are reduced modulo the data page; records are 8-byte aligned.
    let word = |offset: u64| unsafe {
        std::ptr::read_volatile(data.add((offset % data_size) as usize).cast::<u64>())
    };
    let mut written = 0;
    let mut at = tail;
    // A ring that is inconsistent (head behind tail, or more than one page of records) is
    // skipped whole.
    if head >= tail && head - tail <= data_size {
        while at + 8 <= head {
            let header = word(at);
            let (kind, size) = (header as u32, header >> 48);
            if size < 8 || at + size > head {
                break;
            }
            if kind == RECORD_SAMPLE && size >= 16 {
                let nr = word(at + 8).min((size - 16) / 8) as usize;
                let n = nr.min(out.len());
                for (i, slot) in out[..n].iter_mut().enumerate() {
                    *slot = word(at + 16 + 8 * i as u64);
                }
                written = n;
            }
            at += size;
        }
    }
    // Everything up to head is consumed, whatever was in it.
    fence(Ordering::Release);
    // SAFETY: as above; data_tail tells the kernel the space is free again.
    unsafe { std::ptr::write_volatile(&mut (*meta).data_tail, head) };
    written
}
