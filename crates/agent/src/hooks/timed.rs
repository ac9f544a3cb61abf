//! Hooked calls timed and recorded when they take at least a threshold, weighted by the time
//! they took: what the `io` and `nativelock` engines share. An engine keeps one [`TimedCalls`]
//! in a static, starts it with its hooks and threshold, and its hooks hand each call's time
//! to [`TimedCalls::took`].

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use jtap_profile::event::Kind;
use jtap_profile::{Metadata, Profile};
use jtap_protocol::Options;

use super::site::{Recording, Sites};
use super::{Caller, Hook, Installation};
use crate::heap::sites::Part;
use crate::thread::Vm;

/// The calls of one engine's hooks.
pub struct TimedCalls {
    kind: &'static Kind,
    sites: Sites,
    /// Whether the hooks record (they only time and forward when not).
    recording: AtomicBool,
    threshold_ns: AtomicU64,
}

/// A running recording: its sites, its hooks (removed when dropped) and its threshold.
pub struct Timing {
    recording: Recording,
    hooks: Installation,
    threshold: Duration,
}

impl TimedCalls {
    /// Calls of the profile event `kind`, not recording.
    pub const fn new(kind: &'static Kind) -> TimedCalls {
        TimedCalls {
            kind,
            sites: Sites::new(),
            recording: AtomicBool::new(false),
            threshold_ns: AtomicU64::new(u64::MAX),
        }
    }

    /// The event's name.
    pub fn name(&self) -> &'static str {
        self.kind.name
    }

    /// Installs `hooks` and records the calls that take at least `threshold`, with the
    /// `start` options' timeline and threads.
    ///
    /// # Safety
    /// Each hook's entry has the signature of the C function it is named for.
    pub unsafe fn start(
        &'static self,
        vm: Vm,
        options: &Options,
        threshold: Duration,
        hooks: &[Hook],
    ) -> Result<Timing, String> {
        let name = self.kind.name;
        let recording = self.sites.start(name, vm, options)?;
        self.threshold_ns
            .store(threshold.as_nanos() as u64, Ordering::SeqCst);
        self.recording.store(true, Ordering::SeqCst);
        // SAFETY: the caller's contract.
        match unsafe { super::install(name, hooks) } {
            Ok(hooks) => Ok(Timing {
                recording,
                hooks,
                threshold,
            }),
            Err(e) => {
                self.recording.store(false, Ordering::SeqCst);
                self.sites.stop(recording);
                Err(format!("{name}: {e}"))
            }
        }
    }

    /// A hooked call took `nanos`: recorded at its site, named `leaf`, when that reaches the
    /// threshold (`leaf` is only made then). Called by the hooks, on the calling thread.
    pub fn took(&self, nanos: u64, leaf: impl FnOnce() -> String, caller: &Caller) {
        if nanos < self.threshold_ns.load(Ordering::Relaxed)
            || !self.recording.load(Ordering::Relaxed)
        {
            return;
        }
        super::on_hooked_thread(|| {
            self.sites.record(caller, &leaf(), 1.0, nanos as f64, None);
        });
    }

    /// The profile so far.
    pub fn profile(&self, timing: &Timing) -> Profile {
        let metadata = Metadata {
            event: self.kind.name.into(),
            engine: self.kind.name.into(),
            interval: timing.threshold.as_nanos() as u64,
            weight_unit: self.kind.weight_unit.into(),
            ..Metadata::default()
        };
        self.sites.profile(&timing.recording, Part::Total, metadata)
    }

    /// Removes the hooks and stops recording; the final profile.
    pub fn stop(&self, timing: Timing) -> Profile {
        self.recording.store(false, Ordering::SeqCst);
        let profile = self.profile(&timing);
        drop(timing.hooks);
        self.sites.stop(timing.recording);
        profile
    }
}
