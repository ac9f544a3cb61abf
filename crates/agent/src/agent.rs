//! The one agent of this library: created by the first `Agent_OnLoad`/`Agent_OnAttach`, reached
//! again by every later attach. Runs commands, owns the engine and the sessions.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use jtap_jvmti::{sys, Capabilities, Env};
use jtap_protocol::{options::help_text, Action, Event, Frame, Options, VERSION};
use jtap_protocol::{
    AGENT_RETURN_COMMAND_FAILED, AGENT_RETURN_INIT, AGENT_RETURN_OK, AGENT_RETURN_VERSION_MISMATCH,
};

use crate::channel::Channel;
use crate::engine::{self, Context, Engine, Report};
use crate::sampling;
use crate::session::{self, Session};
use crate::thread::Vm;

/// A failed command: an `AGENT_RETURN_*` code and a one-line reason.
type Failure = (i32, String);

fn failed(message: impl Into<String>) -> Failure {
    (AGENT_RETURN_COMMAND_FAILED, message.into())
}

/// The agent.
pub struct Agent {
    vm: Vm,
    env: Env,
    at_startup: bool,
    loaded: Instant,
    commands: AtomicU64,
    sessions: AtomicU64,
    live_watchers: AtomicUsize,
    state: Mutex<State>,
    /// Where [`Agent::on_agent_thread`] sends jobs, once its thread runs.
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
}

/// Work for the agent's thread.
pub type Job = Box<dyn FnOnce() + Send>;

#[derive(Default)]
struct State {
    engine: Option<Running>,
    /// Sessions of engines started in `Agent_OnLoad`, whose watcher threads wait for VMInit.
    awaiting_init: Vec<Arc<Session>>,
    /// The VM has sent VMDeath: no more engines.
    dead: bool,
}

/// The running engine.
struct Running {
    event: Event,
    engine: Box<dyn Engine>,
    /// The `start` options, kept for engines whose start waits for VMInit.
    options: Options,
    /// False while the engine waits for the live phase (sampling engines given at start-up).
    live: bool,
    started: Instant,
    /// `duration=`: when the agent stops the engine itself and sends its owner the results.
    deadline: Option<Instant>,
    owner: Option<Arc<Session>>,
    file: Option<String>,
    capabilities: Capabilities,
}

/// Keeps the count of live watcher threads; dropping it counts one down.
pub struct WatcherTicket(&'static Agent);

impl Drop for WatcherTicket {
    fn drop(&mut self) {
        self.0.live_watchers.fetch_sub(1, Ordering::SeqCst);
    }
}

static AGENT: OnceLock<Agent> = OnceLock::new();
static INIT: Mutex<()> = Mutex::new(());

/// The agent, creating it on first use: JVMTI environment, callbacks, VMInit/VMDeath events.
pub fn init(vm: Vm, at_startup: bool) -> Result<&'static Agent, Failure> {
    let _once = INIT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(agent) = AGENT.get() {
        return Ok(agent);
    }
    crate::log::install_panic_hook();
    crate::entry::pin_library();
    let init_failed = |e: jtap_jvmti::Error| (AGENT_RETURN_INIT, e.to_string());
    // SAFETY: vm is the JavaVM the JVM passed to the entry point.
    let env = unsafe { Env::from_vm(vm.0, sys::JVMTI_VERSION_11) }.map_err(init_failed)?;
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
    if at_startup {
        env.set_event_enabled(sys::JVMTI_EVENT_VM_INIT, true)
            .map_err(init_failed)?;
    }
    env.set_event_enabled(sys::JVMTI_EVENT_VM_DEATH, true)
        .map_err(init_failed)?;
    let agent = Agent {
        vm,
        env,
        at_startup,
        loaded: Instant::now(),
        commands: AtomicU64::new(0),
        sessions: AtomicU64::new(0),
        live_watchers: AtomicUsize::new(0),
        state: Mutex::new(State::default()),
        jobs: Mutex::new(None),
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

/// The agent's JVMTI environment, once the agent exists (for event callbacks).
pub fn env() -> Option<Env> {
    AGENT.get().map(|agent| agent.env)
}

impl Agent {
    /// The JVM.
    pub fn vm(&self) -> Vm {
        self.vm
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts a watcher thread about to start.
    pub fn watcher_started(&'static self) -> WatcherTicket {
        self.live_watchers.fetch_add(1, Ordering::SeqCst);
        WatcherTicket(self)
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
    pub fn handle_in_background(&'static self, options: Options, channel: Channel) -> i32 {
        self.on_agent_thread(Box::new(move || {
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
                    crate::entry::guard_callback(job);
                }
            });
            match started {
                Ok(()) => *jobs = Some(sender),
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
                let running = state
                    .engine
                    .as_ref()
                    .ok_or_else(|| failed("nothing to dump: no engine is running"))?;
                let report = running.report();
                drop(state);
                deliver_report(&report, options.file.as_deref(), channel.as_ref())
            }
            Action::Stop => {
                // The state stays locked until the engine is fully stopped, so that no other
                // engine can start (and be switched off) in between.
                let mut state = self.state();
                let running = state
                    .engine
                    .take()
                    .ok_or_else(|| failed("nothing to stop: no engine is running"))?;
                let (report, owner) = self.stop_running(running);
                drop(state);
                if let Some(owner) = owner {
                    owner.end(AGENT_RETURN_OK, "stopped by another jtap client");
                }
                deliver_report(&report, options.file.as_deref(), channel.as_ref())
            }
            Action::Start => self.start(options, channel),
            Action::Histogram => {
                let histogram = crate::heap::histogram::run(self.vm, options).map_err(failed)?;
                deliver(&histogram, options.file.as_deref())
            }
        }
    }

    fn start(
        &'static self,
        options: &Options,
        channel: &mut Option<Channel>,
    ) -> Result<String, Failure> {
        let event = options
            .event
            .ok_or_else(|| failed("start needs event=<cpu|itimer|ctimer|wall|gc>"))?;
        let mut state = self.state();
        if state.dead {
            return Err(failed("the JVM is shutting down"));
        }
        if let Some(running) = &state.engine {
            return Err(failed(format!(
                "the {} engine is already running (for {:.1} s); stop it first",
                running.event,
                running.started.elapsed().as_secs_f64()
            )));
        }
        let mut engine = engine::create(event).map_err(failed)?;
        let wanted = engine.capabilities();
        let report = self
            .env
            .add_capabilities(&wanted)
            .map_err(|e| failed(e.to_string()))?;
        if !report.refused.is_empty() {
            let _ = self.env.relinquish_capabilities(&report.granted);
            return Err(failed(format!(
                "the JVM refused capabilities the {event} engine needs ({report})"
            )));
        }
        // Sampling and class rewriting need the live phase (loaded classes, JNI); at start-up
        // they begin at VMInit.
        let live = !options.needs_live_phase() || self.env.phase() == Ok(sys::JVMTI_PHASE_LIVE);
        if live {
            if let Err(e) = engine.start(&self.context(), options) {
                let _ = self.env.relinquish_capabilities(&report.granted);
                return Err(failed(e));
            }
        }
        // A detached engine belongs to nobody: the asking client just gets the reply.
        let owner = match options.detach {
            true => None,
            false => channel
                .take()
                .map(|c| Session::new(self.sessions.fetch_add(1, Ordering::SeqCst) + 1, c)),
        };
        if let Some(session) = &owner {
            engine.stream_to(session.clone());
        }
        state.engine = Some(Running {
            event,
            engine,
            options: options.clone(),
            live,
            started: Instant::now(),
            deadline: options.duration.map(|d| Instant::now() + d),
            owner: owner.clone(),
            file: options.file.clone(),
            capabilities: report.granted,
        });
        if let Some(session) = owner {
            session.send_frame(Frame::Started(
                state
                    .engine
                    .as_ref()
                    .map_or(event.name(), |r| r.engine.name())
                    .to_string(),
            ));
            if self.env.phase() == Ok(sys::JVMTI_PHASE_LIVE) {
                session::watch(self, session);
            } else {
                state.awaiting_init.push(session);
            }
        }
        log!("started the {event} engine");
        match options.detach {
            true => Ok(format!(
                "started the {} engine, detached: it runs until `stop` or the JVM's exit",
                state
                    .engine
                    .as_ref()
                    .map_or(event.name(), |r| r.engine.name())
            )),
            false => Ok(String::new()),
        }
    }

    /// Stops an engine taken out of the state: events off, callbacks and signal handlers
    /// drained, capabilities given back, results written to its `file=` (rendered by the
    /// file's extension). Returns the results and the engine's owner, to whom the caller
    /// sends them (or not) once the state is unlocked. Callers hold the state lock.
    fn stop_running(&self, mut running: Running) -> (Report, Option<Arc<Session>>) {
        let report = if running.live {
            running.engine.stop(&self.context())
        } else {
            running.report()
        };
        if let Err(e) = self.env.relinquish_capabilities(&running.capabilities) {
            log!("{e}");
        }
        if let Some(file) = &running.file {
            if let Err(e) =
                jtap_profile::write_atomically(std::path::Path::new(file), &report.render_for(file))
            {
                log!("cannot write {file}: {e}");
            }
        }
        log!("stopped the {} engine", running.event);
        (report, running.owner)
    }

    /// Stops the engine `session` owns, if it still runs, and sends the results to it; then
    /// ends the session with `why`: its client asked (`Stop`), or [`Agent::session_due`].
    pub fn end_session(&self, session: &Arc<Session>, why: &str) {
        let mut state = self.state();
        let report = state
            .take_engine_of(session)
            .map(|running| self.stop_running(running).0);
        drop(state);
        if let Some(report) = report {
            session.send_report(&report);
        }
        session.end(AGENT_RETURN_OK, why);
    }

    /// Why the engine `session` owns should end now without being asked (its `duration=`
    /// elapsed, or it finished on its own), if it should.
    pub fn session_due(&self, session: &Arc<Session>) -> Option<String> {
        let state = self.state();
        let running = state.engine_of(session)?;
        if running.deadline.is_some_and(|d| Instant::now() >= d) {
            return Some("duration elapsed".into());
        }
        running.live.then(|| running.engine.ended()).flatten()
    }

    fn context(&self) -> Context {
        Context {
            env: self.env,
            vm: self.vm,
        }
    }

    /// The watcher saw `session`'s client go away: stop what it started, silently.
    pub fn client_gone(&self, session: &Arc<Session>, _why: &str) {
        let mut state = self.state();
        if let Some(running) = state.take_engine_of(session) {
            self.stop_running(running);
        }
        drop(state);
        session.end(AGENT_RETURN_OK, "client went away");
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
            .map(|c| c.names().join(", "))
            .unwrap_or_else(|e| e.to_string());
        text.push_str(&format!(
            "capabilities held: {}\n",
            if held.is_empty() { "none" } else { &held }
        ));
        match &state.engine {
            None => text.push_str("engine: none"),
            Some(running) => text.push_str(&format!(
                "engine: {} running for {:.1} s, {}\n{}",
                running.event,
                running.started.elapsed().as_secs_f64(),
                match &running.owner {
                    Some(owner) => format!("owned by the client of session {}", owner.id),
                    None => "not owned by a client".into(),
                },
                running.report().summary()
            )),
        }
        text
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
        if let Some(running) = state.engine.as_mut().filter(|r| !r.live) {
            match running.engine.start(&self.context(), &running.options) {
                Ok(()) => running.live = true,
                Err(e) => {
                    log!("cannot start the {} engine at VMInit: {e}", running.event);
                    if let Some(owner) = &running.owner {
                        owner.end(AGENT_RETURN_COMMAND_FAILED, &e);
                    }
                    let running = state.engine.take().expect("checked above");
                    let _ = self.env.relinquish_capabilities(&running.capabilities);
                }
            }
        }
        drop(state);
        let waiting = std::mem::take(&mut self.state().awaiting_init);
        for session in waiting {
            session::watch(self, session);
        }
        let _ = self.env.set_event_enabled(sys::JVMTI_EVENT_VM_INIT, false);
    }

    /// VMDeath: stop the engine and flush its results, end all sessions, wait (briefly) for
    /// the watcher threads, and turn the remaining events and all callbacks off.
    fn vm_death(&self) {
        let mut state = self.state();
        state.dead = true;
        if let Some(running) = state.engine.take() {
            let (report, owner) = self.stop_running(running);
            if let Some(owner) = owner {
                owner.send_report(&report);
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
    /// The engine `session` started, if it still runs.
    fn engine_of(&self, session: &Arc<Session>) -> Option<&Running> {
        self.engine
            .as_ref()
            .filter(|r| r.owner.as_ref().is_some_and(|o| Arc::ptr_eq(o, session)))
    }

    /// Takes the engine `session` started out of the state, if it still runs.
    fn take_engine_of(&mut self, session: &Arc<Session>) -> Option<Running> {
        self.engine_of(session)?;
        self.engine.take()
    }
}

impl Running {
    /// The results so far (empty while waiting for VMInit).
    fn report(&self) -> Report {
        if self.live {
            self.engine.dump()
        } else {
            Report::Text(format!(
                "{}: waiting for the JVM to finish starting",
                self.event
            ))
        }
    }
}

/// Results go to `file` when given (rendered by its extension; the reply says where); else
/// a profile goes to the asking client as a profile frame, text into the reply.
fn deliver_report(
    report: &Report,
    file: Option<&str>,
    channel: Option<&Channel>,
) -> Result<String, Failure> {
    match (report, file, channel) {
        (_, Some(path), _) => {
            jtap_profile::write_atomically(std::path::Path::new(path), &report.render_for(path))
                .map_err(|e| failed(format!("cannot write {path}: {e}")))?;
            Ok(format!("wrote {path}"))
        }
        (Report::Profile(profile), None, Some(channel)) => {
            channel
                .send(&Frame::Profile(jtap_protocol::wire::encode_profile(
                    profile,
                )))
                .map_err(|e| failed(e.to_string()))?;
            Ok(String::new())
        }
        (report, None, _) => Ok(report.summary()),
    }
}

/// Results go to `file` when given (and the reply says where), else into the reply.
fn deliver(report: &str, file: Option<&str>) -> Result<String, Failure> {
    match file {
        Some(path) => {
            std::fs::write(path, format!("{report}\n"))
                .map_err(|e| failed(format!("cannot write {path}: {e}")))?;
            Ok(format!("wrote {path}"))
        }
        None => Ok(report.to_string()),
    }
}

extern "C" fn on_vm_init(_env: *mut sys::jvmtiEnv, _jni: *mut sys::JNIEnv, _thread: sys::jthread) {
    crate::entry::guard_callback(|| {
        if let Some(agent) = AGENT.get() {
            agent.vm_init();
        }
    })
}

extern "C" fn on_vm_death(_env: *mut sys::jvmtiEnv, _jni: *mut sys::JNIEnv) {
    crate::entry::guard_callback(|| {
        if let Some(agent) = AGENT.get() {
            agent.vm_death();
        }
    })
}
