//! Wall-clock ticks owed to threads whose signal has not been handled yet.
//!
//! The wall ticker sends each thread a standard signal with `tgkill`. A thread that is
//! runnable but waits for a CPU when its next tick comes still has the last signal pending,
//! and the kernel merges the two: the tick was lost, for running threads only (a sleeping
//! thread's ticks are counted without a signal, see `idle`), so on an overloaded machine the
//! profile shifted wall time from running threads to sleeping ones. The ticker now counts
//! here each tick it signals before it sends the signal, and the handler takes the count: one
//! sample that stands for every tick since the thread's last, as a POSIX timer's overrun does
//! (the thread did not run in between, so its stack is the same).
//!
//! An open-addressed table of thread ids that only the ticker inserts into; the handler's
//! side neither allocates nor locks.

use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};

/// Threads the table can hold (a power of two); beyond, a thread's signals count one each.
const SLOTS: usize = 4096;
/// Slots looked at for one thread before it counts as absent.
const PROBES: usize = 64;

/// Ticks signalled and not yet taken, by thread.
pub struct OwedTicks {
    slots: Box<[Slot; SLOTS]>,
}

struct Slot {
    /// The thread (0: a free slot; a slot keeps its thread once taken).
    tid: AtomicI32,
    owed: AtomicU32,
}

impl OwedTicks {
    pub fn new() -> OwedTicks {
        OwedTicks {
            slots: Box::new(
                [const {
                    Slot {
                        tid: AtomicI32::new(0),
                        owed: AtomicU32::new(0),
                    }
                }; SLOTS],
            ),
        }
    }

    /// For the ticker, about to signal `tid`: one more tick owed to it. The only writer of
    /// thread ids.
    pub fn owe(&self, tid: i32) {
        for slot in self.probe(tid) {
            match slot.tid.load(Ordering::Relaxed) {
                0 => {
                    slot.owed.store(1, Ordering::Relaxed);
                    slot.tid.store(tid, Ordering::Release);
                    return;
                }
                known if known == tid => {
                    slot.owed.fetch_add(1, Ordering::Release);
                    return;
                }
                _ => {}
            }
        }
    }

    /// For the handler on thread `tid`: the ticks owed to it, now taken (0 when an earlier
    /// signal's sample took them), or None when the table does not hold it (a signal that
    /// counts once). Async-signal-safe.
    pub fn take(&self, tid: i32) -> Option<u32> {
        for slot in self.probe(tid) {
            match slot.tid.load(Ordering::Acquire) {
                0 => return None,
                known if known == tid => return Some(slot.owed.swap(0, Ordering::Acquire)),
                _ => {}
            }
        }
        None
    }

    /// For the ticker: forgets the ticks owed to threads not `alive`, whose ids a new thread
    /// may take.
    pub fn forgive(&self, alive: impl Fn(i32) -> bool) {
        for slot in self.slots.iter() {
            let tid = slot.tid.load(Ordering::Relaxed);
            if tid != 0 && !alive(tid) {
                slot.owed.store(0, Ordering::Relaxed);
            }
        }
    }

    fn probe(&self, tid: i32) -> impl Iterator<Item = &Slot> {
        let start = (tid as u32).wrapping_mul(0x9e37_79b9) as usize;
        (0..PROBES).map(move |i| &self.slots[(start + i) & (SLOTS - 1)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_takes_every_tick_signalled_since_the_last() {
        let owed = OwedTicks::new();
        assert_eq!(owed.take(41), None);
        owed.owe(41);
        assert_eq!(owed.take(41), Some(1));
        // Two ticks while the thread waited for a CPU: one signal, merged, and one sample.
        owed.owe(41);
        owed.owe(41);
        owed.owe(42);
        assert_eq!(owed.take(41), Some(2));
        // The merged signal's handler, should it run again, takes nothing.
        assert_eq!(owed.take(41), Some(0));
        assert_eq!(owed.take(42), Some(1));
    }

    #[test]
    fn threads_that_ended_owe_nothing() {
        let owed = OwedTicks::new();
        owed.owe(7);
        owed.owe(8);
        owed.forgive(|tid| tid == 8);
        assert_eq!(owed.take(7), Some(0));
        assert_eq!(owed.take(8), Some(1));
    }

    #[test]
    fn a_full_neighbourhood_leaves_a_thread_out() {
        let owed = OwedTicks::new();
        let start = owed.probe(1).next().map(|s| s as *const Slot);
        // Threads whose probes start at the same slot as thread 1's fill its neighbourhood.
        let mut crowd = (2..i32::MAX)
            .filter(|&tid| owed.probe(tid).next().map(|s| s as *const Slot) == start)
            .take(PROBES);
        for tid in crowd.by_ref() {
            owed.owe(tid);
        }
        owed.owe(1);
        assert_eq!(owed.take(1), None);
    }
}
