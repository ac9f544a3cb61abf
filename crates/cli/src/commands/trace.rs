//! `jtap trace`, `jtap calltree` and `jtap monitor`: method tracing in a running JVM (or one
//! launched after `--`), by jtap's agent rewriting the selected classes.
//!
//! Each command builds a [`Plan`] and starts the agent's `trace` engine with it over the
//! control channel; the agent streams lines, trees or tables back, printed as they come
//! (lines the agent starts with `jtap: ` are notes and go to stderr). The session ends on
//! Ctrl-C, `-d`, `-n` calls reported (the agent says so with [`COUNT_REACHED`]), the JVM's
//! exit, or `jtap trace stop <pid>`: jtap then sends `stop`, the agent retransforms every
//! touched class back to its original bytes and reports the check on stderr. If jtap itself
//! dies, the agent notices the closed channel and restores the classes on its own.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use jtap_protocol::trace::{MethodPattern, Mode, Plan};
use jtap_protocol::{Action, Event, Options};

use crate::agent_client;
use crate::exit;
use crate::launch;

/// The agent's line saying `-n` records went out (see the agent's `trace::report`).
const COUNT_REACHED: &str = "jtap: count reached";

/// Set while a session runs: Ctrl-C then ends it cleanly instead of exiting.
static TRACING: AtomicBool = AtomicBool::new(false);
/// Ctrl-C was pressed during a session.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// For the Ctrl-C handler: true when a tracing session takes the interrupt (it stops the
/// session and restores the classes); false means "exit now".
pub fn take_interrupt() -> bool {
    TRACING.load(Ordering::SeqCst) && !INTERRUPTED.swap(true, Ordering::SeqCst)
}

/// What all three commands share.
#[derive(clap::Args)]
pub struct Common {
    /// Stop after this long (default: until Ctrl-C or the JVM's exit)
    #[arg(short, long, value_parser = crate::units::parse_duration)]
    duration: Option<Duration>,
    /// Print JSON lines instead of text
    #[arg(long)]
    json: bool,
    /// A java command line to launch and trace from its start
    #[arg(last = true)]
    java: Vec<String>,
}

/// `jtap trace` arguments.
#[derive(clap::Args)]
pub struct TraceArgs {
    /// `<pid> PATTERN...`, `stop <pid>`, or only `PATTERN...` when launching after `--`
    #[arg(required = true)]
    words: Vec<String>,
    /// Report only calls lasting at least this long (e.g. 100ms)
    #[arg(long, value_parser = crate::units::parse_duration)]
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
    /// Describe application objects (with --args/--return) by calling their toString(),
    /// which runs application code; by default they show as Class@hash{fields}
    #[arg(long)]
    to_string: bool,
    /// Stop after this many calls
    #[arg(short = 'n', long = "count")]
    count: Option<u64>,
    #[command(flatten)]
    common: Common,
}

/// `jtap calltree` arguments.
#[derive(clap::Args)]
pub struct CalltreeArgs {
    /// `<pid> ENTRY`, `stop <pid>`, or only `ENTRY` when launching after `--`
    #[arg(required = true)]
    words: Vec<String>,
    /// Methods to time inside the entry (comma-separated patterns); default: the entry's own
    /// call sites
    #[arg(long, value_delimiter = ',')]
    inner: Vec<String>,
    /// Levels of the tree shown below the entry
    #[arg(long)]
    depth: Option<u32>,
    /// Report only entry calls lasting at least this long
    #[arg(long, value_parser = crate::units::parse_duration)]
    threshold: Option<Duration>,
    /// Stop after this many trees
    #[arg(short = 'n', long = "count")]
    count: Option<u64>,
    #[command(flatten)]
    common: Common,
}

/// `jtap monitor` arguments.
#[derive(clap::Args)]
pub struct MonitorArgs {
    /// `<pid> PATTERN...`, `stop <pid>`, or only `PATTERN...` when launching after `--`
    #[arg(required = true)]
    words: Vec<String>,
    /// Report interval
    #[arg(short, long, default_value = "5s", value_parser = crate::units::parse_duration)]
    interval: Duration,
    #[command(flatten)]
    common: Common,
}

/// Where the command runs.
enum Target {
    Pid(u32),
    Launch,
    Stop(u32),
}

/// Splits `<pid> PATTERN...` / `stop <pid>` / `PATTERN...` (launch mode).
fn target(words: &[String], launching: bool) -> anyhow::Result<(Target, Vec<String>)> {
    if launching {
        return Ok((Target::Launch, words.to_vec()));
    }
    let pid = |text: &str| {
        text.parse::<u32>()
            .map_err(|_| anyhow::anyhow!("\"{text}\" is not a pid"))
    };
    match words {
        [stop, p] if stop == "stop" => Ok((Target::Stop(pid(p)?), Vec::new())),
        [p, patterns @ ..] if !patterns.is_empty() => Ok((Target::Pid(pid(p)?), patterns.to_vec())),
        _ => anyhow::bail!("give a pid and at least one method pattern (or `stop <pid>`, or patterns and `-- java ...`)"),
    }
}

fn patterns(texts: &[String]) -> Result<Vec<MethodPattern>, String> {
    texts.iter().map(|t| MethodPattern::parse(t)).collect()
}

/// Runs `jtap trace`.
pub fn trace(args: TraceArgs, timeout: Duration) -> anyhow::Result<i32> {
    let (target, words) = target(&args.words, !args.common.java.is_empty())?;
    let plan = |targets| Plan {
        mode: Mode::Trace,
        targets,
        threshold: args.threshold,
        count: args.count,
        args: args.args,
        returns: args.returns,
        exceptions: args.exceptions,
        stack: args.stack,
        to_string: args.to_string,
        json: args.common.json,
        ..Plan::default()
    };
    run(target, patterns(&words).map(plan), &args.common, timeout)
}

/// Runs `jtap calltree`.
pub fn calltree(args: CalltreeArgs, timeout: Duration) -> anyhow::Result<i32> {
    let (target, words) = target(&args.words, !args.common.java.is_empty())?;
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
            json: args.common.json,
            ..Plan::default()
        })
    })();
    run(target, plan, &args.common, timeout)
}

/// Runs `jtap monitor`.
pub fn monitor(args: MonitorArgs, timeout: Duration) -> anyhow::Result<i32> {
    let (target, words) = target(&args.words, !args.common.java.is_empty())?;
    let plan = |targets| Plan {
        mode: Mode::Monitor,
        targets,
        interval: Some(args.interval),
        json: args.common.json,
        ..Plan::default()
    };
    run(target, patterns(&words).map(plan), &args.common, timeout)
}

fn run(
    target: Target,
    plan: Result<Plan, String>,
    common: &Common,
    timeout: Duration,
) -> anyhow::Result<i32> {
    if let Target::Stop(pid) = target {
        agent_client::stop(pid, timeout, &mut io::stdout().lock(), None)?;
        return Ok(0);
    }
    let plan = match plan {
        Ok(plan) => plan,
        Err(e) => {
            eprintln!("jtap: {e}");
            return Ok(exit::USAGE);
        }
    };
    let options = Options {
        action: Some(Action::Start),
        event: Some(Event::Trace),
        trace: Some(plan),
        ..Options::default()
    };
    TRACING.store(true, Ordering::SeqCst);
    let result = match target {
        Target::Pid(pid) => attached(pid, &options, common.duration, timeout),
        _ => launched(&options, common, timeout),
    };
    TRACING.store(false, Ordering::SeqCst);
    result
}

/// Prints the agent's text: notes (`jtap: ...`) on stderr, the rest on stdout; notices
/// [`COUNT_REACHED`].
struct Lines {
    pending: Vec<u8>,
    reached: Arc<AtomicBool>,
}

impl Write for Lines {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.pending.extend_from_slice(bytes);
        while let Some(end) = self.pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            let text = String::from_utf8_lossy(&line);
            if text.trim_end() == COUNT_REACHED {
                self.reached.store(true, Ordering::SeqCst);
            } else if text.starts_with("started the trace engine") {
                // The agent's generic reply to `start`: the session's own note says more.
            } else if text.starts_with("jtap: ") {
                io::stderr().write_all(&line)?;
            } else {
                io::stdout().write_all(&line)?;
            }
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        io::stdout().flush()
    }
}

/// Why a session ended.
#[derive(PartialEq, Eq)]
enum Ended {
    /// The agent ended it (the JVM exits, or the start failed).
    Agent,
    Stopped,
}

/// Waits until the session should end: the agent ended it, Ctrl-C, `-d`, or `-n` reached.
fn wait_for_end(
    finished: &dyn Fn() -> bool,
    reached: &AtomicBool,
    duration: Option<Duration>,
) -> Ended {
    let started = Instant::now();
    loop {
        if finished() {
            return Ended::Agent;
        }
        if INTERRUPTED.load(Ordering::SeqCst)
            || reached.load(Ordering::SeqCst)
            || duration.is_some_and(|d| started.elapsed() >= d)
        {
            return Ended::Stopped;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Stops the session of JVM `pid` through a second connection; the agent's report of the
/// restore goes to stderr.
fn stop(pid: u32, timeout: Duration) -> anyhow::Result<()> {
    let mut report = Vec::new();
    agent_client::stop(pid, timeout, &mut report, None)?;
    let report = String::from_utf8_lossy(&report);
    for line in report.lines() {
        eprintln!("jtap: {line}");
    }
    Ok(())
}

fn attached(
    pid: u32,
    options: &Options,
    duration: Option<Duration>,
    timeout: Duration,
) -> anyhow::Result<i32> {
    let reached = Arc::new(AtomicBool::new(false));
    let owner = {
        let (options, reached) = (options.clone(), reached.clone());
        std::thread::spawn(move || {
            let mut lines = Lines {
                pending: Vec::new(),
                reached,
            };
            agent_client::run(pid, &options, timeout, &mut lines)
        })
    };
    let ended = wait_for_end(&|| owner.is_finished(), &reached, duration);
    let stopped = if ended == Ended::Stopped {
        stop(pid, timeout)
    } else {
        Ok(())
    };
    let owner_result = owner
        .join()
        .unwrap_or_else(|_| Err(anyhow::anyhow!("the client thread panicked")));
    owner_result?;
    stopped?;
    Ok(0)
}

fn launched(options: &Options, common: &Common, timeout: Duration) -> anyhow::Result<i32> {
    let reached = Arc::new(AtomicBool::new(false));
    let exited = Arc::new(AtomicBool::new(false));
    let pid = Arc::new(AtomicU32::new(0));
    let stopper = {
        let (reached, exited, pid) = (reached.clone(), exited.clone(), pid.clone());
        let duration = common.duration;
        std::thread::spawn(move || {
            if wait_for_end(&|| exited.load(Ordering::SeqCst), &reached, duration) == Ended::Stopped
            {
                let pid = pid.load(Ordering::SeqCst);
                if pid != 0 && !exited.load(Ordering::SeqCst) {
                    if let Err(e) = stop(pid, timeout) {
                        eprintln!("jtap: stopping the trace failed: {e:#}");
                    }
                }
            }
        })
    };
    let mut lines = Lines {
        pending: Vec::new(),
        reached,
    };
    let code = launch::run_with(options, &common.java, &mut lines, None, &mut |p| {
        pid.store(p, Ordering::SeqCst)
    });
    exited.store(true, Ordering::SeqCst);
    let _ = stopper.join();
    code
}
