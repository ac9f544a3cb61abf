//! Wall-clock samples of idle threads, counted without a signal.
//!
//! A thread the wall engine found asleep (blocked in a system call) that has not run since
//! is still where it was: its next samples are the same stack. Signalling it anyway wakes it
//! up, on another core or in place of the thread that was running there, to walk a stack
//! already known, which is most of the wall engine's cost when most threads sleep. So the
//! handler notes the thread's CPU time in a sleeping sample; once the processing thread has
//! drained that sample, the wall ticker reads the thread's CPU clock at each of its turns
//! and, while it has advanced by at most [`RAN_AT_MOST`], counts a repeat of that sample
//! instead of signalling (async-profiler's wall clock does the same). The processing thread
//! adds the repeats with the stack it kept.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

/// CPU time a thread may use and still count as asleep where it was sampled: a wake-up that
/// went back to sleep at once.
const RAN_AT_MOST: u64 = 10_000;
/// CPU time a thread may use between the handler's reading of its clock and the ticker's
/// first look: the rest of the handler, the return from the signal and the way back into
/// its system call, which a loaded machine stretches past [`RAN_AT_MOST`]. From that first
/// look on, the ticker's reading is the reference.
const LEFT_THE_HANDLER_AT_MOST: u64 = 100_000;

/// What the ticker and the processing thread know of the threads last seen asleep.
#[derive(Default)]
pub struct IdleThreads {
    threads: Mutex<HashMap<i32, Idle>>,
}

#[derive(Default)]
struct Idle {
    /// The thread's CPU time at its last sample, when that found it asleep (the handler's
    /// reading, then the ticker's).
    asleep_at_cpu_ns: Option<u64>,
    /// Whether `asleep_at_cpu_ns` is the ticker's reading.
    settled: bool,
    /// Times (CLOCK_MONOTONIC, ns) of the samples counted since as repeats of that one.
    repeats: Vec<u64>,
}

impl IdleThreads {
    fn threads(&self) -> MutexGuard<'_, HashMap<i32, Idle>> {
        self.threads.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// For the ticker: whether `tid` is asleep where it was last sampled, `cpu_ns` telling
    /// its CPU time now (asked only of a thread last seen asleep); if so, a repeat of that
    /// sample at `now_ns` is counted and the thread need not be signalled.
    pub fn repeat(&self, tid: i32, now_ns: u64, cpu_ns: impl FnOnce() -> Option<u64>) -> bool {
        let mut threads = self.threads();
        let Some(idle) = threads.get_mut(&tid) else {
            return false;
        };
        let Some(asleep) = idle.asleep_at_cpu_ns else {
            return false;
        };
        let limit = match idle.settled {
            true => RAN_AT_MOST,
            false => LEFT_THE_HANDLER_AT_MOST,
        };
        let cpu = cpu_ns();
        // Less CPU time than at the sample: another thread that got the same id.
        let ran = cpu.and_then(|cpu| cpu.checked_sub(asleep));
        if ran.is_some_and(|ran| ran <= limit) {
            if !idle.settled {
                (idle.asleep_at_cpu_ns, idle.settled) = (cpu, true);
            }
            idle.repeats.push(now_ns);
            true
        } else {
            idle.asleep_at_cpu_ns = None;
            false
        }
    }

    /// For the processing thread: a sample of `tid` was drained, taken asleep at CPU time
    /// `asleep_at_cpu_ns` (None: running, or not known). Call after [`IdleThreads::take_repeats`]:
    /// the repeats counted so far were of the thread's previous sample.
    pub fn sampled(&self, tid: i32, asleep_at_cpu_ns: Option<u64>) {
        let mut threads = self.threads();
        match asleep_at_cpu_ns {
            Some(_) => {
                let idle = threads.entry(tid).or_default();
                (idle.asleep_at_cpu_ns, idle.settled) = (asleep_at_cpu_ns, false);
            }
            None => {
                if let Some(idle) = threads.get_mut(&tid) {
                    idle.asleep_at_cpu_ns = None;
                }
            }
        }
    }

    /// For the processing thread: moves the repeats counted so far into `out` as (thread,
    /// time) pairs.
    pub fn take_repeats(&self, out: &mut Vec<(i32, u64)>) {
        out.clear();
        for (&tid, idle) in self.threads().iter_mut() {
            out.extend(idle.repeats.drain(..).map(|time| (tid, time)));
        }
    }

    /// Forgets the threads that are not in `alive` and have no repeats left to take.
    pub fn retain(&self, alive: impl Fn(i32) -> bool) {
        self.threads()
            .retain(|&tid, idle| alive(tid) || !idle.repeats.is_empty());
    }

    /// Keeps in `stacks` only the threads known here (whose repeats can still come).
    pub fn retain_known<T>(&self, stacks: &mut HashMap<i32, T>) {
        let threads = self.threads();
        stacks.retain(|tid, _| threads.contains_key(tid));
    }
}

/// The CPU time thread `tid` of this process has used, in ns (None if it has ended).
pub fn thread_cpu_ns(tid: i32) -> Option<u64> {
    // The kernel's clock id of a thread's CPU time (`MAKE_THREAD_CPUCLOCK(tid,
    // CPUCLOCK_SCHED)`): the complement of the tid shifted by 3, "per thread" (4), "scheduler
    // time" (2). libc offers it only for a pthread_t (`pthread_getcpuclockid`), not for
    // another thread's kernel id.
    let clock = nix::time::ClockId::from_raw((!tid << 3) | 6);
    let time = nix::time::clock_gettime(clock).ok()?;
    Some(time.tv_sec() as u64 * 1_000_000_000 + time.tv_nsec() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_asleep_is_repeated_until_it_runs() {
        let idle = IdleThreads::default();
        // Unknown until a sleeping sample is drained.
        assert!(!idle.repeat(7, 1, || unreachable!(
            "the CPU clock of a thread never seen asleep"
        )));
        idle.sampled(7, Some(1_000));
        assert!(idle.repeat(7, 2, || Some(1_000)));
        assert!(idle.repeat(7, 3, || Some(1_000 + RAN_AT_MOST)));
        // The first look allows for the way out of the handler, later ones for a blip.
        idle.sampled(6, Some(1_000));
        assert!(idle.repeat(6, 1, || Some(1_000 + LEFT_THE_HANDLER_AT_MOST)));
        assert!(idle.repeat(6, 2, || Some(
            1_000 + LEFT_THE_HANDLER_AT_MOST + RAN_AT_MOST
        )));
        assert!(!idle.repeat(6, 3, || Some(
            1_000 + LEFT_THE_HANDLER_AT_MOST + RAN_AT_MOST + 1
        )));
        // A thread that reused the id of one asleep has used less CPU time.
        idle.sampled(9, Some(5_000));
        assert!(!idle.repeat(9, 1, || Some(10)));
        // It ran: signalled from now on, until a new sleeping sample.
        assert!(!idle.repeat(7, 4, || Some(50_000)));
        assert!(!idle.repeat(7, 5, || Some(50_000)));
        let mut repeats = Vec::new();
        idle.take_repeats(&mut repeats);
        repeats.sort();
        assert_eq!(repeats, [(6, 1), (6, 2), (7, 2), (7, 3)]);
        idle.sampled(7, Some(50_000));
        assert!(idle.repeat(7, 6, || Some(50_000)));
        idle.sampled(7, None);
        assert!(!idle.repeat(7, 7, || Some(50_000)));
        idle.take_repeats(&mut repeats);
        assert_eq!(repeats, [(7, 6)]);
        // An ended thread is forgotten once its repeats are taken.
        idle.sampled(8, Some(1));
        idle.repeat(8, 8, || Some(1));
        idle.retain(|_| false);
        let known = |idle: &IdleThreads| {
            let mut stacks = HashMap::from([(7, ()), (8, ())]);
            idle.retain_known(&mut stacks);
            let mut tids: Vec<i32> = stacks.into_keys().collect();
            tids.sort();
            tids
        };
        assert_eq!(known(&idle), [8]);
        idle.take_repeats(&mut repeats);
        idle.retain(|_| false);
        assert!(known(&idle).is_empty());
    }

    #[test]
    fn this_threads_cpu_time_is_read_by_its_id() {
        let tid = crate::sampling::threads::current_tid();
        let before = thread_cpu_ns(tid).unwrap();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        assert!(thread_cpu_ns(tid).unwrap() > before);
        assert_eq!(thread_cpu_ns(i32::MAX - 1), None);
    }
}
