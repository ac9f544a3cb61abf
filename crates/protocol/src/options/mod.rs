//! The option grammar: comma-separated items, each an action word, a flag or `key=value`.
//!
//! ```text
//! options  := "" | item ("," item)*
//! item     := action | key | key "=" value
//! action   := "start" | "stop" | "status" | "dump" | "version" | "help" | "histogram"
//!           | "inspect"
//! value    := any characters; "," and "\" are written "\," and "\\"
//! ```
//!
//! At most one action and each key at most once. The keys, what each takes and the command
//! it goes with are declared once, in [`KEYS`]: the parser's checks, the agent's `help`, the
//! CLI's help of the flags that set them and the manual's option list come from there.
//! `start` records one or more events at once, as async-profiler's agent does: `event=`
//! names one, and `alloc`, `lock` and `wall` add theirs, each optionally with its setting:
//! `start,event=cpu,alloc,lock=10us,wall=50ms`. `interval` is the sampling interval of
//! `event=`; `sites`, `exact` and `live` go with `alloc`, `allthreads` with `wall`; `trace=`
//! with `event=trace`, which records alone, as `gc` does. Durations are an integer with a
//! unit `ns`, `us`, `ms` or `s` (no unit: nanoseconds).

mod keys;
mod values;

use std::fmt;
use std::time::Duration;

use jtap_profile::event;

pub use keys::{help_of, help_text, key, GoesWith, Key, Shown, Takes, KEYS};
use values::{escape, split_items, Item};
pub use values::{MAX_ALLOC_INTERVAL, MAX_JSTACKDEPTH};

/// What the agent is asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// Start a recording of one or more engines (`event=`, `alloc`, `lock`, `wall`) owned by
    /// the asking client.
    Start,
    /// Stop running recordings (those of `event=` when given, else every one but traces) and
    /// send their results.
    Stop,
    /// Report the agent's state.
    Status,
    /// Send (or write to `file=`) running recordings' results so far, without stopping them
    /// (chosen as `stop` chooses).
    Dump,
    /// Report the agent's version.
    Version,
    /// Describe the options.
    Help,
    /// Count instances and bytes per class with a JVMTI heap walk (`live`: after a full GC;
    /// `top=N`: only the N largest classes).
    Histogram,
    /// Instances of a class and their fields, or one of its statics, read through JVMTI and
    /// JNI (`class=`, `limit=`, `path=`, `static=`).
    Inspect,
}

impl Action {
    /// Every action, in the order help lists them.
    pub const ALL: [Action; 8] = [
        Action::Start,
        Action::Stop,
        Action::Status,
        Action::Dump,
        Action::Version,
        Action::Help,
        Action::Histogram,
        Action::Inspect,
    ];

    /// The action's word in option strings.
    pub fn name(self) -> &'static str {
        match self {
            Action::Start => "start",
            Action::Stop => "stop",
            Action::Status => "status",
            Action::Dump => "dump",
            Action::Version => "version",
            Action::Help => "help",
            Action::Histogram => "histogram",
            Action::Inspect => "inspect",
        }
    }

    fn from_name(word: &str) -> Option<Action> {
        Action::ALL.into_iter().find(|a| a.name() == word)
    }
}

/// What an engine records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Event {
    /// CPU time sampling with a perf_events cpu-clock counter per thread (falling back to
    /// `ctimer`, then `itimer`, where perf_events are unavailable).
    Cpu,
    /// CPU time sampling with the process-wide `setitimer(ITIMER_PROF)`.
    Itimer,
    /// CPU time sampling with a `timer_create` timer on each thread's CPU clock.
    Ctimer,
    /// Wall-clock sampling: threads whatever their state, at a fixed rate.
    Wall,
    /// Allocation sampling (JVMTI SampledObjectAlloc).
    Alloc,
    /// Contended monitors (JVMTI MonitorContendedEnter/Entered), weighted by time waited.
    Lock,
    /// Garbage collection pauses (JVMTI GarbageCollectionStart/Finish).
    Gc,
    /// Method tracing by class-file instrumentation (`trace=` holds the plan).
    Trace,
    /// Native memory: `malloc` and friends of the JVM's libraries and JNI code, sampled by
    /// bytes, weighted by bytes (`live`: only what was not freed).
    NativeMem,
    /// File and socket calls (`read`, `write`, `send`, `recv`, `connect`, `accept`, `poll`, …)
    /// of the JVM's libraries and JNI code that take at least a threshold, weighted by time.
    Io,
    /// Waits on pthread mutexes, read-write locks and conditions of the JVM's libraries and
    /// JNI code that take at least a threshold, weighted by time.
    NativeLock,
    /// A perf event by name (`perf=`): software events, hardware counters, tracepoints.
    Perf,
}

impl Event {
    /// Every event, in the order help lists them.
    pub const ALL: [Event; 12] = [
        Event::Cpu,
        Event::Itimer,
        Event::Ctimer,
        Event::Wall,
        Event::Alloc,
        Event::Lock,
        Event::Gc,
        Event::Trace,
        Event::NativeMem,
        Event::Io,
        Event::NativeLock,
        Event::Perf,
    ];

    /// The event's name in option strings.
    pub fn name(self) -> &'static str {
        match self {
            Event::Gc => "gc",
            Event::Trace => "trace",
            Event::Perf => "perf",
            profiled => profiled.kind().map_or("", |kind| kind.name),
        }
    }

    /// The kind of the profile the engine records (gc and trace record none).
    pub fn kind(self) -> Option<&'static event::Kind> {
        match self {
            Event::Cpu => Some(&event::CPU),
            Event::Itimer => Some(&event::ITIMER),
            Event::Ctimer => Some(&event::CTIMER),
            Event::Wall => Some(&event::WALL),
            Event::Alloc => Some(&event::ALLOC),
            Event::Lock => Some(&event::LOCK),
            Event::NativeMem => Some(&event::NATIVEMEM),
            Event::Io => Some(&event::IO),
            Event::NativeLock => Some(&event::NATIVELOCK),
            Event::Gc | Event::Trace => None,
            // Named by the event counted (`page-faults`).
            Event::Perf => Some(&event::COUNTED),
        }
    }

    /// Whether the event samples stacks over time (cpu, itimer, ctimer, wall).
    pub fn is_time_sampling(self) -> bool {
        self.kind().is_some_and(|kind| kind.timed)
    }

    /// Whether the engine can only start in the live phase (at VMInit when given at start-up).
    pub fn needs_live_phase(self) -> bool {
        self.is_time_sampling() || matches!(self, Event::Trace | Event::Perf)
    }

    /// The event called `word` in the option grammar.
    pub fn from_name(word: &str) -> Option<Event> {
        Event::ALL.into_iter().find(|e| e.name() == word)
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How the `cpu` engine walks native frames (`cstack=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NativeStacks {
    /// With each library's DWARF call-frame information (`.eh_frame`), from a copy of the
    /// thread's stack the kernel takes with the sample; along frame pointers where that
    /// finds fewer frames.
    #[default]
    Dwarf,
    /// Along frame pointers only (the kernel's walk, `cpu` only; the other engines then have
    /// no native frames).
    FramePointers,
    /// None: Java and kernel frames only.
    No,
}

/// Who walks Java stacks (`walker=`): in the `alloc` and `lock` engines' callbacks, and in the
/// sampling engines' signal handlers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum JavaStacks {
    /// jtap's own walk of HotSpot's frames, read from the VM's structure tables; the VM's
    /// walker where it stops (and, in callbacks, on the first stacks, to check it).
    #[default]
    Vm,
    /// The VM's own: JVMTI's `GetStackTrace` in callbacks, `AsyncGetCallTrace` in signal
    /// handlers (`asgct` is another name for it).
    Jvmti,
    /// Both, compared stack by stack (the VM's stack is kept; differences go to the log).
    Check,
}

impl JavaStacks {
    /// Every choice, in the order help lists them.
    pub const ALL: [JavaStacks; 3] = [JavaStacks::Vm, JavaStacks::Jvmti, JavaStacks::Check];

    /// The choice's word in option strings.
    pub fn name(self) -> &'static str {
        match self {
            JavaStacks::Vm => "vm",
            JavaStacks::Jvmti => "jvmti",
            JavaStacks::Check => "check",
        }
    }

    /// The choice a word names: its [`name`](Self::name), or `asgct` for [`JavaStacks::Jvmti`].
    pub fn named(word: &str) -> Option<JavaStacks> {
        if word == "asgct" {
            return Some(JavaStacks::Jvmti);
        }
        JavaStacks::ALL.into_iter().find(|c| c.name() == word)
    }
}

impl NativeStacks {
    /// Every choice, in the order help lists them.
    pub const ALL: [NativeStacks; 3] = [
        NativeStacks::Dwarf,
        NativeStacks::FramePointers,
        NativeStacks::No,
    ];

    /// The choice's word in option strings.
    pub fn name(self) -> &'static str {
        match self {
            NativeStacks::Dwarf => "dwarf",
            NativeStacks::FramePointers => "fp",
            NativeStacks::No => "no",
        }
    }
}

/// A parsed option string. [`Options::parse`] and [`Display`](fmt::Display) are inverses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// The action; none means "just load" at start-up and `status` on attach.
    pub action: Option<Action>,
    /// The engine `start` runs.
    pub event: Option<Event>,
    /// The engine's sampling interval.
    pub interval: Option<Duration>,
    /// `start`: the agent itself stops the engine after this long and sends its results to
    /// the client that started it, whether or not that client asks (a stuck client cannot
    /// keep the application paying for an engine longer than the user asked).
    pub duration: Option<Duration>,
    /// `start` with `file=`: every this long, the recording's results so far go to a new file
    /// (`file=`'s `%t`, `%p`, `%n` expanded) and the engines start afresh (continuous
    /// profiling).
    pub rotate: Option<Duration>,
    /// With `loop=`: how many of the newest files to keep (older ones are deleted).
    pub keep: Option<u32>,
    /// With `loop=`: each period also goes, as JFR, to this Pyroscope-compatible endpoint.
    pub push: Option<String>,
    /// With `push=`: the application's name (default `jtap`).
    pub app: Option<String>,
    /// With `push=`: labels, `k=v;k=v`.
    pub labels: Option<String>,
    /// With `push=https://`: a PEM file of CA certificates trusted besides the public roots.
    pub push_ca: Option<String>,
    /// With `push=`: the user of HTTP basic auth (its password: `push-token-file=`).
    pub push_user: Option<String>,
    /// With `push=`: a file holding the secret of each push (a bearer token, or with
    /// `push-user=` the basic auth password), read at every push.
    pub push_token_file: Option<String>,
    /// With `push=`: a directory where periods the server did not take wait for it.
    pub push_spool: Option<String>,
    /// With `push-spool=`: the most bytes waiting there; older periods are dropped beyond.
    pub push_spool_max: Option<u64>,
    /// Sampling engines: put each sample's thread name at the root of its stack.
    pub threads: bool,
    /// `event=wall`: sample every thread of the process, not only Java threads.
    pub allthreads: bool,
    /// `start`: the engine belongs to no client (runs until `stop` or the JVM's exit).
    pub detach: bool,
    /// `event=cpu`: sample user-mode CPU time only; stacks have no kernel frames.
    pub alluser: bool,
    /// Sampling engines: how native frames are walked (default DWARF; frame pointers are the
    /// `cpu` engine's only).
    pub cstack: Option<NativeStacks>,
    /// Engines: keep each sample's time and thread (the event log JFR and timelines need).
    pub timeline: bool,
    /// Sampling engines: label each sample with the request its thread works for, as the
    /// calls of these entry methods say (see [`crate::label`]).
    pub by: Vec<crate::label::LabelBy>,
    /// With `by=`: a call of an entry inside another labels by the inner one, not the outer.
    pub byinner: bool,
    /// Sampling engines: keep only stacks with a frame matching this regular expression.
    pub include: Option<String>,
    /// Sampling engines: drop stacks with a frame matching this regular expression.
    pub exclude: Option<String>,
    /// Sampling engines: deepest Java stack recorded, in frames.
    pub jstackdepth: Option<u32>,
    /// How alloc and lock take Java stacks (`walker=`).
    pub walker: Option<JavaStacks>,
    /// Where `dump`/`stop` write results (a path inside the JVM's mount namespace).
    pub file: Option<String>,
    /// The client's control-channel socket (a path inside the JVM's mount namespace).
    pub channel: Option<String>,
    /// A file (inside the JVM's mount namespace) the agent appends its log to.
    pub log: Option<String>,
    /// How long the sampling core outlives the last recording, from this command on.
    pub linger: Option<Duration>,
    /// The client's version; the agent refuses commands from a different version.
    pub client: Option<String>,
    /// The other options follow over the channel as one [`crate::Frame::Options`]: they are
    /// longer than the attach `load` argument carries (1 KiB on JDKs before 24).
    pub rest: bool,
    /// Log to the JVM's stderr (never its stdout).
    pub debug: bool,
    /// `histogram`: count only live objects (a full GC runs first). `start,event=alloc`:
    /// report only sampled objects still alive.
    pub live: bool,
    /// `alloc[=<bytes>]`: record allocations too (beside `event=`), with this mean interval
    /// between samples when given.
    pub alloc: Option<Option<u64>>,
    /// `nativemem[=<bytes>]`: record native memory allocations too, with this mean interval
    /// between samples when given (0: every allocation).
    pub nativemem: Option<Option<u64>>,
    /// `io[=<duration>]`: record file and socket calls too, those that take at least this
    /// long when given (zero: every one).
    pub io: Option<Option<Duration>>,
    /// `nativelock[=<duration>]`: record pthread lock and condition waits too, those that
    /// take at least this long when given (zero: every contended one).
    pub nativelock: Option<Option<Duration>>,
    /// `lock[=<duration>]`: record contended locks too, waits of at least this long when
    /// given.
    pub lock: Option<Option<Duration>>,
    /// `wall[=<interval>]`: sample wall-clock time too (e.g. beside `event=cpu`), at this
    /// interval when given.
    pub wall: Option<Option<Duration>>,
    /// `event=alloc`: results as a SITES report (live and allocated bytes per site).
    pub sites: bool,
    /// `event=alloc`: record every allocation (heap sampling interval 0) instead of a sample.
    pub exact: bool,
    /// `leaks[=<collections>]`, with `sites`: rank sites by the live objects that survived at
    /// least this many collections (default [`DEFAULT_LEAK_AGE`]).
    pub leaks: Option<Option<u32>>,
    /// `histogram`: report only this many classes, the largest by bytes.
    pub top: Option<u32>,
    /// `event=trace`: the tracing plan.
    pub trace: Option<crate::trace::Plan>,
    /// `event=perf`: the perf event counted (`page-faults`, `cycles`, `sched:sched_switch`).
    pub perf: Option<String>,
    /// `inspect`: the class, by its Java name (`com.acme.Outer$Inner`).
    pub class: Option<String>,
    /// `inspect`: show at most this many instances (default 5, at most [`MAX_INSPECT`]).
    pub limit: Option<u32>,
    /// `inspect`: only the value at this path of fields of each instance (`a.b.c`).
    pub path: Option<String>,
    /// `inspect`: this static field of the class instead of instances.
    pub static_field: Option<String>,
}

/// The most instances `inspect` shows.
pub const MAX_INSPECT: u32 = 1000;
/// The most fields an `inspect` path follows.
pub const MAX_PATH: usize = 16;

/// Why an option string was rejected. Messages name the offending item.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Two commas in a row, or a leading/trailing comma.
    #[error("empty option at position {0} (two commas in a row, or a comma at either end)")]
    Empty(usize),
    /// A word that is neither an action, a flag nor a known key.
    #[error("unknown option \"{0}\" (known: {known})", known = keys::known())]
    Unknown(String),
    /// A known key with a value it cannot take.
    #[error("bad value for {key}: \"{value}\": {expected}")]
    BadValue {
        /// The key, e.g. `interval`.
        key: &'static str,
        /// The value as given, after `=`.
        value: String,
        /// What the key takes (e.g. "a positive number of classes"), or why the value did not
        /// parse (for `trace=`).
        expected: String,
    },
    /// A key given twice.
    #[error("option {0} given twice")]
    Duplicate(&'static str),
    /// Two actions in one string.
    #[error("conflicting actions \"{0}\" and \"{1}\": give one")]
    ConflictingActions(&'static str, &'static str),
    /// An option that only makes sense with `start`.
    #[error("{0}= only goes with start")]
    NeedsStart(&'static str),
    /// `live` given with an action other than `histogram` or `start`.
    #[error("live only goes with histogram or start (event=alloc)")]
    LiveMisplaced,
    /// An engine setting given without its engine's event.
    #[error("{0} only applies to event={1}")]
    WrongEvent(&'static str, &'static str),
    /// An event that records on its own, given with others.
    #[error("event={0} records alone: it does not go with other events")]
    Alone(&'static str),
    /// `loop=` without a file to write each period to.
    #[error("loop= writes each period to a file or pushes it: give file= (e.g. file=/tmp/app-%t.jfr) or push=")]
    LoopNeedsFile,
    /// `push=` without `loop=`.
    #[error("push= sends each period of loop=: give loop= too (e.g. loop=10s)")]
    PushNeedsLoop,
    /// A `push-*=` setting without the key it refines (`push=`, `push-spool=`).
    #[error("{0}= goes with {1}=: give {1}= too")]
    PushSettingAlone(&'static str, &'static str),
    /// `keep=` without `loop=`.
    #[error("keep= counts the files of loop=: give loop= too")]
    KeepNeedsLoop,
    /// `exact` and `alloc=` together: one records everything, the other samples.
    #[error("exact records every allocation: it does not go with alloc=")]
    ExactWithInterval,
    /// An option that only makes sense with `histogram`.
    #[error("{0} only goes with histogram")]
    NeedsHistogram(&'static str),
    /// An option that only makes sense with `inspect`.
    #[error("{0} only goes with inspect")]
    NeedsInspect(&'static str),
    /// `inspect` without `class=`, or with both `path=` and `static=`.
    #[error("inspect needs class=<name>, and takes path= or static=, not both")]
    InspectMisused,
    /// An action or flag written with a value.
    #[error("\"{0}\" takes no value")]
    UnexpectedValue(&'static str),
    /// `event=perf` without the event to count.
    #[error("event=perf counts the perf event perf= names (e.g. perf=page-faults)")]
    PerfNeedsName,
    /// A backslash at the very end.
    #[error("dangling backslash at the end of \"{0}\"")]
    DanglingEscape(String),
}

/// Collections a sampled object must survive to count towards a leak (`leaks`): one
/// collection is survived by garbage that was still in use when it ran, two rarely are.
pub const DEFAULT_LEAK_AGE: u32 = 2;

impl Options {
    /// Whether engines keep the event log: asked for, or needed by the file's format (JFR) or
    /// by `push=` (which sends JFR).
    pub fn keeps_timeline(&self) -> bool {
        self.timeline
            || self.push.is_some()
            || self.file.as_deref().is_some_and(|f| f.ends_with(".jfr"))
    }

    /// `labels=`'s pairs (empty when not given).
    pub fn label_pairs(&self) -> Vec<(String, String)> {
        self.labels
            .as_deref()
            .and_then(Options::label_pairs_of)
            .unwrap_or_default()
    }

    fn label_pairs_of(text: &str) -> Option<Vec<(String, String)>> {
        text.split(';')
            .filter(|pair| !pair.is_empty())
            .map(|pair| {
                let (k, v) = pair.split_once('=')?;
                (!k.is_empty()).then(|| (k.to_string(), v.to_string()))
            })
            .collect()
    }

    /// Parses an option string. Never panics, whatever the input.
    pub fn parse(text: &str) -> Result<Options, ParseError> {
        let mut options = Options::default();
        if text.is_empty() {
            return Ok(options);
        }
        let mut given: Vec<&'static Key> = Vec::new();
        for (index, item) in split_items(text)?.into_iter().enumerate() {
            if item.raw.is_empty() {
                return Err(ParseError::Empty(index + 1));
            }
            if let Some(key) = options.apply(&item)? {
                if given.iter().any(|k| k.name == key.name) {
                    return Err(ParseError::Duplicate(key.name));
                }
                given.push(key);
            }
        }
        options.validate()?;
        Ok(options)
    }

    /// Checks that the keys set go with the action, and `start`'s settings with the events
    /// it records: what [`Options::parse`] checks after reading the items, for options
    /// built in code.
    pub fn validate(&self) -> Result<(), ParseError> {
        for key in KEYS.iter().filter(|k| k.is_set(self)) {
            let fits = match key.goes_with {
                GoesWith::Any => true,
                GoesWith::Start => self.action == Some(Action::Start),
                GoesWith::StartStopDump => matches!(
                    self.action,
                    Some(Action::Start | Action::Stop | Action::Dump)
                ),
                GoesWith::Histogram => self.action == Some(Action::Histogram),
                GoesWith::Inspect => self.action == Some(Action::Inspect),
                GoesWith::HistogramOrStart => {
                    matches!(self.action, Some(Action::Histogram | Action::Start))
                }
            };
            if !fits {
                return Err(match key.goes_with {
                    GoesWith::Histogram => ParseError::NeedsHistogram(key.name),
                    GoesWith::Inspect => ParseError::NeedsInspect(key.name),
                    GoesWith::HistogramOrStart => ParseError::LiveMisplaced,
                    _ => ParseError::NeedsStart(key.name),
                });
            }
        }
        if self.action == Some(Action::Start) {
            self.check_events()?;
        }
        if self.action == Some(Action::Inspect)
            && (self.class.is_none() || (self.path.is_some() && self.static_field.is_some()))
        {
            return Err(ParseError::InspectMisused);
        }
        if self.exact && self.alloc.flatten().is_some() {
            return Err(ParseError::ExactWithInterval);
        }
        Ok(())
    }

    /// Checks that `start`'s engine settings go with the events it records.
    fn check_events(&self) -> Result<(), ParseError> {
        let events = self.events();
        let one_event = [
            ("sites", self.sites, Event::Alloc),
            ("exact", self.exact, Event::Alloc),
            ("leaks", self.leaks.is_some(), Event::Alloc),
            ("allthreads", self.allthreads, Event::Wall),
            ("trace=", self.trace.is_some(), Event::Trace),
            ("perf=", self.perf.is_some(), Event::Perf),
        ];
        if let Some((key, _, event)) = one_event
            .into_iter()
            .find(|&(_, given, event)| given && !events.contains(&event))
        {
            return Err(ParseError::WrongEvent(key, event.name()));
        }
        if self.live && !events.contains(&Event::Alloc) && !events.contains(&Event::NativeMem) {
            return Err(ParseError::WrongEvent("live", "alloc or nativemem"));
        }
        let sampled = |e: Event| e.is_time_sampling() || e == Event::Perf;
        if self.interval.is_some() && !self.event.is_some_and(sampled) {
            return Err(ParseError::WrongEvent(
                "interval=",
                "cpu, itimer, ctimer, wall or perf",
            ));
        }
        if self.event == Some(Event::Perf) && self.perf.is_none() {
            return Err(ParseError::PerfNeedsName);
        }
        if self.event == Some(Event::Wall)
            && self.interval.is_some()
            && self.wall.flatten().is_some()
        {
            return Err(ParseError::Duplicate("interval (as wall=)"));
        }
        for alone in [Event::Trace, Event::Gc] {
            if events.contains(&alone) && events.len() > 1 {
                return Err(ParseError::Alone(alone.name()));
            }
        }
        if self.sites && events.len() > 1 {
            return Err(ParseError::Alone("alloc,sites"));
        }
        if self.rotate.is_some() && self.file.is_none() && self.push.is_none() {
            return Err(ParseError::LoopNeedsFile);
        }
        if self.push.is_some() && self.rotate.is_none() {
            return Err(ParseError::PushNeedsLoop);
        }
        let (push, spool) = (self.push.is_some(), self.push_spool.is_some());
        let push_settings = [
            ("push-ca", self.push_ca.is_some(), "push", push),
            ("push-user", self.push_user.is_some(), "push", push),
            (
                "push-token-file",
                self.push_token_file.is_some(),
                "push",
                push,
            ),
            ("push-spool", spool, "push", push),
            (
                "push-spool-max",
                self.push_spool_max.is_some(),
                "push-spool",
                spool,
            ),
        ];
        if let Some((key, _, needed, _)) =
            push_settings.iter().find(|(_, set, _, has)| *set && !has)
        {
            return Err(ParseError::PushSettingAlone(key, needed));
        }
        if self.keep.is_some() && self.rotate.is_none() {
            return Err(ParseError::KeepNeedsLoop);
        }
        if self.rotate.is_some() && events.contains(&Event::Trace) {
            return Err(ParseError::WrongEvent(
                "loop=",
                "cpu, itimer, ctimer, wall, alloc, lock or gc",
            ));
        }
        Ok(())
    }

    /// The events `start` records: `event=` first, then those `alloc`, `lock`, `wall` and
    /// `nativemem` add.
    pub fn events(&self) -> Vec<Event> {
        let mut events: Vec<Event> = self.event.into_iter().collect();
        let extra = [
            (self.alloc.is_some(), Event::Alloc),
            (self.lock.is_some(), Event::Lock),
            (self.wall.is_some(), Event::Wall),
            (self.nativemem.is_some(), Event::NativeMem),
            (self.io.is_some(), Event::Io),
            (self.nativelock.is_some(), Event::NativeLock),
        ];
        for (given, event) in extra {
            if given && !events.contains(&event) {
                events.push(event);
            }
        }
        events
    }

    /// The sampling interval asked for time-sampling `event`: `wall=` for wall when given,
    /// else `interval=` for the event `event=` names.
    pub fn interval_of(&self, event: Event) -> Option<Duration> {
        match event {
            Event::Wall if self.wall.flatten().is_some() => self.wall.flatten(),
            event if self.event == Some(event) => self.interval,
            _ => None,
        }
    }

    /// Whether the engine of `event` with these `start` options can only start in the live
    /// phase (at VMInit when given at start-up): sampling, tracing and exact allocation
    /// recording.
    pub fn needs_live_phase(&self, event: Event) -> bool {
        event.needs_live_phase() || (event == Event::Alloc && self.exact)
    }

    /// The options with another action, keeping everything else.
    pub fn with_action(mut self, action: Action) -> Options {
        self.action = Some(action);
        self
    }

    /// Applies one item: an action, or a key of [`KEYS`] (returned, for the checks that
    /// follow).
    fn apply(&mut self, item: &Item) -> Result<Option<&'static Key>, ParseError> {
        if let Some(action) = Action::from_name(&item.key) {
            if item.value.is_some() {
                return Err(ParseError::UnexpectedValue(action.name()));
            }
            if let Some(previous) = self.action {
                return Err(ParseError::ConflictingActions(
                    previous.name(),
                    action.name(),
                ));
            }
            self.action = Some(action);
            return Ok(None);
        }
        let key = key(&item.key)
            .filter(|k| item.value.is_some() || !matches!(k.takes, Takes::Value(_)))
            .ok_or_else(|| ParseError::Unknown(item.raw.clone()))?;
        if item.value.is_some() && key.takes == Takes::Nothing {
            return Err(ParseError::UnexpectedValue(key.name));
        }
        let value = item.value.as_deref();
        (key.parse)(self, value).map_err(|expected| ParseError::BadValue {
            key: key.name,
            value: value.unwrap_or_default().to_string(),
            expected,
        })?;
        Ok(Some(key))
    }
}

impl fmt::Display for Options {
    /// Prints the canonical option string, which [`Options::parse`] reads back unchanged:
    /// the action, then each key set, in [`KEYS`]'s order.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let action = self.action.map(|a| a.name().to_string());
        let keys = KEYS.iter().filter_map(|key| {
            (key.show)(self).map(|shown| match shown {
                Shown::Bare => key.name.to_string(),
                Shown::Value(value) => format!("{}={}", key.name, escape(&value)),
            })
        });
        let items: Vec<String> = action.into_iter().chain(keys).collect();
        f.write_str(&items.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_profiler_style_strings() {
        let o = Options::parse("start,event=cpu,interval=10ms,file=/tmp/out.html").unwrap();
        assert_eq!(o.action, Some(Action::Start));
        assert_eq!(o.event, Some(Event::Cpu));
        assert_eq!(o.interval, Some(Duration::from_millis(10)));
        assert_eq!(o.file.as_deref(), Some("/tmp/out.html"));
        assert_eq!(
            o.to_string(),
            "start,event=cpu,interval=10ms,file=/tmp/out.html"
        );
        assert_eq!(Options::parse("").unwrap(), Options::default());
        assert_eq!(
            Options::parse("status,debug").unwrap().to_string(),
            "status,debug"
        );
        let h = Options::parse("histogram,live,top=30").unwrap();
        assert_eq!(
            (h.action, h.live, h.top),
            (Some(Action::Histogram), true, Some(30))
        );
        assert_eq!(h.to_string(), "histogram,live,top=30");
    }

    #[test]
    fn parses_sampling_keys() {
        let o = Options::parse(r"start,event=wall,interval=50ms,threads,jstackdepth=64,include=Burn\,Spin,exclude=^java\\.").unwrap();
        assert_eq!(
            (o.event, o.threads, o.jstackdepth),
            (Some(Event::Wall), true, Some(64))
        );
        assert_eq!(
            (o.include.as_deref(), o.exclude.as_deref()),
            (Some("Burn,Spin"), Some(r"^java\."))
        );
        assert_eq!(Options::parse(&o.to_string()), Ok(o));
        for event in ["cpu", "itimer", "ctimer", "wall"] {
            let o = Options::parse(&format!("start,event={event}")).unwrap();
            assert!(o.event.is_some_and(Event::is_time_sampling), "{event}");
        }
    }

    #[test]
    fn starts_several_events_as_async_profiler_does() {
        let o = Options::parse("start,event=cpu,interval=1ms,alloc,lock=10us,wall=50ms").unwrap();
        assert_eq!(
            o.events(),
            [Event::Cpu, Event::Alloc, Event::Lock, Event::Wall]
        );
        assert_eq!(o.interval_of(Event::Cpu), Some(Duration::from_millis(1)));
        assert_eq!(o.interval_of(Event::Wall), Some(Duration::from_millis(50)));
        assert_eq!(
            (o.alloc, o.lock),
            (Some(None), Some(Some(Duration::from_micros(10))))
        );
        assert_eq!(Options::parse(&o.to_string()), Ok(o));
        // The settings keys alone name their events; event= given too is the same event once.
        let o = Options::parse("start,alloc=1m,live").unwrap();
        assert_eq!(
            (o.events(), o.alloc),
            (vec![Event::Alloc], Some(Some(1 << 20)))
        );
        let stop = Options::parse("stop,event=trace").unwrap();
        assert_eq!(
            (stop.action, stop.event),
            (Some(Action::Stop), Some(Event::Trace))
        );
        let o = Options::parse("start,event=wall,interval=20ms,wall").unwrap();
        assert_eq!(o.events(), [Event::Wall]);
        assert_eq!(o.interval_of(Event::Wall), Some(Duration::from_millis(20)));
        assert_eq!(o.interval_of(Event::Cpu), None);
    }

    #[test]
    fn the_manual_lists_every_key_as_help_does() {
        let manual = include_str!("../../../../docs/USAGE.md");
        assert!(
            manual.contains(&help_text()),
            "docs/USAGE.md's option list differs from KEYS; it should read:\n{}",
            help_text()
        );
        for key in KEYS {
            assert!(!key.help.is_empty() && help_text().contains(key.name));
        }
    }

    /// A value each key takes, to round-trip its row (a key without one fails the test).
    const SAMPLES: &[(&str, &str)] = &[
        ("event", "wall"),
        ("interval", "2ms"),
        ("alloc", "1m"),
        (event::NATIVEMEM.name, "0"),
        (event::IO.name, "0"),
        (event::NATIVELOCK.name, "250us"),
        ("lock", "10us"),
        ("wall", "20ms"),
        ("loop", "10s"),
        ("keep", "3"),
        ("push", "http://localhost:4040"),
        ("app", "shop"),
        ("labels", "env=prod;dc=1"),
        ("push-ca", "/etc/ssl/ca.pem"),
        ("push-user", "123456"),
        ("push-token-file", "/run/secrets/token"),
        ("push-spool", "/var/tmp/spool"),
        ("push-spool-max", "64m"),
        ("duration", "5s"),
        ("by", "a.B::c=arg1.x d.E::f"),
        ("include", "a\\.b,c"),
        ("exclude", "x"),
        ("jstackdepth", "64"),
        ("walker", "check"),
        ("cstack", "fp"),
        ("trace", "mode:trace p:a.B::c count:3"),
        ("perf", "sched:sched_switch"),
        ("top", "7"),
        ("class", "com.acme.Outer$Inner"),
        ("limit", "1000"),
        ("path", "cache.map.size"),
        ("static", "INSTANCE"),
        ("file", "/tmp/a,b.jfr"),
        ("channel", "/tmp/jtap.sock"),
        ("log", "/tmp/log"),
        ("linger", "1s"),
        ("client", "0.1.0"),
    ];

    #[test]
    fn every_row_parses_shows_and_round_trips() {
        for key in KEYS {
            let mut options = Options::default();
            let value = SAMPLES
                .iter()
                .find(|(name, _)| *name == key.name)
                .map(|(_, v)| *v);
            match (key.takes, value) {
                (Takes::Value(_), None) => panic!("no sample value for {}", key.name),
                (Takes::Nothing, Some(_)) => panic!("{} takes no value", key.name),
                _ => {}
            }
            (key.parse)(&mut options, value).unwrap_or_else(|e| panic!("{}: {e}", key.name));
            let shown = (key.show)(&options).unwrap_or_else(|| panic!("{} not shown", key.name));
            assert_eq!(
                shown,
                value.map_or(Shown::Bare, |v| Shown::Value(v.to_string())),
                "{} shows as it was given",
                key.name
            );
            let text = options.to_string();
            let mut back = Options::default();
            for item in split_items(&text).unwrap() {
                back.apply(&item).unwrap();
            }
            assert_eq!(back, options, "{} round-trips through {text:?}", key.name);
            if let Takes::Maybe(_) = key.takes {
                let mut bare = Options::default();
                (key.parse)(&mut bare, None).unwrap();
                assert_eq!((key.show)(&bare), Some(Shown::Bare), "{}", key.name);
            }
        }
    }

    #[test]
    fn escapes_commas_and_backslashes_in_values() {
        let o = Options::parse(r"dump,file=/tmp/a\,b\\c=d").unwrap();
        assert_eq!(o.file.as_deref(), Some(r"/tmp/a,b\c=d"));
        assert_eq!(o.to_string(), r"dump,file=/tmp/a\,b\\c=d");
    }

    #[test]
    fn rejects_malformed_strings_with_clear_messages() {
        let cases = [
            ("stat", "unknown option \"stat\""),
            ("start,event=cpuu", "bad value for event: \"cpuu\": one of cpu, itimer, ctimer, wall, alloc, lock, gc, trace"),
            ("start,event=cpu,interval=10parsecs", "bad value for interval: \"10parsecs\""),
            ("start,event=cpu,interval=0", "bad value for interval: \"0\""),
            ("start,event=cpu,interval=99999999999s", "bad value for interval"),
            ("start,,event=cpu", "empty option at position 2"),
            ("status,", "empty option at position 2"),
            ("start,stop", "conflicting actions \"start\" and \"stop\""),
            ("status,event=cpu", "event= only goes with start"),
            ("start,event=gc,lock", "event=gc records alone"),
            ("start,event=cpu,alloc,sites", "event=alloc,sites records alone"),
            ("dump,threads", "threads= only goes with start"),
            ("status,include=Foo", "include= only goes with start"),
            ("start,event=cpu,loop=1s,file=/t,push-spool=/s", "push-spool= goes with push=: give push= too"),
            ("start,event=cpu,loop=1s,push=http://h,push-spool-max=1m", "push-spool-max= goes with push-spool="),
            ("start,event=cpu,loop=1s,push=http://h,push-spool=/s,push-spool-max=3x", "bad value for push-spool-max"),
            ("start,event=wall,jstackdepth=0", "bad value for jstackdepth"),
            ("start,event=wall,jstackdepth=5000", "bad value for jstackdepth"),
            ("start,event=cpu,exclude=", "bad value for exclude"),
            ("start,threads=1", "\"threads\" takes no value"),
            ("status,detach", "detach= only goes with start"),
            ("dump,alluser", "alluser= only goes with start"),
            ("start,event=cpu,alluser=1", "\"alluser\" takes no value"),
            ("dump,file=/a,file=/b", "option file given twice"),
            ("status=1", "\"status\" takes no value"),
            ("channel=relative.sock", "an absolute path"),
            ("client=1 2", "bad value for client"),
            ("file=", "bad value for file"),
            ("dump,file=x\\", "dangling backslash"),
            ("status,live", "live only goes with histogram"),
            ("histogram,top=0", "bad value for top"),
            ("histogram,top=+3", "bad value for top"),
            ("dump,top=3", "top only goes with histogram"),
            ("inspect", "inspect needs class=<name>"),
            ("inspect,class=A,path=b,static=C", "not both"),
            ("inspect,class=A,limit=1001", "bad value for limit"),
            ("inspect,class=A,path=a..b", "bad value for path"),
            ("histogram,class=A", "class only goes with inspect"),
            ("histogram,live=1", "\"live\" takes no value"),
            ("start,event=alloc,alloc=0", "bad value for alloc"),
            ("start,event=alloc,alloc=3t", "bad value for alloc"),
            ("start,event=alloc,alloc=4g", "bad value for alloc"),
            ("start,event=lock,lock=fast", "bad value for lock"),
            ("dump,alloc=512k", "alloc= only goes with start"),
            ("status,sites", "sites= only goes with start"),
            ("status,exact", "exact= only goes with start"),
            ("start,event=alloc,exact,alloc=1m", "does not go with alloc="),
            ("start,exact=1", "\"exact\" takes no value"),
            ("start,event=cpu,exact", "exact only applies to event=alloc"),
            ("start,event=cpu,sites", "sites only applies to event=alloc"),
            ("start,event=cpu,allthreads", "allthreads only applies to event=wall"),
            ("start,event=alloc,interval=1ms", "interval= only applies to event=cpu"),
            ("start,alloc,interval=1ms", "interval= only applies"),
            ("start,event=wall,interval=1ms,wall=2ms", "given twice"),
            ("start,event=trace,alloc", "records alone"),
            ("start,event=cpu,wall,wall", "option wall given twice"),
            ("start,event=cpu,wall=0", "bad value for wall"),
            ("status,wall", "wall= only goes with start"),
        ];
        for (input, expected) in cases {
            let err = Options::parse(input).unwrap_err().to_string();
            assert!(
                err.contains(expected),
                "{input:?} gave {err:?}, wanted {expected:?}"
            );
        }
    }

    fn path() -> impl Strategy<Value = String> {
        "\\PC{1,40}"
    }

    fn options() -> impl Strategy<Value = Options> {
        let action = proptest::option::of(proptest::sample::select(Action::ALL.to_vec()));
        let start_only = (
            proptest::option::of(proptest::sample::select(Event::ALL.to_vec())),
            proptest::option::of((1u64..=u64::MAX).prop_map(Duration::from_nanos)),
            (
                any::<bool>(),
                proptest::option::of(path()),
                proptest::option::of(path()),
                proptest::option::of(1..=MAX_JSTACKDEPTH),
            ),
            (any::<bool>(), any::<bool>()),
        );
        let paths = (
            proptest::option::of(path()),
            proptest::option::of(path().prop_map(|p| format!("/{p}"))),
            proptest::option::of(path()),
            proptest::option::of("[0-9a-zA-Z.+_-]{1,12}"),
            any::<bool>(),
        );
        let histogram_only = (any::<bool>(), proptest::option::of(1u32..=u32::MAX));
        let setting = |strategy| proptest::option::of(proptest::option::of(strategy));
        let heap_start = (
            setting(1..=MAX_ALLOC_INTERVAL),
            setting(1u64..=u64::MAX).prop_map(|d| d.map(|d| d.map(Duration::from_nanos))),
            any::<bool>(),
            any::<bool>(),
            setting(1u64..=u64::MAX).prop_map(|d| d.map(|d| d.map(Duration::from_nanos))),
        );
        (action, start_only, paths, histogram_only, heap_start).prop_map(
            |(
                action,
                (event, interval, (threads, include, exclude, jstackdepth), (detach, alluser)),
                (file, channel, log, client, debug),
                (live, top),
                (alloc, lock, sites, exact, wall),
            )| {
                let starts = action == Some(Action::Start);
                let histogram = action == Some(Action::Histogram);
                let inspects = action == Some(Action::Inspect);
                let event = event.filter(|&e| starts && !matches!(e, Event::Trace | Event::Perf));
                let sampled = event.is_some_and(Event::is_time_sampling);
                // gc records alone.
                let extras = starts && event != Some(Event::Gc);
                let alloc = alloc.filter(|_| extras);
                let lock = lock.filter(|_| extras);
                let wall = wall.filter(|w| extras && !(event == Some(Event::Wall) && w.is_some()));
                let has = |e: Event, extra: bool| event == Some(e) || extra;
                let has_alloc = has(Event::Alloc, alloc.is_some());
                let exact = exact && has_alloc && alloc.flatten().is_none();
                let alone = [
                    event.is_some(),
                    alloc.is_some() && event != Some(Event::Alloc),
                    lock.is_some() && event != Some(Event::Lock),
                    wall.is_some() && event != Some(Event::Wall),
                ]
                .into_iter()
                .filter(|&e| e)
                .count()
                    == 1;
                Options {
                    action,
                    event,
                    interval: interval.filter(|_| sampled),
                    duration: interval.filter(|_| starts),
                    threads: threads && starts,
                    allthreads: alluser && has(Event::Wall, wall.is_some()),
                    detach: detach && starts,
                    alluser: alluser && starts,
                    cstack: (alluser && sampled).then_some(NativeStacks::FramePointers),
                    walker: (detach && has_alloc).then_some(JavaStacks::Check),
                    nativemem: (lock.is_some() && extras).then_some(Some(4096)),
                    io: lock.filter(|_| extras && detach),
                    nativelock: lock.filter(|_| extras && threads),
                    timeline: detach && sampled,
                    rotate: None,
                    keep: None,
                    push: None,
                    app: None,
                    labels: None,
                    push_ca: None,
                    push_user: None,
                    push_token_file: None,
                    push_spool: None,
                    push_spool_max: None,
                    by: match (include.is_some(), starts) {
                        (true, true) => crate::label::LabelBy::parse_list("a.B::c=arg1.x d.E::f")
                            .expect("a valid list"),
                        _ => Vec::new(),
                    },
                    byinner: include.is_some() && starts && detach,
                    include: include.filter(|_| starts),
                    exclude: exclude.filter(|_| starts),
                    jstackdepth: jstackdepth.filter(|_| starts),
                    file,
                    channel,
                    log,
                    linger: interval.filter(|_| debug),
                    client,
                    debug,
                    rest: debug && detach,
                    live: live && (histogram || has_alloc),
                    alloc,
                    lock,
                    wall,
                    sites: sites && has_alloc && alone,
                    exact,
                    leaks: top.filter(|_| has_alloc && !histogram).map(Some),
                    top: top.filter(|_| histogram),
                    trace: None,
                    perf: None,
                    class: inspects.then(|| "com.acme.Outer$Inner".to_string()),
                    limit: top.filter(|_| inspects).map(|n| n % MAX_INSPECT + 1),
                    path: (inspects && debug).then(|| "cache.map.size".to_string()),
                    static_field: (inspects && !debug).then(|| "INSTANCE".to_string()),
                }
            },
        )
    }

    proptest! {
        #[test]
        fn printing_then_parsing_gives_the_same_options(o in options()) {
            prop_assert_eq!(Options::parse(&o.to_string()), Ok(o));
        }

        #[test]
        fn arbitrary_strings_never_panic(s in "\\PC{0,80}") {
            let _ = Options::parse(&s);
        }

        #[test]
        fn grammar_like_strings_never_panic_and_reparse(s in "[a-z=,\\\\/0-9]{0,60}") {
            if let Ok(o) = Options::parse(&s) {
                prop_assert_eq!(Options::parse(&o.to_string()), Ok(o));
            }
        }
    }
}
