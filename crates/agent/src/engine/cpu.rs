//! The `cpu` engine: a perf_events software counter (`cpu-clock`) on each thread, which
//! overflows every interval of the thread's CPU time. Its descriptor is set to signal that
//! very thread (`F_SETOWN_EX` + `F_OWNER_TID`, `O_ASYNC`, `F_SETSIG` SIGPROF); each overflow
//! disables the counter until the handler re-arms it (`PERF_EVENT_IOC_REFRESH`). Counters
//! follow threads through ThreadStart/ThreadEnd.
//!
//! Each counter also records the sampled thread's call chain (`PERF_SAMPLE_CALLCHAIN`) into
//! a ring buffer mapped per thread, which the handler copies next to the Java frames: the
//! native frames under a JNI method, the JVM's own C++ frames, and kernel frames (see
//! [`crate::sampling::perf`]). With `alluser` the counters count user-mode CPU time only
//! (`exclude_kernel`, as async-profiler's `--all-user`), so no sample has kernel frames;
//! that also works where `perf_event_paranoid` 2 forbids unprivileged users to sample the
//! kernel. `cstack=` chooses how native frames are walked: `dwarf` (the default) also has
//! the kernel copy the user registers and the top of the stack with each sample, for the
//! processing thread to unwind with the libraries' call-frame information (see
//! [`crate::sampling::perf`]); `fp` keeps the kernel's frame-pointer walk alone; `no` asks
//! for no call chain (Java frames only). Where a thread's larger DWARF ring cannot be mapped
//! (the locked-memory limit), that thread falls back to `fp`.
//!
//! Where `perf_event_open` fails (a container's seccomp profile, `perf_event_paranoid` 3),
//! the engine falls back to `ctimer`, then to `itimer`, and the profile's metadata names
//! the engine that ran.

#![deny(unsafe_code)]

use jtap_jvmti::Capabilities;
use jtap_protocol::Options;

use super::ctimer::CtimerEngine;
use super::itimer::ItimerEngine;
use super::{interval, Context, Engine, Report, CPU_INTERVAL};
use crate::sampling::armed::ArmedSampler;
use crate::sampling::counters::{Counter, PerfCounters};
use crate::sampling::signal::Source;
use crate::sampling::{self, Settings};

/// The engine: perf_events when they work, else a fallback engine.
#[derive(Default)]
pub struct CpuEngine {
    sampler: Option<ArmedSampler>,
    fallback: Option<Box<dyn Engine>>,
}

impl Engine for CpuEngine {
    fn name(&self) -> &'static str {
        self.fallback.as_ref().map_or("cpu", |f| f.name())
    }

    fn capabilities(&self) -> Capabilities {
        sampling::capabilities()
    }

    fn start(&mut self, context: &Context, options: &Options) -> Result<(), String> {
        let period = interval(options, CPU_INTERVAL);
        let counter = Counter::cpu_clock(period);
        if let Err(e) = PerfCounters::probe(counter, options.alluser) {
            log!("cpu: perf_event_open failed ({e}); falling back to ctimer");
            let mut ctimer: Box<dyn Engine> = Box::new(CtimerEngine::new("cpu"));
            let started = ctimer.start(context, options).or_else(|e| {
                log!("cpu: ctimer failed ({e}); falling back to itimer");
                ctimer = Box::new(ItimerEngine::new("cpu"));
                ctimer.start(context, options)
            });
            started?;
            self.fallback = Some(ctimer);
            return Ok(());
        }
        let settings = Settings::from_options(options, "cpu", "cpu", period, Source::PerfEvent)?;
        let counters =
            PerfCounters::new(counter, options.alluser, options.cstack.unwrap_or_default());
        let sampler = ArmedSampler::start(
            context.env,
            context.vm,
            settings,
            Box::new(counters),
            "perf_event_open",
        )?;
        self.sampler = Some(sampler);
        Ok(())
    }

    fn dump(&self) -> Report {
        match &self.fallback {
            Some(fallback) => fallback.dump(),
            None => Report::so_far(self.sampler.as_ref().map(ArmedSampler::sampler)),
        }
    }

    fn progress(&self) -> Option<(u64, u64)> {
        match &self.fallback {
            Some(fallback) => fallback.progress(),
            None => self.sampler.as_ref().map(|s| s.sampler().progress()),
        }
    }

    fn stop(&mut self, context: &Context) -> Report {
        if let Some(mut fallback) = self.fallback.take() {
            return fallback.stop(context);
        }
        let profile = self.sampler.take().map(ArmedSampler::stop);
        Report::Profile(Box::new(profile.unwrap_or_default()))
    }
}
