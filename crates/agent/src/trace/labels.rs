//! Request labels (`by=`) put in place: the entry methods the user named and the JDK's
//! hand-over points are instrumented with [`super::label_probes`], in a session of their own
//! (its own JVMTI environment, so that a trace may run beside it), and restored at the end.
//!
//! Where the label follows the work:
//! - `ThreadPoolExecutor.execute(Runnable)` tags the task with the caller's label;
//!   `beforeExecute(Thread, Runnable)`, which the worker calls before each task, makes the
//!   task's label the worker's until `afterExecute`. (`submit` and `CompletableFuture`'s async
//!   stages on such a pool come through `execute`.)
//! - Every `ForkJoinTask` (`CompletableFuture` stages, parallel streams, `ForkJoinPool`
//!   submissions) is tagged as it is made; `doExec` runs it under its label.
//! - `Thread.start()` tags the thread; the new thread begins with its label (JVMTI
//!   ThreadStart). The worker loops of both pools begin with none, so a pool thread started
//!   inside a request does not keep its label while idle.
//! - A virtual thread is tagged as it is made; its `run(Runnable)` runs under its label, which
//!   follows it from carrier to carrier (labels of virtual threads are keyed by their id).
//!
//! A task that carries no label runs with none, whatever its worker had.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use jtap_jvmti::{sys, Capabilities, Env};
use jtap_protocol::label::LabelBy;
use jtap_protocol::trace::{MethodPattern, Plan};

use super::ffi::Jni;
use super::instrument::Tracing;
use super::label_keys::KeyReader;
use super::label_probes::{self, selector, Entry, Point, Points, Session};
use crate::gate::Gate;
use crate::label;
use crate::thread::Vm;

/// The JDK's hand-over points: method pattern and what its probe does.
const HAND_OVERS: [(&str, Point); 10] = [
    (
        "java.util.concurrent.ThreadPoolExecutor::execute(Ljava/lang/Runnable;)V",
        Point::HandOffArg(0),
    ),
    (
        "java.util.concurrent.ThreadPoolExecutor::beforeExecute(Ljava/lang/Thread;Ljava/lang/Runnable;)V",
        Point::TakeOverArg(1),
    ),
    (
        "java.util.concurrent.ThreadPoolExecutor::afterExecute(Ljava/lang/Runnable;Ljava/lang/Throwable;)V",
        Point::Leave,
    ),
    (
        "java.util.concurrent.ThreadPoolExecutor::runWorker",
        Point::StartOver,
    ),
    (
        "java.util.concurrent.ForkJoinTask::<init>()V",
        Point::HandOffThis,
    ),
    ("java.util.concurrent.ForkJoinTask::doExec", Point::TakeOverThis),
    ("java.util.concurrent.ForkJoinPool::runWorker", Point::StartOver),
    ("java.lang.Thread::start()V", Point::HandOffThis),
    ("java.lang.VirtualThread::<init>", Point::HandOffThis),
    (
        "java.lang.VirtualThread::run(Ljava/lang/Runnable;)V",
        Point::TakeOverThis,
    ),
];

/// Labels in place for one recording.
pub struct Labelling {
    tracing: Arc<Tracing>,
    /// The environment of the tags and of ThreadStart.
    env: Option<Env>,
}

/// ThreadStart and ThreadEnd pass only while labels are in place.
static THREAD_GATE: Gate = Gate::new();
/// A thread begins with the label of the request that started it, and ends with none (its
/// kernel id may be another thread's next).
const THREAD_EVENTS: [sys::jvmtiEvent; 2] =
    [sys::JVMTI_EVENT_THREAD_START, sys::JVMTI_EVENT_THREAD_END];

impl Labelling {
    /// Instruments the entry methods of `by` and the hand-over points, and starts labelling.
    /// One recording at a time labels.
    pub fn start(vm: Vm, by: &[LabelBy], innermost: bool) -> Result<Labelling, String> {
        if label::is_active() {
            return Err("another recording labels its samples by request; stop it first".into());
        }
        let env = vm
            .jvmti_env()
            .map_err(|e| format!("no JVMTI environment: {e}"))?;
        if let Ok(version) = env.version_number() {
            // Virtual threads' labels follow them when the walker knows where their ids are.
            let _ = crate::walk::walker(vm, version);
        }
        let report = env
            .add_capabilities(&Capabilities::of(&["can_tag_objects"]))
            .map_err(|e| e.to_string())?;
        if !report.refused.is_empty() {
            return Err(format!("the JVM refused to tag objects ({report})"));
        }
        let callbacks = sys::jvmtiEventCallbacks {
            ThreadStart: Some(on_thread_start),
            ThreadEnd: Some(on_thread_end),
            ..Default::default()
        };
        env.set_event_callbacks(&callbacks)
            .map_err(|e| e.to_string())?;
        let entries = by
            .iter()
            .map(|b| Entry {
                name: entry_name(&b.entry),
                key: b.key.clone(),
                label: OnceLock::new(),
            })
            .collect();
        // SAFETY: the environment lives in `Labelling::env` until `stop` disposes of it,
        // after the probes and ThreadStart no longer use it.
        let lent = unsafe { Env::from_raw(env.raw()) };
        let session = Arc::new(Session {
            env: lent,
            entries,
            innermost,
            points: Mutex::new(HashMap::new()),
            keys: KeyReader::new(lent),
        });
        let mut patterns: Vec<MethodPattern> = by.iter().map(|b| b.entry.clone()).collect();
        let mut hand_overs = Vec::new();
        for (text, point) in HAND_OVERS {
            let pattern = MethodPattern::parse(text)?;
            hand_overs.push((selector(&pattern)?, point));
            patterns.push(pattern);
        }
        let entries = by
            .iter()
            .map(|b| selector(&b.entry))
            .collect::<Result<_, _>>()?;
        let points = Arc::new(Points::new(entries, hand_overs, session.clone()));
        label::activate();
        label_probes::set_session(Some(session));
        let plan = Plan {
            targets: patterns,
            ..Plan::default()
        };
        let started = Tracing::install_for_labels(vm, plan, points).and_then(|tracing| {
            THREAD_GATE.open();
            for event in THREAD_EVENTS {
                let _ = lent.set_event_enabled(event, true);
            }
            match tracing.instrument_loaded() {
                Ok(_) => Ok(tracing),
                Err(e) => {
                    tracing.restore();
                    tracing.uninstall();
                    Err(e)
                }
            }
        });
        match started {
            Ok(tracing) => {
                super::probes::labels_ready();
                Ok(Labelling {
                    tracing,
                    env: Some(env),
                })
            }
            Err(e) => {
                stop_labels(Some(env));
                Err(e)
            }
        }
    }

    /// What the session noted so far (entries no loaded class matches, classes it could not
    /// instrument), but of the JDK's hand-over points, which a JDK may lack.
    pub fn take_notes(&self) -> Vec<String> {
        let mut notes = self.tracing.take_notes();
        notes.retain(|note| !HAND_OVERS.iter().any(|(pattern, _)| note.contains(pattern)));
        notes
    }

    /// Stops labelling and restores the classes: the restore check's summary and notes.
    pub fn stop(mut self) -> String {
        let restored = self.tracing.restore();
        self.tracing.uninstall();
        let unrecorded = label::unrecorded();
        stop_labels(self.env.take());
        let mut summary = format!("labels: {}", restored.summary());
        for note in self.take_notes() {
            summary.push_str(&format!("\nlabels: {note}"));
        }
        if unrecorded > 0 {
            summary.push_str(&format!(
                "\nlabels: {unrecorded} labels found no room in the table (their samples are unlabelled)"
            ));
        }
        summary
    }
}

/// Labels are no longer set; ThreadStart is off and the environment of the tags disposed of.
fn stop_labels(env: Option<Env>) {
    label::deactivate();
    label_probes::set_session(None);
    THREAD_GATE.close_and_drain(std::time::Duration::from_secs(2));
    if let Some(env) = env {
        for event in THREAD_EVENTS {
            let _ = env.set_event_enabled(event, false);
        }
        if let Err(e) = env.dispose() {
            log!("labels: {e}");
        }
    }
}

/// How a `by=` entry without a key names its label: `Class.method`.
fn entry_name(pattern: &MethodPattern) -> String {
    match &pattern.method {
        Some(method) => format!("{}.{method}", pattern.class),
        None => pattern.class.to_string(),
    }
}

extern "C" fn on_thread_start(
    _jvmti: *mut sys::jvmtiEnv,
    jni: *mut sys::JNIEnv,
    thread: sys::jthread,
) {
    crate::callback::guard_callback(|| {
        let Some(_pass) = THREAD_GATE.enter() else {
            return;
        };
        // SAFETY: the VM passes the new thread's JNI environment, valid for the callback.
        let jni = unsafe { Jni::from_raw(jni) };
        label_probes::thread_started(jni, thread);
    })
}

extern "C" fn on_thread_end(_jvmti: *mut sys::jvmtiEnv, jni: *mut sys::JNIEnv, _: sys::jthread) {
    crate::callback::guard_callback(|| {
        let Some(_pass) = THREAD_GATE.enter() else {
            return;
        };
        // SAFETY: the VM passes the ending thread's JNI environment, valid for the callback.
        label_probes::thread_ended(unsafe { Jni::from_raw(jni) });
    })
}
