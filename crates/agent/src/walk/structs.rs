//! HotSpot's description of itself: the `gHotSpotVMStructs` (fields: type, name, offset or
//! address), `gHotSpotVMTypes` (sizes) and `gHotSpotVMIntConstants`/`gHotSpotVMLongConstants`
//! tables every HotSpot build exports for its serviceability agent, read once into maps.
//!
//! The tables are static data of `libjvm.so`, complete before the VM starts. Each is an array of
//! C structs ending with an entry whose name is null; the layout of an entry (stride and the
//! offsets of its members) is exported beside it, so nothing here assumes a C++ layout. This is
//! an FFI module: its `unsafe` blocks read those arrays and their C strings.

use std::collections::HashMap;
use std::ffi::{c_char, CStr};

/// Where a field is: at an offset inside its object, or (static) at an address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// Bytes from the start of the object.
    Offset(usize),
    /// Address of a static field.
    Static(usize),
}

/// The tables, by name.
#[derive(Default, Debug)]
pub struct VmStructs {
    fields: HashMap<(String, String), Place>,
    sizes: HashMap<String, usize>,
    constants: HashMap<String, i64>,
}

/// Most entries read from one table (HotSpot 11–25 have about 1,000 fields).
const MAX_ENTRIES: usize = 100_000;

impl VmStructs {
    /// Reads the tables, finding each exported variable with `symbol` (its address).
    ///
    /// # Safety
    /// `symbol` returns addresses inside one loaded `libjvm.so`, whose exported variables of
    /// these names are HotSpot's serviceability tables.
    pub unsafe fn read(symbol: impl Fn(&CStr) -> Result<usize, String>) -> Result<Self, String> {
        // SAFETY (for every `word`/`int`/`string` call below): the addresses are the exported
        // variables `symbol` found, or entries of the arrays they describe, read within the
        // stride and member offsets HotSpot exports for them, up to the null-named end entry.
        // SAFETY: as above.
        let word = |address: usize| unsafe { *(address as *const u64) } as usize;
        // SAFETY: as above.
        let int = |address: usize| unsafe { *(address as *const i32) };
        let string = |address: usize| -> Option<String> {
            let pointer = word(address) as *const c_char;
            (!pointer.is_null()).then(|| {
                // SAFETY: as above: a name HotSpot's tables point at, NUL-terminated.
                unsafe { CStr::from_ptr(pointer) }
                    .to_string_lossy()
                    .into_owned()
            })
        };
        let variable = |name: &CStr| -> Result<usize, String> { symbol(name).map(word) };
        let mut structs = VmStructs::default();

        let array = variable(c"gHotSpotVMStructs")?;
        let stride = variable(c"gHotSpotVMStructEntryArrayStride")?;
        let type_name = variable(c"gHotSpotVMStructEntryTypeNameOffset")?;
        let field_name = variable(c"gHotSpotVMStructEntryFieldNameOffset")?;
        let is_static = variable(c"gHotSpotVMStructEntryIsStaticOffset")?;
        let offset = variable(c"gHotSpotVMStructEntryOffsetOffset")?;
        let address = variable(c"gHotSpotVMStructEntryAddressOffset")?;
        for entry in (0..MAX_ENTRIES).map(|i| array + i * stride) {
            let Some(ty) = string(entry + type_name) else {
                break;
            };
            let Some(field) = string(entry + field_name) else {
                continue;
            };
            let place = if int(entry + is_static) != 0 {
                Place::Static(word(entry + address))
            } else {
                Place::Offset(word(entry + offset))
            };
            structs.fields.insert((ty, field), place);
        }

        let array = variable(c"gHotSpotVMTypes")?;
        let stride = variable(c"gHotSpotVMTypeEntryArrayStride")?;
        let type_name = variable(c"gHotSpotVMTypeEntryTypeNameOffset")?;
        let size = variable(c"gHotSpotVMTypeEntrySizeOffset")?;
        for entry in (0..MAX_ENTRIES).map(|i| array + i * stride) {
            let Some(ty) = string(entry + type_name) else {
                break;
            };
            structs.sizes.insert(ty, word(entry + size));
        }

        for (table, stride, name, value, long) in [
            (
                c"gHotSpotVMIntConstants",
                c"gHotSpotVMIntConstantEntryArrayStride",
                c"gHotSpotVMIntConstantEntryNameOffset",
                c"gHotSpotVMIntConstantEntryValueOffset",
                false,
            ),
            (
                c"gHotSpotVMLongConstants",
                c"gHotSpotVMLongConstantEntryArrayStride",
                c"gHotSpotVMLongConstantEntryNameOffset",
                c"gHotSpotVMLongConstantEntryValueOffset",
                true,
            ),
        ] {
            let array = variable(table)?;
            let stride = variable(stride)?;
            let name = variable(name)?;
            let value = variable(value)?;
            for entry in (0..MAX_ENTRIES).map(|i| array + i * stride) {
                let Some(constant) = string(entry + name) else {
                    break;
                };
                let v = if long {
                    word(entry + value) as i64
                } else {
                    i64::from(int(entry + value))
                };
                structs.constants.insert(constant, v);
            }
        }
        if structs.fields.is_empty() || structs.sizes.is_empty() {
            return Err("the JVM's structure tables are empty".into());
        }
        Ok(structs)
    }

    /// The offset of `field` in the first of `types` that has it (HotSpot renames types
    /// between releases), or which field is missing.
    pub fn offset(&self, types: &[&str], field: &str) -> Result<usize, String> {
        match self.place(types, field)? {
            Place::Offset(offset) => Ok(offset),
            Place::Static(_) => Err(format!("{}::{field} is static", types[0])),
        }
    }

    /// The address of static `field` of `ty`.
    pub fn address(&self, ty: &str, field: &str) -> Result<usize, String> {
        match self.place(&[ty], field)? {
            Place::Static(address) => Ok(address),
            Place::Offset(_) => Err(format!("{ty}::{field} is not static")),
        }
    }

    /// Whether `ty` has `field`.
    pub fn has(&self, ty: &str, field: &str) -> bool {
        self.fields
            .contains_key(&(ty.to_string(), field.to_string()))
    }

    /// The size of `ty` in bytes.
    pub fn size(&self, ty: &str) -> Result<usize, String> {
        self.sizes
            .get(ty)
            .copied()
            .ok_or_else(|| format!("the JVM does not describe type {ty}"))
    }

    /// An integer constant.
    pub fn constant(&self, name: &str) -> Option<i64> {
        self.constants.get(name).copied()
    }

    fn place(&self, types: &[&str], field: &str) -> Result<Place, String> {
        types
            .iter()
            .find_map(|ty| self.fields.get(&(ty.to_string(), field.to_string())))
            .copied()
            .ok_or_else(|| format!("the JVM does not describe {}::{field}", types[0]))
    }
}
