//! Reading what `jtap inspect` needs out of an HPROF heap dump (`JAVA PROFILE 1.0.2`, as
//! HotSpot writes it): class names, class dumps (statics and instance field layouts),
//! instances of one class, and the objects their fields point to, including the contents
//! of `java.lang.String`s. Each question is one pass over the dump's records.

use std::collections::{HashMap, HashSet};

use anyhow::{bail, Context};

const STRING: u8 = 0x01;
const LOAD_CLASS: u8 = 0x02;
const HEAP_DUMP: u8 = 0x0C;
const HEAP_DUMP_SEGMENT: u8 = 0x1C;
const CLASS_DUMP: u8 = 0x20;
const INSTANCE_DUMP: u8 = 0x21;
const OBJECT_ARRAY_DUMP: u8 = 0x22;
const PRIMITIVE_ARRAY_DUMP: u8 = 0x23;
/// HPROF's basic type of an object reference.
pub const OBJECT: u8 = 2;

/// A field value as the dump holds it.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// An object id (0: null).
    Object(u64),
    /// A primitive, described as Java prints it.
    Primitive(String),
}

/// One class: its name, superclass, statics and instance field layout.
#[derive(Debug, Clone, Default)]
pub struct Class {
    /// Java name (`java.lang.String`, `int[]` stays `[I`).
    pub name: String,
    /// The superclass's object id (0 for none).
    pub super_id: u64,
    /// Static fields: name and value.
    pub statics: Vec<(String, Value)>,
    /// Instance fields declared by this class: name and basic type.
    pub fields: Vec<(String, u8)>,
}

/// An object the second pass found.
#[derive(Debug, Clone)]
pub enum Object {
    /// An instance: its class id and raw field bytes.
    Instance { class_id: u64, bytes: Vec<u8> },
    /// An array of objects: its length.
    ReferenceArray { length: u32 },
    /// An array of primitives: its element type and raw contents.
    PrimitiveArray { element: u8, bytes: Vec<u8> },
}

/// A heap dump in memory, with its class table read.
pub struct HeapDump {
    bytes: Vec<u8>,
    id_size: usize,
    /// Classes by object id.
    pub classes: HashMap<u64, Class>,
}

impl HeapDump {
    /// Parses the header and the class table of `bytes`.
    pub fn new(bytes: Vec<u8>) -> anyhow::Result<HeapDump> {
        let header_end = bytes
            .iter()
            .position(|&b| b == 0)
            .filter(|&end| bytes[..end].starts_with(b"JAVA PROFILE"))
            .context("not an HPROF heap dump")?;
        let id_size = read_u32(&bytes, header_end + 1).context("a truncated dump")? as usize;
        if id_size != 4 && id_size != 8 {
            bail!("identifiers of {id_size} bytes in the heap dump");
        }
        let mut dump = HeapDump {
            bytes,
            id_size,
            classes: HashMap::new(),
        };
        dump.read_classes(header_end + 1 + 4 + 8)
            .context("a damaged heap dump")?;
        Ok(dump)
    }

    fn id(&self, at: usize) -> Option<u64> {
        let raw = self.bytes.get(at..at + self.id_size)?;
        Some(raw.iter().fold(0u64, |v, &b| v << 8 | u64::from(b)))
    }

    /// The size of a value of basic `kind`.
    fn size_of(&self, kind: u8) -> Option<usize> {
        Some(match kind {
            OBJECT => self.id_size,
            4 | 8 => 1,
            5 | 9 => 2,
            6 | 10 => 4,
            7 | 11 => 8,
            _ => return None,
        })
    }

    fn value(&self, kind: u8, at: usize) -> Option<Value> {
        let bytes = self.bytes.get(at..at + self.size_of(kind)?)?;
        Some(decode(kind, bytes, self.id_size))
    }

    /// Top-level records: (tag, body start, body end).
    fn records(&self, start: usize) -> impl Iterator<Item = (u8, usize, usize)> + '_ {
        let mut at = start;
        std::iter::from_fn(move || {
            let tag = *self.bytes.get(at)?;
            let length = read_u32(&self.bytes, at + 5)? as usize;
            let body = at + 9;
            at = body + length;
            (at <= self.bytes.len()).then_some((tag, body, at))
        })
    }

    fn read_classes(&mut self, start: usize) -> Option<()> {
        let mut names: HashMap<u64, String> = HashMap::new();
        let mut class_names: HashMap<u64, u64> = HashMap::new();
        let mut class_dumps = Vec::new();
        let records: Vec<(u8, usize, usize)> = self.records(start).collect();
        for (tag, body, end) in records {
            match tag {
                STRING => {
                    let id = self.id(body)?;
                    let text = String::from_utf8_lossy(self.bytes.get(body + self.id_size..end)?);
                    names.insert(id, text.into_owned());
                }
                LOAD_CLASS => {
                    let class_id = self.id(body + 4)?;
                    let name_id = self.id(body + 8 + self.id_size)?;
                    class_names.insert(class_id, name_id);
                }
                HEAP_DUMP | HEAP_DUMP_SEGMENT => {
                    self.sub_records(body, end, |tag, at| {
                        if tag == CLASS_DUMP {
                            class_dumps.push(at);
                        }
                    })?;
                }
                _ => {}
            }
        }
        for at in class_dumps {
            let (id, class) = self.class_dump(at, &names)?;
            let name = class_names
                .get(&id)
                .and_then(|n| names.get(n))
                .map_or_else(|| format!("0x{id:x}"), |n| n.replace('/', "."));
            self.classes.insert(id, Class { name, ..class });
        }
        Some(())
    }

    /// Calls `visit(tag, start)` for each sub-record of a heap dump segment.
    fn sub_records(
        &self,
        start: usize,
        end: usize,
        mut visit: impl FnMut(u8, usize),
    ) -> Option<()> {
        let mut at = start;
        while at < end {
            let tag = *self.bytes.get(at)?;
            visit(tag, at + 1);
            at = at + 1 + self.sub_record_length(tag, at + 1)?;
        }
        Some(())
    }

    fn sub_record_length(&self, tag: u8, at: usize) -> Option<usize> {
        let id = self.id_size;
        Some(match tag {
            0xFF | 0x05 | 0x07 => id,
            0x01 => 2 * id,
            0x02 | 0x03 | 0x08 => id + 8,
            0x04 | 0x06 => id + 4,
            CLASS_DUMP => self.class_dump_length(at)?,
            INSTANCE_DUMP => 2 * id + 8 + read_u32(&self.bytes, at + id + 4 + id)? as usize,
            OBJECT_ARRAY_DUMP => {
                let count = read_u32(&self.bytes, at + id + 4)? as usize;
                2 * id + 8 + count * id
            }
            PRIMITIVE_ARRAY_DUMP => {
                let count = read_u32(&self.bytes, at + id + 4)? as usize;
                let kind = *self.bytes.get(at + id + 8)?;
                id + 9 + count * self.size_of(kind)?
            }
            _ => return None,
        })
    }

    fn class_dump_length(&self, start: usize) -> Option<usize> {
        let id = self.id_size;
        let mut at = start + 7 * id + 8;
        let constants = read_u16(&self.bytes, at)?;
        at += 2;
        for _ in 0..constants {
            at += 3 + self.size_of(*self.bytes.get(at + 2)?)?;
        }
        let statics = read_u16(&self.bytes, at)?;
        at += 2;
        for _ in 0..statics {
            at += id + 1 + self.size_of(*self.bytes.get(at + id)?)?;
        }
        let fields = read_u16(&self.bytes, at)? as usize;
        Some(at + 2 + fields * (id + 1) - start)
    }

    fn class_dump(&self, start: usize, names: &HashMap<u64, String>) -> Option<(u64, Class)> {
        let id = self.id_size;
        let class_id = self.id(start)?;
        let super_id = self.id(start + id + 4)?;
        let mut at = start + 7 * id + 8;
        let constants = read_u16(&self.bytes, at)?;
        at += 2;
        for _ in 0..constants {
            at += 3 + self.size_of(*self.bytes.get(at + 2)?)?;
        }
        let name = |at: usize| names.get(&self.id(at)?).cloned();
        let mut class = Class {
            super_id,
            ..Class::default()
        };
        let statics = read_u16(&self.bytes, at)?;
        at += 2;
        for _ in 0..statics {
            let kind = *self.bytes.get(at + id)?;
            let value = self.value(kind, at + id + 1)?;
            class.statics.push((name(at)?, value));
            at += id + 1 + self.size_of(kind)?;
        }
        let fields = read_u16(&self.bytes, at)?;
        at += 2;
        for _ in 0..fields {
            class.fields.push((name(at)?, *self.bytes.get(at + id)?));
            at += id + 1;
        }
        Some((class_id, class))
    }

    /// The class ids named `name`.
    pub fn class_ids(&self, name: &str) -> Vec<u64> {
        self.classes
            .iter()
            .filter(|(_, c)| c.name == name)
            .map(|(id, _)| *id)
            .collect()
    }

    /// Up to `limit` instances of the classes `class_ids` (several when loaders define the
    /// name apart): (object id, class id, field bytes), and how many there are in all.
    pub fn instances_of(
        &self,
        class_ids: &[u64],
        limit: usize,
    ) -> (Vec<(u64, u64, Vec<u8>)>, usize) {
        let mut found = Vec::new();
        let mut total = 0;
        self.each_object(|dump, tag, at| {
            if tag != INSTANCE_DUMP {
                return;
            }
            let id = dump.id_size;
            let Some(class_id) = dump.id(at + id + 4).filter(|c| class_ids.contains(c)) else {
                return;
            };
            total += 1;
            if found.len() < limit {
                if let Some(object) = dump.instance(at) {
                    found.push((dump.id(at).unwrap_or(0), class_id, object));
                }
            }
        });
        (found, total)
    }

    fn instance(&self, at: usize) -> Option<Vec<u8>> {
        let id = self.id_size;
        let length = read_u32(&self.bytes, at + 2 * id + 4)? as usize;
        let start = at + 2 * id + 8;
        Some(self.bytes.get(start..start + length)?.to_vec())
    }

    /// The objects with these ids.
    pub fn objects(&self, wanted: &HashSet<u64>) -> HashMap<u64, Object> {
        let mut found = HashMap::new();
        self.each_object(|dump, tag, at| {
            let Some(object_id) = dump.id(at).filter(|i| wanted.contains(i)) else {
                return;
            };
            let id = dump.id_size;
            let object = match tag {
                INSTANCE_DUMP => dump
                    .id(at + id + 4)
                    .zip(dump.instance(at))
                    .map(|(class_id, bytes)| Object::Instance { class_id, bytes }),
                OBJECT_ARRAY_DUMP => read_u32(&dump.bytes, at + id + 4)
                    .map(|length| Object::ReferenceArray { length }),
                PRIMITIVE_ARRAY_DUMP => (|| {
                    let count = read_u32(&dump.bytes, at + id + 4)? as usize;
                    let element = *dump.bytes.get(at + id + 8)?;
                    let start = at + id + 9;
                    let bytes = dump
                        .bytes
                        .get(start..start + count * dump.size_of(element)?)?;
                    Some(Object::PrimitiveArray {
                        element,
                        bytes: bytes.to_vec(),
                    })
                })(),
                _ => None,
            };
            if let Some(object) = object {
                found.insert(object_id, object);
            }
        });
        found
    }

    fn each_object(&self, mut visit: impl FnMut(&HeapDump, u8, usize)) {
        let start = self
            .bytes
            .iter()
            .position(|&b| b == 0)
            .map_or(self.bytes.len(), |end| end + 1 + 4 + 8);
        for (tag, body, end) in self.records(start) {
            if tag == HEAP_DUMP || tag == HEAP_DUMP_SEGMENT {
                let _ = self.sub_records(body, end, |tag, at| visit(self, tag, at));
            }
        }
    }

    /// An instance's fields, this class's first then its superclasses', as (name, value).
    pub fn fields_of(&self, class_id: u64, bytes: &[u8]) -> Vec<(String, Value)> {
        let mut values = Vec::new();
        let mut at = 0;
        let mut class = self.classes.get(&class_id);
        while let Some(c) = class {
            for (name, kind) in &c.fields {
                let Some(size) = self.size_of(*kind) else {
                    return values;
                };
                let Some(raw) = bytes.get(at..at + size) else {
                    return values;
                };
                values.push((name.clone(), decode(*kind, raw, self.id_size)));
                at += size;
            }
            class = self.classes.get(&c.super_id);
        }
        values
    }
}

/// A value of basic `kind` from its big-endian bytes.
fn decode(kind: u8, raw: &[u8], id_size: usize) -> Value {
    let unsigned = raw.iter().fold(0u64, |v, &b| v << 8 | u64::from(b));
    let text = match kind {
        OBJECT if raw.len() == id_size => return Value::Object(unsigned),
        4 => (unsigned != 0).to_string(),
        5 => char::from_u32(unsigned as u32).map_or("?".into(), |c| format!("'{c}'")),
        6 => f32::from_bits(unsigned as u32).to_string(),
        7 => f64::from_bits(unsigned).to_string(),
        8 => (unsigned as u8 as i8).to_string(),
        9 => (unsigned as u16 as i16).to_string(),
        10 => (unsigned as u32 as i32).to_string(),
        11 => (unsigned as i64).to_string(),
        _ => "?".into(),
    };
    Value::Primitive(text)
}

fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

fn read_u16(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(bytes.get(at..at + 2)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_values_of_each_basic_type() {
        assert_eq!(decode(OBJECT, &[0, 0, 0, 7], 4), Value::Object(7));
        assert_eq!(
            decode(10, &[0xff, 0xff, 0xff, 0xfe], 4),
            Value::Primitive("-2".into())
        );
        assert_eq!(decode(4, &[1], 8), Value::Primitive("true".into()));
        assert_eq!(decode(5, &[0, b'x'], 8), Value::Primitive("'x'".into()));
        assert_eq!(
            decode(7, &1.5f64.to_bits().to_be_bytes(), 8),
            Value::Primitive("1.5".into())
        );
    }

    #[test]
    fn refuses_what_is_not_a_heap_dump() {
        assert!(HeapDump::new(b"PK\x03\x04 a zip".to_vec()).is_err());
        assert!(HeapDump::new(b"JAVA PROFILE 1.0.2\0\0\0".to_vec()).is_err());
    }
}
