//! `jtap trace`, `jtap calltree` and `jtap monitor`: method tracing in a running JVM (or one
//! launched after `--`), by jtap's agent rewriting the selected classes.
//!
//! Each command builds a [`Plan`] and starts the agent's `trace` engine with it over the
//! control channel; the agent streams lines, trees or tables back, printed as they come, and
//! notes, printed on stderr. The agent ends the session itself at `-n` calls reported or after
//! `-d`, whatever this client does; Ctrl-C, the JVM's exit or `jtap trace stop <pid>` end it
//! early. Ending retransforms every touched class back to its original bytes, and the agent
//! reports the check on stderr. If jtap itself dies, the agent notices the closed channel and
//! restores the classes on its own.

use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use jtap_client::{interrupt, launch, AgentError, Asked, Conversation};
use jtap_profile::{FrameKind, TracedCall};
use jtap_protocol::label::LabelBy;
use jtap_protocol::options::help_of;
use jtap_protocol::records::{Call, Record};
use jtap_protocol::trace::{Guarded, MethodPattern, Mode, Plan};
use jtap_protocol::{Action, Ended, Event, Frame, Options};
use jtap_script::Script;

use crate::exit;

mod metrics;
mod slowpath;

/// What all three commands share.
#[derive(clap::Args)]
pub struct Common {
    /// Stop after this long (default: until Ctrl-C or the JVM's exit)
    #[arg(short, long, value_parser = crate::units::parse_duration)]
    duration: Option<Duration>,
    /// Print JSON lines instead of text
    #[arg(long)]
    json: bool,
    /// Report per request: each call (calltree: each tree; monitor: each row) carries the
    /// label of the request its thread works for, as `profile --by` labels samples: inside
    /// calls of ENTRY (Class::method), the method, or KEY read from its receiver or arguments
    /// (arg1, this.sql) without running application code; work handed to pools, ForkJoin,
    /// CompletableFuture stages and new or virtual threads keeps it. Repeat for several entries.
    #[arg(long, value_name = "ENTRY[=KEY]")]
    by: Vec<String>,
    #[arg(long, help = help_of("byinner"), requires = "by")]
    by_inner: bool,
    /// A java command line to launch and trace from its start
    #[arg(last = true)]
    java: Vec<String>,
}

/// `jtap trace|calltree|monitor stop <pid>`.
#[derive(clap::Subcommand)]
pub enum TraceAction {
    /// End the tracing sessions running in a JVM (their clients get the restore report)
    Stop {
        /// The JVM
        pid: String,
    },
}

/// `jtap trace` arguments.
#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct TraceArgs {
    #[command(subcommand)]
    action: Option<TraceAction>,
    /// `<pid> PATTERN...`, or only `PATTERN...` when launching after `--`
    #[arg(required = true)]
    words: Vec<String>,
    /// Report only calls lasting at least this long (e.g. 100ms)
    #[arg(long, value_parser = crate::units::parse_interval)]
    threshold: Option<Duration>,
    /// Show `this` and the arguments (described at entry, capped, with `...`)
    #[arg(long)]
    args: bool,
    /// Show the return value
    #[arg(long = "return")]
    returns: bool,
    /// Show the exception of calls that end by throwing
    #[arg(long)]
    exceptions: bool,
    /// Show the Java stack of each reported call
    #[arg(long)]
    stack: bool,
    /// Frames of each stack shown with --stack, from the caller down (at most 64)
    #[arg(long, requires = "stack", value_parser = clap::value_parser!(u32).range(1..=64))]
    depth: Option<u32>,
    /// Describe application objects (with --args/--return) by calling their toString(),
    /// which runs application code; by default they show as Class@hash{fields}
    #[arg(long)]
    to_string: bool,
    /// Also profile the traced threads (cpu or wall) and keep only the samples taken inside
    /// reported calls (over --threshold): a flame graph of the slow calls, written to -o
    #[arg(long, value_name = "EVENT", value_parser = parse_profile_event, requires = "output")]
    profile: Option<Event>,
    #[command(flatten)]
    output: super::profile::OutputArgs,
    /// Print this many calls, then stop
    #[arg(short = 'n', long = "count", value_parser = clap::value_parser!(u64).range(1..))]
    count: Option<u64>,
    /// Show only the calls for which this Java expression holds: `args[i]`, `this`, `return`,
    /// duration (10ms, 2s), method, clazz, thread; fields of objects as `this.size`
    #[arg(long = "if", value_name = "EXPR")]
    condition: Option<String>,
    /// Show these comma-separated Java expressions after each call (same names as --if)
    #[arg(long, value_name = "EXPRS")]
    print: Option<String>,
    #[command(flatten)]
    common: Common,
}

/// `jtap calltree` arguments.
#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct CalltreeArgs {
    #[command(subcommand)]
    action: Option<TraceAction>,
    /// `<pid> ENTRY`, or only `ENTRY` when launching after `--`
    #[arg(required = true)]
    words: Vec<String>,
    /// Methods to time inside the entry (comma-separated patterns); default: the entry's own
    /// call sites
    #[arg(long, value_delimiter = ',')]
    inner: Vec<String>,
    /// Levels of calls timed and shown below the entry
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    depth: Option<u32>,
    /// Report only entry calls lasting at least this long
    #[arg(long, value_parser = crate::units::parse_interval)]
    threshold: Option<Duration>,
    /// Print this many trees, then stop
    #[arg(short = 'n', long = "count", value_parser = clap::value_parser!(u64).range(1..))]
    count: Option<u64>,
    /// Find the slow path: time the callees the JVM resolves (interface calls, lambdas,
    /// reflection), following the heaviest down in rounds, within -d (default 60s)
    #[arg(long, conflicts_with_all = ["inner", "depth", "threshold", "count"])]
    auto: bool,
    // --auto: the slow path as a flame graph too (-o).
    #[command(flatten)]
    output: super::profile::OutputArgs,
    #[command(flatten)]
    common: Common,
}

/// `jtap monitor` arguments.
#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct MonitorArgs {
    #[command(subcommand)]
    action: Option<TraceAction>,
    /// `<pid> PATTERN...`, or only `PATTERN...` when launching after `--`
    #[arg(required = true)]
    words: Vec<String>,
    /// Report interval
    #[arg(short, long, default_value = "5s", value_parser = crate::units::parse_interval)]
    interval: Duration,
    /// Print this many intervals, then stop
    #[arg(short = 'n', long = "count", value_parser = clap::value_parser!(u64).range(1..))]
    count: Option<u64>,
    /// Count only the calls whose arguments pass this test: `args[i]` compared with numbers,
    /// each other or null, joined by &&, || and ! (tested in the traced methods)
    #[arg(long = "if", value_name = "EXPR")]
    condition: Option<String>,
    /// Serve the methods' latency histograms (count, errors, buckets) as Prometheus metrics
    /// at `http://[HOST]:PORT/metrics` (`:9400`: every interface), updated every interval
    #[arg(long, value_name = "[HOST]:PORT")]
    serve: Option<String>,
    #[command(flatten)]
    common: Common,
}

/// Where the command runs.
enum Target {
    Pid(u32),
    Launch,
    Stop(u32),
}

/// Splits `stop <pid>` / `<pid> PATTERN...` / `PATTERN...` (launch mode).
fn target(
    action: Option<TraceAction>,
    words: &[String],
    launching: bool,
) -> anyhow::Result<(Target, Vec<String>)> {
    let pid = |text: &str| {
        text.parse::<u32>()
            .map_err(|_| exit::usage(format!("\"{text}\" is not a pid")))
    };
    match (action, launching) {
        (Some(TraceAction::Stop { pid: p }), _) => Ok((Target::Stop(pid(&p)?), Vec::new())),
        (None, true) => Ok((Target::Launch, words.to_vec())),
        (None, false) => match words {
            [p, patterns @ ..] if !patterns.is_empty() => {
                Ok((Target::Pid(pid(p)?), patterns.to_vec()))
            }
            _ => Err(exit::usage(
                "give a pid and at least one method pattern (or `stop <pid>`, or patterns and `-- java ...`)",
            )),
        },
    }
}

fn patterns(texts: &[String]) -> Result<Vec<MethodPattern>, String> {
    texts.iter().map(|t| MethodPattern::parse(t)).collect()
}

/// Runs `jtap trace`.
pub fn trace(mut args: TraceArgs, timeout: Duration) -> anyhow::Result<i32> {
    let (target, words) = target(
        args.action.take(),
        &args.words,
        !args.common.java.is_empty(),
    )?;
    let one_liner = match (&args.condition, &args.print) {
        (None, None) => None,
        (condition, print) => Some(
            jtap_script::one_liner(condition.as_deref(), print.as_deref()).map_err(exit::usage)?,
        ),
    };
    let uses = |word: &str| {
        [&args.condition, &args.print]
            .iter()
            .filter_map(|e| e.as_deref())
            .any(|e| regex::Regex::new(&format!(r"\b{word}\b")).is_ok_and(|re| re.is_match(e)))
    };
    let show = Show {
        json: args.common.json,
        one_liner: one_liner.as_ref(),
        // With a condition, the client counts the calls it keeps.
        limit: one_liner.as_ref().and(args.count),
        metrics: None,
    };
    // A condition's `duration > N` becomes the agent's threshold: shorter calls are not sent.
    let floor = one_liner
        .as_ref()
        .and_then(|s| s.handlers[0].duration_floor())
        .map(Duration::from_nanos);
    // Its tests of the arguments are made in the traced methods: calls they reject are not
    // even captured.
    let guard = one_liner
        .as_ref()
        .and_then(|s| s.handlers[0].argument_guard());
    let plan = |targets: Vec<_>| Plan {
        mode: Mode::Trace,
        guards: guard
            .iter()
            .flat_map(|g| (0..targets.len()).map(move |i| (Guarded::Target(i), g.clone())))
            .collect(),
        targets,
        threshold: args.threshold.max(floor),
        count: if one_liner.is_some() {
            None
        } else {
            args.count
        },
        values: uses("args") || uses("this"),
        returns: args.returns || uses("return"),
        args: args.args,
        exceptions: args.exceptions,
        stack: args.stack,
        depth: args.depth,
        to_string: args.to_string,
        // A slow-call profile keeps the samples between each call's start and end.
        exact: args.profile.is_some(),
        ..Plan::default()
    };
    let slow = match (args.profile, args.output.writes_nothing()) {
        (Some(_), _) if one_liner.is_some() => {
            return Err(exit::usage("--profile does not take --if or --print yet"))
        }
        (Some(event), _) => Some(SlowCalls {
            event,
            output: &args.output,
        }),
        (None, false) => {
            return Err(exit::usage(
                "-o writes the profile of --profile: give --profile cpu or wall",
            ))
        }
        (None, true) => None,
    };
    if slow.is_some() {
        args.output.check()?;
    }
    if let (Some(_), Target::Launch) = (&slow, &target) {
        return Err(exit::usage(
            "--profile needs a running JVM's pid (not -- java ...)",
        ));
    }
    run(
        target,
        patterns(&words).map(plan),
        &args.common,
        (slow, show),
        timeout,
    )
}

/// Runs `jtap calltree`.
pub fn calltree(mut args: CalltreeArgs, timeout: Duration) -> anyhow::Result<i32> {
    let (target, words) = target(
        args.action.take(),
        &args.words,
        !args.common.java.is_empty(),
    )?;
    match (&target, args.auto) {
        (_, true) if !args.common.by.is_empty() => {
            return Err(exit::usage("calltree --auto does not take --by"))
        }
        (Target::Pid(pid), true) if words.len() == 1 => {
            return slowpath::run(&slowpath::Auto {
                pid: *pid,
                entry: &words[0],
                budget: args.common.duration,
                json: args.common.json,
                output: &args.output,
                timeout,
            })
        }
        (Target::Pid(_), true) => {
            return Err(exit::usage("calltree --auto takes one entry pattern"))
        }
        (Target::Launch, true) => {
            return Err(exit::usage(
                "calltree --auto needs a running JVM's pid (not -- java ...)",
            ))
        }
        (_, false) if !args.output.writes_nothing() => {
            return Err(exit::usage(
                "calltree writes a flame graph (-o) with --auto only",
            ))
        }
        _ => {}
    }
    let plan = (|| {
        if !matches!(target, Target::Stop(_)) && words.len() != 1 {
            return Err(
                "calltree takes one entry pattern (more methods go in --inner)".to_string(),
            );
        }
        Ok(Plan {
            mode: Mode::Calltree,
            targets: patterns(&words)?,
            inner: patterns(&args.inner)?,
            depth: args.depth,
            threshold: args.threshold,
            count: args.count,
            ..Plan::default()
        })
    })();
    run(
        target,
        plan,
        &args.common,
        (None, Show::plain(args.common.json)),
        timeout,
    )
}

/// Runs `jtap monitor`.
pub fn monitor(mut args: MonitorArgs, timeout: Duration) -> anyhow::Result<i32> {
    let (target, words) = target(
        args.action.take(),
        &args.words,
        !args.common.java.is_empty(),
    )?;
    // Monitor counts in the agent: its condition must be one the traced methods can test.
    let guard = match &args.condition {
        None => None,
        Some(condition) => {
            let script = jtap_script::one_liner(Some(condition), None).map_err(exit::usage)?;
            Some(script.handlers[0].exact_argument_guard().ok_or_else(|| {
                exit::usage(
                    "monitor --if tests the arguments only: args[i] compared with numbers, each other or null, joined by &&, || and !",
                )
            })?)
        }
    };
    let plan = |targets: Vec<_>| Plan {
        mode: Mode::Monitor,
        guards: guard
            .iter()
            .flat_map(|g| (0..targets.len()).map(move |i| (Guarded::Target(i), g.clone())))
            .collect(),
        targets,
        interval: Some(args.interval),
        count: monitor_count(args.count, args.common.duration, args.interval),
        ..Plan::default()
    };
    let metrics = match (&args.serve, &target) {
        (Some(address), Target::Pid(_) | Target::Launch) => {
            let (metrics, local) = metrics::Metrics::serve(address)?;
            eprintln!("jtap: serving Prometheus metrics at http://{local}/metrics");
            Some(metrics)
        }
        _ => None,
    };
    let show = Show {
        metrics: metrics.as_deref(),
        ..Show::plain(args.common.json)
    };
    run(
        target,
        patterns(&words).map(plan),
        &args.common,
        (None, show),
        timeout,
    )
}

/// How many intervals a monitor reports: `-n`, and with `-d` at most the whole intervals of
/// the duration and a partial last one only if it lasts a tenth of an interval or more. The
/// agent reports an interval when it has lasted `-i` (a little later each time: it looks every
/// few milliseconds) and once more when `-d` ends it, which without this bound prints a
/// nearly empty last table where `-d` is a multiple of `-i`; with it, the session ends at
/// the last interval that counts, whichever of the two comes first.
fn monitor_count(
    count: Option<u64>,
    duration: Option<Duration>,
    interval: Duration,
) -> Option<u64> {
    let Some(duration) = duration else {
        return count;
    };
    let interval = interval.as_nanos().max(1);
    let whole = duration.as_nanos() / interval;
    let rest = duration.as_nanos() % interval;
    let intervals = (whole + u128::from(rest * 10 >= interval)).max(1);
    let intervals = u64::try_from(intervals).unwrap_or(u64::MAX);
    Some(count.map_or(intervals, |n| n.min(intervals)))
}

fn run(
    target: Target,
    plan: Result<Plan, String>,
    common: &Common,
    (slow, show): (Option<SlowCalls>, Show),
    timeout: Duration,
) -> anyhow::Result<i32> {
    if let Target::Stop(pid) = target {
        jtap_client::stop(pid, Event::Trace, timeout, &mut io::stdout().lock(), None)?;
        return Ok(0);
    }
    let plan = match plan {
        Ok(plan) => plan,
        Err(e) => {
            eprintln!("jtap: {e}");
            return Ok(exit::USAGE);
        }
    };
    if matches!(target, Target::Launch) && !common.by.is_empty() {
        return Err(exit::usage(
            "--by needs a running JVM's pid (not -- java ...)",
        ));
    }
    let options = Options {
        action: Some(Action::Start),
        event: Some(Event::Trace),
        duration: common.duration,
        trace: Some(plan),
        by: common
            .by
            .iter()
            .map(|by| LabelBy::parse(by).map_err(exit::usage))
            .collect::<anyhow::Result<_>>()?,
        byinner: common.by_inner,
        ..Options::default()
    };
    // Ctrl-C stops the session, which restores the classes.
    let _ctrl_c = interrupt::session_takes();
    match target {
        Target::Pid(pid) => match slow {
            Some(slow) => profiled(pid, &options, common.json, &slow, timeout),
            None => attached(pid, &options, show, timeout),
        },
        _ => launched(&options, common, show),
    }
}

/// `jtap trace|calltree|monitor <pid> ...`: a session owned by this client. The agent ends it
/// by itself at `-n` or `-d` (and sends the restore check); Ctrl-C asks it to end early. The
/// results stream to stdout, the agent's notes to stderr.
fn attached(pid: u32, options: &Options, show: Show, timeout: Duration) -> anyhow::Result<i32> {
    let enough = || {
        show.limit
            .is_some_and(|n| SHOWN.load(Ordering::SeqCst) >= n)
    };
    run_session(pid, options, timeout, &enough, |conversation| {
        conversation.finish(&mut io::stdout(), Some(&mut print_records(show)))
    })?;
    Ok(0)
}

/// Runs the tracing session `options` in the JVM `pid` to its end, `read` taking what it
/// sends; `enough` ends it early. Says why it ended when neither this client nor a bound of
/// the session's ended it.
pub(crate) fn run_session(
    pid: u32,
    options: &Options,
    timeout: Duration,
    enough: &dyn Fn() -> bool,
    read: impl FnOnce(Conversation) -> anyhow::Result<Ended> + Send,
) -> anyhow::Result<()> {
    let conversation = Conversation::open(pid, options, timeout)?;
    let (why, asked) =
        jtap_client::supervise(conversation, options.duration, enough, &mut |_| {}, read)?;
    if asked == Asked::Nothing && !why.as_bounded() {
        eprintln!("jtap: the session ended: {why}");
    }
    Ok(())
}

/// `trace --profile`: what to profile beside the trace and where the profile goes.
struct SlowCalls<'a> {
    event: Event,
    output: &'a super::profile::OutputArgs,
}

/// `--profile` takes cpu or wall.
fn parse_profile_event(text: &str) -> Result<Event, String> {
    match Event::from_name(text) {
        Some(event @ (Event::Cpu | Event::Wall)) => Ok(event),
        _ => Err(format!("--profile takes cpu or wall, not {text:?}")),
    }
}

/// `jtap trace <pid> ... --profile cpu|wall -o out`: the trace as [`attached`] runs it, and
/// beside it a profile of the JVM (a recording of this client's own, with each sample's time
/// and thread); at the end, only the samples taken on a thread while inside one of the
/// reported calls are kept and written.
fn profiled(
    pid: u32,
    options: &Options,
    json: bool,
    slow: &SlowCalls,
    timeout: Duration,
) -> anyhow::Result<i32> {
    // Samples every 10 ms, wall too: slow calls are few, and each should hold several.
    let profile_options = Options {
        action: Some(Action::Start),
        event: Some(slow.event),
        interval: Some(Duration::from_millis(10)),
        timeline: true,
        ..Options::default()
    };
    let calls = std::sync::Mutex::new(Vec::new());
    let profiles = beside_profile(pid, &profile_options, timeout, || {
        run_session(pid, options, timeout, &|| false, |conversation| {
            let mut print = print_records(Show::plain(json));
            conversation.finish(
                &mut io::stdout(),
                Some(&mut |frame| {
                    if let Frame::Record(bytes) = &frame {
                        if let Ok(Record::Call(call)) = Record::decode(bytes) {
                            calls
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .push(traced_call(&call));
                        }
                    }
                    print(frame)
                }),
            )
        })
    })?
    .1;
    let calls = calls.into_inner().unwrap_or_else(|e| e.into_inner());
    let slow_profiles = profiles
        .iter()
        .map(|p| p.during(&calls))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow::anyhow!(e))?;
    eprintln!(
        "jtap: {} calls reported; the profile keeps the samples taken inside them",
        calls.len()
    );
    super::profile::write_profiles(slow.output, &slow_profiles)?;
    Ok(0)
}

/// Runs `trace` (a tracing session of the JVM `pid`) beside a profile of the same JVM
/// (`profile_options`, a `start`): the profile begins first and ends with `trace`, whatever
/// ended it. Returns what `trace` returned and the profiles the profile session sent.
pub(crate) fn beside_profile<T>(
    pid: u32,
    profile_options: &Options,
    timeout: Duration,
    trace: impl FnOnce() -> anyhow::Result<T>,
) -> anyhow::Result<(T, Vec<jtap_profile::Profile>)> {
    let profile = jtap_client::Conversation::open(pid, profile_options, timeout)?;
    let stopper = profile.stopper()?;
    let received = std::sync::Mutex::new(Vec::new());
    let traced = std::thread::scope(|scope| -> anyhow::Result<T> {
        let reader = scope.spawn(|| {
            profile.finish(
                &mut io::sink(),
                Some(&mut |frame| {
                    if let Frame::Profile(bytes) = frame {
                        (received.lock().unwrap_or_else(|e| e.into_inner())).push(bytes);
                    }
                    Ok(())
                }),
            )
        });
        let traced = trace();
        let _ = stopper.stop();
        let ended = reader
            .join()
            .map_err(|_| anyhow::anyhow!("the profile's reader panicked"))?;
        let traced = traced?;
        ended?;
        Ok(traced)
    })?;
    let received = received.into_inner().unwrap_or_else(|e| e.into_inner());
    let profiles = received
        .iter()
        .map(|bytes| {
            jtap_protocol::wire::decode_profile(bytes).map_err(|e| AgentError::Channel(e).into())
        })
        .collect::<anyhow::Result<_>>()?;
    Ok((traced, profiles))
}

/// A reported call as the profile model keeps it.
fn traced_call(call: &Call) -> TracedCall {
    TracedCall {
        time_ns: call.time_ns,
        duration_ns: call.duration_ns,
        tid: call.tid,
        method: jtap_profile::Frame::java(
            format!("{}.{}", call.class, call.method),
            FrameKind::Compiled,
            Some(call.descriptor.clone()),
            None,
        ),
    }
}

/// `jtap trace ... -- java ...`: the agent traces from the JVM's start; it ends the session at
/// `-n` or `-d` by itself, and Ctrl-C reaches the JVM too.
fn launched(options: &Options, common: &Common, show: Show) -> anyhow::Result<i32> {
    launch::run_with(
        options,
        &common.java,
        &mut io::stdout(),
        Some(&mut print_records(show)),
    )
}

/// How records are shown: text or JSON, and with `trace --if/--print` only the calls the
/// one-liner keeps, each followed by what it prints.
#[derive(Clone, Copy)]
struct Show<'s> {
    json: bool,
    one_liner: Option<&'s Script>,
    /// With a one-liner: show this many calls, then stop.
    limit: Option<u64>,
    /// `monitor --serve`: the metrics each interval adds to.
    metrics: Option<&'s metrics::Metrics>,
}

impl Show<'_> {
    fn plain(json: bool) -> Show<'static> {
        Show {
            json,
            one_liner: None,
            limit: None,
            metrics: None,
        }
    }
}

/// Calls shown so far by a one-liner session.
static SHOWN: AtomicU64 = AtomicU64::new(0);

/// Prints the agent's records as they come, as text or (`--json`) as JSON lines; with a
/// one-liner, only the calls it keeps.
fn print_records(show: Show<'_>) -> impl FnMut(Frame) -> anyhow::Result<()> + '_ {
    let mut machine = show
        .one_liner
        .map(|script| jtap_script::Machine::new(script, "one-liner", Vec::new(), None));
    let mut reported = std::collections::HashSet::new();
    move |frame| {
        let Frame::Record(bytes) = frame else {
            return Ok(());
        };
        let record = Record::decode(&bytes).map_err(AgentError::Channel)?;
        if let (Some(metrics), Record::Monitor(interval)) = (show.metrics, &record) {
            metrics.add(interval);
        }
        let mut out = io::stdout().lock();
        let text = match (&mut machine, &record) {
            (Some(machine), Record::Call(call)) => {
                if show
                    .limit
                    .is_some_and(|n| SHOWN.load(Ordering::SeqCst) >= n)
                {
                    return Ok(());
                }
                machine.fire(0, &jtap_script::fired(call.clone(), false));
                for error in machine.take_errors() {
                    // Once each: the same expression fails the same way call after call.
                    if reported.insert(error.clone()) {
                        eprintln!("jtap: {}", jtap_script::one_liner_error(&error));
                    }
                }
                let printed = machine.take_output();
                if printed.is_empty() {
                    return Ok(());
                }
                SHOWN.fetch_add(1, Ordering::SeqCst);
                let printed = printed.trim_end_matches('\n');
                match (show.json, printed.is_empty()) {
                    (true, _) => {
                        let mut json = call.to_json();
                        json["print"] = serde_json::Value::String(printed.to_string());
                        json.to_string()
                    }
                    (false, true) => record.to_text(),
                    (false, false) => format!("{}  {printed}", record.to_text()),
                }
            }
            _ if show.json => record.to_json_lines(),
            _ => record.to_text(),
        };
        if !text.is_empty() {
            writeln!(out, "{text}")?;
        }
        out.flush()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_monitor_reports_the_intervals_of_its_duration() {
        let s = Duration::from_secs;
        let ms = Duration::from_millis;
        assert_eq!(monitor_count(None, Some(s(6)), s(2)), Some(3));
        assert_eq!(monitor_count(None, Some(s(5)), s(2)), Some(3));
        assert_eq!(monitor_count(None, Some(ms(6100)), s(2)), Some(3));
        assert_eq!(monitor_count(None, Some(ms(6200)), s(2)), Some(4));
        assert_eq!(monitor_count(None, Some(s(1)), s(5)), Some(1));
        assert_eq!(monitor_count(None, Some(ms(1)), s(5)), Some(1));
        assert_eq!(monitor_count(Some(2), Some(s(6)), s(2)), Some(2));
        assert_eq!(monitor_count(Some(9), Some(s(6)), s(2)), Some(3));
        assert_eq!(monitor_count(Some(9), None, s(2)), Some(9));
        assert_eq!(monitor_count(None, None, s(2)), None);
    }
}
