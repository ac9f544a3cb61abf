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
//! ObjectFree on JDK 11–16, might need).
//!
//! Memory is bounded: at most [`MAX_SITES`] distinct sites (further new sites are counted as
//! dropped) and at most [`MAX_LIVE`] tracked live objects (further ones are not tagged and are
//! counted as untracked).
//!
//! Live objects (alloc engine, `live`): each sampled object gets a fresh tag; ObjectFree
//! removes it. What is still in the table at a dump is what is still alive (or not yet seen
//! to be freed: a collection must have run for a dead object to be reported freed).

use std::cell::Cell;
use std::collections::HashMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use jtap_profile::{Frame, FrameKind, Metadata, Profile};

use crate::heap::class_name::java_name;

/// Number of shards.
pub const SHARDS: usize = 64;
/// Most distinct sites kept.
pub const MAX_SITES: usize = 100_000;
/// Most live objects tracked at a time.
pub const MAX_LIVE: usize = 1 << 18;

/// A frame as JVMTI's GetStackTrace gives it: jmethodID (as an address) and location (the
/// bytecode index, -1 for a native method).
pub type RawFrame = (usize, i64);

/// Where something happened: the class (JVM signature) and the stack, top frame first.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SiteKey {
    /// JVM signature of the class (allocated object's, or the contended monitor's).
    pub class: Box<str>,
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
}

/// A tracked live object.
struct Live {
    site: Arc<SiteKey>,
    count: f64,
    weight: f64,
}

/// The table a running engine records into.
pub struct SiteTable {
    shards: Vec<Mutex<HashMap<Arc<SiteKey>, Tally>>>,
    live: Vec<Mutex<HashMap<i64, Live>>>,
    sites: AtomicUsize,
    live_objects: AtomicUsize,
    next_tag: AtomicI64,
    next_shard: AtomicUsize,
    /// Samples lost because the table was full.
    pub dropped: AtomicU64,
    /// Sampled objects not tracked for liveness because the live table was full.
    pub untracked: AtomicU64,
}

thread_local! {
    static SHARD: Cell<usize> = const { Cell::new(usize::MAX) };
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl SiteTable {
    /// An empty table.
    pub fn new() -> SiteTable {
        SiteTable {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            live: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            sites: AtomicUsize::new(0),
            live_objects: AtomicUsize::new(0),
            next_tag: AtomicI64::new(1),
            next_shard: AtomicUsize::new(0),
            dropped: AtomicU64::new(0),
            untracked: AtomicU64::new(0),
        }
    }

    /// Forgets everything (between runs), giving the memory back.
    pub fn clear(&self) {
        for shard in &self.shards {
            *lock(shard) = HashMap::new();
        }
        for shard in &self.live {
            *lock(shard) = HashMap::new();
        }
        self.sites.store(0, Ordering::SeqCst);
        self.live_objects.store(0, Ordering::SeqCst);
        self.dropped.store(0, Ordering::SeqCst);
        self.untracked.store(0, Ordering::SeqCst);
    }

    fn my_shard(&self) -> usize {
        SHARD.with(|shard| {
            if shard.get() == usize::MAX {
                shard.set(self.next_shard.fetch_add(1, Ordering::Relaxed) % SHARDS);
            }
            shard.get()
        })
    }

    /// A fresh tag for an object about to be tracked, or None when the live table is full.
    pub fn reserve_tag(&self) -> Option<i64> {
        if self.live_objects.fetch_add(1, Ordering::SeqCst) >= MAX_LIVE {
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

    /// Records one sample at a site standing for `count` events of total `weight`; with
    /// `tag`, the object carrying that tag is tracked until [`SiteTable::freed`].
    pub fn record(&self, key: SiteKey, count: f64, weight: f64, tag: Option<i64>) {
        let key = Arc::new(key);
        let recorded = {
            let mut shard = lock(&self.shards[self.my_shard()]);
            match shard.get_mut(&key) {
                Some(tally) => {
                    tally.add(count, weight);
                    true
                }
                None if self.sites.fetch_add(1, Ordering::SeqCst) < MAX_SITES => {
                    let mut tally = Tally::default();
                    tally.add(count, weight);
                    shard.insert(key.clone(), tally);
                    true
                }
                None => {
                    self.sites.fetch_sub(1, Ordering::SeqCst);
                    false
                }
            }
        };
        if !recorded {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(tag) = tag {
            // Tracked even when its site was dropped: the tag must still be accounted for.
            lock(&self.live[tag as usize % SHARDS]).insert(tag, Live { site: key, count, weight });
        }
    }

    /// ObjectFree: the object with `tag` is gone.
    pub fn freed(&self, tag: i64) {
        if lock(&self.live[tag as usize % SHARDS]).remove(&tag).is_some() {
            self.live_objects.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Tracked live objects now.
    pub fn live_objects(&self) -> usize {
        self.live_objects.load(Ordering::SeqCst)
    }

    /// Every site with its totals and live part, merged over shards (a copy; recording goes on).
    pub fn snapshot(&self) -> Vec<Site> {
        let mut merged: HashMap<SiteKey, Site> = HashMap::new();
        for shard in &self.shards {
            let copy: Vec<(Arc<SiteKey>, Tally)> = lock(shard).iter().map(|(k, t)| (k.clone(), *t)).collect();
            for (key, tally) in copy {
                let site = merged.entry((*key).clone()).or_insert_with(|| Site { key: (*key).clone(), total: Tally::default(), live: Tally::default() });
                site.total.samples += tally.samples;
                site.total.count += tally.count;
                site.total.weight += tally.weight;
            }
        }
        for shard in &self.live {
            let copy: Vec<(Arc<SiteKey>, f64, f64)> = lock(shard).values().map(|l| (l.site.clone(), l.count, l.weight)).collect();
            for (key, count, weight) in copy {
                if let Some(site) = merged.get_mut(&*key) {
                    site.live.add(count, weight);
                }
            }
        }
        merged.into_values().collect()
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
/// the estimated event counts, weights the estimated weights (both rounded).
pub fn to_profile(sites: &[Site], part: Part, metadata: Metadata, mut resolve: impl FnMut(RawFrame) -> Frame) -> Profile {
    let mut profile = Profile::new(metadata);
    for site in sites {
        let tally = match part {
            Part::Total => site.total,
            Part::Live => site.live,
        };
        if tally.samples == 0 {
            continue;
        }
        let mut stack: Vec<Frame> = site.key.frames.iter().rev().map(|&f| resolve(f)).collect();
        stack.push(Frame::new(java_name(&site.key.class), FrameKind::Class));
        profile.add_frames(&stack, tally.count.round().max(1.0) as u64, tally.weight.round() as u64);
    }
    profile
}

/// An HPROF-style SITES report: sites ranked by live bytes (then allocated bytes), with live
/// and allocated bytes and objects, the share of all live bytes (`self`) and its running sum
/// (`accum`), the class and up to `depth` frames of the stack. `top`: at most that many sites.
pub fn sites_report(sites: &[Site], heading: &str, top: usize, depth: usize, mut resolve: impl FnMut(RawFrame) -> Frame) -> String {
    let mut ranked: Vec<&Site> = sites.iter().collect();
    ranked.sort_by(|a, b| {
        b.live.weight.total_cmp(&a.live.weight).then(b.total.weight.total_cmp(&a.total.weight)).then(a.key.cmp(&b.key))
    });
    let live_total: f64 = sites.iter().map(|s| s.live.weight).sum();
    let live_objects: f64 = sites.iter().map(|s| s.live.count).sum();
    let alloc_total: f64 = sites.iter().map(|s| s.total.weight).sum();
    let alloc_objects: f64 = sites.iter().map(|s| s.total.count).sum();
    let mut text = format!("SITES BEGIN (ordered by live bytes) {heading}\n");
    text.push_str("            percent              live                   alloc'ed\n");
    text.push_str(" rank    self   accum         bytes    objs           bytes      objs  class / stack\n");
    let share = |bytes: f64| if live_total > 0.0 { 100.0 * bytes / live_total } else { 0.0 };
    let mut accum = 0.0;
    for (rank, site) in ranked.iter().take(top).enumerate() {
        accum += share(site.live.weight);
        let _ = writeln!(
            text,
            "{:>5} {:>6.2}% {:>6.2}% {:>13.0} {:>7.0} {:>15.0} {:>9.0}  {}",
            rank + 1,
            share(site.live.weight),
            accum,
            site.live.weight,
            site.live.count,
            site.total.weight,
            site.total.count,
            java_name(&site.key.class)
        );
        for &frame in site.key.frames.iter().take(depth) {
            let _ = writeln!(text, "{:>50}at {}", "", resolve(frame).name);
        }
    }
    let _ = write!(
        text,
        "SITES END: {} sites; live {:.0} bytes in {:.0} objects; allocated {:.0} bytes in {:.0} objects",
        sites.len(),
        live_total,
        live_objects,
        alloc_total,
        alloc_objects
    );
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(class: &str, frames: &[usize]) -> SiteKey {
        SiteKey { class: class.into(), frames: frames.iter().map(|&m| (m, 0)).collect() }
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
                    for _ in 0..100 {
                        let tag = table.reserve_tag();
                        table.record(key("[B", &[1, 2]), 2.0, 100.0, tag);
                        table.record(key("Ljava/lang/String;", &[3]), 1.0, 24.0, None);
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
        assert_eq!((bytes.total.samples, bytes.total.count, bytes.total.weight), (400, 800.0, 40_000.0));
        assert_eq!((bytes.live.samples, bytes.live.count, bytes.live.weight), (300, 600.0, 30_000.0));
        assert_eq!(sites[0].live, Tally::default());

        let live = to_profile(&sites, Part::Live, Metadata::default(), name);
        assert_eq!((live.stack_count(), live.total_samples(), live.total_weight()), (1, 600, 30_000));
        let stack = live.stacks()[0].0.iter().map(|&id| live.frame(id).name.clone()).collect::<Vec<_>>();
        assert_eq!(stack, ["m2", "m1", "byte[]"], "root first, class as leaf");
        let all = to_profile(&sites, Part::Total, Metadata::default(), name);
        assert_eq!((all.stack_count(), all.total_weight()), (2, 40_000 + 9_600));

        table.clear();
        assert!(table.snapshot().is_empty());
        assert_eq!(table.live_objects(), 0);
    }

    #[test]
    fn the_table_is_bounded() {
        let table = SiteTable::new();
        for i in 0..MAX_SITES + 10 {
            table.record(key("[I", &[i]), 1.0, 16.0, None);
        }
        assert_eq!(table.snapshot().len(), MAX_SITES);
        assert_eq!(table.dropped.load(Ordering::SeqCst), 10);
    }

    #[test]
    fn sites_report_ranks_by_live_bytes_with_shares() {
        let tally = |count: f64, weight: f64| Tally { samples: 1, count, weight };
        let sites = [
            Site { key: key("[B", &[1, 2, 3]), total: tally(10.0, 3000.0), live: Tally::default() },
            Site { key: key("Lworkloads/Sites$Kept;", &[4]), total: tally(5.0, 1000.0), live: tally(3.0, 750.0) },
            Site { key: key("[J", &[5]), total: tally(1.0, 500.0), live: tally(1.0, 250.0) },
        ];
        let text = sites_report(&sites, "(test)", 10, 2, name);
        let rows: Vec<&str> = text.lines().filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit())).collect();
        assert_eq!(rows.len(), 3, "{text}");
        assert!(rows[0].contains("75.00%  75.00%") && rows[0].ends_with("workloads.Sites$Kept"), "{text}");
        assert!(rows[1].contains("25.00% 100.00%") && rows[1].ends_with("long[]"), "{text}");
        assert!(rows[2].contains(" 0.00% 100.00%") && rows[2].ends_with("byte[]"), "{text}");
        assert_eq!(text.lines().filter(|l| l.trim_start().starts_with("at m")).count(), 1 + 1 + 2, "depth 2: {text}");
        assert!(text.ends_with("SITES END: 3 sites; live 1000 bytes in 4 objects; allocated 4500 bytes in 16 objects"), "{text}");
    }
}
