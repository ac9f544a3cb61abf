//! Sites: sampled events summed per (class, stack) — for the alloc engine, allocations of a
//! class at a stack; for the lock engine, waits for a monitor of a class at a stack.
//!
//! Recording happens in JVMTI callbacks on the application's own threads, so it must be
//! cheap and must never make a thread wait long: the table is split into [`SHARDS`] shards,
//! each behind its own mutex, and each thread keeps to one shard (assigned round-robin the
//! first time it records). A thread therefore only ever meets the reader (a dump, which
//! locks one shard at a time just long enough to copy it) or the rare other thread sharing
//! its shard. Nothing that can block on the VM — no JNI, no JVMTI — is ever done while a
//! shard is locked: callbacks make their JVMTI calls first and only then record, so a
//! safepoint can never stop a thread that holds a shard (which the GC thread, delivering
//! the sweep of collected objects, might need). Recording is allocation-free for a site already
//! known: classes are interned to a [`ClassId`] once ([`SiteTable::intern`]), a site is found
//! by a cheap hash of its class and frames and compared in place, and only a new site's key
//! is copied to the heap.
//!
//! Memory is bounded: at most [`MAX_SITES`] distinct sites (further new sites are counted as
//! dropped) and at most [`MAX_LIVE`] (or [`MAX_LIVE_EXACT`]) tracked live objects (further
//! ones are not tracked and are counted as untracked).
//!
//! Live objects ([`Tracked`]): the alloc engine gives each sampled object an id and a weak
//! reference, and [`SiteTable::sweep`] removes those whose reference the GC cleared; the
//! nativemem engine tracks blocks by address and calls [`SiteTable::freed`]. What is still in
//! the table at a dump is what is still alive (or not yet seen to be freed).

use std::cell::Cell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use jtap_jvmti::{sys, Env};
use jtap_profile::{
    virtual_thread_key, Frame, FrameKind, Metadata, Profile, StackCounts, MAX_LOGGED,
};
use jtap_protocol::records;
use jtap_protocol::records::sites::{Amount, Leaks, Recording};

use crate::sampling::jvm::thread_name;
use crate::sampling::threads::{current_tid, kernel_name};
use crate::walk::Mounted;
use jtap_classfile::descriptor::java_name;

/// Number of shards.
pub const SHARDS: usize = 64;
/// Most distinct sites kept.
pub const MAX_SITES: usize = 100_000;
/// Most live objects tracked at a time by default (sampled objects).
pub const MAX_LIVE: usize = 1 << 18;
/// Most live objects tracked at a time when every allocation is recorded (`exact`): about
/// 40 bytes each in this table and about as much again in the JVM (its weak reference).
pub const MAX_LIVE_EXACT: usize = 1 << 21;

/// A frame as JVMTI's GetStackTrace gives it: jmethodID (as an address) and location (the
/// bytecode index, -1 for a native method).
pub type RawFrame = (usize, i64);

/// The shard of the live table holding `id`: ids are counters (alloc) or block addresses
/// (nativemem, whose low bits are all zero), so the bits are mixed first.
fn live_shard(id: i64) -> usize {
    ((id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) as usize % SHARDS
}

/// Where something happened: the class (JVM signature), the thread (with
/// [`SiteTable::keep_threads`]) and the stack, top frame first.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SiteKey {
    /// JVM signature of the class (allocated object's, or the contended monitor's).
    pub class: Box<str>,
    /// The thread's event-log key (kernel id, or virtual thread key), when sites are kept
    /// per thread.
    pub thread: Option<u32>,
    /// The request label the thread worked for ([`crate::label`]; 0: none).
    pub label: u32,
    /// The stack, top first.
    pub frames: Box<[RawFrame]>,
}

/// Counts of one site: samples taken, and the estimated events and weight they stand for.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Tally {
    /// Samples recorded.
    pub samples: u64,
    /// Estimated number of events (objects allocated, contentions).
    pub count: f64,
    /// Estimated weight (bytes, nanoseconds).
    pub weight: f64,
}

impl Tally {
    fn add(&mut self, count: f64, weight: f64) {
        self.samples += 1;
        self.count += count;
        self.weight += weight;
    }
}

/// A site with what was recorded there: all of it, and the part still alive.
#[derive(Debug, Clone, PartialEq)]
pub struct Site {
    /// Class and stack.
    pub key: SiteKey,
    /// Everything recorded.
    pub total: Tally,
    /// Of that, objects not freed (alloc engine with live tracking).
    pub live: Tally,
    /// Of those, the ones that survived collections (with [`SiteTable::rank_survivors`]).
    pub survivors: Survivors,
    /// With a timeline, the samples of `total` as they came (fewer once the log is full).
    pub events: Vec<SiteEvent>,
}

/// The live objects of a site that survived at least the table's minimum age in collections.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Survivors {
    /// Their counts.
    pub old: Tally,
    /// Between how many distinct collections they were born.
    pub born_in: u32,
    /// Collections the oldest survived.
    pub oldest: u32,
    /// Of `old`, those born in the later half of the collection intervals an old object can
    /// have been born in: a leak keeps about half of its old objects there, a cache filled
    /// once none.
    pub later: Tally,
    /// Of `old`, those born in each of `parts` equal parts of those intervals, oldest first.
    pub by_birth: [Tally; BIRTH_PARTS],
    /// The parts of `by_birth` in use: [`BIRTH_PARTS`], or fewer when fewer intervals.
    pub parts: u32,
}

/// Most parts [`Survivors::by_birth`] splits the intervals an old object can have been born
/// in into.
pub const BIRTH_PARTS: usize = 8;

/// A class, interned by [`SiteTable::intern`]: sites hold this small number instead of the
/// class's signature.
pub type ClassId = u32;

/// A site as the table holds it: the interned class, the thread (0 when sites are not kept
/// per thread) and the stack.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Key {
    class: ClassId,
    thread: u32,
    /// The request label ([`crate::label`]; 0: none).
    label: u32,
    frames: Box<[RawFrame]>,
}

/// A tracked live object: its site (None when the site table was full), what it stands for,
/// and when it was born.
struct Live {
    site: Option<Arc<Key>>,
    /// The object's weak reference (0: none, the owner calls [`SiteTable::freed`]).
    weak: usize,
    count: f64,
    weight: f64,
    /// Collections that had ended when it was allocated.
    born: u32,
    /// When it was allocated, in nanoseconds since the Unix epoch.
    born_ns: u64,
}

/// A live object or block to follow until it is freed: its id (unique while tracked: a
/// counter from [`SiteTable::reserve_id`], or a block's address) and, for a Java object, a
/// JNI weak global reference to it (the table only holds it; its owner makes and deletes it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tracked {
    pub id: i64,
    pub weak: usize,
}

/// One of a site's oldest live objects (see [`SiteTable::survivors`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Survivor {
    pub object: Tracked,
    /// When it was allocated, in nanoseconds since the Unix epoch.
    pub allocated_ns: u64,
}

/// One shard's sites, by [`site_hash`]; sites whose hashes collide share a bucket.
type Sites = HashMap<u64, Vec<(Arc<Key>, Tally)>, BuildHasherDefault<Mix>>;

/// One shard: its sites, and with a timeline its samples as they came.
#[derive(Default)]
struct Shard {
    sites: Sites,
    log: Vec<(Arc<Key>, SiteEvent)>,
}

/// One sample of a site, for the event log (see [`SiteTable::keep_timeline`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SiteEvent {
    /// When, in nanoseconds since the Unix epoch.
    pub time_ns: u64,
    /// Kernel id of the thread.
    pub tid: u32,
    /// Events it stands for.
    pub count: f64,
    /// Their weight.
    pub weight: f64,
}

/// Interned class signatures.
#[derive(Default)]
struct Classes {
    names: Vec<Arc<str>>,
    ids: HashMap<Arc<str>, ClassId>,
}

/// The table a running engine records into.
pub struct SiteTable {
    shards: Vec<Mutex<Shard>>,
    live: Vec<Mutex<HashMap<i64, Live, BuildHasherDefault<Mix>>>>,
    /// Held through a sweep: two sweeps at once could both test a reference one deletes.
    sweeping: Mutex<()>,
    classes: Mutex<Classes>,
    sites: AtomicUsize,
    live_objects: AtomicUsize,
    live_limit: AtomicUsize,
    next_id: AtomicI64,
    next_shard: AtomicUsize,
    /// Keep each sample in the event log.
    timeline: AtomicBool,
    /// Keep sites per thread.
    threads: AtomicBool,
    /// Samples in the event log, at most [`MAX_LOGGED`].
    logged: AtomicUsize,
    /// Samples lost because the table was full.
    pub dropped: AtomicU64,
    /// Sampled objects not tracked for liveness because the live table was full.
    pub untracked: AtomicU64,
    /// Collections ended since the table was cleared (see [`SiteTable::collection_ended`]).
    collections: AtomicU32,
    /// Collections a live object must survive to count in [`Site::survivors`]; 0: none do.
    survivor_age: AtomicU32,
    /// Labels of the virtual threads in the event log, by thread key, and whether their
    /// name could be read (see [`Mounted::name`]).
    virtual_threads: Mutex<HashMap<u32, (String, bool)>>,
}

thread_local! {
    static SHARD: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// Now, in nanoseconds since the Unix epoch.
pub fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// A small multiplicative hasher for keys that are integers (tags, site hashes): far cheaper
/// than the default SipHash, and the tables are not exposed to untrusted keys.
#[derive(Default)]
struct Mix(u64);

impl Hasher for Mix {
    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.write_u64(u64::from(byte));
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = (self.0.rotate_left(23) ^ value).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    fn write_i64(&mut self, value: i64) {
        self.write_u64(value as u64);
    }

    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 29)
    }
}

/// The hash of a site (class and stack).
fn site_hash(class: ClassId, thread: u32, label: u32, frames: &[RawFrame]) -> u64 {
    let mut hasher = Mix::default();
    hasher.write_u64(u64::from(class));
    hasher.write_u32(thread);
    hasher.write_u32(label);
    for &(method, location) in frames {
        hasher.write_u64(method as u64);
        hasher.write_i64(location);
    }
    hasher.finish()
}

impl SiteTable {
    /// An empty table.
    pub fn new() -> SiteTable {
        SiteTable {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            live: (0..SHARDS)
                .map(|_| Mutex::new(HashMap::default()))
                .collect(),
            sweeping: Mutex::new(()),
            classes: Mutex::new(Classes::default()),
            sites: AtomicUsize::new(0),
            live_objects: AtomicUsize::new(0),
            live_limit: AtomicUsize::new(MAX_LIVE),
            next_id: AtomicI64::new(1),
            next_shard: AtomicUsize::new(0),
            timeline: AtomicBool::new(false),
            threads: AtomicBool::new(false),
            logged: AtomicUsize::new(0),
            dropped: AtomicU64::new(0),
            untracked: AtomicU64::new(0),
            collections: AtomicU32::new(0),
            survivor_age: AtomicU32::new(0),
            virtual_threads: Mutex::new(HashMap::new()),
        }
    }

    /// Forgets everything (between runs), giving the memory back. Class ids handed out
    /// before are no longer valid.
    pub fn clear(&self) {
        for shard in &self.shards {
            *lock(shard) = Shard::default();
        }
        self.timeline.store(false, Ordering::SeqCst);
        self.threads.store(false, Ordering::SeqCst);
        self.logged.store(0, Ordering::SeqCst);
        for shard in &self.live {
            *lock(shard) = HashMap::default();
        }
        *lock(&self.classes) = Classes::default();
        lock(&self.virtual_threads).clear();
        self.sites.store(0, Ordering::SeqCst);
        self.live_objects.store(0, Ordering::SeqCst);
        self.dropped.store(0, Ordering::SeqCst);
        self.untracked.store(0, Ordering::SeqCst);
        self.collections.store(0, Ordering::SeqCst);
        self.survivor_age.store(0, Ordering::SeqCst);
    }

    /// Counts live objects that survived at least `age` collections as [`Site::survivors`]
    /// from now on (until [`SiteTable::clear`]).
    pub fn rank_survivors(&self, age: u32) {
        self.survivor_age.store(age, Ordering::SeqCst);
    }

    /// A collection ended (GarbageCollectionFinish: in the collector's pause, so this only
    /// counts it).
    pub fn collection_ended(&self) {
        self.collections.fetch_add(1, Ordering::Relaxed);
    }

    /// Collections ended since the table was cleared.
    pub fn collections(&self) -> u32 {
        self.collections.load(Ordering::Relaxed)
    }

    /// Keeps each sample's time and thread from now on, up to [`MAX_LOGGED`] samples (until
    /// [`SiteTable::clear`]).
    pub fn keep_timeline(&self) {
        self.timeline.store(true, Ordering::SeqCst);
    }

    /// Keeps sites apart per thread from now on (`threads`: the thread as root frame).
    pub fn keep_threads(&self) {
        self.threads.store(true, Ordering::SeqCst);
    }

    /// Tracks at most `limit` live objects from now on (default [`MAX_LIVE`]).
    pub fn set_live_limit(&self, limit: usize) {
        self.live_limit.store(limit, Ordering::SeqCst);
    }

    /// The id of the class with JVM signature `signature` (the same id for the same
    /// signature until [`SiteTable::clear`]).
    pub fn intern(&self, signature: &str) -> ClassId {
        let mut classes = lock(&self.classes);
        if let Some(&id) = classes.ids.get(signature) {
            return id;
        }
        let id = classes.names.len() as ClassId;
        let name: Arc<str> = signature.into();
        classes.names.push(name.clone());
        classes.ids.insert(name, id);
        id
    }

    fn my_shard(&self) -> usize {
        SHARD.with(|shard| {
            if shard.get() == usize::MAX {
                shard.set(self.next_shard.fetch_add(1, Ordering::Relaxed) % SHARDS);
            }
            shard.get()
        })
    }

    /// The event log's key of the calling thread, or of the virtual thread it runs.
    fn thread_key(&self, virtual_thread: Option<Mounted>) -> u32 {
        let Some(mounted) = virtual_thread else {
            return current_tid() as u32;
        };
        let key = virtual_thread_key(mounted.id);
        let read = mounted.name().is_some();
        let mut names = lock(&self.virtual_threads);
        // A name read now replaces a label made when it could not be read.
        if names
            .get(&key)
            .is_none_or(|&(_, was_read)| read && !was_read)
        {
            names.insert(key, (mounted.label(), read));
        }
        key
    }

    /// The virtual thread the calling thread runs, if any, as [`SiteTable::record`] wants it:
    /// named by the JVM (JVMTI `GetThreadInfo`, on this thread) where the walker could not read
    /// the name and the table has no name for it yet, so the JVM is asked about once per
    /// virtual thread. Call in a callback or native method, outside the table's locks.
    ///
    /// # Safety
    /// `jni` is the calling thread's JNIEnv.
    pub unsafe fn current_virtual_thread(
        &self,
        env: &Env,
        jni: *mut sys::JNIEnv,
    ) -> Option<Mounted> {
        // SAFETY: the caller's contract.
        let mounted = crate::walk::resolved().and_then(|w| unsafe { w.mounted(jni) })?;
        if mounted.name().is_some() {
            return Some(mounted);
        }
        let key = virtual_thread_key(mounted.id);
        let named = lock(&self.virtual_threads)
            .get(&key)
            .is_some_and(|&(_, read)| read);
        if named {
            return Some(mounted);
        }
        // SAFETY: a null thread is the calling one, which runs Java code.
        let name = unsafe { thread_name(env, std::ptr::null_mut()) };
        Some(name.map_or(mounted, |name| mounted.named(&name)))
    }

    /// Names of the virtual threads of the event log, by thread key.
    pub fn virtual_threads(&self) -> HashMap<u32, String> {
        lock(&self.virtual_threads)
            .iter()
            .map(|(&key, (label, _))| (key, label.clone()))
            .collect()
    }

    /// A fresh id for an object about to be tracked, or None when the live table is full.
    pub fn reserve_id(&self) -> Option<i64> {
        if self.live_objects.fetch_add(1, Ordering::SeqCst)
            >= self.live_limit.load(Ordering::Relaxed)
        {
            self.live_objects.fetch_sub(1, Ordering::SeqCst);
            self.untracked.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        Some(self.next_id.fetch_add(1, Ordering::Relaxed))
    }

    /// Gives back an id reserved but not used.
    pub fn release_id(&self) {
        self.live_objects.fetch_sub(1, Ordering::SeqCst);
    }

    /// Records one sample at a site (`class`, interned, and `frames`, top first) standing for
    /// `count` events of total `weight`; with `tracked`, that object is tracked until
    /// [`SiteTable::freed`] or [`SiteTable::sweep`] removes it. With a timeline, `virtual_thread` tells the virtual thread
    /// the calling thread runs, if any, whose sample it then is. Allocates only for a site
    /// (or a virtual thread) seen for the first time.
    pub fn record(
        &self,
        class: ClassId,
        frames: &[RawFrame],
        count: f64,
        weight: f64,
        tracked: Option<Tracked>,
        virtual_thread: impl FnOnce() -> Option<Mounted>,
    ) {
        let logs = self.timeline.load(Ordering::Relaxed)
            && self.logged.fetch_add(1, Ordering::Relaxed) < MAX_LOGGED;
        let per_thread = self.threads.load(Ordering::Relaxed);
        let labelled = crate::label::is_active();
        let mounted = (logs || per_thread || labelled)
            .then(virtual_thread)
            .flatten();
        let tid = (logs || per_thread).then(|| self.thread_key(mounted));
        let thread = if per_thread { tid.unwrap_or(0) } else { 0 };
        let label = match labelled {
            true => crate::label::current(crate::label::key(current_tid(), mounted.map(|m| m.id))),
            false => 0,
        };
        let hash = site_hash(class, thread, label, frames);
        let time_ns = match logs || tracked.is_some() {
            true => now_ns(),
            false => 0,
        };
        let event = logs.then(|| SiteEvent {
            time_ns,
            tid: tid.unwrap_or(0),
            count,
            weight,
        });
        let site = {
            let mut shard = lock(&self.shards[self.my_shard()]);
            let shard = &mut *shard;
            let known = shard.sites.get_mut(&hash).and_then(|bucket| {
                bucket.iter_mut().find(|(key, _)| {
                    key.class == class
                        && key.thread == thread
                        && key.label == label
                        && *key.frames == *frames
                })
            });
            if let Some((key, tally)) = known {
                tally.add(count, weight);
                if let Some(event) = event {
                    shard.log.push((key.clone(), event));
                }
                Ok(tracked.map(|_| key.clone()))
            } else if self.sites.fetch_add(1, Ordering::SeqCst) < MAX_SITES {
                let key = Arc::new(Key {
                    class,
                    thread,
                    label,
                    frames: frames.into(),
                });
                let mut tally = Tally::default();
                tally.add(count, weight);
                shard
                    .sites
                    .entry(hash)
                    .or_default()
                    .push((key.clone(), tally));
                if let Some(event) = event {
                    shard.log.push((key.clone(), event));
                }
                Ok(tracked.map(|_| key))
            } else {
                self.sites.fetch_sub(1, Ordering::SeqCst);
                Err(())
            }
        };
        if site.is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(tracked) = tracked {
            // Tracked even when its site was dropped: the object must still be accounted for.
            let live = Live {
                site: site.unwrap_or(None),
                weak: tracked.weak,
                count,
                weight,
                born: self.collections(),
                born_ns: time_ns,
            };
            lock(&self.live[live_shard(tracked.id)]).insert(tracked.id, live);
        }
    }

    /// The block or object `id` is gone.
    pub fn freed(&self, id: i64) {
        if lock(&self.live[live_shard(id)]).remove(&id).is_some() {
            self.live_objects.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Removes the tracked objects whose weak reference `collected` says the GC cleared, and
    /// returns those references for the caller to delete. `collected` runs with no shard
    /// locked (it calls into the VM, which may stop the thread for a safepoint).
    pub fn sweep(&self, mut collected: impl FnMut(usize) -> bool) -> Vec<usize> {
        let _one_at_a_time = lock(&self.sweeping);
        let mut gone = Vec::new();
        for shard in &self.live {
            let held: Vec<(i64, usize)> = lock(shard)
                .iter()
                .filter(|(_, live)| live.weak != 0)
                .map(|(&id, live)| (id, live.weak))
                .collect();
            let dead: Vec<(i64, usize)> = held.into_iter().filter(|&(_, w)| collected(w)).collect();
            if dead.is_empty() {
                continue;
            }
            let mut shard = lock(shard);
            for (id, weak) in dead {
                if shard.remove(&id).is_some() {
                    self.live_objects.fetch_sub(1, Ordering::SeqCst);
                    gone.push(weak);
                }
            }
        }
        gone
    }

    /// Stops tracking every object and returns their weak references for the caller to
    /// delete.
    pub fn untrack_all(&self) -> Vec<usize> {
        let _one_at_a_time = lock(&self.sweeping);
        let mut weak = Vec::new();
        for shard in &self.live {
            let mut shard = lock(shard);
            weak.extend(shard.values().map(|live| live.weak).filter(|&w| w != 0));
            self.live_objects.fetch_sub(shard.len(), Ordering::SeqCst);
            shard.clear();
        }
        weak
    }

    /// Up to `most` of `site`'s oldest survivors.
    pub fn survivors(&self, site: &SiteKey, most: usize) -> Vec<Survivor> {
        let Some(class) = lock(&self.classes).ids.get(&*site.class).copied() else {
            return Vec::new();
        };
        let now = self.collections();
        let min_age = self.survivor_age.load(Ordering::SeqCst).max(1);
        let thread = site.thread.unwrap_or(0);
        let mut found: Vec<(u32, Survivor)> = Vec::new();
        for shard in &self.live {
            found.extend(lock(shard).iter().filter_map(|(&id, live)| {
                let key = live.site.as_ref()?;
                let same = key.class == class
                    && key.thread == thread
                    && key.label == site.label
                    && key.frames == site.frames;
                let survivor = Survivor {
                    object: Tracked {
                        id,
                        weak: live.weak,
                    },
                    allocated_ns: live.born_ns,
                };
                (same && now.saturating_sub(live.born) >= min_age).then_some((live.born, survivor))
            }));
        }
        found.sort_unstable_by_key(|&(born, survivor)| (born, survivor.object.id));
        found
            .into_iter()
            .take(most)
            .map(|(_, survivor)| survivor)
            .collect()
    }

    /// Tracked live objects now.
    pub fn live_objects(&self) -> usize {
        self.live_objects.load(Ordering::SeqCst)
    }

    /// Every site with its totals and live part, merged over shards (a copy; recording goes on).
    pub fn snapshot(&self) -> Vec<Site> {
        let mut merged: HashMap<Arc<Key>, (Tally, Tally)> = HashMap::new();
        let mut events: HashMap<Arc<Key>, Vec<SiteEvent>> = HashMap::new();
        for shard in &self.shards {
            let (copy, log) = {
                let shard = lock(shard);
                let copy: Vec<(Arc<Key>, Tally)> = shard
                    .sites
                    .values()
                    .flatten()
                    .map(|(k, t)| (k.clone(), *t))
                    .collect();
                (copy, shard.log.clone())
            };
            for (key, tally) in copy {
                let (total, _) = merged.entry(key).or_default();
                total.samples += tally.samples;
                total.count += tally.count;
                total.weight += tally.weight;
            }
            for (key, event) in log {
                events.entry(key).or_default().push(event);
            }
        }
        let mut survivors = Ages::new(self.collections(), self.survivor_age.load(Ordering::SeqCst));
        for shard in &self.live {
            let copy: Vec<(Arc<Key>, f64, f64, u32)> = lock(shard)
                .values()
                .filter_map(|l| Some((l.site.clone()?, l.count, l.weight, l.born)))
                .collect();
            for (key, count, weight, born) in copy {
                if let Some((_, live)) = merged.get_mut(&key) {
                    live.add(count, weight);
                    survivors.add(&key, count, weight, born);
                }
            }
        }
        let names = lock(&self.classes).names.clone();
        merged
            .into_iter()
            .map(|(key, (total, live))| {
                let mut events = events.remove(&key).unwrap_or_default();
                events.sort_by_key(|e| e.time_ns);
                let class = names
                    .get(key.class as usize)
                    .map_or("[unknown class]".into(), |name| Box::from(&**name));
                Site {
                    survivors: survivors.of(&key),
                    key: SiteKey {
                        class,
                        thread: (key.thread != 0).then_some(key.thread),
                        label: key.label,
                        frames: key.frames.clone(),
                    },
                    total,
                    live,
                    events,
                }
            })
            .collect()
    }
}

/// The survivors of each site, gathered from the live objects.
struct Ages {
    now: u32,
    /// Minimum age; 0: nothing is gathered.
    min_age: u32,
    by_site: HashMap<Arc<Key>, Gathered>,
}

/// A site's old objects as [`Ages`] gathers them.
#[derive(Default)]
struct Gathered {
    old: Tally,
    /// Those born in the later half of the intervals ([`Survivors::later`]).
    later: Tally,
    /// Those born in each part of the intervals ([`Survivors::by_birth`]).
    by_birth: [Tally; BIRTH_PARTS],
    /// After how many collections each was born.
    births: Vec<u32>,
}

impl Ages {
    fn new(now: u32, min_age: u32) -> Ages {
        Ages {
            now,
            min_age,
            by_site: HashMap::new(),
        }
    }

    /// A live object of `key` born after `born` collections.
    fn add(&mut self, key: &Arc<Key>, count: f64, weight: f64, born: u32) {
        if self.min_age == 0 || self.now.saturating_sub(born) < self.min_age {
            return;
        }
        let (part, _) = self.part_of(born);
        let gathered = self.by_site.entry(key.clone()).or_default();
        gathered.old.add(count, weight);
        // Old enough: born after 0 ..= now - min_age collections.
        if 2 * born > self.now - self.min_age {
            gathered.later.add(count, weight);
        }
        gathered.by_birth[part].add(count, weight);
        gathered.births.push(born);
    }

    /// The part of [`Survivors::by_birth`] an old object born after `born` collections counts
    /// in, and how many parts there are.
    fn part_of(&self, born: u32) -> (usize, u32) {
        let leaks = Leaks {
            min_age: self.min_age,
            collections: self.now,
        };
        let intervals = leaks.intervals().max(1) as usize;
        let parts = intervals.min(BIRTH_PARTS);
        (born as usize * parts / intervals, parts as u32)
    }

    fn of(&mut self, key: &Arc<Key>) -> Survivors {
        let Some(Gathered {
            old,
            later,
            by_birth,
            mut births,
        }) = self.by_site.remove(key)
        else {
            return Survivors::default();
        };
        let (_, parts) = self.part_of(0);
        births.sort_unstable();
        let oldest = births
            .first()
            .map_or(0, |&born| self.now.saturating_sub(born));
        births.dedup();
        Survivors {
            old,
            born_in: births.len() as u32,
            oldest,
            later,
            by_birth,
            parts,
        }
    }
}

impl Default for SiteTable {
    fn default() -> SiteTable {
        SiteTable::new()
    }
}

/// Which part of the sites a profile shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// Everything recorded.
    Total,
    /// Only objects still alive.
    Live,
}

/// The sites as a profile: each stack root first with the class as leaf frame; samples are
/// the samples taken, events and weights the estimated events and weights (rounded). With a
/// `timeline`, the logged samples of the total go to the profile's event log.
pub fn to_profile(
    sites: &[Site],
    part: Part,
    timeline: bool,
    virtual_threads: &HashMap<u32, String>,
    metadata: Metadata,
    mut resolve: impl FnMut(RawFrame) -> Frame,
) -> Profile {
    let mut profile = Profile::new(metadata);
    for site in sites {
        let tally = match part {
            Part::Total => site.total,
            Part::Live => site.live,
        };
        if tally.samples == 0 {
            continue;
        }
        let thread = site.key.thread.map(|tid| {
            let label = match virtual_threads.get(&tid) {
                Some(name) => format!("[{name}]"),
                None => match kernel_name(tid as i32) {
                    Some(name) => format!("[{name} tid={tid}]"),
                    None => format!("[tid={tid}]"),
                },
            };
            Frame::new(label, FrameKind::Thread)
        });
        let label = crate::label::name(site.key.label).map(|text| Frame::request_label(&text));
        let frames = site.key.frames.iter().rev().map(|&f| resolve(f));
        let mut stack: Vec<Frame> = label.into_iter().chain(thread).chain(frames).collect();
        stack.push(Frame::new(java_name(&site.key.class), FrameKind::Class));
        let counts = |samples: u64, count: f64, weight: f64| StackCounts {
            samples,
            weight: weight.round() as u64,
            events: count.round().max(1.0) as u64,
        };
        // The live part has no log: its samples are those not freed, in no order.
        let logged = match part {
            Part::Total => &site.events[..],
            Part::Live => &[],
        };
        let unlogged = tally.samples - logged.len() as u64;
        if unlogged > 0 {
            let count = tally.count - logged.iter().map(|e| e.count).sum::<f64>();
            let weight = tally.weight - logged.iter().map(|e| e.weight).sum::<f64>();
            profile.add_frame_counts(&stack, counts(unlogged, count, weight));
            if timeline {
                profile.metadata.unlogged += unlogged;
            }
        }
        for event in logged {
            if !profile.thread_names().contains_key(&event.tid) {
                let name = match virtual_threads.get(&event.tid) {
                    Some(name) => name.clone(),
                    None => kernel_name(event.tid as i32).unwrap_or_default(),
                };
                profile.name_thread(event.tid, name);
            }
            profile.log_frames(
                &stack,
                counts(1, event.count, event.weight),
                event.time_ns,
                event.tid,
            );
        }
    }
    profile
}

/// How a report ranks sites: by the bytes of their survivors (`leaks`), then by live bytes,
/// then by allocated bytes.
fn ranking(leaks: bool) -> impl Fn(&&Site, &&Site) -> std::cmp::Ordering {
    move |a, b| {
        let old = |site: &Site| site.survivors.old.weight;
        let by_survivors = match leaks {
            true => old(b).total_cmp(&old(a)),
            false => std::cmp::Ordering::Equal,
        };
        by_survivors
            .then(b.live.weight.total_cmp(&a.live.weight))
            .then(b.total.weight.total_cmp(&a.total.weight))
            .then(a.key.cmp(&b.key))
    }
}

/// The sites with survivors, the most first (the leak report's order).
pub fn leak_suspects(sites: &[Site]) -> Vec<&Site> {
    let mut ranked: Vec<&Site> = sites
        .iter()
        .filter(|s| s.survivors.old.samples > 0)
        .collect();
    ranked.sort_by(ranking(true));
    ranked
}

/// The SITES report: the first `top` sites by live bytes (then allocated bytes), each with
/// `depth` frames, and totals over all sites; with `leaks`, the sites whose live objects
/// survived collections, by their bytes. The caller fills in the table's counters.
pub fn sites_report(
    sites: &[Site],
    recorded: Recording,
    leaks: Option<Leaks>,
    (top, depth): (usize, usize),
    mut resolve: impl FnMut(RawFrame) -> Frame,
) -> records::Sites {
    let ranked = match leaks {
        Some(_) => leak_suspects(sites),
        None => {
            let mut ranked: Vec<&Site> = sites.iter().collect();
            ranked.sort_by(ranking(false));
            ranked
        }
    };
    let amount = |tally: &Tally| Amount {
        bytes: tally.weight,
        objects: tally.count,
    };
    let sum = |part: fn(&Site) -> &Tally| Amount {
        bytes: sites.iter().map(|s| part(s).weight).sum(),
        objects: sites.iter().map(|s| part(s).count).sum(),
    };
    records::Sites {
        recorded,
        tracked_objects: 0,
        untracked_objects: 0,
        dropped_samples: 0,
        sites: ranked
            .iter()
            .take(top)
            .zip(1..)
            .map(|(site, rank)| records::sites::Site {
                rank,
                class: java_name(&site.key.class),
                live: amount(&site.live),
                allocated: amount(&site.total),
                paths: Vec::new(),
                holder: None,
                survivors: leaks.map(|_| records::sites::Survivors {
                    old: amount(&site.survivors.old),
                    born_in: site.survivors.born_in,
                    oldest: site.survivors.oldest,
                    later: amount(&site.survivors.later),
                    by_birth: site.survivors.by_birth[..site.survivors.parts as usize]
                        .iter()
                        .map(amount)
                        .collect(),
                }),
                frames: site
                    .key
                    .frames
                    .iter()
                    .take(depth)
                    .map(|&frame| resolve(frame).label(true).into_owned())
                    .collect(),
            })
            .collect(),
        site_count: sites.len() as u64,
        live: sum(|s| &s.live),
        allocated: sum(|s| &s.total),
        restored: None,
        leaks,
    }
}

#[cfg(test)]
mod tests;
