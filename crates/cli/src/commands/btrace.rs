//! `jtap btrace <pid> Script.java [ARGS]...`: runs a BTrace script unchanged, with no javac:
//! jtap compiles and checks it (`jtap-script`), traces the methods of each `@OnMethod`
//! handler in a tracing session of its own (the agent captures the values the handler's
//! parameters ask for), and runs the handlers here, in the client, on those values, with the
//! script's timers and `@OnExit` handlers. `--check` only compiles and checks. The JFR
//! events it commits are printed, or with `--jfr` written to a recording (`jfr`).

mod facts;
mod jfr;

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::Context;
use jtap_client::{interrupt, Conversation};
use jtap_protocol::records::Record;
use jtap_protocol::{Action, Event, Frame, Options};
use jtap_script::ast::{Period, Trigger};
use jtap_script::preprocess;
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
    /// Where `#include "file"` looks (repeatable), before the script's own directory: a
    /// script with #include or #define goes through BTrace's preprocessor first
    #[arg(short = 'I', long = "include", value_name = "DIR")]
    include: Vec<PathBuf>,
    /// Write the JFR events the script commits (its @Event and @PeriodicEvent types) to
    /// this JFR file (default: one line each on stdout)
    #[arg(long, value_name = "FILE")]
    jfr: Option<PathBuf>,
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
    let mut source =
        std::fs::read_to_string(file).with_context(|| format!("reading the script {file}"))?;
    if preprocess::has_directives(&source) {
        let mut dirs = args.include.clone();
        let own = Path::new(file)
            .parent()
            .filter(|dir| !dir.as_os_str().is_empty());
        dirs.push(own.unwrap_or(Path::new(".")).to_path_buf());
        source = preprocess::preprocess(&source, &dirs)
            .map_err(|e| exit::usage(format!("{file}:{}:1: {}", e.line, e.message)))?;
    }
    let descriptors = |namespace: &str| probe_descriptor(Path::new(file), namespace);
    let arguments = Arguments::new(script_args);
    let script = compile_with(&source, file, &descriptors, &arguments)
        .map_err(|e| exit::usage(e.to_string()))?;
    for note in &script.notes {
        eprintln!("jtap: {file}: {note}");
    }
    let probes = Probes::of(&script, file).map_err(|e| exit::usage(e.to_string()))?;
    if args.jfr.is_some() && (pid.is_none() || script.events.is_empty()) {
        return Err(exit::usage(format!(
            "--jfr writes the JFR events a running script declares (@Event, @PeriodicEvent): {file} {}",
            if pid.is_none() { "is only checked" } else { "declares none" }
        )));
    }
    let Some(pid) = pid else {
        println!("{}", summary(&script, file));
        return Ok(0);
    };
    // A script of timers alone never attaches: the pid is checked first all the same.
    jtap_attach::JvmInfo::inspect(pid)?;
    // Ctrl-C ends the script: its `@OnExit` handlers run, the classes are restored.
    let _ctrl_c = interrupt::session_takes();
    Session::run(&script, file, script_args, &probes, pid, args, timeout)
}

/// What `--check` says of a script that compiles.
fn summary(script: &Script, file: &str) -> String {
    let count =
        |f: &dyn Fn(&Trigger) -> bool| script.handlers.iter().filter(|h| f(&h.trigger)).count();
    format!(
        "{file}: ok: {} probe handlers, {} timers, {} event handlers, {} exit handlers, {} error handlers, {} low-memory handlers, {} JFR event types ({} periodic), {} fields, {} methods",
        count(&|t| matches!(t, Trigger::Probe(_))),
        count(&|t| matches!(t, Trigger::Timer(_))),
        count(&|t| matches!(t, Trigger::Event(_))),
        count(&|t| matches!(t, Trigger::Exit)),
        count(&|t| matches!(t, Trigger::Error)),
        count(&|t| matches!(t, Trigger::LowMemory { .. })),
        script.events.len(),
        count(&|t| matches!(t, Trigger::Periodic { .. })),
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
    /// `--jfr`: where the committed JFR events go.
    events_out: Option<jfr::EventFile>,
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
        args: &BtraceArgs,
        timeout: Duration,
    ) -> anyhow::Result<i32> {
        let facts = facts::JvmFacts::new(pid, timeout);
        let mut machine = Machine::new(script, file, script_args.to_vec(), Some(Box::new(facts)));
        let events_out = match &args.jfr {
            Some(path) => Some(jfr::EventFile::create(path, script)?),
            None => None,
        };
        if events_out.is_some() {
            machine.record_events();
        }
        let mut session = Session {
            machine,
            file,
            pid,
            started: Instant::now(),
            duration: args.duration,
            failures: Vec::new(),
            timers: Vec::new(),
            listens: script
                .handlers
                .iter()
                .any(|h| matches!(h.trigger, Trigger::Event(_))),
            ended: false,
            failure: None,
            unseen: Vec::new(),
            events_out,
        };
        session.machine.chunk_events(true);
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
        self.machine.chunk_events(false);
        self.machine.finish();
        self.flush();
        if let Some(events_out) = self.events_out.take() {
            match events_out.finish() {
                Ok(written) => eprintln!("jtap: {written}"),
                Err(e) => {
                    self.failure.get_or_insert(format!("{e:#}"));
                }
            }
        }
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
        if let Some(events_out) = &mut self.events_out {
            if let Err(e) = events_out.add(self.machine.take_events()) {
                self.failure.get_or_insert(format!("{e:#}"));
            }
        }
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
/// pool's usage has risen to its threshold; so is a `@PeriodicEvent` handler with a period.
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
            Trigger::Periodic {
                period: Period::Every(ms),
                ..
            } => {
                let period = Duration::from_millis(ms);
                Some((i, period, started + period))
            }
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
