//! `jtap profile`: CPU and wall-clock sampling profiles of a JVM, made by jtap's agent.
//!
//! - `jtap profile <pid> [-d 30s] ...` profiles for a duration (Ctrl-C stops early and still
//!   writes the result), showing elapsed time and samples on a TTY.
//! - `jtap profile start|stop|status|dump <pid>` for long sessions: `start` leaves a detached
//!   engine running, `dump` fetches the profile so far, `stop` ends it and fetches the result.
//! - `jtap profile [opts] -- java ...` profiles a JVM from its start to its exit (or `-d`).
//!
//! The agent sends the profile over the control channel; it is rendered here, in the format
//! `--format` names or else the output file's extension names (text report on stdout when
//! there is no `-o`), and written atomically.

use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use anyhow::Context as _;
use jtap_client::{interrupt, launch, AgentError, Asked};
use jtap_profile::{event, render_set, write_atomically, Counter, ExportOptions, Format, Profile};
use jtap_protocol::label::LabelBy;
use jtap_protocol::options::help_of;
use jtap_protocol::{wire, Action, Event, Frame, JavaStacks, NativeStacks, Options, ParseError};

use crate::exit;

/// The `jtap profile` command line: `jtap profile <pid>`, a subcommand, or `-- java ...`.
#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ProfileArgs {
    #[command(subcommand)]
    action: Option<ProfileAction>,
    /// The JVM to profile (nothing when launching one after `--`)
    pid: Option<String>,
    #[command(flatten)]
    sampling: SamplingArgs,
    /// How long to profile (default 30s; when launching: until the JVM exits)
    #[arg(short, long, value_parser = crate::units::parse_duration)]
    duration: Option<Duration>,
    #[command(flatten)]
    output: OutputArgs,
    /// A java command line to launch and profile
    #[arg(last = true)]
    java: Vec<String>,
}

/// Long sessions, one command at a time.
#[derive(clap::Subcommand)]
enum ProfileAction {
    /// Start a recording that runs detached from this client, until `stop` or the JVM's exit
    /// (with -o, the agent writes that file, inside the JVM's filesystem, when it ends)
    Start {
        /// The JVM
        pid: String,
        #[command(flatten)]
        sampling: Box<SamplingArgs>,
        /// End the recording after this long (the agent does; default: until `stop`)
        #[arg(short, long, value_parser = crate::units::parse_duration)]
        duration: Option<Duration>,
        /// File the agent writes when the recording ends; its extension picks the format.
        /// With --loop, a pattern: %t time, %p pid, %n sequence
        #[arg(short, long)]
        output: Option<PathBuf>,
        #[command(flatten)]
        continuous: Box<Continuous>,
    },
    /// Stop the running profiles (those of -e when given) and write what they recorded
    Stop {
        /// The JVM
        pid: String,
        /// Only the recording of this event
        #[arg(short, long, value_parser = parse_event)]
        event: Option<Event>,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Write what the running profiles (those of -e when given) recorded so far, without
    /// stopping them
    Dump {
        /// The JVM
        pid: String,
        /// Only the recording of this event
        #[arg(short, long, value_parser = parse_event)]
        event: Option<Event>,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// What the agent in the JVM runs
    Status {
        /// The JVM
        pid: String,
    },
}

/// What to record and how. The flags that set a key of the agent's grammar take their help
/// from its one declaration ([`jtap_protocol::options::KEYS`]).
#[derive(clap::Args)]
struct SamplingArgs {
    /// What to sample, one or several at once (-e cpu,alloc,lock): cpu (perf_events; falls
    /// back to ctimer/itimer), itimer, ctimer, wall, alloc (heap allocations), lock
    /// (contended monitors), nativemem (native allocations of the JVM's libraries), io (file
    /// and socket calls), nativelock (waits on pthread locks), or a perf event by name:
    /// page-faults, context-switches, cpu-migrations, cycles, instructions, cache-misses,
    /// branch-misses, a tracepoint (sched:sched_switch), ...
    #[arg(short, long, default_value = "cpu", value_delimiter = ',', value_parser = parse_chosen)]
    event: Vec<Chosen>,
    #[arg(long, help = help_of("wall"), value_name = "INTERVAL", value_parser = crate::units::parse_interval)]
    wall: Option<Duration>,
    #[arg(short, long, help = help_of("interval"), value_parser = crate::units::parse_interval)]
    interval: Option<Duration>,
    #[arg(long, help = help_of("threads"))]
    threads: bool,
    #[arg(long, help = help_of("allthreads"))]
    all_threads: bool,
    #[arg(long, help = help_of("include"), value_name = "RE")]
    include: Option<String>,
    /// Label each sample with the request its thread works for: inside calls of ENTRY
    /// (Class::method), by the method, or by KEY read from its receiver or arguments
    /// (arg1, this.sql, arg2.uri.path) without running application code. Work the call hands
    /// to thread pools, ForkJoin and CompletableFuture stages, new threads and virtual threads
    /// keeps its label. Repeat for several entries.
    #[arg(long, value_name = "ENTRY[=KEY]")]
    by: Vec<String>,
    #[arg(long, help = help_of("byinner"), requires = "by")]
    by_inner: bool,
    #[arg(long, help = help_of("exclude"), value_name = "RE")]
    exclude: Option<String>,
    #[arg(long, visible_alias = "depth", help = help_of("jstackdepth"), value_name = "N")]
    jstackdepth: Option<u32>,
    #[arg(long, help = help_of("alluser"))]
    all_user: bool,
    #[arg(long, help = help_of("cstack"), value_name = "HOW", value_parser = parse_cstack)]
    cstack: Option<NativeStacks>,
    #[arg(long, help = help_of("walker"), value_name = "HOW", value_parser = parse_walker)]
    walker: Option<JavaStacks>,
    #[arg(long, help = help_of("timeline"))]
    timeline: bool,
    #[arg(long, help = help_of("alloc"), visible_alias = "alloc", value_name = "BYTES", value_parser = parse_alloc_interval)]
    alloc_interval: Option<u64>,
    #[arg(long, help = help_of(event::NATIVEMEM.name), visible_alias = event::NATIVEMEM.name, value_name = "BYTES", value_parser = parse_nativemem_interval)]
    nativemem_interval: Option<u64>,
    #[arg(long, help = help_of(event::IO.name), value_name = "DURATION", value_parser = parse_threshold)]
    io: Option<Duration>,
    #[arg(long, help = help_of(event::NATIVELOCK.name), value_name = "DURATION", value_parser = parse_threshold)]
    nativelock: Option<Duration>,
    #[arg(long, help = help_of("exact"), conflicts_with = "alloc_interval")]
    exact: bool,
    #[arg(long, help = help_of("live"))]
    live: bool,
    #[arg(long, help = help_of("lock"), visible_alias = "lock", value_name = "DURATION", value_parser = crate::units::parse_interval)]
    lock_threshold: Option<Duration>,
}

/// Where and how the profiles are written.
#[derive(clap::Args)]
pub struct OutputArgs {
    /// Output file; its extension picks the format (.html .heatmap.html .pb.gz .pprof .jfr
    /// .otlp .speedscope.json .collapsed .folded .txt). Give it several times to write one
    /// profile in several formats
    #[arg(short, long)]
    output: Vec<PathBuf>,
    /// Output format: text, summary, traces, flat, collapsed, html, heatmap, pprof, jfr,
    /// speedscope (for
    /// stdout, and for output files whose extension names no format)
    #[arg(long, value_parser = parse_format)]
    format: Option<Format>,
    /// What stacks are counted by: samples, total (time, bytes, time waited) or objects
    /// (estimated objects allocated, lock waits). Default: total for alloc and lock,
    /// samples otherwise
    #[arg(long, value_parser = parse_counter)]
    counter: Option<Counter>,
    /// Mark frame kinds in collapsed output (_[j] compiled, _[i] inlined, _[k] kernel, _[0] interpreted)
    // The brackets are --help text (clap prints doc comments verbatim), not intra-doc links.
    #[allow(rustdoc::broken_intra_doc_links)]
    #[arg(long)]
    annotate: bool,
    /// Java frames per source line (Class.method:line), not per method
    #[arg(long)]
    lines: bool,
}

impl OutputArgs {
    /// Output to `files` only, each in the format its extension names.
    pub fn files(files: Vec<PathBuf>) -> OutputArgs {
        OutputArgs {
            output: files,
            format: None,
            counter: None,
            annotate: false,
            lines: false,
        }
    }

    /// The format of each output (stdout: `--format`, else text).
    fn formats(&self) -> Vec<Format> {
        if self.output.is_empty() {
            return vec![self.format.unwrap_or(Format::Text)];
        }
        self.output
            .iter()
            .map(|path| {
                Format::from_path(path)
                    .or(self.format)
                    .unwrap_or(Format::Text)
            })
            .collect()
    }

    /// No `-o` given.
    pub fn writes_nothing(&self) -> bool {
        self.output.is_empty()
    }

    /// Refuses an output whose format neither its extension nor `--format` says.
    pub fn check(&self) -> anyhow::Result<()> {
        check_output(self)
    }

    /// Whether a format asked for needs each sample's time and thread (JFR, heatmap).
    pub(crate) fn needs_timeline(&self) -> bool {
        self.formats()
            .iter()
            .any(|f| matches!(f, Format::Jfr | Format::Heatmap))
    }
}

/// Continuous profiling: `--loop`, `--keep` and `--push` of `profile start`.
#[derive(clap::Args)]
struct Continuous {
    #[arg(long = "loop", value_name = "PERIOD", help = help_of("loop"), value_parser = crate::units::parse_duration)]
    rotate: Option<Duration>,
    #[arg(long, value_name = "N", help = help_of("keep"), requires = "rotate", value_parser = clap::value_parser!(u32).range(1..))]
    keep: Option<u32>,
    #[arg(long, value_name = "URL", help = help_of("push"), requires = "rotate")]
    push: Option<String>,
    #[arg(long, value_name = "NAME", help = help_of("app"), requires = "push")]
    app: Option<String>,
    /// With --push: a label of the pushed profiles (repeatable)
    #[arg(long = "label", value_name = "K=V", requires = "push", value_parser = parse_label)]
    labels: Vec<String>,
    #[arg(long, value_name = "FILE", help = help_of("push-ca"), requires = "push")]
    push_ca: Option<PathBuf>,
    #[arg(long, value_name = "NAME", help = help_of("push-user"), requires = "push_token_file")]
    push_user: Option<String>,
    #[arg(long, value_name = "FILE", help = help_of("push-token-file"), requires = "push")]
    push_token_file: Option<PathBuf>,
    #[arg(long, value_name = "DIR", help = help_of("push-spool"), requires = "push")]
    push_spool: Option<PathBuf>,
    #[arg(long, value_name = "BYTES", help = help_of("push-spool-max"), requires = "push_spool", value_parser = parse_spool_max)]
    push_spool_max: Option<u64>,
}

/// `--push-spool-max` as the agent grammar's `push-spool-max=` reads it.
fn parse_spool_max(text: &str) -> Result<u64, String> {
    let mut options = Options::default();
    let row = jtap_protocol::options::key("push-spool-max").ok_or("no push-spool-max key")?;
    (row.parse)(&mut options, Some(text))?;
    options
        .push_spool_max
        .ok_or_else(|| format!("bad size {text}"))
}

/// A path the agent opens, absolute: the JVM's working directory is not this one.
fn for_the_agent(path: Option<PathBuf>) -> anyhow::Result<Option<String>> {
    path.map(|p| {
        std::path::absolute(&p)
            .map(|p| p.display().to_string())
            .with_context(|| format!("{}", p.display()))
    })
    .transpose()
}

/// `--label k=v`.
fn parse_label(text: &str) -> Result<String, String> {
    match text.split_once('=') {
        Some((k, _)) if !k.is_empty() && !text.contains([';', ',']) => Ok(text.to_string()),
        _ => Err(format!("expected k=v (no ; or ,), got {text:?}")),
    }
}

/// The events `jtap profile` samples.
fn profiled(event: &Event) -> bool {
    event.is_time_sampling()
        || matches!(
            event,
            Event::Alloc | Event::Lock | Event::NativeMem | Event::Io | Event::NativeLock
        )
}

/// What `-e` names: one of jtap's events, or a perf event by its name.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Chosen {
    Event(Event),
    Perf(String),
}

impl Chosen {
    fn event(&self) -> Event {
        match self {
            Chosen::Event(event) => *event,
            Chosen::Perf(_) => Event::Perf,
        }
    }
}

/// `-e`'s value: a profiled event, or any other name as a perf event's (the agent refuses
/// names the kernel does not have).
fn parse_chosen(text: &str) -> Result<Chosen, String> {
    let perf_name = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':');
    match Event::from_name(text) {
        Some(event) if profiled(&event) => Ok(Chosen::Event(event)),
        None if !text.is_empty() && text.chars().all(perf_name) => Ok(Chosen::Perf(text.into())),
        _ => {
            let known: Vec<&str> = Event::ALL
                .into_iter()
                .filter(profiled)
                .map(Event::name)
                .collect();
            Err(format!(
                "unknown event {text:?} (known: {}, or a perf event by name)",
                known.join(", ")
            ))
        }
    }
}

fn parse_event(text: &str) -> Result<Event, String> {
    parse_chosen(text).map(|chosen| chosen.event())
}

fn parse_walker(text: &str) -> Result<JavaStacks, String> {
    JavaStacks::named(text)
        .ok_or_else(|| format!("--walker takes vm, jvmti, asgct or check, not {text:?}"))
}

fn parse_cstack(text: &str) -> Result<NativeStacks, String> {
    NativeStacks::ALL
        .into_iter()
        .find(|c| c.name() == text)
        .ok_or_else(|| format!("--cstack takes dwarf, fp or no, not {text:?}"))
}

pub fn parse_counter(text: &str) -> Result<Counter, String> {
    Counter::from_name(text).ok_or_else(|| {
        let known: Vec<&str> = Counter::NAMES.iter().map(|(n, _)| *n).collect();
        format!("unknown counter {text:?} (known: {})", known.join(", "))
    })
}

/// Parses `--alloc-interval` as the agent grammar's `alloc=` does (bytes; k, m, g suffixes).
pub fn parse_alloc_interval(text: &str) -> Result<u64, String> {
    parse_interval(&event::ALLOC, text, |o| o.alloc)
}

/// Parses `--nativemem-interval` as the agent grammar's `nativemem=` does (0, or bytes).
fn parse_nativemem_interval(text: &str) -> Result<u64, String> {
    parse_interval(&event::NATIVEMEM, text, |o| o.nativemem)
}

/// A threshold of the hook engines (`--io`, `--nativelock`): 0 for every call, or a duration
/// with its unit.
fn parse_threshold(text: &str) -> Result<Duration, String> {
    match text.trim() {
        "0" => Ok(Duration::ZERO),
        text => crate::units::parse_interval(text),
    }
}

/// Parses `text` with the agent grammar's row of `<event>=`, read back with `field`.
fn parse_interval(
    kind: &event::Kind,
    text: &str,
    field: fn(&Options) -> Option<Option<u64>>,
) -> Result<u64, String> {
    let row = jtap_protocol::options::key(kind.name).expect("a row for every event key");
    let mut options = Options::default();
    (row.parse)(&mut options, Some(text))?;
    field(&options)
        .flatten()
        .ok_or_else(|| format!("bad {} interval {text}", kind.name))
}

fn parse_format(text: &str) -> Result<Format, String> {
    Format::from_name(text).ok_or_else(|| {
        format!(
            "unknown format {text} (known: {})",
            Format::NAMES
                .iter()
                .map(|(n, _)| *n)
                .collect::<Vec<_>>()
                .join(", ")
        )
    })
}

/// Default duration when profiling a running JVM.
const DEFAULT_DURATION: Duration = Duration::from_secs(30);

/// Runs `jtap profile`.
pub fn run(args: ProfileArgs, timeout: Duration) -> anyhow::Result<i32> {
    let status = |pid: &str| -> anyhow::Result<i32> {
        let options = Options::default().with_action(Action::Status);
        jtap_client::run(parse_pid(pid)?, &options, timeout, &mut io::stdout().lock())?;
        Ok(0)
    };
    match (args.action, args.pid, args.java.is_empty()) {
        (
            Some(ProfileAction::Start {
                pid,
                sampling,
                duration,
                output,
                continuous,
            }),
            _,
            _,
        ) => {
            check_sampling(&sampling)?;
            if let Some(path) = &output {
                check_format(path, None)?;
            }
            if continuous.rotate.is_some() && output.is_none() && continuous.push.is_none() {
                return Err(exit::usage(
                    "--loop writes each period to -o's file pattern or sends it to --push's endpoint: give one",
                ));
            }
            start_detached(&sampling, duration, output, *continuous, parse_pid(&pid)?, timeout)
        }
        (Some(ProfileAction::Stop { pid, event, output }), _, _) => {
            check_output(&output)?;
            fetch(&output, event, parse_pid(&pid)?, Action::Stop, timeout)
        }
        (Some(ProfileAction::Dump { pid, event, output }), _, _) => {
            check_output(&output)?;
            fetch(&output, event, parse_pid(&pid)?, Action::Dump, timeout)
        }
        (Some(ProfileAction::Status { pid }), _, _) => status(&pid),
        (None, None, false) => {
            check_sampling(&args.sampling)?;
            check_output(&args.output)?;
            launched(&args.sampling, args.duration, &args.output, &args.java)
        }
        (None, Some(_), false) => Err(exit::usage("with `-- java ...` give no pid")),
        (None, Some(pid), true) => {
            check_sampling(&args.sampling)?;
            check_output(&args.output)?;
            let duration = args.duration.unwrap_or(DEFAULT_DURATION);
            collect(&args.sampling, duration, &args.output, parse_pid(&pid)?, timeout)
        }
        (None, None, true) => Err(exit::usage(
            "usage: jtap profile <pid> [options], jtap profile start|stop|status|dump <pid>, or jtap profile [options] -- java ...",
        )),
    }
}

/// Refuses, before attaching, what the agent would refuse after.
fn check_sampling(sampling: &SamplingArgs) -> anyhow::Result<()> {
    for pattern in [&sampling.include, &sampling.exclude].into_iter().flatten() {
        regex::Regex::new(pattern)
            .with_context(|| format!("bad regular expression {pattern:?}"))?;
    }
    match start_options(sampling)?.validate() {
        Ok(_) => Ok(()),
        // Said with this command's flags rather than the agent's keys.
        Err(ParseError::WrongEvent(key, event)) => Err(exit::usage(format!(
            "{} only applies to -e {event}",
            flag_of(key)
        ))),
        Err(e) => Err(AgentError::BadOptions(e).into()),
    }
}

/// The flag of `jtap profile` that sets an agent key.
fn flag_of(key: &str) -> &str {
    match key.trim_end_matches('=') {
        "interval" => "-i",
        "allthreads" => "--all-threads",
        "live" => "--live",
        "exact" => "--exact",
        other => other,
    }
}

fn check_output(output: &OutputArgs) -> anyhow::Result<()> {
    for path in &output.output {
        check_format(path, output.format)?;
    }
    Ok(())
}

/// A file whose format the extension (or `--format`) names.
fn check_format(path: &Path, format: Option<Format>) -> anyhow::Result<()> {
    if Format::from_path(path).is_none() && format.is_none() {
        let known: Vec<&str> = Format::SUFFIXES.iter().map(|(suffix, _)| *suffix).collect();
        return Err(exit::usage(format!(
            "cannot tell the format of {} from its extension ({}); add one, or give --format",
            path.display(),
            known.join(" ")
        )));
    }
    Ok(())
}

fn parse_pid(text: &str) -> anyhow::Result<u32> {
    text.parse()
        .map_err(|_| exit::usage(format!("\"{text}\" is not a pid")))
}

/// The agent's `start` options for these arguments: `event=` names the CPU event (or else the
/// first one), `alloc`, `lock` and `wall` add the others, as in async-profiler's agent.
fn start_options(args: &SamplingArgs) -> anyhow::Result<Options> {
    let perf: Vec<&str> = args
        .event
        .iter()
        .filter_map(|chosen| match chosen {
            Chosen::Perf(name) => Some(name.as_str()),
            Chosen::Event(_) => None,
        })
        .collect();
    if perf.len() > 1 {
        return Err(exit::usage(format!(
            "-e {} and {}: one perf event at a time",
            perf[0], perf[1]
        )));
    }
    let mut events: Vec<Event> = args.event.iter().map(Chosen::event).collect();
    for (given, event) in [
        (args.wall.is_some(), Event::Wall),
        (args.alloc_interval.is_some(), Event::Alloc),
        (args.lock_threshold.is_some(), Event::Lock),
        (args.nativemem_interval.is_some(), Event::NativeMem),
        (args.io.is_some(), Event::Io),
        (args.nativelock.is_some(), Event::NativeLock),
    ] {
        if given && !events.contains(&event) {
            events.push(event);
        }
    }
    events.dedup();
    let cpu: Vec<Event> = events
        .iter()
        .copied()
        .filter(|e| e.is_time_sampling() && *e != Event::Wall)
        .collect();
    if cpu.len() > 1 {
        return Err(exit::usage(format!(
            "-e {} and {} both sample CPU time: give one",
            cpu[0], cpu[1]
        )));
    }
    let main = cpu.first().or(events.first()).copied();
    // An added event's setting, or none: the main event's setting goes without the key.
    fn added<T>(
        event: Event,
        main: Option<Event>,
        events: &[Event],
        value: Option<T>,
    ) -> Option<Option<T>> {
        match (events.contains(&event), main == Some(event)) {
            (false, _) => None,
            (true, true) => value.map(Some),
            (true, false) => Some(value),
        }
    }
    Ok(Options {
        action: Some(Action::Start),
        event: main,
        interval: args.interval,
        threads: args.threads,
        allthreads: args.all_threads,
        include: args.include.clone(),
        exclude: args.exclude.clone(),
        by: args
            .by
            .iter()
            .map(|by| LabelBy::parse(by).map_err(exit::usage))
            .collect::<anyhow::Result<_>>()?,
        byinner: args.by_inner,
        jstackdepth: args.jstackdepth,
        alluser: args.all_user,
        cstack: args.cstack,
        walker: args.walker,
        timeline: args.timeline,
        alloc: added(Event::Alloc, main, &events, args.alloc_interval),
        exact: args.exact,
        live: args.live,
        lock: added(Event::Lock, main, &events, args.lock_threshold),
        wall: added(Event::Wall, main, &events, args.wall),
        nativemem: added(Event::NativeMem, main, &events, args.nativemem_interval),
        io: added(Event::Io, main, &events, args.io),
        nativelock: added(Event::NativeLock, main, &events, args.nativelock),
        perf: perf.first().map(|name| name.to_string()),
        ..Options::default()
    })
}

/// What the agent sent while a collection ran.
#[derive(Default)]
struct Received {
    profiles: Mutex<Vec<Vec<u8>>>,
    samples: AtomicU64,
}

impl Received {
    fn sink(&self) -> impl FnMut(Frame) -> anyhow::Result<()> + '_ {
        move |frame| {
            match frame {
                Frame::Profile(bytes) => self
                    .profiles
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(bytes),
                Frame::Progress { samples, .. } => self.samples.store(samples, Ordering::Relaxed),
                _ => {}
            }
            Ok(())
        }
    }

    /// The profiles received (one per event), decoded; None when there were none.
    fn take_profiles(&self) -> anyhow::Result<Option<Vec<Profile>>> {
        let received =
            std::mem::take(&mut *self.profiles.lock().unwrap_or_else(|e| e.into_inner()));
        if received.is_empty() {
            return Ok(None);
        }
        let profiles = received
            .iter()
            .map(|bytes| wire::decode_profile(bytes).map_err(AgentError::Channel))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(profiles))
    }
}

/// `jtap profile <pid>`: start an engine owned by this client for `-d` (the agent ends it
/// then and sends the profile; Ctrl-C asks for it early), write the result.
fn collect(
    sampling: &SamplingArgs,
    duration: Duration,
    output: &OutputArgs,
    pid: u32,
    timeout: Duration,
) -> anyhow::Result<i32> {
    let received = Received::default();
    let mut options = start_options(sampling)?;
    options.duration = Some(duration);
    options.timeline |= output.needs_timeline();
    let conversation = jtap_client::Conversation::open(pid, &options, timeout)?;
    // Ctrl-C stops the collection early, and the result is still written.
    let ctrl_c = interrupt::session_takes();
    let progress = Progress::new(pid, &options.events(), Some(duration));
    let outcome = jtap_client::supervise(
        conversation,
        Some(duration),
        &|| false,
        &mut |elapsed| progress.show(elapsed, received.samples.load(Ordering::Relaxed)),
        |conversation| conversation.finish(&mut io::sink(), Some(&mut received.sink())),
    );
    progress.finish();
    drop(ctrl_c);
    let (why, asked) = outcome?;
    let profiles = received
        .take_profiles()?
        .ok_or_else(|| anyhow::anyhow!("the agent ended the session without a profile ({why})"))?;
    let seconds = profiles
        .iter()
        .map(|p| p.metadata.duration_ns)
        .max()
        .unwrap_or(0) as f64
        / 1e9;
    match asked {
        Asked::Interrupted => {
            eprintln!("jtap: interrupted after {seconds:.1} s; writing what was collected")
        }
        Asked::Overdue => eprintln!(
            "jtap: the agent did not end the profile at {} s; stopped it after {seconds:.1} s",
            duration.as_secs_f64()
        ),
        Asked::Nothing if why != jtap_protocol::Ended::DurationElapsed => {
            eprintln!(
                "jtap: the profile ended after {seconds:.1} s ({why}); writing what was collected"
            )
        }
        Asked::Nothing | Asked::Told => {}
    }
    write_profiles(output, &profiles)?;
    Ok(0)
}

/// `jtap profile start <pid>`: a detached engine (with `-o`, the agent also writes that file,
/// inside the JVM's filesystem, when the engine stops or the JVM exits).
fn start_detached(
    sampling: &SamplingArgs,
    duration: Option<Duration>,
    output: Option<PathBuf>,
    rotation: Continuous,
    pid: u32,
    timeout: Duration,
) -> anyhow::Result<i32> {
    let mut options = start_options(sampling)?;
    options.detach = true;
    options.duration = duration;
    options.file = output.map(|p| p.display().to_string());
    options.rotate = rotation.rotate;
    options.keep = rotation.keep;
    options.push = rotation.push;
    options.app = rotation.app;
    options.labels = (!rotation.labels.is_empty()).then(|| rotation.labels.join(";"));
    options.push_ca = for_the_agent(rotation.push_ca)?;
    options.push_user = rotation.push_user;
    options.push_token_file = for_the_agent(rotation.push_token_file)?;
    options.push_spool = for_the_agent(rotation.push_spool)?;
    options.push_spool_max = rotation.push_spool_max;
    jtap_client::run(pid, &options, timeout, &mut io::stdout().lock())?;
    Ok(0)
}

/// `jtap profile stop|dump <pid>`: fetch the detached engine's profile and write it here.
fn fetch(
    output: &OutputArgs,
    event: Option<Event>,
    pid: u32,
    action: Action,
    timeout: Duration,
) -> anyhow::Result<i32> {
    let received = Received::default();
    let mut text = Vec::new();
    let options = Options {
        event,
        ..Options::default().with_action(action)
    };
    jtap_client::run_with(
        pid,
        &options,
        timeout,
        &mut text,
        Some(&mut received.sink()),
    )?;
    match received.take_profiles()? {
        Some(profiles) => write_profiles(output, &profiles)?,
        // Engines without a profile (gc) answer in text.
        None => io::stdout().write_all(&text)?,
    }
    Ok(0)
}

/// `jtap profile [opts] -- java ...`: from the JVM's start to its exit, or for `-d` (the
/// agent ends the engine then; Ctrl-C reaches the JVM too, whose exit sends the profile).
fn launched(
    sampling: &SamplingArgs,
    duration: Option<Duration>,
    output: &OutputArgs,
    java: &[String],
) -> anyhow::Result<i32> {
    let received = Received::default();
    let mut options = start_options(sampling)?;
    options.duration = duration;
    options.timeline |= output.needs_timeline();
    // Ctrl-C reaches the JVM too, whose exit sends the profile.
    let ctrl_c = interrupt::session_takes();
    let code = launch::run_with(
        &options,
        java,
        &mut io::stderr(),
        Some(&mut received.sink()),
    );
    drop(ctrl_c);
    let code = code?;
    let profiles = received
        .take_profiles()?
        .ok_or_else(|| anyhow::anyhow!("the JVM exited (code {code}) without sending a profile"))?;
    write_profiles(output, &profiles)?;
    Ok(code)
}

/// Renders the profiles (one per event) as asked and writes them: atomically to each `-o`
/// file (printing the paths; formats that hold one event get a file per event), else to
/// stdout.
pub fn write_profiles(args: &OutputArgs, profiles: &[Profile]) -> anyhow::Result<()> {
    let options = export_options(args);
    if args.output.is_empty() {
        let format = args.format.unwrap_or(Format::Text);
        let mut stdout = io::stdout().lock();
        for (_, bytes) in render_set(format, profiles, &options, None) {
            stdout.write_all(&bytes)?;
        }
        return Ok(());
    }
    for file in write_files(args, profiles)? {
        println!("{}", file.display());
    }
    say_what_was_written(profiles);
    Ok(())
}

/// Writes `profiles` to each of `args.output`'s files (in the format its extension or
/// `--format` names; some formats write a file per profile) and returns the files written.
pub fn write_files(args: &OutputArgs, profiles: &[Profile]) -> anyhow::Result<Vec<PathBuf>> {
    let options = export_options(args);
    let mut written = Vec::new();
    for path in &args.output {
        let format = Format::from_path(path)
            .or(args.format)
            .unwrap_or(Format::Text);
        for (file, bytes) in render_set(format, profiles, &options, Some(path)) {
            let file = file.unwrap_or_else(|| path.clone());
            write_atomically(&file, &bytes)
                .with_context(|| format!("writing {}", file.display()))?;
            written.push(file);
        }
    }
    Ok(written)
}

/// What `args` asks of the writers.
fn export_options(args: &OutputArgs) -> ExportOptions {
    ExportOptions {
        annotate: args.annotate,
        counter: args.counter,
        lines: args.lines,
        ..ExportOptions::default()
    }
}

/// Says on stderr how many samples each profile written holds, from which engine and how
/// long, and when `-e cpu` fell back to a timer.
pub fn say_what_was_written(profiles: &[Profile]) {
    for profile in profiles {
        let metadata = &profile.metadata;
        let event = match profiles.len() {
            1 => String::new(),
            _ => format!("{}: ", metadata.event),
        };
        eprintln!(
            "jtap: {event}{} samples ({} engine, {:.1} s)",
            profile.total_samples(),
            metadata.engine,
            metadata.duration_ns as f64 / 1e9
        );
        if metadata.event == "cpu" && matches!(metadata.engine.as_str(), "itimer" | "ctimer") {
            eprintln!(
                "jtap: perf_event_open is not allowed in the JVM's process (a container's seccomp profile, or kernel.perf_event_paranoid): -e cpu fell back to {}, without native or kernel frames",
                metadata.engine
            );
        }
    }
}

/// The progress line on stderr, when it is a terminal.
struct Progress {
    bar: Option<indicatif::ProgressBar>,
    label: String,
    total: Option<Duration>,
}

impl Progress {
    fn new(pid: u32, events: &[Event], total: Option<Duration>) -> Progress {
        let bar = io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::new_spinner();
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        Progress {
            bar,
            label: format!(
                "profiling JVM {pid} ({})",
                events
                    .iter()
                    .map(|e| e.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            total,
        }
    }

    fn show(&self, elapsed: Duration, samples: u64) {
        if let Some(bar) = &self.bar {
            let total = self
                .total
                .map(|t| format!(" / {:.0} s", t.as_secs_f64()))
                .unwrap_or_default();
            bar.set_message(format!(
                "{}: {:.1} s{total}, {samples} samples (Ctrl-C stops early)",
                self.label,
                elapsed.as_secs_f64()
            ));
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The help of `name` in the arguments of `A`.
    fn help<A: clap::Args>(name: &str) -> String {
        let command = A::augment_args(clap::Command::new("profile"));
        let arg = command
            .get_arguments()
            .find(|a| a.get_id() == name)
            .unwrap_or_else(|| panic!("no argument {name}"));
        arg.get_help().map(|h| h.to_string()).unwrap_or_default()
    }

    #[test]
    fn the_help_of_event_names_every_event_profile_takes() {
        let text = help::<SamplingArgs>("event");
        for event in Event::ALL.into_iter().filter(profiled) {
            assert!(
                text.contains(event.name()),
                "{} not in {text:?}",
                event.name()
            );
        }
    }

    #[test]
    fn the_help_of_output_and_its_error_name_every_extension() {
        let text = help::<OutputArgs>("output");
        let error = check_format(Path::new("profile.bin"), None)
            .unwrap_err()
            .to_string();
        for (suffix, _) in Format::SUFFIXES {
            for (what, text) in [("help", &text), ("error", &error)] {
                let words: Vec<&str> = text
                    .split(|c: char| c.is_whitespace() || c == '(' || c == ')' || c == ';')
                    .collect();
                assert!(
                    words.contains(suffix),
                    "{suffix} not in the {what}: {text:?}"
                );
            }
        }
    }
}
