//! jtap's side of its agent: everything a command needs to have the agent inside a JVM do
//! something and hear back, so that the `jtap` binary only parses arguments and prints.
//!
//! - [`locate_library`] and `library`: finding the agent library and placing it where the
//!   JVM can open it.
//! - [`Conversation`]: loading the agent with the attach `load` operation (or [`launch`]ing
//!   a JVM with it), and reading the frames it streams back over the control channel
//!   ([`ChannelListener`]) to the command's end; [`run`], [`run_with`] and [`stop`] for
//!   one-shot commands.
//! - [`supervise`]: a session this client owns, ended on its expected end, on Ctrl-C, when
//!   the caller says so, or when the agent is overdue.
//! - [`interrupt`]: the one Ctrl-C handler, which cleans up what jtap left in a target's
//!   `/tmp` and hands the first Ctrl-C to a running session.
//!
//! The channel is a UNIX socket this process listens on, created in the *target's* `/tmp`
//! (reached through `/proc/<pid>/root/tmp`, so containers work) with an unguessable name,
//! mode 0600 and the target's owner; listening starts only after the permissions are set.
//! The agent connects to its in-namespace path (`channel=/tmp/jtap-<random>.sock`); we accept
//! only a peer whose SO_PEERCRED pid is the target, and remove the file as soon as it connected.
//! The agent runs the command on a thread of its own, so the `load` operation returns at once
//! and the replies are read as they are written, whatever their size ([`Conversation`]). A
//! client that owns an engine ends it with `Stop` on the same connection ([`supervise`]).

#![deny(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]

mod channel;
mod conversation;
mod files;
pub mod interrupt;
pub mod launch;
mod library;
mod session;

pub use channel::ChannelListener;
pub use conversation::{run, run_with, stop, Conversation, FrameSink, Stopper};
pub use library::locate_library;
pub use session::{supervise, Asked};

/// File name of the agent library.
pub const LIBRARY_NAME: &str = "libjtap_agent.so";

/// Failures of talking to the agent, each with its own exit code (the CLI's `exit.rs`).
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
    LoadFailed {
        /// The JVM.
        pid: u32,
        /// What went wrong, as the JVM or the agent said it.
        reason: String,
    },
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
