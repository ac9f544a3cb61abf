//! The `ctimer` engine: a POSIX timer (`timer_create`) on each thread's own CPU clock, sending
//! SIGPROF to that very thread (`SIGEV_THREAD_ID`) every interval of its CPU time. Timers
//! follow threads through ThreadStart/ThreadEnd ([`crate::sampling::timers`]). Resolution is
//! the scheduler tick.

#![deny(unsafe_code)]

use jtap_jvmti::Capabilities;
use jtap_protocol::Options;

use super::{interval, Context, Engine, Report, CPU_INTERVAL};
use crate::sampling::signal::Source;
use crate::sampling::threads;
use crate::sampling::timers::CpuClockTimers;
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
        let timers = CpuClockTimers::new(period);
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
