//! `jtap btrace --jfr FILE`: the JFR events a script commits, written as a JFR recording
//! of the types its `@Event`s and `@PeriodicEvent`s declare, which the JDK's `jfr` reads.
//! The events are appended one chunk at a time: a chunk is written out once it holds
//! [`CHUNK_BYTES`], and the last one when the script ends.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use jtap_profile::declared::{Event, EventField, EventType, FieldValue, Recording};
use jtap_script::value::Value;
use jtap_script::{Committed, Script};

/// Bytes of events a chunk holds before it is written out.
const CHUNK_BYTES: usize = 16 << 20;

/// The recording file of a script's events.
pub struct EventFile {
    path: PathBuf,
    file: File,
    recording: Recording,
    events: u64,
}

impl EventFile {
    /// Creates `path` for the events of `script`'s types.
    pub fn create(path: &Path, script: &Script) -> anyhow::Result<EventFile> {
        let file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
        let types = script.events.iter().map(event_type).collect();
        Ok(EventFile {
            path: path.to_path_buf(),
            file,
            recording: Recording::new(types, now_ns()),
            events: 0,
        })
    }

    /// Appends committed events; writes the chunk out once it is full.
    pub fn add(&mut self, committed: Vec<Committed>) -> anyhow::Result<()> {
        for event in committed {
            let values: Vec<FieldValue> = event.values.iter().map(field_value).collect();
            self.recording.event(&Event {
                event_type: event.event_type,
                start_ns: event.start_ns,
                duration_ns: event.duration_ns,
                thread: event
                    .thread
                    .as_ref()
                    .map(|(tid, name)| (*tid, name.as_str())),
                values: &values,
            });
            self.events += 1;
        }
        if self.recording.chunk_size() >= CHUNK_BYTES {
            self.write_chunk()?;
        }
        Ok(())
    }

    /// Writes the last chunk; says how many events the file holds.
    pub fn finish(mut self) -> anyhow::Result<String> {
        self.write_chunk()?;
        Ok(format!(
            "{} JFR events written to {}",
            self.events,
            self.path.display()
        ))
    }

    fn write_chunk(&mut self) -> anyhow::Result<()> {
        let chunk = self.recording.take_chunk(now_ns());
        self.file
            .write_all(&chunk)
            .with_context(|| format!("writing {}", self.path.display()))
    }
}

/// A script's event type as the recording declares it.
fn event_type(t: &jtap_script::ast::EventType) -> EventType {
    EventType {
        name: t.name.clone(),
        label: t.label.clone(),
        description: t.description.clone(),
        category: t.category.clone(),
        fields: t
            .fields
            .iter()
            .map(|f| EventField {
                name: f.name.clone(),
                java_type: f.java_type.to_string(),
                label: f.label.clone(),
                description: f.description.clone(),
                content: f.content.clone(),
            })
            .collect(),
    }
}

/// A field's value as the script set it.
fn field_value(value: &Value) -> FieldValue {
    match value {
        Value::Int(n) => FieldValue::Int(*n),
        Value::Float(x) => FieldValue::Float(*x),
        Value::Bool(b) => FieldValue::Boolean(*b),
        Value::Str(s) => FieldValue::Text(Some(s.to_string())),
        _ => FieldValue::Text(None),
    }
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}
