//! jmethodIDs of the methods walks met, remembered from one walk to the next.
//!
//! Finding a `Method*`'s jmethodID reads five dependent VM structures (its `ConstMethod`,
//! constant pool, class, and the class's jmethodID array), cold in the CPU's caches by the
//! next sample, and a compiled frame needs it for each method it inlined. A remembered id
//! costs one read instead: that of the jmethodID's slot, which holds its `Method*`. The
//! check makes a stale entry (a class unloaded, its memory reused) or two methods sharing an
//! entry harmless: the id is then found the long way again.
//!
//! Written and read from signal handlers: one word per entry, relaxed atomics, no locks.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Entries of the table (a power of two; 64 KiB).
const ENTRIES: usize = 8192;

/// A direct-mapped table of jmethodIDs by `Method*`.
pub struct MethodIds {
    ids: Box<[AtomicUsize; ENTRIES]>,
}

impl MethodIds {
    pub fn new() -> MethodIds {
        MethodIds {
            ids: Box::new([const { AtomicUsize::new(0) }; ENTRIES]),
        }
    }

    /// The id last remembered in `method`'s entry (0: none): `method`'s, or another's — the
    /// caller checks that its slot holds `method`.
    pub fn remembered(&self, method: usize) -> usize {
        self.entry(method).load(Ordering::Relaxed)
    }

    pub fn remember(&self, method: usize, id: usize) {
        self.entry(method).store(id, Ordering::Relaxed);
    }

    fn entry(&self, method: usize) -> &AtomicUsize {
        // Fibonacci hashing of the address without its alignment bits.
        let hash = (method >> 3).wrapping_mul(0x9e37_79b9_7f4a_7c15_u64 as usize);
        &self.ids[(hash >> (usize::BITS - ENTRIES.trailing_zeros())) & (ENTRIES - 1)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_keeps_the_last_id_remembered_in_it() {
        let ids = MethodIds::new();
        assert_eq!(ids.remembered(0x7f00_1000), 0);
        ids.remember(0x7f00_1000, 0x5000);
        assert_eq!(ids.remembered(0x7f00_1000), 0x5000);
        // Neighbouring methods spread over the table.
        let entries: std::collections::HashSet<_> = (0..64)
            .map(|i| ids.entry(0x7f00_1000 + i * 88) as *const AtomicUsize)
            .collect();
        assert!(entries.len() > 48);
    }
}
