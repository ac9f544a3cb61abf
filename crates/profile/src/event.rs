//! What a profile counts: one row per kind of event, the one place an event's name, units
//! and types in the export formats are written. The agent's engines, the option grammar, the
//! exporters, the importers and the CLI all name events through [`KINDS`].
//!
//! A profile's [`crate::Metadata::event`] is a kind's name; names no row has (perf events
//! given by name, `page-faults`, `sched:sched_switch`) are counted events: [`kind`] answers
//! [`COUNTED`] for them.

/// How a JFR recording carries a kind's samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JfrType {
    /// `jdk.ExecutionSample`.
    Execution,
    /// `profiler.WallClockSample` (async-profiler's).
    Wall,
    /// `jdk.ObjectAllocationSample`.
    Allocation,
    /// `jdk.JavaMonitorEnter`.
    Lock,
    /// `profiler.Malloc` (async-profiler's).
    NativeMemory,
}

/// One kind of event.
#[derive(Debug, PartialEq, Eq)]
pub struct Kind {
    /// As options, file names (`out.alloc.collapsed`) and reports write it.
    pub name: &'static str,
    /// Sampled at a time interval (the sample count times the interval is time).
    pub timed: bool,
    /// The unit of a sample's weight: `nanoseconds` or `bytes`.
    pub weight_unit: &'static str,
    /// What one event is, for report headers: `samples`, `objects`, `waits`, `allocations`.
    pub events: &'static str,
    /// Reports show the weight by default (as async-profiler does for allocations and
    /// locks), not the sample count.
    pub weighted: bool,
    /// A stack's leaf frame is the class of what was allocated or locked.
    pub class_leaf: bool,
    /// pprof's sample types, as Go's tools name them: the events column (unit `count`) and
    /// the weight column.
    pub pprof: (&'static str, &'static str),
    /// Further pprof column names read as this kind's events and weight (async-profiler's
    /// and Go's spellings).
    pub pprof_aliases: (&'static [&'static str], &'static [&'static str]),
    /// The JFR event type carrying it, if JFR has one.
    pub jfr: Option<JfrType>,
}

impl Kind {
    /// Named `name`, as the engine recorded it (`nativemem-live` is `nativemem` with `live`).
    pub fn is(&self, name: &str) -> bool {
        self.name == name
    }
}

const fn timed(name: &'static str, pprof_weight: &'static str, jfr: Option<JfrType>) -> Kind {
    Kind {
        name,
        timed: true,
        weight_unit: "nanoseconds",
        events: "samples",
        weighted: false,
        class_leaf: false,
        pprof: ("samples", pprof_weight),
        pprof_aliases: (&[], &[]),
        jfr,
    }
}

/// CPU time (perf_events cpu-clock, falling back to `ctimer` and `itimer`).
pub const CPU: Kind = timed("cpu", "cpu", Some(JfrType::Execution));
/// CPU time from the process-wide `setitimer(ITIMER_PROF)`.
pub const ITIMER: Kind = timed("itimer", "cpu", Some(JfrType::Execution));
/// CPU time from a `timer_create` timer on each thread's CPU clock.
pub const CTIMER: Kind = timed("ctimer", "cpu", Some(JfrType::Execution));
/// Wall-clock time.
pub const WALL: Kind = timed("wall", "wall", Some(JfrType::Wall));
/// Allocations (bytes allocated).
pub const ALLOC: Kind = Kind {
    name: "alloc",
    timed: false,
    weight_unit: "bytes",
    events: "objects",
    weighted: true,
    class_leaf: true,
    pprof: ("alloc_objects", "alloc_space"),
    pprof_aliases: (&["allocations"], &[]),
    jfr: Some(JfrType::Allocation),
};
/// Allocations still alive at the end (`alloc` with `live`).
pub const LIVE: Kind = Kind {
    name: "live",
    pprof: ("inuse_objects", "inuse_space"),
    pprof_aliases: (&["live"], &[]),
    jfr: None,
    ..ALLOC
};
/// Contended locks (time waited).
pub const LOCK: Kind = Kind {
    name: "lock",
    timed: false,
    weight_unit: "nanoseconds",
    events: "waits",
    weighted: true,
    class_leaf: true,
    pprof: ("contentions", "delay"),
    pprof_aliases: (&["locks"], &[]),
    jfr: Some(JfrType::Lock),
};
/// Native memory allocated (`malloc` and friends).
pub const NATIVEMEM: Kind = Kind {
    name: "nativemem",
    timed: false,
    weight_unit: "bytes",
    events: "allocations",
    weighted: true,
    class_leaf: false,
    pprof: ("malloc_count", "malloc_space"),
    pprof_aliases: (&[], &[]),
    jfr: Some(JfrType::NativeMemory),
};
/// Native memory still allocated at the end (`nativemem` with `live`).
pub const NATIVEMEM_LIVE: Kind = Kind {
    name: "nativemem-live",
    pprof: ("inuse_count", "inuse_space"),
    jfr: None,
    ..NATIVEMEM
};
/// File and socket calls at or above a threshold (time spent in them).
pub const IO: Kind = Kind {
    name: "io",
    timed: false,
    weight_unit: "nanoseconds",
    events: "calls",
    weighted: true,
    class_leaf: false,
    pprof: ("io_calls", "io_time"),
    pprof_aliases: (&[], &[]),
    jfr: None,
};
/// Waits on pthread locks and conditions at or above a threshold (time waited).
pub const NATIVELOCK: Kind = Kind {
    name: "nativelock",
    events: "waits",
    pprof: ("native_contentions", "native_delay"),
    ..IO
};
/// Events counted as they happen (perf events given by name): each sample one event.
pub const COUNTED: Kind = Kind {
    name: "events",
    timed: false,
    weight_unit: "events",
    events: "events",
    weighted: false,
    class_leaf: false,
    pprof: ("samples", "events"),
    pprof_aliases: (&[], &[]),
    jfr: None,
};

/// Every named kind, in the order help lists them.
pub const KINDS: [&Kind; 11] = [
    &CPU,
    &ITIMER,
    &CTIMER,
    &WALL,
    &ALLOC,
    &LIVE,
    &LOCK,
    &NATIVEMEM,
    &NATIVEMEM_LIVE,
    &IO,
    &NATIVELOCK,
];

/// The kind named `name`, if a row has it.
pub fn named(name: &str) -> Option<&'static Kind> {
    KINDS.into_iter().find(|k| k.is(name))
}

/// The kind of a profile's event: its row, or [`COUNTED`] for a name no row has.
pub fn kind(name: &str) -> &'static Kind {
    named(name).unwrap_or(&COUNTED)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_found() {
        for (i, k) in KINDS.iter().enumerate() {
            assert_eq!(named(k.name), Some(*k));
            assert!(KINDS[..i].iter().all(|other| other.name != k.name));
        }
        assert_eq!(kind("page-faults"), &COUNTED);
    }

    #[test]
    fn weighted_kinds_have_a_weight_column() {
        for k in KINDS {
            assert_eq!(k.weighted, !k.timed, "{}", k.name);
            assert!(!k.pprof.1.is_empty());
        }
    }
}
