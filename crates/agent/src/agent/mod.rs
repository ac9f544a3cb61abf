//! The one agent of this library: created by the first `Agent_OnLoad`/`Agent_OnAttach`, reached
//! again by every later attach. Runs commands, owns the recordings and the sessions.
//!
//! A recording is what one `start` runs: one or more engines (`event=cpu,alloc,lock`),
//! owned by the client that asked (its session) or detached. Several recordings run at once
//! (a profile and a trace, two clients) as long as their engines hold no
//! [`Resource`] in common; each client's `Stop` ends only its own recording.

#![deny(unsafe_code)]

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use jtap_jvmti::{sys, Capabilities, Env};
use jtap_protocol::records::Record;
use jtap_protocol::{options::help_text, Action, Event, Frame, Options, VERSION};
use jtap_protocol::{
    AGENT_RETURN_BAD_OPTIONS, AGENT_RETURN_COMMAND_FAILED, AGENT_RETURN_INIT, AGENT_RETURN_OK,
    AGENT_RETURN_VERSION_MISMATCH,
};

mod recording;
mod watcher;

use recording::{labels_wrap_engines, write_reports, Recording, Running};

use crate::channel::{Channel, ClientSink};

use crate::engine::{self, Context, Report, Resource};
use crate::push::Pusher;
use crate::rotation::Rotation;
use crate::sampling;
use crate::session::Session;
use crate::thread::Vm;
use crate::trace::labels::Labelling;

/// A failed command: an `AGENT_RETURN_*` code and a one-line reason.
type Failure = (i32, String);

fn failed(message: impl Into<String>) -> Failure {
    (AGENT_RETURN_COMMAND_FAILED, message.into())
}

/// `file=`'s directory must exist: the agent writes there at the recording's end or every
/// period, when no client may be left to tell of a failure.
fn check_file_directory(file: &str) -> Result<(), Failure> {
    let directory = std::path::Path::new(file).parent();
    match directory.filter(|d| !d.as_os_str().is_empty() && !d.is_dir()) {
        Some(missing) => Err(failed(format!(
            "cannot write {file}: no directory {} (in the JVM's filesystem)",
            missing.display()
        ))),
        None => Ok(()),
    }
}

/// The agent.
pub struct Agent {
    vm: Vm,
    /// The agent's own environment: it lives for the process, never disposed of.
    env: &'static Env,
    at_startup: bool,
    /// Capabilities added at start-up and kept for the JVM's life, whatever runs.
    kept: Capabilities,
    loaded: Instant,
    commands: AtomicU64,
    sessions: AtomicU64,
    live_watchers: AtomicUsize,
    state: Mutex<State>,
    /// Where [`Agent::on_agent_thread`] sends jobs, once its thread runs.
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
    /// A `jtap-linger` thread waits to end the idle sampling core.
    core_watched: AtomicBool,
}

/// Work for the agent's thread.
pub type Job = Box<dyn FnOnce() + Send>;

#[derive(Default)]
struct State {
    recordings: Vec<Recording>,
    /// Numbers recordings for `status`.
    started: u64,
    /// Sessions of recordings started in `Agent_OnLoad`, whose watcher threads wait for VMInit.
    awaiting_init: Vec<Arc<Session>>,
    /// The VM has sent VMDeath: no more engines.
    dead: bool,
}

/// An engine's stop and start at the end of a `loop=` period, or a wait for that end,
/// longer than this is logged (rotations late by seconds were seen on loaded CI machines).
const SLOW_ROTATION: Duration = Duration::from_millis(500);

static AGENT: OnceLock<Agent> = OnceLock::new();
static INIT: Mutex<()> = Mutex::new(());

/// How long an attach waits for a starting JVM to enter JVMTI's live phase.
const LIVE_PHASE_WAIT: Duration = Duration::from_secs(10);

/// The agent's JVMTI environment. HotSpot can answer an attach in the first moments of its
/// life, before JVMTI's live phase, when it has no environment to give yet: the attach then
/// waits for that phase (the attach thread is in native code, the JVM goes on starting).
fn environment(vm: Vm, at_startup: bool) -> Result<Env, Failure> {
    let asked = Instant::now();
    loop {
        match vm.jvmti_env() {
            Err(e) if e.code == sys::JVMTI_ERROR_WRONG_PHASE && !at_startup => {
                if asked.elapsed() > LIVE_PHASE_WAIT {
                    let message = format!(
                        "the JVM has not finished starting after {} s ({e})",
                        LIVE_PHASE_WAIT.as_secs()
                    );
                    return Err((AGENT_RETURN_INIT, message));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Ok(env) => {
                let waited = asked.elapsed();
                if waited > Duration::from_millis(20) {
                    log!("waited {waited:?} for the JVM to finish starting");
                }
                return Ok(env);
            }
            Err(e) => return Err(init_failed(e)),
        }
    }
}

/// A JVMTI call of the agent's creation failed.
fn init_failed(e: jtap_jvmti::Error) -> Failure {
    (AGENT_RETURN_INIT, e.to_string())
}

/// The agent, creating it on first use: JVMTI environment, callbacks, VMInit/VMDeath events.
pub fn init(vm: Vm, at_startup: bool) -> Result<&'static Agent, Failure> {
    let _once = INIT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(agent) = AGENT.get() {
        return Ok(agent);
    }
    crate::log::install_panic_hook();
    crate::callback::pin_library();
    // Never dropped (disposed of): the agent's environment is the process's, as is the agent.
    let env: &'static Env = Box::leak(Box::new(environment(vm, at_startup)?));
    let callbacks = sys::jvmtiEventCallbacks {
        VMInit: Some(on_vm_init),
        VMDeath: Some(on_vm_death),
        GarbageCollectionStart: Some(engine::gc::on_start),
        GarbageCollectionFinish: Some(engine::gc::on_finish),
        ClassLoad: Some(sampling::on_class_load),
        CompiledMethodLoad: Some(sampling::on_compiled_method_load),
        CompiledMethodUnload: Some(sampling::on_compiled_method_unload),
        DynamicCodeGenerated: Some(sampling::on_dynamic_code_generated),
        ClassPrepare: Some(sampling::on_class_prepare),
        ThreadStart: Some(sampling::on_thread_start),
        ThreadEnd: Some(sampling::on_thread_end),
        ..Default::default()
    };
    env.set_event_callbacks(&callbacks).map_err(init_failed)?;
    let mut kept = Capabilities::default();
    if at_startup {
        env.set_event_enabled(sys::JVMTI_EVENT_VM_INIT, true)
            .map_err(init_failed)?;
        // HotSpot records the compiled code's dependencies on classes only once a JVMTI
        // environment can retransform; when one could from start-up, retransforming a class
        // later discards only the code that depends on it, not all compiled code.
        match env.add_capabilities(&Capabilities::of(&["can_retransform_classes"])) {
            Ok(report) => kept = report.granted,
            Err(e) => log!("cannot keep can_retransform_classes from start-up: {e}"),
        }
    }
    env.set_event_enabled(sys::JVMTI_EVENT_VM_DEATH, true)
        .map_err(init_failed)?;
    let agent = Agent {
        vm,
        env,
        at_startup,
        kept,
        loaded: Instant::now(),
        commands: AtomicU64::new(0),
        sessions: AtomicU64::new(0),
        live_watchers: AtomicUsize::new(0),
        state: Mutex::new(State::default()),
        jobs: Mutex::new(None),
        core_watched: AtomicBool::new(false),
    };
    log!(
        "agent {VERSION} initialised ({})",
        if at_startup {
            "at start-up"
        } else {
            "by attach"
        }
    );
    Ok(AGENT.get_or_init(|| agent))
}

impl Agent {
    /// The JVM.
    pub fn vm(&self) -> Vm {
        self.vm
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs one command. Replies go over `channel` (Hello, text, Done) when there is one;
    /// `start` keeps the channel as the engine's session. Returns an `AGENT_RETURN_*` code.
    pub fn handle(
        &'static self,
        options: &Options,
        mut channel: Option<Channel>,
        from_onload: bool,
    ) -> i32 {
        self.commands.fetch_add(1, Ordering::SeqCst);
        log!("command: {options}");
        if let Some(linger) = options.linger {
            sampling::set_core_linger(linger);
        }
        if let Some(channel) = &channel {
            let _ = channel.send(&Frame::Hello {
                version: VERSION.into(),
                pid: std::process::id(),
            });
        }
        let result = match options.client.as_deref() {
            Some(client) if client != VERSION => Err((
                AGENT_RETURN_VERSION_MISMATCH,
                format!(
                    "version mismatch: jtap {client} cannot drive jtap agent {VERSION}, which is already loaded in this JVM; \
                     use jtap {VERSION} (or restart the JVM)"
                ),
            )),
            _ => self.execute(options, &mut channel, from_onload),
        };
        let code = match &result {
            Ok(_) => AGENT_RETURN_OK,
            Err((code, message)) => {
                log!("command failed: {message}");
                *code
            }
        };
        if let Some(channel) = channel {
            let frames = match result {
                Ok(text) if text.is_empty() => vec![Frame::Done {
                    code,
                    message: String::new(),
                }],
                Ok(text) => vec![
                    Frame::Out(text),
                    Frame::Done {
                        code,
                        message: String::new(),
                    },
                ],
                Err((code, message)) => vec![Frame::Done { code, message }],
            };
            for frame in frames {
                if let Err(e) = channel.send(&frame) {
                    log!("reply lost: {e}");
                    break;
                }
            }
        }
        code
    }

    /// Runs one command on the agent's thread (see [`Agent::on_agent_thread`]) and returns at
    /// once. The attach `load` operation thereby ends right away: its client reads the
    /// replies while they are written (a reply larger than the socket's buffer, written from
    /// the Attach Listener while the client still waited for the operation's end, deadlocked
    /// both), and the JVM's Attach Listener stays free for other clients.
    /// Options that said `rest` are completed first from the channel (read here, not in the
    /// `load` operation, whose end the client waits for before it accepts the connection).
    pub fn handle_in_background(&'static self, options: Options, channel: Channel) -> i32 {
        self.on_agent_thread(Box::new(move || {
            let options = match options.rest {
                true => match channel
                    .receive_options()
                    .and_then(|text| Options::parse(&text).map_err(|e| e.to_string()))
                {
                    Ok(options) => options,
                    Err(message) => {
                        let message = format!("bad agent options: {message}");
                        log!("{message}");
                        channel.fail(AGENT_RETURN_BAD_OPTIONS, &message);
                        return;
                    }
                },
                false => options,
            };
            self.handle(&options, Some(channel), false);
        }));
        AGENT_RETURN_OK
    }

    /// Runs `job` on the agent's one `jtap-agent` thread (started on first use), after the
    /// jobs before it; on this thread if that thread cannot run. Commands and the ends of
    /// sessions run there, so engines start and stop one at a time, always on the same
    /// thread: a thread per command spread their allocations over glibc's per-thread malloc
    /// arenas (up to 8 per CPU), each keeping about 1 MiB (+15 MiB RSS over 100 start/stop
    /// cycles).
    pub fn on_agent_thread(&'static self, job: Job) {
        let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        if jobs.is_none() {
            let (sender, receiver) = mpsc::channel::<Job>();
            let ticket = self.watcher_started();
            let started = crate::thread::spawn_attached(self.vm, "jtap-agent".into(), move || {
                let _ticket = ticket;
                for job in receiver {
                    crate::callback::guard_callback(job);
                }
            });
            match started {
                Ok(_) => *jobs = Some(sender),
                Err(e) => log!("cannot start the jtap-agent thread: {e}"),
            }
        }
        let job = match jobs.as_ref() {
            Some(sender) => match sender.send(job) {
                Ok(()) => return,
                Err(mpsc::SendError(job)) => {
                    // The thread is gone (the VM refused to attach it): start anew next time.
                    *jobs = None;
                    job
                }
            },
            None => job,
        };
        drop(jobs);
        job();
    }

    fn execute(
        &'static self,
        options: &Options,
        channel: &mut Option<Channel>,
        from_onload: bool,
    ) -> Result<String, Failure> {
        let action = match options.action {
            Some(action) => action,
            None if from_onload => return Ok(String::new()),
            None => Action::Status,
        };
        match action {
            Action::Status => Ok(self.status(&self.state())),
            Action::Version => Ok(self.version_text()),
            Action::Help => Ok(help_text()),
            Action::Dump => {
                let state = self.state();
                let chosen = state.chosen(options.event);
                if chosen.is_empty() {
                    return Err(failed(nothing_running("dump", options.event)));
                }
                let reports: Vec<Report> = chosen
                    .into_iter()
                    .flat_map(|i| state.recordings[i].reports())
                    .collect();
                drop(state);
                deliver_reports(&reports, options.file.as_deref(), channel.as_ref())
            }
            Action::Stop => {
                // The state stays locked until the engines are fully stopped, so that no other
                // engine can start (and have its capabilities given back) in between.
                let mut state = self.state();
                let chosen = state.chosen(options.event);
                if chosen.is_empty() {
                    return Err(failed(nothing_running("stop", options.event)));
                }
                let mut reports = Vec::new();
                let mut owners = Vec::new();
                for i in chosen.into_iter().rev() {
                    let recording = state.recordings.remove(i);
                    let (results, owner) = self.stop_recording(&state, recording);
                    reports.splice(0..0, results);
                    owners.extend(owner);
                }
                drop(state);
                for owner in owners {
                    owner.end(AGENT_RETURN_OK, "stopped by another jtap client");
                }
                deliver_reports(&reports, options.file.as_deref(), channel.as_ref())
            }
            Action::Start => self.start(options, channel),
            Action::Histogram => {
                let histogram = crate::heap::histogram::run(self.vm, options).map_err(failed)?;
                deliver_record(
                    &Record::Histogram(histogram),
                    options.file.as_deref(),
                    channel.as_ref(),
                )
            }
            Action::Inspect => {
                let inspection = crate::heap::inspect::run(self.vm, self.env.borrowed(), options)
                    .map_err(failed)?;
                deliver_record(
                    &Record::Inspection(inspection),
                    options.file.as_deref(),
                    channel.as_ref(),
                )
            }
        }
    }

    fn start(
        &'static self,
        options: &Options,
        channel: &mut Option<Channel>,
    ) -> Result<String, Failure> {
        let events = options.events();
        if events.is_empty() {
            return Err(failed(format!(
                "start needs event=<{}> (or alloc, lock, wall)",
                Event::ALL.map(Event::name).join("|")
            )));
        }
        if let Some(file) = &options.file {
            check_file_directory(file)?;
        }
        let mut state = self.state();
        if state.dead {
            return Err(failed("the JVM is shutting down"));
        }
        for &event in &events {
            if let Some(busy) = state.holding(&engine::holds(event, options)) {
                return Err(failed(format!(
                    "cannot start {event}: {busy}; stop it first"
                )));
            }
        }
        // Sampling and class rewriting need the live phase (loaded classes, JNI); at start-up
        // they begin at VMInit.
        let phase_live = self.env.phase() == Ok(sys::JVMTI_PHASE_LIVE);
        if !options.by.is_empty() && !phase_live {
            return Err(failed("by= labels samples of a running JVM: attach to it"));
        }
        let start_labels = || match options.by.is_empty() {
            true => Ok(None),
            false => Labelling::start(self.vm, &options.by, options.byinner).map(Some),
        };
        let stop_labels = |labels: Option<Labelling>| {
            if let Some(labels) = labels {
                log!("{}", labels.stop());
            }
        };
        // Labels first, so that the engines' first samples carry them; but after a trace,
        // so that their probes wrap the trace's (see [`labels_wrap_engines`]).
        let labels_wrap = labels_wrap_engines(&events);
        let mut labels = match labels_wrap {
            true => None,
            false => start_labels().map_err(failed)?,
        };
        let mut engines: Vec<Running> = Vec::new();
        for &event in &events {
            match self.start_engine(&state, &engines, event, options, phase_live) {
                Ok(running) => engines.push(running),
                Err(e) => {
                    self.retire_all(&state, engines);
                    stop_labels(labels);
                    return Err(failed(e));
                }
            }
        }
        if labels_wrap {
            labels = match start_labels() {
                Ok(labels) => labels,
                Err(e) => {
                    self.retire_all(&state, engines);
                    return Err(failed(e));
                }
            };
        }
        // A detached recording belongs to nobody: the asking client just gets the reply.
        let owner = match options.detach {
            true => None,
            false => channel
                .take()
                .map(|c| Session::new(self.sessions.fetch_add(1, Ordering::SeqCst) + 1, c)),
        };
        if let Some(session) = &owner {
            for running in &mut engines {
                running.engine.stream_to(session.clone());
            }
        }
        let names = engines
            .iter()
            .map(|r| r.engine.name())
            .collect::<Vec<_>>()
            .join(",");
        let pusher = match &options.push {
            Some(_) => match Pusher::start(options) {
                Ok(pusher) => Some(pusher),
                Err(e) => {
                    self.retire_all(&state, engines);
                    stop_labels(labels);
                    return Err(failed(e));
                }
            },
            None => None,
        };
        let label_notes = labels
            .as_ref()
            .map(Labelling::take_notes)
            .unwrap_or_default();
        state.started += 1;
        let id = state.started;
        state.recordings.push(Recording {
            id,
            engines,
            options: options.clone(),
            started: Instant::now(),
            deadline: options.duration.map(|d| Instant::now() + d),
            owner: owner.clone(),
            file: options.file.clone(),
            rotation: options
                .rotate
                .map(|period| Rotation::new(period, options.file.as_deref(), options.keep)),
            pusher,
            labels,
        });
        if options.rotate.is_some() {
            self.rotate_every_period(id);
        }
        if let Some(session) = owner {
            session.send_frame(Frame::Started(names.clone()));
            for note in label_notes {
                session.send_frame(Frame::Note(format!("labels: {note}")));
            }
            if phase_live {
                self.watch(session);
            } else {
                state.awaiting_init.push(session);
            }
        }
        log!("started recording {id}: {names}");
        match options.detach {
            true => Ok(format!(
                "started recording {id} ({names}), detached: it runs until `stop` or the JVM's exit"
            )),
            false => Ok(String::new()),
        }
    }

    /// Creates the engine of `event`, adds its capabilities and starts it (now when the VM
    /// is live or the engine does not need it to be; else at VMInit). `started` are the
    /// engines of its recording started before it.
    fn start_engine(
        &self,
        state: &State,
        started: &[Running],
        event: Event,
        options: &Options,
        phase_live: bool,
    ) -> Result<Running, String> {
        let mut engine = engine::create(event);
        let report = self
            .env
            .add_capabilities(&engine.capabilities())
            .map_err(|e| e.to_string())?;
        // On failure, give back what no running engine holds too.
        let give_back = || {
            let unused = self.unused_besides(state, started, &report.granted);
            let _ = self.env.relinquish_capabilities(&unused);
            self.watch_idle_core();
        };
        if !report.refused.is_empty() {
            give_back();
            return Err(format!(
                "the JVM refused capabilities the {event} engine needs ({report})"
            ));
        }
        let live = !options.needs_live_phase(event) || phase_live;
        if live {
            if let Err(e) = engine.start(&self.context(), options) {
                give_back();
                return Err(e);
            }
        }
        Ok(Running {
            event,
            engine,
            holds: engine::holds(event, options),
            capabilities: report.granted,
            live,
        })
    }

    /// The capabilities of `capabilities` no running engine holds: none of the state's
    /// recordings (locked by the caller) nor `also`, the engines of a recording being
    /// started or stopped.
    fn unused_besides(
        &self,
        state: &State,
        also: &[Running],
        capabilities: &Capabilities,
    ) -> Capabilities {
        let unused = state
            .recordings
            .iter()
            .flat_map(|r| &r.engines)
            .chain(also)
            .fold(*capabilities, |left, other| {
                left.difference(&other.capabilities)
            });
        if sampling::core_up() {
            // The idle sampling core keeps its events on until it ends.
            unused.difference(&sampling::capabilities())
        } else {
            unused
        }
    }

    /// Ends the sampling core once it has been idle for its linger (`linger=`), and gives
    /// back its capabilities: a `jtap-linger` thread waits for that moment (one at a time),
    /// the agent's thread does it.
    fn watch_idle_core(&self) {
        let Some(agent) = AGENT.get() else {
            return;
        };
        if sampling::core_kept_for().is_none() || agent.core_watched.swap(true, Ordering::SeqCst) {
            return;
        }
        let spawned = std::thread::Builder::new()
            .name("jtap-linger".into())
            .spawn(move || {
                crate::thread::mark_own_thread();
                loop {
                    match sampling::core_kept_for() {
                        Some(left) if left.is_zero() => {
                            // The job checks again: a recording may start before it runs.
                            agent.on_agent_thread(Box::new(move || agent.end_idle_core()));
                            agent.core_watched.store(false, Ordering::SeqCst);
                            return;
                        }
                        // In steps, for a `linger=` shortened meanwhile.
                        Some(left) => std::thread::sleep(left.min(Duration::from_secs(1))),
                        // In use again: its last sampler's stop watches anew.
                        None => {
                            agent.core_watched.store(false, Ordering::SeqCst);
                            // Unless it stopped between the last look and the store.
                            if sampling::core_kept_for().is_none()
                                || agent.core_watched.swap(true, Ordering::SeqCst)
                            {
                                return;
                            }
                        }
                    }
                }
            });
        if let Err(e) = spawned {
            agent.core_watched.store(false, Ordering::SeqCst);
            log!("cannot start the jtap-linger thread: {e}");
        }
    }

    /// [`Agent::watch_idle_core`]'s job, on the agent's thread.
    fn end_idle_core(&self) {
        let state = self.state();
        if state.dead || !sampling::end_idle_core(self.env) {
            return;
        }
        let release = self.unused_besides(&state, &[], &sampling::capabilities());
        if let Err(e) = self.env.relinquish_capabilities(&release) {
            log!("{e}");
        }
        log!("sampler: code map dropped, unused since the last recording");
    }

    /// Stops the engines of a recording being started, last first.
    fn retire_all(&self, state: &State, mut engines: Vec<Running>) {
        while let Some(running) = engines.pop() {
            self.retire(state, &engines, running);
        }
    }

    /// Stops one engine (taken out of the state; `others` are the rest of its recording)
    /// and gives back the capabilities nothing else needs.
    fn retire(&self, state: &State, others: &[Running], mut running: Running) -> Report {
        let report = if running.live {
            running.engine.stop(&self.context())
        } else {
            running.report()
        };
        let release = self.unused_besides(state, others, &running.capabilities);
        if let Err(e) = self.env.relinquish_capabilities(&release) {
            log!("{e}");
        }
        log!("stopped the {} engine", running.event);
        self.watch_idle_core();
        report
    }

    /// Stops a recording taken out of the state: events off, callbacks and signal handlers
    /// drained, capabilities given back, results written to its `file=` (rendered by the
    /// file's extension). Returns the results and the recording's owner, to whom the caller
    /// sends them (or not) once the state is unlocked. Callers hold the state lock.
    fn stop_recording(
        &self,
        state: &State,
        mut recording: Recording,
    ) -> (Vec<Report>, Option<Arc<Session>>) {
        let ending = recording.end_period();
        let labels_wrap = labels_wrap_engines(&recording.options.events());
        if labels_wrap {
            recording.stop_labels();
        }
        let mut engines = std::mem::take(&mut recording.engines);
        let mut reports = Vec::new();
        while let Some(running) = engines.pop() {
            reports.push(self.retire(state, &engines, running));
        }
        reports.reverse();
        if !labels_wrap {
            recording.stop_labels();
        }
        recording.deliver(ending, &reports);
        if let Some(pusher) = &recording.pusher {
            log!("recording {}: {}", recording.id, pusher.summary());
        }
        log!("stopped recording {}", recording.id);
        (reports, recording.owner)
    }

    /// `loop=`: a thread that, every period of recording `id`, has the agent's thread (which
    /// the JVM knows: engines call JVMTI) write the results to the period's file and start
    /// the engines afresh; it ends with the recording.
    fn rotate_every_period(&'static self, id: u64) {
        let spawned = std::thread::Builder::new()
            .name(format!("jtap-loop-{id}"))
            .spawn(move || {
                crate::thread::mark_own_thread();
                self.rotate_until_done(id)
            });
        if let Err(e) = spawned {
            log!("recording {id}: cannot start its loop thread: {e}");
        }
    }

    /// The body of [`Agent::rotate_every_period`]'s thread.
    fn rotate_until_done(&'static self, id: u64) {
        loop {
            std::thread::sleep(Duration::from_millis(20));
            let mut state = self.state();
            let Some(recording) = state.recordings.iter_mut().find(|r| r.id == id) else {
                return;
            };
            let Some(rotation) = recording.rotation.as_mut() else {
                return;
            };
            let posted = Instant::now();
            if posted < rotation.due {
                continue;
            }
            let late = posted - rotation.due;
            // Not again until the job has run (it sets the next period's end).
            rotation.due = posted + Duration::from_secs(3600);
            drop(state);
            if late > SLOW_ROTATION {
                log!("recording {id}: period seen ending {late:?} late");
            }
            self.on_agent_thread(Box::new(move || {
                let queued = posted.elapsed();
                if queued > SLOW_ROTATION {
                    log!("recording {id}: period's end waited {queued:?} for the agent's thread");
                }
                let mut state = self.state();
                let Some(at) = state.recordings.iter().position(|r| r.id == id) else {
                    return;
                };
                if !self.rotate(&mut state, at) {
                    let recording = state.recordings.remove(at);
                    self.stop_recording(&state, recording);
                }
            }));
        }
    }

    /// Ends the period of the recording at `at`: each engine stopped (its results to the
    /// period's file) and started again. False when an engine could not start again.
    fn rotate(&self, state: &mut State, at: usize) -> bool {
        let context = self.context();
        let recording = &mut state.recordings[at];
        let ending = recording.end_period();
        let mut reports = Vec::new();
        let mut restarted = true;
        for running in recording.engines.iter_mut().filter(|r| r.live) {
            let began = Instant::now();
            reports.push(running.engine.stop(&context));
            let stopped = began.elapsed();
            if let Err(e) = running.engine.start(&context, &recording.options) {
                log!(
                    "recording {}: {} did not start again: {e}",
                    recording.id,
                    running.event
                );
                restarted = false;
            }
            let restarted_in = began.elapsed() - stopped;
            if stopped + restarted_in > SLOW_ROTATION {
                log!(
                    "recording {}: {} took {stopped:?} to stop and {restarted_in:?} to start again",
                    recording.id,
                    running.event
                );
            }
        }
        let began = Instant::now();
        recording.deliver(ending, &reports);
        let delivered = began.elapsed();
        if delivered > SLOW_ROTATION {
            log!(
                "recording {}: its period took {delivered:?} to write and push",
                recording.id
            );
        }
        restarted
    }

    fn context(&self) -> Context {
        Context {
            env: self.env,
            vm: self.vm,
        }
    }

    fn status(&self, state: &State) -> String {
        let version = self.env.version_number().unwrap_or(0);
        let mut text = format!(
            "jtap agent {VERSION} in JVM pid {} (JVMTI {}.{})\nloaded: {}, {:.1} s ago\ncommands served: {}\n",
            std::process::id(),
            (version >> 16) & 0xfff,
            (version >> 8) & 0xff,
            if self.at_startup { "at start-up" } else { "by attach" },
            self.loaded.elapsed().as_secs_f64(),
            self.commands.load(Ordering::SeqCst),
        );
        let held = self
            .env
            .capabilities()
            .map(|c| c.difference(&self.kept).names().join(", "))
            .unwrap_or_else(|e| e.to_string());
        text.push_str(&format!(
            "capabilities held: {}\n",
            if held.is_empty() { "none" } else { &held }
        ));
        if !self.kept.is_empty() {
            text.push_str(&format!(
                "capabilities kept from start-up: {}\n",
                self.kept.names().join(", ")
            ));
        }
        if let Some(left) = sampling::core_kept_for() {
            text.push_str(&format!(
                "code map kept for the next recording: {} s more (with {})\n",
                left.as_secs(),
                sampling::capabilities().names().join(", ")
            ));
        }
        if state.recordings.is_empty() {
            text.push_str("recordings: none");
        }
        for recording in &state.recordings {
            text.push_str(&format!(
                "recording {}: {} running for {:.1} s, {}\n",
                recording.id,
                recording.names(),
                recording.started.elapsed().as_secs_f64(),
                recording.owner_text(),
            ));
            if let Some(pusher) = &recording.pusher {
                text.push_str(&format!("  {}\n", pusher.summary()));
            }
            for report in recording.reports() {
                text.push_str(&report.summary());
                text.push('\n');
            }
        }
        text.trim_end().to_string()
    }

    fn version_text(&self) -> String {
        let version = self.env.version_number().unwrap_or(0);
        format!(
            "jtap agent {VERSION} (JVMTI {}.{})",
            (version >> 16) & 0xfff,
            (version >> 8) & 0xff
        )
    }

    fn vm_init(&'static self) {
        let mut state = self.state();
        let mut failed_recordings = Vec::new();
        for (i, recording) in state.recordings.iter_mut().enumerate() {
            let options = &recording.options;
            let error = recording
                .engines
                .iter_mut()
                .filter(|r| !r.live)
                .find_map(
                    |running| match running.engine.start(&self.context(), options) {
                        Ok(()) => {
                            running.live = true;
                            None
                        }
                        Err(e) => Some(format!(
                            "cannot start the {} engine at VMInit: {e}",
                            running.event
                        )),
                    },
                );
            if let Some(error) = error {
                log!("{error}");
                failed_recordings.push((i, error));
            }
        }
        for (i, error) in failed_recordings.into_iter().rev() {
            let recording = state.recordings.remove(i);
            let (_, owner) = self.stop_recording(&state, recording);
            if let Some(owner) = owner {
                owner.end(AGENT_RETURN_COMMAND_FAILED, &error);
            }
        }
        drop(state);
        let waiting = std::mem::take(&mut self.state().awaiting_init);
        for session in waiting {
            self.watch(session);
        }
        let _ = self.env.set_event_enabled(sys::JVMTI_EVENT_VM_INIT, false);
    }

    /// VMDeath: stop the recordings and flush their results, end all sessions, wait (briefly)
    /// for the watcher threads, and turn the remaining events and all callbacks off.
    fn vm_death(&self) {
        let mut state = self.state();
        state.dead = true;
        while let Some(recording) = state.recordings.pop() {
            let (reports, owner) = self.stop_recording(&state, recording);
            if let Some(owner) = owner {
                for report in &reports {
                    owner.send_report(report);
                }
                owner.end(AGENT_RETURN_OK, "the JVM is exiting");
            }
        }
        for session in std::mem::take(&mut state.awaiting_init) {
            session.end(AGENT_RETURN_OK, "the JVM is exiting");
        }
        drop(state);
        let deadline = Instant::now() + Duration::from_secs(1);
        while self.live_watchers.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = self.env.set_event_enabled(sys::JVMTI_EVENT_VM_DEATH, false);
        if let Err(e) = self
            .env
            .set_event_callbacks(&sys::jvmtiEventCallbacks::default())
        {
            log!("{e}");
        }
        log!("VM death: flushed and stopped");
    }
}

impl State {
    /// The recording `session` started, if it still runs.
    fn recording_of(&self, session: &Arc<Session>) -> Option<&Recording> {
        self.recordings
            .iter()
            .find(|r| r.owner.as_ref().is_some_and(|o| Arc::ptr_eq(o, session)))
    }

    /// Takes the recording `session` started out of the state, if it still runs.
    fn take_recording_of(&mut self, session: &Arc<Session>) -> Option<Recording> {
        let i = self
            .recordings
            .iter()
            .position(|r| r.owner.as_ref().is_some_and(|o| Arc::ptr_eq(o, session)))?;
        Some(self.recordings.remove(i))
    }

    /// What already holds one of `resources`, described for the refusal, if anything does.
    fn holding(&self, resources: &[Resource]) -> Option<String> {
        self.recordings.iter().find_map(|recording| {
            let running = recording
                .engines
                .iter()
                .find(|r| r.holds.iter().any(|h| resources.contains(h)))?;
            Some(format!(
                "the {} engine is already running (recording {}, {}, for {:.1} s)",
                running.engine.name(),
                recording.id,
                recording.owner_text(),
                recording.started.elapsed().as_secs_f64()
            ))
        })
    }

    /// The recordings `stop` and `dump` act on: those recording `event`, or without one every
    /// recording but traces (which `stop,event=trace` ends).
    fn chosen(&self, event: Option<Event>) -> Vec<usize> {
        (0..self.recordings.len())
            .filter(|&i| {
                let events = self.recordings[i].engines.iter().map(|r| r.event);
                match event {
                    Some(event) => events.clone().any(|e| e == event),
                    None => events.clone().all(|e| e != Event::Trace),
                }
            })
            .collect()
    }
}

/// What `stop` or `dump` says when nothing is chosen.
fn nothing_running(action: &str, event: Option<Event>) -> String {
    match event {
        Some(event) => format!("nothing to {action}: no {event} recording is running"),
        None => format!("nothing to {action}: no profile is running"),
    }
}

/// Results go to `file` when given (rendered by its extension; the reply says where); else
/// profiles and records go to the asking client as their frames, text into the reply.
fn deliver_reports(
    reports: &[Report],
    file: Option<&str>,
    channel: Option<&Channel>,
) -> Result<String, Failure> {
    if let Some(path) = file {
        let written = write_reports(path, reports).map_err(failed)?;
        return Ok(format!("wrote {}", written.join(", ")));
    }
    let mut text = Vec::new();
    for report in reports {
        match (report, channel) {
            (Report::Profile(profile), Some(channel)) => channel
                .send(&Frame::Profile(jtap_protocol::wire::encode_profile(
                    profile,
                )))
                .map_err(|e| failed(e.to_string()))?,
            (Report::Record(record), Some(channel)) => channel
                .send(&Frame::Record(record.encode()))
                .map_err(|e| failed(e.to_string()))?,
            (report, _) => text.push(report.summary()),
        }
    }
    Ok(text.join("\n"))
}

/// A record goes to `file` as text when given (and the reply says where), else to the asking
/// client as data (into the reply as text without a channel).
fn deliver_record(
    record: &Record,
    file: Option<&str>,
    channel: Option<&Channel>,
) -> Result<String, Failure> {
    match (file, channel) {
        (Some(path), _) => {
            std::fs::write(path, format!("{}\n", record.to_text()))
                .map_err(|e| failed(format!("cannot write {path}: {e}")))?;
            Ok(format!("wrote {path}"))
        }
        (None, Some(channel)) => {
            channel
                .send(&Frame::Record(record.encode()))
                .map_err(|e| failed(e.to_string()))?;
            Ok(String::new())
        }
        (None, None) => Ok(record.to_text()),
    }
}

extern "C" fn on_vm_init(_env: *mut sys::jvmtiEnv, _jni: *mut sys::JNIEnv, _thread: sys::jthread) {
    crate::callback::guard_callback(|| {
        if let Some(agent) = AGENT.get() {
            agent.vm_init();
        }
    })
}

extern "C" fn on_vm_death(_env: *mut sys::jvmtiEnv, _jni: *mut sys::JNIEnv) {
    crate::callback::guard_callback(|| {
        if let Some(agent) = AGENT.get() {
            agent.vm_death();
        }
    })
}
