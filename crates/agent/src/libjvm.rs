//! Addresses of functions and variables `libjvm.so` does not export: looked up by name in the
//! library's full symbol table (`.symtab`, which HotSpot builds keep unless stripped) and placed at the
//! library's load address in this process.
//!
//! The load address comes from an exported function (`JNI_CreateJavaVM`, found with `dlsym`)
//! minus its value in the file; a second exported function must land where `dlsym` says too,
//! so that a file on disk that is not the mapped library (replaced after start-up) is refused
//! rather than trusted. This is the FFI module of the lookup: its `unsafe` blocks are the
//! `dladdr`/`dlopen`/`dlsym` calls.

use std::ffi::{c_void, CStr, CString};
use std::os::unix::fs::FileExt;

use object::{Object, ObjectSection};

use crate::thread::Vm;

/// The exported function whose address gives the load address.
const ANCHOR: &CStr = c"JNI_CreateJavaVM";
/// A second exported function, to check the file against the mapped library.
const CHECK: &CStr = c"JNI_GetCreatedJavaVMs";

/// Size of one ELF64 symbol (`Elf64_Sym`).
const SYMBOL_SIZE: usize = 24;

/// The address in this process of `name`, a function of the `libjvm.so` that runs `vm`, or
/// why it cannot be found (e.g. a stripped library).
pub fn local_function(vm: Vm, name: &str) -> Result<usize, String> {
    local_symbol(vm, name, SymbolKind::Function)
}

/// The address of `name`, a symbol `libjvm.so` exports (in its dynamic symbol table), e.g.
/// the `gHotSpotVMStructs` tables its serviceability agent reads.
pub fn exported(vm: Vm, name: &CStr) -> Result<usize, String> {
    let library = loaded_library(vm)?;
    // SAFETY: RTLD_NOLOAD only returns a handle to the already-loaded library (raising its
    // reference count, given back right after); dlsym reads its dynamic symbol table.
    let address = unsafe {
        let handle = libc::dlopen(library.path.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD);
        if handle.is_null() {
            return Err(format!("dlopen({}) failed", library.path.to_string_lossy()));
        }
        let address = libc::dlsym(handle, name.as_ptr()) as usize;
        libc::dlclose(handle);
        address
    };
    if address == 0 {
        return Err(format!(
            "{} does not export {}",
            library.path.to_string_lossy(),
            name.to_string_lossy()
        ));
    }
    Ok(address)
}

/// The address in this process of `name` (mangled), a variable of the `libjvm.so` that runs
/// `vm`, or why it cannot be found.
pub fn local_variable(vm: Vm, name: &str) -> Result<usize, String> {
    local_symbol(vm, name, SymbolKind::Variable)
}

/// A C++ `bool` variable of the `libjvm.so` that runs the JVM.
#[derive(Clone, Copy, Debug)]
pub struct Flag(usize);

impl Flag {
    /// The variable named `name` (mangled), or why it cannot be found.
    pub fn find(vm: Vm, name: &str) -> Result<Flag, String> {
        local_symbol(vm, name, SymbolKind::Variable).map(Flag)
    }

    /// Its value now.
    pub fn get(self) -> bool {
        // SAFETY: the address is a variable of the loaded libjvm.so (checked by local_symbol),
        // whose data stays mapped for the life of the process; a one-byte read of a bool the
        // VM may be writing at the same time sees either value.
        unsafe { std::ptr::read_volatile(self.0 as *const u8) != 0 }
    }
}

/// What a symbol names (its ELF `STT_*` type).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum SymbolKind {
    /// `STT_OBJECT`.
    Variable = 1,
    /// `STT_FUNC`.
    Function = 2,
}

fn local_symbol(vm: Vm, name: &str, kind: SymbolKind) -> Result<usize, String> {
    let library = loaded_library(vm)?;
    let path = library.path.to_string_lossy().into_owned();
    let names = [
        ANCHOR.to_str().unwrap_or_default(),
        CHECK.to_str().unwrap_or_default(),
        name,
    ];
    let kinds = [SymbolKind::Function, SymbolKind::Function, kind];
    let values = symbol_values(&path, &names, &kinds)?;
    let [Some(anchor), Some(check), found] = values[..] else {
        return Err(format!("{path} has no symbols for the JNI entry points"));
    };
    let found = found.ok_or_else(|| format!("{path} has no symbol {name}"))?;
    let base = library.anchor.wrapping_sub(anchor);
    if base.wrapping_add(check) != library.check {
        return Err(format!("{path} on disk is not the library this JVM loaded"));
    }
    let address = base.wrapping_add(found);
    if object_base(address) != Some(library.base) {
        return Err(format!("{name} lies outside the loaded {path}"));
    }
    Ok(address)
}

/// The loaded `libjvm.so`: its path, where it is mapped, and where `dlsym` puts the two
/// exported functions.
struct Loaded {
    path: CString,
    base: usize,
    anchor: usize,
    check: usize,
}

fn loaded_library(vm: Vm) -> Result<Loaded, String> {
    // SAFETY: vm.0 is the VM's invocation interface, valid for the life of the process; its
    // GetEnv is a function inside libjvm.so, which is all dladdr is asked about.
    let get_env = unsafe { (**vm.0).GetEnv }.ok_or("the JavaVM has no GetEnv")? as *const c_void;
    // SAFETY: dladdr only fills `info` for an address of a loaded object.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: as above; `info` is a local out-parameter.
    if unsafe { libc::dladdr(get_env, &mut info) } == 0 || info.dli_fname.is_null() {
        return Err("the JVM's library is not a loaded object (dladdr failed)".into());
    }
    // SAFETY: dladdr returned a NUL-terminated path that lives as long as the mapping, which
    // the JVM keeps for the life of the process; it is copied here.
    let path = unsafe { CStr::from_ptr(info.dli_fname) }.to_owned();
    // SAFETY: RTLD_NOLOAD only returns a handle to the already-loaded library (raising its
    // reference count, given back by dlclose below); dlsym reads its dynamic symbol table.
    let (anchor, check) = unsafe {
        let handle = libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD);
        if handle.is_null() {
            return Err(format!("dlopen({}) failed", path.to_string_lossy()));
        }
        let found = (
            libc::dlsym(handle, ANCHOR.as_ptr()) as usize,
            libc::dlsym(handle, CHECK.as_ptr()) as usize,
        );
        libc::dlclose(handle);
        found
    };
    if anchor == 0 || check == 0 {
        return Err(format!(
            "{} does not export the JNI entry points",
            path.to_string_lossy()
        ));
    }
    Ok(Loaded {
        path,
        base: info.dli_fbase as usize,
        anchor,
        check,
    })
}

/// The load address of the object `address` lies in, if any.
fn object_base(address: usize) -> Option<usize> {
    // SAFETY: dladdr only looks the address up in the loaded objects and fills `info`.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: as above; `info` is a local out-parameter.
    (unsafe { libc::dladdr(address as *const c_void, &mut info) } != 0)
        .then_some(info.dli_fbase as usize)
}

/// The values (addresses in the file) of the defined symbols named `names`, each of its kind
/// in `kinds`, in the `.symtab` of the ELF64 little-endian file at `path`, in the order
/// asked; None for a name not found.
fn symbol_values(
    path: &str,
    names: &[&str],
    kinds: &[SymbolKind],
) -> Result<Vec<Option<usize>>, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("opening {path}: {e}"))?;
    let (symbols, strings) = {
        let data = object::ReadCache::new(&file);
        let elf = object::File::parse(&data).map_err(|e| format!("reading {path}: {e}"))?;
        if !elf.is_little_endian() || !elf.is_64() {
            return Err(format!("{path} is not a 64-bit little-endian ELF file"));
        }
        let range = |name: &str| {
            elf.section_by_name(name)
                .and_then(|s| s.file_range())
                .ok_or_else(|| format!("{path} has no {name} (a stripped libjvm.so)"))
        };
        (range(".symtab")?, range(".strtab")?)
    };
    let read = |(offset, size): (u64, u64)| {
        let mut bytes = vec![0; size as usize];
        file.read_exact_at(&mut bytes, offset)
            .map(|()| bytes)
            .map_err(|e| format!("reading {path}: {e}"))
    };
    let (symbols, strings) = (read(symbols)?, read(strings)?);
    Ok(find_symbols(&symbols, &strings, names, kinds))
}

/// Looks `names` (each of its kind in `kinds`) up in an ELF64 little-endian symbol table and
/// its string table.
fn find_symbols(
    symbols: &[u8],
    strings: &[u8],
    names: &[&str],
    kinds: &[SymbolKind],
) -> Vec<Option<usize>> {
    let mut found = vec![None; names.len()];
    for raw in symbols.chunks_exact(SYMBOL_SIZE) {
        let field = |range: std::ops::Range<usize>| {
            raw[range]
                .iter()
                .rev()
                .fold(0u64, |v, &b| v << 8 | u64::from(b))
        };
        let (name, kind, section, value) = (field(0..4), raw[4] & 0xf, field(6..8), field(8..16));
        // Defined (not SHN_UNDEF), with an address.
        if section == 0 || value == 0 {
            continue;
        }
        let rest = strings.get(name as usize..).unwrap_or_default();
        let symbol = &rest[..rest.iter().position(|&b| b == 0).unwrap_or(rest.len())];
        let wanted = |(n, k): (&&str, &SymbolKind)| n.as_bytes() == symbol && *k as u8 == kind;
        if let Some(index) = names.iter().zip(kinds).position(wanted) {
            found[index].get_or_insert(value as usize);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn symbol(name: u32, info: u8, section: u16, value: u64) -> Vec<u8> {
        let mut raw = Vec::new();
        raw.extend_from_slice(&name.to_le_bytes());
        raw.extend_from_slice(&[info, 0]);
        raw.extend_from_slice(&section.to_le_bytes());
        raw.extend_from_slice(&value.to_le_bytes());
        raw.extend_from_slice(&16u64.to_le_bytes());
        raw
    }

    #[test]
    fn finds_defined_symbols_by_whole_name_and_kind() {
        let strings = b"\0JVM_Unsafe_Park\0Other\0";
        // "Unsafe_Park" shares the tail of "JVM_Unsafe_Park" (offset 5).
        let symbols = [
            symbol(1, 0x12, 12, 0x1000),  // JVM_Unsafe_Park, global function
            symbol(5, 0x02, 12, 0x2000),  // Unsafe_Park, local function
            symbol(17, 0x01, 12, 0x3000), // Other, a variable: not a function
            symbol(17, 0x02, 0, 0x4000),  // Other, undefined: skipped
        ]
        .concat();
        let function = SymbolKind::Function;
        assert_eq!(
            find_symbols(
                &symbols,
                strings,
                &["Unsafe_Park", "JVM_Unsafe_Park", "Other", "Park", "Other"],
                &[function, function, function, function, SymbolKind::Variable]
            ),
            [Some(0x2000), Some(0x1000), None, None, Some(0x3000)]
        );
    }

    #[test]
    fn finds_unsafe_park_in_this_machines_libjvm() {
        let path = "/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so";
        if !std::path::Path::new(path).exists() {
            return;
        }
        let names = ["Unsafe_Park", "JNI_CreateJavaVM", "no_such_fn"];
        let values = symbol_values(path, &names, &[SymbolKind::Function; 3]).unwrap();
        assert!(values[0].is_some() && values[1].is_some(), "{values:?}");
        assert_eq!(values[2], None);
    }
}
