//! The constant pool: parsed entries over the original bytes, plus appended entries.
//!
//! The serialized pool is kept as one byte buffer (the original bytes first, appended entries
//! after them), so writing an unedited pool reproduces the input exactly and appending never
//! renumbers an existing entry.

use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::bytes::{Reader, WriteBe};
use crate::error::{Error, Result};

/// One constant pool entry, with references as pool indices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Constant {
    /// Index 0 and the slot after a Long or Double.
    Unusable,
    /// `CONSTANT_Utf8`: modified UTF-8 bytes at `start..start+len` of the pool buffer.
    Utf8 {
        /// Offset of the bytes in the pool buffer.
        start: u32,
        /// Length in bytes.
        len: u16,
    },
    /// `CONSTANT_Integer`.
    Integer(i32),
    /// `CONSTANT_Float` (raw bits).
    Float(u32),
    /// `CONSTANT_Long`.
    Long(i64),
    /// `CONSTANT_Double` (raw bits).
    Double(u64),
    /// `CONSTANT_Class` (name index).
    Class(u16),
    /// `CONSTANT_String` (Utf8 index).
    String(u16),
    /// `CONSTANT_Fieldref` (class, name-and-type).
    Fieldref(u16, u16),
    /// `CONSTANT_Methodref` (class, name-and-type).
    Methodref(u16, u16),
    /// `CONSTANT_InterfaceMethodref` (class, name-and-type).
    InterfaceMethodref(u16, u16),
    /// `CONSTANT_NameAndType` (name, descriptor).
    NameAndType(u16, u16),
    /// `CONSTANT_MethodHandle` (kind, reference).
    MethodHandle(u8, u16),
    /// `CONSTANT_MethodType` (descriptor).
    MethodType(u16),
    /// `CONSTANT_Dynamic` (bootstrap method attr index, name-and-type).
    Dynamic(u16, u16),
    /// `CONSTANT_InvokeDynamic` (bootstrap method attr index, name-and-type).
    InvokeDynamic(u16, u16),
    /// `CONSTANT_Module` (name).
    Module(u16),
    /// `CONSTANT_Package` (name).
    Package(u16),
}

/// A small, fast, non-cryptographic hasher (FNV-1a over 64-bit words) for pool lookups.
#[derive(Default, Clone, Copy)]
struct FastHasher(u64);

impl Hasher for FastHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut h = self.0 ^ 0xcbf2_9ce4_8422_2325;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let w = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
            h = (h ^ w).wrapping_mul(0x0100_0000_01b3).rotate_left(29);
        }
        for &b in chunks.remainder() {
            h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}

type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;

fn hash_bytes(b: &[u8]) -> u64 {
    let mut h = FastHasher::default();
    h.write(b);
    h.write_usize(b.len());
    h.finish()
}

/// Index of existing entries, built on the first append.
#[derive(Clone, Debug, Default)]
struct Lookup {
    /// Utf8 entries by content hash (first entry with that hash).
    utf8: FastMap<u64, u16>,
    /// Utf8 entries whose hash collides with a different string.
    utf8_collisions: Vec<u16>,
    /// Every other entry by value.
    other: FastMap<Constant, u16>,
}

/// A member reference resolved to names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemberRef<'a> {
    /// Owner class internal name (or array descriptor).
    pub owner: &'a [u8],
    /// Member name.
    pub name: &'a [u8],
    /// Member descriptor.
    pub descriptor: &'a [u8],
}

/// The constant pool of a class.
#[derive(Clone, Debug)]
pub struct ConstantPool {
    bytes: Vec<u8>,
    entries: Vec<Constant>,
    lookup: Option<Lookup>,
}

impl ConstantPool {
    /// Parses the pool (count included) at the reader's position.
    pub(crate) fn parse(r: &mut Reader<'_>) -> Result<Self> {
        let count = r.u2("constant_pool_count")?;
        let start = r.pos();
        let mut entries = Vec::with_capacity(count as usize);
        entries.push(Constant::Unusable);
        let mut index: u16 = 1;
        while index < count {
            let tag = r.u1("constant tag")?;
            let c = match tag {
                1 => {
                    let len = r.u2("utf8 length")?;
                    let pos = r.pos();
                    r.bytes(len as usize, "utf8 bytes")?;
                    Constant::Utf8 {
                        start: (pos - start) as u32,
                        len,
                    }
                }
                3 => Constant::Integer(r.u4("integer")? as i32),
                4 => Constant::Float(r.u4("float")?),
                5 => Constant::Long(((r.u4("long")? as u64) << 32 | r.u4("long")? as u64) as i64),
                6 => Constant::Double((r.u4("double")? as u64) << 32 | r.u4("double")? as u64),
                7 => Constant::Class(r.u2("class")?),
                8 => Constant::String(r.u2("string")?),
                9 => Constant::Fieldref(r.u2("fieldref")?, r.u2("fieldref")?),
                10 => Constant::Methodref(r.u2("methodref")?, r.u2("methodref")?),
                11 => Constant::InterfaceMethodref(r.u2("imethodref")?, r.u2("imethodref")?),
                12 => Constant::NameAndType(r.u2("nat")?, r.u2("nat")?),
                15 => Constant::MethodHandle(r.u1("methodhandle")?, r.u2("methodhandle")?),
                16 => Constant::MethodType(r.u2("methodtype")?),
                17 => Constant::Dynamic(r.u2("dynamic")?, r.u2("dynamic")?),
                18 => Constant::InvokeDynamic(r.u2("indy")?, r.u2("indy")?),
                19 => Constant::Module(r.u2("module")?),
                20 => Constant::Package(r.u2("package")?),
                _ => return Err(Error::BadConstantTag { tag, index }),
            };
            entries.push(c);
            index += 1;
            if matches!(c, Constant::Long(_) | Constant::Double(_)) {
                if index >= count {
                    return Err(Error::BadConstant {
                        index: index - 1,
                        expected: "two-slot constant",
                    });
                }
                entries.push(Constant::Unusable);
                index += 1;
            }
        }
        let bytes = r.slice_at(start, r.pos() - start)?.to_vec();
        Ok(ConstantPool {
            bytes,
            entries,
            lookup: None,
        })
    }

    /// A pool from its `constant_pool_count` and its entries' bytes, as JVMTI's
    /// `GetConstantPool` gives them.
    pub fn from_entries(count: u16, entries: &[u8]) -> Result<Self> {
        let mut data = count.to_be_bytes().to_vec();
        data.extend_from_slice(entries);
        let mut r = Reader::new(&data);
        let pool = ConstantPool::parse(&mut r)?;
        match r.remaining() {
            0 => Ok(pool),
            n => Err(Error::TrailingBytes(n)),
        }
    }

    /// Number of slots (the `constant_pool_count` written to the class file).
    pub fn count(&self) -> u16 {
        self.entries.len() as u16
    }

    /// Appends the serialized pool (count included).
    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        out.u2(self.count());
        out.extend_from_slice(&self.bytes);
    }

    /// The entry at `index`.
    pub fn get(&self, index: u16) -> Result<Constant> {
        match self.entries.get(index as usize) {
            Some(c) if *c != Constant::Unusable => Ok(*c),
            _ => Err(Error::BadConstant {
                index,
                expected: "constant",
            }),
        }
    }

    /// The raw (modified UTF-8) bytes of a Utf8 entry.
    pub fn utf8(&self, index: u16) -> Result<&[u8]> {
        match self.entries.get(index as usize) {
            Some(Constant::Utf8 { start, len }) => {
                let s = *start as usize;
                self.bytes
                    .get(s..s + *len as usize)
                    .ok_or(Error::BadConstant {
                        index,
                        expected: "Utf8",
                    })
            }
            _ => Err(Error::BadConstant {
                index,
                expected: "Utf8",
            }),
        }
    }

    /// A Utf8 entry as text (modified UTF-8 decoded; invalid sequences replaced).
    pub fn utf8_str(&self, index: u16) -> Result<Cow<'_, str>> {
        Ok(decode_modified_utf8(self.utf8(index)?))
    }

    /// The internal name of a Class entry.
    pub fn class_name(&self, index: u16) -> Result<&[u8]> {
        match self.get(index) {
            Ok(Constant::Class(n)) => self.utf8(n),
            _ => Err(Error::BadConstant {
                index,
                expected: "Class",
            }),
        }
    }

    /// Name and descriptor of a NameAndType entry.
    pub fn name_and_type(&self, index: u16) -> Result<(&[u8], &[u8])> {
        match self.get(index) {
            Ok(Constant::NameAndType(n, d)) => Ok((self.utf8(n)?, self.utf8(d)?)),
            _ => Err(Error::BadConstant {
                index,
                expected: "NameAndType",
            }),
        }
    }

    /// A Fieldref, Methodref or InterfaceMethodref resolved to names.
    pub fn member_ref(&self, index: u16) -> Result<MemberRef<'_>> {
        match self.get(index) {
            Ok(
                Constant::Fieldref(c, nt)
                | Constant::Methodref(c, nt)
                | Constant::InterfaceMethodref(c, nt),
            ) => {
                let (name, descriptor) = self.name_and_type(nt)?;
                Ok(MemberRef {
                    owner: self.class_name(c)?,
                    name,
                    descriptor,
                })
            }
            _ => Err(Error::BadConstant {
                index,
                expected: "member reference",
            }),
        }
    }

    fn utf8_at(&self, start: u32, len: u16) -> &[u8] {
        &self.bytes[start as usize..start as usize + len as usize]
    }

    fn build_lookup(&self) -> Lookup {
        let mut l = Lookup::default();
        l.utf8.reserve(self.entries.len() / 2);
        l.other.reserve(self.entries.len() / 2);
        for (i, c) in self.entries.iter().enumerate() {
            match *c {
                Constant::Unusable => {}
                Constant::Utf8 { start, len } => self.index_utf8(&mut l, i as u16, start, len),
                other => {
                    l.other.entry(other).or_insert(i as u16);
                }
            }
        }
        l
    }

    fn index_utf8(&self, l: &mut Lookup, i: u16, start: u32, len: u16) {
        let text = self.utf8_at(start, len);
        match l.utf8.get(&hash_bytes(text)) {
            None => {
                l.utf8.insert(hash_bytes(text), i);
            }
            Some(&j) if self.utf8(j).is_ok_and(|t| t == text) => {}
            Some(_) => l.utf8_collisions.push(i),
        }
    }

    fn find_utf8(&mut self, text: &[u8]) -> Option<u16> {
        if self.lookup.is_none() {
            self.lookup = Some(self.build_lookup());
        }
        let l = self.lookup.as_ref()?;
        if let Some(&i) = l.utf8.get(&hash_bytes(text)) {
            if self.utf8(i).is_ok_and(|t| t == text) {
                return Some(i);
            }
        }
        l.utf8_collisions
            .iter()
            .copied()
            .find(|&i| self.utf8(i).is_ok_and(|t| t == text))
    }

    fn find_other(&mut self, c: Constant) -> Option<u16> {
        if self.lookup.is_none() {
            self.lookup = Some(self.build_lookup());
        }
        self.lookup.as_ref()?.other.get(&c).copied()
    }

    /// Appends a serialized entry (no lookup).
    fn append(&mut self, c: Constant, body: &[u8]) -> Result<u16> {
        let slots = if matches!(c, Constant::Long(_) | Constant::Double(_)) {
            2
        } else {
            1
        };
        let index = self.entries.len();
        if index + slots > 0xFFFF {
            return Err(Error::ConstantPoolFull);
        }
        let start = self.bytes.len();
        self.bytes.extend_from_slice(body);
        let c = match c {
            Constant::Utf8 { len, .. } => Constant::Utf8 {
                start: (start + 3) as u32,
                len,
            },
            other => other,
        };
        self.entries.push(c);
        if slots == 2 {
            self.entries.push(Constant::Unusable);
        }
        let mut l = self.lookup.take().unwrap_or_default();
        match c {
            Constant::Utf8 { start, len } => self.index_utf8(&mut l, index as u16, start, len),
            other => {
                l.other.insert(other, index as u16);
            }
        }
        self.lookup = Some(l);
        Ok(index as u16)
    }

    /// Rewrites Utf8 entries in place: `f` gets each entry's bytes and returns the replacement,
    /// or `None` to keep it. Indices do not change; the pool is re-serialized.
    pub fn map_utf8(&mut self, mut f: impl FnMut(&[u8]) -> Option<Vec<u8>>) -> Result<()> {
        let mut bytes = Vec::with_capacity(self.bytes.len() + 256);
        for i in 0..self.entries.len() {
            let c = self.entries[i];
            match c {
                Constant::Unusable => {}
                Constant::Utf8 { start, len } => {
                    let old = &self.bytes[start as usize..start as usize + len as usize];
                    let new = f(old).unwrap_or_else(|| old.to_vec());
                    let len =
                        u16::try_from(new.len()).map_err(|_| Error::TooLarge("Utf8 constant"))?;
                    bytes.u1(1);
                    bytes.u2(len);
                    self.entries[i] = Constant::Utf8 {
                        start: bytes.len() as u32,
                        len,
                    };
                    bytes.extend_from_slice(&new);
                }
                other => bytes.extend_from_slice(&serialize(other)?),
            }
        }
        self.bytes = bytes;
        self.lookup = None;
        Ok(())
    }

    /// Finds or appends a Utf8 entry for `text`.
    pub fn add_utf8(&mut self, text: &str) -> Result<u16> {
        if text.bytes().all(|b| b != 0 && b < 0x80) {
            return self.add_utf8_bytes(text.as_bytes());
        }
        self.add_utf8_bytes(&encode_modified_utf8(text))
    }

    /// Finds or appends a Utf8 entry with these modified UTF-8 bytes.
    pub fn add_utf8_bytes(&mut self, bytes: &[u8]) -> Result<u16> {
        if let Some(i) = self.find_utf8(bytes) {
            return Ok(i);
        }
        let len = u16::try_from(bytes.len()).map_err(|_| Error::TooLarge("Utf8 constant"))?;
        let mut body = Vec::with_capacity(bytes.len() + 3);
        body.u1(1);
        body.u2(len);
        body.extend_from_slice(bytes);
        self.append(Constant::Utf8 { start: 0, len }, &body)
    }

    fn add_simple(&mut self, c: Constant) -> Result<u16> {
        if let Some(i) = self.find_other(c) {
            return Ok(i);
        }
        let body = serialize(c)?;
        self.append(c, &body)
    }

    /// Finds or appends a Class entry for an internal name (`java/lang/String`, `[I`).
    pub fn add_class(&mut self, name: &str) -> Result<u16> {
        let n = self.add_utf8(name)?;
        self.add_simple(Constant::Class(n))
    }

    /// Finds or appends a Class entry for an internal name given as modified UTF-8 bytes.
    pub fn add_class_bytes(&mut self, name: &[u8]) -> Result<u16> {
        let n = self.add_utf8_bytes(name)?;
        self.add_simple(Constant::Class(n))
    }

    /// Finds or appends a String entry.
    pub fn add_string(&mut self, text: &str) -> Result<u16> {
        let n = self.add_utf8(text)?;
        self.add_simple(Constant::String(n))
    }

    /// Finds or appends an Integer entry.
    pub fn add_integer(&mut self, v: i32) -> Result<u16> {
        self.add_simple(Constant::Integer(v))
    }

    /// Finds or appends a Long entry (takes two slots).
    pub fn add_long(&mut self, v: i64) -> Result<u16> {
        self.add_simple(Constant::Long(v))
    }

    /// Finds or appends a Double entry, by its IEEE 754 bits (takes two slots).
    pub fn add_double(&mut self, bits: u64) -> Result<u16> {
        self.add_simple(Constant::Double(bits))
    }

    /// Finds or appends a NameAndType entry.
    pub fn add_name_and_type(&mut self, name: &str, descriptor: &str) -> Result<u16> {
        let n = self.add_utf8(name)?;
        let d = self.add_utf8(descriptor)?;
        self.add_simple(Constant::NameAndType(n, d))
    }

    fn add_member(&mut self, tag: u8, owner: &str, name: &str, descriptor: &str) -> Result<u16> {
        let c = self.add_class(owner)?;
        let nt = self.add_name_and_type(name, descriptor)?;
        self.add_simple(match tag {
            9 => Constant::Fieldref(c, nt),
            10 => Constant::Methodref(c, nt),
            _ => Constant::InterfaceMethodref(c, nt),
        })
    }

    /// Finds or appends a Fieldref entry.
    pub fn add_field_ref(&mut self, owner: &str, name: &str, descriptor: &str) -> Result<u16> {
        self.add_member(9, owner, name, descriptor)
    }

    /// Finds or appends a Methodref entry.
    pub fn add_method_ref(&mut self, owner: &str, name: &str, descriptor: &str) -> Result<u16> {
        self.add_member(10, owner, name, descriptor)
    }

    /// Finds or appends an InterfaceMethodref entry.
    pub fn add_interface_method_ref(
        &mut self,
        owner: &str,
        name: &str,
        descriptor: &str,
    ) -> Result<u16> {
        self.add_member(11, owner, name, descriptor)
    }
}

/// Serializes a non-Utf8 constant (tag and body).
fn serialize(c: Constant) -> Result<Vec<u8>> {
    let mut body = Vec::with_capacity(9);
    match c {
        Constant::Integer(v) => {
            body.u1(3);
            body.u4(v as u32);
        }
        Constant::Float(v) => {
            body.u1(4);
            body.u4(v);
        }
        Constant::Long(v) => {
            body.u1(5);
            body.extend_from_slice(&v.to_be_bytes());
        }
        Constant::Double(v) => {
            body.u1(6);
            body.extend_from_slice(&v.to_be_bytes());
        }
        Constant::Class(a)
        | Constant::String(a)
        | Constant::MethodType(a)
        | Constant::Module(a)
        | Constant::Package(a) => {
            body.u1(match c {
                Constant::Class(_) => 7,
                Constant::String(_) => 8,
                Constant::MethodType(_) => 16,
                Constant::Module(_) => 19,
                _ => 20,
            });
            body.u2(a);
        }
        Constant::Fieldref(a, b)
        | Constant::Methodref(a, b)
        | Constant::InterfaceMethodref(a, b)
        | Constant::NameAndType(a, b)
        | Constant::Dynamic(a, b)
        | Constant::InvokeDynamic(a, b) => {
            body.u1(match c {
                Constant::Fieldref(..) => 9,
                Constant::Methodref(..) => 10,
                Constant::InterfaceMethodref(..) => 11,
                Constant::NameAndType(..) => 12,
                Constant::Dynamic(..) => 17,
                _ => 18,
            });
            body.u2(a);
            body.u2(b);
        }
        Constant::MethodHandle(k, r) => {
            body.u1(15);
            body.u1(k);
            body.u2(r);
        }
        Constant::Utf8 { .. } | Constant::Unusable => {
            return Err(Error::Unsupported("serializing this constant kind"))
        }
    }
    Ok(body)
}

/// Encodes text as modified UTF-8 (NUL as two bytes, supplementary characters as surrogate pairs).
pub fn encode_modified_utf8(text: &str) -> Vec<u8> {
    if text.bytes().all(|b| b != 0 && b < 0x80) {
        return text.as_bytes().to_vec();
    }
    let mut out = Vec::with_capacity(text.len() + 8);
    for unit in text.encode_utf16() {
        match unit {
            1..=0x7F => out.push(unit as u8),
            0 | 0x80..=0x7FF => {
                out.push(0xC0 | (unit >> 6) as u8);
                out.push(0x80 | (unit & 0x3F) as u8);
            }
            _ => {
                out.push(0xE0 | (unit >> 12) as u8);
                out.push(0x80 | ((unit >> 6) & 0x3F) as u8);
                out.push(0x80 | (unit & 0x3F) as u8);
            }
        }
    }
    out
}

/// Decodes modified UTF-8; malformed sequences become U+FFFD.
pub fn decode_modified_utf8(bytes: &[u8]) -> Cow<'_, str> {
    if bytes.iter().all(|&b| b != 0 && b < 0x80) {
        // All ASCII: valid UTF-8 as is.
        return Cow::Borrowed(std::str::from_utf8(bytes).unwrap_or_default());
    }
    let mut units = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let (unit, n) = if b < 0x80 {
            (b as u16, 1)
        } else if b & 0xE0 == 0xC0 && i + 1 < bytes.len() {
            (((b as u16 & 0x1F) << 6) | (bytes[i + 1] as u16 & 0x3F), 2)
        } else if b & 0xF0 == 0xE0 && i + 2 < bytes.len() {
            (
                ((b as u16 & 0x0F) << 12)
                    | ((bytes[i + 1] as u16 & 0x3F) << 6)
                    | (bytes[i + 2] as u16 & 0x3F),
                3,
            )
        } else {
            (0xFFFD, 1)
        };
        units.push(unit);
        i += n;
    }
    Cow::Owned(String::from_utf16_lossy(&units))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(count: u16, entries: &[&[u8]]) -> ConstantPool {
        let mut raw = Vec::new();
        raw.u2(count);
        for e in entries {
            raw.extend_from_slice(e);
        }
        ConstantPool::parse(&mut Reader::new(&raw)).unwrap()
    }

    #[test]
    fn appends_without_renumbering_and_finds_existing() {
        // #1 Utf8 "java/lang/Object", #2 Class #1, #3-4 Long 5
        let mut cp = pool(
            5,
            &[
                b"\x01\x00\x10java/lang/Object",
                b"\x07\x00\x01",
                b"\x05\x00\x00\x00\x00\x00\x00\x00\x05",
            ],
        );
        assert_eq!(cp.count(), 5);
        assert_eq!(cp.add_class("java/lang/Object").unwrap(), 2);
        assert_eq!(cp.add_long(5).unwrap(), 3);
        let m = cp
            .add_method_ref("java/lang/Object", "hashCode", "()I")
            .unwrap();
        assert_eq!(
            m,
            cp.add_method_ref("java/lang/Object", "hashCode", "()I")
                .unwrap()
        );
        let r = cp.member_ref(m).unwrap();
        assert_eq!(
            (r.owner, r.name, r.descriptor),
            (&b"java/lang/Object"[..], &b"hashCode"[..], &b"()I"[..])
        );
        assert_eq!(cp.add_long(6).unwrap() + 2, cp.count());
        assert!(matches!(cp.get(4), Err(Error::BadConstant { .. })));
        let mut out = Vec::new();
        cp.write(&mut out);
        let again = ConstantPool::parse(&mut Reader::new(&out)).unwrap();
        assert_eq!(again.count(), cp.count());
    }

    #[test]
    fn modified_utf8_round_trips() {
        for s in ["plain", "nul\0inside", "é and ☃", "emoji 😀"] {
            let enc = encode_modified_utf8(s);
            assert!(!enc.contains(&0), "{s}");
            assert_eq!(decode_modified_utf8(&enc), s);
        }
        assert_eq!(encode_modified_utf8("😀").len(), 6);
    }

    #[test]
    fn rejects_bad_tags_and_truncation() {
        let mut raw = vec![0, 2, 99];
        assert!(matches!(
            ConstantPool::parse(&mut Reader::new(&raw)),
            Err(Error::BadConstantTag { tag: 99, index: 1 })
        ));
        raw = vec![0, 2, 1, 0, 5, b'a'];
        assert!(matches!(
            ConstantPool::parse(&mut Reader::new(&raw)),
            Err(Error::Truncated { .. })
        ));
    }
}
