//! One command's conversation with the agent: the attach `load` that hands it the command
//! and the channel's path, the agent connecting back, and its frames read to the command's
//! end — results to the caller, notes to stderr.

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use jtap_attach::{load_return_code, AttachOptions, Request, VirtualMachine, V1_ARG_MAX};
use jtap_profile::{ExportOptions, Format};
use jtap_protocol::records::Record;
use jtap_protocol::{
    describe_return_code, read_frame, Action, Ended, Event, Frame, Options,
    AGENT_RETURN_VERSION_MISMATCH, VERSION,
};

use crate::channel::ChannelListener;
use crate::library::{load_failed, place_library};
use crate::AgentError;

/// Profile, progress, started and note frames go to this callback when one is given (see
/// [`Conversation::finish`]).
pub type FrameSink<'a> = Option<&'a mut dyn FnMut(Frame) -> anyhow::Result<()>>;

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
    pub(crate) engine_started: Arc<OnceLock<Instant>>,
}

/// Asks the agent, on an open [`Conversation`], to stop what that conversation started; the
/// results come back on the conversation.
pub struct Stopper(pub(crate) UnixStream);

impl Stopper {
    /// Sends `Stop`.
    pub fn stop(&self) -> anyhow::Result<()> {
        Frame::Stop
            .write_to(&mut &self.0)
            .map_err(|e| AgentError::Channel(format!("sending stop: {e}")).into())
    }
}

impl Conversation {
    /// When the agent said the engine started (set by the reader once it comes).
    pub fn engine_start(&self) -> Arc<OnceLock<Instant>> {
        self.engine_started.clone()
    }

    /// Loads the agent into JVM `pid` if needed, hands it `options` with the attach `load`
    /// operation (or over the channel, when longer than the operation's argument), and waits
    /// for it to connect back.
    pub fn open(pid: u32, options: &Options, timeout: Duration) -> anyhow::Result<Conversation> {
        let mut vm = VirtualMachine::attach(pid, &AttachOptions { timeout })?;
        let process = vm.process().clone();
        let library = place_library(&process)?;
        let listener = ChannelListener::bind(Some(&process))?;
        let mut options = options.clone();
        options.channel = Some(listener.guest_path().to_string());
        options.client = Some(VERSION.to_string());
        let whole = options.to_string();
        // JDKs before 24 take 1 KiB per argument (a method plan of a few dozen patterns is
        // longer): the agent then reads the options from the channel.
        let rest = whole.len() > V1_ARG_MAX;
        let loaded = match rest {
            true => Options {
                channel: options.channel.clone(),
                client: options.client.clone(),
                log: options.log.clone(),
                debug: options.debug,
                rest: true,
                ..Options::default()
            }
            .to_string(),
            false => whole.clone(),
        };
        let request = Request::new("load", [library.guest_path.clone(), "true".into(), loaded]);
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
            (Some(stream), _) if rest => {
                Frame::Options(whole)
                    .write_to(&mut &stream)
                    .map_err(|e| AgentError::Channel(format!("sending the options: {e}")))?;
                Ok(Conversation::from_stream(stream))
            }
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
    /// progress, started and (once printed) note frames to `frames` when given (otherwise a
    /// profile is printed as its text report, and progress and the start are dropped).
    /// Returns why the command ended (for `start`, why its recording ended).
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
                Some(Frame::Hello { .. } | Frame::Stop | Frame::Options(_)) => {}
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
                    if let Some(sink) = &mut frames {
                        sink(Frame::Note(text))?;
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

fn one_line(text: &str, status: i32) -> String {
    let text = text.trim().replace('\n', " ");
    if text.is_empty() {
        format!("the JVM answered status {status}")
    } else {
        text
    }
}
