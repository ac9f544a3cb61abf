//! The garbage-collection engine (`start,event=gc`): counts collections and their pauses from
//! the JVMTI GarbageCollectionStart/Finish events. The callbacks run inside the GC pause,
//! where only atomics are allowed, and touch nothing else.

#![deny(unsafe_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use jtap_jvmti::{sys, Capabilities, Env};
use jtap_protocol::records::{GcPauses, Record};
use jtap_protocol::Options;

use super::{Context, Engine, Report};
use crate::gate::Gate;

/// The engine: its state is in this module's atomics, shared with the callbacks.
pub struct GcEngine;

impl Engine for GcEngine {
    fn name(&self) -> &'static str {
        "gc"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::of(&["can_generate_garbage_collection_events"])
    }

    fn start(&mut self, context: &Context, _options: &Options) -> Result<(), String> {
        start(context.env)
    }

    fn dump(&self) -> Report {
        report()
    }

    fn stop(&mut self, context: &Context) -> Report {
        stop(context.env);
        report()
    }
}

const EVENTS: [sys::jvmtiEvent; 2] = [
    sys::JVMTI_EVENT_GARBAGE_COLLECTION_START,
    sys::JVMTI_EVENT_GARBAGE_COLLECTION_FINISH,
];

static GATE: Gate = Gate::new();
static COLLECTIONS: AtomicU64 = AtomicU64::new(0);
static TOTAL_PAUSE_NS: AtomicU64 = AtomicU64::new(0);
static MAX_PAUSE_NS: AtomicU64 = AtomicU64::new(0);
/// Start of the pause in progress, in ns since [`epoch`] (0: none).
static PAUSE_START_NS: AtomicU64 = AtomicU64::new(0);

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn now_ns() -> u64 {
    epoch().elapsed().as_nanos() as u64 + 1
}

/// Starts counting: resets the counters and enables the events. The capability must be held.
fn start(env: &Env) -> Result<(), String> {
    epoch();
    for counter in [
        &COLLECTIONS,
        &TOTAL_PAUSE_NS,
        &MAX_PAUSE_NS,
        &PAUSE_START_NS,
    ] {
        counter.store(0, Ordering::SeqCst);
    }
    GATE.open();
    for event in EVENTS {
        if let Err(e) = env.set_event_enabled(event, true) {
            stop(env);
            return Err(e.to_string());
        }
    }
    Ok(())
}

/// Stops counting: disables the events and waits for callbacks still running.
fn stop(env: &Env) {
    for event in EVENTS {
        if let Err(e) = env.set_event_enabled(event, false) {
            log!("gc engine: {e}");
        }
    }
    let stuck = GATE.close_and_drain(Duration::from_secs(2));
    if stuck != 0 {
        log!("gc engine: {stuck} callbacks still running after 2 s");
    }
}

/// The results so far.
fn report() -> Report {
    let ms = |counter: &AtomicU64| counter.load(Ordering::SeqCst) as f64 / 1e6;
    Report::Record(Box::new(Record::Gc(GcPauses {
        collections: COLLECTIONS.load(Ordering::SeqCst),
        total_pause_ms: ms(&TOTAL_PAUSE_NS),
        longest_pause_ms: ms(&MAX_PAUSE_NS),
    })))
}

/// GarbageCollectionStart callback.
pub extern "C" fn on_start(_env: *mut sys::jvmtiEnv) {
    crate::callback::guard_callback(|| {
        if let Some(_pass) = GATE.enter() {
            PAUSE_START_NS.store(now_ns(), Ordering::SeqCst);
        }
    })
}

/// GarbageCollectionFinish callback.
pub extern "C" fn on_finish(_env: *mut sys::jvmtiEnv) {
    crate::callback::guard_callback(|| {
        let Some(_pass) = GATE.enter() else { return };
        let started = PAUSE_START_NS.swap(0, Ordering::SeqCst);
        if started == 0 {
            return; // the engine started during this pause
        }
        let pause = now_ns().saturating_sub(started);
        COLLECTIONS.fetch_add(1, Ordering::SeqCst);
        TOTAL_PAUSE_NS.fetch_add(pause, Ordering::SeqCst);
        MAX_PAUSE_NS.fetch_max(pause, Ordering::SeqCst);
    })
}
