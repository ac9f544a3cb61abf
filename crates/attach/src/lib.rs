//! HotSpot dynamic attach and JVM discovery, with no JDK tools.
//!
//! - [`discovery`] lists JVMs from their hsperfdata files and `/proc`, without attaching.
//! - [`VirtualMachine`] starts a JVM's attach listener (trigger file + SIGQUIT) and sends
//!   operations over its UNIX socket, in attach protocol 1 or 2.
//! - Containers work through `/proc/<pid>/root` and the namespace pid (`NSpid`); run as root,
//!   the client acts with the target's effective uid/gid ([`credentials`]).

#![deny(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod credentials;
pub mod discovery;
pub mod error;
pub mod listener;
pub mod perfdata;
pub mod process;
pub mod protocol;
mod vm;

pub use discovery::{list_jvms, JvmInfo};
pub use error::{AttachError, Result};
pub use listener::remove_pending_trigger_files;
pub use protocol::{Request, V1_ARG_MAX};
pub use vm::{load_return_code, AttachOptions, Reply, VirtualMachine};
