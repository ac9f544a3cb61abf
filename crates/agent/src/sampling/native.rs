//! Native and kernel frames: the call chains perf_events recorded with samples (see
//! [`super::perf`]) turned into profile frames by the processing thread, never in a signal
//! handler.
//!
//! - User addresses are looked up in this process's mappings (`/proc/self/maps`, re-read at
//!   most once a second when an address lies in no known mapping). An address in a mapped
//!   file becomes `library!function` from the file's ELF symbol table (`.symtab`, else the
//!   detached debug file under `/usr/lib/debug/.build-id/`, else `.dynsym`), C++ names
//!   demangled without parameters, Rust names without their hash; `library![unknown]` when
//!   no symbol covers it (a static function of a library with `.dynsym` only). Frames of
//!   `libjvm.so` are [`FrameKind::Cpp`], other libraries [`FrameKind::Native`].
//! - The user part of a chain ends at the first address outside a mapped file: that is
//!   JIT-compiled code, the interpreter or a stub, whose frames `AsyncGetCallTrace` reports
//!   as Java frames, or the garbage a frame-pointer walk finds past them.
//! - Kernel addresses are looked up in `/proc/kallsyms` ([`FrameKind::Kernel`]); where it
//!   shows no addresses (`kptr_restrict`, no privilege) they are `[kernel]`.
//!
//! Symbol tables are read when a library's first address shows up and then kept for the
//! life of the process (as async-profiler keeps its own): a library mapped at a path with a
//! given inode does not change, nor do the kernel's symbols, and reading them again for
//! every session would cost time and leave the JVM's heap fragmented. They are compact: a
//! library's table is read in chunks and keeps 16 bytes per function (about 1 MiB for
//! libjvm), names being read from the file only for functions that show up; the kernel's
//! keeps 12 bytes and the name per function (about 2 MiB for 64k functions). Each address
//! is resolved once per session.

use std::collections::HashMap;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use jtap_profile::{Frame, FrameKind};
use object::{Object, ObjectSection, ObjectSegment};

/// Call-chain context markers (`PERF_CONTEXT_*` in `<linux/perf_event.h>`): entries at or
/// above [`CONTEXT_MAX`] are markers, not addresses.
pub(super) const CONTEXT_KERNEL: u64 = -128i64 as u64;
pub(super) const CONTEXT_USER: u64 = -512i64 as u64;
pub(super) const CONTEXT_MAX: u64 = -4095i64 as u64;

/// How often the mappings may be re-read for an address in none of them.
const MAPS_REFRESH: Duration = Duration::from_secs(1);

/// Which part of a call chain an address is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    Kernel,
    User,
    /// Guest or other contexts jtap does not show.
    Other,
}

/// The addresses to look up in a perf_event call chain, leaf first, with their context:
/// the first address of each context is where the thread was, every other one a return
/// address, looked up one byte earlier (in the call instruction).
pub fn lookups(chain: &[u64]) -> impl Iterator<Item = (Context, u64)> + '_ {
    let mut context = Context::Other;
    let mut first_in_context = false;
    chain.iter().filter_map(move |&entry| {
        if entry >= CONTEXT_MAX {
            context = match entry {
                CONTEXT_KERNEL => Context::Kernel,
                CONTEXT_USER => Context::User,
                _ => Context::Other,
            };
            first_in_context = true;
            return None;
        }
        let address = if first_in_context {
            entry
        } else {
            entry.saturating_sub(1)
        };
        first_in_context = false;
        Some((context, address))
    })
}

/// One line of `/proc/self/maps`.
struct Mapping {
    start: u64,
    end: u64,
    offset: u64,
    inode: u64,
    /// The mapped file (or `[vdso]`-style name) of an executable mapping; None for data,
    /// anonymous memory (the code cache) and files that are gone.
    path: Option<String>,
}

/// An executable mapping of a file, for the DWARF unwinder (see [`super::unwind`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeMapping {
    pub start: u64,
    pub end: u64,
    /// File offset mapped at `start`.
    pub offset: u64,
    pub inode: u64,
    pub path: String,
}

/// Function symbols of one ELF file.
struct Library {
    /// The file's name (`libjvm.so`).
    name: String,
    kind: FrameKind,
    /// Loadable segments: (file offset, file size, virtual address).
    segments: Vec<(u64, u64, u64)>,
    /// Sorted by address.
    symbols: Vec<Symbol>,
    /// The file whose string table holds the symbols' names: path, offset and size of the
    /// table. Names are read from it only for functions that show up in samples.
    strings: (PathBuf, u64, u64),
}

struct Symbol {
    address: u64,
    /// Size in bytes (0: unknown, up to the next symbol; saturated at 4 GiB).
    size: u32,
    /// Where the name starts in the string table.
    name: u32,
}

/// Kernel symbols from `/proc/kallsyms` (empty when it shows no addresses).
#[derive(Default)]
struct Kernel {
    /// Function addresses, sorted.
    addresses: Vec<u64>,
    /// Where each function's name starts in `names`.
    name_starts: Vec<u32>,
    /// Names, each ended by a NUL.
    names: Vec<u8>,
}

/// Symbol tables by path and inode of the mapped file (None: unreadable).
type Libraries = HashMap<(String, u64), Option<Arc<Library>>>;

/// Symbol tables of the libraries seen so far.
static LIBRARIES: Mutex<Option<Libraries>> = Mutex::new(None);
/// The kernel's symbols, read once per process.
static KERNEL: OnceLock<Kernel> = OnceLock::new();

/// The symbol table of the library at `path` with `inode`, read once per process.
fn library(path: &str, inode: u64) -> Option<Arc<Library>> {
    let mut libraries = LIBRARIES.lock().unwrap_or_else(|e| e.into_inner());
    let libraries = libraries.get_or_insert_with(HashMap::new);
    libraries
        .entry((path.to_string(), inode))
        .or_insert_with(|| Library::load(Path::new(path), inode).map(Arc::new))
        .clone()
}

/// The name at `start` in a NUL-separated name table.
fn name_at(names: &[u8], start: u32) -> &[u8] {
    let rest = names.get(start as usize..).unwrap_or_default();
    &rest[..rest.iter().position(|&b| b == 0).unwrap_or(rest.len())]
}

/// Resolves call chains for one sampling session; use it on the processing thread.
#[derive(Default)]
pub struct Symbolizer {
    maps: Vec<Mapping>,
    maps_read: Option<Instant>,
    /// This session's view of the tables it used.
    libraries: Libraries,
    /// The kernel's symbols (the process-wide table; a test's own in unit tests).
    kernel: Option<&'static Kernel>,
    /// Lookup address → frame (None: not in a mapped file).
    user_cache: HashMap<u64, Option<Frame>>,
    /// (library, symbol index) → demangled name.
    functions: HashMap<(usize, usize), Option<String>>,
    kernel_cache: HashMap<u64, Frame>,
}

impl Symbolizer {
    /// Reads the tables nearly every profile needs — libjvm's (VM threads run there) and,
    /// unless `user_only`, the kernel's — once per process, before samples arrive, so that
    /// the agent's memory settles with its first profile.
    pub fn preload(&mut self, user_only: bool) {
        self.read_maps();
        let jvm = self.maps.iter().find_map(|m| {
            m.path
                .as_deref()
                .filter(|p| p.ends_with("/libjvm.so"))
                .map(|p| (p.to_string(), m.inode))
        });
        if let Some((path, inode)) = jvm {
            let table = library(&path, inode);
            self.libraries.insert((path, inode), table);
        }
        if !user_only {
            self.kernel = Some(KERNEL.get_or_init(Kernel::load));
        }
    }

    /// The frame of the call that `return_address` returns from, if it lies in a mapped file.
    pub fn return_address_frame(&mut self, return_address: u64) -> Option<Frame> {
        self.user_frame(return_address.saturating_sub(1))
    }

    /// The frame of the user code at `address`, if it lies in a mapped file.
    pub fn user_frame(&mut self, address: u64) -> Option<Frame> {
        if let Some(frame) = self.user_cache.get(&address) {
            return frame.clone();
        }
        let frame = self.resolve_user(address);
        self.user_cache.insert(address, frame.clone());
        frame
    }

    /// Where the executable mapping of a file that holds `address` starts (the mappings
    /// re-read at most once a second for an address in none of them).
    pub fn code_mapping_start(&mut self, address: u64) -> Option<u64> {
        let index = self.mapping_refreshed(address)?;
        let mapping = &self.maps[index];
        mapping
            .path
            .as_deref()
            .is_some_and(|p| p.starts_with('/'))
            .then_some(mapping.start)
    }

    /// The executable mapping of the library called `file_name` (`libjvm.so`), if mapped.
    pub fn library_mapping(&mut self, file_name: &str) -> Option<CodeMapping> {
        if self.maps_read.is_none() {
            self.read_maps();
        }
        let suffix = format!("/{file_name}");
        let address = self
            .maps
            .iter()
            .find(|m| m.path.as_deref().is_some_and(|p| p.ends_with(&suffix)))?
            .start;
        self.code_mapping(address)
    }

    /// The executable mapping of a file that holds `address`, as [`Self::code_mapping_start`]
    /// finds it.
    pub fn code_mapping(&mut self, address: u64) -> Option<CodeMapping> {
        let index = self.mapping_refreshed(address)?;
        let mapping = &self.maps[index];
        Some(CodeMapping {
            start: mapping.start,
            end: mapping.end,
            offset: mapping.offset,
            inode: mapping.inode,
            path: mapping.path.clone().filter(|p| p.starts_with('/'))?,
        })
    }

    fn mapping_refreshed(&mut self, address: u64) -> Option<usize> {
        if let Some(index) = self.mapping(address) {
            return Some(index);
        }
        let stale = self
            .maps_read
            .is_none_or(|read| read.elapsed() >= MAPS_REFRESH);
        if !stale {
            return None;
        }
        self.read_maps();
        self.mapping(address)
    }

    fn resolve_user(&mut self, address: u64) -> Option<Frame> {
        let index = self.mapping_refreshed(address)?;
        let mapping = &self.maps[index];
        let path = mapping.path.clone()?;
        let file_offset = address - mapping.start + mapping.offset;
        if !path.starts_with('/') {
            return Some(Frame::new(path, FrameKind::Native));
        }
        let key = (path, mapping.inode);
        let library = self
            .libraries
            .entry(key.clone())
            .or_insert_with(|| library(&key.0, key.1));
        let path = key.0;
        let Some(library) = library.clone() else {
            return Some(Frame::new(
                format!("{}![unknown]", file_name(&path)),
                FrameKind::Native,
            ));
        };
        let function = library.function(file_offset).and_then(|index| {
            let key = (Arc::as_ptr(&library) as usize, index);
            self.functions
                .entry(key)
                .or_insert_with(|| library.name(index))
                .clone()
        });
        Some(Frame::new(
            format!(
                "{}!{}",
                library.name,
                function.as_deref().unwrap_or("[unknown]")
            ),
            library.kind,
        ))
    }

    fn mapping(&self, address: u64) -> Option<usize> {
        let index = self
            .maps
            .partition_point(|m| m.start <= address)
            .checked_sub(1)?;
        (address < self.maps[index].end).then_some(index)
    }

    fn read_maps(&mut self) {
        self.maps_read = Some(Instant::now());
        let Ok(text) = std::fs::read_to_string("/proc/self/maps") else {
            return;
        };
        let mut maps: Vec<Mapping> = text.lines().filter_map(parse_mapping).collect();
        maps.sort_by_key(|m| m.start);
        self.maps = maps;
    }

    /// The frame of the kernel code at `address`.
    pub fn kernel_frame(&mut self, address: u64) -> Frame {
        if let Some(frame) = self.kernel_cache.get(&address) {
            return frame.clone();
        }
        let kernel = *self
            .kernel
            .get_or_insert_with(|| KERNEL.get_or_init(Kernel::load));
        let frame = Frame::new(
            kernel.function(address).unwrap_or("[kernel]"),
            FrameKind::Kernel,
        );
        self.kernel_cache.insert(address, frame.clone());
        frame
    }
}

/// A `/proc/self/maps` line: `start-end perms offset dev inode [path]`.
fn parse_mapping(line: &str) -> Option<Mapping> {
    let mut fields = line.splitn(6, ' ');
    let (start, end) = fields.next()?.split_once('-')?;
    let perms = fields.next()?;
    let offset = u64::from_str_radix(fields.next()?, 16).ok()?;
    let _device = fields.next()?;
    let inode = fields.next()?.parse().ok()?;
    let path = fields.next().map(str::trim).unwrap_or("");
    let executable = perms.as_bytes().get(2) == Some(&b'x');
    let named = path.starts_with('/') && !path.ends_with(" (deleted)")
        || path.starts_with('[') && path != "[heap]" && !path.starts_with("[stack");
    Some(Mapping {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        offset,
        inode,
        path: (executable && named).then(|| path.to_string()),
    })
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

impl Library {
    /// Reads the function symbols of the ELF file at `path` (which must still be the mapped
    /// file, `inode`); None if it cannot be read.
    fn load(path: &Path, inode: u64) -> Option<Library> {
        let file = std::fs::File::open(path).ok()?;
        if file.metadata().ok()?.ino() != inode {
            return None;
        }
        // Reads only the headers; the symbol tables are read below in chunks.
        let data = object::ReadCache::new(file);
        let elf = object::File::parse(&data).ok()?;
        if !elf.is_little_endian() || !elf.is_64() {
            return None;
        }
        let segments = elf
            .segments()
            .map(|s| (s.file_range().0, s.file_range().1, s.address()))
            .collect();
        let name = file_name(&path.to_string_lossy()).to_string();
        let kind = if name == "libjvm.so" {
            FrameKind::Cpp
        } else {
            FrameKind::Native
        };
        let debug = elf.build_id().ok().flatten().and_then(debug_path);
        let mut candidates = vec![(path.to_path_buf(), ".symtab", ".strtab")];
        candidates.extend(debug.map(|debug| (debug, ".symtab", ".strtab")));
        candidates.push((path.to_path_buf(), ".dynsym", ".dynstr"));
        drop(elf);
        let file = data.into_inner();
        for (source, table, strings) in candidates {
            let symbols = if source == path {
                symbols_of(&file, table, strings)
            } else {
                std::fs::File::open(&source)
                    .ok()
                    .and_then(|f| symbols_of(&f, table, strings))
            };
            if let Some((symbols, strings)) = symbols.filter(|(symbols, _)| !symbols.is_empty()) {
                return Some(Library {
                    name,
                    kind,
                    segments,
                    symbols,
                    strings: (source, strings.0, strings.1),
                });
            }
        }
        Some(Library {
            name,
            kind,
            segments,
            symbols: Vec::new(),
            strings: (path.to_path_buf(), 0, 0),
        })
    }

    /// The index of the symbol of the function at `file_offset`, if one covers it.
    fn function(&self, file_offset: u64) -> Option<usize> {
        let address = self
            .segments
            .iter()
            .find(|(offset, size, _)| (*offset..offset + size).contains(&file_offset))
            .map_or(file_offset, |(offset, _, address)| {
                file_offset - offset + address
            });
        let index = self
            .symbols
            .partition_point(|s| s.address <= address)
            .checked_sub(1)?;
        let symbol = &self.symbols[index];
        // A symbol without a size covers up to the next one.
        (symbol.size == 0 || address < symbol.address + u64::from(symbol.size)).then_some(index)
    }

    /// The demangled name of symbol `index`, read from the string table in the file.
    fn name(&self, index: usize) -> Option<String> {
        let (path, offset, size) = &self.strings;
        let start = u64::from(self.symbols.get(index)?.name);
        let file = std::fs::File::open(path).ok()?;
        let mut name = Vec::new();
        let mut chunk = [0u8; 256];
        while name.len() < MAX_NAME && start + (name.len() as u64) < *size {
            let read = file
                .read_at(&mut chunk, offset + start + name.len() as u64)
                .ok()
                .filter(|&n| n > 0)?;
            match chunk[..read].iter().position(|&b| b == 0) {
                Some(end) => {
                    name.extend_from_slice(&chunk[..end]);
                    return Some(demangle(&name));
                }
                None => name.extend_from_slice(&chunk[..read]),
            }
        }
        None
    }
}

/// Longest symbol name read.
const MAX_NAME: usize = 16 * 1024;

/// Size of one ELF64 symbol (`Elf64_Sym`).
const SYMBOL_SIZE: usize = 24;

/// The defined function symbols of section `table` of an ELF64 little-endian file, read in
/// chunks, and where the string table `strings` lies (file offset, size).
fn symbols_of(
    file: &std::fs::File,
    table: &str,
    strings: &str,
) -> Option<(Vec<Symbol>, (u64, u64))> {
    let data = object::ReadCache::new(file);
    let elf = object::File::parse(&data).ok()?;
    let (table_offset, table_size) = elf.section_by_name(table)?.file_range()?;
    let strings = elf.section_by_name(strings)?.file_range()?;
    let mut symbols = Vec::new();
    let mut chunk = vec![0u8; SYMBOL_SIZE * 2048];
    let mut at = 0;
    while at + SYMBOL_SIZE as u64 <= table_size {
        let want = chunk.len().min((table_size - at) as usize) / SYMBOL_SIZE * SYMBOL_SIZE;
        file.read_exact_at(&mut chunk[..want], table_offset + at)
            .ok()?;
        for raw in chunk[..want].chunks_exact(SYMBOL_SIZE) {
            let field = |range: std::ops::Range<usize>| {
                raw[range]
                    .iter()
                    .rev()
                    .fold(0u64, |v, &b| v << 8 | u64::from(b))
            };
            let (name, info, section, address, size) = (
                field(0..4),
                raw[4],
                field(6..8),
                field(8..16),
                field(16..24),
            );
            // STT_FUNC or STT_GNU_IFUNC, defined (not SHN_UNDEF), with an address.
            if matches!(info & 0xf, 2 | 10) && section != 0 && address != 0 {
                symbols.push(Symbol {
                    address,
                    size: u32::try_from(size).unwrap_or(u32::MAX),
                    name: name as u32,
                });
            }
        }
        at += want as u64;
    }
    symbols.sort_by_key(|s| (s.address, std::cmp::Reverse(s.size)));
    symbols.dedup_by_key(|s| s.address);
    symbols.shrink_to_fit();
    Some((symbols, strings))
}

/// The detached debug file of a build id (`/usr/lib/debug/.build-id/ab/cdef….debug`), if
/// it exists.
fn debug_path(build_id: &[u8]) -> Option<PathBuf> {
    let (first, rest) = build_id.split_first()?;
    let rest: String = rest.iter().map(|b| format!("{b:02x}")).collect();
    Some(PathBuf::from(format!(
        "/usr/lib/debug/.build-id/{first:02x}/{rest}.debug"
    )))
    .filter(|p| p.exists())
}

/// A symbol's readable name: Rust names demangled without their hash, C++ names without
/// parameters and return types (`G1ConcurrentMark::mark_from_roots`), others as they are.
fn demangle(name: &[u8]) -> String {
    if let Some(demangled) = std::str::from_utf8(name)
        .ok()
        .and_then(|n| rustc_demangle::try_demangle(n).ok())
    {
        return format!("{demangled:#}");
    }
    if name.starts_with(b"_Z") {
        let options = cpp_demangle::DemangleOptions::new()
            .no_params()
            .no_return_type();
        if let Some(demangled) = cpp_demangle::Symbol::new(name)
            .ok()
            .and_then(|s| s.demangle_with_options(&options).ok())
        {
            return demangled;
        }
    }
    String::from_utf8_lossy(name).into_owned()
}

impl Kernel {
    fn load() -> Kernel {
        std::fs::File::open("/proc/kallsyms")
            .map(|file| Kernel::parse(std::io::BufReader::new(file)))
            .unwrap_or_default()
    }

    /// Text symbols of kallsyms lines (`ffffffff81000000 T _stext`, module ones with a
    /// `[module]` suffix, which is dropped), read line by line; nothing when every address
    /// reads as zero. The `__pfx_`/`__cfi_` padding before each function (never executed)
    /// is left out, which halves the table on kernels built with call padding.
    fn parse(text: impl std::io::BufRead) -> Kernel {
        let mut kernel = Kernel::default();
        for line in text.lines() {
            let Ok(line) = line else { break };
            let mut fields = line.split_ascii_whitespace();
            let (Some(address), Some(kind), Some(name)) =
                (fields.next(), fields.next(), fields.next())
            else {
                continue;
            };
            if !matches!(kind, "T" | "t" | "W" | "w")
                || name.starts_with("__pfx_")
                || name.starts_with("__cfi_")
            {
                continue;
            }
            let Ok(address) = u64::from_str_radix(address, 16) else {
                continue;
            };
            if address == 0 {
                continue;
            }
            let Ok(start) = u32::try_from(kernel.names.len()) else {
                break;
            };
            kernel.names.extend_from_slice(name.as_bytes());
            kernel.names.push(0);
            kernel.addresses.push(address);
            kernel.name_starts.push(start);
        }
        // kallsyms lists the kernel's own functions by address, modules after them: sort
        // both columns together where needed.
        if !kernel.addresses.is_sorted() {
            let mut order: Vec<usize> = (0..kernel.addresses.len()).collect();
            order.sort_by_key(|&i| kernel.addresses[i]);
            kernel.addresses = order.iter().map(|&i| kernel.addresses[i]).collect();
            kernel.name_starts = order.iter().map(|&i| kernel.name_starts[i]).collect();
        }
        kernel.addresses.shrink_to_fit();
        kernel.name_starts.shrink_to_fit();
        kernel.names.shrink_to_fit();
        kernel
    }

    fn function(&self, address: u64) -> Option<&str> {
        let index = self
            .addresses
            .partition_point(|&a| a <= address)
            .checked_sub(1)?;
        std::str::from_utf8(name_at(&self.names, self.name_starts[index])).ok()
    }
}

/// A symbolizer that knows only the kernel symbols of `/proc/kallsyms`-style `text`.
#[cfg(test)]
pub(super) fn symbolizer_with_kernel(text: &[u8]) -> Symbolizer {
    Symbolizer {
        kernel: Some(Box::leak(Box::new(Kernel::parse(text)))),
        ..Symbolizer::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpp_names_are_demangled_without_parameters() {
        assert_eq!(demangle(b"_ZN10JavaThread3runEv"), "JavaThread::run");
        assert_eq!(demangle(b"deflate"), "deflate");
        assert_eq!(
            demangle(b"_ZN3std2fs14read_to_string17h852c4d69d6ed49ecE"),
            "std::fs::read_to_string"
        );
    }

    #[test]
    fn maps_lines_keep_executable_files_only() {
        let library = parse_mapping(
            "7f0000001000-7f0000002000 r-xp 00001000 08:01 1234   /usr/lib/libz.so.1",
        )
        .unwrap();
        assert_eq!(
            (library.start, library.end, library.offset),
            (0x7f0000001000, 0x7f0000002000, 0x1000)
        );
        assert_eq!(library.path.as_deref(), Some("/usr/lib/libz.so.1"));
        assert!(
            parse_mapping("7f0000001000-7f0000002000 rwxp 00000000 00:00 0 ")
                .unwrap()
                .path
                .is_none()
        );
        assert!(parse_mapping(
            "7f0000001000-7f0000002000 r--p 00000000 08:01 1234 /usr/lib/libz.so.1"
        )
        .unwrap()
        .path
        .is_none());
        assert_eq!(
            parse_mapping("7ffd0000-7ffd2000 r-xp 00000000 00:00 0 [vdso]")
                .unwrap()
                .path
                .as_deref(),
            Some("[vdso]")
        );
    }
}
