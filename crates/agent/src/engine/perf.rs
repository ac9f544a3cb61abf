#![deny(unsafe_code)]

//! The `perf` engine: any perf event by name, sampled like `cpu` (a counter per thread that
//! signals its thread every period of events, the stack taken in the handler, the kernel's
//! call chain beside it): software events (`page-faults`, `context-switches`,
//! `cpu-migrations`, ...), hardware counters (`cycles`, `instructions`, `cache-misses`,
//! `branch-misses`, ...) where the machine has them, and kernel tracepoints
//! (`sched:sched_switch`, `syscalls:sys_enter_futex`: their ids come from tracefs).
//!
//! `perf=<name>` names the event; `interval=` is its period: events between samples, read as
//! a plain number as async-profiler reads `-i` (default: every event for software events and
//! tracepoints, 1,000,000 for hardware counters; the clocks `cpu-clock` and `task-clock`
//! count nanoseconds, default 10 ms). Each sample weighs its period's events. The profile's
//! event is the perf event's name.

use std::io;

use jtap_jvmti::Capabilities;
use jtap_protocol::Options;
use perf_event_open_sys::bindings as perf;

use super::{Context, Engine, Report};
use crate::sampling::armed::ArmedSampler;
use crate::sampling::counters::{Counter, PerfCounters};
use crate::sampling::signal::Source;
use crate::sampling::{self, Settings};

/// Software events by name (perf's names and aliases) and their `PERF_COUNT_SW_*` config.
const SOFTWARE: &[(&str, u32)] = &[
    ("cpu-clock", perf::PERF_COUNT_SW_CPU_CLOCK),
    ("task-clock", perf::PERF_COUNT_SW_TASK_CLOCK),
    ("page-faults", perf::PERF_COUNT_SW_PAGE_FAULTS),
    ("faults", perf::PERF_COUNT_SW_PAGE_FAULTS),
    ("minor-faults", perf::PERF_COUNT_SW_PAGE_FAULTS_MIN),
    ("major-faults", perf::PERF_COUNT_SW_PAGE_FAULTS_MAJ),
    ("context-switches", perf::PERF_COUNT_SW_CONTEXT_SWITCHES),
    ("cs", perf::PERF_COUNT_SW_CONTEXT_SWITCHES),
    ("cpu-migrations", perf::PERF_COUNT_SW_CPU_MIGRATIONS),
    ("migrations", perf::PERF_COUNT_SW_CPU_MIGRATIONS),
    ("alignment-faults", perf::PERF_COUNT_SW_ALIGNMENT_FAULTS),
    ("emulation-faults", perf::PERF_COUNT_SW_EMULATION_FAULTS),
];

/// Hardware counters by name and their `PERF_COUNT_HW_*` config.
const HARDWARE: &[(&str, u32)] = &[
    ("cycles", perf::PERF_COUNT_HW_CPU_CYCLES),
    ("cpu-cycles", perf::PERF_COUNT_HW_CPU_CYCLES),
    ("instructions", perf::PERF_COUNT_HW_INSTRUCTIONS),
    ("cache-references", perf::PERF_COUNT_HW_CACHE_REFERENCES),
    ("cache-misses", perf::PERF_COUNT_HW_CACHE_MISSES),
    ("branches", perf::PERF_COUNT_HW_BRANCH_INSTRUCTIONS),
    (
        "branch-instructions",
        perf::PERF_COUNT_HW_BRANCH_INSTRUCTIONS,
    ),
    ("branch-misses", perf::PERF_COUNT_HW_BRANCH_MISSES),
    ("bus-cycles", perf::PERF_COUNT_HW_BUS_CYCLES),
    ("ref-cycles", perf::PERF_COUNT_HW_REF_CPU_CYCLES),
];

/// Where tracefs may be mounted, as seen from inside the JVM's namespaces.
const TRACEFS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// Default period of hardware counters.
const HARDWARE_PERIOD: u64 = 1_000_000;
/// Default period of the clocks, in nanoseconds.
const CLOCK_PERIOD: u64 = 10_000_000;

/// The engine.
#[derive(Default)]
pub struct PerfEngine {
    sampler: Option<ArmedSampler>,
}

/// The counter the perf event `name` names, with `period` events between samples (the
/// event's default when None).
fn counter(name: &str, period: Option<u64>) -> Result<Counter, String> {
    let found = |table: &[(&str, u32)]| {
        table
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, config)| u64::from(*config))
    };
    let (kind, config, default) = if let Some(config) = found(SOFTWARE) {
        let clock = config == u64::from(perf::PERF_COUNT_SW_CPU_CLOCK)
            || config == u64::from(perf::PERF_COUNT_SW_TASK_CLOCK);
        (
            perf::PERF_TYPE_SOFTWARE,
            config,
            if clock { CLOCK_PERIOD } else { 1 },
        )
    } else if let Some(config) = found(HARDWARE) {
        (perf::PERF_TYPE_HARDWARE, config, HARDWARE_PERIOD)
    } else if let Some((category, event)) = name.split_once(':') {
        (perf::PERF_TYPE_TRACEPOINT, tracepoint(category, event)?, 1)
    } else {
        let known: Vec<&str> = SOFTWARE.iter().chain(HARDWARE).map(|(n, _)| *n).collect();
        return Err(format!(
            "unknown perf event {name:?} (known: {}, or a tracepoint category:name)",
            known.join(", ")
        ));
    };
    Ok(Counter {
        kind,
        config,
        period: period.unwrap_or(default).max(1),
        continuous: kind == perf::PERF_TYPE_TRACEPOINT,
    })
}

/// The id of tracepoint `category:event`, from tracefs.
fn tracepoint(category: &str, event: &str) -> Result<u64, String> {
    let plain = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !plain(category) || !plain(event) {
        return Err(format!("bad tracepoint name {category}:{event}"));
    }
    let mut last = None;
    for root in TRACEFS {
        let path = format!("{root}/events/{category}/{event}/id");
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                return text
                    .trim()
                    .parse()
                    .map_err(|_| format!("{path}: not a tracepoint id"))
            }
            Err(e) => last = Some((path, e)),
        }
    }
    Err(match last {
        Some((path, e)) if e.kind() == io::ErrorKind::NotFound => {
            format!("no tracepoint {category}:{event} (not in {path}; is tracefs mounted?)")
        }
        Some((path, e)) => format!("cannot read {path}: {e}"),
        None => format!("no tracepoint {category}:{event}"),
    })
}

/// Why `perf_event_open` refused `name`, said for people.
fn refused(name: &str, counter: Counter, e: &io::Error) -> String {
    let hardware = counter.kind == perf::PERF_TYPE_HARDWARE;
    match e.raw_os_error() {
        Some(libc::ENOENT | libc::EOPNOTSUPP) if hardware => format!(
            "perf event {name}: this machine has no hardware counters (perf_event_open: {e}); virtual machines often do not expose them"
        ),
        Some(libc::EACCES | libc::EPERM) => format!(
            "perf event {name}: not allowed (perf_event_open: {e}; see /proc/sys/kernel/perf_event_paranoid)"
        ),
        _ => format!("perf event {name}: perf_event_open: {e}"),
    }
}

impl Engine for PerfEngine {
    fn name(&self) -> &'static str {
        "perf"
    }

    fn capabilities(&self) -> Capabilities {
        sampling::capabilities()
    }

    fn start(&mut self, context: &Context, options: &Options) -> Result<(), String> {
        let name = options
            .perf
            .as_deref()
            .ok_or("event=perf needs perf=<event>")?;
        let period = options.interval.map(|i| i.as_nanos() as u64);
        let counter = counter(name, period)?;
        PerfCounters::probe(counter, options.alluser).map_err(|e| refused(name, counter, &e))?;
        let interval = std::time::Duration::from_nanos(counter.period);
        let settings = Settings::from_options(options, name, "perf", interval, Source::PerfEvent)?;
        let counters =
            PerfCounters::new(counter, options.alluser, options.cstack.unwrap_or_default());
        let source = format!("perf event {name}");
        let sampler = ArmedSampler::start(
            context.env,
            context.vm,
            settings,
            Box::new(counters),
            &source,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_found_by_name_with_their_default_periods() {
        let faults = counter("page-faults", None).unwrap();
        assert_eq!((faults.kind, faults.period), (perf::PERF_TYPE_SOFTWARE, 1));
        assert_eq!(counter("faults", Some(100)).unwrap().period, 100);
        assert_eq!(counter("task-clock", None).unwrap().period, CLOCK_PERIOD);
        let cycles = counter("cycles", None).unwrap();
        assert_eq!(
            (cycles.kind, cycles.period),
            (perf::PERF_TYPE_HARDWARE, HARDWARE_PERIOD)
        );
        let unknown = counter("pagefaults", None).unwrap_err();
        assert!(unknown.contains("known: cpu-clock"), "{unknown}");
        assert!(counter("sched:../x", None)
            .unwrap_err()
            .contains("bad tracepoint"));
    }
}
