//! Exit codes: each failure class has its own, documented in docs/USAGE.md.
//! Successful attach operations exit with the JVM's own status code, as jattach does.

use jtap_attach::AttachError;

pub const USAGE: i32 = 2;
pub const NO_SUCH_PROCESS: i32 = 10;
pub const NOT_A_JVM: i32 = 11;
pub const PERMISSION_DENIED: i32 = 12;
pub const ATTACH_DISABLED: i32 = 13;
pub const LISTENER_TIMEOUT: i32 = 14;
pub const STALE_SOCKET: i32 = 15;
pub const INSECURE_SOCKET: i32 = 16;
pub const UNSUPPORTED: i32 = 17;
pub const PROTOCOL: i32 = 18;
pub const IO: i32 = 19;
/// jtap's agent could not be loaded, or its `Agent_OnAttach` failed.
pub const AGENT_LOAD_FAILED: i32 = 20;
/// The agent in the JVM comes from another jtap release.
pub const AGENT_VERSION_MISMATCH: i32 = 21;
/// JDK 21+ started with -XX:-EnableDynamicAgentLoading.
pub const DYNAMIC_AGENT_LOADING_DISABLED: i32 = 22;
/// The agent ran the command and it failed.
pub const AGENT_COMMAND_FAILED: i32 = 23;
/// The control channel to the agent failed.
pub const AGENT_CHANNEL: i32 = 24;
pub const INTERRUPTED: i32 = 130;
/// Any other failure.
pub const FAILURE: i32 = 1;

/// A command line that cannot be run as given: exits with [`USAGE`], like clap's own errors.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// A [`UsageError`] as an `anyhow` error.
pub fn usage(message: impl Into<String>) -> anyhow::Error {
    UsageError(message.into()).into()
}

/// The exit code for an error, looking for an attach error among its causes.
pub fn code_for(err: &anyhow::Error) -> i32 {
    use jtap_client::AgentError;
    if err.chain().any(|e| e.is::<UsageError>()) {
        return USAGE;
    }
    if let Some(agent_error) = err.chain().find_map(|e| e.downcast_ref::<AgentError>()) {
        return match agent_error {
            AgentError::BadOptions(_) => USAGE,
            AgentError::LibraryNotFound(_) | AgentError::LoadFailed { .. } => AGENT_LOAD_FAILED,
            AgentError::VersionMismatch(_) => AGENT_VERSION_MISMATCH,
            AgentError::DynamicLoadingDisabled(_) => DYNAMIC_AGENT_LOADING_DISABLED,
            AgentError::CommandFailed(_) => AGENT_COMMAND_FAILED,
            AgentError::Channel(_) => AGENT_CHANNEL,
        };
    }
    match err.chain().find_map(|e| e.downcast_ref::<AttachError>()) {
        Some(AttachError::NoSuchProcess(_)) => NO_SUCH_PROCESS,
        Some(AttachError::NotAJvm { .. }) => NOT_A_JVM,
        Some(AttachError::PermissionDenied(_)) => PERMISSION_DENIED,
        Some(AttachError::AttachDisabled { .. }) => ATTACH_DISABLED,
        Some(AttachError::ListenerTimeout { .. }) => LISTENER_TIMEOUT,
        Some(AttachError::StaleSocket { .. }) => STALE_SOCKET,
        Some(AttachError::InsecureSocket { .. }) => INSECURE_SOCKET,
        Some(AttachError::Unsupported(_)) => UNSUPPORTED,
        Some(AttachError::Protocol(_)) => PROTOCOL,
        Some(AttachError::Io { .. }) => IO,
        None => FAILURE,
    }
}

/// Lets a closed stdout end jtap quietly, as it ends `cat` or `grep` (`jtap ps | head -1`):
/// Rust ignores SIGPIPE, which turns the write into a panic. What jtap started in a JVM is
/// stopped by the agent when the control channel closes with the process.
pub fn die_quietly_on_closed_pipes() {
    use nix::sys::signal::{signal, SigHandler, Signal};
    // SAFETY: restores the default disposition, as at exec; no handler runs Rust code.
    let _ = unsafe { signal(Signal::SIGPIPE, SigHandler::SigDfl) };
}

/// Maps a JVM status code to a process exit code (negative codes wrap as in C).
pub fn from_jvm_status(status: i32) -> i32 {
    status & 0xff
}
