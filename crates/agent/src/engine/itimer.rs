//! The `itimer` engine: `setitimer(ITIMER_PROF)` makes the kernel send SIGPROF to whichever
//! thread is running each time the process has used another interval of CPU time. One timer
//! for the whole process; resolution is the scheduler tick (4 ms at HZ=250).

#![deny(unsafe_code)]

use jtap_jvmti::Capabilities;
use jtap_protocol::Options;

use super::{interval, Context, Engine, Report, CPU_INTERVAL};
use crate::sampling::signal::Source;
use crate::sampling::{self, timers, Sampler, Settings};

/// The engine; `event` is what the profile says was asked for (`cpu` after a fallback).
pub struct ItimerEngine {
    event: &'static str,
    sampler: Option<Sampler>,
}

impl ItimerEngine {
    /// An engine recording under the event name `event`.
    pub fn new(event: &'static str) -> ItimerEngine {
        ItimerEngine {
            event,
            sampler: None,
        }
    }
}

impl Engine for ItimerEngine {
    fn name(&self) -> &'static str {
        "itimer"
    }

    fn capabilities(&self) -> Capabilities {
        sampling::capabilities()
    }

    fn start(&mut self, context: &Context, options: &Options) -> Result<(), String> {
        let period = interval(options, CPU_INTERVAL).max(std::time::Duration::from_micros(1));
        let settings =
            Settings::from_options(options, self.event, "itimer", period, Source::Itimer)?;
        let sampler = Sampler::start(context.env, context.vm, settings)?;
        if let Err(e) = timers::set_process_timer(period) {
            sampler.stop();
            return Err(format!("setitimer(ITIMER_PROF): {e}"));
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
        if let Err(e) = timers::set_process_timer(std::time::Duration::ZERO) {
            log!("itimer: cannot disarm: {e}");
        }
        Report::Profile(Box::new(
            self.sampler.take().map(Sampler::stop).unwrap_or_default(),
        ))
    }
}
