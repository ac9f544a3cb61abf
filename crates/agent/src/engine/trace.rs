//! The tracing engine (`start,event=trace,trace=<plan>`): instruments the methods the plan
//! selects (see [`crate::trace`]), streams what the probes report to the client that started
//! it, and on stop retransforms every touched class back to its original bytes.

#![deny(unsafe_code)]

use std::sync::Arc;
use std::time::Duration;

use jtap_jvmti::Capabilities;
use jtap_protocol::trace::Mode;
use jtap_protocol::{Ended, Options};

use super::{Context, Engine, Report};
use crate::channel::ClientSink;
use crate::trace::batch;
use crate::trace::calltree;
use crate::trace::instrument::{self, Tracing};
use crate::trace::probes::{
    self, Settings, CAPTURE_ARGS, CAPTURE_RETURN, CAPTURE_SIZES, CAPTURE_STACK, CAPTURE_THROWN,
    CAPTURE_TO_STRING, CAPTURE_VALUES,
};
use crate::trace::report::{self, Output};
use crate::trace::stats;
use crate::trace::ticker;

/// How long a stopping session waits for its `jtap-trace` thread to send the calls still
/// queued; what is left then is not sent, so that the next session's calls are not held up.
const FLUSH_WAIT: Duration = Duration::from_secs(2);
/// How long a calltree session ending inside entry calls waits for their threads to hand
/// over the trees they grow (a thread blocked in its entry call does not).
const TREE_FLUSH_WAIT: Duration = Duration::from_millis(300);

/// The engine: the session's instrumentation and its reporting thread.
#[derive(Default)]
pub struct TraceEngine {
    tracing: Option<Arc<Tracing>>,
    output: Arc<Output>,
    classes: usize,
    calls_at_start: u64,
    /// The clock the probes read, as the summary names it.
    clock: String,
}

impl TraceEngine {
    fn summary(&self) -> String {
        let Some(tracing) = &self.tracing else {
            return "trace: not running".into();
        };
        let registry = tracing.registry.lock().unwrap_or_else(|e| e.into_inner());
        let mut text = format!(
            "trace ({}, {}): {} classes instrumented at start, {} methods instrumented, {} {} reported, {} dropped (queue full)",
            tracing.plan.mode.name(),
            self.clock,
            self.classes,
            registry.methods.len(),
            self.output.reported.load(std::sync::atomic::Ordering::Relaxed),
            match tracing.plan.mode {
                Mode::Trace => "calls",
                Mode::Calltree => "trees",
                Mode::Monitor => "intervals",
            },
            probes::dropped()
        );
        if self
            .output
            .abandoned
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            text.push_str(&format!(
                "; calls still queued {} s after the end were not sent",
                FLUSH_WAIT.as_secs()
            ));
        }
        let untimed = probes::untimed();
        if untimed > 0 {
            text.push_str(&format!(
                "; {untimed} calls not timed: their thread had {} calls open (deep recursion, or virtual threads blocking inside traced methods, which share their carrier's stack: a threshold of 1 ms or more times calls without one)",
                probes::MAX_DEPTH
            ));
        }
        let unlabelled = stats::unlabelled();
        if unlabelled > 0 {
            text.push_str(&format!(
                "; {unlabelled} labelled calls counted without their label (more than {} method and label pairs)",
                stats::MAX_LABELLED
            ));
        }
        for note in tracing.skipped().notes() {
            text.push_str("; ");
            text.push_str(&note);
        }
        text
    }
}

impl Engine for TraceEngine {
    fn name(&self) -> &'static str {
        "trace"
    }

    fn capabilities(&self) -> Capabilities {
        // The session's own JVMTI environment holds what tracing needs.
        Capabilities::default()
    }

    fn start(&mut self, context: &Context, options: &Options) -> Result<(), String> {
        let plan = options
            .trace
            .clone()
            .ok_or("event=trace needs trace=<plan>")?;
        let mut capture = 0;
        for (on, flag) in [
            (plan.args || plan.values, CAPTURE_ARGS),
            (plan.values, CAPTURE_VALUES),
            (plan.sizes, CAPTURE_SIZES),
            (plan.returns, CAPTURE_RETURN),
            (plan.exceptions, CAPTURE_THROWN),
            (plan.stack, CAPTURE_STACK),
            (plan.to_string, CAPTURE_TO_STRING),
        ] {
            if on {
                capture |= flag;
            }
        }
        let mode = match plan.mode {
            Mode::Trace => probes::Mode::Trace,
            Mode::Calltree => probes::Mode::Calltree,
            Mode::Monitor => probes::Mode::Monitor,
        };
        let settings = Settings {
            mode,
            capture,
            threshold_ns: plan.threshold.map_or(0, |t| t.as_nanos() as u64),
            count: (plan.mode == Mode::Calltree)
                .then_some(plan.count)
                .flatten(),
            env: context.env,
            on_allocation: None,
            labelled: !options.by.is_empty(),
        };
        let tracing = Tracing::install(context.vm, plan)?;
        stats::reset();
        self.calls_at_start = probes::calls();
        let generation = probes::activate(&settings);
        if let Err(e) = report::spawn(context.vm, tracing.clone(), generation, self.output.clone())
        {
            probes::deactivate();
            tracing.restore();
            tracing.uninstall();
            return Err(e);
        }
        if let Some((fields, period)) = tracing.field_clock() {
            if let Err(e) = ticker::start(context.vm, fields, period, settings.threshold_ns) {
                probes::deactivate();
                self.output.finish(Duration::from_secs(1));
                tracing.restore();
                tracing.uninstall();
                return Err(e);
            }
        }
        self.clock = probes::clock_name();
        let started = std::time::Instant::now();
        self.classes = match tracing.instrument_loaded() {
            Ok(n) => {
                calltree::arm();
                n
            }
            Err(e) => {
                probes::deactivate();
                ticker::stop();
                self.output.finish(Duration::from_secs(1));
                tracing.restore();
                tracing.uninstall();
                return Err(e);
            }
        };
        let methods = tracing
            .registry
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .methods
            .len();
        self.output.note(format!(
            "tracing: {} loaded {} instrumented ({}) in {} ms ({}); classes loaded from now on are instrumented as they load",
            self.classes,
            if self.classes == 1 { "class" } else { "classes" },
            instrument::counted(methods, "method", "methods"),
            started.elapsed().as_millis(),
            self.clock
        ));
        for note in tracing.skipped().notes() {
            self.output.note(note);
        }
        self.tracing = Some(tracing);
        Ok(())
    }

    fn stream_to(&mut self, sink: Arc<dyn ClientSink>) {
        self.output.set_sink(sink);
    }

    fn dump(&self) -> Report {
        Report::Notes(self.summary())
    }

    fn ended(&self) -> Option<Ended> {
        self.output
            .count_reached
            .load(std::sync::atomic::Ordering::SeqCst)
            .then_some(Ended::CountReached)
    }

    fn stop(&mut self, _context: &Context) -> Report {
        probes::flush_open_trees(TREE_FLUSH_WAIT);
        probes::deactivate();
        ticker::stop();
        let Some(tracing) = self.tracing.take() else {
            return Report::Notes(self.summary());
        };
        self.output.finish(FLUSH_WAIT);
        let restored = tracing.restore();
        tracing.uninstall();
        // Calls that entered instrumented code before the restore still end in a probe; no
        // call after it does: count probe calls over 50 ms, once those had 50 ms to finish.
        std::thread::sleep(Duration::from_millis(50));
        let before = probes::calls();
        std::thread::sleep(Duration::from_millis(50));
        let after = probes::calls();
        if tracing.plan.batches {
            let registry = tracing.registry.lock().unwrap_or_else(|e| e.into_inner());
            let reported = batch::reported(&registry, &probes::reported());
            self.output
                .send(&jtap_protocol::records::Record::Reported(reported));
        }
        let field_clock = if tracing.field_clock().is_some() {
            " (with the field clock only calls near the threshold call the agent)"
        } else {
            ""
        };
        self.tracing = Some(tracing);
        let text = format!(
            "{}\n{}\nprobe calls: {} during the session, {} in the 50 ms from 50 ms after restoring{field_clock}",
            self.summary(),
            restored.summary(),
            before.saturating_sub(self.calls_at_start),
            after - before
        );
        self.tracing = None;
        Report::Notes(text)
    }
}
