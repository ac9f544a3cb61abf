//! The records of a script's tracing session back as handler firings: which handlers take
//! each traced call, point reached or batch of calls (by the [`Probes`]' selectors), the
//! values each firing carries, and how many calls of each method the probes reported that
//! never arrived.

use std::collections::HashMap;
use std::time::Duration;

use jtap_protocol::records::{
    BatchProbe, BatchThread, Call, CallBatch, Callee, Outcome, Point, Reached, Record, Reported,
};

use crate::plan::Probes;

/// What one probe firing captured (from a traced call).
#[derive(Debug, Clone, Default)]
pub struct Fired {
    /// The probed method's class (`pkg.Class`).
    pub class: String,
    /// The probed method's name.
    pub method: String,
    /// When the call started (or the point was reached), nanoseconds since the Unix epoch.
    pub start_ns: u64,
    /// How long the call took, in nanoseconds.
    pub duration_ns: u64,
    /// `this` (`null` when static) and each argument, as the agent described them.
    pub values: Vec<String>,
    /// The value returned, described (RETURN probes of non-void methods).
    pub returned: Option<String>,
    /// The shallow size in bytes of each of `values`, when the probe measured them
    /// (handlers calling `sizeof`).
    pub sizes: Vec<u64>,
    /// The shallow size of the value returned, when measured.
    pub returned_size: Option<u64>,
    /// The shallow size of the called method's receiver, when measured.
    pub target_size: Option<u64>,
    /// The exception thrown, described (ERROR probes).
    pub thrown: Option<String>,
    /// The Java stack, `Class.method(File.java:line)` per frame, innermost first.
    pub stack: Vec<String>,
    /// The thread's name.
    pub thread: String,
    /// The thread's kernel id.
    pub tid: u32,
    /// At `Kind.CALL`: the method called.
    pub callee: Option<Callee>,
    /// At `Kind.CALL`: the receiver of the method called, described (`null` for static calls
    /// and constructors); `values` then hold the called method's arguments after `this`.
    pub target: Option<String>,
    /// At `Kind.LINE`, `NEW` and `SYNC_*`: the point reached.
    pub point: Option<Point>,
}

/// What a record tells the script's loop.
pub enum Reading {
    /// Traced calls (of a record, or a batch), each for handler `usize`.
    Fired(Vec<(usize, Fired)>),
    /// Calls the probes reported that did not reach the handlers: `N calls of Class.method`.
    Unseen(Vec<(u64, String)>),
}

/// The reader of a tracing session: which handlers take each record's calls, and how many
/// calls of each method arrived.
pub struct Reader<'p> {
    probes: &'p Probes,
    /// The methods (call sites) batches named, by key: the method and the handlers that
    /// take its calls which returned and which threw (each with its threshold).
    batch_probes: HashMap<u32, BatchTakers>,
    batch_threads: HashMap<u32, BatchThread>,
    /// Calls received, by (`pkg.Class`, method, descriptor).
    received: HashMap<(String, String, String), u64>,
}

/// A method a batch named, and the handlers taking its calls.
struct BatchTakers {
    probe: BatchProbe,
    /// Calls counted, added to [`Reader::received`] when the session ends.
    received: u64,
    returned: Vec<(usize, Option<Duration>)>,
    threw: Vec<(usize, Option<Duration>)>,
}

impl<'p> Reader<'p> {
    /// A reader for the session tracing `probes`' plan.
    pub fn new(probes: &'p Probes) -> Reader<'p> {
        Reader {
            probes,
            batch_probes: HashMap::new(),
            batch_threads: HashMap::new(),
            received: HashMap::new(),
        }
    }

    /// What a record tells the script's loop.
    pub fn read(&mut self, record: Record) -> Option<Reading> {
        let callee_values = self.probes.plan.callee_values;
        let taken: Vec<(usize, Fired)> = match record {
            Record::Call(call) => {
                self.count(&call.class, &call.method, &call.descriptor);
                self.probes
                    .handlers
                    .iter()
                    .filter(|(_, selector)| selector.takes(&call))
                    .map(|(index, _)| (*index, fired(call.clone(), callee_values)))
                    .collect()
            }
            Record::Reached(reached) => {
                self.count(&reached.class, &reached.method, &reached.descriptor);
                self.probes
                    .handlers
                    .iter()
                    .filter(|(_, selector)| selector.takes_point(&reached))
                    .map(|(index, _)| (*index, fired_at(reached.clone())))
                    .collect()
            }
            Record::Calls(batch) => self.batch(batch),
            Record::Reported(reported) => return Some(Reading::Unseen(self.unseen(&reported))),
            _ => Vec::new(),
        };
        (!taken.is_empty()).then_some(Reading::Fired(taken))
    }

    fn count(&mut self, class: &str, method: &str, descriptor: &str) {
        let key = (
            class.to_string(),
            method.to_string(),
            descriptor.to_string(),
        );
        *self.received.entry(key).or_default() += 1;
    }

    /// The calls of a batch each handler takes.
    fn batch(&mut self, batch: CallBatch) -> Vec<(usize, Fired)> {
        for thread in batch.threads.iter().cloned() {
            self.batch_threads.insert(thread.key, thread);
        }
        for probe in batch.probes.iter().cloned() {
            // Which handlers take its calls, durations aside.
            let call = |threw: bool| Call {
                class: probe.class.clone(),
                method: probe.method.clone(),
                descriptor: probe.descriptor.clone(),
                duration_ns: u64::MAX,
                outcome: match threw {
                    true => Outcome::Threw(None),
                    false => Outcome::Returned(None),
                },
                callee: probe.callee.clone(),
                ..empty_call()
            };
            let takers = |call: Call| -> Vec<(usize, Option<Duration>)> {
                self.probes
                    .handlers
                    .iter()
                    .filter(|(_, selector)| selector.takes(&call))
                    .map(|(index, selector)| (*index, selector.threshold))
                    .collect()
            };
            let (returned, threw) = (takers(call(false)), takers(call(true)));
            let takers = BatchTakers {
                probe,
                received: 0,
                returned,
                threw,
            };
            self.batch_probes.insert(takers.probe.key, takers);
        }
        let mut taken = Vec::new();
        for call in batch.iter() {
            let Some(takers) = self.batch_probes.get_mut(&call.probe) else {
                continue;
            };
            takers.received += 1;
            let handlers = if call.threw {
                &takers.threw
            } else {
                &takers.returned
            };
            for &(index, threshold) in handlers {
                if threshold.is_some_and(|t| call.duration_ns < t.as_nanos() as u64) {
                    continue;
                }
                let thread = self.batch_threads.get(&call.thread);
                let probe = &takers.probe;
                taken.push((
                    index,
                    Fired {
                        class: probe.class.clone(),
                        method: probe.method.clone(),
                        start_ns: call.time_ns,
                        duration_ns: call.duration_ns,
                        thread: thread.map_or_else(|| "?".into(), |t| t.name.clone()),
                        tid: thread.map_or(0, |t| t.tid),
                        callee: probe.callee.clone(),
                        ..Fired::default()
                    },
                ));
            }
        }
        taken
    }

    /// `N calls of Class.method` for the calls the probes reported that did not arrive.
    fn unseen(&mut self, reported: &Reported) -> Vec<(u64, String)> {
        for takers in self.batch_probes.values_mut() {
            let probe = &takers.probe;
            let key = (
                probe.class.clone(),
                probe.method.clone(),
                probe.descriptor.clone(),
            );
            *self.received.entry(key).or_default() += std::mem::take(&mut takers.received);
        }
        reported
            .methods
            .iter()
            .filter_map(|m| {
                let key = (m.class.clone(), m.method.clone(), m.descriptor.clone());
                let received = self.received.get(&key).copied().unwrap_or(0);
                let unseen = m.calls.saturating_sub(received);
                (unseen > 0).then(|| (unseen, format!("{}.{}", m.class, m.method)))
            })
            .collect()
    }
}

/// A traced call as a probe firing. With `callee_values` (the plan's), a call-site call's
/// values are `this`, the called method's receiver, then its arguments.
pub fn fired(call: Call, callee_values: bool) -> Fired {
    let (returned, thrown) = match call.outcome {
        Outcome::Returned(value) => (value, None),
        Outcome::Threw(exception) => (None, exception),
    };
    let mut values = call.values;
    let mut sizes = call.sizes;
    let at_call = callee_values && call.callee.is_some() && values.len() > 1;
    let target = at_call.then(|| values.remove(1));
    let target_size = (at_call && sizes.len() > 1).then(|| sizes.remove(1));
    Fired {
        class: call.class,
        method: call.method,
        start_ns: call.time_ns,
        duration_ns: call.duration_ns,
        values,
        target,
        returned,
        thrown,
        sizes,
        returned_size: call.return_size,
        target_size,
        stack: call.stack,
        thread: call.thread,
        tid: call.tid,
        callee: call.callee,
        point: None,
    }
}

/// What a `Kind.ENTRY`, `LINE`, `NEW` or `SYNC_*` handler runs on.
fn fired_at(reached: Reached) -> Fired {
    Fired {
        class: reached.class,
        method: reached.method,
        start_ns: reached.time_ns,
        values: reached.values,
        sizes: reached.sizes,
        returned: reached.allocated,
        stack: reached.stack,
        thread: reached.thread,
        tid: reached.tid,
        point: Some(reached.point),
        ..Fired::default()
    }
}

/// A call of no method, for the fields a record or batch leaves out.
pub(crate) fn empty_call() -> Call {
    Call {
        time_ns: 0,
        thread: "main".into(),
        tid: 1,
        class: String::new(),
        method: String::new(),
        descriptor: String::new(),
        duration_ns: 0,
        coarse: false,
        args: None,
        values: Vec::new(),
        sizes: Vec::new(),
        return_size: None,
        outcome: Outcome::Returned(None),
        stack: Vec::new(),
        callee: None,
        label: None,
    }
}
