//! The one agent of this library: created by the first `Agent_OnLoad`/`Agent_OnAttach`, reached
//! again by every later attach. Runs commands, owns the engine and the sessions.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
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
}

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
                Ok(text) => out_frames(&text)
                    .chain([Frame::Done {
                        code,
                        message: String::new(),
                    }])
                    .collect(),
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
                let report = self.stop_running(running, "stopped by another jtap client", false);
                drop(state);
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
            owner: owner.clone(),
            file: options.file.clone(),
            capabilities: report.granted,
        });
        if let Some(session) = owner {
            session.send_text(format!(
                "started the {} engine; stop with `jtap load <pid> stop` or by ending this client",
                state
                    .engine
                    .as_ref()
                    .map_or(event.name(), |r| r.engine.name())
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
    /// file's extension) and, with `to_owner`, sent to its owner. Returns the results.
    /// Callers hold the state lock throughout.
    fn stop_running(&self, mut running: Running, why: &str, to_owner: bool) -> Report {
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
        if let Some(owner) = &running.owner {
            if to_owner {
                match &report {
                    Report::Profile(profile) => owner.send_profile(profile),
                    Report::Text(text) => owner.send_text(text.clone()),
                }
            }
            owner.end(AGENT_RETURN_OK, why);
        }
        log!("stopped the {} engine: {why}", running.event);
        report
    }

    fn context(&self) -> Context {
        Context {
            env: self.env,
            vm: self.vm,
        }
    }

    /// The watcher saw `session`'s client go away: stop what it started.
    pub fn client_gone(&self, session: &Arc<Session>) {
        let mut state = self.state();
        let owned = state
            .engine
            .as_ref()
            .and_then(|r| r.owner.as_ref())
            .is_some_and(|o| Arc::ptr_eq(o, session));
        if owned {
            let running = state.engine.take().expect("checked above");
            self.stop_running(running, "client went away", false);
        }
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
            self.stop_running(running, "the JVM is exiting", true);
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

/// `text` as Out frames, cut at line ends so that each fits in a frame (printed one per line,
/// they give back the text).
fn out_frames(text: &str) -> impl Iterator<Item = Frame> + '_ {
    const CHUNK: usize = 1 << 19; // 512 KiB: text frames stay small whatever MAX_FRAME allows
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut end = rest.len();
        if end > CHUNK {
            end = CHUNK;
            while !rest.is_char_boundary(end) {
                end -= 1;
            }
            end = rest[..end].rfind('\n').filter(|&nl| nl > 0).unwrap_or(end);
        }
        let (chunk, tail) = rest.split_at(end);
        rest = tail.strip_prefix('\n').unwrap_or(tail);
        Some(Frame::Out(chunk.to_string()))
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_replies_are_cut_into_frames_at_line_ends() {
        let line = "x".repeat(999);
        let text = vec![line.as_str(); 2000].join("\n");
        let frames: Vec<Frame> = out_frames(&text).collect();
        assert!(frames.len() > 1);
        let texts: Vec<String> = frames
            .into_iter()
            .map(|f| match f {
                Frame::Out(t) => t,
                other => panic!("{other:?}"),
            })
            .collect();
        assert!(texts
            .iter()
            .all(|t| t.len() <= jtap_protocol::MAX_FRAME / 2 && !t.ends_with('\n')));
        assert_eq!(texts.join("\n"), text);
        assert_eq!(out_frames("short").count(), 1);
        assert_eq!(out_frames("").count(), 0);
    }
}
