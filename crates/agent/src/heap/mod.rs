//! Looking at the Java heap from inside the JVM.
//!
//! - `histogram`: the class histogram (`histogram[,live][,top=N]`): instances and bytes per
//!   class from one JVMTI heap walk, in a JVMTI environment of its own.
//! - `class_name`: JVM class signatures as Java names (`[[I` → `int[][]`).
//! - `jni`: a JNI local-reference frame, so references made on a JVM thread are freed.

pub mod class_name;
pub mod histogram;
mod jni;
