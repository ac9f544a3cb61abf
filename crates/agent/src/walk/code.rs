//! The code cache, where JIT-compiled code, the interpreter and stubs live, read once when the
//! walker is resolved (HotSpot sets it up at start): its heaps, their committed ends as last
//! seen, and the two places in it a walk knows by address, the interpreter and the call
//! stub's return.
//!
//! A heap's committed memory and its segment map only grow (`CodeHeap::shrink_by` is
//! unimplemented), so an end seen once stays valid: what lies below it can be read directly.
//! A pc above every end seen is either outside the code heaps or in memory committed since,
//! and the ends are read again before saying which.

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::fetch::{Fetch, LOWEST};
use super::layout::{BlobKind, CodeStart, Layout};

/// Most code heaps (HotSpot has one, or three with a segmented code cache).
const MAX_HEAPS: usize = 4;

/// A code heap as a walk uses it: its committed memory and its segment map.
#[derive(Clone, Copy)]
pub struct Heap {
    pub low: usize,
    pub high: usize,
    pub segmap: usize,
    pub segmap_high: usize,
    pub shift: u32,
}

impl Heap {
    /// Whether `size` bytes at `address` lie in the committed memory.
    pub fn holds(&self, address: usize, size: usize) -> bool {
        address >= self.low && address.saturating_add(size) <= self.high
    }
}

/// Most blobs [`CodeCache::stubs`] lists (a few hundred are typical).
const MAX_STUB_BLOBS: usize = 4096;
/// Longest blob name read.
const MAX_NAME: usize = 64;

/// A code blob other than an nmethod, as [`CodeCache::stubs`] lists it.
pub struct StubBlob {
    pub name: Vec<u8>,
    pub code: Range<usize>,
    /// Its first instructions' bytes.
    pub first: [u8; 8],
}

/// Appends the stubs of HotSpot's `StubCodeDesc` list at `list` (a static pointer to its
/// head) to `found`. A descriptor is a plain C++ object (no virtual table): the next
/// descriptor, the group's and the stub's names, and the stub's first and past-last byte,
/// each a word (`stubCodeGenerator.hpp`, JDK 11–25).
fn named_stubs(fetch: &Fetch, list: usize, found: &mut Vec<StubBlob>) {
    const NEXT: usize = 0;
    const NAME: usize = 16;
    const BEGIN: usize = 24;
    const END: usize = 32;
    let word = |address: usize| fetch.value::<usize>(address);
    let mut descriptor = word(list).unwrap_or(0);
    while descriptor >= LOWEST && found.len() < MAX_STUB_BLOBS {
        found.extend(stub_from(
            fetch,
            [descriptor + NAME, descriptor + BEGIN, descriptor + END],
        ));
        descriptor = word(descriptor + NEXT).unwrap_or(0);
    }
}

/// The stub whose name, first byte and past-last byte are pointed to by the words at
/// `fields`, if they can be read and make sense.
fn stub_from(fetch: &Fetch, fields: [usize; 3]) -> Option<StubBlob> {
    let word = |address: usize| fetch.value::<usize>(address);
    let [name, start, end] = [word(fields[0])?, word(fields[1])?, word(fields[2])?];
    let name = c_string(fetch, name);
    (!name.is_empty() && start >= LOWEST && start < end).then(|| StubBlob {
        name,
        code: start..end,
        first: word(start).map_or([0; 8], usize::to_ne_bytes),
    })
}

/// The C string at `address`, up to [`MAX_NAME`] bytes (empty if unreadable).
fn c_string(fetch: &Fetch, address: usize) -> Vec<u8> {
    let mut bytes = Vec::new();
    if address < LOWEST {
        return bytes;
    }
    for at in address..address + MAX_NAME {
        match fetch.value::<u8>(at) {
            Some(0) => return bytes,
            Some(byte) => bytes.push(byte),
            None => return Vec::new(),
        }
    }
    bytes
}

/// One code heap: the `CodeHeap*`, what never changes, and the committed ends last seen.
struct Known {
    address: usize,
    low: usize,
    segmap: usize,
    shift: u32,
    high: AtomicUsize,
    segmap_high: AtomicUsize,
}

/// The VM's code cache. Read from signal handlers: relaxed atomics only.
pub struct CodeCache {
    heaps: Vec<Known>,
    /// The interpreter's code (empty if the VM has none).
    pub interpreter: Range<usize>,
    /// Where a Java call from the VM returns to, in the call stub.
    pub call_stub_return: usize,
}

impl CodeCache {
    /// Reads the VM's code heaps (`CodeCache::_heaps`), where the interpreter is and where the
    /// call stub returns.
    pub fn read(layout: &Layout, fetch: &Fetch) -> Result<CodeCache, String> {
        let word = |address: usize| -> Result<usize, String> {
            fetch
                .value::<usize>(address)
                .ok_or_else(|| format!("the code heaps cannot be read at {address:#x}"))
        };
        let array = word(layout.code_heaps)?;
        if array < LOWEST {
            return Err("the code cache has no heaps".into());
        }
        let count = fetch
            .value::<i32>(array + layout.array_len)
            .ok_or("the code heaps' count cannot be read")?
            .clamp(0, MAX_HEAPS as i32) as usize;
        let data = word(array + layout.array_data)?;
        let mut heaps = Vec::with_capacity(count);
        for i in 0..count {
            let address = word(data + i * std::mem::size_of::<usize>())?;
            if address < LOWEST {
                continue;
            }
            let shift = fetch
                .value::<i32>(address + layout.heap_log2_segment_size)
                .and_then(|shift| u32::try_from(shift).ok())
                .filter(|&shift| shift < 32)
                .ok_or("a code heap's segment size makes no sense")?;
            heaps.push(Known {
                address,
                low: word(address + layout.heap_memory + layout.space_low)?,
                segmap: word(address + layout.heap_segmap + layout.space_low)?,
                shift,
                high: AtomicUsize::new(0),
                segmap_high: AtomicUsize::new(0),
            });
        }
        let queue = word(layout.interpreter)?;
        let interpreter = if queue >= LOWEST {
            let start = word(queue + layout.queue_buffer)?;
            let limit = fetch
                .value::<i32>(queue + layout.queue_limit)
                .ok_or("the interpreter's size cannot be read")?;
            start..start.saturating_add(limit.max(0) as usize)
        } else {
            0..0
        };
        let code = CodeCache {
            heaps,
            interpreter,
            call_stub_return: word(layout.call_stub_return)?,
        };
        if !code.refresh(layout, fetch) {
            return Err("the code heaps' committed memory cannot be read".into());
        }
        Ok(code)
    }

    /// What DynamicCodeGenerated tells of the code cache, read without faulting, where
    /// enabling that event is not safe: every code blob that is not an nmethod (the VM's stubs
    /// and adapters, the interpreter's buffer), then the named stubs inside them (the
    /// `StubRoutines`' arraycopy and the like), by name, code and first bytes. Only where a
    /// blob carries its name and code end (JDK 11–21); a blob freed while the heap is read
    /// may give a wrong entry, never a fault.
    pub fn stubs(&self, layout: &Layout, fetch: &Fetch) -> Vec<StubBlob> {
        let mut found = self.blobs(layout, fetch);
        if let Some(list) = layout.stub_descriptors {
            named_stubs(fetch, list, &mut found);
        }
        found
    }

    /// The code blobs of [`CodeCache::stubs`].
    fn blobs(&self, layout: &Layout, fetch: &Fetch) -> Vec<StubBlob> {
        let mut found = Vec::new();
        let (BlobKind::Name(name_at), CodeStart::Address(begin_at), Some(end_at), Some(length_at)) = (
            layout.blob_kind,
            layout.blob_code,
            layout.blob_code_end,
            layout.block_length,
        ) else {
            return found;
        };
        let word = |address: usize| fetch.value::<usize>(address);
        for known in &self.heaps {
            let high = known.high.load(Ordering::Relaxed);
            let mut block = known.low;
            while block < high && found.len() < MAX_STUB_BLOBS {
                let Some(segments) = word(block + length_at).filter(|&n| n > 0) else {
                    break;
                };
                let blob = block + layout.block_size;
                let used = fetch.value::<u8>(block + layout.block_used) == Some(1);
                block = block.saturating_add(segments << known.shift);
                if !used {
                    continue;
                }
                let stub = stub_from(fetch, [blob + name_at, blob + begin_at, blob + end_at]);
                found.extend(
                    stub.filter(|stub| !stub.name.ends_with(b"nmethod") && stub.code.end <= block),
                );
            }
        }
        found
    }

    /// The heap holding `pc`, by the committed ends last seen.
    pub fn holding(&self, pc: usize) -> Option<Heap> {
        self.heaps.iter().find_map(|known| {
            let high = known.high.load(Ordering::Relaxed);
            (known.low..high).contains(&pc).then(|| Heap {
                low: known.low,
                high,
                segmap: known.segmap,
                segmap_high: known.segmap_high.load(Ordering::Relaxed),
                shift: known.shift,
            })
        })
    }

    /// Reads every heap's committed ends again; false if one cannot be read.
    pub fn refresh(&self, layout: &Layout, fetch: &Fetch) -> bool {
        self.heaps.iter().all(|known| {
            let end =
                |space: usize| fetch.value::<usize>(known.address + space + layout.space_high);
            match (end(layout.heap_memory), end(layout.heap_segmap)) {
                (Some(high), Some(segmap_high)) => {
                    known.high.fetch_max(high, Ordering::Relaxed);
                    known.segmap_high.fetch_max(segmap_high, Ordering::Relaxed);
                    true
                }
                _ => false,
            }
        })
    }
}
