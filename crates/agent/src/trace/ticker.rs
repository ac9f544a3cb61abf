//! The field clock: for a trace under a threshold, instrumented methods read the runtime
//! class's `now` field at entry and, at exit, call its small Java method `leave`, which
//! compares `now - start` with the `threshold` field and calls into the agent only when the
//! call may have lasted that long (see [`super::runtime`]). The `jtap-clock` thread sets
//! `now` to [`clock::ticks`] every period, so the common case costs two field reads and a
//! compare instead of two native calls and two clock reads.
//!
//! Resolution: `start` is up to one period early and `now` at exit up to one period late, so
//! `leave` lets through every call from the threshold minus one period on, and the agent
//! times each of those against the exact clock at its end: no call at or above the threshold
//! is missed, and a reported duration is at most one period too long. A clock thread that
//! the machine starves for longer than a period delays `now`, and calls spanning that delay
//! look shorter than they were.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::SeqCst};
use std::sync::{mpsc, Mutex};
use std::time::Duration;

use jtap_protocol::trace::{Mode, Plan};

use super::clock::{self, ticks};
use super::ffi::{Jni, StaticLong};
use crate::thread::{spawn_attached, Vm};

/// The static fields of the field clock.
#[derive(Clone, Copy)]
pub struct FieldClock {
    /// `now`: the clock, in ticks.
    pub now: StaticLong,
    /// `threshold`: ticks from which `leave` calls the agent; `Long.MAX_VALUE` between sessions.
    pub threshold: StaticLong,
}

/// The shortest threshold timed with the field clock.
pub const MIN_THRESHOLD: Duration = Duration::from_millis(1);
/// The clock advances every tenth of the threshold, within these bounds.
const PERIODS: (Duration, Duration) = (Duration::from_micros(250), Duration::from_millis(10));

/// The generation of the running clock thread (0: none).
static RUNNING: AtomicU32 = AtomicU32::new(0);
static GENERATION: AtomicU32 = AtomicU32::new(0);
/// The running clock's period in ns (0: none).
static PERIOD_NS: AtomicU64 = AtomicU64::new(0);
/// Ticks when the running clock started: a `start` older than this was read in an earlier
/// session (by a method that was still running when it ended).
static STARTED: AtomicU64 = AtomicU64::new(u64::MAX);
/// Held while the fields change hands between sessions.
static FIELDS: Mutex<()> = Mutex::new(());

/// The field clock's period for a session, or None when its probes need the native ones:
/// trace mode under a threshold of at least [`MIN_THRESHOLD`], capturing neither arguments nor
/// return values (the field clock's probes pass no values but the exception), with no need
/// for exact starts.
pub fn period(plan: &Plan) -> Option<Duration> {
    if plan.mode != Mode::Trace
        || plan.args
        || plan.values
        || plan.returns
        || plan.exact
        || !plan.call_sites.is_empty()
    {
        return None;
    }
    let threshold = plan.threshold.filter(|t| *t >= MIN_THRESHOLD)?;
    Some((threshold / 10).clamp(PERIODS.0, PERIODS.1))
}

/// The running clock's period.
pub fn running_period() -> Option<Duration> {
    match PERIOD_NS.load(SeqCst) {
        0 => None,
        ns => Some(Duration::from_nanos(ns)),
    }
}

/// Whether `start` (a clock reading at a method's entry) belongs to the running session.
pub fn is_current(start: u64) -> bool {
    start >= STARTED.load(SeqCst)
}

/// Starts the `jtap-clock` thread advancing `fields.now` every `period`, and lets `leave`
/// call the agent for calls from `threshold_ns` minus one period on. Returns once the clock
/// has its first reading.
pub fn start(
    vm: Vm,
    fields: FieldClock,
    period: Duration,
    threshold_ns: u64,
) -> Result<(), String> {
    let generation = GENERATION.fetch_add(1, SeqCst) + 1;
    {
        let _fields = FIELDS.lock().unwrap_or_else(|e| e.into_inner());
        RUNNING.store(generation, SeqCst);
        STARTED.store(ticks(), SeqCst);
        PERIOD_NS.store(period.as_nanos() as u64, SeqCst);
    }
    let clock = clock::clock();
    let threshold = clock
        .ticks_for(threshold_ns.saturating_sub(period.as_nanos() as u64))
        .max(1) as i64;
    let (ready, started) = mpsc::sync_channel(1);
    spawn_attached(vm, "jtap-clock".into(), move || {
        let Some(jni) = Jni::current(vm) else {
            return;
        };
        {
            let _fields = FIELDS.lock().unwrap_or_else(|e| e.into_inner());
            if RUNNING.load(SeqCst) != generation {
                return;
            }
            jni.set_static_long(fields.now, ticks() as i64);
            jni.set_static_long(fields.threshold, threshold);
        }
        let _ = ready.send(());
        while RUNNING.load(SeqCst) == generation {
            std::thread::sleep(period);
            jni.set_static_long(fields.now, ticks() as i64);
        }
        let _fields = FIELDS.lock().unwrap_or_else(|e| e.into_inner());
        if RUNNING.load(SeqCst) == 0 {
            jni.set_static_long(fields.threshold, i64::MAX);
        }
    })
    .map_err(|e| format!("cannot start the jtap-clock thread: {e}"))?;
    started
        .recv_timeout(Duration::from_secs(5))
        .map_err(|_| "the jtap-clock thread did not start".to_string())
}

/// Stops the clock thread (within one period); `leave` stops calling the agent then.
pub fn stop() {
    let _fields = FIELDS.lock().unwrap_or_else(|e| e.into_inner());
    RUNNING.store(0, SeqCst);
    PERIOD_NS.store(0, SeqCst);
    STARTED.store(u64::MAX, SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(threshold_ms: u64) -> Plan {
        Plan {
            threshold: Some(Duration::from_millis(threshold_ms)),
            ..Plan::default()
        }
    }

    #[test]
    fn the_field_clock_serves_traces_with_thresholds_and_no_values() {
        assert_eq!(period(&plan(1)), Some(Duration::from_micros(250)));
        assert_eq!(period(&plan(20)), Some(Duration::from_millis(2)));
        assert_eq!(period(&plan(5000)), Some(Duration::from_millis(10)));
        assert_eq!(period(&Plan::default()), None);
        assert_eq!(
            period(&Plan {
                threshold: Some(Duration::from_micros(999)),
                ..Plan::default()
            }),
            None
        );
        for with_values in [
            Plan {
                args: true,
                ..plan(10)
            },
            Plan {
                returns: true,
                ..plan(10)
            },
            Plan {
                values: true,
                ..plan(10)
            },
            Plan {
                mode: Mode::Monitor,
                ..plan(10)
            },
        ] {
            assert_eq!(period(&with_values), None);
        }
    }
}
