//! Method tracing by rewriting class bytes (JVMTI cannot give method entry/exit events to an
//! agent attached later): the core of `jtap trace`, `jtap calltree` and `jtap monitor`.
//!
//! - `runtime`: the `jtap/runtime/Probes` class the instrumented code calls, written here,
//!   defined in the bootstrap loader and bound to native methods.
//! - `probes`: those native methods: per-thread call stacks, the threshold, and records for
//!   the reporting thread; they never throw, block or re-enter.
//! - `batch`: calls many to a record, for scripts, and how many each method reported.
//! - `calltree`: the call trees calltree mode grows per entry call, and their bounds.
//! - `clock`: the probes' clock (the invariant TSC where there is one).
//! - `ticker`: the field clock that traces under a threshold read without a native call.
//! - `select`: which classes and methods a [`jtap_protocol::trace::Plan`] selects, and which
//!   classes are never touched.
//! - `instrument`: the session's JVMTI environment and ClassFileLoadHook, retransformation of
//!   loaded classes, and restoring (with a check that the original bytes came back).
//! - `labels`, `label_probes`: request labels (`by=`): entry methods and the JDK's hand-over
//!   points instrumented to say which request each thread works for ([`crate::label`]).
//! - `stats`: per-method statistics for monitor mode.
//! - `report`: the `jtap-trace` thread streaming lines, trees and tables to the client.
//! - `values`: Java values as bounded one-line text, without running application code.
//! - `ffi`: the JNI/JVMTI calls all this makes.

pub mod batch;
pub mod calltree;
pub mod clock;
pub(crate) mod ffi;
pub mod instrument;
mod label_keys;
mod label_probes;
pub mod labels;
pub mod probes;
pub mod report;
mod runtime;
mod select;
pub mod stats;
pub mod ticker;
pub mod values;
