//! Errors of discovery and attach, each mapped to a distinct kind the CLI turns into an exit code.

use std::io;

/// Everything that can go wrong between a pid and an attach operation's reply.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    /// No process with this pid exists.
    #[error("no process with pid {0}")]
    NoSuchProcess(u32),
    /// The process exists but is not a HotSpot JVM (no libjvm.so mapped, no perf data).
    #[error("process {pid} ({name}) is not a HotSpot JVM")]
    NotAJvm {
        /// The process's pid, in the caller's pid namespace.
        pid: u32,
        /// Its short command name (`Name:` of `/proc/<pid>/status`).
        name: String,
    },
    /// The caller may not inspect or attach to the process.
    #[error("permission denied: {0}")]
    PermissionDenied(String),
    /// The JVM refuses dynamic attach (a flag says so) or cannot be signalled safely.
    #[error("attach is disabled in JVM {pid}: {reason}")]
    AttachDisabled {
        /// The JVM's pid, in the caller's pid namespace.
        pid: u32,
        /// Why, as a clause that completes "attach is disabled in JVM `<pid>`: ".
        reason: String,
    },
    /// The attach listener did not come up in time.
    #[error("JVM {pid} did not open its attach socket within {timeout_ms} ms (started with -XX:+DisableAttachMechanism, or too busy to answer?)")]
    ListenerTimeout {
        /// The JVM's pid, in the caller's pid namespace.
        pid: u32,
        /// The attach timeout that ran out, in milliseconds.
        timeout_ms: u64,
    },
    /// The socket file exists but nothing listens on it: its JVM is gone.
    #[error(
        "stale attach socket {path}: no JVM listens on it (the JVM that created it has exited)"
    )]
    StaleSocket {
        /// The socket file, e.g. `/tmp/.java_pid<pid>`.
        path: String,
    },
    /// The socket file is not owned by the target's user or is accessible to others.
    #[error("refusing insecure attach socket {path}: {reason}")]
    InsecureSocket {
        /// The socket file as seen from the caller (through `/proc/<pid>/root` in containers).
        path: String,
        /// What is wrong with it: not a socket, wrong owner, or group/other permissions.
        reason: String,
    },
    /// The request cannot be expressed in a protocol the JVM speaks.
    #[error("{0}")]
    Unsupported(String),
    /// The JVM answered something that is not an attach reply.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// Any other I/O failure, with what was being done.
    #[error("{context}: {source}")]
    Io {
        /// The step that failed, e.g. "connecting to /tmp/.java_pid42".
        context: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

impl AttachError {
    /// Wraps an I/O error with a description of the step that failed.
    pub fn io(context: impl Into<String>, source: io::Error) -> Self {
        AttachError::Io {
            context: context.into(),
            source,
        }
    }
}

/// Result alias for this crate.
pub type Result<T, E = AttachError> = std::result::Result<T, E>;
