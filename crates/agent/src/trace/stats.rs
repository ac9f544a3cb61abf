//! Per-method call statistics for `jtap monitor`: calls, errors, total and largest duration,
//! and a log-linear histogram (8 buckets per power of two, so quantiles are within ~6%),
//! all atomics, so probes on many threads update them without locks. The reporting thread
//! takes snapshots and reports the difference between two.

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

/// Counts one call of method `id`.
pub fn record(id: u32, ns: u64, threw: bool) {
    let Some(slot) = table().get(id as usize) else {
        return;
    };
    let stats = slot.get_or_init(MethodStats::new);
    stats.calls.fetch_add(1, Relaxed);
    if threw {
        stats.errors.fetch_add(1, Relaxed);
    }
    stats.total_ns.fetch_add(ns, Relaxed);
    stats.max_ns.fetch_max(ns, Relaxed);
    if let Some(b) = stats.buckets.get(bucket(ns)) {
        b.fetch_add(1, Relaxed);
    }
}

/// Forgets every count (at the start of a session, before probes act).
pub fn reset() {
    for slot in table().iter() {
        if let Some(stats) = slot.get() {
            stats.calls.store(0, Relaxed);
            stats.errors.store(0, Relaxed);
            stats.total_ns.store(0, Relaxed);
            stats.max_ns.store(0, Relaxed);
            for b in stats.buckets.iter() {
                b.store(0, Relaxed);
            }
        }
    }
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

/// Snapshots of every method that has statistics, by method id.
pub fn snapshot_all() -> Vec<(u32, Snapshot)> {
    table()
        .iter()
        .enumerate()
        .filter_map(|(id, slot)| Some((id as u32, slot.get()?.snapshot())))
        .collect()
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
            record(id, i * 1_000_000, i % 10 == 0);
        }
        let first = snapshot_all()
            .into_iter()
            .find(|(i, _)| *i == id)
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
        record(id, 5, false);
        let second = snapshot_all()
            .into_iter()
            .find(|(i, _)| *i == id)
            .unwrap()
            .1;
        let interval = second.since(Some(&first));
        assert_eq!(
            (interval.calls, interval.max_ns, interval.p50_ns),
            (1, 5, 5)
        );
        assert_eq!((interval.buckets[0], interval.buckets.iter().sum()), (1, 1));
    }
}
