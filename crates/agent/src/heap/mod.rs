//! Looking at the Java heap from inside the JVM.
//!
//! - `histogram`: the class histogram (`histogram[,live][,top=N]`): instances and bytes per
//!   class from one JVMTI heap walk, in a JVMTI environment of its own.
//! - `inspect`: a class's instances and their fields, or a static field
//!   (`inspect,class=C[,limit=N][,path=a.b][,static=F]`), read with JVMTI and JNI.
//! - `env`: a JVMTI environment of one's own (histogram, alloc and lock engines), disposed of
//!   with its tags and capabilities at the end.
//! - `sites`: allocation sites — sampled allocations summed per (class, stack), the live ones
//!   tracked — for the alloc and lock engines' profiles and the SITES report.
//! - `live`: following sampled objects until they are collected, with weak references.
//! - `roots`: paths from the GC roots to chosen objects (the leak report's suspects).
//! - `follow`: JVMTI's `FollowReferences` behind a safe visitor, for `roots` and `reach`.
//! - `reach`: what the object holding a suspect's survivors reaches (the leak's size).
//! - `stack`: stacks taken with `GetStackTrace` in event callbacks, resolved later.

pub mod env;
pub mod follow;
pub mod histogram;
pub mod inspect;
pub mod live;
pub mod reach;
pub mod roots;
pub mod sites;
pub mod stack;
