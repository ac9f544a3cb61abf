//! The [`Engine`] of the hooked-call engines (`io`, `nativelock`): each is a static
//! [`TimedCalls`], the option that sets its threshold and its list of hooks; starting installs
//! the hooks, dumping and stopping hand over the calls recorded at their sites.

use std::time::Duration;

use jtap_jvmti::Capabilities;
use jtap_protocol::Options;

use super::{Context, Engine, Report};
use crate::hooks::timed::{TimedCalls, Timing};
use crate::hooks::Hook;

/// An engine of timed hooked calls.
pub struct TimedEngine {
    calls: &'static TimedCalls,
    /// The threshold the options ask for.
    threshold: fn(&Options) -> Duration,
    /// The hooks, each an entry stub with the signature of the C function it is named for.
    hooks: fn() -> Vec<Hook>,
    timing: Option<Timing>,
}

impl TimedEngine {
    /// An engine recording `calls` through `hooks`, above the threshold `threshold` reads.
    ///
    /// # Safety
    /// Each hook `hooks` lists has the signature of the C function it is named for.
    pub unsafe fn new(
        calls: &'static TimedCalls,
        threshold: fn(&Options) -> Duration,
        hooks: fn() -> Vec<Hook>,
    ) -> TimedEngine {
        TimedEngine {
            calls,
            threshold,
            hooks,
            timing: None,
        }
    }

    fn not_running(&self) -> Report {
        Report::Text(format!("{}: not running", self.name()))
    }
}

impl Engine for TimedEngine {
    fn name(&self) -> &'static str {
        self.calls.name()
    }

    /// None on the agent's environment: the hook engines' own resolves methods.
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }

    fn start(&mut self, context: &Context, options: &Options) -> Result<(), String> {
        let threshold = (self.threshold)(options);
        // SAFETY: `new`'s contract.
        let timing = unsafe {
            self.calls
                .start(context.vm, options, threshold, &(self.hooks)())
        }?;
        self.timing = Some(timing);
        Ok(())
    }

    fn dump(&self) -> Report {
        match &self.timing {
            Some(timing) => Report::Profile(Box::new(self.calls.profile(timing))),
            None => self.not_running(),
        }
    }

    fn stop(&mut self, _context: &Context) -> Report {
        match self.timing.take() {
            Some(timing) => Report::Profile(Box::new(self.calls.stop(timing))),
            None => self.not_running(),
        }
    }
}
