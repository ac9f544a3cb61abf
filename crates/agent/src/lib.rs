//! The jtap agent: `libjtap_agent.so`, a JVMTI agent that runs inside the target JVM.
//!
//! - `entry`: `Agent_OnLoad` (`-agentpath:.../libjtap_agent.so=<options>`), `Agent_OnAttach`
//!   (the attach `load` operation; a second attach reaches the same, already initialised
//!   agent) and `Agent_OnUnload`. No panic ever unwinds into the JVM.
//! - `agent`: the one global agent: JVMTI environment, event callbacks, the running engine
//!   and its owner; commands (`start`, `stop`, `status`, `dump`, `version`, `help`) in the
//!   shared option grammar of `jtap-protocol`.
//! - `channel`: the UNIX-socket control channel back to the asking `jtap` client.
//! - `session`: a `jtap-session-N` thread per started engine that notices when its client
//!   goes away and then stops what it started.
//! - `engine`: the engines `start,event=<name>` runs, behind one trait: `gc` (GC pauses),
//!   `cpu` (perf_events, falling back to `ctimer`/`itimer`), `itimer`, `ctimer`, `wall`.
//! - `sampling`: the sampling core of the time-based engines: `AsyncGetCallTrace` in a SIGPROF
//!   handler, a lock-free sample buffer, a `jtap-sampler` thread resolving methods into a
//!   profile.
//! - `walk`: a Java stack walker of jtap's own, reading HotSpot's frames with the offsets the
//!   VM publishes (`gHotSpotVMStructs`); the alloc and lock engines' stacks.
//! - `hooks`: hooks on C library functions the JVM's libraries and JNI code call (GOT
//!   rewriting, entry stubs catching the caller's frame, reentrancy guard), and hooked calls
//!   recorded at their sites with native and Java stacks; the allocator hooks (nativemem).
//! - `heap`: the class histogram (`histogram`), computed with a JVMTI heap walk.
//! - `trace`: method tracing by class-file instrumentation: the runtime class and its native
//!   probes, the class-file hook, restoring, and the reporting thread.
//! - `gate`: counts callbacks in flight, so nothing they use is freed under them.
//! - `log`: the agent's log, off unless `debug` (stderr) or `log=<file>`; never stdout.
//! - `jni`: the `jni!` macro, a call through the JNI function table.
//! - `thread`: native threads attached to the VM under `jtap-...` names.

#![deny(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]

#[macro_use]
mod log;
#[macro_use]
mod jni;

mod agent;
mod callback;
mod channel;
mod engine;
mod entry;
mod gate;
mod heap;
mod hooks;
mod libjvm;
mod push;
mod rotation;
mod sampling;
mod session;
mod thread;
mod trace;
mod walk;
