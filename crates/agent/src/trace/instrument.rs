//! Instrumenting and restoring classes: a JVMTI environment of the session's own with
//! `can_retransform_classes` and a retransform-capable ClassFileLoadHook, which rewrites the
//! selected methods of every matching class — already loaded ones by retransformation (in
//! batches, falling back to one class at a time and naming the classes that fail), later ones
//! as they load. Restoring retransforms every touched class again with the hook answering
//! "no change", which gives each class back its original bytes; the bytes the hook is handed
//! then, and the methods' bytecodes, are compared with those seen before instrumentation.
//!
//! The same machinery serves the alloc engine's `exact` mode
//! ([`Tracing::install_for_allocations`]): every class the policy allows gets an allocation
//! probe after each `new … <init>`, `newarray`, `anewarray` and `multianewarray`.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, HashSet};
use std::ffi::c_char;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use jtap_classfile::inject::instrument_class;
use jtap_classfile::plan::{Clock, InsnKind, MemberFilter, Pattern, Point, Probe, Registry, Value};
use jtap_classfile::{bounded, ClassFile, InjectionPlan, Member};
use jtap_jvmti::{sys, Capabilities, Env, EnvRef};
use jtap_protocol::trace::{Mode, Plan, PointKind, DISCARDED_ALL_COMPILED_CODE};

use super::ffi::{self, Jni, WeakLoader};
use super::label_probes;
use super::probes;
use super::runtime::{self, Runtime};
use super::select::{self, Role, Selector};
use super::ticker;
use super::ticker::FieldClock;
use crate::gate::Gate;
use crate::libjvm::Flag;
use crate::thread::Vm;

mod loaded;
mod touched;

use touched::{Classes, JvmLoaders, Touched};

/// Calltree levels of call sites timed when neither `--inner` nor `--depth` is given.
const DEFAULT_DEPTH: u32 = 3;

/// Classes retransformed per `RetransformClasses` call.
const BATCH: usize = 64;

/// Capabilities of the session's environment.
const CAPABILITIES: [&str; 5] = [
    "can_retransform_classes",
    "can_get_bytecodes",
    "can_get_constant_pool",
    "can_get_line_numbers",
    "can_get_source_file_name",
];

/// The sessions the hook serves, each with its own environment (a profile's labels may
/// run beside a trace).
static CURRENT: Mutex<Vec<Arc<Tracing>>> = Mutex::new(Vec::new());

/// One tracing session's instrumentation.
pub struct Tracing {
    /// The plan.
    pub plan: Plan,
    selector: Selector,
    /// Method and site ids handed to the probes.
    pub registry: Mutex<Registry>,
    touched: Mutex<Classes<WeakLoader>>,
    /// Calltree: methods whose call sites are timed below the entry, as (class internal
    /// name, method name, descriptor) with their level (the entry's callees are level 1).
    hosts: Mutex<HashMap<(String, String, String), u32>>,
    /// Refusals and failures, for the client (each once).
    notes: Mutex<Vec<String>>,
    /// Hook calls that may instrument a class pass this gate; the restore closes it and
    /// waits for them, so that every class instrumented is in `touched` before it looks.
    instrumenting: Gate,
    /// Lambda, hidden and generated classes the patterns selected but the JVM cannot
    /// retransform (counted, not named: a broad pattern meets hundreds).
    skipped_generated: AtomicUsize,
    /// Classes skipped because they cannot be linked (linking or their static initialiser
    /// failed): RetransformClasses refuses them.
    skipped_unlinkable: AtomicUsize,
    /// Traced methods left out as too brief to reach the threshold ([`Tracing::too_brief`]),
    /// as (class internal name, method name, descriptor).
    too_brief: Mutex<HashSet<(String, String, String)>>,
    /// Allocation probes in every class instead of the plan's call probes.
    allocations: bool,
    runtime: &'static Runtime,
    /// The session's own JVMTI environment, lent out: valid until [`Tracing::uninstall`]
    /// disposes of [`Tracing::own_env`].
    pub env: EnvRef<'static>,
    /// The session's environment itself, taken and disposed of by [`Tracing::uninstall`].
    own_env: Mutex<Option<Env>>,
    /// Hook calls pass only while the session is installed.
    gate: Gate,
    /// Request labels: the probes of `by=` instead of the plan's.
    labels: Option<Arc<label_probes::Points>>,
    vm: Vm,
}

/// Classes the session skipped without a note each.
#[derive(Clone, Copy)]
pub struct Skipped {
    /// Lambda, hidden and generated classes.
    pub generated: usize,
    /// Classes that cannot be linked.
    pub unlinkable: usize,
    /// Traced methods too brief to reach the threshold.
    pub too_brief: usize,
}

impl Skipped {
    /// What was skipped, one text per kind (none when nothing was).
    pub fn notes(self) -> Vec<String> {
        let mut notes = Vec::new();
        if self.unlinkable > 0 {
            notes.push(format!(
                "{} skipped: not linkable (linking or static initialisation failed)",
                counted(self.unlinkable, "class", "classes")
            ));
        }
        if self.too_brief > 0 {
            notes.push(format!(
                "left out {} too brief to reach the threshold (no calls, loops, locks or array allocations)",
                counted(self.too_brief, "method", "methods")
            ));
        }
        if self.generated > 0 {
            notes.push(format!(
                "skipped {} (the JVM cannot retransform them)",
                counted(
                    self.generated,
                    "hidden/lambda class",
                    "hidden/lambda classes"
                )
            ));
        }
        notes
    }
}

/// `1 class`, `2 classes`.
pub fn counted(n: usize, one: &str, many: &str) -> String {
    match n {
        1 => format!("1 {one}"),
        n => format!("{n} {many}"),
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Selects one method of a class (internal name).
fn exactly(class: &str, name: &str, descriptor: &str) -> MemberFilter {
    MemberFilter {
        owner: Pattern::Exact(class.to_string()),
        name: Pattern::Exact(name.to_string()),
        descriptor: Pattern::Exact(descriptor.to_string()),
    }
}

/// The probes reporting each time a thread reaches points of one kind in `methods`.
fn point_probes(methods: MemberFilter, kind: PointKind, plan: &Plan) -> Vec<Probe> {
    use Value::*;
    let probe = |point: Point, method: &str, values: Vec<Value>| Probe {
        methods: methods.clone(),
        point,
        method: method.into(),
        values,
    };
    match kind {
        PointKind::Entry if plan.values => vec![probe(
            Point::Entry,
            "entryReachedValues",
            vec![MethodId, This, Args],
        )],
        PointKind::Entry => vec![probe(Point::Entry, "entryReached", vec![MethodId, This])],
        PointKind::Line => vec![probe(
            Point::Line(plan.lines.clone()),
            "lineReached",
            vec![MethodId, LineNumber, This],
        )],
        PointKind::New if plan.values => vec![probe(
            Point::Allocation,
            "newReachedValue",
            vec![MethodId, SiteId, This, NewObject],
        )],
        PointKind::New => vec![probe(
            Point::Allocation,
            "newReached",
            vec![MethodId, SiteId, This],
        )],
        PointKind::Sync => [Point::MonitorEnter, Point::MonitorExit]
            .into_iter()
            .map(|point| probe(point, "syncReached", vec![MethodId, SiteId, Lock, This]))
            .collect(),
        PointKind::ArrayGet => insn_probe(methods.clone(), InsnKind::ArrayLoad),
        PointKind::ArraySet => insn_probe(methods.clone(), InsnKind::ArrayStore),
        PointKind::Throw => insn_probe(methods.clone(), InsnKind::Throw),
        PointKind::Catch => insn_probe(methods.clone(), InsnKind::Catch),
        PointKind::CheckCast => insn_probe(methods.clone(), InsnKind::CheckCast),
        PointKind::InstanceOf => insn_probe(methods.clone(), InsnKind::InstanceOf),
    }
}

/// The probe reporting each instruction of `kind` in `methods`, with the method's `this`, the
/// object the instruction takes, its other operands and an array load's element.
fn insn_probe(methods: MemberFilter, kind: InsnKind) -> Vec<Probe> {
    use Value::*;
    vec![Probe {
        methods,
        point: Point::Instruction(kind),
        method: "insnReached".into(),
        values: vec![MethodId, SiteId, This, Target, CallArgs, ReturnValue],
    }]
}

/// The probe reporting each access of `point` (a field read or write) in `methods`, with the
/// method's `this`, the object whose field it is and the value read or written.
fn field_probe(methods: MemberFilter, point: Point) -> Probe {
    use Value::*;
    Probe {
        methods,
        point,
        method: "fieldReached".into(),
        values: vec![MethodId, SiteId, This, Target, FieldValue],
    }
}

/// Records a class's method bytecode sizes before the session, once: a class the session
/// already instrumented (asked for again by a later level or a later pass) has its probes in
/// its methods now, and the sizes it had before are the ones already recorded.
fn record_bytecodes_before(touched: &mut Touched, sizes: impl FnOnce() -> Option<u64>) {
    if touched.seen == 0 && touched.bytecodes_before.is_none() {
        touched.bytecodes_before = sizes();
    }
}

fn hash(bytes: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

/// Whether HotSpot records the compiled code's dependencies on classes, so that retransforming
/// a class discards only the code that depends on it. It does from start-up when an agent
/// there could retransform (jtap's own at start-up, a `-javaagent`), and after the first
/// retransformation; before that, the first one discards all compiled code
/// (`JvmtiExport::_all_dependencies_are_recorded`). True when the flag cannot be read.
fn compile_dependencies_recorded(vm: Vm) -> bool {
    const NAME: &str = "_ZN11JvmtiExport30_all_dependencies_are_recordedE";
    static FLAG: OnceLock<Option<Flag>> = OnceLock::new();
    FLAG.get_or_init(|| Flag::find(vm, NAME).ok())
        .is_none_or(|flag| flag.get())
}

impl Tracing {
    /// Defines the runtime class if needed, creates the session's environment and installs
    /// the hook. Instrumentation starts with [`Tracing::instrument_loaded`].
    pub fn install(vm: Vm, plan: Plan) -> Result<Arc<Tracing>, String> {
        Self::install_with(vm, plan, false, None)
    }

    /// Like [`Tracing::install`], for the probes of request labels at the methods `points`
    /// names (`plan` selects their classes).
    pub fn install_for_labels(
        vm: Vm,
        plan: Plan,
        points: Arc<label_probes::Points>,
    ) -> Result<Arc<Tracing>, String> {
        Self::install_with(vm, plan, false, Some(points))
    }

    /// Like [`Tracing::install`], for allocation probes in every class the policy allows
    /// (calling `Probes.alloc(Object)`).
    pub fn install_for_allocations(vm: Vm) -> Result<Arc<Tracing>, String> {
        let every_class = jtap_protocol::trace::MethodPattern::parse("/.*/")?;
        let plan = Plan {
            targets: vec![every_class],
            ..Plan::default()
        };
        Self::install_with(vm, plan, true, None)
    }

    fn install_with(
        vm: Vm,
        plan: Plan,
        allocations: bool,
        labels: Option<Arc<label_probes::Points>>,
    ) -> Result<Arc<Tracing>, String> {
        let selector = Selector::new(&plan)?;
        let jni = Jni::current(vm).ok_or("the starting thread is not attached to the JVM")?;
        let runtime = runtime::get(jni)?;
        let env = vm
            .jvmti_env()
            .map_err(|e| format!("no JVMTI environment: {e}"))?;
        // On an error the environment is dropped, which disposes of it.
        let report = env
            .add_capabilities(&Capabilities::of(&CAPABILITIES))
            .map_err(|e| e.to_string())?;
        if report.refused.has("can_retransform_classes") {
            return Err(
                "the JVM cannot retransform classes (can_retransform_classes refused)".into(),
            );
        }
        let callbacks = sys::jvmtiEventCallbacks {
            ClassFileLoadHook: Some(on_class_file_load),
            ..Default::default()
        };
        env.set_event_callbacks(&callbacks)
            .map_err(|e| e.to_string())?;
        // SAFETY: the environment lives in `own_env` until `uninstall` disposes of it, after
        // the hook is off and its calls in flight are drained; the session uses `env` no more
        // after that.
        let lent = unsafe { Env::from_raw(env.raw()) };
        let tracing = Arc::new(Tracing {
            plan,
            selector,
            registry: Mutex::new(Registry::default()),
            touched: Mutex::new(Classes::new()),
            hosts: Mutex::new(HashMap::new()),
            notes: Mutex::new(Vec::new()),
            instrumenting: Gate::new(),
            skipped_generated: AtomicUsize::new(0),
            skipped_unlinkable: AtomicUsize::new(0),
            too_brief: Mutex::new(HashSet::new()),
            allocations,
            runtime,
            env: lent,
            own_env: Mutex::new(Some(env)),
            gate: Gate::new(),
            labels,
            vm,
        });
        lock(&CURRENT).push(tracing.clone());
        tracing.gate.open();
        tracing.instrumenting.open();
        if let Err(e) = lent.set_event_enabled(sys::JVMTI_EVENT_CLASS_FILE_LOAD_HOOK, true) {
            tracing.uninstall();
            return Err(e.to_string());
        }
        Ok(tracing)
    }

    /// Notes for the client (refused classes, failed retransformations), taken once.
    pub fn take_notes(&self) -> Vec<String> {
        std::mem::take(&mut *lock(&self.notes))
    }

    fn note(&self, text: String) {
        let mut notes = lock(&self.notes);
        if notes.len() < 100 && !notes.contains(&text) {
            notes.push(text);
        }
    }

    /// Lambda/hidden classes and unlinkable classes skipped so far.
    pub fn skipped(&self) -> Skipped {
        Skipped {
            generated: self.skipped_generated.load(Ordering::Relaxed),
            unlinkable: self.skipped_unlinkable.load(Ordering::Relaxed),
            too_brief: lock(&self.too_brief).len(),
        }
    }

    /// Retransforms the loaded classes the plan selects. Returns how many were
    /// retransformed.
    pub fn instrument_loaded(&self) -> Result<usize, String> {
        let jni = Jni::current(self.vm).ok_or("not attached")?;
        jni.with_local_frame(16, || self.instrument_loaded_in(jni))
            .unwrap_or_else(|| Err("no JNI local frame".into()))
    }

    fn instrument_loaded_in(&self, jni: Jni) -> Result<usize, String> {
        let classes = self.env.loaded_classes().map_err(|e| e.to_string())?;
        let mut named: Vec<(sys::jclass, String)> = Vec::with_capacity(classes.len());
        for &class in classes.iter() {
            // SAFETY: GetLoadedClasses returned live local references.
            if let Ok(sig) = unsafe { self.env.class_signature(class) } {
                if let Some(internal) = sig.strip_prefix('L').and_then(|s| s.strip_suffix(';')) {
                    named.push((class, internal.to_string()));
                }
            }
        }
        self.learn_loaded(jni, &named);
        let dotted_names: Vec<String> = named.iter().map(|(_, n)| select::dotted(n)).collect();
        for pattern in self.selector.targets_matching_none(&dotted_names) {
            self.note(format!(
                "no loaded class matches {pattern}; waiting for classes loaded later"
            ));
        }
        let loaders = JvmLoaders { jni, env: self.env };
        // The defining loaders of the classes chosen, by index in `named`.
        let mut defining: HashMap<usize, sys::jobject> = HashMap::new();
        let mut chosen = Vec::new();
        for (index, ((class, internal), dotted)) in named.iter().zip(&dotted_names).enumerate() {
            if !self.selector.selects_class(dotted, &[]) {
                continue;
            }
            // Hidden and VM-anonymous classes (lambdas, method handle forms): the JVM says
            // which, whatever their names.
            if !ffi::is_modifiable(&self.env, *class) {
                self.skipped_generated.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            if let Some(why) = select::refusal(internal) {
                self.note(format!("not instrumenting {dotted}: {why}"));
                continue;
            }
            if ffi::is_erroneous(&self.env, *class) {
                self.skipped_unlinkable.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let Some(loader) = ffi::class_loader(&self.env, *class) else {
                continue;
            };
            {
                let mut touched = lock(&self.touched);
                let Some(t) = touched.entry(&loaders, internal, loader) else {
                    continue;
                };
                record_bytecodes_before(t, || {
                    ffi::is_linked(&self.env, *class).then(|| self.bytecode_hash(*class))
                });
            }
            defining.insert(index, loader);
            chosen.push((*class, internal.clone(), loader));
        }
        if !chosen.is_empty() && !compile_dependencies_recorded(self.vm) {
            self.note(format!(
                "{DISCARDED_ALL_COMPILED_CODE} (no agent that could retransform was loaded at \
                 start-up): expect a few seconds of slower running while it recompiles"
            ));
        }
        self.instrument(jni, &chosen);
        // Calltree: the call sites of the methods called from the entry, level by level,
        // until the session has what it asked for (`-n` trees may come before the deepest
        // level is instrumented: the rest would only be restored again).
        for level in 1..self.call_site_depth() {
            if !probes::is_running() {
                break;
            }
            let owners = self.add_hosts(level);
            let mut more = Vec::new();
            for (index, (class, name)) in named.iter().enumerate() {
                if !owners.contains(name)
                    || select::refusal(name).is_some()
                    || !ffi::is_modifiable(&self.env, *class)
                    || ffi::is_erroneous(&self.env, *class)
                {
                    continue;
                }
                let loader = match defining.get(&index) {
                    Some(&loader) => loader,
                    None => match ffi::class_loader(&self.env, *class) {
                        Some(loader) => loader,
                        None => continue,
                    },
                };
                let mut touched = lock(&self.touched);
                let Some(t) = touched.entry(&loaders, name, loader) else {
                    continue;
                };
                record_bytecodes_before(t, || {
                    ffi::is_linked(&self.env, *class).then(|| self.bytecode_hash(*class))
                });
                defining.insert(index, loader);
                more.push((*class, name.clone(), loader));
            }
            if more.is_empty() {
                break;
            }
            self.instrument(jni, &more);
        }
        // Classes the hook did not instrument after all (no selected method) are not touched.
        let touched = lock(&self.touched);
        Ok(defining
            .iter()
            .filter(|(index, loader)| {
                touched
                    .get(&loaders, &named[**index].1, **loader)
                    .is_some_and(|t| t.seen != 0)
            })
            .count())
    }

    /// Retransforms loaded classes (with their defining loaders) to instrument them. A class
    /// not linked yet whose retransformation fails cannot be linked (a class it needs is
    /// missing, or its verification fails): it is counted as skipped and forgotten; other
    /// failures are noted.
    fn instrument(&self, jni: Jni, classes: &[(sys::jclass, String, sys::jobject)]) {
        let unlinked: Vec<bool> = classes
            .iter()
            .map(|(class, _, _)| !ffi::is_linked(&self.env, *class))
            .collect();
        let loaders = JvmLoaders { jni, env: self.env };
        let refs: Vec<sys::jclass> = classes.iter().map(|(class, _, _)| *class).collect();
        for (index, error) in self.retransform(&refs) {
            let (_, name, loader) = &classes[index];
            if unlinked[index] {
                self.skipped_unlinkable.fetch_add(1, Ordering::Relaxed);
                lock(&self.touched).remove(&loaders, name, *loader);
            } else {
                self.note(format!(
                    "retransforming {} failed: {error}",
                    select::dotted(name)
                ));
            }
        }
    }

    /// Calltree: how many levels of call sites are timed.
    fn call_site_depth(&self) -> u32 {
        match (self.plan.mode, self.plan.depth) {
            (Mode::Calltree, Some(depth)) => depth,
            (Mode::Calltree, None) if self.plan.inner.is_empty() => DEFAULT_DEPTH,
            _ => 0,
        }
    }

    /// Makes the methods called from level `level - 1` (the entry: 0) hosts of level
    /// `level`; returns the internal names of their classes.
    fn add_hosts(&self, level: u32) -> Vec<String> {
        let registry = lock(&self.registry);
        let mut hosts = lock(&self.hosts);
        let mut owners = Vec::new();
        for site in registry.sites.iter().filter(|s| s.kind == "call") {
            let Some(caller) = registry.methods.get(site.method_id as usize) else {
                continue;
            };
            let caller_key = (
                caller.class.clone(),
                caller.name.clone(),
                caller.descriptor.clone(),
            );
            let caller_level = match hosts.get(&caller_key) {
                Some(&l) => l,
                None if self.selector.method_role(
                    &select::dotted(&caller.class),
                    &[],
                    &caller.name,
                    &caller.descriptor,
                ) == Some(Role::Target) =>
                {
                    0
                }
                None => continue,
            };
            if caller_level + 1 != level {
                continue;
            }
            let Some((member, descriptor)) = site.detail.split_once('(') else {
                continue;
            };
            let Some((owner, name)) = member.rsplit_once('.') else {
                continue;
            };
            let key = (
                owner.to_string(),
                name.to_string(),
                format!("({descriptor}"),
            );
            if let std::collections::hash_map::Entry::Vacant(slot) = hosts.entry(key) {
                slot.insert(level);
                if !owners.iter().any(|o| o == owner) {
                    owners.push(owner.to_string());
                }
            }
        }
        owners
    }

    /// Whether the class has calltree host methods.
    fn hosts_class(&self, name: &str) -> bool {
        lock(&self.hosts).keys().any(|(owner, _, _)| owner == name)
    }

    /// Retransforms in batches; a failed batch is retried class by class. Returns the
    /// failures: index in `classes` and the error.
    fn retransform(&self, classes: &[sys::jclass]) -> Vec<(usize, String)> {
        let mut failed = Vec::new();
        for (batch_index, batch) in classes.chunks(BATCH).enumerate() {
            // SAFETY: live local references of this attached thread.
            if unsafe { self.env.retransform_classes(batch) }.is_ok() {
                continue;
            }
            for (offset, class) in batch.iter().enumerate() {
                // SAFETY: as above.
                if let Err(e) = unsafe { self.env.retransform_classes(&[*class]) } {
                    failed.push((batch_index * BATCH + offset, e.to_string()));
                }
            }
        }
        failed
    }

    /// A hash of the sizes of the current bytecodes of every method of `class` with code,
    /// by name and descriptor. (Sizes, not bytes: after a redefinition HotSpot may renumber
    /// constant-pool indices in the bytecodes it reports, while probes always make a method
    /// longer. Sorted, because HotSpot orders methods by name alone, and overloads such as a
    /// Groovy closure's two `doCall`s may come in another order after a retransformation.)
    fn bytecode_hash(&self, class: sys::jclass) -> u64 {
        let mut sizes = Vec::new();
        // SAFETY: class is a live reference.
        if let Ok(methods) = unsafe { self.env.class_methods(class) } {
            for &method in methods.iter() {
                // SAFETY: GetClassMethods returned the method of a live class.
                let name = unsafe { self.env.method_name(method) }.ok();
                let size = ffi::bytecodes(&self.env, method).map(|code| code.len());
                sizes.push((name, size));
            }
        }
        sizes.sort();
        let mut h = DefaultHasher::new();
        sizes.hash(&mut h);
        h.finish()
    }

    /// The class-file hook's work: the instrumented bytes, or None to leave the class.
    fn transform(
        &self,
        jni: Jni,
        redefined: sys::jclass,
        loader: sys::jobject,
        name: &str,
        bytes: &[u8],
    ) -> Option<Vec<u8>> {
        let loaders = JvmLoaders { jni, env: self.env };
        let Some(_instrumenting) = self.instrumenting.enter() else {
            if let Some(t) = lock(&self.touched).get_mut(&loaders, name, loader) {
                t.restored = Some(hash(bytes));
            }
            return None;
        };
        let dotted = select::dotted(name);
        let cf = ClassFile::parse(bytes).ok()?;
        let supers: Vec<String> = std::iter::once(cf.super_class)
            .chain(cf.interfaces.iter().copied())
            .filter(|&i| i != 0)
            .filter_map(|i| {
                cf.constant_pool
                    .class_name(i)
                    .ok()
                    .map(|n| select::dotted(&String::from_utf8_lossy(n)))
            })
            .collect();
        self.selector.learn(&cf, &dotted, &supers);
        if !self.selector.selects_class(&dotted, &supers) && !self.hosts_class(name) {
            return None;
        }
        if select::is_hidden_name(name) {
            self.skipped_generated.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        if let Some(why) = select::refusal(name) {
            self.note(format!("not instrumenting {dotted}: {why}"));
            return None;
        }

        let mut probes = Vec::new();
        let mut guards = Vec::new();
        let mut labelled = Vec::new();
        for m in &cf.methods {
            let (Ok(mname), Ok(desc)) = (
                cf.constant_pool.utf8_str(m.name_index),
                cf.constant_pool.utf8_str(m.descriptor_index),
            ) else {
                continue;
            };
            let host = || {
                lock(&self.hosts)
                    .contains_key(&(name.to_string(), mname.to_string(), desc.to_string()))
                    .then_some(Role::Host)
            };
            let before = probes.len();
            let role = match self.selector.method_role(&dotted, &supers, &mname, &desc) {
                Some(Role::Target) if self.too_brief(&cf, m) => {
                    let method = (name.to_string(), mname.to_string(), desc.to_string());
                    lock(&self.too_brief).insert(method);
                    None
                }
                role => role,
            }
            .or_else(host);
            if let Some(labels) = &self.labels {
                let point = role.and_then(|_| labels.point(&dotted, &supers, &mname, &desc));
                if let Some(point) = point {
                    probes.extend(label_probes::probes(point, exactly(name, &mname, &desc)));
                    labelled.push((mname.to_string(), desc.to_string(), point));
                }
                continue;
            }
            if let Some(role) = role {
                probes.extend(self.probes_for(role, exactly(name, &mname, &desc)));
            }
            let target_only = probes.len();
            if let Some(callees) = self
                .selector
                .callee_filter(&cf, &dotted, &supers, &mname, &desc)
            {
                probes.extend(self.call_site_probes(exactly(name, &mname, &desc), callees));
            }
            let [reads, writes] = self
                .selector
                .field_filters(&cf, &dotted, &supers, &mname, &desc);
            let accesses = [reads.map(Point::FieldRead), writes.map(Point::FieldWrite)];
            for point in accesses.into_iter().flatten() {
                probes.push(field_probe(exactly(name, &mname, &desc), point));
            }
            let before_points = probes.len();
            let points = self.selector.points(&dotted, &supers, &mname, &desc);
            for &kind in &points {
                probes.extend(point_probes(exactly(name, &mname, &desc), kind, &self.plan));
            }
            // A guard decides for all of a method's probes: only those of a traced method
            // with nothing else probed in it, or of an entry point alone.
            let alone = match (role, points.as_slice()) {
                (Some(Role::Target), []) => probes.len() == target_only && target_only > before,
                (None, [PointKind::Entry]) => before_points == before,
                _ => false,
            };
            let guard = (alone && self.plan.mode != Mode::Calltree && !self.allocations)
                .then(|| {
                    let entry = role.is_none();
                    self.selector.guard(&dotted, &supers, &mname, &desc, entry)
                })
                .flatten();
            if let Some(guard) = guard {
                guards.push((exactly(name, &mname, &desc), guard));
            }
        }
        if probes.is_empty() {
            return None;
        }
        self.let_module_read_runtime(jni, redefined, loader, name);
        let plan = InjectionPlan {
            runtime_class: runtime::CLASS.into(),
            clock: match (self.field_clock(), self.times_from_frames()) {
                (Some(_), _) => Some(Clock::Field(runtime::CLOCK_FIELD.into())),
                (None, true) => Some(Clock::Method(runtime::CLOCK_METHOD.into())),
                (None, false) => None,
            },
            probes,
            guards,
        };
        let result = {
            let mut registry = lock(&self.registry);
            instrument_class(bytes, &plan, &mut registry)
        };
        match result {
            Ok(out) => {
                for (method, e) in &out.refused {
                    self.note(format!("not instrumenting {dotted}.{method}: {e}"));
                }
                if out.methods_instrumented == 0 {
                    return None;
                }
                if let Some(labels) = &self.labels {
                    labels.learn(name, &labelled, &lock(&self.registry));
                }
                // A class whose loader cannot be held could not be compared after restoring.
                let mut touched = lock(&self.touched);
                let Some(t) = touched.entry(&loaders, name, loader) else {
                    self.note(format!(
                        "not instrumenting {dotted}: no memory to hold its loader"
                    ));
                    return None;
                };
                t.seen = hash(bytes);
                Some(out.bytes)
            }
            Err(e) => {
                self.note(format!("not instrumenting {dotted}: {e}"));
                None
            }
        }
    }

    /// Whether traced method `method` of `cf` cannot reach the trace's threshold but through a
    /// pause of the whole JVM: its bytecode bounds its running time
    /// ([`bounded::bounded_length`]), counted at a microsecond a byte (many times what an
    /// instruction takes, even interpreted), below the threshold. Its probes could report
    /// nothing else, and would make it too big for the JIT to inline where it is called.
    fn too_brief(&self, cf: &ClassFile, method: &Member) -> bool {
        let Some(threshold) = self.plan.threshold else {
            return false;
        };
        self.plan.mode == Mode::Trace
            && !self.allocations
            && bounded::bounded_length(cf, method)
                .is_some_and(|length| Duration::from_micros(length as u64) < threshold)
    }

    /// The session's field clock (its fields and period), when its probes use one.
    pub fn field_clock(&self) -> Option<(FieldClock, Duration)> {
        if self.allocations {
            return None;
        }
        self.runtime.clock.zip(ticker::period(&self.plan))
    }

    /// Whether traced calls are timed from a mark their entry keeps in their own frame (the
    /// exit probes then need no stack of open calls, and a virtual thread that leaves its
    /// carrier inside a call is timed right): trace sessions whose entry captures nothing,
    /// and monitor sessions.
    fn times_from_frames(&self) -> bool {
        match self.plan.mode {
            Mode::Trace => !self.plan.args && !self.plan.values && !self.allocations,
            Mode::Monitor => true,
            Mode::Calltree => false,
        }
    }

    /// The probes for one selected method.
    fn probes_for(&self, role: Role, methods: MemberFilter) -> Vec<Probe> {
        use Value::*;
        let probe = |point: Point, method: &str, values: Vec<Value>| Probe {
            methods: methods.clone(),
            point,
            method: method.into(),
            values,
        };
        if self.allocations {
            return vec![probe(Point::Allocation, "alloc", vec![NewObject])];
        }
        let plan = &self.plan;
        let mut probes = Vec::new();
        let call_sites = [
            probe(
                Point::BeforeCall(MemberFilter::any()),
                "call",
                vec![MethodId, SiteId],
            ),
            probe(
                Point::AfterCall(MemberFilter::any()),
                "called",
                vec![MethodId, SiteId],
            ),
        ];
        if self.field_clock().is_some() {
            // Exit probes only: the entry reads the clock field (see `ticker`).
            return vec![
                probe(Point::Return, "leave", vec![Mark, MethodId]),
                probe(
                    Point::ExceptionExit,
                    "leaveThrown",
                    vec![Mark, MethodId, Thrown],
                ),
            ];
        }
        if role == Role::Target && self.times_from_frames() {
            let exit = match plan.returns && plan.mode == Mode::Trace {
                true => probe(
                    Point::Return,
                    "slowValue",
                    vec![Mark, MethodId, ReturnValue],
                ),
                false => probe(Point::Return, "slow", vec![Mark, MethodId]),
            };
            let thrown = probe(
                Point::ExceptionExit,
                "slowThrown",
                vec![Mark, MethodId, Thrown],
            );
            return vec![exit, thrown];
        }
        match (plan.mode, role) {
            (_, Role::Host) => return call_sites.to_vec(),
            (Mode::Calltree, Role::Target) => {
                probes.push(probe(Point::Entry, "root", vec![MethodId]));
                if self.call_site_depth() > 0 {
                    probes.extend(call_sites);
                }
            }
            (Mode::Trace, Role::Target) if plan.args || plan.values => {
                probes.push(probe(Point::Entry, "enterArgs", vec![MethodId, This, Args]))
            }
            _ => probes.push(probe(Point::Entry, "enter", vec![MethodId])),
        }
        if plan.mode == Mode::Trace && role == Role::Target && plan.returns {
            probes.push(probe(
                Point::Return,
                "exitValue",
                vec![MethodId, ReturnValue],
            ));
        } else {
            probes.push(probe(Point::Return, "exit", vec![MethodId]));
        }
        probes.push(probe(
            Point::ExceptionExit,
            "thrown",
            vec![MethodId, Thrown],
        ));
        probes
    }

    /// The probes of a [`Role::Inside`] method: its calls that `callees` takes, timed and
    /// reported as calls of their own (with the caller's `this` for scripts, and the called
    /// method's receiver and arguments when the plan asks).
    fn call_site_probes(&self, methods: MemberFilter, callees: MemberFilter) -> Vec<Probe> {
        use Value::*;
        let probe = |point: Point, method: &str, values: Vec<Value>| Probe {
            methods: methods.clone(),
            point,
            method: method.into(),
            values,
        };
        let enter = match (self.plan.values, self.plan.callee_values) {
            (_, true) => probe(
                Point::BeforeCall(callees.clone()),
                "siteEnterCallee",
                vec![MethodId, SiteId, This, Target, CallArgs],
            ),
            (true, false) => probe(
                Point::BeforeCall(callees.clone()),
                "siteEnterSelf",
                vec![MethodId, SiteId, This],
            ),
            (false, false) => probe(
                Point::BeforeCall(callees.clone()),
                "siteEnter",
                vec![MethodId, SiteId],
            ),
        };
        let exit = probe(
            Point::AfterCall(callees),
            "siteExit",
            vec![MethodId, SiteId, ReturnValue, Thrown],
        );
        vec![enter, exit]
    }

    /// Classes of named modules do not read the bootstrap loader's unnamed module, where the
    /// runtime class is: add that read edge.
    fn let_module_read_runtime(
        &self,
        jni: Jni,
        redefined: sys::jclass,
        loader: sys::jobject,
        name: &str,
    ) {
        let module = if redefined.is_null() {
            let package = name.rsplit_once('/').map_or("", |(p, _)| p);
            ffi::named_module(&self.env, loader, package)
        } else {
            jni.module_of(redefined)
        };
        if !ffi::add_module_reads(&self.env, module, self.runtime.module.raw()) {
            self.note(format!(
                "{}: cannot let its module read jtap's runtime class",
                select::dotted(name)
            ));
        }
        jni.delete_local(module);
    }

    /// Removes the hook, waits for hook calls in flight and disposes of the environment.
    pub fn uninstall(&self) {
        if let Err(e) = self
            .env
            .set_event_enabled(sys::JVMTI_EVENT_CLASS_FILE_LOAD_HOOK, false)
        {
            log!("trace: {e}");
        }
        let stuck = self.gate.close_and_drain(Duration::from_secs(2));
        if stuck != 0 {
            log!("trace: {stuck} class-file hook calls still running after 2 s");
        }
        lock(&CURRENT).retain(|t| !std::ptr::eq(&**t, self));
        // The loaders' weak references, once no hook call may still compare with them (on a
        // thread not attached to the JVM they are left: a few bytes each).
        if stuck == 0 {
            if let Some(jni) = Jni::current(self.vm) {
                lock(&self.touched).release_all(&JvmLoaders { jni, env: self.env });
            }
        }
        if let Some(Err(e)) = lock(&self.own_env).take().map(Env::dispose) {
            log!("trace: {e}");
        }
    }
}

/// The retransform-capable ClassFileLoadHook.
#[allow(clippy::too_many_arguments)]
extern "C" fn on_class_file_load(
    jvmti: *mut sys::jvmtiEnv,
    jni: *mut sys::JNIEnv,
    redefined: sys::jclass,
    loader: sys::jobject,
    name: *const c_char,
    _protection_domain: sys::jobject,
    len: sys::jint,
    data: *const u8,
    new_len: *mut sys::jint,
    new_data: *mut *mut u8,
) {
    crate::callback::guard_callback(|| {
        let Some(tracing) = lock(&CURRENT)
            .iter()
            .find(|t| t.env.raw() == jvmti)
            .cloned()
        else {
            return;
        };
        let Some(_pass) = tracing.gate.enter() else {
            return;
        };
        // SAFETY: the VM passes a NUL-terminated name (or null) and len bytes of class data,
        // valid for this call, and this thread's JNIEnv.
        let (name, bytes, jni) = unsafe {
            (
                ffi::hook_name(name),
                ffi::hook_bytes(data, len),
                Jni::from_raw(jni),
            )
        };
        let Some(name) = name else { return };
        if let Some(out) = tracing.transform(jni, redefined, loader, &name, bytes) {
            if !ffi::give_to_vm(&tracing.env, &out, new_len, new_data) {
                tracing.note(format!(
                    "{}: cannot allocate its new bytes",
                    select::dotted(&name)
                ));
            }
        }
    })
}
