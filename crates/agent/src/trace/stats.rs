//! Per-method call statistics for `jtap monitor`: calls, errors, total and largest duration,
//! and a log-linear histogram (8 buckets per power of two, so quantiles are within ~6%),
//! all atomics, so probes on many threads update them without locks. The reporting thread
//! takes snapshots and reports the difference between two.
//!
//! With request labels (`by=`), a method's calls under a label count apart: in a fixed
//! open-addressed table keyed by (method, label), whose slots a probe claims with one
//! compare-and-swap.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;

use jtap_protocol::records::{CallStats, LATENCY_BOUNDS_NS};

/// Methods with statistics; later method ids are not counted.
pub const MAX_METHODS: usize = 1 << 14;
/// Sub-buckets per power of two (as a shift).
const SUB_BITS: u32 = 3;
const SUB: usize = 1 << SUB_BITS;
/// Buckets: exact values below `SUB`, then `SUB` per power of two up to 2^48 ns.
const BUCKETS: usize = SUB + (48 - SUB_BITS as usize) * SUB;

/// The statistics of one method.
pub struct MethodStats {
    calls: AtomicU64,
    errors: AtomicU64,
    total_ns: AtomicU64,
    max_ns: AtomicU64,
    buckets: Box<[AtomicU64]>,
}

impl MethodStats {
    fn new() -> MethodStats {
        MethodStats {
            calls: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            total_ns: AtomicU64::new(0),
            max_ns: AtomicU64::new(0),
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    fn add(&self, ns: u64, threw: bool) {
        self.calls.fetch_add(1, Relaxed);
        if threw {
            self.errors.fetch_add(1, Relaxed);
        }
        self.total_ns.fetch_add(ns, Relaxed);
        self.max_ns.fetch_max(ns, Relaxed);
        if let Some(b) = self.buckets.get(bucket(ns)) {
            b.fetch_add(1, Relaxed);
        }
    }

    fn clear(&self) {
        self.calls.store(0, Relaxed);
        self.errors.store(0, Relaxed);
        self.total_ns.store(0, Relaxed);
        self.max_ns.store(0, Relaxed);
        for b in self.buckets.iter() {
            b.store(0, Relaxed);
        }
    }

    fn snapshot(&self) -> Snapshot {
        Snapshot {
            calls: self.calls.load(Relaxed),
            errors: self.errors.load(Relaxed),
            total_ns: self.total_ns.load(Relaxed),
            max_ns: self.max_ns.swap(0, Relaxed),
            buckets: self.buckets.iter().map(|b| b.load(Relaxed)).collect(),
        }
    }
}

/// The bucket of a duration.
fn bucket(ns: u64) -> usize {
    if ns < SUB as u64 {
        return ns as usize;
    }
    let exponent = 63 - ns.leading_zeros(); // ≥ SUB_BITS
    let sub = ((ns >> (exponent - SUB_BITS)) as usize) & (SUB - 1);
    (SUB + (exponent - SUB_BITS) as usize * SUB + sub).min(BUCKETS - 1)
}

/// The middle of a bucket's range.
fn bucket_value(index: usize) -> u64 {
    if index < SUB {
        return index as u64;
    }
    let exponent = (index - SUB) / SUB + SUB_BITS as usize;
    let sub = ((index - SUB) % SUB) as u64;
    let low = (1u64 << exponent) + (sub << (exponent - SUB_BITS as usize));
    low + (1u64 << (exponent - SUB_BITS as usize)) / 2
}

type Table = Box<[OnceLock<MethodStats>]>;

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| (0..MAX_METHODS).map(|_| OnceLock::new()).collect())
}

/// (method, label) pairs counted apart, at most; calls of later pairs count without their
/// label (and in [`unlabelled`]).
pub const MAX_LABELLED: usize = 1 << 12;
/// Slots a lookup tries from a pair's home slot.
const PROBES: usize = 64;

/// A slot of the labelled table: its pair (`method << 32 | label`, 0 while free) and the
/// pair's statistics.
struct Labelled {
    key: AtomicU64,
    stats: OnceLock<MethodStats>,
}

fn labelled_table() -> &'static [Labelled] {
    static TABLE: OnceLock<Box<[Labelled]>> = OnceLock::new();
    TABLE.get_or_init(|| {
        (0..MAX_LABELLED)
            .map(|_| Labelled {
                key: AtomicU64::new(0),
                stats: OnceLock::new(),
            })
            .collect()
    })
}

/// Labelled calls counted without their label: the table had no slot for their pair.
static UNLABELLED: AtomicU64 = AtomicU64::new(0);

/// The statistics of method `id` under `label`, claiming a slot for the pair if it has
/// none; None when the slots a lookup tries are all taken by other pairs.
fn labelled(id: u32, label: u32) -> Option<&'static MethodStats> {
    let key = u64::from(id) << 32 | u64::from(label);
    let table = labelled_table();
    // Fibonacci hashing spreads consecutive ids and labels.
    let home = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 52) as usize;
    (0..PROBES).find_map(|i| {
        let slot = &table[(home + i) % MAX_LABELLED];
        let owner = match slot.key.compare_exchange(0, key, Relaxed, Relaxed) {
            Ok(_) => key,
            Err(current) => current,
        };
        (owner == key).then(|| slot.stats.get_or_init(MethodStats::new))
    })
}

/// Counts one call of method `id` under request label `label` (0: none).
pub fn record(id: u32, label: u32, ns: u64, threw: bool) {
    let stats = match label {
        0 => None,
        _ => labelled(id, label).or_else(|| {
            UNLABELLED.fetch_add(1, Relaxed);
            None
        }),
    };
    let stats = match stats {
        Some(stats) => stats,
        None => match table().get(id as usize) {
            Some(slot) => slot.get_or_init(MethodStats::new),
            None => return,
        },
    };
    stats.add(ns, threw);
}

/// Labelled calls counted without their label since the session started.
pub fn unlabelled() -> u64 {
    UNLABELLED.load(Relaxed)
}

/// Forgets every count (at the start of a session, before probes act).
pub fn reset() {
    for slot in table().iter() {
        if let Some(stats) = slot.get() {
            stats.clear();
        }
    }
    for slot in labelled_table() {
        if let Some(stats) = slot.stats.get() {
            stats.clear();
        }
        slot.key.store(0, Relaxed);
    }
    UNLABELLED.store(0, Relaxed);
}

/// Cumulative counts of one method at one moment (`max_ns`: largest since the previous
/// snapshot).
#[derive(Clone, Default)]
pub struct Snapshot {
    calls: u64,
    errors: u64,
    total_ns: u64,
    max_ns: u64,
    buckets: Vec<u64>,
}

/// Snapshots of every method that has statistics, by method id and label (0: none).
pub fn snapshot_all() -> Vec<((u32, u32), Snapshot)> {
    let plain = table()
        .iter()
        .enumerate()
        .filter_map(|(id, slot)| Some(((id as u32, 0), slot.get()?.snapshot())));
    let labelled = labelled_table().iter().filter_map(|slot| {
        let key = slot.key.load(Relaxed);
        let stats = slot.stats.get().filter(|_| key != 0)?;
        Some((((key >> 32) as u32, key as u32), stats.snapshot()))
    });
    plain.chain(labelled).collect()
}

impl Snapshot {
    /// The numbers between `earlier` and this snapshot.
    pub fn since(&self, earlier: Option<&Snapshot>) -> CallStats {
        let empty = Snapshot::default();
        let earlier = earlier.unwrap_or(&empty);
        let calls = self.calls.saturating_sub(earlier.calls);
        let counts: Vec<u64> = self
            .buckets
            .iter()
            .enumerate()
            .map(|(i, &n)| n.saturating_sub(earlier.buckets.get(i).copied().unwrap_or(0)))
            .collect();
        let quantile = |q: f64| -> u64 {
            let total: u64 = counts.iter().sum();
            if total == 0 {
                return 0;
            }
            let rank = ((total as f64 * q).ceil() as u64).max(1);
            let mut seen = 0;
            for (i, &n) in counts.iter().enumerate() {
                seen += n;
                if seen >= rank {
                    return bucket_value(i);
                }
            }
            0
        };
        CallStats {
            calls,
            errors: self.errors.saturating_sub(earlier.errors),
            mean_ns: self
                .total_ns
                .saturating_sub(earlier.total_ns)
                .checked_div(calls)
                .unwrap_or(0),
            p50_ns: quantile(0.5).min(self.max_ns.max(1)),
            p99_ns: quantile(0.99).min(self.max_ns.max(1)),
            max_ns: self.max_ns,
            buckets: latency_buckets(&counts),
        }
    }
}

/// The counts of the log-linear buckets regrouped by [`LATENCY_BOUNDS_NS`], each bucket by
/// its middle value (so within ~6% of a bound, a call may count on either side of it).
fn latency_buckets(counts: &[u64]) -> [u64; LATENCY_BOUNDS_NS.len()] {
    let mut grouped = [0; LATENCY_BOUNDS_NS.len()];
    for (i, &n) in counts.iter().enumerate().filter(|(_, &n)| n > 0) {
        let value = bucket_value(i);
        if let Some(slot) = LATENCY_BOUNDS_NS.iter().position(|&bound| value <= bound) {
            grouped[slot] += n;
        }
    }
    grouped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_within_seven_percent() {
        for ns in [
            0u64,
            1,
            7,
            8,
            9,
            100,
            1000,
            12_345,
            1_000_000,
            123_456_789,
            60_000_000_000,
        ] {
            let back = bucket_value(bucket(ns));
            let error = (back as f64 - ns as f64).abs() / (ns.max(1) as f64);
            assert!(error <= 0.07, "{ns} -> bucket {} -> {back}", bucket(ns));
        }
        assert!(bucket(u64::MAX) < BUCKETS);
    }

    #[test]
    fn intervals_subtract_snapshots() {
        let id = (MAX_METHODS - 1) as u32;
        for i in 1..=100u64 {
            record(id, 0, i * 1_000_000, i % 10 == 0);
        }
        let first = snapshot_all()
            .into_iter()
            .find(|(i, _)| *i == (id, 0))
            .unwrap()
            .1;
        let interval = first.since(None);
        assert_eq!((interval.calls, interval.errors), (100, 10));
        assert_eq!(interval.mean_ns, 50_500_000);
        assert!(
            (47_000_000..=54_000_000).contains(&interval.p50_ns),
            "{interval:?}"
        );
        assert!(
            (93_000_000..=100_000_000).contains(&interval.p99_ns),
            "{interval:?}"
        );
        assert_eq!(interval.max_ns, 100_000_000);
        // 1..=100 ms: all within 10 s, about half within 50 ms (the bound is at index 14).
        assert_eq!(interval.buckets.iter().sum::<u64>(), 100);
        let within_50ms: u64 = interval.buckets[..=14].iter().sum();
        assert!((46..=54).contains(&within_50ms), "{interval:?}");
        record(id, 0, 5, false);
        let second = snapshot_all()
            .into_iter()
            .find(|(i, _)| *i == (id, 0))
            .unwrap()
            .1;
        let interval = second.since(Some(&first));
        assert_eq!(
            (interval.calls, interval.max_ns, interval.p50_ns),
            (1, 5, 5)
        );
        assert_eq!((interval.buckets[0], interval.buckets.iter().sum()), (1, 1));
    }

    #[test]
    fn labelled_calls_count_apart_until_the_table_is_full() {
        let id = (MAX_METHODS - 2) as u32;
        record(id, 7, 1_000, false);
        record(id, 7, 3_000, true);
        record(id, 8, 2_000, false);
        let calls = |label| {
            snapshot_all()
                .into_iter()
                .find(|(key, _)| *key == (id, label))
                .map(|(_, s)| s.since(None))
        };
        assert_eq!(calls(7).map(|c| (c.calls, c.errors)), Some((2, 1)));
        assert_eq!(calls(8).map(|c| c.calls), Some(1));
        // Past the table's room, calls count without their label, and are counted.
        let before = unlabelled();
        for label in 1..=(MAX_LABELLED as u32 + 1) {
            record(id - 1, 1000 + label, 1, false);
        }
        assert!(unlabelled() > before);
        let plain = snapshot_all()
            .into_iter()
            .find(|(key, _)| *key == (id - 1, 0));
        assert_eq!(
            plain.map(|(_, s)| s.since(None).calls),
            Some(unlabelled() - before)
        );
    }
}
