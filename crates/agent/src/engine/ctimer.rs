//! The `ctimer` engine: a POSIX timer (`timer_create`) on each thread's own CPU clock, sending
//! SIGPROF to that very thread (`SIGEV_THREAD_ID`) every interval of its CPU time. Timers
//! follow threads through ThreadStart/ThreadEnd ([`crate::sampling::timers`]). Resolution is
//! the scheduler tick.

#![deny(unsafe_code)]

use jtap_jvmti::Capabilities;
use jtap_protocol::Options;

use super::{interval, Context, Engine, Report, CPU_INTERVAL};
use crate::sampling::armed::ArmedSampler;
use crate::sampling::signal::Source;
use crate::sampling::timers::CpuClockTimers;
use crate::sampling::{self, Settings};

/// The engine; `event` is what the profile says was asked for (`cpu` after a fallback).
pub struct CtimerEngine {
    event: &'static str,
    sampler: Option<ArmedSampler>,
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
        let timers = Box::new(CpuClockTimers::new(period));
        let sampler = ArmedSampler::start(
            context.env,
            context.vm,
            settings,
            timers,
            "timer_create(thread CPU clock)",
        )?;
        self.sampler = Some(sampler);
        Ok(())
    }

    fn dump(&self) -> Report {
        Report::so_far(self.sampler.as_ref().map(ArmedSampler::sampler))
    }

    fn progress(&self) -> Option<(u64, u64)> {
        self.sampler.as_ref().map(|s| s.sampler().progress())
    }

    fn stop(&mut self, _context: &Context) -> Report {
        let profile = self.sampler.take().map(ArmedSampler::stop);
        Report::Profile(Box::new(profile.unwrap_or_default()))
    }
}
