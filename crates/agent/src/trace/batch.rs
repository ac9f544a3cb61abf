//! Calls in batches, for plans with `batches` (BTrace scripts): the `jtap-trace` thread adds
//! each call that carries nothing described to a [`CallBatch`] as four numbers, names each
//! method (or call site) and thread once per session, and sends the batch as one record when
//! it is full, when it is [`FLUSH_AFTER`] old, when the queue is idle, before any other
//! record and at the end. One record and one frame per call kept at most ~100,000 calls a
//! second from reaching a script's handlers (issue 39: 81-95 % of a hot method's calls
//! dropped).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jtap_classfile::plan::Registry;
use jtap_protocol::records::{
    BatchCall, BatchProbe, BatchThread, CallBatch, MethodCalls, Reported,
};

/// Calls a batch holds before it is sent.
const MAX_CALLS: usize = 4096;
/// Longest a call waits in a batch while calls keep coming.
const FLUSH_AFTER: Duration = Duration::from_millis(20);

/// The batch being filled, and the keys of the methods and threads already named.
#[derive(Default)]
pub struct Batcher {
    batch: CallBatch,
    probes: HashMap<(u32, Option<u32>), u32>,
    threads: HashMap<(u32, Arc<str>), u32>,
    /// When the batch's first call was added.
    since: Option<Instant>,
}

impl Batcher {
    /// The key of method `method` (at call site `site`), if it was named already.
    pub fn probe(&self, method: u32, site: Option<u32>) -> Option<u32> {
        self.probes.get(&(method, site)).copied()
    }

    /// Names method `method` (at call site `site`) in the batch: its key from now on.
    /// `probe`'s key is set here.
    pub fn name_probe(&mut self, method: u32, site: Option<u32>, mut probe: BatchProbe) -> u32 {
        let key = self.probes.len() as u32;
        self.probes.insert((method, site), key);
        probe.key = key;
        self.batch.probes.push(probe);
        key
    }

    /// The key of a thread, named in the batch the first time.
    pub fn thread(&mut self, name: &Arc<str>, tid: u32) -> u32 {
        if let Some(&key) = self.threads.get(&(tid, name.clone())) {
            return key;
        }
        let key = self.threads.len() as u32;
        self.threads.insert((tid, name.clone()), key);
        self.batch.threads.push(BatchThread {
            key,
            name: name.to_string(),
            tid,
        });
        key
    }

    /// Adds a call.
    pub fn push(&mut self, call: BatchCall) {
        self.since.get_or_insert_with(Instant::now);
        self.batch.push(call);
    }

    /// Whether the batch should go now (full, or its first call waited long enough).
    pub fn due(&self) -> bool {
        self.batch.len() >= MAX_CALLS || self.since.is_some_and(|t| t.elapsed() >= FLUSH_AFTER)
    }

    /// The batch, if it holds a call, with durations `coarse` or not; the next starts
    /// empty.
    pub fn take(&mut self, coarse: bool) -> Option<CallBatch> {
        if self.batch.is_empty() {
            return None;
        }
        self.since = None;
        let mut batch = std::mem::take(&mut self.batch);
        batch.coarse = coarse;
        Some(batch)
    }
}

/// How many calls of each method the probes reported in the session, named (`counts` by
/// method id, from [`super::probes::reported`]).
pub fn reported(registry: &Registry, counts: &[(u32, u64)]) -> Reported {
    Reported {
        methods: counts
            .iter()
            .filter_map(|&(id, calls)| {
                let method = registry.methods.get(id as usize)?;
                Some(MethodCalls {
                    class: method.class.replace('/', "."),
                    method: method.name.clone(),
                    descriptor: method.descriptor.clone(),
                    calls,
                })
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(probe: u32, thread: u32) -> BatchCall {
        BatchCall {
            probe,
            threw: false,
            thread,
            time_ns: 1,
            duration_ns: 2,
        }
    }

    #[test]
    fn methods_and_threads_are_named_once_per_session() {
        let mut batcher = Batcher::default();
        assert_eq!(batcher.take(false), None);
        let named = |method: &str| BatchProbe {
            key: u32::MAX,
            class: "a.B".into(),
            method: method.into(),
            descriptor: "()V".into(),
            callee: None,
        };
        assert_eq!(batcher.probe(7, None), None);
        let run = batcher.name_probe(7, None, named("run"));
        let site = batcher.name_probe(7, Some(0), named("run"));
        let main: Arc<str> = "main".into();
        let thread = batcher.thread(&main, 10);
        assert_eq!(batcher.thread(&main, 10), thread);
        batcher.push(call(run, thread));
        batcher.push(call(site, thread));
        assert!(!batcher.due());
        let first = batcher.take(true).unwrap();
        assert_eq!(first.len(), 2);
        assert!(first.coarse);
        assert_eq!((first.probes[0].key, first.probes[1].key), (0, 1));
        assert_eq!(first.threads.len(), 1);
        // Known methods and threads are not named again.
        assert_eq!(batcher.probe(7, Some(0)), Some(site));
        let again = batcher.thread(&main, 10);
        batcher.push(call(site, again));
        let second = batcher.take(false).unwrap();
        assert!(second.probes.is_empty() && second.threads.is_empty());
        for _ in 0..MAX_CALLS {
            batcher.push(call(run, thread));
        }
        assert!(batcher.due());
    }
}
