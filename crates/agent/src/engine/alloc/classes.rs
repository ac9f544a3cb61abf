//! The class of a sample without a JVMTI call. Each thread remembers the (mirror, `Klass*`)
//! pairs ([`Mirrors`]) it met and the class id each stands for; a pair it has not met is
//! looked up the JVMTI way (the class tag, see `class_id`) and remembered. A pair names one
//! class for as long as it stays the same (see the `walk::mirror` doc), so a remembered id is
//! the one JVMTI would give. `walker=check` asks JVMTI every time and counts disagreements;
//! `walker=jvmti` turns the shortcut off.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;

use jtap_jvmti::sys;

use crate::heap::sites::ClassId;
use crate::thread::Vm;
use crate::walk::Mirrors;

/// Pairs a thread remembers, by their `Klass*`.
const SLOTS: usize = 64;

#[derive(Clone, Copy)]
struct Entry {
    mirror: usize,
    klass: usize,
    id: ClassId,
}

const EMPTY: Entry = Entry {
    mirror: 0,
    klass: 0,
    id: 0,
};

struct Remembered {
    /// The run ([`GENERATION`]) whose ids these are.
    generation: u32,
    entries: [Entry; SLOTS],
}

thread_local! {
    static REMEMBERED: RefCell<Remembered> = const {
        RefCell::new(Remembered { generation: 0, entries: [EMPTY; SLOTS] })
    };
}

static MIRRORS: OnceLock<Mirrors> = OnceLock::new();
/// Each run interns its classes anew: what a thread remembers from an earlier run is void.
static GENERATION: AtomicU32 = AtomicU32::new(0);
static ON: AtomicBool = AtomicBool::new(false);
static CHECK: AtomicBool = AtomicBool::new(false);
static DISAGREED: AtomicU64 = AtomicU64::new(0);

/// Starts a run: `on` uses the shortcut (where this VM's mirrors can be read), `check` also
/// asks JVMTI every time.
pub fn start(vm: Vm, on: bool, check: bool) {
    GENERATION.fetch_add(1, Ordering::SeqCst);
    DISAGREED.store(0, Ordering::SeqCst);
    CHECK.store(check, Ordering::SeqCst);
    let readable = on
        && (MIRRORS.get().is_some()
            || match Mirrors::resolve(vm) {
                Ok(mirrors) => MIRRORS.set(mirrors).is_ok() || MIRRORS.get().is_some(),
                Err(e) => {
                    log!("alloc: classes by JVMTI: {e}");
                    false
                }
            });
    ON.store(readable, Ordering::SeqCst);
}

/// One line for the log at the end of a run.
pub fn summary() -> String {
    let how = if ON.load(Ordering::Relaxed) {
        "classes read from their mirrors"
    } else {
        "classes by JVMTI"
    };
    match DISAGREED.load(Ordering::Relaxed) {
        0 => how.to_string(),
        n => format!("{how}; {n} disagreed with JVMTI"),
    }
}

/// The id of `class` (a local reference the VM gave this thread), remembered or else from
/// `by_jvmti`.
pub fn class_of(class: sys::jclass, by_jvmti: impl FnOnce() -> Option<ClassId>) -> Option<ClassId> {
    let Some(mirrors) = MIRRORS.get().filter(|_| ON.load(Ordering::Relaxed)) else {
        return by_jvmti();
    };
    let Some((mirror, klass)) = mirrors.pair(class) else {
        // A read that faulted: it would fault again, and each fault costs a signal.
        if ON.swap(false, Ordering::Relaxed) {
            log!("alloc: a class mirror could not be read; classes by JVMTI from now on");
        }
        return by_jvmti();
    };
    let slot = (klass >> 3 ^ klass >> 11) % SLOTS;
    let generation = GENERATION.load(Ordering::Relaxed);
    let known = REMEMBERED.with(|r| {
        let mut r = r.borrow_mut();
        if r.generation != generation {
            *r = Remembered {
                generation,
                entries: [EMPTY; SLOTS],
            };
        }
        let e = r.entries[slot];
        (e.mirror == mirror && e.klass == klass).then_some(e.id)
    });
    let check = CHECK.load(Ordering::Relaxed);
    if let (Some(id), false) = (known, check) {
        return Some(id);
    }
    let id = by_jvmti()?;
    if known.is_some_and(|known| known != id) {
        DISAGREED.fetch_add(1, Ordering::Relaxed);
    }
    REMEMBERED.with(|r| r.borrow_mut().entries[slot] = Entry { mirror, klass, id });
    Some(id)
}
