//! What walks learned of the methods they met, remembered from one walk to the next.
//!
//! Finding a `Method*`'s jmethodID reads five dependent VM structures (its `ConstMethod`,
//! constant pool, class, and the class's jmethodID array), cold in the CPU's caches by the
//! next sample, and an interpreted frame's bytecode index needs two more (where the method's
//! bytecodes start, and how many there are). A remembered method costs one read instead:
//! that of its jmethodID's slot, which holds its `Method*`. HotSpot clears the slot when the
//! method is freed and repoints it when a redefinition replaces the method, so the check
//! makes a stale entry (a class unloaded, its memory reused) harmless: the method is then
//! looked up the long way again.
//!
//! Written and read from signal handlers: each entry is a sequence lock whose writer takes it
//! with a compare-and-swap or gives up, and whose reader retries never, so neither waits.

use std::sync::atomic::{fence, AtomicUsize, Ordering};

/// Entries of the table (a power of two; 320 KiB).
const ENTRIES: usize = 8192;

/// What a walk learned of one method.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Known {
    /// Its jmethodID.
    pub id: usize,
    /// Where its bytecodes start.
    pub code: usize,
    /// How many bytes of bytecode it has.
    pub code_size: u16,
    /// Whether it is native.
    pub native: bool,
}

/// A direct-mapped table of [`Known`] methods by `Method*`.
pub struct Methods {
    entries: Box<[Entry; ENTRIES]>,
}

/// One method's entry: `version` is odd while a writer fills the rest.
struct Entry {
    version: AtomicUsize,
    method: AtomicUsize,
    id: AtomicUsize,
    code: AtomicUsize,
    /// The code size, and the native flag in bit 16.
    size_and_native: AtomicUsize,
}

const NATIVE_BIT: usize = 1 << 16;

impl Methods {
    pub fn new() -> Methods {
        Methods {
            entries: Box::new(
                [const {
                    Entry {
                        version: AtomicUsize::new(0),
                        method: AtomicUsize::new(0),
                        id: AtomicUsize::new(0),
                        code: AtomicUsize::new(0),
                        size_and_native: AtomicUsize::new(0),
                    }
                }; ENTRIES],
            ),
        }
    }

    /// What was last remembered of `method`, if its entry holds it and no writer is filling
    /// it; the caller checks that the id's slot still holds `method`.
    pub fn recall(&self, method: usize) -> Option<Known> {
        let entry = self.entry(method);
        let version = entry.version.load(Ordering::Acquire);
        if version % 2 == 1 || entry.method.load(Ordering::Relaxed) != method {
            return None;
        }
        let id = entry.id.load(Ordering::Relaxed);
        let code = entry.code.load(Ordering::Relaxed);
        let size_and_native = entry.size_and_native.load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        if entry.version.load(Ordering::Relaxed) != version || id == 0 {
            return None;
        }
        Some(Known {
            id,
            code,
            code_size: size_and_native as u16,
            native: size_and_native & NATIVE_BIT != 0,
        })
    }

    /// Remembers `known` for `method`, unless another thread is writing its entry.
    pub fn remember(&self, method: usize, known: Known) {
        let entry = self.entry(method);
        let version = entry.version.load(Ordering::Relaxed);
        if version % 2 == 1
            || entry
                .version
                .compare_exchange(version, version + 1, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        fence(Ordering::Release);
        entry.method.store(method, Ordering::Relaxed);
        entry.id.store(known.id, Ordering::Relaxed);
        entry.code.store(known.code, Ordering::Relaxed);
        let native = if known.native { NATIVE_BIT } else { 0 };
        entry
            .size_and_native
            .store(usize::from(known.code_size) | native, Ordering::Relaxed);
        entry.version.store(version + 2, Ordering::Release);
    }

    fn entry(&self, method: usize) -> &Entry {
        // Fibonacci hashing of the address without its alignment bits.
        let hash = (method >> 3).wrapping_mul(0x9e37_79b9_7f4a_7c15_u64 as usize);
        &self.entries[(hash >> (usize::BITS - ENTRIES.trailing_zeros())) & (ENTRIES - 1)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(id: usize) -> Known {
        Known {
            id,
            code: 0x7f00_2000,
            code_size: 17,
            native: false,
        }
    }

    #[test]
    fn an_entry_keeps_the_method_last_remembered_in_it() {
        let methods = Methods::new();
        assert_eq!(methods.recall(0x7f00_1000), None);
        methods.remember(0x7f00_1000, known(0x5000));
        assert_eq!(methods.recall(0x7f00_1000), Some(known(0x5000)));
        let native = Known {
            native: true,
            code_size: u16::MAX,
            ..known(0x6000)
        };
        methods.remember(0x7f00_1000, native);
        assert_eq!(methods.recall(0x7f00_1000), Some(native));
        // Neighbouring methods spread over the table.
        let entries: std::collections::HashSet<_> = (0..64)
            .map(|i| methods.entry(0x7f00_1000 + i * 88) as *const Entry)
            .collect();
        assert!(entries.len() > 48);
    }

    #[test]
    fn another_method_in_the_entry_is_not_recalled() {
        let methods = Methods::new();
        let method = 0x7f00_1000;
        let other = (0..1 << 20)
            .map(|i| method + 8 * i)
            .find(|&m| m != method && std::ptr::eq(methods.entry(m), methods.entry(method)))
            .expect("two methods share an entry");
        methods.remember(method, known(0x5000));
        methods.remember(other, known(0x7000));
        assert_eq!(methods.recall(method), None);
        assert_eq!(methods.recall(other), Some(known(0x7000)));
    }

    #[test]
    fn an_entry_being_written_is_neither_read_nor_written() {
        let methods = Methods::new();
        methods.remember(0x7f00_1000, known(0x5000));
        let entry = methods.entry(0x7f00_1000);
        entry.version.fetch_add(1, Ordering::Relaxed);
        assert_eq!(methods.recall(0x7f00_1000), None);
        methods.remember(0x7f00_1000, known(0x6000));
        entry.version.fetch_add(1, Ordering::Relaxed);
        assert_eq!(methods.recall(0x7f00_1000), Some(known(0x5000)));
    }
}
