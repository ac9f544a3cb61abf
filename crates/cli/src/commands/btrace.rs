//! `jtap btrace <pid> Script.java [ARGS]...`: runs a BTrace script unchanged, with no javac:
//! jtap compiles and checks it (`jtap-script`), traces the methods of each `@OnMethod`
//! handler in a tracing session of its own (the agent captures the values the handler's
//! parameters ask for), and runs the handlers here, in the client, on those values, with the
//! script's timers and `@OnExit` handlers. `--check` only compiles and checks.

use std::io::{self, Write};
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::Context;
use jtap_client::{interrupt, Conversation};
use jtap_protocol::records::Record;
use jtap_protocol::{Action, Event, Frame, Options};
use jtap_script::ast::Trigger;
use jtap_script::{compile_with, Arguments, Fired, Machine, Probes, Reader, Reading, Script};

use crate::exit;

/// `jtap btrace` arguments.
#[derive(clap::Args)]
pub struct BtraceArgs {
    /// Only compile and check the script (no JVM needed): errors as `file:line:col: message`
    #[arg(long)]
    check: bool,
    /// `<pid> SCRIPT [ARGS]...` (the arguments are what `$(n)` reads, and `NAME=VALUE` what
    /// `${NAME}` in the script's annotations stands for; after `--` when they start with
    /// `-`), `SCRIPT [ARGS]...` with --check, or `event <pid> [NAME]` to run the @OnEvent
    /// handlers of the scripts running against that JVM
    #[arg(required = true)]
    words: Vec<String>,
    /// Stop after this long (default: until the script calls exit(), Ctrl-C or the JVM's
    /// exit)
    #[arg(short, long, value_parser = crate::units::parse_duration)]
    duration: Option<Duration>,
}

/// Runs `jtap btrace`.
pub fn run(args: &BtraceArgs, timeout: Duration) -> anyhow::Result<i32> {
    if let [event, rest @ ..] = args.words.as_slice() {
        if event == "event" && !args.check {
            return send_event(rest);
        }
    }
    let (pid, file, script_args) = match (args.check, args.words.as_slice()) {
        (true, [pid, ..]) if pid.parse::<u32>().is_ok() => {
            return Err(exit::usage(
                "--check takes a script (and its arguments), no pid",
            ))
        }
        (true, [file, rest @ ..]) => (None, file, rest),
        (true, []) => return Err(exit::usage("--check takes a script")),
        (false, [pid, file, rest @ ..]) => {
            let pid = pid
                .parse::<u32>()
                .map_err(|_| exit::usage(format!("\"{pid}\" is not a pid")))?;
            (Some(pid), file, rest)
        }
        (false, _) => return Err(exit::usage("give a pid and a script (or --check SCRIPT)")),
    };
    let source =
        std::fs::read_to_string(file).with_context(|| format!("reading the script {file}"))?;
    let descriptors = |namespace: &str| probe_descriptor(Path::new(file), namespace);
    let arguments = Arguments::new(script_args);
    let script = compile_with(&source, file, &descriptors, &arguments)
        .map_err(|e| exit::usage(e.to_string()))?;
    for note in &script.notes {
        eprintln!("jtap: {file}: {note}");
    }
    let probes = Probes::of(&script, file).map_err(|e| exit::usage(e.to_string()))?;
    let Some(pid) = pid else {
        println!("{}", summary(&script, file));
        return Ok(0);
    };
    // A script of timers alone never attaches: the pid is checked first all the same.
    jtap_attach::JvmInfo::inspect(pid)?;
    // Ctrl-C ends the script: its `@OnExit` handlers run, the classes are restored.
    let _ctrl_c = interrupt::session_takes();
    Session::run(
        &script,
        file,
        script_args,
        &probes,
        pid,
        args.duration,
        timeout,
    )
}

/// What `--check` says of a script that compiles.
fn summary(script: &Script, file: &str) -> String {
    let count =
        |f: &dyn Fn(&Trigger) -> bool| script.handlers.iter().filter(|h| f(&h.trigger)).count();
    format!(
        "{file}: ok: {} probe handlers, {} timers, {} event handlers, {} exit handlers, {} error handlers, {} low-memory handlers, {} fields, {} methods",
        count(&|t| matches!(t, Trigger::Probe(_))),
        count(&|t| matches!(t, Trigger::Timer(_))),
        count(&|t| matches!(t, Trigger::Event(_))),
        count(&|t| matches!(t, Trigger::Exit)),
        count(&|t| matches!(t, Trigger::Error)),
        count(&|t| matches!(t, Trigger::LowMemory { .. })),
        script.fields.len(),
        script.methods.len()
    )
}

/// What the reader of the tracing session tells the script's loop.
enum Happened {
    /// What a record said.
    Read(Reading),
    /// The session ended (the agent's reason, or the error).
    Ended(Result<jtap_protocol::Ended, String>),
}

/// A script running against a JVM: its machine, and what its loop keeps between turns.
struct Session<'s> {
    machine: Machine<'s>,
    file: &'s str,
    pid: u32,
    started: Instant,
    duration: Option<Duration>,
    /// Handler errors, each with how often it recurred.
    failures: Vec<(String, u64)>,
    /// The timer handlers: (index, period, when next due).
    timers: Vec<(usize, Duration, Instant)>,
    /// Whether some `@OnEvent` handler listens.
    listens: bool,
    /// The tracing session ended.
    ended: bool,
    /// The first error of the tracing session.
    failure: Option<String>,
    /// The calls the handlers did not see, as the agent last reported them.
    unseen: Vec<(u64, String)>,
}

impl Session<'_> {
    /// Runs the script against JVM `pid`: its probes in a tracing session (when it has any),
    /// its timers and events here, until it exits, Ctrl-C, `duration` or the JVM's exit.
    fn run(
        script: &Script,
        file: &str,
        script_args: &[String],
        probes: &Probes,
        pid: u32,
        duration: Option<Duration>,
        timeout: Duration,
    ) -> anyhow::Result<i32> {
        let facts = JvmFacts {
            pid,
            timeout,
            properties: std::cell::OnceCell::new(),
            environment: std::cell::OnceCell::new(),
            heap_bounds: std::cell::OnceCell::new(),
        };
        let machine = Machine::new(script, file, script_args.to_vec(), Some(Box::new(facts)));
        let mut session = Session {
            machine,
            file,
            pid,
            started: Instant::now(),
            duration,
            failures: Vec::new(),
            timers: Vec::new(),
            listens: script
                .handlers
                .iter()
                .any(|h| matches!(h.trigger, Trigger::Event(_))),
            ended: false,
            failure: None,
            unseen: Vec::new(),
        };
        session.flush();
        let events_in = EventSocket::bind(pid)?;
        let conversation = open_probes(probes, pid, timeout)?;
        let stopper = conversation
            .as_ref()
            .map(Conversation::stopper)
            .transpose()?;
        session.started = Instant::now();
        session.timers = timers(script, session.started);
        let (sender, events) = mpsc::channel();
        std::thread::scope(|scope| -> anyhow::Result<i32> {
            let reader = conversation.map(|conversation| {
                let sender = sender.clone();
                scope.spawn(move || read_probes(conversation, probes, &sender))
            });
            drop(sender);
            while !session.should_stop() && session.take_arrivals(&events) {
                session.serve(&events_in);
            }
            // The probes end (classes restored); calls already traced still reach the handlers.
            if let Some(stopper) = &stopper {
                let _ = stopper.stop();
            }
            if let Some(reader) = reader {
                let _ = reader.join();
            }
            session.end(&events)
        })
    }

    /// Whether the script's loop ends: Ctrl-C, the script's exit, the end of its tracing
    /// session, its duration, or the JVM's exit.
    fn should_stop(&self) -> bool {
        interrupt::requested()
            || self.machine.exit_code().is_some()
            || self.ended
            || self.duration.is_some_and(|d| self.started.elapsed() >= d)
            || !std::path::Path::new(&format!("/proc/{}", self.pid)).exists()
    }

    /// Takes what arrived, for up to 10 ms, before the timers and events; waits at most
    /// until the next timer is due (100 ms at most) for the first. False when nothing more
    /// can happen: no probes (or their session ended), and no timer or event handler.
    fn take_arrivals(&mut self, events: &mpsc::Receiver<Happened>) -> bool {
        let wait = self
            .timers
            .iter()
            .map(|(_, _, due)| *due)
            .min()
            .map_or(Duration::from_millis(100), |due| {
                due.saturating_duration_since(Instant::now())
            })
            .min(Duration::from_millis(100));
        let busy = Instant::now();
        let mut next = events.recv_timeout(wait);
        loop {
            match next {
                Ok(happened) => self.take(happened),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    // No probes (or their session ended): timers and events go on.
                    if self.timers.is_empty() && !self.listens {
                        return false;
                    }
                    std::thread::sleep(wait);
                }
            }
            if self.ended
                || self.machine.exit_code().is_some()
                || busy.elapsed() >= Duration::from_millis(10)
            {
                return true;
            }
            match events.try_recv() {
                Ok(happened) => next = Ok(happened),
                Err(_) => return true,
            }
        }
    }

    /// Runs the handlers on what the tracing session's reader sent.
    fn take(&mut self, happened: Happened) {
        match happened {
            Happened::Read(Reading::Fired(taken)) => fire(&mut self.machine, &taken),
            Happened::Read(Reading::Unseen(calls)) => self.unseen = calls,
            Happened::Ended(result) => {
                self.ended = true;
                if let Err(e) = result {
                    self.failure.get_or_insert(e);
                }
            }
        }
    }

    /// Answers `jtap btrace event` and `jtap status`, runs the timers due, and prints what
    /// the handlers printed.
    fn serve(&mut self, events_in: &EventSocket) {
        let status = || {
            let mut text = format!("{} (jtap pid {})\n", self.file, std::process::id());
            for (name, value) in self.machine.exported() {
                text.push_str(&format!("  {name} = {value}\n"));
            }
            text
        };
        for name in events_in.received(&status) {
            if self.machine.event(name.as_deref()) == 0 {
                let shown = name.as_deref().unwrap_or("(unnamed)");
                eprintln!("jtap: no @OnEvent handler takes the event {shown}");
            }
        }
        let now = Instant::now();
        for (index, period, due) in &mut self.timers {
            if *due <= now {
                self.machine.run(*index);
                *due += *period;
            }
        }
        self.flush();
    }

    /// Once the probes ended: the calls still in flight reach the handlers, the `@OnExit`
    /// handlers run, and the calls the script missed and the recurring errors are said.
    /// Returns the script's exit code.
    fn end(mut self, events: &mpsc::Receiver<Happened>) -> anyhow::Result<i32> {
        // Calls the script missed count only while it ran to the end of the session.
        let script_ended = self.machine.exit_code().is_some();
        while let Ok(happened) = events.try_recv() {
            self.take(happened);
        }
        self.machine.finish();
        self.flush();
        if !script_ended {
            print_unseen(&self.unseen);
        }
        for (error, times) in self.failures.iter().filter(|(_, n)| *n > 1) {
            eprintln!("jtap: {times} times: {error}");
        }
        if let Some(e) = self.failure {
            return Err(anyhow::anyhow!(e));
        }
        Ok(self.machine.exit_code().unwrap_or(0))
    }

    /// Prints what the handlers printed (stdout) and their errors (stderr: each error once,
    /// and how often it recurred at the end).
    fn flush(&mut self) {
        let out = self.machine.take_output();
        if !out.is_empty() {
            let mut stdout = io::stdout().lock();
            let _ = stdout.write_all(out.as_bytes());
            let _ = stdout.flush();
        }
        for error in self.machine.take_errors() {
            match self.failures.iter_mut().find(|(e, _)| *e == error) {
                Some((_, n)) => *n += 1,
                None => {
                    eprintln!("jtap: {error}");
                    self.failures.push((error, 1));
                }
            }
        }
    }
}

/// The tracing session of the script's probes (none when it has no probe handler).
fn open_probes(
    probes: &Probes,
    pid: u32,
    timeout: Duration,
) -> anyhow::Result<Option<Conversation>> {
    if probes.is_empty() {
        return Ok(None);
    }
    let options = Options {
        action: Some(Action::Start),
        event: Some(Event::Trace),
        trace: Some(probes.plan.clone()),
        ..Options::default()
    };
    Ok(Some(Conversation::open(pid, &options, timeout)?))
}

/// The timer handlers of `script`: (index, period, first due from `started`). An
/// `@OnLowMemory` handler is one too: every 100 ms it looks at its pool, and runs when the
/// pool's usage has risen to its threshold.
fn timers(script: &Script, started: Instant) -> Vec<(usize, Duration, Instant)> {
    script
        .handlers
        .iter()
        .enumerate()
        .filter_map(|(i, h)| match h.trigger {
            Trigger::Timer(ms) => {
                let period = Duration::from_millis(ms);
                Some((i, period, started + period))
            }
            Trigger::LowMemory { .. } => Some((i, Duration::from_millis(100), started)),
            _ => None,
        })
        .collect()
}

/// Reads the probes' tracing session to its end, sending each record's firings and then the
/// end to the script's loop.
fn read_probes(conversation: Conversation, probes: &Probes, sender: &mpsc::Sender<Happened>) {
    let mut reader = Reader::new(probes);
    let ended = conversation.finish(
        &mut io::stderr(),
        Some(&mut |frame| {
            let Frame::Record(bytes) = frame else {
                return Ok(());
            };
            if let Some(happened) = Record::decode(&bytes)
                .ok()
                .and_then(|record| reader.read(record))
            {
                let _ = sender.send(Happened::Read(happened));
            }
            Ok(())
        }),
    );
    let _ = sender.send(Happened::Ended(ended.map_err(|e| e.to_string())));
}

/// The JVM's facts for `Sys.*`: system properties over the attach protocol (asked once, on
/// first use), the environment from `/proc`, the start time, CPUs and heap from `/proc` and
/// the GC's perf counters. Nothing runs in the JVM but the attach listener's own
/// `properties` operation.
struct JvmFacts {
    pid: u32,
    timeout: Duration,
    properties: std::cell::OnceCell<Vec<(String, String)>>,
    environment: std::cell::OnceCell<Vec<(String, String)>>,
    /// The heap's initial and maximum sizes (`VM.flags`).
    heap_bounds: std::cell::OnceCell<Option<(i64, i64)>>,
}

impl JvmFacts {
    /// The text the JVM answers to an attach command without arguments.
    fn ask(&self, command: &str) -> anyhow::Result<String> {
        self.ask_with(command, &[])
    }

    /// The text the JVM answers to an attach command.
    fn ask_with(&self, command: &str, args: &[&str]) -> anyhow::Result<String> {
        let mut vm = jtap_attach::VirtualMachine::attach(
            self.pid,
            &jtap_attach::AttachOptions {
                timeout: self.timeout,
            },
        )?;
        let mut reply = vm.execute(&jtap_attach::Request::new(command, args.to_vec()))?;
        Ok(reply.output_to_string()?)
    }

    /// The system properties, asked once.
    fn all_properties(&self) -> &[(String, String)] {
        self.properties.get_or_init(|| {
            let text = self.ask("properties").unwrap_or_default();
            text.lines().filter_map(java_property).collect()
        })
    }

    /// The process's environment (`/proc/<pid>/environ`), read once.
    fn all_environment(&self) -> &[(String, String)] {
        self.environment.get_or_init(|| {
            std::fs::read(format!("/proc/{}/environ", self.pid))
                .unwrap_or_default()
                .split(|&b| b == 0)
                .filter_map(|entry| {
                    let entry = String::from_utf8_lossy(entry);
                    let (k, v) = entry.split_once('=')?;
                    Some((k.to_string(), v.to_string()))
                })
                .collect()
        })
    }

    /// `InitialHeapSize` and `MaxHeapSize`, as `jcmd VM.flags` prints them.
    fn heap_bounds(&self) -> Option<(i64, i64)> {
        *self.heap_bounds.get_or_init(|| {
            let flags = self.ask_with("jcmd", &["VM.flags"]).ok()?;
            let flag = |name: &str| {
                flags.split_whitespace().find_map(|f| {
                    f.strip_prefix(&format!("-XX:{name}="))
                        .and_then(|v| v.parse::<i64>().ok())
                })
            };
            Some((flag("InitialHeapSize")?, flag("MaxHeapSize")?))
        })
    }
}

impl jtap_script::Facts for JvmFacts {
    fn property(&self, name: &str) -> Option<String> {
        self.all_properties()
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    }

    fn properties(&self) -> Vec<(String, String)> {
        self.all_properties().to_vec()
    }

    fn thread_dump(&self) -> Option<String> {
        self.ask("threaddump").ok()
    }

    fn getenv(&self, name: &str) -> Option<String> {
        self.all_environment()
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    }

    fn environment(&self) -> Vec<(String, String)> {
        self.all_environment().to_vec()
    }

    fn counter(&self, name: &str) -> Option<jtap_script::Counter> {
        // Read afresh on each call: the counters move.
        let process = jtap_attach::process::Process::open(self.pid).ok()?;
        let perf = jtap_attach::discovery::read_perf_data(&process)?;
        Some(match perf.get(name)? {
            jtap_attach::perfdata::PerfValue::Long(n) => jtap_script::Counter::Long(*n),
            jtap_attach::perfdata::PerfValue::Text(t) => jtap_script::Counter::Text(t.clone()),
        })
    }

    /// `utime` and `stime` of `/proc/<pid>/stat`, in clock ticks of 1/100 s (Linux's
    /// `USER_HZ`).
    fn cpu_time_ns(&self) -> Option<i64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid)).ok()?;
        // The fields after the command's closing parenthesis: state is field 3, utime 14.
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        let ticks = |i: usize| fields.get(i)?.parse::<i64>().ok();
        Some((ticks(11)? + ticks(12)?) * 10_000_000)
    }

    fn load_average(&self) -> Option<f64> {
        let loadavg = std::fs::read_to_string("/proc/loadavg").ok()?;
        loadavg.split_whitespace().next()?.parse().ok()
    }

    fn start_time_ms(&self) -> Option<i64> {
        let uptime = jtap_attach::process::Process::open(self.pid)
            .ok()?
            .uptime_secs()?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?
            .as_millis() as i64;
        Some(now - (uptime * 1000.0) as i64)
    }

    fn processors(&self) -> Option<i64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid)).ok()?;
        let list = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?
            .trim();
        // `0-3,6,8-9`.
        let count = list.split(',').try_fold(0i64, |n, range| {
            let (a, b) = range.split_once('-').unwrap_or((range, range));
            Some(n + b.trim().parse::<i64>().ok()? - a.trim().parse::<i64>().ok()? + 1)
        })?;
        Some(count)
    }

    fn heap(&self) -> Option<jtap_script::Heap> {
        let info = jtap_attach::JvmInfo::inspect(self.pid).ok()?;
        let committed = info.heap_committed? as i64;
        // The flags are exact; the perf counters' capacities overlap under G1, whose
        // generations each report the whole heap's.
        let (initial, max) = self
            .heap_bounds()
            .unwrap_or((committed, info.heap_max.map_or(committed, |m| m as i64)));
        Some(jtap_script::Heap {
            initial,
            used: info.heap_used? as i64,
            committed,
            max,
        })
    }

    fn pid(&self) -> i64 {
        i64::from(self.pid)
    }

    fn utc_offset_seconds(&self, epoch_secs: i64) -> i64 {
        crate::local_time::utc_offset_seconds(epoch_secs)
    }

    fn jcmd(&self, command: &[&str]) -> Result<String, String> {
        let line = command.join(" ");
        self.ask_with("jcmd", &[line.as_str()])
            .map_err(|e| e.to_string())
    }
}

/// One line of Java's properties format (`key=value`, with `\:`, `\=`, `\\` and `\uXXXX`
/// escapes), as the attach listener's `properties` prints them.
fn java_property(line: &str) -> Option<(String, String)> {
    if line.starts_with('#') {
        return None;
    }
    let unescape = |text: &str| {
        let mut out = String::new();
        let mut chars = text.chars();
        while let Some(c) = chars.next() {
            match (c, c == '\\') {
                (_, false) => out.push(c),
                (_, true) => match chars.next() {
                    Some('n') => out.push('\n'),
                    Some('t') => out.push('\t'),
                    Some('u') => {
                        let hex: String = chars.by_ref().take(4).collect();
                        if let Some(c) = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32)
                        {
                            out.push(c);
                        }
                    }
                    Some(other) => out.push(other),
                    None => {}
                },
            }
        }
        out
    };
    // The key ends at the first `=` not escaped.
    let mut escaped = false;
    let at = line.char_indices().find_map(|(i, c)| {
        let end = c == '=' && !escaped;
        escaped = c == '\\' && !escaped;
        end.then_some(i)
    })?;
    Some((unescape(&line[..at]), unescape(&line[at + 1..])))
}

/// Where a running script hears `jtap btrace event <pid> [NAME]`: a Unix socket in the
/// temporary directory named by the JVM's pid and this process's, removed at the end.
struct EventSocket {
    listener: std::os::unix::net::UnixListener,
    path: std::path::PathBuf,
}

/// What `jtap status` sends a script's event socket (no event is named so).
const STATUS_REQUEST: &str = "\u{1}status";

/// Event sockets of JVM `pid` start with this.
fn event_socket_prefix(pid: u32) -> String {
    format!(".jtap-btrace-{pid}-")
}

impl EventSocket {
    fn bind(pid: u32) -> anyhow::Result<EventSocket> {
        let path = std::env::temp_dir().join(format!(
            "{}{}",
            event_socket_prefix(pid),
            std::process::id()
        ));
        let _ = std::fs::remove_file(&path);
        let listener = std::os::unix::net::UnixListener::bind(&path)
            .with_context(|| format!("listening for events on {}", path.display()))?;
        listener.set_nonblocking(true)?;
        Ok(EventSocket { listener, path })
    }

    /// What was asked since the last call: events (a name, or None for an unnamed one),
    /// and `jtap status`'s questions, answered with `answer`.
    fn received(&self, answer: &dyn Fn() -> String) -> Vec<Option<String>> {
        use std::io::Read;
        let mut events = Vec::new();
        while let Ok((mut stream, _)) = self.listener.accept() {
            let _ = stream.set_nonblocking(false);
            let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
            let mut text = String::new();
            let _ = (&mut stream).take(1024).read_to_string(&mut text);
            if text == STATUS_REQUEST {
                let _ = stream.write_all(answer().as_bytes());
                continue;
            }
            let name = text.trim();
            events.push((!name.is_empty()).then(|| name.to_string()));
        }
        events
    }
}

impl Drop for EventSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// What the BTrace scripts running against JVM `pid` say of themselves: each one's file and
/// its `@Export`/`@Property` fields (empty when none runs).
pub fn script_statuses(pid: u32) -> Vec<String> {
    use std::io::Read;
    let prefix = event_socket_prefix(pid);
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return Vec::new();
    };
    let mut statuses = Vec::new();
    for entry in entries.flatten() {
        if !entry.file_name().to_string_lossy().starts_with(&prefix) {
            continue;
        }
        let Ok(mut stream) = std::os::unix::net::UnixStream::connect(entry.path()) else {
            continue;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
        let mut reply = String::new();
        let asked = stream.write_all(STATUS_REQUEST.as_bytes()).is_ok()
            && stream.shutdown(std::net::Shutdown::Write).is_ok()
            && stream.take(64 * 1024).read_to_string(&mut reply).is_ok();
        if asked && !reply.is_empty() {
            statuses.push(reply);
        }
    }
    statuses
}

/// `jtap btrace event <pid> [NAME]`: sends the event to every script running against the JVM.
fn send_event(words: &[String]) -> anyhow::Result<i32> {
    let (pid, name) = match words {
        [pid] => (pid, ""),
        [pid, name] => (pid, name.as_str()),
        _ => {
            return Err(exit::usage(
                "give the JVM's pid and at most one event name: jtap btrace event <pid> [NAME]",
            ))
        }
    };
    let pid: u32 = pid
        .parse()
        .map_err(|_| exit::usage(format!("\"{pid}\" is not a pid")))?;
    let prefix = event_socket_prefix(pid);
    let mut sent = 0;
    for entry in std::fs::read_dir(std::env::temp_dir())?.flatten() {
        if !entry.file_name().to_string_lossy().starts_with(&prefix) {
            continue;
        }
        match std::os::unix::net::UnixStream::connect(entry.path()) {
            Ok(mut stream) => {
                stream.write_all(name.as_bytes())?;
                sent += 1;
            }
            // Its script is gone.
            Err(_) => {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    if sent == 0 {
        anyhow::bail!("no BTrace script of this user runs against JVM {pid}");
    }
    eprintln!(
        "jtap: sent the event to {sent} script{}",
        if sent == 1 { "" } else { "s" }
    );
    Ok(0)
}

/// Runs the handlers on traced calls, until the script exits.
fn fire(machine: &mut Machine, taken: &[(usize, Fired)]) {
    for (index, fired) in taken {
        if machine.exit_code().is_some() {
            return;
        }
        machine.fire(*index, fired);
    }
}

/// Says, after what the script printed, how many calls of each method its handlers did not
/// see (what it computed misses them).
fn print_unseen(unseen: &[(u64, String)]) {
    let mut stdout = io::stdout().lock();
    for (calls, method) in unseen {
        let _ = writeln!(
            stdout,
            "jtap: {calls} calls of {method} not seen by the script: the JVM made them faster than they could be sent"
        );
    }
    let _ = stdout.flush();
}

/// The text of probe descriptor `<namespace>.xml` for the `@OnProbe` handlers of `script`:
/// next to the script, else in the current directory (BTrace's default descriptor path).
fn probe_descriptor(script: &Path, namespace: &str) -> Result<String, String> {
    let name = format!("{namespace}.xml");
    let beside = script.parent().unwrap_or(Path::new("")).join(&name);
    let text = [beside.as_path(), Path::new(&name)]
        .into_iter()
        .find_map(|path| std::fs::read_to_string(path).ok());
    text.ok_or_else(|| format!("no probe descriptor {name} beside the script or here"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_read_as_java_writes_them() {
        assert_eq!(
            java_property("java.home=/usr/lib/jvm/java-17"),
            Some(("java.home".into(), "/usr/lib/jvm/java-17".into()))
        );
        assert_eq!(
            java_property("line.separator=\\n"),
            Some(("line.separator".into(), "\n".into()))
        );
        assert_eq!(
            java_property("odd\\=key=C\\:\\\\x \\u00e9"),
            Some(("odd=key".into(), "C:\\x é".into()))
        );
        assert_eq!(java_property("#Tue Nov 24"), None);
    }
}
