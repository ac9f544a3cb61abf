//! jtap's profile model and its exporters.
//!
//! A [`Profile`] is a set of distinct stacks (root first), each with a sample count, a
//! weight (nanoseconds, bytes, …) and the events its samples stand for (objects, waits), over interned [`Frame`]s that keep their kind (interpreted,
//! compiled, inlined, native, C++, kernel, …), and optionally an event log: each sample with
//! its time and thread. The profiling engines build one; the
//! [`export`] modules turn it into what people read: collapsed stacks, async-profiler-style
//! text reports, a self-contained HTML flame graph, pprof and speedscope.

#![deny(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod event;
pub mod export;
pub mod import;
mod jfr;
mod leak;
mod model;
mod select;

pub use export::{decode_pprof, render_set, write_atomically, ExportOptions, Format, PprofTotals};
pub use jfr::declared;
pub use leak::{OldObject, PathStep, Via};
pub use model::virtual_thread_key;
pub use model::{
    Counter, Frame, FrameId, FrameKind, LoggedSample, Metadata, Profile, StackCounts, StackId,
    TracedCall, LABEL_PREFIX, MAX_LOGGED, VIRTUAL_THREAD,
};
pub use select::{Labels, Selection};
