//! A JVMTI environment of one's own, for one histogram or one engine run.
//!
//! Tags, capabilities, event callbacks and enabled events all belong to an environment, so a
//! separate one never disturbs the agent's main environment (or another engine's), and
//! disposing of it at the end drops every tag and capability it held in one step.

#![deny(unsafe_code)]

use std::time::Duration;

use jtap_jvmti::{sys, Capabilities, Env};

use crate::gate::Gate;
use crate::thread::Vm;

/// Capabilities HotSpot gives to one environment at a time; the message for a refusal of one
/// of them names the likely reason.
const SOLO: [&str; 2] = ["can_generate_sampled_object_alloc_events", "can_suspend"];

/// An environment, disposed of on drop (after its events were turned off).
pub struct OwnEnv {
    /// Disposed of when dropped, after [`OwnEnv`]'s drop turned the events off.
    env: Env,
    events: Vec<sys::jvmtiEvent>,
}

impl OwnEnv {
    /// A new environment holding all of `capabilities`, or an error naming the ones the VM
    /// refused (and, for single-holder ones, that another agent probably holds them).
    pub fn new(vm: Vm, capabilities: &[&str]) -> Result<OwnEnv, String> {
        let env = vm
            .jvmti_env()
            .map_err(|e| format!("no JVMTI environment: {e}"))?;
        let own = OwnEnv {
            env,
            events: Vec::new(),
        };
        let report = own
            .env
            .add_capabilities(&Capabilities::of(capabilities))
            .map_err(|e| e.to_string())?;
        if !report.refused.is_empty() {
            let refused = report.refused.names();
            let held_elsewhere: Vec<&str> = refused
                .iter()
                .copied()
                .filter(|name| SOLO.contains(name))
                .collect();
            let mut message = format!("the JVM refused {}", refused.join(", "));
            if !held_elsewhere.is_empty() {
                message.push_str(&format!(
                    ": only one JVMTI agent at a time may hold {}, and another agent in this JVM \
                     (e.g. async-profiler, or a second jtap agent library) holds it; stop that agent first",
                    held_elsewhere.join(", ")
                ));
            }
            return Err(message);
        }
        Ok(own)
    }

    /// The environment.
    pub fn env(&self) -> &Env {
        &self.env
    }

    /// Installs the event callbacks and enables `events`; on failure, turns them off again.
    pub fn enable(
        &mut self,
        callbacks: &sys::jvmtiEventCallbacks,
        events: &[sys::jvmtiEvent],
    ) -> Result<(), String> {
        self.env
            .set_event_callbacks(callbacks)
            .map_err(|e| e.to_string())?;
        for &event in events {
            self.env
                .set_event_enabled(event, true)
                .map_err(|e| e.to_string())?;
            self.events.push(event);
        }
        Ok(())
    }

    /// Turns the enabled events off (callbacks already running may still be inside). No
    /// engine enables ObjectFree: turning it off, or disposing of an environment with it on,
    /// can hang HotSpot 17.0.5+ (see [`crate::heap::live`]).
    pub fn disable(&mut self) {
        for event in self.events.drain(..) {
            if let Err(e) = self.env.set_event_enabled(event, false) {
                log!("{e}");
            }
        }
    }
}

impl OwnEnv {
    /// Ends an engine's environment: waits (up to 2 s) for the callbacks in flight behind
    /// `gate`, then disposes of it — unless some callback never left, in which case the
    /// environment is kept rather than freed under it.
    pub fn retire(self, gate: &Gate, engine: &str) {
        let stuck = gate.close_and_drain(Duration::from_secs(2));
        if stuck == 0 {
            drop(self);
        } else {
            log!("{engine} engine: {stuck} callbacks still running after 2 s; keeping their JVMTI environment");
            std::mem::forget(self);
        }
    }
}

impl Drop for OwnEnv {
    fn drop(&mut self) {
        // The environment itself is disposed of right after, when the field is dropped.
        self.disable();
    }
}
