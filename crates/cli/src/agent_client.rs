//! Talking to jtap's agent inside a JVM: finding the agent library and placing it where the
//! JVM can open it, loading it with the attach `load` operation, and the control channel over
//! which the agent's replies stream back.
//!
//! The channel is a UNIX socket this process listens on, created in the *target's* `/tmp`
//! (reached through `/proc/<pid>/root/tmp`, so containers work) with an unguessable name,
//! mode 0600 and the target's owner; listening starts only after the permissions are set.
//! The agent connects to its in-namespace path (`channel=/tmp/jtap-<random>.sock`); we accept
//! only a peer whose SO_PEERCRED pid is the target, and remove the file as soon as it connected.
//! The agent runs the command on a thread of its own, so the `load` operation returns at once
//! and the replies are read as they are written, whatever their size ([`Conversation`]). A
//! client that owns an engine ends it with `Stop` on the same connection ([`supervise`]).

use std::ffi::CString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use jtap_attach::process::Process;
use jtap_attach::{load_return_code, AttachOptions, Request, VirtualMachine};
use jtap_profile::{ExportOptions, Format};
use jtap_protocol::records::Record;
use jtap_protocol::{
    describe_return_code, read_frame, Action, Ended, Event, Frame, Options,
    AGENT_RETURN_VERSION_MISMATCH, VERSION,
};
use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};

/// File name of the agent library.
pub const LIBRARY_NAME: &str = "libjtap_agent.so";

/// Failures of talking to the agent, each with its own exit code (see `exit.rs`).
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// No agent library where we look.
    #[error("cannot find {LIBRARY_NAME} (looked in {0}); set JTAP_AGENT to its path")]
    LibraryNotFound(String),
    /// The option string does not parse.
    #[error("bad agent options: {0}")]
    BadOptions(#[from] jtap_protocol::ParseError),
    /// JDK 21+ started with `-XX:-EnableDynamicAgentLoading`.
    #[error(
        "JVM {0} refuses agents loaded by attach: it runs with -XX:-EnableDynamicAgentLoading \
         (restart it without that flag, or start the agent with `jtap load <options> -- java ...`)"
    )]
    DynamicLoadingDisabled(u32),
    /// The JVM did not load the agent, or the agent's `Agent_OnAttach` failed.
    #[error("loading the jtap agent into JVM {pid} failed: {reason}")]
    LoadFailed { pid: u32, reason: String },
    /// The agent and this jtap come from different releases.
    #[error("{0}")]
    VersionMismatch(String),
    /// The agent ran the command and reports a failure.
    #[error("agent: {0}")]
    CommandFailed(String),
    /// The control channel failed.
    #[error("control channel: {0}")]
    Channel(String),
}

/// Sockets and library copies created in a target's `/tmp`, removed on Ctrl-C as well.
static PENDING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn register_pending(path: &Path) {
    PENDING
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(path.to_path_buf());
}

fn unregister_pending(path: &Path) {
    PENDING
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|p| p != path);
    let _ = fs::remove_file(path);
}

/// Removes every socket or library copy this process left in a target's `/tmp` (for Ctrl-C).
pub fn remove_pending_files() {
    if let Ok(pending) = PENDING.try_lock() {
        for path in pending.iter() {
            let _ = fs::remove_file(path);
        }
    }
}

/// The agent library next to this executable, in `../lib`, or from `$JTAP_AGENT`.
pub fn locate_library() -> Result<PathBuf, AgentError> {
    let mut candidates = Vec::new();
    if let Some(path) = std::env::var_os("JTAP_AGENT") {
        candidates.push(PathBuf::from(path));
    }
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.canonicalize().ok()?.parent().map(Path::to_path_buf))
    {
        candidates.push(dir.join(LIBRARY_NAME));
        candidates.push(dir.join("../lib").join(LIBRARY_NAME));
    }
    match candidates.iter().find(|p| p.is_file()) {
        Some(found) => Ok(found.canonicalize().unwrap_or_else(|_| found.clone())),
        None => Err(AgentError::LibraryNotFound(
            candidates
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        )),
    }
}

/// The agent library as the target JVM sees it.
struct PlacedLibrary {
    /// Path inside the target's mount namespace.
    guest_path: String,
    /// A copy we made in the target's `/tmp`, removed once loaded (the mapping stays).
    copy: Option<PathBuf>,
}

impl Drop for PlacedLibrary {
    fn drop(&mut self) {
        if let Some(copy) = &self.copy {
            unregister_pending(copy);
        }
    }
}

/// The path of a jtap agent the JVM already has mapped: loading it again by that exact path
/// reaches the same library (and agent) instead of a second copy.
fn mapped_agent(process: &Process) -> Option<String> {
    let maps = fs::read_to_string(format!("/proc/{}/maps", process.pid)).ok()?;
    maps.lines().find_map(|line| {
        let path = line.split_whitespace().nth(5)?;
        let name = Path::new(path).file_name()?.to_str()?;
        (name == LIBRARY_NAME || (name.starts_with("jtap-agent-") && name.ends_with(".so")))
            .then(|| path.to_string())
    })
}

fn same_mount_namespace(process: &Process) -> bool {
    let ns = |pid: &str| fs::read_link(format!("/proc/{pid}/ns/mnt")).ok();
    ns("self").is_some() && ns("self") == ns(&process.pid.to_string())
}

/// Makes the library loadable by the target: the mapped agent if there is one, our own
/// file when the target shares our filesystem and user, else a private copy in its `/tmp`.
fn place_library(process: &Process) -> Result<PlacedLibrary, AgentError> {
    if let Some(path) = mapped_agent(process) {
        return Ok(PlacedLibrary {
            guest_path: path,
            copy: None,
        });
    }
    let library = locate_library()?;
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    if same_mount_namespace(process) && process.uid == euid {
        return Ok(PlacedLibrary {
            guest_path: library.display().to_string(),
            copy: None,
        });
    }
    let bytes = fs::read(&library)
        .map_err(|e| load_failed(process, format!("reading {}: {e}", library.display())))?;
    let name = format!("jtap-agent-{VERSION}-{}.so", random_hex(8));
    let host_path = process.tmp_dir().join(&name);
    register_pending(&host_path);
    let placed = PlacedLibrary {
        guest_path: format!("/tmp/{name}"),
        copy: Some(host_path.clone()),
    };
    let mut file: File = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&host_path)
        .map_err(|e| {
            load_failed(
                process,
                format!("copying the agent to {}: {e}", host_path.display()),
            )
        })?;
    file.write_all(&bytes)
        .map_err(|e| load_failed(process, format!("writing {}: {e}", host_path.display())))?;
    chown_to_target(&host_path, process)
        .map_err(|e| load_failed(process, format!("chown {}: {e}", host_path.display())))?;
    Ok(placed)
}

fn load_failed(process: &Process, reason: String) -> AgentError {
    AgentError::LoadFailed {
        pid: process.pid,
        reason,
    }
}

fn chown_to_target(path: &Path, process: &Process) -> io::Result<()> {
    let meta = fs::metadata(path)?;
    if meta.uid() == process.uid && meta.gid() == process.gid {
        return Ok(());
    }
    std::os::unix::fs::chown(path, Some(process.uid), Some(process.gid))
}

/// `n` random bytes from the kernel, in hex.
fn random_hex(n: usize) -> String {
    let mut bytes = vec![0u8; n];
    let filled = File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .is_ok();
    assert!(filled, "/dev/urandom is unreadable");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The listening end of a control channel.
pub struct ChannelListener {
    listener: UnixListener,
    host_path: PathBuf,
    guest_path: String,
}

impl ChannelListener {
    /// Listens on a fresh socket in the `/tmp` of `process` (None: our own `/tmp`), owned by
    /// the process's user (or ours), mode 0600.
    pub fn bind(process: Option<&Process>) -> Result<ChannelListener, AgentError> {
        let name = format!("jtap-{}.sock", random_hex(16));
        let dir = match process {
            Some(process) => process.tmp_dir(),
            None => std::env::temp_dir(),
        };
        // SAFETY: geteuid has no preconditions.
        sweep_stale_sockets(&dir, process.map_or(unsafe { libc::geteuid() }, |p| p.uid));
        let host_path = dir.join(&name);
        let guest_path = match process {
            Some(_) => format!("/tmp/{name}"),
            None => host_path.display().to_string(),
        };
        let fail = |what: &str, e: io::Error| {
            AgentError::Channel(format!("{what} {}: {e}", host_path.display()))
        };
        // SAFETY: plain socket creation; the fd is owned right away.
        let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(fail("creating a socket for", io::Error::last_os_error()));
        }
        // SAFETY: fd is a fresh socket nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let address = socket_address(&host_path).map_err(|e| fail("binding", e))?;
        // SAFETY: address is a sockaddr_un of the size we pass.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&address as *const libc::sockaddr_un).cast(),
                std::mem::size_of::<libc::sockaddr_un>() as u32,
            )
        };
        if rc != 0 {
            return Err(fail("binding", io::Error::last_os_error()));
        }
        register_pending(&host_path);
        let listener_path = host_path.clone();
        let cleanup = |e: AgentError| {
            unregister_pending(&listener_path);
            e
        };
        fs::set_permissions(&host_path, fs::Permissions::from_mode(0o600))
            .map_err(|e| cleanup(fail("chmod", e)))?;
        if let Some(process) = process {
            chown_to_target(&host_path, process).map_err(|e| cleanup(fail("chown", e)))?;
        }
        // Listening starts only now that nobody else may connect.
        // SAFETY: fd is our bound socket.
        if unsafe { libc::listen(fd.as_raw_fd(), 4) } != 0 {
            return Err(cleanup(fail("listening on", io::Error::last_os_error())));
        }
        Ok(ChannelListener {
            listener: UnixListener::from(fd),
            host_path,
            guest_path,
        })
    }

    /// The socket's path inside the target's mount namespace (for `channel=`).
    pub fn guest_path(&self) -> &str {
        &self.guest_path
    }

    /// Waits up to `timeout` for the agent to connect; `peer_ok` vets the peer's (pid, uid).
    /// Connections from anyone else are dropped. `give_up` ends the wait early (e.g. the
    /// launched JVM exited).
    pub fn accept(
        self,
        timeout: Duration,
        peer_ok: impl Fn(u32, u32) -> bool,
        give_up: impl Fn() -> bool,
    ) -> Result<Option<UnixStream>, AgentError> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || give_up() {
                return Ok(None);
            }
            let mut poll = libc::pollfd {
                fd: self.listener.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd for the duration of the call.
            let ready = unsafe { libc::poll(&mut poll, 1, left.as_millis().clamp(1, 100) as i32) };
            if ready <= 0 {
                continue;
            }
            let (stream, _) = self
                .listener
                .accept()
                .map_err(|e| AgentError::Channel(format!("accept: {e}")))?;
            let (pid, uid) = peer_credentials(&stream)
                .map_err(|e| AgentError::Channel(format!("SO_PEERCRED: {e}")))?;
            if peer_ok(pid, uid) {
                return Ok(Some(stream));
            }
        }
    }
}

impl Drop for ChannelListener {
    fn drop(&mut self) {
        unregister_pending(&self.host_path);
    }
}

/// How old a channel socket nobody listens on must be before [`sweep_stale_sockets`] takes it
/// for a leftover (a younger one may belong to a jtap that bound it and listens any moment).
const STALE_AFTER: Duration = Duration::from_secs(60);

/// Removes channel sockets left in `dir` by jtap clients that were killed before their agent
/// connected: `jtap-<32 hex digits>.sock` files owned by `uid`, older than [`STALE_AFTER`],
/// that refuse connections.
fn sweep_stale_sockets(dir: &Path, uid: u32) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(hex) = name
            .to_str()
            .and_then(|n| n.strip_prefix("jtap-"))
            .and_then(|n| n.strip_suffix(".sock"))
        else {
            continue;
        };
        if hex.len() != 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            continue;
        }
        let path = entry.path();
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        let old = meta
            .modified()
            .ok()
            .and_then(|m| m.elapsed().ok())
            .is_some_and(|age| age >= STALE_AFTER);
        use std::os::unix::fs::FileTypeExt;
        if meta.uid() != uid || !meta.file_type().is_socket() || !old {
            continue;
        }
        if matches!(UnixStream::connect(&path), Err(e) if e.kind() == io::ErrorKind::ConnectionRefused)
        {
            let _ = fs::remove_file(&path);
        }
    }
}

fn socket_address(path: &Path) -> io::Result<libc::sockaddr_un> {
    // SAFETY: sockaddr_un is plain data; all zeroes is a valid value.
    let mut address: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    address.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| io::ErrorKind::InvalidInput)?;
    let bytes = bytes.as_bytes_with_nul();
    if bytes.len() > address.sun_path.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "socket path too long",
        ));
    }
    for (dst, src) in address.sun_path.iter_mut().zip(bytes) {
        *dst = *src as libc::c_char;
    }
    Ok(address)
}

fn peer_credentials(stream: &UnixStream) -> io::Result<(u32, u32)> {
    let cred = getsockopt(stream, PeerCredentials)?;
    Ok((cred.pid() as u32, cred.uid()))
}

/// Profile and progress frames go to this callback when one is given (see
/// [`Conversation::finish`]).
pub type FrameSink<'a> = Option<&'a mut dyn FnMut(Frame) -> anyhow::Result<()>>;

/// How long after its expected end (its `duration=`) an engine may take to end before this
/// client asks for the stop itself.
const END_GRACE: Duration = Duration::from_secs(5);
/// How long the agent gets, once asked to stop, to send the results and end.
const STOP_WAIT: Duration = Duration::from_secs(120);
/// How long an engine may take to start (a busy JVM, the first recording's symbol tables
/// and code map) before the time it took counts against its duration.
const START_WAIT: Duration = Duration::from_secs(60);
/// How long a `load` refused before JVMTI's live phase (a JVM still starting) is retried.
const LIVE_WAIT: Duration = Duration::from_secs(10);

/// Sends `options` to the jtap agent in JVM `pid` (loading it first if needed) and streams its
/// reply to `out` until the command ends. For `start`, that is when the engine stops.
pub fn run(
    pid: u32,
    options: &Options,
    timeout: Duration,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    run_with(pid, options, timeout, out, None)
}

/// Stops the recordings of `event` running in JVM `pid` (through a connection of its own)
/// and writes the agent's reply to `out`, profile frames to `frames`.
pub fn stop(
    pid: u32,
    event: Event,
    timeout: Duration,
    out: &mut dyn Write,
    frames: FrameSink<'_>,
) -> anyhow::Result<()> {
    let options = Options {
        event: Some(event),
        ..Options::default().with_action(Action::Stop)
    };
    run_with(pid, &options, timeout, out, frames)
}

/// [`run`], handing profile and progress frames to `frames`.
pub fn run_with(
    pid: u32,
    options: &Options,
    timeout: Duration,
    out: &mut dyn Write,
    frames: FrameSink<'_>,
) -> anyhow::Result<()> {
    Conversation::open(pid, options, timeout)?
        .finish(out, frames)
        .map(drop)
}

/// One command's connected control channel: the agent streams its replies on it, and takes
/// a [`Stopper`]'s `Stop` on it.
pub struct Conversation {
    stream: UnixStream,
    /// When the agent said its engines started (`Frame::Started`): a `-d` duration counts
    /// from then, not from the connection (starting can take seconds on a large program).
    engine_started: Arc<OnceLock<Instant>>,
}

/// Asks the agent, on an open [`Conversation`], to stop what that conversation started; the
/// results come back on the conversation.
pub struct Stopper(UnixStream);

impl Stopper {
    /// Sends `Stop`.
    pub fn stop(&self) -> anyhow::Result<()> {
        Frame::Stop
            .write_to(&mut &self.0)
            .map_err(|e| AgentError::Channel(format!("sending stop: {e}")).into())
    }
}

impl Conversation {
    /// Loads the agent into JVM `pid` if needed, hands it `options` with the attach `load`
    /// operation, and waits for it to connect back.
    pub fn open(pid: u32, options: &Options, timeout: Duration) -> anyhow::Result<Conversation> {
        let mut vm = VirtualMachine::attach(pid, &AttachOptions { timeout })?;
        let process = vm.process().clone();
        let library = place_library(&process)?;
        let listener = ChannelListener::bind(Some(&process))?;
        let mut options = options.clone();
        options.channel = Some(listener.guest_path().to_string());
        options.client = Some(VERSION.to_string());
        let request = Request::new(
            "load",
            [
                library.guest_path.clone(),
                "true".into(),
                options.to_string(),
            ],
        );
        // A JVM answers attaches a little before JVMTI's live phase, in which JDK 21+ refuses
        // `load` (older JDKs load, and the agent waits for the phase): asked again until then.
        let asked = Instant::now();
        let (text, status) = loop {
            let mut reply = vm.execute(&request)?;
            let text = reply.output_to_string()?;
            if text.contains("only permitted in the live phase") && asked.elapsed() < LIVE_WAIT {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            break (text, reply.status);
        };
        drop(library);
        if text.contains("Dynamic agent loading is not enabled") {
            return Err(AgentError::DynamicLoadingDisabled(pid).into());
        }
        let return_code = load_return_code(&text);
        // The agent connects before `load` returns (it runs the command on a thread of its
        // own), so the connection waits in the backlog.
        let target = process.pid;
        let stream = listener.accept(
            Duration::from_millis(500),
            |peer, _| peer == target,
            || false,
        )?;
        match (stream, return_code) {
            (Some(stream), _) => Ok(Conversation::from_stream(stream)),
            (None, Some(0)) => {
                Err(AgentError::Channel("the agent did not connect back".into()).into())
            }
            (None, Some(code)) => Err(load_failed(
                &process,
                format!("return code {code}: {}", describe_return_code(code)),
            )
            .into()),
            (None, None) => Err(load_failed(&process, one_line(&text, status)).into()),
        }
    }

    /// The conversation over a stream the agent connected (launch mode).
    pub fn from_stream(stream: UnixStream) -> Conversation {
        Conversation {
            stream,
            engine_started: Arc::default(),
        }
    }

    /// A handle that asks the agent to stop, usable while another thread reads.
    pub fn stopper(&self) -> anyhow::Result<Stopper> {
        let stream = self
            .stream
            .try_clone()
            .map_err(|e| AgentError::Channel(format!("cloning the channel: {e}")))?;
        Ok(Stopper(stream))
    }

    /// Reads the agent's frames until its `Done`: results to `out`, notes to stderr, profile,
    /// progress and started frames to `frames` when given (otherwise a profile is printed as
    /// its text report, and progress and the start are dropped). Returns why the command
    /// ended (for `start`, why its recording ended).
    pub fn finish(
        mut self,
        out: &mut dyn Write,
        mut frames: FrameSink<'_>,
    ) -> anyhow::Result<Ended> {
        loop {
            let frame =
                read_frame(&mut self.stream).map_err(|e| AgentError::Channel(e.to_string()))?;
            match frame {
                Some(Frame::Hello { version, .. }) if version != VERSION => {
                    return Err(AgentError::VersionMismatch(format!(
                        "version mismatch: the JVM runs jtap agent {version}, this is jtap {VERSION}; use jtap {version} (or restart the JVM)"
                    ))
                    .into());
                }
                Some(Frame::Hello { .. } | Frame::Stop) => {}
                Some(Frame::Started(engine)) => {
                    let _ = self.engine_started.set(Instant::now());
                    if let Some(sink) = &mut frames {
                        sink(Frame::Started(engine))?;
                    }
                }
                Some(Frame::Out(text)) => {
                    writeln!(out, "{}", text.trim_end_matches('\n'))?;
                    out.flush()?;
                }
                Some(Frame::Note(text)) => {
                    for line in text.lines() {
                        eprintln!("jtap: {line}");
                    }
                }
                Some(frame @ (Frame::Profile(_) | Frame::Progress { .. } | Frame::Record(_))) => {
                    match (&mut frames, frame) {
                        (Some(sink), frame) => sink(frame)?,
                        (None, Frame::Record(bytes)) => {
                            let record = Record::decode(&bytes).map_err(AgentError::Channel)?;
                            writeln!(out, "{}", record.to_text())?;
                            out.flush()?;
                        }
                        (None, Frame::Profile(bytes)) => {
                            let profile = jtap_protocol::wire::decode_profile(&bytes)
                                .map_err(AgentError::Channel)?;
                            out.write_all(
                                &Format::Text.render(&profile, &ExportOptions::default()),
                            )?;
                            out.flush()?;
                        }
                        (None, _) => {}
                    }
                }
                Some(Frame::Done { code: 0, message }) => return Ok(Ended::from_message(&message)),
                Some(Frame::Done {
                    code: AGENT_RETURN_VERSION_MISMATCH,
                    message,
                }) => return Err(AgentError::VersionMismatch(message).into()),
                Some(Frame::Done { message, .. }) => {
                    return Err(AgentError::CommandFailed(message).into())
                }
                None => {
                    return Err(AgentError::Channel(
                        "the agent closed the channel before finishing (did the JVM exit?)".into(),
                    )
                    .into())
                }
            }
        }
    }
}

/// Why [`supervise`] asked the agent to stop, if it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    /// It did not: the agent ended the engine (its duration or count, the JVM's exit).
    Nothing,
    /// Ctrl-C.
    Interrupted,
    /// The engine ran [`END_GRACE`] past its expected end.
    Overdue,
    /// `stop_now` said so.
    Told,
}

/// Reads an engine-owning conversation to its end with `read` on a thread of its own, while
/// this thread keeps the end in hand: on Ctrl-C (`interrupted`), when `stop_now` says so, or
/// when the engine runs [`END_GRACE`] past `expected_end` (counted from its start; from the
/// conversation's opening, plus [`START_WAIT`], while it has not started), it sends
/// `Stop`; if the agent then takes more than [`STOP_WAIT`] to end, it gives up with an error
/// rather than wait for ever.
/// `tick` runs every 50 ms (progress display). Returns what `read` returned and why a stop
/// was asked for.
pub fn supervise<T: Send>(
    conversation: Conversation,
    expected_end: Option<Duration>,
    interrupted: &AtomicBool,
    stop_now: &dyn Fn() -> bool,
    tick: &mut dyn FnMut(Duration),
    read: impl FnOnce(Conversation) -> anyhow::Result<T> + Send,
) -> anyhow::Result<(T, Asked)> {
    let stopper = conversation.stopper()?;
    let engine_started = conversation.engine_started.clone();
    let opened = Instant::now();
    let started = || engine_started.get().copied().unwrap_or(opened);
    std::thread::scope(|scope| {
        let reader = scope.spawn(move || read(conversation));
        let mut asked = Asked::Nothing;
        let mut asked_at = None;
        while !reader.is_finished() {
            if asked == Asked::Nothing {
                asked = if interrupted.load(Ordering::SeqCst) {
                    Asked::Interrupted
                } else if expected_end.is_some_and(|end| match engine_started.get() {
                    Some(at) => at.elapsed() >= end + END_GRACE,
                    // A start slowed down by a busy JVM does not count against the duration.
                    None => opened.elapsed() >= end + END_GRACE + START_WAIT,
                }) {
                    Asked::Overdue
                } else if stop_now() {
                    Asked::Told
                } else {
                    Asked::Nothing
                };
                if asked != Asked::Nothing {
                    asked_at = Some(Instant::now());
                    // A failure means the agent is gone, which the reader sees.
                    let _ = stopper.stop();
                }
            }
            if asked_at.is_some_and(|at| at.elapsed() >= STOP_WAIT) {
                // Unblock the reader, so that the scope can end.
                let _ = stopper.0.shutdown(std::net::Shutdown::Both);
                let _ = reader.join();
                return Err(AgentError::Channel(format!(
                    "the agent did not end the session within {} s of being asked to stop",
                    STOP_WAIT.as_secs()
                ))
                .into());
            }
            tick(started().elapsed());
            std::thread::sleep(Duration::from_millis(50));
        }
        let result = reader
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("the channel reader panicked")))?;
        Ok((result, asked))
    })
}

fn one_line(text: &str, status: i32) -> String {
    let text = text.trim().replace('\n', " ");
    if text.is_empty() {
        format!("the JVM answered status {status}")
    } else {
        text
    }
}
