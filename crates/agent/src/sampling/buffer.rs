//! The sample buffer between signal handlers and the processing thread: a fixed array of
//! slots allocated before sampling starts, claimed and released with atomics only — no lock,
//! no allocation — so that writing into it is async-signal-safe. When no slot is free the
//! sample is dropped and counted.
//!
//! A slot goes `FREE → WRITING` (a handler claims it with a compare-and-swap), `WRITING →
//! READY` (the handler filled it), `READY → FREE` (the processing thread copied it out).
//! Samples are summed into a profile, so their order does not matter.
//!
//! Besides `AsyncGetCallTrace`'s Java frames, a slot has room for a perf_event call chain
//! (native and kernel return addresses, see [`super::perf`]) when the engine provides one,
//! and for a copy of the top of the user stack when it unwinds native frames with DWARF.

use std::cell::UnsafeCell;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::asgct::CallFrame;
use crate::walk::Mounted;

const FREE: u32 = 0;
const WRITING: u32 = 1;
const READY: u32 = 2;

/// How many slots a writer tries before it drops its sample.
const PROBES: usize = 8;

/// What a handler records besides the frames.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SampleHeader {
    /// Kernel id of the sampled thread.
    pub tid: i32,
    /// When the sample was taken: CLOCK_MONOTONIC, nanoseconds.
    pub time_ns: u64,
    /// Frames written, or the stack walk's failure code (≤ 0).
    pub num_frames: i32,
    /// The weight of one sample (nanoseconds of CPU or wall time).
    pub weight: u64,
    /// How many samples this one stands for: more than 1 when a timer expired several times
    /// before its signal was delivered (its overrun).
    pub count: u32,
    /// The thread's scheduler state when it was picked ([`super::ThreadState`] as a byte; 0
    /// when not recorded).
    pub state: u8,
    /// The thread's CPU time (ns) when it was found asleep (0: running, or not recorded),
    /// for [`super::idle`].
    pub asleep_at_cpu_ns: u64,
    /// Entries of the perf_event call chain written next to the frames (0: none).
    pub chain: u16,
    /// Where the thread was interrupted (the signal context's instruction pointer; 0 when
    /// unknown).
    pub pc: u64,
    /// Set when the frames were walked from the caller after `AsyncGetCallTrace` failed at
    /// `pc` (see [`super::recover`]): what `pc` was in (`recover::FROM_*`), else 0.
    pub recovered: u8,
    /// For a recovered sample, the return address the walk started from (0 otherwise).
    pub caller_pc: u64,
    /// Who walked the Java frames: `WALKED_BY_*`, or [`WALKS_DIFFERED`].
    pub walker: u8,
    /// With [`WALKS_DIFFERED`], the frames jtap's walker wrote into the slot's second half.
    pub checked: u16,
    /// With [`WALKED_BY_VM`], a hash of the frames (method, bytecode index, kind), taken by
    /// the handler while they were in its cache: the processing thread knows a stack it saw
    /// before without reading it again (0: none).
    pub stack_hash: u64,
    /// The virtual thread the sampled carrier ran, if any (JDK 21+).
    pub virtual_thread: Option<Mounted>,
    /// The request the sampled thread worked for ([`crate::label`]; 0: none).
    pub label: u32,
    /// User registers bp, sp, ip when the sample carries a stack copy.
    pub user_regs: [u64; 3],
    /// Bytes of the user stack copied next to the frames (0: none).
    pub stack: u16,
}

/// `AsyncGetCallTrace` walked the sample's Java frames.
pub const WALKED_BY_ASGCT: u8 = 0;
/// jtap's walker did; the frames carry their kinds.
pub const WALKED_BY_VM: u8 = 1;
/// Both did (`walker=check`) and differed: the frames are AsyncGetCallTrace's, jtap's
/// walker's are in the second half of the slot.
pub const WALKS_DIFFERED: u8 = 2;

/// The preallocated buffer.
pub struct SampleBuffer {
    /// Each slot's state, apart from its header: the processing thread scans them all at
    /// every drain, 16 to a cache line.
    states: Box<[AtomicU32]>,
    headers: Box<[UnsafeCell<SampleHeader>]>,
    frames: Zeroed<CallFrame>,
    depth: usize,
    chains: Zeroed<u64>,
    chain_depth: usize,
    stacks: Zeroed<u8>,
    stack_bytes: usize,
    next: AtomicU64,
    dropped: AtomicU64,
}

// SAFETY: a slot's header and frames are only touched by the one party its `state` gives
// them to (the writer between FREE→WRITING and WRITING→READY, the reader between READY and
// FREE), with acquire/release ordering on the state.
unsafe impl Sync for SampleBuffer {}
// SAFETY: the buffer owns its memory; the raw method pointers in it are plain values.
unsafe impl Send for SampleBuffer {}

/// A claimed slot: the writer fills its frames and header, then [`Claim::commit`]s it.
pub struct Claim<'a> {
    buffer: &'a SampleBuffer,
    index: usize,
}

impl SampleBuffer {
    /// A buffer of `slots` samples of up to `depth` frames, `chain_depth` call-chain entries
    /// and `stack_bytes` bytes of user stack each (memory is committed by the kernel only
    /// where samples get written).
    pub fn new(slots: usize, depth: usize, chain_depth: usize, stack_bytes: usize) -> SampleBuffer {
        // SAFETY: all-zero bytes are a valid CallFrame (bci 0, null method), u64 and u8.
        let (frames, chains, stacks) = unsafe {
            (
                Zeroed::new(depth * slots),
                Zeroed::new(chain_depth * slots),
                Zeroed::new(stack_bytes * slots),
            )
        };
        SampleBuffer {
            states: (0..slots).map(|_| AtomicU32::new(FREE)).collect(),
            headers: (0..slots).map(|_| UnsafeCell::default()).collect(),
            frames,
            depth,
            chains,
            chain_depth,
            stacks,
            stack_bytes,
            next: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        }
    }

    /// Claims a free slot, or counts a drop and returns None. Async-signal-safe.
    pub fn claim(&self) -> Option<Claim<'_>> {
        let start = self.next.fetch_add(1, Ordering::Relaxed) as usize;
        let slots = NonZeroUsize::new(self.states.len())?;
        for probe in 0..PROBES.min(slots.get()) {
            let index = start.wrapping_add(probe) % slots;
            let claimed = self.states.get(index).is_some_and(|state| {
                state
                    .compare_exchange(FREE, WRITING, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            });
            if claimed {
                return Some(Claim {
                    buffer: self,
                    index,
                });
            }
        }
        self.dropped.fetch_add(1, Ordering::Relaxed);
        None
    }

    /// Samples dropped so far because no slot was free.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Hands every ready sample to `sink` (header, its frames top first, its call chain leaf
    /// first, its user stack copy) and frees its slot. Returns how many there were. Called by
    /// one thread at a time. A sample whose walks differed ([`WALKS_DIFFERED`]) has jtap's
    /// walker's frames after its own.
    pub fn drain(&self, mut sink: impl FnMut(&SampleHeader, &[CallFrame], &[u64], &[u8])) -> usize {
        let mut count = 0;
        // A sample walked both ways: its frames, then jtap's walker's.
        let mut both_walks = Vec::new();
        let mut chain = Vec::with_capacity(self.chain_depth);
        for (index, state) in self.states.iter().enumerate() {
            if state.load(Ordering::Acquire) != READY {
                continue;
            }
            // SAFETY: READY gives the slot to the reader until it stores FREE below.
            let header = unsafe { *self.headers[index].get() };
            let used = header.num_frames.clamp(0, self.depth as i32) as usize;
            let cells = &self.slot_frames(index)[..used];
            // SAFETY: as above, for the slot's frames, read in place (UnsafeCell<CallFrame> has
            // the layout of CallFrame) until the slot is freed after the sink returns.
            let mut slot_frames =
                unsafe { std::slice::from_raw_parts(cells.as_ptr() as *const CallFrame, used) };
            if header.walker == WALKS_DIFFERED {
                let half = self.depth / 2;
                let checked = usize::from(header.checked).min(self.depth - half);
                let cells = &self.slot_frames(index)[half..half + checked];
                both_walks.clear();
                both_walks.extend_from_slice(slot_frames);
                // SAFETY: as above.
                both_walks.extend(cells.iter().map(|cell| unsafe { *cell.get() }));
                slot_frames = &both_walks;
            }
            let chained = usize::from(header.chain).min(self.chain_depth);
            chain.clear();
            // SAFETY: as above, for the slot's call chain.
            chain.extend(
                self.slot_chain(index)[..chained]
                    .iter()
                    .map(|cell| unsafe { *cell.get() }),
            );
            let stacked = usize::from(header.stack).min(self.stack_bytes);
            let cells = &self.slot_stack(index)[..stacked];
            // SAFETY: as above, for the slot's stack copy, read in place (UnsafeCell<u8> has
            // the layout of u8) until the slot is freed after the sink returns.
            let stack = unsafe { std::slice::from_raw_parts(cells.as_ptr() as *const u8, stacked) };
            sink(&header, slot_frames, &chain, stack);
            state.store(FREE, Ordering::Release);
            count += 1;
        }
        count
    }

    fn slot_frames(&self, index: usize) -> &[UnsafeCell<CallFrame>] {
        slot_area(&self.frames, index, self.depth)
    }

    fn slot_chain(&self, index: usize) -> &[UnsafeCell<u64>] {
        slot_area(&self.chains, index, self.chain_depth)
    }

    fn slot_stack(&self, index: usize) -> &[UnsafeCell<u8>] {
        slot_area(&self.stacks, index, self.stack_bytes)
    }
}

/// Slot `index`'s `width` cells of `cells`. Empty only for an index past the buffer's slots,
/// which no claim has; written without indexing so that the signal handler has no path that
/// panics (`scripts/check-handler.sh`).
fn slot_area<T>(cells: &[UnsafeCell<T>], index: usize, width: usize) -> &[UnsafeCell<T>] {
    let start = index.checked_mul(width);
    start
        .and_then(|start| cells.get(start..start.checked_add(width)?))
        .unwrap_or_default()
}

impl Claim<'_> {
    /// Where the slot's frames go: room for the buffer's `depth` frames, owned by this claim
    /// until commit.
    pub fn frames(&mut self) -> &mut [CallFrame] {
        let frames = self.buffer.slot_frames(self.index);
        // SAFETY: UnsafeCell<T> has the layout of T; the claim owns these cells (WRITING)
        // until commit, and `&mut self` keeps this the only view of them.
        unsafe { std::slice::from_raw_parts_mut(frames.as_ptr() as *mut CallFrame, frames.len()) }
    }

    /// Where the slot's call chain and user stack copy go: room for the buffer's
    /// `chain_depth` entries and `stack_bytes` bytes, owned by this claim until commit.
    pub fn chain_and_stack(&mut self) -> (&mut [u64], &mut [u8]) {
        let chain = self.buffer.slot_chain(self.index);
        let stack = self.buffer.slot_stack(self.index);
        // SAFETY: UnsafeCell<T> has the layout of T; the claim owns these cells (WRITING)
        // until commit, the two areas are disjoint, and `&mut self` keeps these the only
        // views of them.
        unsafe {
            (
                std::slice::from_raw_parts_mut(chain.as_ptr() as *mut u64, chain.len()),
                std::slice::from_raw_parts_mut(stack.as_ptr() as *mut u8, stack.len()),
            )
        }
    }

    /// Publishes the sample. Async-signal-safe.
    pub fn commit(self, header: SampleHeader) {
        let buffer = self.buffer;
        if let (Some(state), Some(slot)) = (
            buffer.states.get(self.index),
            buffer.headers.get(self.index),
        ) {
            // SAFETY: WRITING gives the slot to this claim until it stores READY.
            unsafe { *slot.get() = header };
            state.store(READY, Ordering::Release);
        }
    }
}

/// An array of zero-filled cells straight from the kernel (an anonymous mapping): pages are
/// committed only where samples get written, and the whole array goes back at drop. A heap
/// allocation would not do: after the first large block is freed, glibc serves blocks of
/// this size from its heap, where `calloc` zeroes a reused block by writing it, committing all
/// of it (8 MiB of stack copies per session, which 1,000 rotations of a continuous profile
/// grew the JVM's RSS by).
struct Zeroed<T> {
    cells: *mut UnsafeCell<T>,
    len: usize,
    /// Where the mapping failed: an ordinary allocation.
    fallback: Option<Box<[UnsafeCell<T>]>>,
}

impl<T> Zeroed<T> {
    /// # Safety
    /// All-zero bytes must be a valid `T`.
    unsafe fn new(len: usize) -> Zeroed<T> {
        let bytes = len.saturating_mul(std::mem::size_of::<T>());
        if bytes == 0 {
            return Zeroed {
                cells: std::ptr::NonNull::dangling().as_ptr(),
                len,
                fallback: None,
            };
        }
        // SAFETY: a fresh private anonymous mapping at an address the kernel picks; its
        // pages read as zero and are page-aligned, enough for any T here.
        let mapped = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if mapped == libc::MAP_FAILED {
            let boxed = Box::<[UnsafeCell<T>]>::new_zeroed_slice(len);
            // SAFETY: the caller's contract: zeroed memory is a valid T.
            let mut boxed = unsafe { boxed.assume_init() };
            return Zeroed {
                cells: boxed.as_mut_ptr(),
                len,
                fallback: Some(boxed),
            };
        }
        Zeroed {
            cells: mapped.cast(),
            len,
            fallback: None,
        }
    }
}

impl<T> std::ops::Deref for Zeroed<T> {
    type Target = [UnsafeCell<T>];

    fn deref(&self) -> &[UnsafeCell<T>] {
        // SAFETY: `cells` points to `len` initialised cells (mapped, boxed, or none).
        unsafe { std::slice::from_raw_parts(self.cells, self.len) }
    }
}

impl<T> Drop for Zeroed<T> {
    fn drop(&mut self) {
        let bytes = self.len * std::mem::size_of::<T>();
        if self.fallback.is_none() && bytes != 0 {
            // SAFETY: unmaps exactly the mapping `new` made; the buffer is no longer used.
            unsafe { libc::munmap(self.cells.cast(), bytes) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn samples_round_trip_and_a_full_buffer_drops() {
        let buffer = SampleBuffer::new(4, 3, 2, 16);
        for tid in 1..=6 {
            match buffer.claim() {
                Some(mut claim) => {
                    claim.frames()[0] = CallFrame::new(std::ptr::null_mut(), tid);
                    let (chain, stack) = claim.chain_and_stack();
                    assert_eq!((chain.len(), stack.len()), (2, 16));
                    chain[0] = tid as u64 * 100;
                    stack[..2].copy_from_slice(&[tid as u8, 7]);
                    claim.commit(SampleHeader {
                        tid,
                        time_ns: 1,
                        num_frames: 1,
                        weight: 10,
                        count: 1,
                        state: 0,
                        chain: 1,
                        pc: 0,
                        user_regs: [0; 3],
                        stack: 2,
                        ..SampleHeader::default()
                    });
                }
                None => assert!(tid > 4),
            }
        }
        assert_eq!(buffer.dropped(), 2);
        let mut seen = Vec::new();
        assert_eq!(
            buffer.drain(|h, f, c, s| seen.push((h.tid, f[0].bci, c.to_vec(), s.to_vec()))),
            4
        );
        seen.sort();
        assert_eq!(
            seen,
            [
                (1, 1, vec![100], vec![1, 7]),
                (2, 2, vec![200], vec![2, 7]),
                (3, 3, vec![300], vec![3, 7]),
                (4, 4, vec![400], vec![4, 7])
            ]
        );
        assert_eq!(buffer.drain(|_, _, _, _| panic!("drained twice")), 0);
        assert!(buffer.claim().is_some(), "slots are free again");
    }

    #[test]
    fn concurrent_writers_lose_nothing_but_counted_drops() {
        let buffer = Arc::new(SampleBuffer::new(64, 2, 0, 0));
        let writers: Vec<_> = (0..4)
            .map(|t| {
                let buffer = buffer.clone();
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        if let Some(claim) = buffer.claim() {
                            claim.commit(SampleHeader {
                                tid: t,
                                time_ns: 1,
                                num_frames: -2,
                                weight: 1,
                                count: 1,
                                state: 0,
                                chain: 0,
                                pc: 0,
                                recovered: 0,
                                caller_pc: 0,
                                ..SampleHeader::default()
                            });
                        }
                    }
                })
            })
            .collect();
        let mut drained = 0u64;
        while writers.iter().any(|w| !w.is_finished()) {
            drained += buffer.drain(|h, f, c, s| {
                assert!(h.num_frames == -2 && f.is_empty() && c.is_empty() && s.is_empty())
            }) as u64;
        }
        drained += buffer.drain(|_, _, _, _| {}) as u64;
        assert_eq!(drained + buffer.dropped(), 40_000);
    }
}
