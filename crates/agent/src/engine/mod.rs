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
//! - `io`: file and socket calls of the JVM's libraries and JNI code above a threshold, weighted
//!   by time, through the hooks of [`crate::hooks`].
//! - `nativelock`: waits on pthread mutexes, read-write locks and conditions of the JVM's
//!   libraries and JNI code above a threshold, weighted by time, through [`crate::hooks`].
//! - `trace`: method tracing by class-file instrumentation (`trace`, `calltree`, `monitor`),
//!   streaming its results to the client as they come.
//! - `perf`: any perf event by name: software events, hardware counters, tracepoints.
//!
//! The time-sampling engines only make SIGPROF arrive; the [`crate::sampling`] core turns
//! signals into stacks and a profile.
//!
//! Adding an engine: implement [`Engine`] in a new file here and add its row to [`ENGINES`]:
//! its [`Event`], how to create it, and the [`Resource`]s it holds while it runs. Engines run
//! side by side (a recording may hold several, and several recordings may run) unless they
//! hold a resource in common. The agent adds the engine's [`Engine::capabilities`] before
//! [`Engine::start`] and gives back after [`Engine::stop`] those no other running engine
//! needs; it calls `start` in the live phase for sampling engines (at VMInit when started
//! with `-agentpath`), and may call [`Engine::dump`] any number of times in between. Results
//! are a [`Report`]: text, or a [`Profile`] the agent sends to the client or renders into
//! `file=` by its extension.

pub(crate) mod alloc;
mod cpu;
mod ctimer;
pub mod gc;
mod io;
mod itimer;
mod lock;
mod nativelock;
mod nativemem;
mod perf;
mod timed;
mod trace;
mod wall;

use std::path::{Path, PathBuf};
use std::time::Duration;

use jtap_jvmti::{Capabilities, Env};
use jtap_profile::{event, Counter, ExportOptions, Format, Labels, Profile, Selection};
use jtap_protocol::records::Record;
use jtap_protocol::{Event, Options};

use crate::thread::Vm;

/// What engines get from the agent.
#[derive(Clone, Copy)]
pub struct Context {
    /// The agent's JVMTI environment, which lives for the process.
    pub env: &'static Env,
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
    /// A result as data (alloc's SITES report), rendered by the client.
    Record(Box<Record>),
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
            Report::Record(record) => record.to_text(),
            Report::Profile(profile) => {
                String::from_utf8_lossy(&Format::Summary.render(profile, &ExportOptions::default()))
                    .trim_end()
                    .to_string()
            }
        }
    }

    /// The profiles of a recording's engines as one JFR recording (`push=`).
    pub fn render_jfr(reports: &[Report]) -> Vec<u8> {
        let profiles: Vec<Profile> = reports
            .iter()
            .filter_map(|r| match r {
                Report::Profile(profile) => Some(profile.as_ref().clone()),
                _ => None,
            })
            .collect();
        jtap_profile::render_set(Format::Jfr, &profiles, &ExportOptions::default(), None)
            .into_iter()
            .next()
            .map(|(_, bytes)| bytes)
            .unwrap_or_default()
    }

    /// The results as JFR recordings, one per request label (`--by`) for the labels with
    /// the most samples, at most `most`, each without its label frame; and one (label None)
    /// with the rest: the samples outside any label, and those of the other labels with their
    /// label at the root. Without labels, one recording of everything.
    pub fn render_jfr_by_label(reports: &[Report], most: usize) -> Vec<(Option<String>, Vec<u8>)> {
        let mut labels: Vec<(String, u64)> = Vec::new();
        for report in reports {
            if let Report::Profile(profile) = report {
                for (label, samples) in profile.labels(Counter::Samples) {
                    match labels.iter_mut().find(|(l, _)| l == label) {
                        Some((_, total)) => *total += samples,
                        None => labels.push((label.to_string(), samples)),
                    }
                }
            }
        }
        labels.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        labels.truncate(most);
        let split: Vec<String> = labels.into_iter().map(|(label, _)| label).collect();
        let select = |selection: &Selection| -> Vec<Report> {
            reports
                .iter()
                .filter_map(|report| match report {
                    Report::Profile(profile) => profile
                        .select(selection)
                        .ok()
                        .map(|p| Report::Profile(Box::new(p))),
                    _ => None,
                })
                .collect()
        };
        let rest = Selection {
            labels: Labels::NoneOf(split.clone()),
            ..Selection::default()
        };
        let mut series = vec![(None, Report::render_jfr(&select(&rest)))];
        for label in split {
            let only = select(&Selection::of_label(&label));
            series.push((Some(label), Report::render_jfr(&only)));
        }
        series
    }

    /// The files of `file=<path>` for the results of a recording's engines: profiles
    /// rendered in the format the extension names (text when it names none; one file for
    /// formats that hold several events, else one per event), text reports as they are.
    pub fn render_all_for(reports: &[Report], path: &str) -> Vec<(PathBuf, Vec<u8>)> {
        let path = Path::new(path);
        let mut profiles = Vec::new();
        let mut text = String::new();
        for report in reports {
            match report {
                Report::Text(t) | Report::Notes(t) => {
                    text.push_str(t);
                    text.push('\n');
                }
                Report::Record(record) => {
                    text.push_str(&record.to_text());
                    text.push('\n');
                }
                Report::Profile(profile) => profiles.push(profile.as_ref().clone()),
            }
        }
        let mut files = Vec::new();
        if !profiles.is_empty() {
            let format = Format::from_path(path).unwrap_or(Format::Text);
            files.extend(
                jtap_profile::render_set(format, &profiles, &ExportOptions::default(), Some(path))
                    .into_iter()
                    .map(|(file, bytes)| (file.unwrap_or_else(|| path.to_owned()), bytes)),
            );
        }
        if !text.is_empty() {
            // A recording's text reports (gc, alloc's SITES) record alone (see
            // `Options::parse`): the file is theirs.
            files.push((path.to_owned(), text.into_bytes()));
        }
        files
    }
}

/// One engine. The agent serialises calls to it (`ended` and `progress` may come from another
/// thread than the rest, under the same lock).
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
    fn stream_to(&mut self, _sink: std::sync::Arc<dyn crate::channel::ClientSink>) {}
    /// The results so far, without stopping.
    fn dump(&self) -> Report;
    /// Why the engine is done on its own (e.g. the tracer reported its `-n` calls), once it
    /// is: the agent then stops it as if its client had asked.
    fn ended(&self) -> Option<jtap_protocol::Ended> {
        None
    }
    /// Samples recorded and dropped so far, for the client's progress line (sampling engines).
    fn progress(&self) -> Option<(u64, u64)> {
        None
    }
    /// Stops recording (waiting for callbacks and signal handlers in flight) and returns the
    /// final results.
    fn stop(&mut self, context: &Context) -> Report;
}

/// What an engine holds alone while it runs: engines holding one in common cannot run at
/// the same time (the second is refused with the first's name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    /// Per-thread CPU timers or perf_event counters, or the process's profiling timer.
    CpuTimers,
    /// The wall-clock ticker and its signals.
    WallTicker,
    /// JVMTI heap sampling (one environment per JVM) and the allocation table.
    HeapSampling,
    /// Monitor events, the `Unsafe.park` binding and the lock table.
    LockTracking,
    /// The GC pause counters.
    GcPauses,
    /// The class-file transformer and the probe runtime.
    Instrumentation,
    /// Hooks on C library functions and the site table of their calls, by the engine's name
    /// (`nativemem`: the C allocator; `io`, `nativelock`).
    Hooks(&'static str),
}

/// One row of [`ENGINES`].
pub struct Registration {
    /// The event that starts the engine.
    pub event: Event,
    /// A new engine, not yet started.
    pub create: fn() -> Box<dyn Engine>,
    /// What it holds alone while it runs.
    pub holds: &'static [Resource],
}

/// Every engine, by event.
pub const ENGINES: [Registration; 12] = [
    Registration {
        event: Event::Cpu,
        create: || Box::new(cpu::CpuEngine::default()),
        holds: &[Resource::CpuTimers],
    },
    Registration {
        event: Event::Itimer,
        create: || Box::new(itimer::ItimerEngine::new("itimer")),
        holds: &[Resource::CpuTimers],
    },
    Registration {
        event: Event::Ctimer,
        create: || Box::new(ctimer::CtimerEngine::new("ctimer")),
        holds: &[Resource::CpuTimers],
    },
    Registration {
        event: Event::Wall,
        create: || Box::new(wall::WallEngine::default()),
        holds: &[Resource::WallTicker],
    },
    Registration {
        event: Event::Alloc,
        create: || Box::new(alloc::AllocEngine::default()),
        holds: &[Resource::HeapSampling],
    },
    Registration {
        event: Event::Lock,
        create: || Box::new(lock::LockEngine::default()),
        holds: &[Resource::LockTracking],
    },
    Registration {
        event: Event::Gc,
        create: || Box::new(gc::GcEngine),
        holds: &[Resource::GcPauses],
    },
    Registration {
        event: Event::Trace,
        create: || Box::new(trace::TraceEngine::default()),
        holds: &[Resource::Instrumentation],
    },
    Registration {
        event: Event::NativeMem,
        create: || Box::new(nativemem::NativeMemEngine::default()),
        holds: &[Resource::Hooks(event::NATIVEMEM.name)],
    },
    Registration {
        event: Event::Io,
        create: || Box::new(io::engine()),
        holds: &[Resource::Hooks(event::IO.name)],
    },
    Registration {
        event: Event::NativeLock,
        create: || Box::new(nativelock::engine()),
        holds: &[Resource::Hooks(event::NATIVELOCK.name)],
    },
    Registration {
        event: Event::Perf,
        create: || Box::new(perf::PerfEngine::default()),
        holds: &[Resource::CpuTimers],
    },
];

/// The engine for `event`, not yet started.
pub fn create(event: Event) -> Box<dyn Engine> {
    (registration(event).create)()
}

/// What the engine of `event` holds alone while it runs with `options` (`exact` allocation
/// recording instruments classes).
pub fn holds(event: Event, options: &Options) -> Vec<Resource> {
    let mut holds = registration(event).holds.to_vec();
    if event == Event::Alloc && options.exact {
        holds.push(Resource::Instrumentation);
    }
    holds
}

fn registration(event: Event) -> &'static Registration {
    ENGINES
        .iter()
        .find(|r| r.event == event)
        .expect("every event has a row in ENGINES")
}

/// The sampling interval of the CPU engines (which only `event=` names): `interval=` or the
/// engine's default.
fn interval(options: &Options, default: Duration) -> Duration {
    options.interval.unwrap_or(default)
}

/// Default interval of the CPU engines.
const CPU_INTERVAL: Duration = Duration::from_millis(10);

#[cfg(test)]
mod tests {
    use std::path::Path;

    use jtap_profile::{Frame, FrameKind, Metadata, Profile, StackCounts};

    use super::Report;

    #[test]
    fn jfr_for_a_push_splits_the_heaviest_labels_into_series_of_their_own() {
        let mut profile = Profile::new(Metadata {
            event: "cpu".into(),
            ..Metadata::default()
        });
        let work = Frame::new("app.Main.work", FrameKind::Compiled);
        for (label, samples) in [
            (Some("/a"), 30),
            (Some("/b"), 20),
            (Some("/c"), 5),
            (None, 7),
        ] {
            let mut frames: Vec<Frame> = label.map(Frame::request_label).into_iter().collect();
            frames.push(work.clone());
            let counts = StackCounts {
                samples,
                weight: samples,
                events: samples,
            };
            profile.add_frame_counts(&frames, counts);
        }
        let series = Report::render_jfr_by_label(&[Report::Profile(Box::new(profile))], 2);
        let read = |bytes: &[u8]| {
            let profiles =
                jtap_profile::import::read(bytes, Path::new("p.jfr"), &Default::default()).unwrap();
            let mut stacks: Vec<String> = profiles[0]
                .stacks()
                .into_iter()
                .map(|(stack, counts)| {
                    let names: Vec<&str> = stack
                        .iter()
                        .map(|&f| profiles[0].frame(f).name.as_str())
                        .collect();
                    format!("{} {}", names.join(";"), counts.samples)
                })
                .collect();
            stacks.sort();
            stacks
        };
        let labels: Vec<Option<&str>> = series.iter().map(|(l, _)| l.as_deref()).collect();
        assert_eq!(labels, [None, Some("/a"), Some("/b")]);
        assert_eq!(
            read(&series[0].1),
            ["[label=/c];app.Main.work 5", "app.Main.work 7"]
        );
        assert_eq!(read(&series[1].1), ["app.Main.work 30"]);
        assert_eq!(read(&series[2].1), ["app.Main.work 20"]);
    }
}
