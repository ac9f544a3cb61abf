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
//! ObjectFree on JDK 11–16, might need). Recording is allocation-free for a site already
//! known: classes are interned to a [`ClassId`] once ([`SiteTable::intern`]), a site is found
//! by a cheap hash of its class and frames and compared in place, and only a new site's key
//! is copied to the heap.
//!
//! Memory is bounded: at most [`MAX_SITES`] distinct sites (further new sites are counted as
//! dropped) and at most [`MAX_LIVE`] (or [`MAX_LIVE_EXACT`]) tracked live objects (further ones are not tagged and are
//! counted as untracked).
//!
//! Live objects (alloc engine, `live`): each sampled object gets a fresh tag; ObjectFree
//! removes it. What is still in the table at a dump is what is still alive (or not yet seen
//! to be freed: a collection must have run for a dead object to be reported freed).

use std::cell::Cell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use jtap_jvmti::{sys, Env};
use jtap_profile::{
    virtual_thread_key, Frame, FrameKind, Metadata, Profile, StackCounts, MAX_LOGGED,
};
use jtap_protocol::records;
use jtap_protocol::records::sites::{Amount, Recording};

use crate::heap::class_name::java_name;
use crate::sampling::jvm::thread_name;
use crate::sampling::threads::{current_tid, kernel_name};
use crate::walk::Mounted;

/// Number of shards.
pub const SHARDS: usize = 64;
/// Most distinct sites kept.
pub const MAX_SITES: usize = 100_000;
/// Most live objects tracked at a time by default (sampled objects).
pub const MAX_LIVE: usize = 1 << 18;
/// Most live objects tracked at a time when every allocation is recorded (`exact`): about
/// 40 bytes each in this table and as much again in the JVM's tag map.
pub const MAX_LIVE_EXACT: usize = 1 << 21;

/// A frame as JVMTI's GetStackTrace gives it: jmethodID (as an address) and location (the
/// bytecode index, -1 for a native method).
pub type RawFrame = (usize, i64);

/// The shard of the live table holding `tag`: tags are counters (alloc) or block addresses
/// (nativemem, whose low bits are all zero), so the bits are mixed first.
fn live_shard(tag: i64) -> usize {
    ((tag as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) as usize % SHARDS
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
    /// With a timeline, the samples of `total` as they came (fewer once the log is full).
    pub events: Vec<SiteEvent>,
}

/// A class, interned by [`SiteTable::intern`]: sites hold this small number instead of the
/// class's signature.
pub type ClassId = u32;

/// A site as the table holds it: the interned class, the thread (0 when sites are not kept
/// per thread) and the stack.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Key {
    class: ClassId,
    thread: u32,
    frames: Box<[RawFrame]>,
}

/// A tracked live object: its site (None when the site table was full), and what it stands for.
struct Live {
    site: Option<Arc<Key>>,
    count: f64,
    weight: f64,
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
    classes: Mutex<Classes>,
    sites: AtomicUsize,
    live_objects: AtomicUsize,
    live_limit: AtomicUsize,
    next_tag: AtomicI64,
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
    /// Labels of the virtual threads in the event log, by thread key, and whether their
    /// name could be read (see [`Mounted::name`]).
    virtual_threads: Mutex<HashMap<u32, (String, bool)>>,
}

thread_local! {
    static SHARD: Cell<usize> = const { Cell::new(usize::MAX) };
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
fn site_hash(class: ClassId, thread: u32, frames: &[RawFrame]) -> u64 {
    let mut hasher = Mix::default();
    hasher.write_u64(u64::from(class));
    hasher.write_u32(thread);
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
            classes: Mutex::new(Classes::default()),
            sites: AtomicUsize::new(0),
            live_objects: AtomicUsize::new(0),
            live_limit: AtomicUsize::new(MAX_LIVE),
            next_tag: AtomicI64::new(1),
            next_shard: AtomicUsize::new(0),
            timeline: AtomicBool::new(false),
            threads: AtomicBool::new(false),
            logged: AtomicUsize::new(0),
            dropped: AtomicU64::new(0),
            untracked: AtomicU64::new(0),
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

    /// A fresh tag for an object about to be tracked, or None when the live table is full.
    pub fn reserve_tag(&self) -> Option<i64> {
        if self.live_objects.fetch_add(1, Ordering::SeqCst)
            >= self.live_limit.load(Ordering::Relaxed)
        {
            self.live_objects.fetch_sub(1, Ordering::SeqCst);
            self.untracked.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        Some(self.next_tag.fetch_add(1, Ordering::Relaxed))
    }

    /// Gives back a tag reserved but not used (tagging failed).
    pub fn release_tag(&self) {
        self.live_objects.fetch_sub(1, Ordering::SeqCst);
    }

    /// Records one sample at a site (`class`, interned, and `frames`, top first) standing for
    /// `count` events of total `weight`; with `tag`, the object carrying that tag is tracked
    /// until [`SiteTable::freed`]. With a timeline, `virtual_thread` tells the virtual thread
    /// the calling thread runs, if any, whose sample it then is. Allocates only for a site
    /// (or a virtual thread) seen for the first time.
    pub fn record(
        &self,
        class: ClassId,
        frames: &[RawFrame],
        count: f64,
        weight: f64,
        tag: Option<i64>,
        virtual_thread: impl FnOnce() -> Option<Mounted>,
    ) {
        let logs = self.timeline.load(Ordering::Relaxed)
            && self.logged.fetch_add(1, Ordering::Relaxed) < MAX_LOGGED;
        let per_thread = self.threads.load(Ordering::Relaxed);
        let tid = (logs || per_thread).then(|| self.thread_key(virtual_thread()));
        let thread = if per_thread { tid.unwrap_or(0) } else { 0 };
        let hash = site_hash(class, thread, frames);
        let event = logs.then(|| SiteEvent {
            time_ns: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64),
            tid: tid.unwrap_or(0),
            count,
            weight,
        });
        let site = {
            let mut shard = lock(&self.shards[self.my_shard()]);
            let shard = &mut *shard;
            let known = shard.sites.get_mut(&hash).and_then(|bucket| {
                bucket.iter_mut().find(|(key, _)| {
                    key.class == class && key.thread == thread && *key.frames == *frames
                })
            });
            if let Some((key, tally)) = known {
                tally.add(count, weight);
                if let Some(event) = event {
                    shard.log.push((key.clone(), event));
                }
                Ok(tag.map(|_| key.clone()))
            } else if self.sites.fetch_add(1, Ordering::SeqCst) < MAX_SITES {
                let key = Arc::new(Key {
                    class,
                    thread,
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
                Ok(tag.map(|_| key))
            } else {
                self.sites.fetch_sub(1, Ordering::SeqCst);
                Err(())
            }
        };
        if site.is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(tag) = tag {
            // Tracked even when its site was dropped: the tag must still be accounted for.
            let live = Live {
                site: site.unwrap_or(None),
                count,
                weight,
            };
            lock(&self.live[live_shard(tag)]).insert(tag, live);
        }
    }

    /// ObjectFree: the object with `tag` is gone.
    pub fn freed(&self, tag: i64) {
        if lock(&self.live[live_shard(tag)]).remove(&tag).is_some() {
            self.live_objects.fetch_sub(1, Ordering::SeqCst);
        }
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
        for shard in &self.live {
            let copy: Vec<(Arc<Key>, f64, f64)> = lock(shard)
                .values()
                .filter_map(|l| Some((l.site.clone()?, l.count, l.weight)))
                .collect();
            for (key, count, weight) in copy {
                if let Some((_, live)) = merged.get_mut(&key) {
                    live.add(count, weight);
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
                    key: SiteKey {
                        class,
                        thread: (key.thread != 0).then_some(key.thread),
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
        let frames = site.key.frames.iter().rev().map(|&f| resolve(f));
        let mut stack: Vec<Frame> = thread.into_iter().chain(frames).collect();
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

/// The SITES report: the first `top` sites by live bytes (then allocated bytes), each with
/// `depth` frames, and totals over all sites. The caller fills in the table's counters.
pub fn sites_report(
    sites: &[Site],
    recorded: Recording,
    top: usize,
    depth: usize,
    mut resolve: impl FnMut(RawFrame) -> Frame,
) -> records::Sites {
    let mut ranked: Vec<&Site> = sites.iter().collect();
    ranked.sort_by(|a, b| {
        b.live
            .weight
            .total_cmp(&a.live.weight)
            .then(b.total.weight.total_cmp(&a.total.weight))
            .then(a.key.cmp(&b.key))
    });
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sites_are_kept_apart_per_thread_when_asked() {
        let table = SiteTable::new();
        let class = table.intern("[B");
        table.keep_threads();
        let record = || table.record(class, &raw(&[1, 2]), 1.0, 8.0, None, || None);
        record();
        std::thread::scope(|s| {
            s.spawn(record);
        });
        let sites = table.snapshot();
        assert_eq!(sites.len(), 2, "{sites:?}");
        assert!(sites.iter().all(|s| s.key.thread.is_some()));
        let profile = to_profile(
            &sites,
            Part::Total,
            false,
            &HashMap::new(),
            Metadata::default(),
            |(m, _)| Frame::new(format!("m{m}"), FrameKind::Compiled),
        );
        for stack in profile.stacks() {
            let root = profile.frame(stack.0[0]);
            assert!(
                root.kind == FrameKind::Thread && root.name.contains("tid="),
                "{root:?}"
            );
        }
    }

    fn key(class: &str, frames: &[usize]) -> SiteKey {
        SiteKey {
            class: class.into(),
            thread: None,
            frames: raw(frames).into(),
        }
    }

    fn raw(frames: &[usize]) -> Vec<RawFrame> {
        frames.iter().map(|&m| (m, 0)).collect()
    }

    fn name(frame: RawFrame) -> Frame {
        Frame::new(format!("m{}", frame.0), FrameKind::Compiled)
    }

    #[test]
    fn sums_per_site_across_threads_and_tracks_live_objects() {
        let table = Arc::new(SiteTable::new());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let table = table.clone();
                std::thread::spawn(move || {
                    let (bytes, string) = (table.intern("[B"), table.intern("Ljava/lang/String;"));
                    for _ in 0..100 {
                        let tag = table.reserve_tag();
                        table.record(bytes, &raw(&[1, 2]), 2.0, 100.0, tag, || None);
                        table.record(string, &raw(&[3]), 1.0, 24.0, None, || None);
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(table.live_objects(), 400);
        for tag in 1..=100 {
            table.freed(tag);
        }
        table.freed(100_000); // unknown tags are ignored
        assert_eq!(table.live_objects(), 300);
        let mut sites = table.snapshot();
        sites.sort_by(|a, b| a.key.cmp(&b.key));
        assert_eq!(sites.len(), 2);
        let bytes = &sites[1];
        assert_eq!(&*bytes.key.class, "[B");
        assert_eq!(
            (bytes.total.samples, bytes.total.count, bytes.total.weight),
            (400, 800.0, 40_000.0)
        );
        assert_eq!(
            (bytes.live.samples, bytes.live.count, bytes.live.weight),
            (300, 600.0, 30_000.0)
        );
        assert_eq!(sites[0].live, Tally::default());

        let live = to_profile(
            &sites,
            Part::Live,
            false,
            &HashMap::new(),
            Metadata::default(),
            name,
        );
        assert_eq!(
            (
                live.stack_count(),
                live.total_samples(),
                live.total(jtap_profile::Counter::Events),
                live.total_weight()
            ),
            (1, 300, 600, 30_000),
            "samples taken, objects they stand for, bytes"
        );
        let stack = live.stacks()[0]
            .0
            .iter()
            .map(|&id| live.frame(id).name.clone())
            .collect::<Vec<_>>();
        assert_eq!(stack, ["m2", "m1", "byte[]"], "root first, class as leaf");
        let all = to_profile(
            &sites,
            Part::Total,
            false,
            &HashMap::new(),
            Metadata::default(),
            name,
        );
        assert_eq!((all.stack_count(), all.total_weight()), (2, 40_000 + 9_600));

        table.clear();
        assert!(table.snapshot().is_empty());
        assert_eq!(table.live_objects(), 0);
    }

    #[test]
    fn sites_differ_by_class_and_every_frame_even_when_hashes_collide() {
        let table = SiteTable::new();
        let (a, b) = (table.intern("La;"), table.intern("Lb;"));
        assert_eq!(table.intern("La;"), a, "interning is stable");
        for frames in [&[1, 2][..], &[1, 3], &[1], &[]] {
            table.record(a, &raw(frames), 1.0, 8.0, None, || None);
            table.record(b, &raw(frames), 1.0, 8.0, None, || None);
        }
        table.record(a, &raw(&[1, 2]), 1.0, 8.0, None, || None);
        let mut sites = table.snapshot();
        sites.sort_by(|x, y| x.key.cmp(&y.key));
        assert_eq!(sites.len(), 8);
        assert_eq!(
            (
                &*sites[0].key.class,
                &*sites[0].key.frames,
                sites[0].total.samples
            ),
            ("La;", &[][..], 1)
        );
        let twice = sites
            .iter()
            .find(|s| &*s.key.class == "La;" && *s.key.frames == [(1, 0), (2, 0)])
            .unwrap();
        assert_eq!(twice.total.samples, 2);
        // Two keys in one bucket, as if their hashes had collided.
        let mut shard = lock(&table.shards[0]);
        let key = |class, frames: &[usize]| {
            Arc::new(Key {
                class,
                thread: 0,
                frames: raw(frames).into(),
            })
        };
        shard.sites.insert(
            7,
            vec![
                (key(a, &[9]), Tally::default()),
                (key(b, &[9]), Tally::default()),
            ],
        );
        drop(shard);
        assert_eq!(table.snapshot().len(), 10);
    }

    #[test]
    fn a_timeline_logs_each_sample_with_its_time_and_thread() {
        let table = SiteTable::new();
        let ints = table.intern("[I");
        table.record(ints, &raw(&[1]), 1.0, 16.0, None, || None); // before the timeline: counted only
        table.keep_timeline();
        table.record(ints, &raw(&[1]), 2.0, 32.0, None, || None);
        table.record(ints, &raw(&[2]), 1.0, 16.0, None, || None);
        let sites = table.snapshot();
        let profile = to_profile(
            &sites,
            Part::Total,
            true,
            &HashMap::new(),
            Metadata::default(),
            name,
        );
        assert_eq!(profile.total_samples(), 3);
        assert_eq!(profile.total_weight(), 64);
        let log = profile.logged();
        assert_eq!(log.len(), 2);
        assert_eq!(profile.metadata.unlogged, 1);
        assert!(log
            .iter()
            .all(|e| e.tid == current_tid() as u32 && e.time_ns > 0));
        assert_eq!(
            log.iter().map(|e| e.counts.weight).sum::<u64>(),
            48,
            "each logged sample keeps its own weight"
        );
        assert!(profile.thread_names().contains_key(&(current_tid() as u32)));
        table.clear();
        table.record(ints, &raw(&[1]), 1.0, 16.0, None, || None);
        assert!(
            table.snapshot()[0].events.is_empty(),
            "clear ends the timeline"
        );
    }

    #[test]
    fn the_table_is_bounded() {
        let table = SiteTable::new();
        let ints = table.intern("[I");
        for i in 0..MAX_SITES + 10 {
            table.record(ints, &raw(&[i]), 1.0, 16.0, None, || None);
        }
        let tag = table.reserve_tag();
        table.record(ints, &raw(&[MAX_SITES + 20]), 1.0, 16.0, tag, || None);
        assert_eq!(table.snapshot().len(), MAX_SITES);
        assert_eq!(table.dropped.load(Ordering::SeqCst), 11);
        assert_eq!(
            table.live_objects(),
            1,
            "a dropped site's object is still tracked"
        );
        table.freed(tag.unwrap());
        assert_eq!(table.live_objects(), 0);
    }

    #[test]
    fn sites_report_ranks_by_live_bytes_and_sums_every_site() {
        let tally = |count: f64, weight: f64| Tally {
            samples: 1,
            count,
            weight,
        };
        let sites = [
            Site {
                key: key("[B", &[1, 2, 3]),
                total: tally(10.0, 3000.0),
                live: Tally::default(),
                events: Vec::new(),
            },
            Site {
                key: key("Lworkloads/Sites$Kept;", &[4]),
                total: tally(5.0, 1000.0),
                live: tally(3.0, 750.0),
                events: Vec::new(),
            },
            Site {
                key: key("[J", &[5]),
                total: tally(1.0, 500.0),
                live: tally(1.0, 250.0),
                events: Vec::new(),
            },
        ];
        let recorded = Recording::Sampled {
            seconds: 1.0,
            interval: 1024,
        };
        let report = sites_report(&sites, recorded, 10, 2, name);
        let ranked: Vec<(u32, &str, usize)> = report
            .sites
            .iter()
            .map(|s| (s.rank, s.class.as_str(), s.frames.len()))
            .collect();
        assert_eq!(
            ranked,
            [
                (1, "workloads.Sites$Kept", 1),
                (2, "long[]", 1),
                (3, "byte[]", 2)
            ]
        );
        assert_eq!(report.sites[2].frames, ["m1", "m2"]);
        assert_eq!((report.live.bytes, report.live.objects), (1000.0, 4.0));
        assert_eq!(
            (report.allocated.bytes, report.allocated.objects),
            (4500.0, 16.0)
        );
        assert_eq!(report.site_count, 3);
        let first = sites_report(&sites, report.recorded.clone(), 1, 2, name);
        assert_eq!((first.sites.len(), first.site_count), (1, 3));
    }
}
