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
//! Symbol tables are read when a library's first address shows up, and each address is
//! resolved once per session.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use jtap_profile::{Frame, FrameKind};
use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};

/// Call-chain context markers (`PERF_CONTEXT_*` in `<linux/perf_event.h>`): entries at or
/// above [`CONTEXT_MAX`] are markers, not addresses.
const CONTEXT_KERNEL: u64 = -128i64 as u64;
const CONTEXT_USER: u64 = -512i64 as u64;
const CONTEXT_MAX: u64 = -4095i64 as u64;

/// How often the mappings may be re-read for an address in none of them.
const MAPS_REFRESH: Duration = Duration::from_secs(1);

/// A chain's frames, each part leaf first.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct NativeFrames {
    /// Native user frames (libraries, libjvm), down to the first address outside them.
    pub user: Vec<Frame>,
    /// Kernel frames.
    pub kernel: Vec<Frame>,
}

impl NativeFrames {
    /// Whether the chain had no frame to show.
    pub fn is_empty(&self) -> bool {
        self.user.is_empty() && self.kernel.is_empty()
    }
}

/// One line of `/proc/self/maps`.
struct Mapping {
    start: u64,
    end: u64,
    offset: u64,
    /// The mapped file (or `[vdso]`-style name) of an executable mapping; None for data,
    /// anonymous memory (the code cache) and files that are gone.
    path: Option<String>,
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
    /// Mangled names, concatenated.
    names: Vec<u8>,
}

struct Symbol {
    address: u64,
    size: u64,
    name_start: u32,
    name_len: u32,
}

/// Kernel symbols from `/proc/kallsyms` (empty when it shows no addresses).
#[derive(Default)]
struct Kernel {
    /// (address, name start, name length), sorted by address.
    symbols: Vec<(u64, u32, u32)>,
    names: Vec<u8>,
}

/// Resolves call chains for one sampling session; use it on the processing thread.
#[derive(Default)]
pub struct Symbolizer {
    maps: Vec<Mapping>,
    maps_read: Option<Instant>,
    libraries: HashMap<String, Option<Library>>,
    kernel: Option<Kernel>,
    /// Lookup address → frame (None: not in a mapped file).
    user_cache: HashMap<u64, Option<Frame>>,
    kernel_cache: HashMap<u64, Frame>,
}

impl Symbolizer {
    /// The frames of a perf_event call chain (leaf first, with context markers); kernel
    /// frames left out when `user_only`.
    pub fn frames(&mut self, chain: &[u64], user_only: bool) -> NativeFrames {
        let mut frames = NativeFrames::default();
        let mut context = 0;
        let mut first_in_context = false;
        let mut user_done = false;
        for &entry in chain {
            if entry >= CONTEXT_MAX {
                context = entry;
                first_in_context = true;
                continue;
            }
            // Return addresses point after their call: look up the call itself.
            let address = if first_in_context { entry } else { entry.saturating_sub(1) };
            first_in_context = false;
            match context {
                CONTEXT_KERNEL if !user_only => {
                    let frame = self.kernel_frame(address);
                    frames.kernel.push(frame);
                }
                CONTEXT_USER if !user_done => match self.user_frame(address) {
                    Some(frame) => frames.user.push(frame),
                    None => user_done = true,
                },
                _ => {}
            }
        }
        frames
    }

    fn user_frame(&mut self, address: u64) -> Option<Frame> {
        if let Some(frame) = self.user_cache.get(&address) {
            return frame.clone();
        }
        let frame = self.resolve_user(address);
        self.user_cache.insert(address, frame.clone());
        frame
    }

    fn resolve_user(&mut self, address: u64) -> Option<Frame> {
        let index = match self.mapping(address) {
            Some(index) => index,
            None => {
                let stale = self.maps_read.is_none_or(|read| read.elapsed() >= MAPS_REFRESH);
                if !stale {
                    return None;
                }
                self.read_maps();
                self.mapping(address)?
            }
        };
        let mapping = &self.maps[index];
        let path = mapping.path.clone()?;
        let file_offset = address - mapping.start + mapping.offset;
        if !path.starts_with('/') {
            return Some(Frame::new(path, FrameKind::Native));
        }
        let library = self.libraries.entry(path.clone()).or_insert_with(|| Library::load(Path::new(&path)));
        let Some(library) = library else {
            return Some(Frame::new(format!("{}![unknown]", file_name(&path)), FrameKind::Native));
        };
        Some(Frame::new(format!("{}!{}", library.name, library.function(file_offset)), library.kind))
    }

    fn mapping(&self, address: u64) -> Option<usize> {
        let index = self.maps.partition_point(|m| m.start <= address).checked_sub(1)?;
        (address < self.maps[index].end).then_some(index)
    }

    fn read_maps(&mut self) {
        self.maps_read = Some(Instant::now());
        let Ok(text) = std::fs::read_to_string("/proc/self/maps") else { return };
        let mut maps: Vec<Mapping> = text.lines().filter_map(parse_mapping).collect();
        maps.sort_by_key(|m| m.start);
        self.maps = maps;
    }

    fn kernel_frame(&mut self, address: u64) -> Frame {
        if let Some(frame) = self.kernel_cache.get(&address) {
            return frame.clone();
        }
        let kernel = self.kernel.get_or_insert_with(Kernel::load);
        let frame = Frame::new(kernel.function(address).unwrap_or("[kernel]"), FrameKind::Kernel);
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
    let path = fields.nth(2).map(str::trim).unwrap_or("");
    let executable = perms.as_bytes().get(2) == Some(&b'x');
    let named = path.starts_with('/') && !path.ends_with(" (deleted)") || path.starts_with('[') && path != "[heap]" && !path.starts_with("[stack");
    Some(Mapping {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        offset,
        path: (executable && named).then(|| path.to_string()),
    })
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

impl Library {
    /// Reads the function symbols of the ELF file at `path`; None if it cannot be read.
    fn load(path: &Path) -> Option<Library> {
        let file = std::fs::File::open(path).ok()?;
        let data = object::ReadCache::new(file);
        let elf = object::File::parse(&data).ok()?;
        let segments = elf.segments().filter_map(|s| Some((s.file_range().0, s.file_range().1, s.address()))).collect();
        let name = file_name(&path.to_string_lossy()).to_string();
        let kind = if name == "libjvm.so" { FrameKind::Cpp } else { FrameKind::Native };
        let mut library = Library { name, kind, segments, symbols: Vec::new(), names: Vec::new() };
        library.add_symbols(elf.symbols());
        if library.symbols.is_empty() {
            if let Some(debug) = elf.build_id().ok().flatten().and_then(debug_file) {
                let debug_data = object::ReadCache::new(debug);
                if let Ok(debug_elf) = object::File::parse(&debug_data) {
                    library.add_symbols(debug_elf.symbols());
                }
            }
        }
        if library.symbols.is_empty() {
            library.add_symbols(elf.dynamic_symbols());
        }
        library.symbols.sort_by_key(|s| (s.address, std::cmp::Reverse(s.size)));
        library.symbols.dedup_by_key(|s| s.address);
        library.symbols.shrink_to_fit();
        library.names.shrink_to_fit();
        Some(library)
    }

    fn add_symbols<'data>(&mut self, symbols: impl Iterator<Item = impl ObjectSymbol<'data>>) {
        for symbol in symbols {
            if symbol.kind() != SymbolKind::Text || !symbol.is_definition() || symbol.address() == 0 {
                continue;
            }
            let Ok(name) = symbol.name_bytes() else { continue };
            let (Ok(name_start), Ok(name_len)) = (u32::try_from(self.names.len()), u32::try_from(name.len())) else { break };
            self.names.extend_from_slice(name);
            self.symbols.push(Symbol { address: symbol.address(), size: symbol.size(), name_start, name_len });
        }
    }

    /// The demangled name of the function at `file_offset`, or `[unknown]`.
    fn function(&self, file_offset: u64) -> String {
        let address = self
            .segments
            .iter()
            .find(|(offset, size, _)| (*offset..offset + size).contains(&file_offset))
            .map_or(file_offset, |(offset, _, address)| file_offset - offset + address);
        let Some(index) = self.symbols.partition_point(|s| s.address <= address).checked_sub(1) else {
            return "[unknown]".into();
        };
        let symbol = &self.symbols[index];
        // A symbol without a size covers up to the next one.
        if symbol.size != 0 && address >= symbol.address + symbol.size {
            return "[unknown]".into();
        }
        let start = symbol.name_start as usize;
        demangle(&self.names[start..start + symbol.name_len as usize])
    }
}

/// The detached debug file of a build id (`/usr/lib/debug/.build-id/ab/cdef….debug`).
fn debug_file(build_id: &[u8]) -> Option<std::fs::File> {
    let (first, rest) = build_id.split_first()?;
    let rest: String = rest.iter().map(|b| format!("{b:02x}")).collect();
    std::fs::File::open(format!("/usr/lib/debug/.build-id/{first:02x}/{rest}.debug")).ok()
}

/// A symbol's readable name: Rust names demangled without their hash, C++ names without
/// parameters and return types (`G1ConcurrentMark::mark_from_roots`), others as they are.
fn demangle(name: &[u8]) -> String {
    if let Some(demangled) = std::str::from_utf8(name).ok().and_then(|n| rustc_demangle::try_demangle(n).ok()) {
        return format!("{demangled:#}");
    }
    if name.starts_with(b"_Z") {
        let options = cpp_demangle::DemangleOptions::new().no_params().no_return_type();
        if let Some(demangled) = cpp_demangle::Symbol::new(name).ok().and_then(|s| s.demangle_with_options(&options).ok()) {
            return demangled;
        }
    }
    String::from_utf8_lossy(name).into_owned()
}

impl Kernel {
    fn load() -> Kernel {
        std::fs::read_to_string("/proc/kallsyms").map(|text| Kernel::parse(&text)).unwrap_or_default()
    }

    /// Text symbols of kallsyms lines (`ffffffff81000000 T _stext`, module ones with a
    /// `[module]` suffix, which is dropped); nothing when every address reads as zero.
    fn parse(text: &str) -> Kernel {
        let mut kernel = Kernel::default();
        for line in text.lines() {
            let mut fields = line.split_ascii_whitespace();
            let (Some(address), Some(kind), Some(name)) = (fields.next(), fields.next(), fields.next()) else { continue };
            if !matches!(kind, "T" | "t" | "W" | "w") {
                continue;
            }
            let Ok(address) = u64::from_str_radix(address, 16) else { continue };
            if address == 0 {
                continue;
            }
            let (Ok(start), Ok(len)) = (u32::try_from(kernel.names.len()), u32::try_from(name.len())) else { break };
            kernel.names.extend_from_slice(name.as_bytes());
            kernel.symbols.push((address, start, len));
        }
        kernel.symbols.sort_unstable_by_key(|s| s.0);
        kernel.symbols.shrink_to_fit();
        kernel.names.shrink_to_fit();
        kernel
    }

    fn function(&self, address: u64) -> Option<&str> {
        let index = self.symbols.partition_point(|s| s.0 <= address).checked_sub(1)?;
        let (_, start, len) = self.symbols[index];
        std::str::from_utf8(&self.names[start as usize..(start + len) as usize]).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chains_become_library_and_kernel_frames() {
        let mut symbolizer = Symbolizer::default();
        symbolizer.kernel = Some(Kernel::parse("ffffffff81000000 T _stext\nffffffff81000100 t do_read\n0000000000001000 D data\n"));
        let getpid = libc::getpid as usize as u64;
        let heap = Box::new(0u64);
        let chain = [CONTEXT_KERNEL, 0xffffffff81000180, 0xffffffff81000010, CONTEXT_USER, getpid, &*heap as *const u64 as u64, getpid];
        let frames = symbolizer.frames(&chain, false);
        assert_eq!(frames.kernel, [Frame::new("do_read", FrameKind::Kernel), Frame::new("_stext", FrameKind::Kernel)]);
        assert_eq!(frames.user.len(), 1, "the user part ends at the heap address: {frames:?}");
        assert!(frames.user[0].name.starts_with("libc.so.6!") && frames.user[0].name.contains("getpid"), "{frames:?}");
        assert_eq!(frames.user[0].kind, FrameKind::Native);
        let user_only = symbolizer.frames(&chain, true);
        assert!(user_only.kernel.is_empty() && user_only.user == frames.user);
    }

    #[test]
    fn kernel_without_addresses_gives_kernel_frames() {
        let mut symbolizer = Symbolizer { kernel: Some(Kernel::parse("0000000000000000 T _stext\n")), ..Symbolizer::default() };
        let frames = symbolizer.frames(&[CONTEXT_KERNEL, 0xffffffff81000180], false);
        assert_eq!(frames.kernel, [Frame::new("[kernel]", FrameKind::Kernel)]);
    }

    #[test]
    fn cpp_names_are_demangled_without_parameters() {
        assert_eq!(demangle(b"_ZN10JavaThread3runEv"), "JavaThread::run");
        assert_eq!(demangle(b"deflate"), "deflate");
        assert_eq!(demangle(b"_ZN3std2fs14read_to_string17h852c4d69d6ed49ecE"), "std::fs::read_to_string");
    }

    #[test]
    fn maps_lines_keep_executable_files_only() {
        let library = parse_mapping("7f0000001000-7f0000002000 r-xp 00001000 08:01 1234   /usr/lib/libz.so.1").unwrap();
        assert_eq!((library.start, library.end, library.offset), (0x7f0000001000, 0x7f0000002000, 0x1000));
        assert_eq!(library.path.as_deref(), Some("/usr/lib/libz.so.1"));
        assert!(parse_mapping("7f0000001000-7f0000002000 rwxp 00000000 00:00 0 ").unwrap().path.is_none());
        assert!(parse_mapping("7f0000001000-7f0000002000 r--p 00000000 08:01 1234 /usr/lib/libz.so.1").unwrap().path.is_none());
        assert_eq!(parse_mapping("7ffd0000-7ffd2000 r-xp 00000000 00:00 0 [vdso]").unwrap().path.as_deref(), Some("[vdso]"));
    }
}
