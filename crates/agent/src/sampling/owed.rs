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

/// A slot no thread ever took: a probe ends there.
const FREE: i32 = 0;
/// A slot whose thread ended: a probe goes on past it, a new thread may take it.
const ENDED: i32 = -1;

/// Ticks signalled and not yet taken, by thread.
pub struct OwedTicks {
    slots: Box<[Slot; SLOTS]>,
}

struct Slot {
    /// The thread, [`FREE`] or [`ENDED`].
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
    /// thread ids: a new thread takes the first slot an ended one left on its way, else the
    /// first free one.
    pub fn owe(&self, tid: i32) {
        let mut ended = None;
        for slot in self.probe(tid) {
            match slot.tid.load(Ordering::Relaxed) {
                known if known == tid => {
                    slot.owed.fetch_add(1, Ordering::Release);
                    return;
                }
                ENDED => {
                    ended.get_or_insert(slot);
                }
                FREE => {
                    ended.get_or_insert(slot);
                    break;
                }
                _ => {}
            }
        }
        if let Some(slot) = ended {
            slot.owed.store(1, Ordering::Relaxed);
            slot.tid.store(tid, Ordering::Release);
        }
    }

    /// For the handler on thread `tid`: the ticks owed to it, now taken (0 when an earlier
    /// signal's sample took them), or None when the table does not hold it (a signal that
    /// counts once). Async-signal-safe.
    pub fn take(&self, tid: i32) -> Option<u32> {
        for slot in self.probe(tid) {
            match slot.tid.load(Ordering::Acquire) {
                FREE => return None,
                known if known == tid => return Some(slot.owed.swap(0, Ordering::Acquire)),
                _ => {}
            }
        }
        None
    }

    /// For the ticker: frees the slots of threads not `alive` (whose ids a new thread may
    /// take), marked so that the threads probed past them are still found.
    pub fn forgive(&self, alive: impl Fn(i32) -> bool) {
        for slot in self.slots.iter() {
            let tid = slot.tid.load(Ordering::Relaxed);
            if tid != FREE && tid != ENDED && !alive(tid) {
                slot.tid.store(ENDED, Ordering::Release);
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
    fn threads_that_ended_leave_their_slots_to_new_ones() {
        let owed = OwedTicks::new();
        let crowd = crowding(&owed, 1);
        for &tid in &crowd {
            owed.owe(tid);
        }
        // The neighbourhood is full, until the first thread ends: the one behind it is
        // still found, and a new thread takes the slot left.
        owed.forgive(|tid| tid != crowd[0]);
        assert_eq!(owed.take(crowd[0]), None);
        assert_eq!(owed.take(crowd[1]), Some(1));
        owed.owe(1);
        assert_eq!(owed.take(1), Some(1));
        assert_eq!(owed.take(crowd[2]), Some(1));
    }

    /// [`PROBES`] threads whose probes start at the slot `tid`'s does: they fill its
    /// neighbourhood.
    fn crowding(owed: &OwedTicks, tid: i32) -> Vec<i32> {
        let start = owed.probe(tid).next().map(|s| s as *const Slot);
        (1..i32::MAX)
            .filter(|&other| other != tid)
            .filter(|&other| owed.probe(other).next().map(|s| s as *const Slot) == start)
            .take(PROBES)
            .collect()
    }

    #[test]
    fn a_full_neighbourhood_leaves_a_thread_out() {
        let owed = OwedTicks::new();
        for tid in crowding(&owed, 1) {
            owed.owe(tid);
        }
        owed.owe(1);
        assert_eq!(owed.take(1), None);
    }
}
