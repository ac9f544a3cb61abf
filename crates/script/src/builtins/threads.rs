//! `Threads`, `Time` and `Reflective`: the probe's thread and stack, clocks, and objects as
//! the agent described them.

use std::rc::Rc;

use super::{facts, now_ns, Call, Context};
use jtap_protocol::records::Point;

use crate::firing::Fired;
use crate::value::{self, Value};

/// `Threads` and `Time`: stacks, the current thread, clocks and timestamps.
pub(super) fn threads_and_time(c: &Call, cx: &mut Context) -> Result<Option<Value>, String> {
    let s = Value::str;
    Ok(Some(match (c.name, c.args.len()) {
        ("jstack" | "jstackStr", 0 | 1) => {
            let limit = if c.args.len() == 1 {
                c.int(0)?.max(0) as usize
            } else {
                usize::MAX
            };
            let frames = cx.probe.map(|p| p.stack.as_slice()).unwrap_or_default();
            let mut stack = String::new();
            for frame in frames.iter().take(limit) {
                stack.push_str(frame);
                stack.push('\n');
            }
            if c.name == "jstackStr" {
                return Ok(Some(s(&stack)));
            }
            cx.out.push_str(&stack);
            Value::Null
        }
        ("currentThread", 0) => match cx.probe {
            Some(p) => Value::Thread {
                name: Rc::from(p.thread.as_str()),
                tid: p.tid,
            },
            None => Value::Thread {
                name: Rc::from("jtap"),
                tid: 0,
            },
        },
        ("name", 1) => match c.arg(0) {
            Value::Thread { name, .. } => Value::Str(name),
            other => s(&other.to_string()),
        },
        ("threadId", 1) => match c.arg(0) {
            Value::Thread { tid, .. } => Value::Int(i64::from(tid)),
            _ => Value::Int(0),
        },
        ("timeMillis" | "millis", 0) => Value::Int(now_ns() / 1_000_000),
        ("timeNanos" | "nanos", 0) => Value::Int(now_ns()),
        // Where the probe fired (BTrace's deprecated forms of `@ProbeClassName` and
        // `@ProbeMethodName`, and the line of the probed method's frame).
        ("probeClass", 0) => cx.probe.map_or(Value::Null, |p| s(&p.class)),
        ("probeMethod", 0) => cx.probe.map_or(Value::Null, |p| s(&p.method)),
        ("probeLine", 0) => Value::Int(cx.probe.and_then(probe_line).unwrap_or(-1)),
        ("timestamp", 0 | 1) => {
            // `new SimpleDateFormat()`'s pattern (en_US) unless given one.
            let pattern = if c.args.is_empty() {
                "M/d/yy, h:mm a".to_string()
            } else {
                c.text(0)
            };
            let now_ms = now_ns() / 1_000_000;
            let offset = facts(cx, c.name)?.utc_offset_seconds(now_ms.div_euclid(1000));
            s(&crate::time::format(&pattern, now_ms, offset)?)
        }
        _ => return Ok(None),
    }))
}

/// `Reflective`: a field handle is its name; an object's value of it comes from the
/// object's description (its first primitive, string, boxed and enum fields).
pub(super) fn reflection(c: &Call, _: &mut Context) -> Result<Option<Value>, String> {
    let s = Value::str;
    Ok(Some(match (c.name, c.args.len()) {
        ("field", 2 | 3) => Value::Field(c.text(1).into()),
        // An object's class, as its description names it (`pkg.Class@hash{...}`).
        ("classOf", 1) => match c.arg(0) {
            Value::Object(description) => s(description.split(['@', '{']).next().unwrap_or("")),
            Value::Str(_) => s("java.lang.String"),
            other => return Err(format!("classOf: {other} is not an object")),
        },
        // A class is its name: nothing is loaded or initialised in the JVM.
        ("classForName", 1 | 2) => s(&c.text(0)),
        ("isArray", 1) => Value::Bool(is_array(&c.text(0))),
        ("isPrimitive", 1) => Value::Bool(PRIMITIVES.contains(&c.text(0).as_str())),
        ("getComponentType", 1) => {
            let class = c.text(0);
            match class.strip_suffix("[]") {
                Some(component) => s(component),
                None if is_array(&class) => s(&java_type(&class[1..])),
                None => Value::Null,
            }
        }
        // The values a handler holds are copies: a reference to one is the value itself.
        ("weakRef" | "softRef" | "deref", 1) => c.arg(0),
        (
            "get" | "getInt" | "getLong" | "getShort" | "getByte" | "getChar" | "getBoolean"
            | "getFloat" | "getDouble",
            2,
        ) if matches!(c.arg(0), Value::Field(_)) => read_field(&c.arg(0), &c.arg(1), c.name)?,
        _ => return Ok(None),
    }))
}

/// Java's primitive types, as `Class.getName()` names them.
const PRIMITIVES: [&str; 9] = [
    "boolean", "byte", "char", "short", "int", "long", "float", "double", "void",
];

/// Whether a class name is an array's, as Java (`[I`, `[Ljava.lang.String;`) or source
/// (`int[]`) writes it.
fn is_array(class: &str) -> bool {
    class.starts_with('[') || class.ends_with("[]")
}

/// A type descriptor (`I`, `Ljava.lang.String;`, `[J`) as a class name (`int`,
/// `java.lang.String`, `[J`).
fn java_type(descriptor: &str) -> String {
    let primitive = match descriptor {
        "Z" => "boolean",
        "B" => "byte",
        "C" => "char",
        "S" => "short",
        "I" => "int",
        "J" => "long",
        "F" => "float",
        "D" => "double",
        _ => "",
    };
    match descriptor
        .strip_prefix('L')
        .and_then(|d| d.strip_suffix(';'))
    {
        Some(class) => class.to_string(),
        None if primitive.is_empty() => descriptor.to_string(),
        None => primitive.to_string(),
    }
}

/// The source line the probe fired at: the line a `Kind.LINE` probe reached, else the
/// probed method's frame's line in its stack.
fn probe_line(probe: &Fired) -> Option<i64> {
    if let Some(Point::Line(line)) = probe.point {
        return Some(i64::from(line));
    }
    let frame = probe.stack.first()?;
    let line = frame.strip_suffix(')')?.rsplit_once(':')?.1;
    line.parse().ok()
}

/// `Reflective.get*(field, object)`: the field's value in the object's description.
fn read_field(field: &Value, object: &Value, function: &str) -> Result<Value, String> {
    let Value::Field(field) = field else {
        return Err(format!("{function}: {field} is not a field"));
    };
    match object {
        Value::Object(description) => value::field_of(description, field).ok_or_else(|| {
            let class = description.split(['@', '{']).next().unwrap_or("");
            format!("{function}: {class} shows no field {field} (an object's description holds its first primitive, string, boxed and enum fields)")
        }),
        Value::Null => Err(format!("{function}: reading field {field} of null")),
        other => Err(format!("{function}: {other} is not an object")),
    }
}
