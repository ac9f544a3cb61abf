//! The `jtap-trace` thread: turns the probes' records into typed records
//! ([`jtap_protocol::records::trace`]) and streams them to the client as they come — one per
//! call (trace), per entry call's tree (calltree), per interval (monitor); the client renders
//! them as text or JSON. Notes about refused or failed classes go out as notes (the client's
//! stderr); once `-n` records went out, the probes are switched off and
//! [`Output::count_reached`] tells the agent to end the session.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use jtap_classfile::instruction::op::{
    ANEWARRAY, INVOKEINTERFACE, INVOKESPECIAL, INVOKESTATIC, INVOKEVIRTUAL, MULTIANEWARRAY, NEW,
    NEWARRAY,
};
use jtap_classfile::plan::Registry;
use jtap_protocol::records::{
    self, BatchCall, BatchProbe, Call, CallTree, Callee, FieldAccess, InsnReached, MethodStats,
    MonitorInterval, Point, Reached, TreeNode,
};
use jtap_protocol::trace::Mode;
use jtap_protocol::Frame;

use super::batch::Batcher;
use super::calltree::{self, Node, Tree};
use super::clock::clock;
use super::ffi::Jni;
use super::instrument::Tracing;
use super::probes::{self, Outcome, Record, STACK_DEPTH};
use super::stats::{self, Snapshot};
use super::values::{Describer, SEPARATOR};
use crate::channel::ClientSink;
use crate::thread::{spawn_attached, Vm};

/// Deepest level of a call tree sent to the client (a recursive entry nests as deep as the
/// tree is large; the record's JSON must stay within what a reader's recursion limit takes):
/// deeper calls count in their ancestor's time.
const MAX_DRAWN_DEPTH: u32 = 48;

/// How long a stopping reporter waits for records of probes still running.
const STOP_GRACE: Duration = Duration::from_millis(50);

/// Default monitor interval.
const MONITOR_INTERVAL: Duration = Duration::from_secs(5);

/// Shared between the engine and its `jtap-trace` thread.
#[derive(Default)]
pub struct Output {
    sink: Mutex<Option<Arc<dyn ClientSink>>>,
    /// What was sent before the session was known, sent when it is.
    early: Mutex<Vec<Frame>>,
    stop: AtomicBool,
    finished: AtomicBool,
    /// The thread did not flush in time: it ends without rendering what is still queued
    /// (the next session's thread skips those records).
    pub abandoned: AtomicBool,
    /// Records reported so far.
    pub reported: AtomicU64,
    /// `-n` records went out: the session is done.
    pub count_reached: AtomicBool,
}

impl Output {
    /// Where the text goes from now on.
    pub fn set_sink(&self, sink: Arc<dyn ClientSink>) {
        let mut slot = self.sink.lock().unwrap_or_else(|e| e.into_inner());
        for frame in std::mem::take(&mut *self.early.lock().unwrap_or_else(|e| e.into_inner())) {
            sink.send_frame(frame);
        }
        *slot = Some(sink);
    }

    /// Sends a result (a call, a tree, an interval's statistics) to the client.
    pub fn send(&self, record: &records::Record) {
        self.send_frame(Frame::Record(record.encode()));
    }

    /// Sends a note (a refused class, what was instrumented) to the client's stderr.
    pub fn note(&self, text: String) {
        self.send_frame(Frame::Note(text));
    }

    /// Sends `frame`, or keeps it until the session is known.
    fn send_frame(&self, frame: Frame) {
        match self.sink.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            Some(sink) => sink.send_frame(frame),
            None => self
                .early
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(frame),
        }
    }

    /// Asks the thread to flush what is queued and end; waits up to `wait` for it, then
    /// tells it to end at once.
    pub fn finish(&self, wait: Duration) {
        self.stop.store(true, Ordering::SeqCst);
        let deadline = Instant::now() + wait;
        while !self.finished.load(Ordering::SeqCst) {
            if Instant::now() >= deadline {
                self.abandoned.store(true, Ordering::SeqCst);
                return;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

/// Starts the `jtap-trace` thread for a session of generation `generation`.
pub fn spawn(
    vm: Vm,
    tracing: Arc<Tracing>,
    generation: u32,
    output: Arc<Output>,
) -> Result<(), String> {
    let done = output.clone();
    spawn_attached(vm, "jtap-trace".into(), move || {
        let mut reporter = Reporter::new(vm, tracing, generation, output);
        reporter.run();
        reporter.flush_calls();
        done.finished.store(true, Ordering::SeqCst);
    })
    .map(drop)
    .map_err(|e| format!("cannot start the jtap-trace thread: {e}"))
}

struct Reporter {
    vm: Vm,
    tracing: Arc<Tracing>,
    generation: u32,
    output: Arc<Output>,
    /// Resolved stack frames by jmethodID.
    frames: HashMap<usize, Option<FrameName>>,
    monitor_previous: HashMap<(u32, u32), Snapshot>,
    monitor_since: Instant,
    /// Plans with `batches`: the calls not sent yet.
    batch: Batcher,
}

struct FrameName {
    class: String,
    method: String,
    source: Option<String>,
    lines: Vec<(i64, i32)>,
}

impl Reporter {
    fn new(vm: Vm, tracing: Arc<Tracing>, generation: u32, output: Arc<Output>) -> Reporter {
        Reporter {
            vm,
            tracing,
            generation,
            output,
            frames: HashMap::new(),
            monitor_previous: HashMap::new(),
            monitor_since: Instant::now(),
            batch: Batcher::default(),
        }
    }

    fn run(&mut self) {
        let receiver = probes::receiver().lock().unwrap_or_else(|e| e.into_inner());
        let mut carried = probes::take_carried();
        let count = self.tracing.plan.count.unwrap_or(u64::MAX);
        let interval = self.tracing.plan.interval.unwrap_or(MONITOR_INTERVAL);
        let mut count_sent = false;
        while !self.output.abandoned.load(Ordering::SeqCst) {
            for note in self.tracing.take_notes() {
                self.output.note(note);
            }
            let stopping = self.output.stop.load(Ordering::SeqCst);
            if probes::awaiting_labels() {
                // A monitor's first interval begins when its calls begin to count.
                self.monitor_since = Instant::now();
            } else if self.tracing.plan.mode == Mode::Monitor
                && (stopping || self.monitor_since.elapsed() >= interval)
                && self.output.reported.load(Ordering::Relaxed) < count
            {
                self.monitor_report();
                self.counted(count, &mut count_sent);
            }
            // Stopping, the queue is drained until it stays empty for STOP_GRACE: a probe
            // that was already running when the probes were switched off (taking a stack,
            // describing values) still hands over its record.
            let wait = if stopping {
                STOP_GRACE
            } else {
                Duration::from_millis(20)
            };
            let next = match carried.take() {
                Some(record) => Ok(record),
                None => receiver.recv_timeout(wait).inspect(|record| {
                    if let Record::Tree { tree, .. } = record {
                        calltree::taken(tree.nodes.len());
                    }
                }),
            };
            match next {
                Ok(record) => {
                    if record.generation() > self.generation {
                        // A newer session runs: every record of this one came before it.
                        probes::carry(record);
                        break;
                    }
                    if record.generation() != self.generation
                        || self.output.reported.load(Ordering::Relaxed) >= count
                    {
                        continue;
                    }
                    if let Some(record) = self.render(record) {
                        self.output.send(&record);
                        self.counted(count, &mut count_sent);
                    }
                }
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) if stopping => {
                    break
                }
                Err(_) => self.flush_calls(),
            }
        }
    }

    fn render(&mut self, record: Record) -> Option<records::Record> {
        let record = self.batched(record)?;
        let jni = Jni::current(self.vm);
        let render = |me: &mut Reporter| match record {
            Record::Call {
                thread,
                tid,
                method,
                site,
                start,
                ticks,
                args,
                outcome,
                stack,
                label,
                ..
            } => Some(records::Record::Call(Call {
                label: crate::label::name(label),
                ..me.call(
                    (thread.to_string(), tid),
                    (method, site),
                    start,
                    ticks,
                    args,
                    outcome,
                    &stack,
                )
            })),
            Record::Reached {
                thread,
                tid,
                method,
                at,
                point,
                values,
                stack,
                ..
            } => me
                .reached((thread.to_string(), tid), method, at, point, values, &stack)
                .map(records::Record::Reached),
            Record::Tree {
                thread,
                tree,
                label,
                ..
            } => me
                .tree(thread.to_string(), &tree)
                .map(|tree| CallTree {
                    label: crate::label::name(label),
                    ..tree
                })
                .map(records::Record::Tree),
        };
        match jni {
            Some(jni) => jni.with_local_frame(64, || render(self)).flatten(),
            None => render(self),
        }
    }

    /// Plans with `batches`: a call that carries nothing described goes into the batch
    /// (None); any other record comes back, once the batch went out before it.
    fn batched(&mut self, record: Record) -> Option<Record> {
        let plan = &self.tracing.plan;
        // With `return`, a call that returned null passes no value but shows one.
        let batches = plan.batches && plan.count.is_none() && !plan.returns;
        match record {
            Record::Call {
                thread,
                tid,
                method,
                site,
                start,
                ticks,
                args: None,
                outcome: outcome @ (Outcome::Returned(None) | Outcome::Threw(None)),
                stack,
                label: 0,
                ..
            } if batches && stack.is_empty() => {
                let probe = match self.batch.probe(method, site) {
                    Some(key) => key,
                    None => {
                        let (class, method_name, descriptor) = self.method_name(method);
                        let named = BatchProbe {
                            key: 0,
                            class,
                            method: method_name,
                            descriptor,
                            callee: site.and_then(|site| self.callee(site)),
                        };
                        self.batch.name_probe(method, site, named)
                    }
                };
                let c = clock();
                let thread = self.batch.thread(&thread, tid);
                self.batch.push(BatchCall {
                    probe,
                    threw: matches!(outcome, Outcome::Threw(_)),
                    thread,
                    time_ns: c.wall_ns(start),
                    duration_ns: c.ns(ticks),
                });
                self.output.reported.fetch_add(1, Ordering::Relaxed);
                if self.batch.due() {
                    self.flush_calls();
                }
                None
            }
            record => {
                self.flush_calls();
                Some(record)
            }
        }
    }

    /// Sends the calls batched so far.
    fn flush_calls(&mut self) {
        if let Some(batch) = self.batch.take(probes::whole_milliseconds()) {
            self.output.send(&records::Record::Calls(batch));
        }
    }

    fn method_name(&self, id: u32) -> (String, String, String) {
        let registry = self
            .tracing
            .registry
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        match registry.methods.get(id as usize) {
            Some(m) => (
                m.class.replace('/', "."),
                m.name.clone(),
                m.descriptor.clone(),
            ),
            None => ("?".into(), format!("method#{id}"), String::new()),
        }
    }

    /// A tree node's method as (`Class.method`, descriptor), from the registry (locked once
    /// per tree: the class-file hook holds it while it instruments a class).
    fn node_key(registry: &Registry, node: &Node) -> (String, String) {
        if !node.site {
            return match registry.methods.get(node.id as usize) {
                Some(m) => (
                    format!("{}.{}", m.class.replace('/', "."), m.name),
                    m.descriptor.clone(),
                ),
                None => (format!("?.method#{}", node.id), String::new()),
            };
        }
        match registry.sites.get(node.id as usize) {
            Some(site) => {
                let (member, descriptor) =
                    site.detail.split_once('(').unwrap_or((&site.detail, ")"));
                (member.replace('/', "."), format!("({descriptor}"))
            }
            None => (format!("site#{}", node.id), String::new()),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn call(
        &mut self,
        (thread, tid): (String, u32),
        (method, site): (u32, Option<u32>),
        start: u64,
        ticks: u64,
        args: Option<String>,
        outcome: Outcome,
        stack: &[(usize, i64)],
    ) -> Call {
        let c = clock();
        let (class, method, descriptor) = self.method_name(method);
        let depth = self.tracing.plan.depth.map_or(STACK_DEPTH, |d| d as usize);
        // Values (scripts) come joined, text (`--args`) as it is shown.
        let (args, (values, sizes)) = match (self.tracing.plan.values, args) {
            (true, Some(joined)) => (None, self.values(&joined)),
            (_, args) => (args, Default::default()),
        };
        let (outcome, return_size) = match outcome {
            Outcome::Returned(Some(value)) if self.tracing.plan.sizes => {
                let (text, size) = Describer::split_size(&value);
                (records::Outcome::Returned(Some(text.into())), Some(size))
            }
            // The probes pass no value for null; a method that returns one returned null.
            Outcome::Returned(None) if self.tracing.plan.returns => {
                let callee = site.and_then(|site| self.callee(site));
                let returned = callee.as_ref().map_or(&descriptor, |c| &c.descriptor);
                let null = (!returned.ends_with(")V")).then(|| "null".to_string());
                (records::Outcome::Returned(null), None)
            }
            Outcome::Returned(value) => (records::Outcome::Returned(value), None),
            Outcome::Threw(thrown) => (records::Outcome::Threw(thrown), None),
        };
        Call {
            time_ns: c.wall_ns(start),
            thread,
            tid,
            class,
            method,
            descriptor,
            duration_ns: c.ns(ticks),
            coarse: probes::whole_milliseconds(),
            args,
            values,
            sizes,
            return_size,
            outcome,
            stack: stack
                .iter()
                .filter_map(|&(m, loc)| self.frame(m, loc))
                .take(depth)
                .collect(),
            callee: site.and_then(|site| self.callee(site)),
            // The caller adds the request label.
            label: None,
        }
    }

    /// A point reached, with what its site says (the class allocated, enter or exit).
    fn reached(
        &mut self,
        (thread, tid): (String, u32),
        method: u32,
        at: u64,
        point: probes::Reached,
        values: Option<String>,
        stack: &[(usize, i64)],
    ) -> Option<Reached> {
        let (class, method, descriptor) = self.method_name(method);
        let site = |id: u32| {
            let registry = self
                .tracing
                .registry
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            registry
                .sites
                .get(id as usize)
                .map(|s| (s.kind, s.opcode, s.detail.replace('/', ".")))
        };
        let mut allocated = None;
        let point = match point {
            probes::Reached::Entry => Point::Entry,
            probes::Reached::Line(line) => Point::Line(line),
            probes::Reached::New(id, described) => {
                allocated = described;
                match site(id)? {
                    (_, NEW, class) => Point::New(class),
                    (_, opcode, detail) => new_array(opcode, &detail)?,
                }
            }
            probes::Reached::Sync(id, lock) => match site(id)?.0 {
                "monitorenter" => Point::SyncEnter(lock),
                _ => Point::SyncExit(lock),
            },
            probes::Reached::Field(id, target, value) => {
                let (kind, _, field) = site(id)?;
                let access = FieldAccess {
                    field,
                    target,
                    value,
                };
                match kind {
                    "field-write" => Point::FieldSet(access),
                    _ => Point::FieldGet(access),
                }
            }
            probes::Reached::Insn(id, target, values) => {
                let (kind, _, detail) = site(id)?;
                Point::Insn(InsnReached {
                    kind: kind.into(),
                    detail,
                    target,
                    values,
                })
            }
        };
        let depth = self.tracing.plan.depth.map_or(STACK_DEPTH, |d| d as usize);
        let (values, sizes) = values.map(|v| self.values(&v)).unwrap_or_default();
        Some(Reached {
            time_ns: clock().wall_ns(at),
            thread,
            tid,
            class,
            method,
            descriptor,
            point,
            values,
            sizes,
            allocated,
            stack: stack
                .iter()
                .filter_map(|&(m, loc)| self.frame(m, loc))
                .take(depth)
                .collect(),
        })
    }

    /// Values joined by [`SEPARATOR`], one by one, and their sizes when the plan measures
    /// them.
    fn values(&self, joined: &str) -> (Vec<String>, Vec<u64>) {
        let values = joined.split(SEPARATOR);
        if !self.tracing.plan.sizes {
            return (values.map(str::to_string).collect(), Vec::new());
        }
        values
            .map(|value| {
                let (text, size) = Describer::split_size(value);
                (text.to_string(), size)
            })
            .unzip()
    }

    /// The method a call site calls.
    fn callee(&self, site: u32) -> Option<Callee> {
        let registry = self
            .tracing
            .registry
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let site = registry.sites.get(site as usize)?;
        let (member, descriptor) = site.detail.split_once('(')?;
        let (owner, name) = member.rsplit_once('.')?;
        Some(Callee {
            class: owner.replace('/', "."),
            method: name.to_string(),
            descriptor: format!("({descriptor}"),
            invoke: match site.opcode {
                INVOKEVIRTUAL => "virtual",
                INVOKESPECIAL => "special",
                INVOKESTATIC => "static",
                INVOKEINTERFACE => "interface",
                _ => "dynamic",
            }
            .to_string(),
        })
    }

    /// `Class.method(File.java:line)` for a stack frame, or None for the probes' own frames.
    fn frame(&mut self, method: usize, location: i64) -> Option<String> {
        let env = self.tracing.env;
        let jni = Jni::current(self.vm);
        let name = self.frames.entry(method).or_insert_with(|| {
            let id = method as jtap_jvmti::sys::jmethodID;
            // SAFETY: the id came from GetStackTrace moments ago; its class stays loaded while
            // an instrumented method of it runs or may run.
            let (name, _) = unsafe { env.method_name(id) }.ok()?;
            // SAFETY: as above.
            let class = unsafe { env.method_declaring_class(id) }.ok()?;
            // SAFETY: class is a live local reference.
            let signature = unsafe { env.class_signature(class) }.ok()?;
            // SAFETY: as above.
            let source = unsafe { env.source_file_name(class) }.ok();
            if let Some(jni) = jni {
                jni.delete_local(class);
            }
            // SAFETY: as above.
            let lines = unsafe { env.line_number_table(id) }
                .map(|t| {
                    t.iter()
                        .map(|e| (e.start_location, e.line_number))
                        .collect()
                })
                .unwrap_or_default();
            let class = signature
                .trim_start_matches('L')
                .trim_end_matches(';')
                .replace('/', ".");
            Some(FrameName {
                class,
                method: name,
                source,
                lines,
            })
        });
        let name = name.as_ref()?;
        if name.class == "jtap.runtime.Probes" {
            return None;
        }
        let line = name
            .lines
            .iter()
            .filter(|(start, _)| *start <= location)
            .max_by_key(|(start, _)| *start)
            .map(|(_, l)| *l);
        let place = match (&name.source, line) {
            (Some(file), Some(line)) => format!("{file}:{line}"),
            (Some(file), None) => file.clone(),
            (None, _) => "Unknown Source".into(),
        };
        Some(format!("{}.{}({place})", name.class, name.method))
    }

    /// A tree as the client gets it, in time linear in its nodes (a full tree has 100,000):
    /// nodes are named by interned keys, so grouping and merging compare numbers.
    fn tree(&mut self, thread: String, tree: &Tree) -> Option<CallTree> {
        let root = tree.nodes.first()?;
        let mut key_of_node: HashMap<(u32, bool), u32> = HashMap::new();
        let mut key_of_text: HashMap<(String, String), u32> = HashMap::new();
        let mut keys: Vec<(String, String)> = Vec::new();
        let registry = self
            .tracing
            .registry
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let node_keys: Vec<u32> = tree
            .nodes
            .iter()
            .map(|n| {
                if let Some(&key) = key_of_node.get(&(n.id, n.site)) {
                    return key;
                }
                let text = Reporter::node_key(&registry, n);
                let key = *key_of_text.entry(text.clone()).or_insert_with(|| {
                    keys.push(text);
                    keys.len() as u32 - 1
                });
                key_of_node.insert((n.id, n.site), key);
                key
            })
            .collect();
        drop(registry);
        let (nodes, node_keys) = merge_calls_into_sites(&tree.nodes, node_keys, &keys);
        let names = display_names(&keys);
        let depth = self.tracing.plan.depth;
        let aggregate = Aggregate::build(&nodes, &node_keys, &names, depth);
        Some(CallTree {
            time_ns: clock().wall_ns(root.start),
            thread,
            truncated: tree.truncated,
            unfinished: tree.unfinished,
            root: aggregate.to_node(root.start),
            label: None,
        })
    }

    /// Counts one result (a call, a tree, a monitor interval) reported; at the `-n`th, stops
    /// the probes and tells the agent.
    fn counted(&mut self, count: u64, count_sent: &mut bool) {
        let reported = self.output.reported.fetch_add(1, Ordering::Relaxed) + 1;
        if reported >= count && !*count_sent {
            *count_sent = true;
            probes::deactivate();
            self.output.count_reached.store(true, Ordering::SeqCst);
        }
    }

    fn monitor_report(&mut self) {
        let elapsed = self.monitor_since.elapsed();
        self.monitor_since = Instant::now();
        let now = clock().wall_ns(super::clock::ticks());
        let mut rows = Vec::new();
        for (key @ (id, label), snapshot) in stats::snapshot_all() {
            let interval = snapshot.since(self.monitor_previous.get(&key));
            self.monitor_previous.insert(key, snapshot);
            let (class, method, descriptor) = self.method_name(id);
            rows.push(((format!("{class}.{method}"), descriptor), label, interval));
        }
        let names = display_names(&rows.iter().map(|(key, ..)| key.clone()).collect::<Vec<_>>());
        let mut rows: Vec<MethodStats> = names
            .into_iter()
            .zip(rows)
            .filter(|(_, (_, label, interval))| *label == 0 || interval.calls > 0)
            .map(|(method, (_, label, stats))| MethodStats {
                method,
                label: crate::label::name(label),
                stats,
            })
            .collect();
        // A method's unlabelled row first, then its labels by name.
        rows.sort_by(|a, b| (&a.method, &a.label).cmp(&(&b.method, &b.label)));
        let interval = MonitorInterval {
            time_ns: now,
            interval_ns: elapsed.as_nanos() as u64,
            rows,
        };
        self.output.send(&records::Record::Monitor(interval));
    }
}

/// A method node right under the call site that called it is the same call seen twice (a
/// glob entry makes every method an entry, whose call sites are timed too): keeps the site
/// (timed like its sibling sites) named after the method that ran, drops the method node and
/// hangs its children under the site. `node_keys` index `keys`, the (`Class.method`,
/// descriptor) of the nodes.
fn merge_calls_into_sites(
    nodes: &[Node],
    mut node_keys: Vec<u32>,
    keys: &[(String, String)],
) -> (Vec<Node>, Vec<u32>) {
    // Each key's method without its class (`work`, descriptor), as a number.
    let mut methods: HashMap<(&str, &str), u32> = HashMap::new();
    let method_of_key: Vec<u32> = keys
        .iter()
        .map(|(name, descriptor)| {
            let short = name.rsplit('.').next().unwrap_or(name);
            let next = methods.len() as u32;
            *methods.entry((short, descriptor)).or_insert(next)
        })
        .collect();
    let method = |node: usize, node_keys: &[u32]| method_of_key[node_keys[node] as usize];
    let mut parent: Vec<usize> = nodes.iter().map(|n| n.parent as usize).collect();
    let mut merged = vec![false; nodes.len()];
    for i in 1..nodes.len() {
        let p = parent[i];
        if !nodes[i].site
            && p < nodes.len()
            && p != i
            && nodes[p].site
            && method(p, &node_keys) == method(i, &node_keys)
        {
            merged[i] = true;
            node_keys[p] = node_keys[i];
        }
    }
    for i in 1..nodes.len() {
        while parent[i] < nodes.len() && merged[parent[i]] {
            parent[i] = parent[parent[i]];
        }
    }
    let mut index = vec![0u32; nodes.len()];
    let mut kept = Vec::new();
    let mut kept_keys = Vec::new();
    for i in 0..nodes.len() {
        if merged[i] {
            continue;
        }
        index[i] = kept.len() as u32;
        let mut node = nodes[i];
        node.parent = parent[i].min(nodes.len() - 1) as u32;
        kept.push(node);
        kept_keys.push(node_keys[i]);
    }
    for node in &mut kept {
        node.parent = index[node.parent as usize];
    }
    (kept, kept_keys)
}

/// Names for methods given as (`Class.method`, descriptor): with the parameter types
/// (`Foo.bar(int, String)`) where two of them share `Class.method`, else without.
fn display_names(keys: &[(String, String)]) -> Vec<String> {
    // Per name: its first descriptor, and whether another one was seen.
    let mut descriptors: HashMap<&str, (&str, bool)> = HashMap::new();
    for (name, descriptor) in keys {
        let seen = descriptors.entry(name).or_insert((descriptor, false));
        seen.1 |= seen.0 != descriptor;
    }
    keys.iter()
        .map(|(name, descriptor)| {
            if descriptors[name.as_str()].1 {
                format!("{name}({})", parameter_types(descriptor))
            } else {
                name.clone()
            }
        })
        .collect()
}

/// The parameter types of a JVM method descriptor, as source would write them with simple
/// class names: `(ILjava/lang/String;[J)V` as `int, String, long[]`.
fn parameter_types(descriptor: &str) -> String {
    let params = descriptor
        .strip_prefix('(')
        .and_then(|d| d.split_once(')'))
        .map_or("", |(p, _)| p);
    let mut types = Vec::new();
    let mut rest = params;
    while !rest.is_empty() {
        let dims = rest.bytes().take_while(|&b| b == b'[').count();
        let (element, after) = match rest.as_bytes().get(dims) {
            Some(b'L') => match rest[dims..].split_once(';') {
                Some((class, after)) => {
                    let simple = class.rsplit(['/', '$']).next().unwrap_or(class);
                    (simple.trim_start_matches('L').to_string(), after)
                }
                None => break,
            },
            Some(&code) => (
                jtap_classfile::descriptor::java_name(&(code as char).to_string()),
                &rest[dims + 1..],
            ),
            None => break,
        };
        types.push(format!("{element}{}", "[]".repeat(dims)));
        rest = after;
    }
    types.join(", ")
}

/// A call-tree node with its repeated calls merged: siblings calling the same method become
/// one node with a count, and their children are merged likewise.
struct Aggregate {
    name: String,
    count: u64,
    /// Start of the first call, in ticks.
    first: u64,
    /// Total ticks of all calls.
    total: u64,
    children: Vec<Aggregate>,
}

/// What [`Aggregate::merge`] reads: the nodes, each node's key (an index into the names) and
/// children.
struct Nodes<'a> {
    nodes: &'a [Node],
    keys: &'a [u32],
    names: &'a [String],
    children: Vec<Vec<usize>>,
}

impl Nodes<'_> {
    /// Node `i`'s end; a node never closed (its exit was not seen) ends with its parent.
    fn end(&self, i: usize, parent_end: u64) -> u64 {
        match self.nodes[i].end {
            0 => parent_end,
            end => end,
        }
    }
}

impl Aggregate {
    /// The tree of `nodes` (the first is the root), each named `names[keys[i]]`, merged down
    /// to `depth` levels (at most [`MAX_DRAWN_DEPTH`]).
    fn build(nodes: &[Node], keys: &[u32], names: &[String], depth: Option<u32>) -> Aggregate {
        let mut children: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
        for (i, n) in nodes.iter().enumerate().skip(1) {
            if (n.parent as usize) < nodes.len() {
                children[n.parent as usize].push(i);
            }
        }
        let root_end = nodes[0].end.max(nodes[0].start);
        let tree = Nodes {
            nodes,
            keys,
            names,
            children,
        };
        let depth = depth.unwrap_or(u32::MAX).min(MAX_DRAWN_DEPTH);
        Aggregate::merge(&[0], &tree, root_end, depth)
    }

    /// One aggregate of the nodes `group` (same key, same parent).
    fn merge(group: &[usize], tree: &Nodes, parent_end: u64, depth: u32) -> Aggregate {
        let first = group
            .iter()
            .map(|&i| tree.nodes[i].start)
            .min()
            .unwrap_or(0);
        let mut total = 0;
        let mut end = 0;
        let mut kids: Vec<Vec<usize>> = Vec::new();
        let mut kid_of_key: HashMap<u32, usize> = HashMap::new();
        for &i in group {
            let i_end = tree.end(i, parent_end);
            total += i_end.saturating_sub(tree.nodes[i].start);
            end = end.max(i_end);
            if depth == 0 {
                continue;
            }
            for &k in &tree.children[i] {
                let at = *kid_of_key.entry(tree.keys[k]).or_insert_with(|| {
                    kids.push(Vec::new());
                    kids.len() - 1
                });
                kids[at].push(k);
            }
        }
        let end = if group.is_empty() { parent_end } else { end };
        Aggregate {
            name: tree.names[tree.keys[group[0]] as usize].clone(),
            count: group.len() as u64,
            first,
            total,
            children: kids
                .iter()
                .map(|list| Aggregate::merge(list, tree, end, depth - 1))
                .collect(),
        }
    }

    /// The node as the client gets it: ticks as nanoseconds, offsets from `origin`.
    fn to_node(&self, origin: u64) -> TreeNode {
        let c = clock();
        TreeNode {
            name: self.name.clone(),
            count: self.count,
            offset_ns: c.ns(self.first.saturating_sub(origin)),
            total_ns: c.ns(self.total),
            children: self.children.iter().map(|ch| ch.to_node(origin)).collect(),
            per_entry_call: None,
        }
    }
}

/// The point of an array allocation site, from its instruction and the detail the class-file
/// crate records for it (dots for slashes): `newarray 10` (an `int[]`: the JVM's type code),
/// `anewarray` of a class (`pkg.Class[]`) or of an array type (`[I`: an `int[][]`),
/// `multianewarray` of its array type (`[[Lpkg.Class;`).
fn new_array(opcode: u8, detail: &str) -> Option<Point> {
    let (dimensions, element) = match opcode {
        NEWARRAY => {
            let code: u8 = detail.strip_prefix("newarray ")?.parse().ok()?;
            let element = [
                "boolean", "char", "float", "double", "byte", "short", "int", "long",
            ]
            .get(usize::from(code.checked_sub(4)?))?;
            (1, element.to_string())
        }
        ANEWARRAY if detail.starts_with('[') => {
            let (dimensions, element) = array_type(detail)?;
            (dimensions + 1, element)
        }
        ANEWARRAY => (1, detail.to_string()),
        MULTIANEWARRAY => array_type(detail)?,
        _ => return None,
    };
    Some(Point::NewArray {
        element,
        dimensions,
    })
}

/// The dimensions and element type of an array type descriptor (`[[I`: 2, `int`).
fn array_type(descriptor: &str) -> Option<(u32, String)> {
    let element = descriptor.trim_start_matches('[');
    let dimensions = (descriptor.len() - element.len()) as u32;
    let element = match element {
        "Z" => "boolean",
        "C" => "char",
        "F" => "float",
        "D" => "double",
        "B" => "byte",
        "S" => "short",
        "I" => "int",
        "J" => "long",
        class => class.strip_prefix('L')?.strip_suffix(';')?,
    };
    Some((dimensions, element.to_string()))
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn array_allocation_sites_name_their_element_type_and_dimensions() {
        let point = |opcode, detail| new_array(opcode, detail);
        let array = |element: &str, dimensions| {
            Some(Point::NewArray {
                element: element.into(),
                dimensions,
            })
        };
        assert_eq!(point(NEWARRAY, "newarray 5"), array("char", 1));
        assert_eq!(point(NEWARRAY, "newarray 11"), array("long", 1));
        assert_eq!(point(NEWARRAY, "newarray 3"), None);
        assert_eq!(
            point(ANEWARRAY, "java.lang.String"),
            array("java.lang.String", 1)
        );
        assert_eq!(point(ANEWARRAY, "[I"), array("int", 2));
        assert_eq!(point(MULTIANEWARRAY, "[[[Lapp.Cell;"), array("app.Cell", 3));
        assert_eq!(point(NEW, "app.Cell"), None);
    }

    #[test]
    fn trees_merge_repeated_children_and_draw_branches() {
        let ms = |v: u64| clock().ticks_for(v * 1_000_000);
        // a [0, 10000) calls b [0, 2000), c [2000, 9000); c calls d [2000, 6000) and e twice.
        let node = |id, parent, start, end| Node {
            id,
            site: false,
            parent,
            start: ms(start),
            end: ms(end),
        };
        let nodes = vec![
            node(0, 0, 0, 10_000),
            node(1, 0, 0, 2_000),
            node(2, 0, 2_000, 9_000),
            node(3, 2, 2_000, 6_000),
            node(4, 2, 6_000, 6_500),
            node(4, 2, 6_500, 7_000),
        ];
        let names: Vec<String> = ["a", "b", "c", "d", "e"].map(String::from).to_vec();
        let keys = [0, 1, 2, 3, 4, 4];
        let tree = Aggregate::build(&nodes, &keys, &names, None).to_node(nodes[0].start);
        let shape = |n: &TreeNode| {
            (
                n.name.clone(),
                n.count,
                n.offset_ns / 1_000_000,
                n.total_ns / 1_000_000,
            )
        };
        assert_eq!(shape(&tree), ("a".into(), 1, 0, 10_000));
        let c = &tree.children[1];
        assert_eq!(shape(c), ("c".into(), 1, 2_000, 7_000));
        // The two calls of e are one node.
        assert_eq!(shape(&c.children[1]), ("e".into(), 2, 6_000, 1_000));
        let shallow = Aggregate::build(&nodes, &keys, &names, Some(1));
        assert!(shallow.children.iter().all(|c| c.children.is_empty()));
    }

    #[test]
    fn a_deep_recursion_is_drawn_to_a_depth_its_record_can_be_read_back_at() {
        let nodes: Vec<Node> = (0..5_000)
            .map(|i| Node {
                id: 0,
                site: false,
                parent: i.max(1) - 1,
                start: i as u64,
                end: 10_000 - i as u64,
            })
            .collect();
        let names = vec!["a.B.recurse".to_string()];
        let root = Aggregate::build(&nodes, &vec![0; nodes.len()], &names, None).to_node(0);
        let mut depth = 0;
        let mut node = &root;
        while let Some(child) = node.children.first() {
            depth += 1;
            node = child;
        }
        assert_eq!(depth, MAX_DRAWN_DEPTH);
        let record = records::Record::Tree(CallTree {
            time_ns: 0,
            thread: "main".into(),
            truncated: 0,
            unfinished: false,
            label: None,
            root,
        });
        assert!(records::Record::decode(&record.encode()).is_ok());
    }

    #[test]
    fn a_method_under_its_call_site_is_one_node() {
        // entry calls work through a site; work's own node sits under the site.
        let node = |id, site, parent| Node {
            id,
            site,
            parent,
            start: 0,
            end: 1,
        };
        let nodes = vec![
            node(0, false, 0),
            node(0, true, 0),
            node(1, false, 1),
            node(1, true, 2),
        ];
        let key = |n: &str, d: &str| (n.to_string(), d.to_string());
        let keys = vec![
            key("a.A.entry", "()V"),
            key("a.Base.work", "(I)V"),
            key("a.Impl.work", "(I)V"),
            key("a.B.spin", "()J"),
        ];
        let (kept, node_keys) = merge_calls_into_sites(&nodes, vec![0, 1, 2, 3], &keys);
        assert_eq!(kept.len(), 3);
        assert_eq!(keys[node_keys[1] as usize], key("a.Impl.work", "(I)V"));
        assert_eq!(kept[2].parent, 1);
        assert!(kept[1].site && kept[1].parent == 0);
    }

    #[test]
    fn overloads_show_their_parameter_types() {
        let key = |n: &str, d: &str| (n.to_string(), d.to_string());
        let names = display_names(&[
            key("a.B.work", "(I)J"),
            key("a.B.work", "(Ljava/lang/String;[[J)J"),
            key("a.B.other", "(I)V"),
        ]);
        assert_eq!(
            names,
            ["a.B.work(int)", "a.B.work(String, long[][])", "a.B.other"]
        );
        assert_eq!(
            parameter_types("(Ljava/util/Map$Entry;Z)V"),
            "Entry, boolean"
        );
        assert_eq!(parameter_types("()V"), "");
    }
}
