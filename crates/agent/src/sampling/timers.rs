//! The timers and signals the CPU-time and wall-clock engines sample with: the process's
//! profiling interval timer (`itimer`), a POSIX timer on each thread's own CPU clock
//! (`ctimer`), and a signal sent to one thread (`wall`).

use std::collections::HashMap;
use std::ffi::c_int;
use std::io;
use std::time::Duration;

use super::signal::CPU_SIGNAL;
use super::threads::{self, ThreadTimer};

/// Sets the process's profiling timer (`ITIMER_PROF`, SIGPROF every `period` of the
/// process's CPU time; a zero period stops it).
pub fn set_process_timer(period: Duration) -> io::Result<()> {
    let value = libc::timeval {
        tv_sec: period.as_secs() as libc::time_t,
        tv_usec: period.subsec_micros() as libc::suseconds_t,
    };
    let timer = libc::itimerval {
        it_interval: value,
        it_value: value,
    };
    // SAFETY: a valid itimerval; the old value is not asked for.
    if unsafe { libc::setitimer(libc::ITIMER_PROF, &timer, std::ptr::null_mut()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sends `signal` to thread `tid` of this process (a thread that has ended is left alone:
/// the kernel answers ESRCH).
pub fn signal_thread(tid: i32, signal: c_int) {
    let pid = std::process::id() as libc::pid_t;
    // SAFETY: tgkill to a thread of this process, with a signal whose handler is ours.
    unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, signal) };
}

/// The CPU-time clock of thread `tid` (the kernel's `MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)`).
fn thread_cpu_clock(tid: i32) -> libc::clockid_t {
    const CPUCLOCK_SCHED: i32 = 2;
    const CPUCLOCK_PERTHREAD: i32 = 4;
    (!tid << 3) | CPUCLOCK_SCHED | CPUCLOCK_PERTHREAD
}

/// One POSIX timer per thread, on its CPU clock, sending [`CPU_SIGNAL`] to that thread.
pub struct CpuClockTimers {
    period: Duration,
    /// `timer_t` values (pointers the kernel's ids are stored in) by thread.
    timers: HashMap<i32, usize>,
}

impl CpuClockTimers {
    /// Timers firing every `period` of their thread's CPU time.
    pub fn new(period: Duration) -> CpuClockTimers {
        CpuClockTimers {
            period,
            timers: HashMap::new(),
        }
    }

    /// Checks that a timer can be made at all (on the calling thread).
    pub fn probe(period: Duration) -> io::Result<()> {
        let mut timers = CpuClockTimers {
            period,
            timers: HashMap::new(),
        };
        let tid = threads::current_tid();
        timers.arm(tid)?;
        timers.disarm(tid);
        Ok(())
    }
}

impl ThreadTimer for CpuClockTimers {
    fn arm(&mut self, tid: i32) -> io::Result<()> {
        // SAFETY: sigevent is plain data (all zeroes valid); timer_create writes the new
        // timer's id into a local; timer_settime reads a valid itimerspec.
        unsafe {
            let mut event: libc::sigevent = std::mem::zeroed();
            event.sigev_notify = libc::SIGEV_THREAD_ID;
            event.sigev_signo = CPU_SIGNAL;
            event.sigev_notify_thread_id = tid;
            let mut timer: libc::timer_t = std::ptr::null_mut();
            if libc::timer_create(thread_cpu_clock(tid), &mut event, &mut timer) != 0 {
                return Err(io::Error::last_os_error());
            }
            let value = libc::timespec {
                tv_sec: self.period.as_secs() as libc::time_t,
                tv_nsec: self.period.subsec_nanos() as _,
            };
            let spec = libc::itimerspec {
                it_interval: value,
                it_value: value,
            };
            if libc::timer_settime(timer, 0, &spec, std::ptr::null_mut()) != 0 {
                let error = io::Error::last_os_error();
                libc::timer_delete(timer);
                return Err(error);
            }
            self.timers.insert(tid, timer as usize);
        }
        Ok(())
    }

    fn disarm(&mut self, tid: i32) {
        if let Some(timer) = self.timers.remove(&tid) {
            // SAFETY: a timer this value created and has not deleted yet.
            unsafe { libc::timer_delete(timer as libc::timer_t) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_cpu_clocks_match_the_kernel_encoding() {
        // pthread_getcpuclockid gives the same clock for the calling thread.
        let mut clock: libc::clockid_t = 0;
        assert_eq!(
            // SAFETY: the calling thread's handle and a local out-parameter.
            unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut clock) },
            0
        );
        let mut via_tid = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        assert_eq!(
            // SAFETY: a valid clock id and out-parameter.
            unsafe { libc::clock_gettime(thread_cpu_clock(threads::current_tid()), &mut via_tid) },
            0
        );
        assert!(via_tid.tv_sec > 0 || via_tid.tv_nsec > 0);
    }
}
