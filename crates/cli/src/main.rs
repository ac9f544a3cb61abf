//! `jtap`: look inside a running HotSpot JVM with one binary and no JDK tools.

#![deny(clippy::undocumented_unsafe_blocks)]

mod commands;
mod exit;
mod local_time;
mod units;

use std::time::Duration;

use clap::{CommandFactory, Parser, Subcommand};
use clap_complete::Shell;

#[derive(Parser)]
#[command(
    name = "jtap",
    version,
    about = "Look inside a running HotSpot JVM: attach, profile, heap, trace",
    long_about = "Look inside a running HotSpot JVM (JDK 11 to 25, Linux) with one binary and no JDK tools.\n\n\
                  Works on JVMs in containers (other pid/mount namespaces) and, as root, on JVMs of other users.",
    after_help = "Exit codes: 0 success; the JVM's status for attach operations; 2 usage; 10 no such process; \
                  11 not a JVM; 12 permission denied; 13 attach disabled; 14 listener timeout; 15 stale socket; \
                  16 insecure socket; 17 unsupported request; 18 protocol error; 19 I/O error; \
                  20 agent load failed; 21 agent version mismatch; 22 dynamic agent loading disabled; \
                  23 agent command failed; 24 agent channel error; 130 interrupted."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List the JVMs visible to you, without attaching (like jps, with more)
    Ps {
        /// Print JSON instead of a table
        #[arg(long)]
        json: bool,
    },
    /// Send one raw HotSpot attach operation and print the JVM's reply (like jattach)
    #[command(
        after_help = "Operations: load, properties, agentProperties, datadump, threaddump, dumpheap, \
                            inspectheap, setflag, printflag, jcmd (and any other the JVM knows).\n\
                            Examples:\n  jtap attach 1234 properties\n  jtap attach 1234 threaddump\n  \
                            jtap attach 1234 printflag HeapDumpOnOutOfMemoryError\n  \
                            jtap attach 1234 setflag HeapDumpOnOutOfMemoryError 1\n  \
                            jtap attach 1234 dumpheap /tmp/heap.hprof\n  \
                            jtap attach 1234 load /path/libagent.so true options\n\n\
                            Exits with the JVM's status code (for load: the agent's return code)."
    )]
    Attach {
        /// Pid of the target JVM (as seen from here, also for JVMs in containers)
        pid: u32,
        /// The attach operation
        operation: String,
        /// The operation's arguments (more than 3, or longer than 1024 bytes, need JDK 24+)
        args: Vec<String>,
        #[command(flatten)]
        attach: AttachArgs,
    },
    /// Run a diagnostic command (jcmd) in a JVM: `jtap jcmd 1234 Thread.print -l`
    #[command(
        after_help = "`jtap jcmd <pid> help` lists the commands the JVM offers; \
                            `jtap jcmd <pid> help <command>` describes one."
    )]
    Jcmd {
        /// Pid of the target JVM
        pid: u32,
        /// The command and its arguments, as jcmd takes them
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
        #[command(flatten)]
        attach: AttachArgs,
    },
    /// Send options to jtap's agent in a JVM (loading it if needed), or launch a JVM with it
    #[command(
        after_help = "Options (comma-separated): start,event=gc | stop | status | dump | version | help, \
                            file=<path>, log=<path>, debug. Examples:\n  jtap load 1234 status\n  \
                            jtap load 1234 start,event=gc   (runs until Ctrl-C or `jtap load 1234 stop`)\n  \
                            jtap load start,event=gc -- java -jar app.jar"
    )]
    Load {
        /// `<pid> [options]`, or only `[options]` when launching a JVM after `--`
        #[arg(num_args = 0..=2)]
        args: Vec<String>,
        /// A java command line to launch with the agent
        #[arg(last = true)]
        java: Vec<String>,
        #[command(flatten)]
        attach: AttachArgs,
    },
    /// Show the state of jtap's agent in a JVM (loading the agent if it is not there yet)
    Status {
        /// Pid of the target JVM
        pid: u32,
        #[command(flatten)]
        attach: AttachArgs,
    },
    /// Class histogram: instances and bytes per class, largest first (the JVM's heap inspection)
    #[command(
        after_help = "The JVM computes the histogram (the attach operation inspectheap, as jcmd \
                            GC.class_histogram does) and pauses while it runs. Without --live, \
                            unreachable objects not yet collected are counted too. --walk: jtap's \
                            agent walks the heap with JVMTI instead (a longer pause; the full GC's \
                            and the walk's pauses reported apart)."
    )]
    Heap {
        /// Pid of the target JVM
        pid: u32,
        /// Count only live objects: run a full GC first
        #[arg(long)]
        live: bool,
        /// Print the N largest classes by bytes (0: all)
        #[arg(short = 'n', long = "top", default_value_t = 30)]
        top: u32,
        /// Print JSON instead of a table
        #[arg(long)]
        json: bool,
        /// Walk the heap with jtap's agent (JVMTI) instead of the JVM's heap inspection
        #[arg(long)]
        walk: bool,
        #[command(flatten)]
        attach: AttachArgs,
    },
    /// Check and list what the class-file engine does to classes (round trip, instrumentation)
    Bytecode {
        #[command(subcommand)]
        command: commands::bytecode::BytecodeCommand,
    },
    /// Profile a JVM: CPU, wall-clock, allocations and locks, several at once, into flame graphs, pprof, ...
    #[command(
        after_help = "Examples:\n  jtap profile 1234                      (cpu, 30 s, text report)\n  \
                            jtap profile 1234 -d 10s -o flame.html\n  \
                            jtap profile 1234 -e wall --threads -o wall.collapsed\n  \
                            jtap profile 1234 -e cpu,alloc,lock --wall 20ms -o app.html   (several events in one page)\n  \
                            jtap profile start 1234 -e itimer; jtap profile dump 1234 -o now.pb.gz; jtap profile stop 1234\n  \
                            jtap profile -o app.html -- java -jar app.jar\n\n\
                            Output format: --format, else the -o file's extension (.html .pb.gz .jfr \
                            .speedscope.json .collapsed .txt), else a text report on stdout."
    )]
    Profile {
        #[command(flatten)]
        profile: Box<commands::profile::ProfileArgs>,
        #[command(flatten)]
        attach: AttachArgs,
    },
    /// Convert a recording (JFR from jtap, the JDK or async-profiler; collapsed stacks) into
    /// flame graphs, pprof, JFR, ...
    #[command(after_help = "Examples:\n  jtap convert app.jfr -o app.html\n  \
                            jtap convert app.jfr -e alloc --from 30s --to 60s -o alloc.pb.gz\n  \
                            jtap convert app.jfr --threads -I 'com\\.acme\\.' -o acme.collapsed")]
    Convert {
        #[command(flatten)]
        args: Box<commands::convert::ConvertArgs>,
    },
    /// Compare two profiles (JFR, collapsed): a differential flame graph, or the frames whose
    /// share changed most
    #[command(
        after_help = "Examples:\n  jtap diff before.jfr after.jfr                 (table on stdout)\n  \
                            jtap diff before.jfr after.jfr -e alloc -o diff.html"
    )]
    Diff {
        #[command(flatten)]
        args: Box<commands::diff::DiffArgs>,
    },
    /// Allocation sites ranked by live bytes (HPROF-style SITES report from heap sampling)
    #[command(
        after_help = "Samples allocations for the duration (JVMTI SampledObjectAlloc, every --alloc-interval \
                            bytes on average), tracks which sampled objects are still alive, and reports per \
                            (class, stack): live and allocated bytes and objects (estimated), % self, % accum. \
                            With --exact every allocation is recorded and the counts are exact."
    )]
    Sites {
        /// Pid of the target JVM
        pid: u32,
        #[command(flatten)]
        args: commands::sites::SitesArgs,
        #[command(flatten)]
        attach: AttachArgs,
    },
    /// Leak suspects: allocation sites whose objects survive collections, with paths from GC roots
    #[command(
        after_help = "The same as `jtap sites --leaks`: samples allocations for the duration, then ranks \
                            the sites whose sampled objects are still alive after surviving --min-age \
                            collections (default 2) by those objects' bytes, with their growth, between \
                            how many collections they were born and the oldest's age; for the first three \
                            suspects, the paths from a GC root to two of their oldest objects (a walk of the \
                            heap at the end, which pauses the application as a heap dump does)."
    )]
    Leaks {
        /// Pid of the target JVM
        pid: u32,
        #[command(flatten)]
        args: commands::sites::SitesArgs,
        #[command(flatten)]
        attach: AttachArgs,
    },
    /// Print each call of matching methods: time, thread, method, duration (args, return, stack)
    #[command(
        after_help = "Patterns: pkg.Class::method, pkg.Class (every method), globs (com.example.*Service::handle*), \
                            /regex/ for class and method (/com\\.acme\\..*/::/get.*/), +pkg.Interface for every \
                            implementation or subclass, an optional JVM descriptor (Foo::bar(Ljava/lang/String;)V).\n\
                            Examples:\n  jtap trace 1234 'com.acme.*Service::handle*' --threshold 100ms --stack\n  \
                            jtap trace 1234 com.acme.Cache::get --args --return -n 20\n  \
                            jtap trace stop 1234\n  jtap trace com.acme.Main::run -d 10s -- java -jar app.jar\n\n\
                            Ending the trace (Ctrl-C, -n, -d, jtap's exit) restores every class to its original bytes."
    )]
    Trace {
        #[command(flatten)]
        args: commands::trace::TraceArgs,
        #[command(flatten)]
        attach: AttachArgs,
    },
    /// For each call of an entry method, a tree of the calls inside it with their times
    #[command(
        after_help = "Each node: <offset ms from entry start> [<total ms> (<self ms>), <% of parent>, <% of root>] - <method>.\n\
                            Examples:\n  jtap calltree 1234 com.acme.Api::handle --depth 3 -n 5\n  \
                            jtap calltree 1234 com.acme.Api::handle --inner 'com.acme.*::*' --threshold 50ms"
    )]
    Calltree {
        #[command(flatten)]
        args: commands::trace::CalltreeArgs,
        #[command(flatten)]
        attach: AttachArgs,
    },
    /// Every interval, calls, errors, mean, p50, p99 and max duration of matching methods
    Monitor {
        #[command(flatten)]
        args: commands::trace::MonitorArgs,
        #[command(flatten)]
        attach: AttachArgs,
    },
    /// Run a BTrace script unchanged, with no javac: jtap compiles and checks it, traces
    /// what its @OnMethod handlers probe and runs the handlers on the captured values
    #[command(
        after_help = "The script's code never runs in the JVM: the agent captures the values the handlers' \
                            parameters ask for (class and method names, duration, arguments, this, return value, \
                            exception, stack) and jtap runs the handlers. Ending the script (exit(), Ctrl-C, -d, the \
                            JVM's exit) restores every class; @OnExit handlers run last.\n\
                            Examples:\n  jtap btrace 1234 Tracker.java\n  jtap btrace 1234 Histogram.java 100 -d 30s\n  \
                            jtap btrace --check Tracker.java"
    )]
    Btrace {
        #[command(flatten)]
        args: commands::btrace::BtraceArgs,
        #[command(flatten)]
        attach: AttachArgs,
    },
    /// The busiest threads over an interval with their stacks, blocked threads and who
    /// holds their lock, deadlocks
    #[command(
        after_help = "CPU use comes from /proc (no pause); names, states, stacks and locks from one \
                            thread dump (as jstack -l: a safepoint).\n\
                            Examples:\n  jtap threads 1234 -n 3\n  jtap threads 1234 --blocked\n  \
                            jtap threads 1234 --state RUNNABLE -d 5s --frames 20"
    )]
    Threads {
        #[command(flatten)]
        args: commands::threads::ThreadsArgs,
        #[command(flatten)]
        attach: AttachArgs,
    },
    /// Loaded classes matching a pattern, their loader and jar or module, and their methods
    /// and fields with descriptors and modifiers
    #[command(
        after_help = "Patterns: a name (com.acme.Cache, or Cache in any package), a glob \
                            (com.acme.*Service), or /regex/. No agent is loaded: the classes come \
                            from jcmd VM.classloaders, their members from the class files on the \
                            JVM's class path or in its runtime image.\n\
                            Examples:\n  jtap classes 1234 'com.acme.*Service' --methods\n  \
                            jtap classes 1234 java.lang.String --fields"
    )]
    Classes {
        #[command(flatten)]
        args: commands::classes::ClassesArgs,
        #[command(flatten)]
        attach: AttachArgs,
    },
    /// Instances of a class and their fields, or a static field, described without running
    /// any Java code
    #[command(
        after_help = "jtap's agent walks the heap (JVMTI, filtered to the class: a pause, reported), \
                            tags the first -n instances and reads their fields with JNI. No heap \
                            dump, no full GC.\n\
                            Examples:\n  jtap inspect 1234 com.acme.Cache -n 3\n  \
                            jtap inspect 1234 com.acme.Cache --path map.size\n  \
                            jtap inspect 1234 com.acme.Config --static INSTANCE"
    )]
    Inspect {
        #[command(flatten)]
        args: commands::inspect::InspectArgs,
        #[command(flatten)]
        attach: AttachArgs,
    },
    /// A refreshed view of a JVM: hottest methods, heap, GC, safepoints, compilations and its
    /// threads by CPU
    #[command(
        after_help = "Each refresh reads /proc and hsperfdata (no pause); Java thread names and \
                            states come from a thread dump (a brief safepoint) every --dump-every. \
                            On a terminal, a live view with a rolling profile (the agent) and keys: \
                            s/t sort, p pause, e event, enter stack, w flame graph, q quit. \
                            Otherwise blocks of lines, without the agent.\n\
                            Examples:\n  jtap top 1234\n  jtap top 1234 -n 5 -i 2s --iterations 3 | less"
    )]
    Top {
        #[command(flatten)]
        args: commands::top::TopArgs,
        #[command(flatten)]
        attach: AttachArgs,
    },
    /// A Model Context Protocol server on stdio: jtap's read-only commands as tools for AI
    /// assistants
    #[command(
        after_help = "Tools: list_jvms, vm_info, top, threads, heap_histogram, classes, profile, \
                            sites, trace, monitor, jcmd, btrace_check, convert, diff; inspect, \
                            heap_dump and btrace_run. Each is bounded in time and output. Tools \
                            that would change the JVM (heap dumps, full GCs, jcmd commands outside \
                            a read-only list, BTrace runs) are refused unless started with \
                            --allow-changes.\n\
                            Example client entry: {\"command\": \"jtap\", \"args\": [\"mcp\"]}"
    )]
    Mcp {
        #[command(flatten)]
        args: commands::mcp::McpArgs,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell); bash's also
    /// completes a running JVM's class and method names after trace, monitor, calltree,
    /// inspect and classes PID
    Completions {
        /// The shell to complete for
        shell: Shell,
    },
}

#[derive(clap::Args)]
struct AttachArgs {
    /// How long to wait for the JVM's attach listener to start (e.g. 5s, 500ms)
    #[arg(long, global = true, default_value = "5s", value_parser = units::parse_duration)]
    timeout: Duration,
}

fn main() {
    exit::die_quietly_on_closed_pipes();
    jtap_client::interrupt::install(exit::INTERRUPTED);
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { exit::USAGE } else { 0 };
            let _ = e.print();
            std::process::exit(code);
        }
    };
    let result = match cli.command {
        Command::Ps { json } => commands::ps::run(json),
        Command::Attach {
            pid,
            operation,
            args,
            attach,
        } => commands::attach::run(pid, &operation, &args, attach.timeout),
        Command::Jcmd {
            pid,
            command,
            attach,
        } => commands::attach::jcmd(pid, &command, attach.timeout),
        Command::Load { args, java, attach } => commands::agent::load(&args, &java, attach.timeout),
        Command::Status { pid, attach } => commands::agent::status(pid, attach.timeout),
        Command::Heap {
            pid,
            live,
            top,
            json,
            walk,
            attach,
        } => commands::heap::run(pid, live, top, json, walk, attach.timeout),
        Command::Sites { pid, args, attach } => commands::sites::run(pid, &args, attach.timeout),
        Command::Leaks {
            pid,
            mut args,
            attach,
        } => {
            args.leaks = true;
            commands::sites::run(pid, &args, attach.timeout)
        }
        Command::Bytecode { command } => commands::bytecode::run(command),
        Command::Convert { args } => commands::convert::run(&args),
        Command::Diff { args } => commands::diff::run(&args),
        Command::Profile { profile, attach } => commands::profile::run(*profile, attach.timeout),
        Command::Trace { args, attach } => commands::trace::trace(args, attach.timeout),
        Command::Calltree { args, attach } => commands::trace::calltree(args, attach.timeout),
        Command::Monitor { args, attach } => commands::trace::monitor(args, attach.timeout),
        Command::Btrace { args, attach } => commands::btrace::run(&args, attach.timeout),
        Command::Threads { args, attach } => commands::threads::run(&args, attach.timeout),
        Command::Classes { args, attach } => commands::classes::run(&args, attach.timeout),
        Command::Inspect { args, attach } => commands::inspect::run(&args, attach.timeout),
        Command::Top { args, attach } => commands::top::run(&args, attach.timeout),
        Command::Mcp { args } => commands::mcp::run(&args),
        Command::Completions { shell } => commands::completions::run(shell, &mut Cli::command()),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(err) => {
            eprintln!("jtap: {}", one_line(&err));
            std::process::exit(exit::code_for(&err));
        }
    }
}

/// The error and its causes on one line.
fn one_line(err: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
    }
    parts.join(": ").replace('\n', " ")
}
