//! DWARF unwinding of native frames (`cstack=dwarf`), on the processing thread.
//!
//! With each `cpu` sample the kernel copies the thread's user registers and the top of its
//! stack (see [`super::perf`]), and the timer and wall-clock handlers take the same copy
//! themselves (`process_vm_readv`, see [`super::signal`]); here that copy is unwound with the call-frame information
//! (`.eh_frame`) of the libraries the addresses fall in, through `framehop`, into a
//! perf-style call chain that [`Symbolizer::frames`] reads like the kernel's. Unwinding only
//! reads the copy, never the thread's live stack, so a wrong rule ends the chain early but
//! cannot fault. It stops at the first address outside a mapped file (JIT-compiled code,
//! whose frames `AsyncGetCallTrace` reports), as the frame-pointer chain does, and the
//! longer of the two chains wins: the kernel's frame-pointer walk still serves libraries
//! without unwinding tables and samples without a stack copy.
//!
//! A library's tables are read when one of its addresses first shows up, once per process
//! (like its symbols): `.eh_frame` and `.eh_frame_hdr`, about 1.8 MiB for libjvm.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex};

use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, Module, Unwinder};
use object::{Object, ObjectSection, ObjectSegment};

use super::native::{CodeMapping, Symbolizer, CONTEXT_MAX, CONTEXT_USER};

/// Deepest native chain unwound.
const MAX_FRAMES: usize = 128;
/// Libraries a single unwind may still need to read before it gives up (each one restarts
/// the unwind with its tables added).
const MAX_NEW_MODULES: usize = 8;

type Tables = Module<Arc<[u8]>>;
/// An unwinder with its rule cache.
type Unwinding = (UnwinderX86_64<Arc<[u8]>>, CacheX86_64);
/// Path, inode and address of a file's executable mapping.
type MappingKey = (String, u64, u64);

/// Unwinding tables by mapping (None: the file has none or cannot be read), kept for the
/// life of the process.
static MODULES: Mutex<Option<HashMap<MappingKey, Option<Tables>>>> = Mutex::new(None);

/// Unwinds stack copies for one sampling session; allocates nothing until a sample needs
/// unwinding (most leaves are JIT-compiled code, and a continuous profile starts a session
/// every period).
#[derive(Default)]
pub struct DwarfUnwinder {
    /// The unwinder and its rule cache, made at the first unwind.
    state: Option<Box<Unwinding>>,
    /// Mapping starts whose tables the unwinder has (or which have none).
    known: HashSet<u64>,
    /// The last unwind's addresses.
    addresses: Vec<u64>,
}

/// Reads the unwinding tables nearly every profile needs, the JVM's and the C library's,
/// before samples arrive: the first time in a process that is about 2 MiB the agent then
/// keeps, so its memory settles with its first profile.
pub fn preload(symbolizer: &mut Symbolizer) {
    for library in ["libjvm.so", "libc.so.6"] {
        if let Some(mapping) = symbolizer.library_mapping(library) {
            tables_of(&mapping);
        }
    }
}

impl DwarfUnwinder {
    /// The call chain of a sample with a stack copy: the kernel part of `chain` and the user
    /// part DWARF unwinding finds from `regs` (bp, sp, ip) over `stack` (the bytes from sp
    /// up), or `chain` itself when its frame-pointer walk found as many library frames (as
    /// always when the thread was in JIT-compiled code).
    pub fn chain<'c>(
        &mut self,
        symbolizer: &mut Symbolizer,
        chain: &'c [u64],
        regs: [u64; 3],
        stack: &[u8],
    ) -> Cow<'c, [u64]> {
        if symbolizer.code_mapping_start(regs[2]).is_none() {
            return Cow::Borrowed(chain);
        }
        self.unwind(symbolizer, regs, stack);
        let user_start = chain
            .iter()
            .position(|&e| e == CONTEXT_USER)
            .unwrap_or(chain.len());
        let walked = chain[user_start..]
            .iter()
            .filter(|&&e| e < CONTEXT_MAX)
            .take_while(|&&a| symbolizer.code_mapping_start(a).is_some())
            .count();
        if self.addresses.len() <= walked {
            return Cow::Borrowed(chain);
        }
        let mut merged = chain[..user_start].to_vec();
        merged.push(CONTEXT_USER);
        merged.extend_from_slice(&self.addresses);
        Cow::Owned(merged)
    }

    /// Fills `addresses`: the leaf address first, then return addresses, while they lie in
    /// mapped files.
    fn unwind(&mut self, symbolizer: &mut Symbolizer, [bp, sp, ip]: [u64; 3], stack: &[u8]) {
        let mut read_stack = |address: u64| -> Result<u64, ()> {
            let at = usize::try_from(address.checked_sub(sp).ok_or(())?).map_err(|_| ())?;
            let bytes = stack.get(at..at.checked_add(8).ok_or(())?).ok_or(())?;
            Ok(u64::from_le_bytes(bytes.try_into().map_err(|_| ())?))
        };
        for _ in 0..=MAX_NEW_MODULES {
            self.addresses.clear();
            let missing = {
                let (unwinder, cache) = &mut **self
                    .state
                    .get_or_insert_with(|| Box::new((UnwinderX86_64::new(), CacheX86_64::new())));
                let mut frames = unwinder.iter_frames(
                    ip,
                    UnwindRegsX86_64::new(ip, sp, bp),
                    cache,
                    &mut read_stack,
                );
                let mut missing = None;
                while self.addresses.len() < MAX_FRAMES {
                    let Ok(Some(frame)) = frames.next() else {
                        break;
                    };
                    let address = frame.address();
                    let Some(start) = symbolizer.code_mapping_start(address) else {
                        break;
                    };
                    self.addresses.push(address);
                    if !self.known.contains(&start) {
                        // Unwinding past this frame needs its library's tables.
                        missing = symbolizer.code_mapping(address);
                        break;
                    }
                }
                missing
            };
            match missing {
                Some(mapping) => self.add(&mapping),
                None => break,
            }
        }
    }

    /// Gives the unwinder the tables of `mapping` (if it has any).
    fn add(&mut self, mapping: &CodeMapping) {
        if self.known.insert(mapping.start) {
            if let (Some(tables), Some(state)) = (tables_of(mapping), self.state.as_mut()) {
                state.0.add_module(tables);
            }
        }
    }
}

/// The unwinding tables of a mapping, read once per process.
fn tables_of(mapping: &CodeMapping) -> Option<Tables> {
    let mut modules = MODULES.lock().unwrap_or_else(|e| e.into_inner());
    modules
        .get_or_insert_with(HashMap::new)
        .entry((mapping.path.clone(), mapping.inode, mapping.start))
        .or_insert_with(|| tables(mapping))
        .clone()
}

/// Reads the unwinding tables of the file mapped by `mapping` (which must still be the
/// mapped file, same inode).
fn tables(mapping: &CodeMapping) -> Option<Tables> {
    use std::os::unix::fs::MetadataExt;
    let path = Path::new(&mapping.path);
    let file = std::fs::File::open(path).ok()?;
    if file.metadata().ok()?.ino() != mapping.inode {
        return None;
    }
    let data = object::ReadCache::new(file);
    let elf = object::File::parse(&data).ok()?;
    // The segment the mapping starts in says where the file's addresses are in memory.
    let segment = elf.segments().find(|s| {
        let (offset, size) = s.file_range();
        (offset..offset + size).contains(&mapping.offset)
    })?;
    let base_avma = mapping
        .start
        .checked_sub(mapping.offset)?
        .checked_add(segment.file_range().0)?
        .checked_sub(segment.address())?;
    let section = |name: &str| {
        let section = elf.section_by_name(name)?;
        let range = section.address()..section.address() + section.size();
        let bytes: Arc<[u8]> = section.data().ok()?.into();
        Some((range, bytes))
    };
    let eh_frame = section(".eh_frame");
    let eh_frame_hdr = section(".eh_frame_hdr");
    let debug_frame = section(".debug_frame").map(|(_, bytes)| bytes);
    if eh_frame.is_none() && debug_frame.is_none() {
        return None;
    }
    let text = elf.section_by_name(".text");
    let info = ExplicitModuleSectionInfo {
        base_svma: 0,
        text_svma: text.map(|t| t.address()..t.address() + t.size()),
        eh_frame_svma: eh_frame.as_ref().map(|(range, _)| range.clone()),
        eh_frame: eh_frame.map(|(_, bytes)| bytes),
        eh_frame_hdr_svma: eh_frame_hdr.as_ref().map(|(range, _)| range.clone()),
        eh_frame_hdr: eh_frame_hdr.map(|(_, bytes)| bytes),
        debug_frame,
        ..Default::default()
    };
    Some(Module::new(
        mapping.path.clone(),
        mapping.start..mapping.end,
        base_avma,
        info,
    ))
}
