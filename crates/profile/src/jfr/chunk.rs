//! One JFR chunk: the header, the events, one checkpoint with every constant pool, and the
//! metadata describing [`super::types::TYPES`]. Times are in ticks of one nanosecond since the
//! recording's start (the header's start ticks are 0).

use std::collections::HashMap;

use super::encoding::Out;
use super::types::{id, Type, Unit, TYPES};

/// `FLR\0`.
pub const MAGIC: &[u8; 4] = b"FLR\0";
/// Bytes of the chunk header.
pub const HEADER_SIZE: usize = 68;
/// Record type of the metadata.
pub const METADATA: u64 = 0;
/// Record type of a checkpoint (constant pools).
pub const CHECKPOINT: u64 = 1;
/// Header flag: integers are compressed (varints).
pub const COMPRESSED_INTS: u8 = 1;

/// A constant pool: entries of one type by key, each entry's fields already encoded. Keys
/// start at 1, so that 0 is a null reference, as in the JDK's recordings.
#[derive(Default)]
pub struct Pool {
    entries: Vec<Vec<u8>>,
    /// Keys start at 0: an enumeration (frame types, thread states) whose keys readers
    /// take as the values themselves.
    from_zero: bool,
}

impl Pool {
    /// A pool of an enumeration, keyed from 0.
    pub fn enumeration() -> Pool {
        Pool {
            entries: Vec::new(),
            from_zero: true,
        }
    }

    /// Adds an entry; the key it gets.
    pub fn push(&mut self, fields: Out) -> u64 {
        self.entries.push(fields.bytes);
        self.key(self.entries.len() - 1)
    }

    fn key(&self, index: usize) -> u64 {
        index as u64 + u64::from(!self.from_zero)
    }
}

/// Writes a chunk: events are appended as they come, pools filled on the way.
pub struct Chunk {
    out: Out,
    start_ns: u64,
    end_ns: u64,
}

impl Chunk {
    /// A chunk of a recording that started at `start_ns` (since the Unix epoch).
    pub fn new(start_ns: u64) -> Chunk {
        let mut out = Out::default();
        out.bytes.resize(HEADER_SIZE, 0);
        Chunk {
            out,
            start_ns,
            end_ns: start_ns,
        }
    }

    /// Appends an event of type `type_id` whose fields (after the type) are `fields`, taken
    /// at `time_ns`.
    pub fn event(&mut self, type_id: u64, time_ns: u64, fields: &Out) {
        let mut body = Out::default();
        body.varint(type_id);
        body.bytes.extend_from_slice(&fields.bytes);
        self.out.record(&body.bytes);
        self.end_ns = self.end_ns.max(time_ns);
    }

    /// Bytes written so far (the header's included).
    pub fn size(&self) -> usize {
        self.out.bytes.len()
    }

    /// Ends the chunk with the constant pools (by type id) and the metadata of
    /// [`TYPES`]; returns the file's bytes.
    pub fn finish(self, pools: &[(u64, &Pool)]) -> Vec<u8> {
        self.finish_declaring(pools, TYPES.iter().map(class_element).collect())
    }

    /// [`Chunk::finish`], its metadata declaring `classes` (`<class>` elements).
    pub fn finish_declaring(mut self, pools: &[(u64, &Pool)], classes: Vec<Element>) -> Vec<u8> {
        let checkpoint_at = self.out.bytes.len();
        let mut body = Out::default();
        body.varint(CHECKPOINT);
        body.long(0); // start, in ticks
        body.long(0); // duration
        body.long(0); // no earlier checkpoint
        body.boolean(false); // not a flush
        let pools: Vec<&(u64, &Pool)> = pools
            .iter()
            .filter(|(_, p)| !p.entries.is_empty())
            .collect();
        body.varint(pools.len() as u64);
        for (type_id, pool) in pools {
            body.varint(*type_id);
            body.varint(pool.entries.len() as u64);
            for (index, entry) in pool.entries.iter().enumerate() {
                body.varint(pool.key(index));
                body.bytes.extend_from_slice(entry);
            }
        }
        self.out.record(&body.bytes);
        let metadata_at = self.out.bytes.len();
        self.out.record(&metadata(classes));
        let size = self.out.bytes.len();
        let mut header = Out::default();
        header.bytes.extend_from_slice(MAGIC);
        header.fixed_u16(2); // major
        header.fixed_u16(0); // minor
        header.fixed_u64(size as u64);
        header.fixed_u64(checkpoint_at as u64);
        header.fixed_u64(metadata_at as u64);
        header.fixed_u64(self.start_ns);
        header.fixed_u64(self.end_ns.saturating_sub(self.start_ns));
        header.fixed_u64(0); // start ticks
        header.fixed_u64(1_000_000_000); // ticks per second
        header.bytes.extend_from_slice(&[0, 0, 0, COMPRESSED_INTS]); // finished; flags
        debug_assert_eq!(header.bytes.len(), HEADER_SIZE);
        self.out.bytes[..HEADER_SIZE].copy_from_slice(&header.bytes);
        self.out.bytes
    }
}

/// An element of the metadata tree.
pub struct Element {
    name: &'static str,
    attributes: Vec<(String, String)>,
    children: Vec<Element>,
}

impl Element {
    /// An element without attributes or children.
    pub fn new(name: &'static str) -> Element {
        Element {
            name,
            attributes: Vec::new(),
            children: Vec::new(),
        }
    }

    /// With attribute `key`.
    pub fn with(mut self, key: impl Into<String>, value: impl Into<String>) -> Element {
        self.attributes.push((key.into(), value.into()));
        self
    }

    /// With a child element.
    pub fn child(mut self, child: Element) -> Element {
        self.children.push(child);
        self
    }
}

/// An `<annotation class=... value=...>` element.
pub fn annotation(type_id: u64, value: Option<&str>) -> Element {
    let element = Element::new("annotation").with("class", type_id.to_string());
    match value {
        Some(value) => element.with("value", value),
        None => element,
    }
}

/// The `<class>` element of type `t`.
pub fn class_element(t: &Type) -> Element {
    let mut class = Element::new("class")
        .with("name", t.name)
        .with("id", t.id.to_string());
    if let Some(super_type) = t.super_type {
        class = class.with("superType", super_type);
    }
    if t.simple {
        class = class.with("simpleType", "true");
    }
    if let Some(label) = t.label {
        class = class.child(annotation(id::LABEL, Some(label)));
    }
    if !t.category.is_empty() {
        let mut category = Element::new("annotation").with("class", id::CATEGORY.to_string());
        for (i, name) in t.category.iter().enumerate() {
            category = category.with(["value-0", "value-1", "value-2"][i], *name);
        }
        class = class.child(category);
    }
    for f in t.fields {
        let mut field = Element::new("field")
            .with("name", f.name)
            .with("class", f.type_id.to_string());
        if f.pooled {
            field = field.with("constantPool", "true");
        }
        if f.array {
            field = field.with("dimension", "1");
        }
        if !f.label.is_empty() {
            field = field.child(annotation(id::LABEL, Some(f.label)));
        }
        field = match f.unit {
            Unit::None => field,
            Unit::Timestamp => field.child(annotation(id::TIMESTAMP, Some("TICKS"))),
            Unit::Timespan => field.child(annotation(id::TIMESPAN, Some("TICKS"))),
            Unit::Bytes => field.child(annotation(id::DATA_AMOUNT, Some("BYTES"))),
        };
        class = class.child(field);
    }
    class
}

/// The metadata record's body: the string table, then the element tree (root → metadata →
/// `classes`, and the region).
fn metadata(classes: Vec<Element>) -> Vec<u8> {
    let root = Element::new("root")
        .child(
            classes
                .into_iter()
                .fold(Element::new("metadata"), |m, c| m.child(c)),
        )
        .child(
            Element::new("region")
                .with("locale", "en_US")
                .with("gmtOffset", "0"),
        );
    let mut strings = Strings::default();
    let mut tree = Out::default();
    write_element(&root, &mut strings, &mut tree);
    let mut body = Out::default();
    body.varint(METADATA);
    body.long(0); // start, in ticks
    body.long(0); // duration
    body.long(1); // metadata id
    body.varint(strings.list.len() as u64);
    for s in &strings.list {
        body.string(s);
    }
    body.bytes.extend_from_slice(&tree.bytes);
    body.bytes
}

/// The metadata's string table.
#[derive(Default)]
struct Strings {
    list: Vec<String>,
    index: HashMap<String, u64>,
}

impl Strings {
    fn of(&mut self, s: &str) -> u64 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        self.list.push(s.to_string());
        self.index.insert(s.to_string(), self.list.len() as u64 - 1);
        self.list.len() as u64 - 1
    }
}

fn write_element(element: &Element, strings: &mut Strings, out: &mut Out) {
    out.varint(strings.of(element.name));
    out.varint(element.attributes.len() as u64);
    for (key, value) in &element.attributes {
        out.varint(strings.of(key));
        out.varint(strings.of(value));
    }
    out.varint(element.children.len() as u64);
    for child in &element.children {
        write_element(child, strings, out);
    }
}
