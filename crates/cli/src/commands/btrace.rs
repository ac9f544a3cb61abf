//! `jtap btrace <pid> Script.java [ARGS]...`: runs a BTrace script unchanged, with no javac:
//! jtap compiles and checks it (`jtap-script`), traces the methods of each `@OnMethod`
//! handler in a tracing session of its own (the agent captures the values the handler's
//! parameters ask for), and runs the handlers here, in the client, on those values, with the
//! script's timers and `@OnExit` handlers. `--check` only compiles and checks.

use std::collections::HashMap;
use std::io::{self, Write};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::Context;
use jtap_protocol::records::{
    BatchProbe, BatchThread, Call, CallBatch, Callee, Outcome, Point, Reached, Record, Reported,
};
use jtap_protocol::trace::{CallSites, FieldSites, Guarded, MethodPattern, Mode, Plan, PointKind};
use jtap_protocol::{Action, Event, Frame, Options};
use jtap_script::ast::{Handler, Role, Trigger};
use jtap_script::{compile, Fired, Location, Machine, Script};

use crate::exit;
use jtap_client::{interrupt, Conversation};

/// `jtap btrace` arguments.
#[derive(clap::Args)]
pub struct BtraceArgs {
    /// Only compile and check the script (no JVM needed): errors as `file:line:col: message`
    #[arg(long)]
    check: bool,
    /// `<pid> SCRIPT [ARGS]...` (the arguments are what `$(n)` reads; after `--` when they
    /// start with `-`), `SCRIPT` with --check, or `event <pid> [NAME]` to run the @OnEvent
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
        (true, [file]) => (None, file, &[][..]),
        (true, _) => return Err(exit::usage("--check takes one script and no pid")),
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
    let script = compile(&source, file).map_err(|e| exit::usage(e.to_string()))?;
    let probes = probes(&script, file)?;
    let Some(pid) = pid else {
        println!("{}", summary(&script, file));
        return Ok(0);
    };
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
        "{file}: ok: {} probe handlers, {} timers, {} event handlers, {} exit handlers, {} error handlers, {} fields, {} methods",
        count(&|t| matches!(t, Trigger::Probe(_))),
        count(&|t| matches!(t, Trigger::Timer(_))),
        count(&|t| matches!(t, Trigger::Event(_))),
        count(&|t| matches!(t, Trigger::Exit)),
        count(&|t| matches!(t, Trigger::Error)),
        script.fields.len(),
        script.methods.len()
    )
}

/// The `@OnMethod` handlers: which calls each takes, and the one tracing plan that captures
/// what all of them need (the agent runs one tracing session per JVM).
struct Probes {
    /// Per handler (by index): its methods, location and threshold.
    handlers: Vec<(usize, Selector)>,
    /// What the agent traces and captures.
    plan: Plan,
}

/// Which traced calls a handler takes.
struct Selector {
    class: Option<regex::Regex>,
    method: Option<regex::Regex>,
    descriptor: Option<String>,
    location: Location,
    /// At `Kind.CALL`: the called methods; at `Kind.NEW`: the classes allocated.
    target: Option<TargetSelector>,
    threshold: Option<Duration>,
}

/// The called methods a `Kind.CALL` handler takes, or the classes a `Kind.NEW` one does.
struct TargetSelector {
    class: regex::Regex,
    method: Option<regex::Regex>,
    descriptor: Option<String>,
}

impl Selector {
    fn takes(&self, call: &Call) -> bool {
        let threw = matches!(call.outcome, Outcome::Threw(_));
        let location = match (self.location, &call.callee, &self.target) {
            (Location::Return, None, _) => !threw,
            (Location::Error, None, _) => threw,
            // Before a call: every call, but constructors (as BTrace, which cannot pass the
            // object before its constructor ran).
            (Location::Call { after: false }, Some(callee), Some(wanted)) => {
                callee.method != "<init>" && wanted.takes(callee)
            }
            (Location::Call { after: true }, Some(callee), Some(wanted)) => {
                !threw && wanted.takes(callee)
            }
            _ => false,
        };
        location
            && self.takes_method(&call.class, &call.method, &call.descriptor)
            && self
                .threshold
                .is_none_or(|t| call.duration_ns >= t.as_nanos() as u64)
    }

    /// Whether a `Kind.ENTRY`, `LINE`, `NEW` or `SYNC_*` handler takes a point reached.
    fn takes_point(&self, reached: &Reached) -> bool {
        let location = match (self.location, &reached.point) {
            (Location::Entry, Point::Entry) => true,
            (Location::Line(None), Point::Line(_)) => true,
            (Location::Line(Some(wanted)), Point::Line(line)) => wanted == *line,
            (Location::New { .. }, Point::New(class))
            | (Location::NewArray { .. }, Point::NewArray { element: class, .. }) => {
                self.target.as_ref().is_none_or(|t| t.class.is_match(class))
            }
            (Location::Sync { exit: false }, Point::SyncEnter(_)) => true,
            (Location::Sync { exit: true }, Point::SyncExit(_)) => true,
            (Location::Field { write: false, .. }, Point::FieldGet(access))
            | (Location::Field { write: true, .. }, Point::FieldSet(access)) => self
                .target
                .as_ref()
                .is_none_or(|t| t.takes_field(&access.field)),
            _ => false,
        };
        location && self.takes_method(&reached.class, &reached.method, &reached.descriptor)
    }

    fn takes_method(&self, class: &str, method: &str, descriptor: &str) -> bool {
        self.class.as_ref().is_none_or(|re| re.is_match(class))
            && self.method.as_ref().is_none_or(|re| re.is_match(method))
            && self.descriptor.as_deref().is_none_or(|d| d == descriptor)
    }
}

impl TargetSelector {
    /// Whether it selects `field`, `pkg.Class.field`.
    fn takes_field(&self, field: &str) -> bool {
        let (class, name) = field.rsplit_once('.').unwrap_or(("", field));
        self.class.is_match(class) && self.method.as_ref().is_none_or(|re| re.is_match(name))
    }

    fn takes(&self, callee: &Callee) -> bool {
        self.class.is_match(&callee.class)
            && self
                .method
                .as_ref()
                .is_none_or(|re| re.is_match(&callee.method))
            && self
                .descriptor
                .as_ref()
                .is_none_or(|d| d == &callee.descriptor)
    }
}

fn probes(script: &Script, file: &str) -> anyhow::Result<Probes> {
    let mut probes = Probes {
        handlers: Vec::new(),
        plan: Plan {
            mode: Mode::Trace,
            // Every call of a hot method reaches the handlers (those carrying values one
            // by one), and the agent says how many it reported.
            batches: true,
            ..Plan::default()
        },
    };
    let mut thresholds = Vec::new();
    let (mut lines, mut every_line) = (Vec::new(), false);
    for (index, handler) in script.handlers.iter().enumerate() {
        let Trigger::Probe(probe) = &handler.trigger else {
            continue;
        };
        let at = handler.method.at;
        let located = |e: String| exit::usage(format!("{file}:{}:{}: {e}", at.line, at.col));
        let pattern =
            method_pattern(&probe.class, &probe.method, &probe.descriptor).map_err(located)?;
        let target = probe
            .target
            .as_ref()
            .map(|c| method_pattern(&c.class, &c.method, &c.descriptor))
            .transpose()
            .map_err(located)?;
        if let Some(callee) = target.as_ref().filter(|t| t.subtypes) {
            return Err(located(format!(
                "clazz = \"+{}\" in a @Location is not supported: a call site names the method as its code refers to it; name the class or interface itself, or a /regex/",
                callee.class
            )));
        }
        let roles: Vec<&Role> = handler.method.params.iter().map(|p| &p.role).collect();
        let plan = &mut probes.plan;
        // At allocations `@Return` is the object allocated, which the agent describes with
        // the values.
        let allocated = matches!(
            probe.location,
            Location::New { .. } | Location::NewArray { .. }
        ) && roles.contains(&&Role::Return);
        plan.values |= allocated
            || roles.iter().any(|r| {
                matches!(
                    r,
                    Role::Arg(_) | Role::AllArgs | Role::This | Role::TargetInstance
                )
            });
        // At calls the arguments are the called method's.
        plan.callee_values |= matches!(probe.location, Location::Call { .. })
            && roles
                .iter()
                .any(|r| matches!(r, Role::Arg(_) | Role::AllArgs | Role::TargetInstance));
        plan.returns |= !allocated && roles.contains(&&Role::Return);
        // Error and before-call handlers take calls that throw.
        plan.exceptions |= matches!(
            probe.location,
            Location::Error | Location::Call { after: false }
        );
        plan.stack |= handler.uses_stack;
        plan.sizes |= handler.uses_sizes;
        let threshold = threshold(handler);
        thresholds.push(threshold);
        let regex = |p: &jtap_protocol::trace::NamePattern| regex::Regex::new(&p.to_regex()).ok();
        probes.handlers.push((
            index,
            Selector {
                // A `+Super` pattern's classes are known to the agent only.
                class: (!pattern.subtypes).then(|| regex(&pattern.class)).flatten(),
                method: pattern.method.as_ref().and_then(regex),
                descriptor: pattern.descriptor.clone(),
                location: probe.location,
                target: target.as_ref().and_then(|c| {
                    Some(TargetSelector {
                        class: regex(&c.class)?,
                        method: c.method.as_ref().and_then(regex),
                        descriptor: c.descriptor.clone(),
                    })
                }),
                threshold,
            },
        ));
        match (probe.location, target) {
            (Location::Call { .. }, Some(callee)) => plan.call_sites.push(CallSites {
                host: pattern,
                callee,
            }),
            (Location::Entry, _) => {
                plan.points.push((PointKind::Entry, pattern));
                if let Some(guard) = handler.argument_guard() {
                    plan.guards
                        .push((Guarded::Point(plan.points.len() - 1), guard));
                }
            }
            (Location::Line(line), _) => {
                plan.points.push((PointKind::Line, pattern));
                match line {
                    Some(line) => lines.push(line),
                    None => every_line = true,
                }
            }
            (Location::New { .. } | Location::NewArray { .. }, _) => {
                plan.points.push((PointKind::New, pattern))
            }
            (Location::Sync { .. }, _) => plan.points.push((PointKind::Sync, pattern)),
            (Location::Field { write, .. }, Some(field)) => plan.field_sites.push(FieldSites {
                host: pattern,
                field,
                write,
            }),
            // RETURN and ERROR: the agent leaves out the calls the condition rejects.
            _ => {
                plan.targets.push(pattern);
                if let Some(guard) = handler.argument_guard() {
                    plan.guards
                        .push((Guarded::Target(plan.targets.len() - 1), guard));
                }
            }
        }
    }
    // The agent reports the lines some handler takes, or all of them.
    if !every_line {
        lines.sort_unstable();
        lines.dedup();
        probes.plan.lines = lines;
    }
    // The agent keeps calls over the smallest threshold, when every handler has one.
    probes.plan.threshold = thresholds
        .iter()
        .copied()
        .collect::<Option<Vec<_>>>()
        .and_then(|t| t.into_iter().min());
    Ok(probes)
}

/// Methods as BTrace names them as a trace pattern: `clazz` (name, `/regex/`, `+Super`),
/// `method` and `type` (a JVM descriptor or Java's `void (java.lang.String, int)`).
fn method_pattern(class: &str, method: &str, descriptor: &str) -> Result<MethodPattern, String> {
    let descriptor = match descriptor.trim() {
        "" => String::new(),
        d if d.starts_with('(') => d.to_string(),
        java => jvm_descriptor(java).ok_or_else(|| format!("type {java:?} is neither a JVM descriptor nor like \"void (java.lang.String, int)\""))?,
    };
    MethodPattern::parse(&format!("{class}::{method}{descriptor}"))
}

/// `void (java.lang.String, int[])` → `(Ljava/lang/String;[I)V`.
fn jvm_descriptor(java: &str) -> Option<String> {
    let (ret, params) = java.split_once('(')?;
    let params = params.trim().strip_suffix(')')?;
    let one = |t: &str| -> Option<String> {
        let t = t.trim();
        let (mut base, mut dims) = (t, 0);
        while let Some(inner) = base.strip_suffix("[]") {
            base = inner.trim_end();
            dims += 1;
        }
        let code = match base {
            "void" => "V".to_string(),
            "boolean" => "Z".into(),
            "byte" => "B".into(),
            "char" => "C".into(),
            "short" => "S".into(),
            "int" => "I".into(),
            "long" => "J".into(),
            "float" => "F".into(),
            "double" => "D".into(),
            "" => return None,
            class => format!("L{};", class.replace('.', "/")),
        };
        Some(format!("{}{code}", "[".repeat(dims)))
    };
    let params: Option<Vec<String>> = params
        .split(',')
        .filter(|p| !p.trim().is_empty())
        .map(one)
        .collect();
    Some(format!("({}){}", params?.concat(), one(ret)?))
}

/// A threshold the agent can apply for the handler (see [`Handler::duration_floor`]).
fn threshold(handler: &Handler) -> Option<Duration> {
    handler.duration_floor().map(Duration::from_nanos)
}

/// What the readers of the tracing sessions tell the script's loop.
enum Happened {
    /// Traced calls (of a record, or a batch), each for handler `usize`.
    Fired(Vec<(usize, Fired)>),
    /// Calls the probes reported that did not reach the handlers: `N calls of Class.method`.
    Unseen(Vec<(u64, String)>),
    /// A session ended (the agent's reason, or the error).
    Ended(Result<jtap_protocol::Ended, String>),
}

/// The reader of a tracing session: which handlers take each record's calls, and how many
/// calls of each method arrived.
struct Reader<'p> {
    probes: &'p Probes,
    /// The methods (call sites) batches named, by key: the method and the handlers that
    /// take its calls which returned and which threw (each with its threshold).
    batch_probes: HashMap<u32, BatchTakers>,
    batch_threads: HashMap<u32, BatchThread>,
    /// Calls received, by (`pkg.Class`, method, descriptor).
    received: HashMap<(String, String, String), u64>,
}

/// A method a batch named, and the handlers taking its calls.
struct BatchTakers {
    probe: BatchProbe,
    /// Calls counted, added to [`Reader::received`] when the session ends.
    received: u64,
    returned: Vec<(usize, Option<Duration>)>,
    threw: Vec<(usize, Option<Duration>)>,
}

impl<'p> Reader<'p> {
    fn new(probes: &'p Probes) -> Reader<'p> {
        Reader {
            probes,
            batch_probes: HashMap::new(),
            batch_threads: HashMap::new(),
            received: HashMap::new(),
        }
    }

    /// What a record tells the script's loop.
    fn read(&mut self, record: Record) -> Option<Happened> {
        let callee_values = self.probes.plan.callee_values;
        let taken: Vec<(usize, Fired)> = match record {
            Record::Call(call) => {
                self.count(&call.class, &call.method, &call.descriptor);
                self.probes
                    .handlers
                    .iter()
                    .filter(|(_, selector)| selector.takes(&call))
                    .map(|(index, _)| (*index, fired(call.clone(), callee_values)))
                    .collect()
            }
            Record::Reached(reached) => {
                self.count(&reached.class, &reached.method, &reached.descriptor);
                self.probes
                    .handlers
                    .iter()
                    .filter(|(_, selector)| selector.takes_point(&reached))
                    .map(|(index, _)| (*index, fired_at(reached.clone())))
                    .collect()
            }
            Record::Calls(batch) => self.batch(batch),
            Record::Reported(reported) => return Some(Happened::Unseen(self.unseen(&reported))),
            _ => Vec::new(),
        };
        (!taken.is_empty()).then_some(Happened::Fired(taken))
    }

    fn count(&mut self, class: &str, method: &str, descriptor: &str) {
        let key = (
            class.to_string(),
            method.to_string(),
            descriptor.to_string(),
        );
        *self.received.entry(key).or_default() += 1;
    }

    /// The calls of a batch each handler takes.
    fn batch(&mut self, batch: CallBatch) -> Vec<(usize, Fired)> {
        for thread in batch.threads.iter().cloned() {
            self.batch_threads.insert(thread.key, thread);
        }
        for probe in batch.probes.iter().cloned() {
            // Which handlers take its calls, durations aside.
            let call = |threw: bool| Call {
                class: probe.class.clone(),
                method: probe.method.clone(),
                descriptor: probe.descriptor.clone(),
                duration_ns: u64::MAX,
                outcome: match threw {
                    true => Outcome::Threw(None),
                    false => Outcome::Returned(None),
                },
                callee: probe.callee.clone(),
                ..empty_call()
            };
            let takers = |call: Call| -> Vec<(usize, Option<Duration>)> {
                self.probes
                    .handlers
                    .iter()
                    .filter(|(_, selector)| selector.takes(&call))
                    .map(|(index, selector)| (*index, selector.threshold))
                    .collect()
            };
            let (returned, threw) = (takers(call(false)), takers(call(true)));
            let takers = BatchTakers {
                probe,
                received: 0,
                returned,
                threw,
            };
            self.batch_probes.insert(takers.probe.key, takers);
        }
        let mut taken = Vec::new();
        for call in batch.iter() {
            let Some(takers) = self.batch_probes.get_mut(&call.probe) else {
                continue;
            };
            takers.received += 1;
            let handlers = if call.threw {
                &takers.threw
            } else {
                &takers.returned
            };
            for &(index, threshold) in handlers {
                if threshold.is_some_and(|t| call.duration_ns < t.as_nanos() as u64) {
                    continue;
                }
                let thread = self.batch_threads.get(&call.thread);
                let probe = &takers.probe;
                taken.push((
                    index,
                    Fired {
                        class: probe.class.clone(),
                        method: probe.method.clone(),
                        start_ns: call.time_ns,
                        duration_ns: call.duration_ns,
                        thread: thread.map_or_else(|| "?".into(), |t| t.name.clone()),
                        tid: thread.map_or(0, |t| t.tid),
                        callee: probe.callee.clone(),
                        ..Fired::default()
                    },
                ));
            }
        }
        taken
    }

    /// `N calls of Class.method` for the calls the probes reported that did not arrive.
    fn unseen(&mut self, reported: &Reported) -> Vec<(u64, String)> {
        for takers in self.batch_probes.values_mut() {
            let probe = &takers.probe;
            let key = (
                probe.class.clone(),
                probe.method.clone(),
                probe.descriptor.clone(),
            );
            *self.received.entry(key).or_default() += std::mem::take(&mut takers.received);
        }
        reported
            .methods
            .iter()
            .filter_map(|m| {
                let key = (m.class.clone(), m.method.clone(), m.descriptor.clone());
                let received = self.received.get(&key).copied().unwrap_or(0);
                let unseen = m.calls.saturating_sub(received);
                (unseen > 0).then(|| (unseen, format!("{}.{}", m.class, m.method)))
            })
            .collect()
    }
}

/// A script running against a JVM.
struct Session;

impl Session {
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
        let mut machine = Machine::new(script, file, script_args.to_vec(), Some(Box::new(facts)));
        let mut failures = Vec::new();
        flush(&mut machine, &mut failures);
        let events_in = EventSocket::bind(pid)?;
        let listens = script
            .handlers
            .iter()
            .any(|h| matches!(h.trigger, Trigger::Event(_)));
        let conversation = match probes.handlers.is_empty() {
            true => None,
            false => {
                let options = Options {
                    action: Some(Action::Start),
                    event: Some(Event::Trace),
                    trace: Some(probes.plan.clone()),
                    ..Options::default()
                };
                Some(Conversation::open(pid, &options, timeout)?)
            }
        };
        let stopper = conversation
            .as_ref()
            .map(Conversation::stopper)
            .transpose()?;
        let started = Instant::now();
        let (sender, events) = mpsc::channel();
        let mut timers: Vec<(usize, Duration, Instant)> = script
            .handlers
            .iter()
            .enumerate()
            .filter_map(|(i, h)| match h.trigger {
                Trigger::Timer(ms) => {
                    let period = Duration::from_millis(ms);
                    Some((i, period, started + period))
                }
                _ => None,
            })
            .collect();
        std::thread::scope(|scope| -> anyhow::Result<i32> {
            let reader = conversation.map(|conversation| {
                let sender = sender.clone();
                scope.spawn(move || {
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
                                let _ = sender.send(happened);
                            }
                            Ok(())
                        }),
                    );
                    let _ = sender.send(Happened::Ended(ended.map_err(|e| e.to_string())));
                })
            });
            drop(sender);
            let mut ended = false;
            let mut failure = None;
            let mut unseen = Vec::new();
            'script: loop {
                let stop = interrupt::requested()
                    || machine.exit_code().is_some()
                    || ended
                    || duration.is_some_and(|d| started.elapsed() >= d)
                    || !std::path::Path::new(&format!("/proc/{pid}")).exists();
                if stop {
                    break;
                }
                let next_timer = timers.iter().map(|(_, _, due)| *due).min();
                let wait = next_timer
                    .map_or(Duration::from_millis(100), |due| {
                        due.saturating_duration_since(Instant::now())
                    })
                    .min(Duration::from_millis(100));
                // What arrived, for up to 10 ms, before the timers and events below.
                let busy = Instant::now();
                let mut next = events.recv_timeout(wait);
                loop {
                    match next {
                        Ok(Happened::Fired(taken)) => fire(&mut machine, &taken),
                        Ok(Happened::Unseen(calls)) => unseen = calls,
                        Ok(Happened::Ended(result)) => {
                            ended = true;
                            if let Err(e) = result {
                                failure.get_or_insert(e);
                            }
                        }
                        Err(mpsc::RecvTimeoutError::Timeout) => {}
                        Err(mpsc::RecvTimeoutError::Disconnected) => {
                            // No probes (or their session ended): timers and events go on.
                            if timers.is_empty() && !listens {
                                break 'script;
                            }
                            std::thread::sleep(wait);
                        }
                    }
                    if ended
                        || machine.exit_code().is_some()
                        || busy.elapsed() >= Duration::from_millis(10)
                    {
                        break;
                    }
                    match events.try_recv() {
                        Ok(happened) => next = Ok(happened),
                        Err(_) => break,
                    }
                }
                let status = || {
                    let mut text = format!("{file} (jtap pid {})\n", std::process::id());
                    for (name, value) in machine.exported() {
                        text.push_str(&format!("  {name} = {value}\n"));
                    }
                    text
                };
                for name in events_in.received(&status) {
                    if machine.event(name.as_deref()) == 0 {
                        let shown = name.as_deref().unwrap_or("(unnamed)");
                        eprintln!("jtap: no @OnEvent handler takes the event {shown}");
                    }
                }
                let now = Instant::now();
                for (index, period, due) in &mut timers {
                    if *due <= now {
                        machine.run(*index);
                        *due += *period;
                    }
                }
                flush(&mut machine, &mut failures);
            }
            // The probes end (classes restored); calls already traced still reach the handlers.
            if let Some(stopper) = &stopper {
                let _ = stopper.stop();
            }
            if let Some(reader) = reader {
                let _ = reader.join();
            }
            // Calls the script missed count only while it ran to the end of the session.
            let script_ended = machine.exit_code().is_some();
            while let Ok(event) = events.try_recv() {
                match event {
                    Happened::Fired(taken) => fire(&mut machine, &taken),
                    Happened::Unseen(calls) => unseen = calls,
                    Happened::Ended(Err(e)) => {
                        failure.get_or_insert(e);
                    }
                    Happened::Ended(Ok(_)) => {}
                }
            }
            machine.finish();
            flush(&mut machine, &mut failures);
            if !script_ended {
                print_unseen(&unseen);
            }
            for (error, times) in failures.iter().filter(|(_, n)| *n > 1) {
                eprintln!("jtap: {times} times: {error}");
            }
            if let Some(e) = failure {
                return Err(anyhow::anyhow!(e));
            }
            Ok(machine.exit_code().unwrap_or(0))
        })
    }
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
        let properties = self.properties.get_or_init(|| {
            let text = self.ask("properties").unwrap_or_default();
            text.lines().filter_map(java_property).collect()
        });
        properties
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    }

    fn thread_dump(&self) -> Option<String> {
        self.ask("threaddump").ok()
    }

    fn getenv(&self, name: &str) -> Option<String> {
        let environment = self.environment.get_or_init(|| {
            std::fs::read(format!("/proc/{}/environ", self.pid))
                .unwrap_or_default()
                .split(|&b| b == 0)
                .filter_map(|entry| {
                    let entry = String::from_utf8_lossy(entry);
                    let (k, v) = entry.split_once('=')?;
                    Some((k.to_string(), v.to_string()))
                })
                .collect()
        });
        environment
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
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

/// A traced call as a probe firing. With `callee_values` (the plan's), a call-site call's
/// values are `this`, the called method's receiver, then its arguments.
pub(crate) fn fired(call: Call, callee_values: bool) -> Fired {
    let (returned, thrown) = match call.outcome {
        Outcome::Returned(value) => (value, None),
        Outcome::Threw(exception) => (None, exception),
    };
    let mut values = call.values;
    let mut sizes = call.sizes;
    let at_call = callee_values && call.callee.is_some() && values.len() > 1;
    let target = at_call.then(|| values.remove(1));
    let target_size = (at_call && sizes.len() > 1).then(|| sizes.remove(1));
    Fired {
        class: call.class,
        method: call.method,
        start_ns: call.time_ns,
        duration_ns: call.duration_ns,
        values,
        target,
        returned,
        thrown,
        sizes,
        returned_size: call.return_size,
        target_size,
        stack: call.stack,
        thread: call.thread,
        tid: call.tid,
        callee: call.callee,
        point: None,
    }
}

/// What a `Kind.ENTRY`, `LINE`, `NEW` or `SYNC_*` handler runs on.
pub(crate) fn fired_at(reached: Reached) -> Fired {
    Fired {
        class: reached.class,
        method: reached.method,
        start_ns: reached.time_ns,
        values: reached.values,
        sizes: reached.sizes,
        returned: reached.allocated,
        stack: reached.stack,
        thread: reached.thread,
        tid: reached.tid,
        point: Some(reached.point),
        ..Fired::default()
    }
}

/// A call of no method, for the fields a record or batch leaves out.
fn empty_call() -> Call {
    Call {
        time_ns: 0,
        thread: "main".into(),
        tid: 1,
        class: String::new(),
        method: String::new(),
        descriptor: String::new(),
        duration_ns: 0,
        coarse: false,
        args: None,
        values: Vec::new(),
        sizes: Vec::new(),
        return_size: None,
        outcome: Outcome::Returned(None),
        stack: Vec::new(),
        callee: None,
    }
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

/// Prints what the handlers printed (stdout) and their errors (stderr: each error once, and
/// how often it recurred at the end).
fn flush(machine: &mut Machine, failures: &mut Vec<(String, u64)>) {
    let out = machine.take_output();
    if !out.is_empty() {
        let mut stdout = io::stdout().lock();
        let _ = stdout.write_all(out.as_bytes());
        let _ = stdout.flush();
    }
    for error in machine.take_errors() {
        match failures.iter_mut().find(|(e, _)| *e == error) {
            Some((_, n)) => *n += 1,
            None => {
                eprintln!("jtap: {error}");
                failures.push((error, 1));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn call() -> Call {
        empty_call()
    }

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

    #[test]
    fn java_types_become_jvm_descriptors() {
        assert_eq!(
            jvm_descriptor("void (java.lang.String, int[])").as_deref(),
            Some("(Ljava/lang/String;[I)V")
        );
        assert_eq!(jvm_descriptor("long ()").as_deref(), Some("()J"));
        assert_eq!(jvm_descriptor("nonsense"), None);
    }

    #[test]
    fn a_duration_guard_becomes_the_agents_threshold() {
        let source = "import com.sun.btrace.annotations.*;\nimport static com.sun.btrace.BTraceUtils.*;\n@BTrace public class S {\n@OnMethod(clazz=\"a.B\", method=\"run\", location=@Location(Kind.RETURN))\npublic static void h(@Duration long d) { if (d > 1000) { println(d); } }\n@OnMethod(clazz=\"a.B\", method=\"run\", location=@Location(Kind.RETURN))\npublic static void g(@Duration long d) { println(d); }\n}";
        let script = compile(source, "S.java").unwrap();
        assert_eq!(
            threshold(&script.handlers[0]),
            Some(Duration::from_nanos(1001))
        );
        assert_eq!(threshold(&script.handlers[1]), None);
        // g takes every call: the agent cannot drop the short ones.
        let probes = probes(&script, "S.java").unwrap();
        assert_eq!(
            probes.plan.to_string(),
            "mode:trace p:a.B::run p:a.B::run batches"
        );
        let call = |duration_ns| Call {
            class: "a.B".into(),
            method: "run".into(),
            descriptor: "()V".into(),
            duration_ns,
            outcome: Outcome::Returned(None),
            ..call()
        };
        let takers = |c: &Call| probes.handlers.iter().filter(|(_, s)| s.takes(c)).count();
        assert_eq!((takers(&call(500)), takers(&call(5000))), (1, 2));
    }

    #[test]
    fn call_handlers_trace_call_sites_and_take_only_their_calls() {
        let source = "import com.sun.btrace.annotations.*;\nimport static com.sun.btrace.BTraceUtils.*;\n@BTrace public class S {\n\
            @OnMethod(clazz=\"a.B\", method=\"run\", location=@Location(value=Kind.CALL, clazz=\"/java\\\\.io\\\\..*/\", method=\"write\", where=Where.AFTER))\n\
            public static void after(@TargetMethodOrField String m) { println(m); }\n\
            @OnMethod(clazz=\"a.B\", method=\"run\", location=@Location(value=Kind.CALL, clazz=\"a.C\", method=\"/.*/\"))\n\
            public static void before(@TargetMethodOrField String m) { println(m); }\n\
            @OnMethod(clazz=\"a.B\", method=\"run\")\n\
            public static void entry() { println(1); }\n}";
        let script = compile(source, "S.java").unwrap();
        let probes = probes(&script, "S.java").unwrap();
        assert_eq!(
            probes.plan.to_string(),
            "mode:trace c:a.B::run to:/java\\.io\\..*/::write c:a.B::run to:a.C::/.*/ entry:a.B::run exceptions batches"
        );
        let at_site = |class: &str, method: &str, threw: bool| Call {
            class: "a.B".into(),
            method: "run".into(),
            descriptor: "()V".into(),
            outcome: match threw {
                true => Outcome::Threw(None),
                false => Outcome::Returned(None),
            },
            callee: Some(Callee {
                class: class.into(),
                method: method.into(),
                descriptor: "()V".into(),
                invoke: "virtual".into(),
            }),
            ..call()
        };
        let takers = |c: &Call| -> Vec<usize> {
            probes
                .handlers
                .iter()
                .filter(|(_, s)| s.takes(c))
                .map(|(i, _)| *i)
                .collect()
        };
        assert_eq!(takers(&at_site("java.io.PrintStream", "write", false)), [0]);
        assert_eq!(
            takers(&at_site("java.io.PrintStream", "write", true)),
            [] as [usize; 0]
        );
        assert_eq!(takers(&at_site("a.C", "go", true)), [1]);
        assert_eq!(takers(&at_site("a.C", "<init>", false)), [] as [usize; 0]);
        let own = Call {
            class: "a.B".into(),
            method: "run".into(),
            ..call()
        };
        assert_eq!(takers(&own), [] as [usize; 0]);
        let entered = Reached {
            time_ns: 0,
            thread: "main".into(),
            tid: 1,
            class: "a.B".into(),
            method: "run".into(),
            descriptor: "()V".into(),
            point: Point::Entry,
            values: Vec::new(),
            sizes: Vec::new(),
            allocated: None,
            stack: Vec::new(),
        };
        let entry_takers: Vec<usize> = probes
            .handlers
            .iter()
            .filter(|(_, s)| s.takes_point(&entered))
            .map(|(i, _)| *i)
            .collect();
        assert_eq!(entry_takers, [2]);
        let subtypes = source.replace("clazz=\"a.C\"", "clazz=\"+a.C\"");
        let script = compile(&subtypes, "S.java").unwrap();
        let error = super::probes(&script, "S.java").err().unwrap().to_string();
        assert!(
            error.contains("clazz = \"+a.C\" in a @Location is not supported"),
            "{error}"
        );
    }
}
