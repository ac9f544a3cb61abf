//! The probes of request labels (`by=`): which methods get them ([`Points`]), and the natives
//! they call, which [`super::labels`] puts into entry
//! methods and into the JDK's hand-over points: `labelAt(int id, Object this, Object[]
//! args)` at a method's entry (or a constructor's return) and `labelOut(int id)` at its
//! exits. What each does depends on the method, known by its id ([`Point`]): an entry call
//! labels its thread ([`crate::label::enter`]); a hand-over tags the task or thread object
//! with the thread's label (a JVMTI tag in the session's own environment); where a task
//! runs, its tag becomes the label of the thread running it until it returns.
//!
//! They read fields with plain JNI reads and never run Java code, throw, block or allocate
//! on the Java heap; panics are caught.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use jtap_classfile::plan::{MemberFilter, Point as Where, Probe, Registry, Value as Passed};
use jtap_jvmti::{sys, EnvRef};
use jtap_protocol::label::ValuePath;
use jtap_protocol::trace::{MethodPattern, Plan};

use super::ffi::Jni;
use super::label_keys::KeyReader;
use super::select::Selector;
use super::values::escape_into;
use crate::label;

/// What a probed method does with labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Point {
    /// An entry method of `by=` entry number `.0`: its call labels the thread.
    Entry(usize),
    /// Hands `this` over to run elsewhere (a task or thread being made or started).
    HandOffThis,
    /// Hands argument `.0` (from 0) over to run elsewhere (`execute(Runnable)`).
    HandOffArg(usize),
    /// `this`, a task handed over, runs now on this thread until the method returns.
    TakeOverThis,
    /// Argument `.0`, a task handed over, runs now until [`Point::Leave`].
    TakeOverArg(usize),
    /// The task begun by a [`Point::TakeOverArg`] ended (`afterExecute`).
    Leave,
    /// A pool's worker loop begins: the thread works for no request until a task runs.
    StartOver,
}

/// One `by=` entry as the probes need it: how its label reads.
pub struct Entry {
    /// The label when no key is given: `Class.method`.
    pub name: String,
    /// The key's value path.
    pub key: Option<ValuePath>,
    /// The label of `name`, once a call needed it.
    pub label: OnceLock<u32>,
}

/// What the probes of one labelling session know.
pub struct Session {
    /// The environment whose tags hold labels of objects handed over.
    pub env: EnvRef<'static>,
    /// The `by=` entries, by number.
    pub entries: Vec<Entry>,
    /// Nested entry calls label by the inner one (`byinner`).
    pub innermost: bool,
    /// Points by method id, filled as methods are instrumented.
    pub points: Mutex<HashMap<i32, Point>>,
    /// Reads the entries' keys.
    pub keys: KeyReader,
}

static SESSION: Mutex<Option<Arc<Session>>> = Mutex::new(None);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Probes act for `session` from now on (None: they do nothing).
pub fn set_session(session: Option<Arc<Session>>) {
    *lock(&SESSION) = session;
}

fn session() -> Option<Arc<Session>> {
    lock(&SESSION).clone()
}

/// The label key of the calling thread: the virtual thread it runs, if jtap's walker knows
/// where to read it, else its kernel id — as the signal handler finds it.
pub(super) fn thread_key(jni: Jni) -> u64 {
    let tid = crate::sampling::threads::current_tid();
    let walker = crate::walk::resolved();
    // SAFETY: `jni` is the calling thread's, inside a native method.
    let mounted = walker.and_then(|w| unsafe { w.mounted(jni.as_raw()) });
    label::key(tid, mounted.map(|m| m.id))
}

/// Runs `body` for an active session, catching panics.
fn with_session(env: *mut sys::JNIEnv, id: sys::jint, body: impl FnOnce(&Session, Jni, Point)) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if !label::is_active() {
            return;
        }
        let Some(session) = session() else { return };
        let Some(point) = lock(&session.points).get(&id).copied() else {
            return;
        };
        // SAFETY: the VM passes this thread's JNI environment to the native method.
        let jni = unsafe { Jni::from_raw(env) };
        body(&session, jni, point);
    }));
}

/// `labelAt(int, Object this, Object[] args)`.
pub extern "system" fn label_at(
    env: *mut sys::JNIEnv,
    _class: sys::jclass,
    id: sys::jint,
    this: sys::jobject,
    args: sys::jobject,
) {
    with_session(env, id, |session, jni, point| {
        let key = thread_key(jni);
        let argument = |index: usize| match args.is_null() {
            true => std::ptr::null_mut(),
            false => jni.object_element(args, index),
        };
        match point {
            Point::Entry(entry) => {
                // Inside a labelled call the outer label stays: no key to read.
                let label = match !session.innermost && label::current(key) != 0 {
                    true => 0,
                    false => session.label(entry, jni, this, args),
                };
                label::enter(key, label, session.innermost);
            }
            Point::HandOffThis => session.hand_off(this, label::current(key)),
            Point::HandOffArg(index) => {
                let task = argument(index);
                session.hand_off(task, label::current(key));
                jni.delete_local(task);
            }
            Point::TakeOverThis => label::take_over(key, session.label_of(this)),
            Point::TakeOverArg(index) => {
                let task = argument(index);
                label::take_over(key, session.label_of(task));
                jni.delete_local(task);
            }
            Point::Leave => label::leave(key),
            Point::StartOver => label::start_over(key, 0),
        }
    });
}

/// `labelOut(int)`: an entry call or a task run where it was taken over returns or throws.
pub extern "system" fn label_out(env: *mut sys::JNIEnv, _class: sys::jclass, id: sys::jint) {
    with_session(env, id, |_, jni, point| {
        if matches!(point, Point::Entry(_) | Point::TakeOverThis) {
            label::leave(thread_key(jni));
        }
    });
}

/// A platform thread starts: the label of the request that started it, if any.
pub fn thread_started(jni: Jni, thread: sys::jthread) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if let Some(session) = session().filter(|_| label::is_active()) {
            let label = session.label_of(thread);
            if label != 0 {
                label::start_over(thread_key(jni), label);
            }
        }
    }));
}

/// Which methods get which label probes, and what each method id stands for.
pub struct Points {
    /// The `by=` entries, one selector each, in order.
    entries: Vec<Selector>,
    /// The hand-over points, one selector each.
    hand_overs: Vec<(Selector, Point)>,
    session: Arc<Session>,
}

/// The selector of the methods `pattern` names.
pub fn selector(pattern: &MethodPattern) -> Result<Selector, String> {
    Selector::new(&Plan {
        targets: vec![pattern.clone()],
        ..Plan::default()
    })
}

impl Points {
    /// The points of the `by=` entries' methods (`entries`, in order) and of `hand_overs`.
    pub fn new(
        entries: Vec<Selector>,
        hand_overs: Vec<(Selector, Point)>,
        session: Arc<Session>,
    ) -> Points {
        Points {
            entries,
            hand_overs,
            session,
        }
    }

    /// What a selected method does with labels: the first `by=` entry naming it, else its
    /// hand-over point.
    pub fn point(&self, dotted: &str, supers: &[String], name: &str, desc: &str) -> Option<Point> {
        let named = |s: &Selector| s.method_role(dotted, supers, name, desc).is_some();
        if let Some(index) = self.entries.iter().position(named) {
            return Some(Point::Entry(index));
        }
        self.hand_overs
            .iter()
            .find(|(s, _)| named(s))
            .map(|&(_, point)| point)
    }

    /// Learns the method ids the registry gave the methods of class `class` (internal name)
    /// just instrumented, with their points.
    pub fn learn(&self, class: &str, methods: &[(String, String, Point)], registry: &Registry) {
        let mut points = self
            .session
            .points
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        for (id, entry) in registry.methods.iter().enumerate().rev() {
            let found = methods
                .iter()
                .find(|(name, desc, _)| {
                    entry.class == class && entry.name == *name && entry.descriptor == *desc
                })
                .map(|&(_, _, point)| point);
            if let Some(point) = found {
                points.entry(id as i32).or_insert(point);
            }
        }
    }
}

/// The probes of a method with label point `point`.
pub fn probes(point: Point, methods: MemberFilter) -> Vec<Probe> {
    use Passed::*;
    let probe = |at: Where, method: &str, values: Vec<Passed>| Probe {
        methods: methods.clone(),
        point: at,
        method: method.into(),
        values,
    };
    let at = |at: Where| probe(at, "labelAt", vec![MethodId, This, Args]);
    let constructor = methods.name.matches("<init>");
    match point {
        // Until the method returns or throws.
        Point::Entry(_) | Point::TakeOverThis => vec![
            at(Where::Entry),
            probe(Where::Return, "labelOut", vec![MethodId]),
            probe(Where::ExceptionExit, "labelOut", vec![MethodId]),
        ],
        // A constructor's `this` is whole once it returns.
        Point::HandOffThis if constructor => vec![at(Where::Return)],
        _ => vec![at(Where::Entry)],
    }
}

/// A thread ends: its key, a kernel id another thread may get next, has no label.
pub fn thread_ended(jni: Jni) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if label::is_active() {
            label::start_over(thread_key(jni), 0);
        }
    }));
}

impl Session {
    /// Tags `object` with `label`, when there is one.
    fn hand_off(&self, object: sys::jobject, label: u32) {
        if label != 0 && !object.is_null() {
            // SAFETY: a live local reference of this thread. A failure leaves it unlabelled.
            let _ = unsafe { self.env.set_tag(object, i64::from(label)) };
        }
    }

    /// The label `object` was handed over with (0: none).
    fn label_of(&self, object: sys::jobject) -> u32 {
        if object.is_null() {
            return 0;
        }
        // SAFETY: a live local reference of this thread.
        let tag = unsafe { self.env.tag(object) }.unwrap_or(0);
        u32::try_from(tag).unwrap_or(0)
    }

    /// The label of a call of entry `entry`: its key's value, or the method.
    fn label(&self, entry: usize, jni: Jni, this: sys::jobject, args: sys::jobject) -> u32 {
        let Some(entry) = self.entries.get(entry) else {
            return 0;
        };
        let label = |text: &str| label::id(&one_frame(text));
        match &entry.key {
            None => *entry.label.get_or_init(|| label(&entry.name)),
            Some(path) => self
                .keys
                .label(jni, (this, args), path, label)
                .unwrap_or_else(|| label(&format!("{}=[no such argument]", entry.name))),
        }
    }
}

/// A label's text as one frame of every output: control characters escaped (`\n`), and
/// `;`, which separates collapsed frames, as `,`.
fn one_frame(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    escape_into(&text.replace(';', ","), false, &mut out);
    out
}
