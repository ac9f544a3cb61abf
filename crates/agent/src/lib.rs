//! The jtap agent: `libjtap_agent.so`, a JVMTI agent that runs inside the target JVM. Its
//! modules form four layers, and references point down only (`tests/layers.rs` checks it):
//!
//! Commands:
//! - `entry`: `Agent_OnLoad` (`-agentpath:.../libjtap_agent.so=<options>`), `Agent_OnAttach`
//!   (the attach `load` operation; a second attach reaches the same, already initialised
//!   agent) and `Agent_OnUnload`.
//! - `agent`: the one global agent: its commands (`start`, `stop`, `status`, `dump`,
//!   `version`, `help`, `histogram`) in the shared option grammar of `jtap-protocol`, its
//!   recordings, and the watcher thread of each client's session.
//! - `session`: a client's connection: results out, `Stop` in.
//!
//! Engines (`engine`), what `start,event=<name>` runs, one file each behind one trait and
//! one row of `engine::ENGINES`: `cpu` (perf_events, falling back to `ctimer`/`itimer`),
//! `itimer`, `ctimer`, `wall`, `alloc`, `lock`, `gc`, `trace` (trace, calltree, monitor,
//! scripts), `nativemem`, `io`, `nativelock`, `perf` (perf events by name).
//!
//! Mechanisms:
//! - `sampling`: the sampling core: jtap's walker or `AsyncGetCallTrace` in a signal handler,
//!   per-thread perf_event counters, a lock-free sample buffer, a `jtap-sampler` thread
//!   resolving methods into a profile.
//! - `walk`: a Java stack walker of jtap's own, reading HotSpot's frames with the offsets the
//!   VM publishes (`gHotSpotVMStructs`).
//! - `hooks`: hooks on C library functions the JVM's libraries and JNI code call (GOT
//!   rewriting, entry stubs catching the caller's frame, reentrancy guard), and hooked calls
//!   recorded at their sites with native and Java stacks.
//! - `heap`: the class histogram and allocation sites.
//! - `trace`: method tracing by class-file instrumentation: the runtime class and its native
//!   probes, call trees, the class-file hook, restoring, and the reporting thread.
//! - `label`: request labels (`by=`): which request each thread works for, set by
//!   instrumented entry methods and hand-over points, read by every engine's samples.
//! - `rotation`, `push`: continuous profiling's periods and their delivery.
//!
//! FFI and plumbing:
//! - `callback`: no panic ever unwinds into the JVM; the library stays mapped.
//! - `channel`: the UNIX-socket control channel back to the asking `jtap` client, and the
//!   `ClientSink` engines stream through.
//! - `gate`: counts callbacks in flight, so nothing they use is freed under them.
//! - `log`: the agent's log, off unless `debug` (stderr) or `log=<file>`; never stdout.
//! - `thread`: native threads attached to the VM under `jtap-...` names.
//! - `libjvm`: addresses of functions `libjvm.so` does not export.

#![deny(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]

// `jni!`: a call through the JNI function table, and the owning JNI wrappers, live in
// `jtap-jvmti`.
#[macro_use]
extern crate jtap_jvmti;
#[macro_use]
mod log;

mod agent;
mod callback;
mod channel;
mod engine;
mod entry;
mod gate;
mod heap;
mod hooks;
mod label;
mod libjvm;
mod push;
mod rotation;
mod sampling;
mod session;
mod thread;
mod trace;
mod walk;
