//! `jtap mcp [--allow-changes]`: a Model Context Protocol server on stdio (the official Rust
//! SDK, `rmcp`) whose tools are jtap's read-only commands, for AI assistants.
//!
//! Every tool is bounded in time (durations capped, and a deadline on each call) and in
//! output (text cut at [`MAX_OUTPUT`] characters, saying so). Tools that would change the JVM
//! — a heap dump, a full GC, jcmd commands outside a read-only list, a BTrace run — answer
//! with a refusal unless the server was started with `--allow-changes`. `inspect` runs
//! without it: its heap walk pauses the JVM about as long as a class histogram does, and
//! changes nothing.
//!
//! `threads`, `classes`, `list_jvms` and the jcmd-based tools call the library functions the
//! CLI commands use, in this process. The commands whose logic lives in their command
//! modules' `run` (heap, top, inspect, sites, profile, trace, monitor, btrace, convert, diff) run as a
//! child `jtap` process (this executable, `/proc/self/exe`) with bounded arguments: they
//! print as they go and end on their own, and a child keeps their Ctrl-C handling and agent
//! sessions apart from the server, which must stay up across calls.

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use jtap_attach::{AttachOptions, Request, VirtualMachine};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{Implementation, ServerCapabilities, ServerConfig};
use rmcp::{schemars, tool, tool_handler, tool_router, ServerHandler, ServiceExt};
use serde::Deserialize;

use super::classes::{self, ClassesArgs};
use super::threads::{self, ThreadsArgs};

/// The most characters a tool returns; longer output is cut with a note.
pub const MAX_OUTPUT: usize = 60_000;
/// The longest a profile, trace or monitor may run.
const MAX_RUN: Duration = Duration::from_secs(60);
/// Added to a tool's own duration for its deadline: attaching, loading the agent, writing.
const SLACK: Duration = Duration::from_secs(60);
/// How long to wait for a JVM's attach listener.
const ATTACH_TIMEOUT: Duration = Duration::from_secs(10);

/// jcmd commands that only read (all others are refused without `--allow-changes`).
/// `GC.class_histogram` is left out: by default it runs a full GC first.
const READ_ONLY_JCMD: &[&str] = &[
    "help",
    "Compiler.codecache",
    "Compiler.codelist",
    "Compiler.directives_print",
    "Compiler.queue",
    "GC.finalizer_info",
    "GC.heap_info",
    "JFR.check",
    "ManagementAgent.status",
    "Thread.print",
    "VM.class_hierarchy",
    "VM.classloader_stats",
    "VM.classloaders",
    "VM.command_line",
    "VM.dynlibs",
    "VM.flags",
    "VM.info",
    "VM.metaspace",
    "VM.stringtable",
    "VM.symboltable",
    "VM.system_properties",
    "VM.uptime",
    "VM.version",
];

/// The command line of `jtap mcp`.
#[derive(clap::Args, Debug, Clone)]
pub struct McpArgs {
    /// Allow the tools that change the JVM: heap dumps, a full GC, jcmd commands outside the
    /// read-only list, BTrace runs
    #[arg(long)]
    pub allow_changes: bool,
}

/// Serves MCP on stdin/stdout until the client closes it.
pub fn run(args: &McpArgs) -> anyhow::Result<i32> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let server = JtapServer::new(args.allow_changes);
        let service = server.serve(rmcp::transport::stdio()).await?;
        service.waiting().await?;
        anyhow::Ok(0)
    })
}

/// A tool's answer: text, or an error text the client sees as a failed call.
type ToolResult = Result<String, String>;

/// A JVM to look at.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct PidParams {
    /// Pid of the target JVM (from list_jvms)
    pub pid: u32,
}

/// Parameters of `threads`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ThreadsParams {
    /// Pid of the target JVM
    pub pid: u32,
    /// How many of the busiest threads to show (default 5, 0: all)
    pub top: Option<usize>,
    /// Only threads waiting for a lock another thread holds
    pub blocked: Option<bool>,
    /// Only threads in this Java state: RUNNABLE, BLOCKED, WAITING, TIMED_WAITING
    pub state: Option<String>,
    /// Milliseconds over which CPU use is measured (default 1000, at most 10000)
    pub duration_ms: Option<u64>,
    /// Frames per thread (default 10)
    pub frames: Option<usize>,
    /// Stacks from jtap's wall-clock sampler instead of a thread dump: no safepoint; each
    /// thread's heaviest path over the interval with the share of its samples per frame; no
    /// Java states or locks (not with blocked or state)
    pub sampled: Option<bool>,
}

/// Parameters of `heap_histogram`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct HistogramParams {
    /// Pid of the target JVM
    pub pid: u32,
    /// How many classes, largest first (default 30, at most 500)
    pub top: Option<u32>,
    /// Count only live objects: runs a full GC first (needs --allow-changes)
    pub live: Option<bool>,
}

/// Parameters of `classes`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ClassesParams {
    /// Pid of the target JVM
    pub pid: u32,
    /// Class name (com.acme.Cache, or Cache), glob (com.acme.*Service) or /regex/
    pub pattern: String,
    /// Also list methods with descriptors and modifiers
    pub methods: Option<bool>,
    /// Also list fields with types and modifiers
    pub fields: Option<bool>,
    /// At most this many classes (default 50, at most 500)
    pub limit: Option<usize>,
}

/// Parameters of `profile`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ProfileParams {
    /// Pid of the target JVM
    pub pid: u32,
    /// What to sample: cpu (default), wall, alloc, lock, or several comma-separated
    pub event: Option<String>,
    /// Seconds to profile (default 10, at most 60)
    pub duration_s: Option<u64>,
    /// Lines of the text report returned (default 60)
    pub lines: Option<usize>,
}

/// Parameters of `trace`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct TraceParams {
    /// Pid of the target JVM
    pub pid: u32,
    /// Methods: pkg.Class::method, globs (com.acme.*Service::handle*), /regex/ (see classes)
    pub pattern: String,
    /// Stop after this many calls (default 20, at most 1000)
    pub count: Option<u32>,
    /// Stop after this many seconds (default 10, at most 60)
    pub duration_s: Option<u64>,
    /// Only calls at least this long, e.g. "50ms"
    pub threshold: Option<String>,
    /// Show arguments and this
    pub args: Option<bool>,
    /// Show the return value
    pub return_value: Option<bool>,
    /// Show each call's stack
    pub stack: Option<bool>,
}

/// Parameters of `monitor`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct MonitorParams {
    /// Pid of the target JVM
    pub pid: u32,
    /// Methods, as for trace
    pub pattern: String,
    /// Seconds per report interval (default 5)
    pub interval_s: Option<u64>,
    /// Seconds in all (default 10, at most 60)
    pub duration_s: Option<u64>,
}

/// Parameters of `jcmd`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct JcmdParams {
    /// Pid of the target JVM
    pub pid: u32,
    /// The command and its arguments, e.g. "VM.flags -all" or "Thread.print"
    pub command: String,
}

/// Parameters of `btrace_check`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct BtraceCheckParams {
    /// Path of a BTrace script (.java) on this machine
    pub script: String,
}

/// Parameters of `btrace_run`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct BtraceRunParams {
    /// Pid of the target JVM
    pub pid: u32,
    /// Path of a BTrace script (.java) on this machine
    pub script: String,
    /// Seconds to run (default 10, at most 60)
    pub duration_s: Option<u64>,
}

/// Parameters of `top`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct TopParams {
    /// Pid of the target JVM
    pub pid: u32,
    /// Threads to show, busiest first (default 10, at most 100)
    pub threads: Option<usize>,
    /// Seconds over which CPU use is measured (default 1, at most 10)
    pub interval_s: Option<u64>,
}

/// Parameters of `sites`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct SitesParams {
    /// Pid of the target JVM
    pub pid: u32,
    /// Seconds to sample allocations (default 10, at most 60)
    pub duration_s: Option<u64>,
    /// How many sites, most live bytes first (default 20, at most 200)
    pub top: Option<u32>,
}

/// Parameters of `convert`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ConvertParams {
    /// A recording on this machine: JFR (jtap's, the JDK's, async-profiler's), pprof or
    /// collapsed stacks
    pub input: String,
    /// Keep only these events (cpu, wall, native, alloc, lock; comma-separated)
    pub event: Option<String>,
    /// Also write this file; its extension picks the format (.html .pb.gz .jfr .collapsed ...)
    pub output: Option<String>,
    /// Lines of the text report returned (default 60)
    pub lines: Option<usize>,
}

/// Parameters of `diff`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct DiffParams {
    /// The profile to compare with (.jfr, collapsed)
    pub base: String,
    /// The newer profile
    pub new: String,
    /// Keep only this event (cpu, wall, alloc, lock)
    pub event: Option<String>,
}

/// Parameters of `inspect`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct InspectParams {
    /// Pid of the target JVM
    pub pid: u32,
    /// The class, by its full Java name (com.acme.Cache, com.acme.Outer$Inner)
    pub class: String,
    /// Show at most this many instances (default 5, at most 50)
    pub limit: Option<usize>,
    /// Show this static field of the class instead of instances
    pub static_field: Option<String>,
    /// Show only the value at this path of fields of each instance (owner, cache.map.size)
    pub path: Option<String>,
}

/// Parameters of `heap_dump`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct HeapDumpParams {
    /// Pid of the target JVM
    pub pid: u32,
    /// Where the JVM writes the .hprof file (a path in the JVM's filesystem)
    pub path: String,
}

/// The MCP server: jtap's commands as tools.
#[derive(Clone)]
pub struct JtapServer {
    allow_changes: bool,
    #[allow(dead_code)] // read by the code #[tool_handler] generates
    tool_router: ToolRouter<JtapServer>,
}

#[tool_router]
impl JtapServer {
    fn new(allow_changes: bool) -> JtapServer {
        JtapServer {
            allow_changes,
            tool_router: Self::tool_router(),
        }
    }

    /// The refusal of a tool that would change the JVM, unless changes are allowed.
    fn check_allowed(&self, what: &str) -> Result<(), String> {
        if self.allow_changes {
            return Ok(());
        }
        Err(format!(
            "refused: {what} changes the JVM; this server was started without --allow-changes \
             (restart it as `jtap mcp --allow-changes` to allow it)"
        ))
    }

    #[tool(
        description = "List the JVMs on this machine (also in containers), without attaching: pid, user, Java version, uptime, heap, main class and arguments. Start here to find a pid."
    )]
    async fn list_jvms(&self) -> ToolResult {
        blocking(Duration::from_secs(10), || {
            serde_json::to_string_pretty(&jtap_attach::list_jvms()).map_err(|e| e.to_string())
        })
        .await
    }

    #[tool(
        description = "What a JVM is: its version, uptime, command line, flags and heap (jcmd VM.version, VM.uptime, VM.command_line, VM.flags, GC.heap_info). Read-only."
    )]
    async fn vm_info(&self, Parameters(PidParams { pid }): Parameters<PidParams>) -> ToolResult {
        blocking(SLACK, move || {
            let mut vm = attach(pid)?;
            let mut text = String::new();
            for command in [
                "VM.version",
                "VM.uptime",
                "VM.command_line",
                "VM.flags",
                "GC.heap_info",
            ] {
                text.push_str(&format!("== {command}\n{}\n", jcmd(&mut vm, command)?));
            }
            Ok(text)
        })
        .await
    }

    #[tool(
        description = "The busiest threads of a JVM over an interval (CPU % from /proc), with Java names, states and stacks; threads blocked on a lock and the thread holding it; deadlocks. One thread dump (a brief safepoint), or with sampled=true none: stacks from jtap's wall-clock sampler."
    )]
    async fn threads(&self, Parameters(params): Parameters<ThreadsParams>) -> ToolResult {
        let interval = Duration::from_millis(params.duration_ms.unwrap_or(1000).clamp(1, 10_000));
        let state = params.state.map(|s| threads::parse_state(&s)).transpose()?;
        let sampled = params.sampled.unwrap_or(false);
        if sampled && (state.is_some() || params.blocked == Some(true)) {
            return Err(
                "sampled stacks have no Java states or locks: leave out blocked and state"
                    .to_string(),
            );
        }
        let args = ThreadsArgs {
            pid: params.pid,
            top: params.top.unwrap_or(5),
            blocked: params.blocked.unwrap_or(false),
            state,
            interval,
            frames: params.frames.unwrap_or(10),
            json: false,
            sampled,
        };
        blocking(interval + SLACK, move || {
            let report = threads::collect(&args, ATTACH_TIMEOUT).map_err(one_line)?;
            let mut text = Vec::new();
            threads::write_text(&report, &mut text).map_err(|e| e.to_string())?;
            Ok(String::from_utf8_lossy(&text).into_owned())
        })
        .await
    }

    #[tool(
        description = "Class histogram of a JVM's heap: instances and bytes per class, largest first (the JVM's heap inspection, as jmap -histo; a pause). live=true runs a full GC first and needs --allow-changes."
    )]
    async fn heap_histogram(&self, Parameters(params): Parameters<HistogramParams>) -> ToolResult {
        let top = params.top.unwrap_or(30).clamp(1, 500).to_string();
        let pid = params.pid.to_string();
        let mut args = vec!["heap", &pid, "-n", &top];
        if params.live.unwrap_or(false) {
            self.check_allowed("a live histogram (a full GC)")?;
            args.push("--live");
        }
        run_jtap(&args, SLACK).await
    }

    #[tool(
        description = "Loaded classes of a JVM matching a name, glob or /regex/: their class loader, the jar, directory or module they come from, and optionally their methods (with JVM descriptors and modifiers) and fields. Use it to find the exact method to trace. Read-only, no agent."
    )]
    async fn classes(&self, Parameters(params): Parameters<ClassesParams>) -> ToolResult {
        let args = ClassesArgs {
            pid: params.pid,
            pattern: params.pattern,
            methods: params.methods.unwrap_or(false),
            fields: params.fields.unwrap_or(false),
            limit: params.limit.unwrap_or(50).clamp(1, 500),
            json: false,
            names: false,
        };
        blocking(SLACK, move || {
            let report = classes::collect(&args, ATTACH_TIMEOUT).map_err(one_line)?;
            let mut text = Vec::new();
            classes::write_text(&report, &mut text).map_err(|e| e.to_string())?;
            Ok(String::from_utf8_lossy(&text).into_owned())
        })
        .await
    }

    #[tool(
        description = "Profile a JVM for a bounded time (cpu, wall, alloc, lock; jtap's agent, stopped at the end) and return the top of the text report (hottest frames, self and total) and the path of an HTML flame graph and a JFR recording."
    )]
    async fn profile(&self, Parameters(params): Parameters<ProfileParams>) -> ToolResult {
        let seconds = bounded_seconds(params.duration_s);
        let dir = output_dir()?;
        let stem = dir.join(format!("profile-{}-{}", params.pid, unique_suffix()));
        let (html, jfr, text) = (
            stem.with_extension("html"),
            stem.with_extension("jfr"),
            stem.with_extension("txt"),
        );
        let pid = params.pid.to_string();
        let event = params.event.unwrap_or_else(|| "cpu".into());
        let duration = format!("{seconds}s");
        let outputs = [&html, &jfr, &text].map(|p| p.display().to_string());
        let args = [
            "profile",
            &pid,
            "-e",
            &event,
            "-d",
            &duration,
            "-o",
            &outputs[0],
            "-o",
            &outputs[1],
            "-o",
            &outputs[2],
        ];
        run_jtap(&args, Duration::from_secs(seconds) + SLACK).await?;
        let report =
            std::fs::read_to_string(&text).map_err(|e| format!("{}: {e}", text.display()))?;
        let lines = params.lines.unwrap_or(60).max(1);
        let top: Vec<&str> = report.lines().take(lines).collect();
        Ok(format!(
            "{}\n\nflame graph: {}\nJFR recording: {}\nfull text report: {}",
            top.join("\n"),
            html.display(),
            jfr.display(),
            text.display()
        ))
    }

    #[tool(
        description = "A snapshot of a JVM like top: CPU, heap, GC counts and times, safepoints and compilations (hsperfdata), and its threads by CPU with Java names, states and top frames."
    )]
    async fn top(&self, Parameters(params): Parameters<TopParams>) -> ToolResult {
        let seconds = params.interval_s.unwrap_or(1).clamp(1, 10);
        let (pid, interval) = (params.pid.to_string(), format!("{seconds}s"));
        let threads = params.threads.unwrap_or(10).clamp(1, 100).to_string();
        let args = [
            "top",
            &pid,
            "-n",
            &threads,
            "-i",
            &interval,
            "--iterations",
            "1",
        ];
        run_jtap(&args, Duration::from_secs(seconds) + SLACK).await
    }

    #[tool(
        description = "Allocation sites of a JVM ranked by live bytes over a bounded time (sampled allocations, HPROF SITES style): class, stack, live and allocated bytes and objects."
    )]
    async fn sites(&self, Parameters(params): Parameters<SitesParams>) -> ToolResult {
        let seconds = bounded_seconds(params.duration_s);
        let (pid, duration) = (params.pid.to_string(), format!("{seconds}s"));
        let top = params.top.unwrap_or(20).clamp(1, 200).to_string();
        let args = ["sites", &pid, "-d", &duration, "-n", &top];
        run_jtap(&args, Duration::from_secs(seconds) + SLACK).await
    }

    #[tool(
        description = "Read a recording (JFR, pprof, collapsed stacks) and return the top of its text report (hottest frames); optionally also write it in another format (flame graph .html, .pb.gz, .collapsed, ...). Reads and writes files on this machine only."
    )]
    async fn convert(&self, Parameters(params): Parameters<ConvertParams>) -> ToolResult {
        let mut args = vec!["convert".to_string(), params.input];
        if let Some(event) = params.event {
            args.extend(["-e".into(), event]);
        }
        let report = run_jtap(&args, SLACK).await?;
        if let Some(output) = params.output {
            args.extend(["-o".into(), output.clone()]);
            run_jtap(&args, SLACK).await?;
        }
        let lines = params.lines.unwrap_or(60).max(1);
        Ok(report.lines().take(lines).collect::<Vec<_>>().join("\n"))
    }

    #[tool(
        description = "Compare two profiles (JFR, collapsed): the frames whose share of samples changed most, as a table."
    )]
    async fn diff(&self, Parameters(params): Parameters<DiffParams>) -> ToolResult {
        let mut args = vec!["diff".to_string(), params.base, params.new];
        if let Some(event) = params.event {
            args.extend(["-e".into(), event]);
        }
        run_jtap(&args, SLACK).await
    }

    #[tool(
        description = "Trace calls of matching methods in a JVM (bytecode instrumentation, every class restored at the end): time, thread, duration, optionally arguments, return value and stack. Bounded by a call count and a duration."
    )]
    async fn trace(&self, Parameters(params): Parameters<TraceParams>) -> ToolResult {
        let seconds = bounded_seconds(params.duration_s);
        let pid = params.pid.to_string();
        let count = params.count.unwrap_or(20).clamp(1, 1000).to_string();
        let duration = format!("{seconds}s");
        let mut args = vec![
            "trace".to_string(),
            pid,
            params.pattern,
            "-n".into(),
            count,
            "-d".into(),
            duration,
        ];
        if let Some(threshold) = params.threshold {
            args.extend(["--threshold".into(), threshold]);
        }
        for (wanted, flag) in [
            (params.args, "--args"),
            (params.return_value, "--return"),
            (params.stack, "--stack"),
        ] {
            if wanted.unwrap_or(false) {
                args.push(flag.into());
            }
        }
        run_jtap(&args, Duration::from_secs(seconds) + SLACK).await
    }

    #[tool(
        description = "Monitor matching methods of a JVM: every interval, calls, errors, mean, p50, p99 and max duration (instrumentation, restored at the end). Bounded by a duration."
    )]
    async fn monitor(&self, Parameters(params): Parameters<MonitorParams>) -> ToolResult {
        let seconds = bounded_seconds(params.duration_s);
        let interval = format!("{}s", params.interval_s.unwrap_or(5).clamp(1, seconds));
        let (pid, duration) = (params.pid.to_string(), format!("{seconds}s"));
        let args = [
            "monitor",
            &pid,
            &params.pattern,
            "-i",
            &interval,
            "-d",
            &duration,
        ];
        run_jtap(&args, Duration::from_secs(seconds) + SLACK).await
    }

    #[tool(
        description = "Run a diagnostic command (jcmd) in a JVM. Read-only commands (VM.version, VM.flags, VM.system_properties, Thread.print, GC.heap_info, VM.classloaders, ...; 'help' lists all the JVM knows) always run; any other (GC.run, GC.heap_dump, VM.set_flag, JFR.start, ...) needs --allow-changes."
    )]
    async fn jcmd(&self, Parameters(params): Parameters<JcmdParams>) -> ToolResult {
        // The JVM runs each line of a request as a command of its own: one read-only name
        // first must not carry others.
        if params.command.contains(['\n', '\r']) {
            return Err("refused: one jcmd command at a time (no line breaks)".into());
        }
        let name = params.command.split_whitespace().next().unwrap_or("help");
        if !READ_ONLY_JCMD.contains(&name) {
            self.check_allowed(&format!("jcmd {name} (not on the read-only list)"))?;
        }
        let (pid, command) = (params.pid, params.command.clone());
        blocking(SLACK, move || jcmd(&mut attach(pid)?, &command)).await
    }

    #[tool(
        description = "Compile and check a BTrace script without running it (no JVM needed): errors with file:line:col, or what it would probe."
    )]
    async fn btrace_check(&self, Parameters(params): Parameters<BtraceCheckParams>) -> ToolResult {
        run_jtap(&["btrace", "--check", &params.script], SLACK).await
    }

    #[tool(
        description = "Run a BTrace script against a JVM for a bounded time (instruments classes; restored at the end). Needs --allow-changes."
    )]
    async fn btrace_run(&self, Parameters(params): Parameters<BtraceRunParams>) -> ToolResult {
        self.check_allowed("running a BTrace script")?;
        let seconds = bounded_seconds(params.duration_s);
        let (pid, duration) = (params.pid.to_string(), format!("{seconds}s"));
        let args = ["btrace", &pid, &params.script, "-d", &duration];
        run_jtap(&args, Duration::from_secs(seconds) + SLACK).await
    }

    #[tool(
        description = "Instances of a class and their fields, or one static field, described without running any Java code (strings by contents, objects as Class@identityhash). jtap's agent walks the heap: a pause about as long as a class histogram's, and nothing changes."
    )]
    async fn inspect(&self, Parameters(params): Parameters<InspectParams>) -> ToolResult {
        let pid = params.pid.to_string();
        let limit = params.limit.unwrap_or(5).clamp(1, 50).to_string();
        let mut args = vec!["inspect", &pid, &params.class, "-n", &limit];
        if let Some(name) = &params.static_field {
            args.extend(["--static", name]);
        }
        if let Some(path) = &params.path {
            args.extend(["--path", path]);
        }
        run_jtap(&args, MAX_RUN + SLACK).await
    }

    #[tool(
        description = "Write a heap dump (.hprof) of a JVM: a long pause and a file as large as the heap. Needs --allow-changes."
    )]
    async fn heap_dump(&self, Parameters(params): Parameters<HeapDumpParams>) -> ToolResult {
        self.check_allowed("a heap dump")?;
        let pid = params.pid.to_string();
        run_jtap(&["attach", &pid, "dumpheap", &params.path], MAX_RUN + SLACK).await
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for JtapServer {
    fn get_info(&self) -> ServerConfig {
        let mode = if self.allow_changes {
            "Changes are allowed (heap dumps, full GCs, any jcmd, BTrace runs)."
        } else {
            "Read-only: tools that would change the JVM answer with a refusal."
        };
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("jtap", env!("CARGO_PKG_VERSION")))
            .with_instructions(format!(
                "jtap looks inside running HotSpot JVMs (JDK 11-25) on this machine. Find a pid \
                 with list_jvms, then use vm_info, threads, heap_histogram, classes, profile, \
                 trace or monitor. Every tool is bounded in time and output. {mode}"
            ))
    }
}

/// Runs blocking work off the async threads, with a deadline; its output bounded.
async fn blocking<F>(deadline: Duration, work: F) -> ToolResult
where
    F: FnOnce() -> ToolResult + Send + 'static,
{
    let task = tokio::task::spawn_blocking(work);
    match tokio::time::timeout(deadline, task).await {
        Ok(Ok(result)) => result.map(bounded),
        Ok(Err(e)) => Err(format!("the tool failed: {e}")),
        Err(_) => Err(format!("the tool did not finish within {deadline:?}")),
    }
}

/// Runs `jtap args...` as a child, killed at the deadline; stdout on success, else the
/// error line it printed.
fn run_jtap<S: AsRef<str>>(args: &[S], deadline: Duration) -> impl Future<Output = ToolResult> {
    let args: Vec<String> = args.iter().map(|a| a.as_ref().to_string()).collect();
    async move {
        let child = tokio::process::Command::new(own_binary()?)
            .args(&args)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output();
        let output = match tokio::time::timeout(deadline, child).await {
            Ok(output) => output.map_err(|e| format!("running jtap: {e}"))?,
            Err(_) => {
                return Err(format!(
                    "jtap {} did not finish within {deadline:?}",
                    args[0]
                ))
            }
        };
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        if output.status.success() {
            return Ok(bounded(stdout));
        }
        let stderr = String::from_utf8_lossy(&output.stderr);
        let reason = stderr
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("no reason given");
        Err(bounded(
            format!("{reason}\n{stdout}").trim_end().to_string(),
        ))
    }
}

/// This jtap's executable: `/proc/self/exe`, which still runs this build when the file was
/// replaced or deleted since the server started (`current_exe()` would then name a path that
/// is gone or holds another build).
fn own_binary() -> Result<PathBuf, String> {
    let proc_exe = PathBuf::from("/proc/self/exe");
    if proc_exe.exists() {
        return Ok(proc_exe);
    }
    std::env::current_exe().map_err(|e| format!("finding jtap itself: {e}"))
}

fn attach(pid: u32) -> Result<VirtualMachine, String> {
    VirtualMachine::attach(
        pid,
        &AttachOptions {
            timeout: ATTACH_TIMEOUT,
        },
    )
    .map_err(|e| format!("jtap: {e}"))
}

fn jcmd(vm: &mut VirtualMachine, command: &str) -> Result<String, String> {
    let mut reply = vm
        .execute(&Request::new("jcmd", [command.to_string()]))
        .map_err(|e| e.to_string())?;
    let text = reply.output_to_string().map_err(|e| e.to_string())?;
    if reply.status != 0 {
        return Err(format!("jcmd {command} failed: {}", text.trim()));
    }
    Ok(text)
}

fn one_line(err: anyhow::Error) -> String {
    let parts: Vec<String> = err.chain().map(|c| c.to_string()).collect();
    format!("jtap: {}", parts.join(": ").replace('\n', " "))
}

/// Text cut at [`MAX_OUTPUT`] characters, saying how much was left out.
fn bounded(text: String) -> String {
    if text.len() <= MAX_OUTPUT {
        return text;
    }
    let mut end = MAX_OUTPUT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n... [cut: {} more characters]",
        &text[..end],
        text.len() - end
    )
}

/// A requested duration in seconds: 10 by default, 1 to [`MAX_RUN`].
fn bounded_seconds(requested: Option<u64>) -> u64 {
    requested.unwrap_or(10).clamp(1, MAX_RUN.as_secs())
}

/// Where profiles are written: `$TMPDIR/jtap-mcp`.
fn output_dir() -> Result<PathBuf, String> {
    let dir = std::env::temp_dir().join("jtap-mcp");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(dir)
}

/// Seconds since the epoch and this process's id: names no two profiles alike in practice.
fn unique_suffix() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!("{}-{}", now.as_millis(), std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_output_is_cut_and_says_so() {
        let text = "é".repeat(MAX_OUTPUT);
        let cut = bounded(text);
        assert!(cut.len() < MAX_OUTPUT + 100);
        assert!(cut.ends_with("more characters]"));
        assert_eq!(bounded("short".into()), "short");
    }

    #[test]
    fn changing_tools_are_refused_without_the_flag() {
        assert!(JtapServer::new(false)
            .check_allowed("a heap dump")
            .unwrap_err()
            .contains("--allow-changes"));
        assert!(JtapServer::new(true).check_allowed("a heap dump").is_ok());
        assert_eq!(bounded_seconds(Some(3600)), 60);
    }
}
