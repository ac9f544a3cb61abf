//! `jtap inspect <pid> CLASS [-n 5] [--path a.b.c] [--static NAME]`: live instances of a
//! class and their fields (or the value at a path of fields), or one of its static fields, described without running application code:
//! strings by their contents, other objects as `Class@0xid`, arrays by type and length.
//!
//! The values come from a heap dump of live objects (`jcmd GC.heap_dump`: a full GC and a
//! pause as long as the dump) written to the JVM's `/tmp`, read through `/proc/<pid>/root`
//! and deleted at once.

use std::collections::HashSet;
use std::fs;
use std::io::{self, Write};
use std::time::Duration;

use jtap_attach::{AttachOptions, Request, VirtualMachine};

use super::hprof::{HeapDump, Object, Value};
use crate::exit;

/// The longest string shown, in characters.
const MAX_STRING: usize = 200;

/// The command line of `jtap inspect`.
#[derive(clap::Args, Debug, Clone)]
pub struct InspectArgs {
    /// Pid of the target JVM
    pub pid: u32,
    /// The class, by its full Java name (com.acme.Cache, com.acme.Outer$Inner)
    pub class: String,
    /// Show at most N instances
    #[arg(short = 'n', long = "limit", default_value_t = 5)]
    pub limit: usize,
    /// Show this static field of the class instead of instances
    #[arg(long = "static", value_name = "NAME")]
    pub static_field: Option<String>,
    /// Show only the value at this path of fields of each instance (owner, cache.map.size)
    #[arg(long, conflicts_with = "static_field")]
    pub path: Option<String>,
}

/// Dumps the heap, prints the instances or the static, deletes the dump.
pub fn run(args: &InspectArgs, timeout: Duration) -> anyhow::Result<i32> {
    if let Some(path) = args
        .path
        .as_ref()
        .filter(|p| p.split('.').any(str::is_empty))
    {
        return Err(exit::usage(format!("bad field path {path:?}")));
    }
    let mut vm = VirtualMachine::attach(args.pid, &AttachOptions { timeout })?;
    let dump = heap_dump(&mut vm)?;
    let class_ids = dump.class_ids(&args.class);
    if class_ids.is_empty() {
        return Err(exit::usage(format!(
            "class {} is not loaded in JVM {}",
            args.class, args.pid
        )));
    }
    let mut out = io::stdout().lock();
    if let Some(name) = &args.static_field {
        let value = class_ids
            .iter()
            .filter_map(|id| dump.classes.get(id))
            .find_map(|c| c.statics.iter().find(|(n, _)| n == name))
            .map(|(_, v)| v.clone())
            .ok_or_else(|| exit::usage(format!("{} has no static field {name}", args.class)))?;
        let described = describe_all(&dump, &[value]);
        writeln!(out, "{}.{name} = {}", args.class, described[0])?;
        return Ok(0);
    }
    let (instances, total) = dump.instances_of(&class_ids, args.limit);
    let plural = if total == 1 { "" } else { "s" };
    writeln!(out, "{total} live instance{plural} of {}", args.class)?;
    if let Some(path) = &args.path {
        let steps: Vec<&str> = path.split('.').collect();
        let values = follow(&dump, &instances, &steps);
        let found: Vec<Value> = values.iter().filter_map(|v| v.clone().ok()).collect();
        let mut described = describe_all(&dump, &found).into_iter();
        for ((object_id, _, _), value) in instances.iter().zip(values) {
            let text = match value {
                Ok(_) => described.next().unwrap_or_default(),
                Err(why) => format!("({why})"),
            };
            writeln!(out, "{}@0x{object_id:x}.{path} = {text}", args.class)?;
        }
    }
    for (object_id, class_id, bytes) in instances.iter().filter(|_| args.path.is_none()) {
        let fields = dump.fields_of(*class_id, bytes);
        let values: Vec<Value> = fields.iter().map(|(_, v)| v.clone()).collect();
        let described = describe_all(&dump, &values);
        writeln!(out, "{}@0x{object_id:x}", args.class)?;
        for ((name, _), text) in fields.iter().zip(described) {
            writeln!(out, "    {name} = {text}")?;
        }
    }
    if total > instances.len() {
        writeln!(out, "... {} more (-n shows more)", total - instances.len())?;
    }
    Ok(0)
}

/// Follows a path of field names from each instance: the value at its end, or why not.
/// One pass over the dump per step.
fn follow(
    dump: &HeapDump,
    instances: &[(u64, u64, Vec<u8>)],
    steps: &[&str],
) -> Vec<Result<Value, String>> {
    let mut current: Vec<Result<(u64, Vec<u8>), String>> = instances
        .iter()
        .map(|(_, class_id, bytes)| Ok((*class_id, bytes.clone())))
        .collect();
    for (index, name) in steps.iter().enumerate() {
        let values: Vec<Result<Value, String>> = current
            .into_iter()
            .map(|object| {
                let (class_id, bytes) = object?;
                dump.fields_of(class_id, &bytes)
                    .into_iter()
                    .find(|(field, _)| field == name)
                    .map(|(_, value)| value)
                    .ok_or_else(|| format!("no field {name}"))
            })
            .collect();
        if index + 1 == steps.len() {
            return values;
        }
        let wanted: HashSet<u64> = values
            .iter()
            .filter_map(|v| match v {
                Ok(Value::Object(id)) if *id != 0 => Some(*id),
                _ => None,
            })
            .collect();
        let objects = dump.objects(&wanted);
        current = values
            .into_iter()
            .map(|value| match value? {
                Value::Object(0) => Err(format!("{name} is null")),
                Value::Object(id) => match objects.get(&id) {
                    Some(Object::Instance { class_id, bytes }) => Ok((*class_id, bytes.clone())),
                    _ => Err(format!("{name} is an array")),
                },
                Value::Primitive(_) => Err(format!("{name} is a primitive")),
            })
            .collect();
    }
    Vec::new()
}

/// A heap dump of live objects, written by the JVM into its `/tmp` and read from there.
fn heap_dump(vm: &mut VirtualMachine) -> anyhow::Result<HeapDump> {
    let process = vm.process().clone();
    let name = format!(
        "jtap-inspect-{}-{}.hprof",
        process.ns_pid,
        std::process::id()
    );
    let in_jvm = format!("/tmp/{name}");
    let here = process.tmp_dir().join(&name);
    let mut reply = vm.execute(&Request::new("jcmd", [format!("GC.heap_dump {in_jvm}")]))?;
    let text = reply.output_to_string()?;
    let bytes = fs::read(&here);
    let _ = fs::remove_file(&here);
    if reply.status != 0 || bytes.is_err() {
        anyhow::bail!(
            "the JVM did not write its heap dump: {}",
            text.lines().last().unwrap_or("no reason given")
        );
    }
    HeapDump::new(bytes?)
}

/// Describes values: strings by contents, other objects by class and id.
fn describe_all(dump: &HeapDump, values: &[Value]) -> Vec<String> {
    let wanted: HashSet<u64> = values
        .iter()
        .filter_map(|v| match v {
            Value::Object(id) if *id != 0 => Some(*id),
            _ => None,
        })
        .collect();
    let objects = dump.objects(&wanted);
    // The character arrays of the strings among them.
    let mut arrays = HashSet::new();
    for object in objects.values() {
        if let Object::Instance { class_id, bytes } = object {
            if is_string(dump, *class_id) {
                arrays.extend(string_value_id(dump, *class_id, bytes));
            }
        }
    }
    let arrays = dump.objects(&arrays);
    values
        .iter()
        .map(|value| match value {
            Value::Primitive(text) => text.clone(),
            Value::Object(0) => "null".into(),
            Value::Object(id) => match objects.get(id) {
                Some(Object::Instance { class_id, bytes }) if is_string(dump, *class_id) => {
                    string_text(dump, *class_id, bytes, &arrays)
                        .unwrap_or_else(|| format!("java.lang.String@0x{id:x}"))
                }
                Some(Object::Instance { class_id, .. }) => {
                    format!("{}@0x{id:x}", class_name(dump, *class_id))
                }
                Some(Object::ReferenceArray { length }) => format!("Object[{length}]@0x{id:x}"),
                Some(Object::PrimitiveArray { element, bytes }) => {
                    primitive_array(*element, bytes.len(), *id)
                }
                None => format!("@0x{id:x}"),
            },
        })
        .collect()
}

fn class_name(dump: &HeapDump, class_id: u64) -> String {
    dump.classes
        .get(&class_id)
        .map_or_else(|| "?".into(), |c| c.name.clone())
}

fn is_string(dump: &HeapDump, class_id: u64) -> bool {
    class_name(dump, class_id) == "java.lang.String"
}

fn string_value_id(dump: &HeapDump, class_id: u64, bytes: &[u8]) -> Option<u64> {
    dump.fields_of(class_id, bytes)
        .into_iter()
        .find(|(name, _)| name == "value")
        .and_then(|(_, v)| match v {
            Value::Object(id) if id != 0 => Some(id),
            _ => None,
        })
}

/// A string's text: its `value` array (`byte[]` LATIN1 or UTF-16 by `coder`, or `char[]`).
fn string_text(
    dump: &HeapDump,
    class_id: u64,
    bytes: &[u8],
    arrays: &std::collections::HashMap<u64, Object>,
) -> Option<String> {
    let fields = dump.fields_of(class_id, bytes);
    let utf16 = fields
        .iter()
        .any(|(n, v)| n == "coder" && *v == Value::Primitive("1".into()));
    let Some(Object::PrimitiveArray { element, bytes }) =
        arrays.get(&string_value_id(dump, class_id, bytes)?)
    else {
        return None;
    };
    let text: String = match element {
        8 if !utf16 => bytes.iter().map(|&b| char::from(b)).collect(),
        // UTF-16 in a byte[] is in the JVM's byte order (little-endian here); char[] is
        // big-endian in the dump.
        8 => String::from_utf16_lossy(
            &bytes
                .chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]))
                .collect::<Vec<_>>(),
        ),
        5 => String::from_utf16_lossy(
            &bytes
                .chunks_exact(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]))
                .collect::<Vec<_>>(),
        ),
        _ => return None,
    };
    let shown: String = text.chars().take(MAX_STRING).collect();
    let more = if text.chars().count() > MAX_STRING {
        "..."
    } else {
        ""
    };
    Some(format!("{shown:?}{more}"))
}

fn primitive_array(element: u8, byte_length: usize, id: u64) -> String {
    let (name, size) = match element {
        4 => ("boolean", 1),
        5 => ("char", 2),
        6 => ("float", 4),
        7 => ("double", 8),
        8 => ("byte", 1),
        9 => ("short", 2),
        10 => ("int", 4),
        _ => ("long", 8),
    };
    format!("{name}[{}]@0x{id:x}", byte_length / size)
}
