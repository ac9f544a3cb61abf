//! A sampler whose signals come from a timer armed on every thread (perf_event counters,
//! CPU-clock POSIX timers): what the `cpu`, `ctimer` and `perf` engines run.

#![deny(unsafe_code)]

use jtap_jvmti::Env;
use jtap_profile::Profile;

use super::threads::{self, ThreadTimer};
use super::{Sampler, Settings};
use crate::thread::Vm;

/// A running sampler and the per-thread timers that signal it.
pub struct ArmedSampler {
    sampler: Sampler,
    engine: &'static str,
}

impl ArmedSampler {
    /// Starts a sampler with `settings`, then arms `timer` on every thread. `source` names
    /// the timer in the error when it cannot be armed (the sampler is stopped then).
    pub fn start(
        env: &'static Env,
        vm: Vm,
        settings: Settings,
        timer: Box<dyn ThreadTimer>,
        source: &str,
    ) -> Result<ArmedSampler, String> {
        let engine = settings.engine;
        let sampler = Sampler::start(env, vm, settings)?;
        match threads::arm_all(timer) {
            Ok(armed) => log!("{engine}: {source} on {armed} threads"),
            Err(e) => {
                sampler.stop();
                return Err(format!("{source}: {e}"));
            }
        }
        Ok(ArmedSampler { sampler, engine })
    }

    /// The sampler.
    pub fn sampler(&self) -> &Sampler {
        &self.sampler
    }

    /// Stops sampling, signals first (the handler then ignores stray ones), then disarms
    /// every thread; the final profile.
    pub fn stop(self) -> Profile {
        let profile = self.sampler.stop();
        let failures = threads::disarm_all();
        if failures != 0 {
            log!("{}: {failures} threads could not be armed", self.engine);
        }
        profile
    }
}
