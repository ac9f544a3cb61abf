//! Engines: what `start,event=<name>` runs. One file per engine, behind one small trait.
//!
//! - `gc`: garbage-collection pauses (JVMTI GC events), a text report.
//! - `cpu`: CPU time from a perf_events cpu-clock counter per thread; falls back to `ctimer`,
//!   then `itimer`, where perf_events are unavailable (the profile says which ran).
//! - `itimer`: CPU time from the process-wide `setitimer(ITIMER_PROF)`.
//! - `ctimer`: CPU time from a `timer_create` timer on each thread's CPU clock.
//! - `wall`: wall-clock time: a `jtap-wall` thread signals threads in turn, whatever their state.
//! - `alloc`: allocation sampling (JVMTI SampledObjectAlloc), optionally only objects still
//!   alive (`live`), or as a SITES report (`sites`).
//! - `lock`: contended monitors (JVMTI MonitorContendedEnter/Entered), weighted by time waited.
//! - `trace`: method tracing by class-file instrumentation (`trace`, `calltree`, `monitor`),
//!   streaming its results to the client as they come.
//!
//! The time-sampling engines only make SIGPROF arrive; the [`crate::sampling`] core turns
//! signals into stacks and a profile.
//!
//! Adding an engine: implement [`Engine`] in a new file here and return it from [`create`]
//! for its [`Event`]. The agent adds the engine's [`Engine::capabilities`] before
//! [`Engine::start`] and gives them back after [`Engine::stop`]; it calls `start` in the live
//! phase for sampling engines (at VMInit when started with `-agentpath`), and may call
//! [`Engine::dump`] any number of times in between. Results are a [`Report`]: text, or a
//! [`Profile`] the agent sends to the client or renders into `file=` by its extension.

pub(crate) mod alloc;
mod cpu;
mod ctimer;
pub mod gc;
mod itimer;
mod lock;
mod trace;
mod wall;

use std::time::Duration;

use jtap_jvmti::{Capabilities, Env};
use jtap_profile::{ExportOptions, Format, Profile};
use jtap_protocol::{Event, Options};

use crate::thread::Vm;

/// What engines get from the agent.
#[derive(Clone, Copy)]
pub struct Context {
    /// The agent's JVMTI environment.
    pub env: Env,
    /// The JVM.
    pub vm: Vm,
}

/// An engine's results.
pub enum Report {
    /// A text report (e.g. the gc engine's one line): results, for the client's stdout.
    Text(String),
    /// Notes on how a session went (e.g. the tracer's restore check), for the client's
    /// stderr: the results themselves were streamed while it ran.
    Notes(String),
    /// A sampled profile (boxed: it is much larger than a text report).
    Profile(Box<Profile>),
}

impl Report {
    /// A sampling engine's profile so far (empty when its sampler is not running).
    pub fn so_far(sampler: Option<&crate::sampling::Sampler>) -> Report {
        Report::Profile(Box::new(sampler.map(|s| s.snapshot()).unwrap_or_default()))
    }

    /// The results as text: the report itself, or a profile's summary.
    pub fn summary(&self) -> String {
        match self {
            Report::Text(text) | Report::Notes(text) => text.clone(),
            Report::Profile(profile) => {
                String::from_utf8_lossy(&Format::Summary.render(profile, &ExportOptions::default()))
                    .trim_end()
                    .to_string()
            }
        }
    }

    /// The bytes of `file=<path>`: a profile rendered in the format its extension names
    /// (text when it names none), a text report as it is.
    pub fn render_for(&self, path: &str) -> Vec<u8> {
        match self {
            Report::Text(text) | Report::Notes(text) => format!("{text}\n").into_bytes(),
            Report::Profile(profile) => {
                let format = Format::from_path(std::path::Path::new(path)).unwrap_or(Format::Text);
                format.render(profile, &ExportOptions::default())
            }
        }
    }
}

/// One engine. Engines run one at a time; the agent serialises calls (`ended` may come from
/// another thread than the rest, under the same lock).
pub trait Engine: Send {
    /// The engine that runs, as `event=` names it (after a fallback, the fallback's name).
    fn name(&self) -> &'static str;
    /// JVMTI capabilities the engine needs while it runs.
    fn capabilities(&self) -> Capabilities;
    /// Starts recording with the `start` options (`interval`, `threads`, …). On failure
    /// nothing is left running.
    fn start(&mut self, context: &Context, options: &Options) -> Result<(), String>;
    /// Streams results to the client that started the engine as they come (engines that
    /// report continuously); called once, right after `start` was asked for.
    fn stream_to(&mut self, _session: std::sync::Arc<crate::session::Session>) {}
    /// The results so far, without stopping.
    fn dump(&self) -> Report;
    /// Why the engine is done on its own (e.g. the tracer reported its `-n` calls), once it
    /// is: the agent then stops it as if its client had asked.
    fn ended(&self) -> Option<String> {
        None
    }
    /// Stops recording (waiting for callbacks and signal handlers in flight) and returns the
    /// final results.
    fn stop(&mut self, context: &Context) -> Report;
}

/// The engine for `event`, not yet started.
pub fn create(event: Event) -> Result<Box<dyn Engine>, String> {
    match event {
        Event::Gc => Ok(Box::new(gc::GcEngine)),
        Event::Cpu => Ok(Box::new(cpu::CpuEngine::default())),
        Event::Itimer => Ok(Box::new(itimer::ItimerEngine::new("itimer"))),
        Event::Ctimer => Ok(Box::new(ctimer::CtimerEngine::new("ctimer"))),
        Event::Wall => Ok(Box::new(wall::WallEngine::default())),
        Event::Alloc => Ok(Box::new(alloc::AllocEngine::default())),
        Event::Lock => Ok(Box::new(lock::LockEngine::default())),
        Event::Trace => Ok(Box::new(trace::TraceEngine::default())),
    }
}

/// The sampling interval: `interval=` or the engine's default.
fn interval(options: &Options, default: Duration) -> Duration {
    options.interval.unwrap_or(default)
}

/// Default interval of the CPU engines.
const CPU_INTERVAL: Duration = Duration::from_millis(10);
