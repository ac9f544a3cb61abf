//! Integration-test harness shared by jtap's crates: finds the JDK matrix on this machine,
//! compiles the Java workloads under `tests/java/workloads/`, the real-program drivers under
//! `tests/java/real/` (and the native libraries some workloads load, under `tests/native/`),
//! starts them on a chosen JDK, waits until they say `READY`, and always kills them at the
//! end (also when a test panics).

#![deny(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]

mod jdk;
mod process;
mod seccomp;
mod workloads;

pub use jdk::{jdk, jdks, Jdk};
pub use process::{container_wrapper, JavaProcess, JavaProcessBuilder};
pub use workloads::{
    compiled_native_library, compiled_real_programs, compiled_workloads, debian_jar, repo_root,
};
