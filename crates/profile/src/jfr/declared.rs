//! Events of types declared while jtap runs (a BTrace script's `@Event`s): each type with
//! its name, label, description, category and fields, as `jdk.jfr.EventFactory` would
//! declare it, and its events with their start time, duration, thread and field values.
//! A recording holds the chunks [`Recording::take_chunk`] ends, each complete in itself.

use std::collections::HashMap;

use super::chunk::{annotation, class_element, Chunk, Element, Pool};
use super::encoding::Out;
use super::types::{id, TYPES};

/// A type of event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventType {
    /// Its name (`@Name`), which `jfr print --events` selects.
    pub name: String,
    /// `@Label`, unless empty.
    pub label: String,
    /// `@Description`, unless empty.
    pub description: String,
    /// `@Category`, outermost first.
    pub category: Vec<String>,
    /// Its fields, after `startTime`, `duration` and `eventThread`.
    pub fields: Vec<EventField>,
}

/// A field of an [`EventType`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventField {
    /// Its name.
    pub name: String,
    /// Its Java type: `byte`, `char`, `short`, `int`, `long`, `float`, `double`, `boolean`
    /// or `java.lang.String`.
    pub java_type: String,
    /// `@Label`, unless empty.
    pub label: String,
    /// `@Description`, unless empty.
    pub description: String,
    /// What its value is, as a `jdk.jfr` annotation: its class (`jdk.jfr.Timespan`) and
    /// value (`NANOSECONDS`), if it has one.
    pub content: Option<(String, Option<String>)>,
}

/// A field's value, written as the field's type says.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldValue {
    /// A `byte`, `char`, `short`, `int` or `long`.
    Int(i64),
    /// A `float` or `double`.
    Float(f64),
    /// A `boolean`.
    Boolean(bool),
    /// A string, or null.
    Text(Option<String>),
}

/// An event to write.
#[derive(Debug, Clone, PartialEq)]
pub struct Event<'v> {
    /// Its type, an index into the recording's types.
    pub event_type: usize,
    /// When it started, nanoseconds since the Unix epoch.
    pub start_ns: u64,
    /// How long it lasted, in nanoseconds.
    pub duration_ns: u64,
    /// Its thread (kernel id, name), if it has one.
    pub thread: Option<(u32, &'v str)>,
    /// Its fields' values, in the type's order (missing ones are zero or null).
    pub values: &'v [FieldValue],
}

/// Type ids of the primitive types [`TYPES`] does not declare, of `jdk.jfr.Description`,
/// and the first of the field annotations and of the event types.
const BYTE: u64 = 50;
const CHAR: u64 = 51;
const FLOAT: u64 = 52;
const DOUBLE: u64 = 53;
const DESCRIPTION: u64 = 54;
const FIRST_CONTENT: u64 = DESCRIPTION + 1;
const FIRST_EVENT: u64 = 200;

/// A recording of declared events, one chunk at a time.
pub struct Recording {
    types: Vec<EventType>,
    /// The field annotations' classes, by id from [`FIRST_CONTENT`], and whether they
    /// have a value.
    contents: Vec<(String, bool)>,
    chunk: Chunk,
    threads: Pool,
    thread_keys: HashMap<u32, u64>,
    start_ns: u64,
}

impl Recording {
    /// A recording of events of `types` starting at `start_ns` (since the Unix epoch).
    pub fn new(types: Vec<EventType>, start_ns: u64) -> Recording {
        let mut contents: Vec<(String, bool)> = Vec::new();
        let fields = types.iter().flat_map(|t| &t.fields);
        for (class, value) in fields.flat_map(|f| &f.content) {
            if !contents.iter().any(|(c, _)| c == class) {
                contents.push((class.clone(), value.is_some()));
            }
        }
        Recording {
            types,
            contents,
            chunk: Chunk::new(start_ns),
            threads: Pool::default(),
            thread_keys: HashMap::new(),
            start_ns,
        }
    }

    /// Appends an event.
    pub fn event(&mut self, event: &Event) {
        let Some(event_type) = self.types.get(event.event_type) else {
            return;
        };
        let mut fields = Out::default();
        fields.long(event.start_ns.saturating_sub(self.start_ns) as i64);
        fields.long(event.duration_ns as i64);
        let thread = event.thread.map_or(0, |(tid, name)| {
            *self.thread_keys.entry(tid).or_insert_with(|| {
                let mut entry = Out::default();
                entry.string(name);
                entry.long(i64::from(tid));
                entry.string(name);
                entry.long(i64::from(tid));
                entry.boolean(false);
                self.threads.push(entry)
            })
        });
        fields.varint(thread);
        for (i, field) in event_type.fields.iter().enumerate() {
            write_value(&mut fields, &field.java_type, event.values.get(i));
        }
        let type_id = FIRST_EVENT + event.event_type as u64;
        let end_ns = event.start_ns.saturating_add(event.duration_ns);
        self.chunk.event(type_id, end_ns, &fields);
    }

    /// Bytes of the chunk being written so far.
    pub fn chunk_size(&self) -> usize {
        self.chunk.size()
    }

    /// Ends the chunk being written (its bytes, a recording in itself) and starts another
    /// at `now_ns`.
    pub fn take_chunk(&mut self, now_ns: u64) -> Vec<u8> {
        let chunk = std::mem::replace(&mut self.chunk, Chunk::new(now_ns));
        let threads = std::mem::take(&mut self.threads);
        self.thread_keys.clear();
        self.start_ns = now_ns;
        chunk.finish_declaring(&[(id::THREAD, &threads)], self.classes())
    }

    /// The metadata's classes: the primitive types, `java.lang.Thread`, the annotations
    /// and the event types.
    fn classes(&self) -> Vec<Element> {
        let mut classes: Vec<Element> = [
            (id::LONG, "long"),
            (id::INT, "int"),
            (id::SHORT, "short"),
            (BYTE, "byte"),
            (CHAR, "char"),
            (FLOAT, "float"),
            (DOUBLE, "double"),
            (id::BOOLEAN, "boolean"),
            (id::STRING, "java.lang.String"),
        ]
        .into_iter()
        .map(|(type_id, name)| class(type_id, name, None))
        .collect();
        let declared = [
            id::THREAD,
            id::LABEL,
            id::TIMESTAMP,
            id::TIMESPAN,
            id::CATEGORY,
        ];
        classes.extend(
            TYPES
                .iter()
                .filter(|t| declared.contains(&t.id))
                .map(class_element),
        );
        let contents = self
            .contents
            .iter()
            .map(|(c, valued)| (c.as_str(), *valued));
        let annotations = std::iter::once(("jdk.jfr.Description", true)).chain(contents);
        for (type_id, (name, valued)) in (DESCRIPTION..).zip(annotations) {
            let mut element = class(type_id, name, Some("java.lang.annotation.Annotation"));
            if valued {
                let value = Element::new("field")
                    .with("name", "value")
                    .with("class", id::STRING.to_string());
                element = element.child(value);
            }
            classes.push(element);
        }
        for (i, t) in self.types.iter().enumerate() {
            classes.push(self.event_class(FIRST_EVENT + i as u64, t));
        }
        classes
    }

    fn event_class(&self, type_id: u64, t: &EventType) -> Element {
        let mut element = described(
            class(type_id, &t.name, Some("jdk.jfr.Event")),
            &t.label,
            &t.description,
        );
        if !t.category.is_empty() {
            let mut category = Element::new("annotation").with("class", id::CATEGORY.to_string());
            for (i, name) in t.category.iter().enumerate() {
                category = category.with(format!("value-{i}"), name.as_str());
            }
            element = element.child(category);
        }
        let start = Element::new("field")
            .with("name", "startTime")
            .with("class", id::LONG.to_string())
            .child(annotation(id::LABEL, Some("Start Time")))
            .child(annotation(id::TIMESTAMP, Some("TICKS")));
        let duration = Element::new("field")
            .with("name", "duration")
            .with("class", id::LONG.to_string())
            .child(annotation(id::LABEL, Some("Duration")))
            .child(annotation(id::TIMESPAN, Some("TICKS")));
        let thread = Element::new("field")
            .with("name", "eventThread")
            .with("class", id::THREAD.to_string())
            .with("constantPool", "true")
            .child(annotation(id::LABEL, Some("Event Thread")));
        element = element.child(start).child(duration).child(thread);
        for f in &t.fields {
            let mut field = Element::new("field")
                .with("name", f.name.as_str())
                .with("class", type_of(&f.java_type).to_string());
            field = described(field, &f.label, &f.description);
            if let Some((class, value)) = &f.content {
                let index = self.contents.iter().position(|(c, _)| c == class);
                let index = index.unwrap_or(0);
                field = field.child(annotation(FIRST_CONTENT + index as u64, value.as_deref()));
            }
            element = element.child(field);
        }
        element
    }
}

/// A `<class>` element without fields.
fn class(type_id: u64, name: &str, super_type: Option<&str>) -> Element {
    let element = Element::new("class")
        .with("name", name)
        .with("id", type_id.to_string());
    match super_type {
        Some(s) => element.with("superType", s),
        None => element,
    }
}

/// `element` with its `@Label` and `@Description`, those not empty.
fn described(mut element: Element, label: &str, description: &str) -> Element {
    if !label.is_empty() {
        element = element.child(annotation(id::LABEL, Some(label)));
    }
    if !description.is_empty() {
        element = element.child(annotation(DESCRIPTION, Some(description)));
    }
    element
}

/// The type id of a field's Java type (a string for any other).
fn type_of(java_type: &str) -> u64 {
    match java_type {
        "byte" => BYTE,
        "char" => CHAR,
        "short" => id::SHORT,
        "int" => id::INT,
        "long" => id::LONG,
        "float" => FLOAT,
        "double" => DOUBLE,
        "boolean" => id::BOOLEAN,
        _ => id::STRING,
    }
}

/// Writes a value as the JDK writes a field of `java_type` in a chunk of compressed
/// integers: `byte` and `boolean` one byte, `float` and `double` their big-endian bits, the
/// other integers varints of their bits.
fn write_value(out: &mut Out, java_type: &str, value: Option<&FieldValue>) {
    let int = match value {
        Some(FieldValue::Int(n)) => *n,
        Some(FieldValue::Float(x)) => *x as i64,
        Some(FieldValue::Boolean(b)) => i64::from(*b),
        _ => 0,
    };
    let float = match value {
        Some(FieldValue::Float(x)) => *x,
        _ => int as f64,
    };
    match type_of(java_type) {
        BYTE | id::BOOLEAN => out.bytes.push(int as u8),
        CHAR | id::SHORT => out.varint(u64::from(int as u16)),
        id::INT => out.int(int as i32),
        id::LONG => out.long(int),
        FLOAT => out
            .bytes
            .extend_from_slice(&(float as f32).to_bits().to_be_bytes()),
        DOUBLE => out.bytes.extend_from_slice(&float.to_bits().to_be_bytes()),
        _ => match value {
            Some(FieldValue::Text(Some(s))) => out.string(s),
            _ => out.bytes.push(super::encoding::string::NULL),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jfr::encoding::In;

    #[test]
    fn a_chunk_of_declared_events_has_its_header_events_and_sizes() {
        let file_event = EventType {
            name: "fileEvent".into(),
            label: "File Event".into(),
            description: String::new(),
            category: vec!["btrace".into(), "samples".into()],
            fields: vec![EventField {
                name: "fileName".into(),
                java_type: "java.lang.String".into(),
                label: String::new(),
                description: String::new(),
                content: Some(("jdk.jfr.Unsigned".into(), None)),
            }],
        };
        let mut recording = Recording::new(vec![file_event], 1_000);
        let values = [FieldValue::Text(Some("/tmp/a".into()))];
        recording.event(&Event {
            event_type: 0,
            start_ns: 1_500,
            duration_ns: 20,
            thread: Some((7, "main")),
            values: &values,
        });
        assert!(recording.chunk_size() > 68);
        let bytes = recording.take_chunk(2_000);
        assert_eq!(&bytes[..4], b"FLR\0");
        let mut header = In::new(&bytes, 8);
        assert_eq!(header.fixed_u64().unwrap(), bytes.len() as u64);
        // The chunk lasted from 1,000 to the event's end.
        let mut times = In::new(&bytes, 32);
        assert_eq!(times.fixed_u64().unwrap(), 1_000);
        assert_eq!(times.fixed_u64().unwrap(), 520);
        let text = String::from_utf8_lossy(&bytes);
        for declared in [
            "fileEvent",
            "File Event",
            "jdk.jfr.Unsigned",
            "/tmp/a",
            "main",
        ] {
            assert!(text.contains(declared), "{declared}");
        }
        assert_eq!(recording.chunk_size(), 68, "a new chunk, empty");
    }
}
