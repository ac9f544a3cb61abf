//! The `ctimer` engine: a POSIX timer (`timer_create`) on each thread's own CPU clock, sending
//! SIGPROF to that very thread (`SIGEV_THREAD_ID`) every interval of its CPU time. Timers
//! follow threads through ThreadStart/ThreadEnd. Resolution is the scheduler tick.

use std::collections::HashMap;
use std::io;
use std::time::Duration;

use jtap_jvmti::Capabilities;
use jtap_protocol::Options;

use super::{interval, Context, Engine, Report, CPU_INTERVAL};
use crate::sampling::signal::{Source, CPU_SIGNAL};
use crate::sampling::threads::{self, ThreadTimer};
use crate::sampling::{self, Sampler, Settings};

/// The engine; `event` is what the profile says was asked for (`cpu` after a fallback).
pub struct CtimerEngine {
    event: &'static str,
    sampler: Option<Sampler>,
}

impl CtimerEngine {
    /// An engine recording under the event name `event`.
    pub fn new(event: &'static str) -> CtimerEngine {
        CtimerEngine {
            event,
            sampler: None,
        }
    }
}

/// The CPU-time clock of thread `tid` (the kernel's `MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)`).
fn thread_cpu_clock(tid: i32) -> libc::clockid_t {
    const CPUCLOCK_SCHED: i32 = 2;
    const CPUCLOCK_PERTHREAD: i32 = 4;
    (!tid << 3) | CPUCLOCK_SCHED | CPUCLOCK_PERTHREAD
}

/// One POSIX timer per thread.
struct CpuClockTimers {
    period: Duration,
    /// `timer_t` values (pointers the kernel's ids are stored in) by thread.
    timers: HashMap<i32, usize>,
}

impl CpuClockTimers {
    /// Checks that a timer can be made at all (on the calling thread).
    fn probe(period: Duration) -> io::Result<()> {
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

impl Engine for CtimerEngine {
    fn name(&self) -> &'static str {
        "ctimer"
    }

    fn capabilities(&self) -> Capabilities {
        sampling::capabilities()
    }

    fn start(&mut self, context: &Context, options: &Options) -> Result<(), String> {
        let period = interval(options, CPU_INTERVAL);
        CpuClockTimers::probe(period)
            .map_err(|e| format!("timer_create(thread CPU clock): {e}"))?;
        let settings =
            Settings::from_options(options, self.event, "ctimer", period, Source::PosixTimer)?;
        let sampler = Sampler::start(context.env, context.vm, settings)?;
        let timers = CpuClockTimers {
            period,
            timers: HashMap::new(),
        };
        match threads::arm_all(Box::new(timers)) {
            Ok(armed) => log!("ctimer: timers on {armed} threads"),
            Err(e) => {
                sampler.stop();
                return Err(format!("timer_create(thread CPU clock): {e}"));
            }
        }
        self.sampler = Some(sampler);
        Ok(())
    }

    fn dump(&self) -> Report {
        Report::so_far(self.sampler.as_ref())
    }

    fn progress(&self) -> Option<(u64, u64)> {
        self.sampler.as_ref().map(Sampler::progress)
    }

    fn stop(&mut self, _context: &Context) -> Report {
        // Signals first (the handler then ignores stray ones), then the signal sources.
        let profile = self.sampler.take().map(Sampler::stop).unwrap_or_default();
        let failures = threads::disarm_all();
        if failures != 0 {
            log!("ctimer: {failures} threads could not get a timer");
        }
        Report::Profile(Box::new(profile))
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
