//! The global offset table entries through which loaded libraries call the C allocator: found
//! in each object's dynamic relocations (`R_X86_64_JUMP_SLOT` for calls through the PLT,
//! `R_X86_64_GLOB_DAT` for `-fno-plt` code and address-taken functions), and rewritten in
//! place. A table that is read-only after relocation (RELRO) is made writable for the store
//! and read-only again. An aligned 8-byte store is atomic on x86-64, so a thread calling at that
//! moment goes either to the old target or the new one.
//!
//! Hand-written rather than with the `object` crate: the tables are read from the loaded images
//! in memory (already relocated by the dynamic linker), not from files. This is an FFI module:
//! its `unsafe` blocks are `dl_iterate_phdr`, reads of the loaded images and the stores.

use std::ffi::{c_int, c_void, CStr};

/// `DT_*` tags, `PT_*` types and relocation types used.
const DT_NULL: i64 = 0;
const DT_PLTRELSZ: i64 = 2;
const DT_STRTAB: i64 = 5;
const DT_SYMTAB: i64 = 6;
const DT_RELA: i64 = 7;
const DT_RELASZ: i64 = 8;
const DT_JMPREL: i64 = 23;
const PT_DYNAMIC: u32 = 2;
const R_X86_64_GLOB_DAT: u32 = 6;
const R_X86_64_JUMP_SLOT: u32 = 7;
/// Size of an `Elf64_Rela` and an `Elf64_Sym`.
const RELA_SIZE: usize = 24;
const SYM_SIZE: usize = 24;

/// One table entry to rewrite: where, and which of the asked-for functions it calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    /// Address of the entry.
    pub address: usize,
    /// Index of the function in the names asked for.
    pub function: usize,
    /// The object it belongs to.
    pub object: String,
}

/// The entries of every loaded object whose path `wanted` accepts that call one of `names`.
pub fn find(names: &[&str], wanted: &dyn Fn(&str) -> bool) -> Vec<Slot> {
    struct Search<'a> {
        names: &'a [&'a str],
        wanted: &'a dyn Fn(&str) -> bool,
        slots: Vec<Slot>,
    }
    unsafe extern "C" fn visit(
        info: *mut libc::dl_phdr_info,
        _size: usize,
        data: *mut c_void,
    ) -> c_int {
        // SAFETY: dl_iterate_phdr passes a valid info for a loaded object, and `data` is the
        // Search below, alive for the whole iteration.
        let (info, search) = unsafe { (&*info, &mut *(data as *mut Search)) };
        let object = if info.dlpi_name.is_null() {
            String::new()
        } else {
            // SAFETY: a NUL-terminated path owned by the dynamic linker.
            unsafe { CStr::from_ptr(info.dlpi_name) }
                .to_string_lossy()
                .into_owned()
        };
        if object.is_empty() || !(search.wanted)(&object) {
            return 0;
        }
        // SAFETY: the program headers of a loaded object, `dlpi_phnum` of them.
        let headers =
            unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) };
        let base = info.dlpi_addr as usize;
        for header in headers.iter().filter(|h| h.p_type == PT_DYNAMIC) {
            // SAFETY: the object's dynamic section, mapped and relocated.
            unsafe { search_dynamic(base + header.p_vaddr as usize, base, &object, search) };
        }
        0
    }
    /// Adds the entries one dynamic section's relocations name.
    unsafe fn search_dynamic(dynamic: usize, base: usize, object: &str, search: &mut Search) {
        let (mut symtab, mut strtab, mut rela, mut rela_size, mut jmprel, mut jmprel_size) =
            (0, 0, 0, 0, 0, 0);
        // The dynamic linker has made the pointers absolute (x86-64 images keep their
        // dynamic section writable); a value below the base is still relative.
        let absolute = |value: usize| if value < base { value + base } else { value };
        for entry in (0..4096).map(|i| dynamic + i * 16) {
            // SAFETY: (caller) entries of the dynamic section, up to DT_NULL.
            let (tag, value) = unsafe { (*(entry as *const i64), *((entry + 8) as *const u64)) };
            match tag {
                DT_NULL => break,
                DT_SYMTAB => symtab = absolute(value as usize),
                DT_STRTAB => strtab = absolute(value as usize),
                DT_RELA => rela = absolute(value as usize),
                DT_RELASZ => rela_size = value as usize,
                DT_JMPREL => jmprel = absolute(value as usize),
                DT_PLTRELSZ => jmprel_size = value as usize,
                _ => {}
            }
        }
        if symtab == 0 || strtab == 0 {
            return;
        }
        for (table, size) in [(rela, rela_size), (jmprel, jmprel_size)] {
            if table == 0 {
                continue;
            }
            for at in (0..size / RELA_SIZE).map(|i| table + i * RELA_SIZE) {
                // SAFETY: (caller) relocation entries of the table, within its size.
                let (offset, info) = unsafe { (*(at as *const u64), *((at + 8) as *const u64)) };
                let kind = (info & 0xffff_ffff) as u32;
                if kind != R_X86_64_JUMP_SLOT && kind != R_X86_64_GLOB_DAT {
                    continue;
                }
                let symbol = symtab + (info >> 32) as usize * SYM_SIZE;
                // SAFETY: the symbol the relocation names, and its name in the string table.
                let name = unsafe {
                    CStr::from_ptr((strtab + *(symbol as *const u32) as usize) as *const _)
                };
                let name = name.to_bytes();
                if let Some(function) = search.names.iter().position(|n| n.as_bytes() == name) {
                    search.slots.push(Slot {
                        address: base + offset as usize,
                        function,
                        object: object.to_string(),
                    });
                }
            }
        }
    }
    let mut search = Search {
        names,
        wanted,
        slots: Vec::new(),
    };
    // SAFETY: `visit` only reads what dl_iterate_phdr hands it; `search` outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(visit), &mut search as *mut Search as *mut c_void) };
    search.slots
}

/// Stores `value` into the entry at `address` (made writable for the store if it is not),
/// returning what it held.
///
/// # Safety
/// `address` is a global offset table entry [`find`] returned, and `value` a function with
/// the signature of the one the entry calls.
pub unsafe fn exchange(address: usize, value: usize) -> Result<usize, String> {
    let page = 4096;
    let start = address & !(page - 1);
    let entry = address as *mut usize;
    // SAFETY: (caller) a mapped entry of a loaded object's table, readable.
    let previous = unsafe { std::ptr::read_volatile(entry) };
    // SAFETY: the page holds the entry. A read-only page (RELRO) is made read-write for one
    // aligned store and read-only again (readable throughout, so callers going through the
    // table meanwhile are unaffected); a writable one is stored to as it is.
    unsafe {
        let writable = page_writable(start);
        if !writable
            && libc::mprotect(
                start as *mut c_void,
                page,
                libc::PROT_READ | libc::PROT_WRITE,
            ) != 0
        {
            return Err(format!(
                "cannot make the table at {address:#x} writable: {}",
                std::io::Error::last_os_error()
            ));
        }
        std::ptr::write_volatile(entry, value);
        if !writable {
            libc::mprotect(start as *mut c_void, page, libc::PROT_READ);
        }
    }
    Ok(previous)
}

/// Whether the page at `start` is mapped writable, from `/proc/self/maps`.
fn page_writable(start: usize) -> bool {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return false;
    };
    maps.lines().any(|line| {
        let mut fields = line.split_whitespace();
        let (Some(range), Some(permissions)) = (fields.next(), fields.next()) else {
            return false;
        };
        let Some((low, high)) = range.split_once('-') else {
            return false;
        };
        let (Ok(low), Ok(high)) = (
            usize::from_str_radix(low, 16),
            usize::from_str_radix(high, 16),
        ) else {
            return false;
        };
        (low..high).contains(&start) && permissions.as_bytes().get(1) == Some(&b'w')
    })
}
