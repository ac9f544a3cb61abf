//! BTrace scripts, unchanged, with no javac: [`compile()`] parses a script's Java source (the
//! `com.sun.btrace`, `org.openjdk.btrace` and `io.btrace.core` annotations and `BTraceUtils`),
//! checks it by
//! rules at least as strict as BTrace's verifier, and gives a [`Script`]: its probes, which
//! become tracing plans for the agent, and its handlers, which a [`Machine`] runs in the
//! client on the values the probes captured. The script's code never runs in the JVM, so a
//! probe cannot change what the application computes.
//!
//! - [`arguments`]: the words after the script, and `${name}` in annotation values.
//! - [`ast`]: what a script is made of (handlers, probes, statements, expressions).
//! - [`mod@compile`]: Java source to [`Script`], with `file:line:col:` errors as javac prints.
//! - [`value`]: values at run time and how BTrace prints them; [`limits`]: how much of them a
//!   script may hold.
//! - [`machine`]: runs handlers, with the `BTraceUtils` functions scripts call (and BTrace's
//!   profiler, `Profiling.*`).
//! - [`plan`]: the back end, a script's probe handlers as one tracing plan for the agent
//!   ([`Probes`]); [`firing`]: the records that plan brings back as handler firings
//!   ([`Reader`]).
//! - [`one_liner()`]: `jtap trace --if/--print` expressions, compiled as a one-handler script.
//! - `guard`: the part of a handler's condition the agent tests in the traced method
//!   ([`ast::Handler::argument_guard`]).

#![deny(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod arguments;
pub mod ast;
mod builtins;
pub mod compile;
pub mod firing;
mod guard;
pub mod limits;
pub mod machine;
mod one_liner;
mod operators;
pub mod plan;
pub mod preprocess;
mod profiler;
mod roles;
mod time;
pub mod value;

pub use arguments::Arguments;
pub use ast::{Location, Probe, Script};
pub use builtins::{Committed, Counter, Facts, Heap};
pub use compile::{compile, compile_with, CompileError, Descriptors};
pub use firing::{fired, Fired, Reader, Reading};
pub use machine::Machine;
pub use one_liner::{one_liner, one_liner_error};
pub use plan::Probes;
