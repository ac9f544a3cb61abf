//! Request labels (`by=`): which request each thread is working for, so that every engine's
//! samples carry it. Instrumented entry methods and hand-over points (see
//! [`crate::trace::labels`]) set a thread's label; signal handlers and event callbacks read
//! it.
//!
//! A thread is known by a key: a platform thread by its kernel id, a virtual thread by its
//! `Thread.threadId()` with [`VIRTUAL`] set, so that its label follows it from carrier to
//! carrier. The current label of each key sits in a fixed open-addressed table of atomic
//! words (key and label packed in one), which a signal handler reads without a lock or an
//! allocation. What a key had before (labels to go back to when a nested entry or a task
//! returns) is kept beside it, under a lock, by the threads themselves.
//!
//! Label ids stand for texts ([`name`]): the entry method or the key's value. Distinct texts
//! are capped at [`MAX_LABELS`]; later ones share [`OTHER`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Marks a virtual thread's key.
pub const VIRTUAL: u64 = 1 << 39;
/// Bits of a key in a table word; the label takes the rest.
const KEY_BITS: u32 = 40;
const KEY_MASK: u64 = (1 << KEY_BITS) - 1;
/// A slot whose key left (reusable; lookups go past it).
const LEFT: u64 = KEY_MASK;
/// Table slots: a power of two, far above the threads a JVM runs at once.
const SLOTS: usize = 1 << 16;
/// Slots a lookup or an insertion tries from a key's home slot.
const PROBES: usize = 64;
/// Deepest nesting of entries and tasks kept per thread; deeper ones keep the label.
const DEPTH: usize = 64;
/// Distinct label texts kept; later ones are [`OTHER`].
pub const MAX_LABELS: usize = 4096;
/// The text of labels beyond [`MAX_LABELS`].
pub const OTHER: &str = "[other labels]";

static TABLE: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];
/// Whether labels are being set (a recording with `by=` runs).
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// Keys whose label found no slot.
static UNRECORDED: AtomicU64 = AtomicU64::new(0);

/// What a key had before, by key, in shards.
static SAVED: [Mutex<Option<HashMap<u64, Saved>>>; 16] = [const { Mutex::new(None) }; 16];
static NAMES: Mutex<Names> = Mutex::new(Names {
    texts: Vec::new(),
    ids: None,
});

/// A key's labels, outermost first (0: none), and how many pushes went past [`DEPTH`].
#[derive(Default)]
struct Saved {
    stack: Vec<u32>,
    beyond: u32,
}

struct Names {
    /// Texts by id - 1.
    texts: Vec<String>,
    ids: Option<HashMap<String, u32>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn home(key: u64) -> usize {
    // Fibonacci hashing: consecutive thread ids spread over the table.
    (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SLOTS.trailing_zeros())) as usize
}

/// The key of a thread: `tid`, its kernel id, or the id of the virtual thread it runs.
pub fn key(tid: i32, virtual_thread: Option<u64>) -> u64 {
    match virtual_thread {
        Some(id) => VIRTUAL | (id & (VIRTUAL - 1)),
        None => u64::from(tid.unsigned_abs()),
    }
}

/// The label of `key` now (0: none). Async-signal-safe: atomic loads only.
pub fn current(key: u64) -> u32 {
    if !ACTIVE.load(Ordering::Relaxed) {
        return 0;
    }
    let start = home(key);
    for i in 0..PROBES {
        let word = TABLE[(start + i) & (SLOTS - 1)].load(Ordering::Relaxed);
        match word & KEY_MASK {
            0 => return 0,
            k if k == key => return (word >> KEY_BITS) as u32,
            _ => {}
        }
    }
    0
}

/// Sets the label of `key` in the table (0 gives its slot back). Only the thread of `key`
/// writes its slot, so finding and storing it need no lock; claiming a free slot is a
/// compare-and-swap, as other keys claim too.
fn store(key: u64, label: u32) {
    let start = home(key);
    let word = key | (u64::from(label) << KEY_BITS);
    for i in 0..PROBES {
        let slot = &TABLE[(start + i) & (SLOTS - 1)];
        match slot.load(Ordering::Relaxed) & KEY_MASK {
            k if k == key => {
                slot.store(if label == 0 { LEFT } else { word }, Ordering::Relaxed);
                return;
            }
            0 => break,
            _ => {}
        }
    }
    if label == 0 {
        return;
    }
    for i in 0..PROBES {
        let slot = &TABLE[(start + i) & (SLOTS - 1)];
        for free in [LEFT, 0] {
            if slot
                .compare_exchange(free, word, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
        }
    }
    UNRECORDED.fetch_add(1, Ordering::Relaxed);
}

/// Runs `change` on the saved labels of `key` and stores its new current label.
fn change(key: u64, change: impl FnOnce(&mut Saved)) {
    if !ACTIVE.load(Ordering::Relaxed) {
        return;
    }
    let mut shard = lock(&SAVED[(key as usize) & 15]);
    let keys = shard.get_or_insert_with(HashMap::new);
    let saved = keys.entry(key).or_default();
    change(saved);
    let label = saved.stack.last().copied().unwrap_or(0);
    if saved.stack.is_empty() && saved.beyond == 0 {
        keys.remove(&key);
    }
    store(key, label);
}

/// A call of an entry method labelled `label` begins on `key`'s thread: inside another
/// labelled call the outer label stays, unless `innermost`.
pub fn enter(key: u64, label: u32, innermost: bool) {
    change(key, |saved| {
        let now = saved.stack.last().copied().unwrap_or(0);
        let label = if now != 0 && !innermost { now } else { label };
        push(saved, label);
    });
}

/// A task labelled `label` (0: none) begins on `key`'s thread, whatever the thread had.
pub fn take_over(key: u64, label: u32) {
    change(key, |saved| push(saved, label));
}

/// The entry call or task begun last on `key`'s thread ends: its label before comes back.
pub fn leave(key: u64) {
    change(key, |saved| match saved.beyond {
        0 => {
            saved.stack.pop();
        }
        _ => saved.beyond -= 1,
    });
}

/// `key`'s thread starts over with `label` (0: none): a new thread, or a pool's worker loop.
pub fn start_over(key: u64, label: u32) {
    change(key, |saved| {
        saved.stack.clear();
        saved.beyond = 0;
        if label != 0 {
            saved.stack.push(label);
        }
    });
}

fn push(saved: &mut Saved, label: u32) {
    match saved.stack.len() < DEPTH {
        true => saved.stack.push(label),
        false => saved.beyond += 1,
    }
}

/// The id of label text `text`, new ones numbered from 1 (up to [`MAX_LABELS`], then the id
/// of [`OTHER`]).
pub fn id(text: &str) -> u32 {
    let mut names = lock(&NAMES);
    let Names { texts, ids } = &mut *names;
    let ids = ids.get_or_insert_with(HashMap::new);
    if let Some(&id) = ids.get(text) {
        return id;
    }
    let text = match texts.len() < MAX_LABELS {
        true => text,
        false => OTHER,
    };
    if let Some(&id) = ids.get(text) {
        return id;
    }
    texts.push(text.to_string());
    let id = texts.len() as u32;
    ids.insert(text.to_string(), id);
    id
}

/// The text of label `id` (None for 0 or an unknown id).
pub fn name(id: u32) -> Option<String> {
    let names = lock(&NAMES);
    names.texts.get((id as usize).checked_sub(1)?).cloned()
}

/// Labels are set from now on (a recording with `by=` starts): the table, saved labels and
/// names start empty.
pub fn activate() {
    clear();
    ACTIVE.store(true, Ordering::SeqCst);
}

/// Labels are no longer set or read; their names stay until the next activation (samples
/// taken before may still be processed).
pub fn deactivate() {
    ACTIVE.store(false, Ordering::SeqCst);
    for slot in &TABLE {
        slot.store(0, Ordering::Relaxed);
    }
    for shard in &SAVED {
        *lock(shard) = None;
    }
}

/// Whether labels are being set.
pub fn is_active() -> bool {
    ACTIVE.load(Ordering::Relaxed)
}

/// Labels that found no slot in the table since activation (their samples are unlabelled).
pub fn unrecorded() -> u64 {
    UNRECORDED.load(Ordering::Relaxed)
}

fn clear() {
    deactivate();
    UNRECORDED.store(0, Ordering::Relaxed);
    let mut names = lock(&NAMES);
    names.texts.clear();
    names.ids = None;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One test: the table and names are the process's own.
    #[test]
    fn labels_nest_hand_over_and_leave_no_slot_behind() {
        activate();
        let (a, b) = (id("/compute"), id("/pool"));
        assert_eq!((a, b, id("/compute")), (1, 2, 1));
        assert_eq!(name(a).as_deref(), Some("/compute"));
        let (t1, v1) = (4242, VIRTUAL | 7);
        enter(t1, a, false);
        enter(t1, b, false);
        assert_eq!(current(t1), a, "the outer entry's label stays");
        leave(t1);
        enter(t1, b, true);
        assert_eq!(current(t1), b, "innermost");
        leave(t1);
        take_over(v1, b);
        assert_eq!((current(t1), current(v1)), (a, b));
        take_over(t1, 0);
        assert_eq!(current(t1), 0, "an unlabelled task clears the label");
        leave(t1);
        assert_eq!(current(t1), a);
        leave(t1);
        leave(v1);
        assert_eq!((current(t1), current(v1)), (0, 0));
        leave(t1);
        assert_eq!(current(t1), 0, "a leave without an entry is ignored");
        start_over(t1, a);
        assert_eq!(current(t1), a);
        start_over(t1, 0);
        // Every slot was taken back.
        assert!(TABLE
            .iter()
            .all(|w| matches!(w.load(Ordering::Relaxed) & KEY_MASK, 0 | LEFT)));
        // Many keys with the same home slot still find theirs.
        let keys: Vec<u64> = (0..40).map(|i| i << 16 | 1).collect();
        for (i, &key) in keys.iter().enumerate() {
            take_over(key, i as u32 + 1);
        }
        for (i, &key) in keys.iter().enumerate() {
            assert_eq!(current(key), i as u32 + 1);
        }
        deactivate();
        assert_eq!(current(keys[0]), 0);
        // Names beyond the cap share one.
        for i in 0..MAX_LABELS + 5 {
            id(&format!("n{i}"));
        }
        assert_eq!(id("/compute"), a);
        assert_eq!(name(id("n99999")).as_deref(), Some(OTHER));
    }
}
