//! The language spoken between the `jtap` CLI and the jtap agent inside a JVM.
//!
//! - [`options`]: the option/command grammar, in async-profiler style
//!   (`start,event=cpu,interval=10ms,file=/tmp/out.html`). One type, [`Options`], is parsed and
//!   printed here and nowhere else; `-agentpath:...=<options>`, the attach `load` operation and
//!   the CLI all use it.
//! - [`frame`]: framing of the control channel, the UNIX socket over which the agent streams
//!   replies back to the client that asked.
//! - [`wire`]: how a profile travels in a [`Frame::Profile`].
//! - [`records`]: the other results the agent sends as data ([`Frame::Record`]).
//! - [`label`]: request labels (`by=`), which entry calls label samples and by what key.
//! - [`trace`]: the tracing plan (`trace=`) that `jtap trace`, `calltree` and `monitor` build;
//!   [`guard`]: the text form of its guards on arguments.
//! - [`AGENT_RETURN_*`](AGENT_RETURN_OK): what `Agent_OnAttach` returns, i.e. the `return code: N`
//!   the CLI sees in the attach reply.

#![deny(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod frame;
pub mod guard;
pub mod label;
pub mod options;
pub mod records;
pub mod trace;
pub mod wire;

pub use frame::{read_frame, Ended, Frame, FrameError, MAX_MESSAGE, MAX_PIECE};
pub use options::{Action, Event, JavaStacks, NativeStacks, Options, ParseError, DEFAULT_LEAK_AGE};

/// The version of the jtap agent and CLI; both sides must be built from the same release.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// `Agent_OnAttach` / `Agent_OnLoad` succeeded.
pub const AGENT_RETURN_OK: i32 = 0;
/// The option string did not parse (the reason went over the channel when there was one).
pub const AGENT_RETURN_BAD_OPTIONS: i32 = 101;
/// The agent could not connect to the client's control channel.
pub const AGENT_RETURN_CHANNEL: i32 = 102;
/// The agent could not initialise itself (no JVMTI environment, ...).
pub const AGENT_RETURN_INIT: i32 = 103;
/// The command was understood but failed (details went over the channel).
pub const AGENT_RETURN_COMMAND_FAILED: i32 = 104;
/// The client's version differs from the agent's.
pub const AGENT_RETURN_VERSION_MISMATCH: i32 = 105;
/// A panic was caught at the FFI boundary.
pub const AGENT_RETURN_PANIC: i32 = 106;

/// A human-readable meaning for an agent return code.
pub fn describe_return_code(code: i32) -> &'static str {
    match code {
        AGENT_RETURN_OK => "ok",
        AGENT_RETURN_BAD_OPTIONS => "the agent rejected its options",
        AGENT_RETURN_CHANNEL => "the agent could not connect to jtap's control channel",
        AGENT_RETURN_INIT => "the agent could not initialise (no JVMTI environment?)",
        AGENT_RETURN_COMMAND_FAILED => "the command failed",
        AGENT_RETURN_VERSION_MISMATCH => "the agent's version differs from jtap's",
        AGENT_RETURN_PANIC => "the agent hit an internal error (panic caught)",
        _ => "unknown agent return code",
    }
}
