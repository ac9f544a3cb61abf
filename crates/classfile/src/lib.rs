//! Lossless Java class-file reading, writing and bytecode instrumentation.
//!
//! * [`ClassFile`] parses class files of versions 45 to 69 and writes them back byte for byte;
//!   everything not edited is kept as the original bytes, and the [`ConstantPool`] only ever
//!   appends entries.
//! * [`code`] decodes a `Code` attribute and re-lays it out after straight-line code has been
//!   inserted, relocating branches (widening them past ±32 KiB), switches, the exception table,
//!   line and local-variable tables and the `StackMapTable`.
//! * [`inject`] places probe calls at method entry, returns, exception exits, call sites,
//!   allocations, monitors, field accesses and line starts, as an [`InjectionPlan`] ([`plan`])
//!   says; a [`guard`] on a method's arguments decides at its entry whether the
//!   call's probes run.
//! * [`annotations`] reads the annotation types of classes and methods.
//! * [`bounded`] tells the methods whose bytecode bounds their running time.
//!
//! The crate knows nothing about JVMTI and never panics on malformed input.

#![deny(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod annotations;
pub mod bounded;
mod bytes;
pub mod class_file;
pub mod code;
pub mod constant_pool;
pub mod descriptor;
pub mod error;
pub mod guard;
pub mod inject;
pub mod instruction;
pub mod listing;
pub mod plan;
pub mod remap;
pub mod stackmap;
pub mod typeflow;

pub use class_file::{Attribute, ClassFile, Member};
pub use constant_pool::ConstantPool;
pub use error::{Error, Result};
pub use plan::{InjectionPlan, Probe};
