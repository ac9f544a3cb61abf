//! Calls many to a record, for plans with `batches` (BTrace scripts, whose handlers must see
//! every call of a hot method): a call that carries nothing described (no values, return
//! value, exception or stack) travels as four numbers, its method and thread named once per
//! session, in the batch where they first appear. At the end of the session [`Reported`]
//! says how many calls of each method the probes reported, so that the client can tell how
//! many it did not see.

use serde::{Deserialize, Serialize};

use super::Callee;

/// Numbers per call in [`CallBatch::calls`].
const WORDS: usize = 4;

/// Calls of traced methods, in the order they ended.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CallBatch {
    /// Methods (or call sites) first seen in this batch; later batches refer to them by key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<BatchProbe>,
    /// Threads first seen in this batch; later batches refer to them by key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub threads: Vec<BatchThread>,
    /// Durations are good to a millisecond or worse (see [`super::Call::coarse`]).
    pub coarse: bool,
    /// Four numbers per call: its probe's key times two, plus one if it threw; its
    /// thread's key; its start (wall clock, ns since the Unix epoch); its duration in ns.
    pub calls: Vec<u64>,
}

/// A traced method, or a call site (then `callee` is the method called and the others name
/// the caller), as a [`CallBatch`] names it once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchProbe {
    /// What the calls refer to it by.
    pub key: u32,
    /// `pkg.Class`.
    pub class: String,
    /// The method's name.
    pub method: String,
    /// The method's descriptor.
    pub descriptor: String,
    /// At a call site: the method called.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callee: Option<Callee>,
}

/// A thread, as a [`CallBatch`] names it once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchThread {
    /// What the calls refer to it by.
    pub key: u32,
    /// Its name.
    pub name: String,
    /// Its kernel id.
    pub tid: u32,
}

/// One call of a [`CallBatch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchCall {
    /// Its probe's key.
    pub probe: u32,
    /// It ended by throwing.
    pub threw: bool,
    /// Its thread's key.
    pub thread: u32,
    /// When it started (wall clock, ns since the Unix epoch).
    pub time_ns: u64,
    /// How long it took.
    pub duration_ns: u64,
}

impl CallBatch {
    /// Adds a call.
    pub fn push(&mut self, call: BatchCall) {
        self.calls.extend_from_slice(&[
            u64::from(call.probe) << 1 | u64::from(call.threw),
            u64::from(call.thread),
            call.time_ns,
            call.duration_ns,
        ]);
    }

    /// Calls in the batch.
    pub fn len(&self) -> usize {
        self.calls.len() / WORDS
    }

    /// Whether it holds no call.
    pub fn is_empty(&self) -> bool {
        self.calls.len() < WORDS
    }

    /// The calls, in order.
    pub fn iter(&self) -> impl Iterator<Item = BatchCall> + '_ {
        self.calls.chunks_exact(WORDS).map(|words| BatchCall {
            probe: (words[0] >> 1) as u32,
            threw: words[0] & 1 == 1,
            thread: words[1] as u32,
            time_ns: words[2],
            duration_ns: words[3],
        })
    }

    /// `N calls` (the calls themselves are for a script's handlers).
    pub fn to_text(&self) -> String {
        format!("{} calls", self.len())
    }
}

/// How many calls of each method the probes reported in a session (plans with `batches`),
/// whether or not they reached the client.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reported {
    /// Methods with at least one call reported.
    pub methods: Vec<MethodCalls>,
}

/// Calls of one method (a call site counts in its caller's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MethodCalls {
    /// `pkg.Class`.
    pub class: String,
    /// The method's name.
    pub method: String,
    /// The method's descriptor.
    pub descriptor: String,
    /// Calls (and points reached in it) the probes reported.
    pub calls: u64,
}

impl Reported {
    /// `N calls of pkg.Class.method reported` per method.
    pub fn to_text(&self) -> String {
        self.methods
            .iter()
            .map(|m| format!("{} calls of {}.{} reported", m.calls, m.class, m.method))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn batch() -> CallBatch {
        let mut batch = CallBatch {
            probes: vec![BatchProbe {
                key: 0,
                class: "a.B".into(),
                method: "run".into(),
                descriptor: "()V".into(),
                callee: None,
            }],
            threads: vec![BatchThread {
                key: 3,
                name: "main".into(),
                tid: 42,
            }],
            coarse: false,
            calls: Vec::new(),
        };
        for (probe, threw) in [(0, false), (7, true)] {
            batch.push(BatchCall {
                probe,
                threw,
                thread: 3,
                time_ns: 1_700_000_000_000_000_000,
                duration_ns: 250,
            });
        }
        batch
    }

    #[test]
    fn calls_read_back_as_they_were_pushed() {
        let batch = batch();
        assert_eq!(batch.len(), 2);
        let calls: Vec<BatchCall> = batch.iter().collect();
        assert_eq!((calls[0].probe, calls[0].threw), (0, false));
        assert_eq!((calls[1].probe, calls[1].threw), (7, true));
        assert_eq!(calls[1].time_ns, 1_700_000_000_000_000_000);
        assert_eq!(batch.to_text(), "2 calls");
        assert!(CallBatch::default().is_empty());
    }
}
