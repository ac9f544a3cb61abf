//! What a handler's parameters receive from the probe that fired it, by their [`Role`].

use jtap_protocol::records::{Callee, Point};

use crate::ast::Role;
use crate::firing::Fired;
use crate::value::Value;

/// What a handler parameter of `role` receives from `probe`; `arg_values` are the probed
/// method's arguments (`@AllArgs` takes them).
pub(crate) fn role_value(
    role: &Role,
    probe: &Fired,
    arg_values: &mut impl Iterator<Item = Value>,
) -> Value {
    match role {
        Role::ClassName => Value::str(&probe.class),
        Role::MethodName { fqn: false } => Value::str(&probe.method),
        Role::MethodName { fqn: true } => Value::str(&format!("{}.{}", probe.class, probe.method)),
        Role::TargetMethod { fqn } => match (&probe.callee, &probe.point) {
            (Some(callee), _) => Value::str(&target_method(callee, *fqn)),
            (None, Some(Point::FieldGet(access) | Point::FieldSet(access))) => {
                Value::str(&target_field(&access.field, *fqn))
            }
            _ => Value::Null,
        },
        Role::FieldValue => match &probe.point {
            Some(Point::FieldSet(access)) => Value::from_described(&access.value),
            _ => Value::Null,
        },
        Role::Line => match &probe.point {
            Some(Point::Line(line)) => Value::Int(i64::from(*line)),
            _ => Value::Int(-1),
        },
        Role::NewClass => match &probe.point {
            Some(Point::New(class)) => Value::str(class),
            _ => Value::Null,
        },
        Role::ArrayType => match &probe.point {
            Some(Point::NewArray { element, .. }) => Value::str(element),
            _ => Value::Null,
        },
        Role::ArrayDimensions => match &probe.point {
            Some(Point::NewArray { dimensions, .. }) => Value::Int(i64::from(*dimensions)),
            _ => Value::Int(0),
        },
        Role::Lock => match &probe.point {
            Some(Point::SyncEnter(lock) | Point::SyncExit(lock)) => Value::from_described(lock),
            _ => Value::Null,
        },
        Role::Operand(k) => match &probe.point {
            Some(Point::Insn(insn)) if insn.kind.starts_with('a') => insn
                .values
                .get(*k)
                .map_or(Value::Null, |v| Value::from_described(v)),
            _ => Value::Null,
        },
        Role::CheckedType => match &probe.point {
            Some(Point::Insn(insn)) => Value::str(&insn.detail),
            _ => Value::Null,
        },
        Role::Duration => Value::Int(probe.duration_ns as i64),
        Role::Return => match (&probe.returned, &probe.point) {
            (Some(returned), _) => Value::from_described(returned),
            (None, Some(Point::FieldGet(access))) => Value::from_described(&access.value),
            // An array read's element follows its index.
            (None, Some(Point::Insn(insn))) if insn.kind == "aget" => insn
                .values
                .get(1)
                .map_or(Value::Null, |v| Value::from_described(v)),
            _ => Value::Null,
        },
        Role::Thrown => probe
            .thrown
            .as_deref()
            .map_or(Value::Null, Value::from_described),
        Role::TargetInstance => match (&probe.target, &probe.point) {
            (Some(target), _) => Value::from_described(target),
            (None, Some(Point::FieldGet(access) | Point::FieldSet(access))) => {
                Value::from_described(&access.target)
            }
            (None, Some(Point::Insn(insn))) => Value::from_described(&insn.target),
            _ => Value::Null,
        },
        Role::This => probe
            .values
            .first()
            .map_or(Value::Null, |v| Value::from_described(v)),
        Role::Arg(i) => probe
            .values
            .get(i + 1)
            .map_or(Value::Null, |v| Value::from_described(v)),
        Role::AllArgs => Value::Array(arg_values.by_ref().collect::<Vec<_>>().into()),
        Role::Plain => Value::Null,
    }
}

/// The size the agent measured of what a parameter of `role` receives, if it did.
pub(crate) fn role_size(role: &Role, probe: &Fired) -> Option<u64> {
    match role {
        Role::This => probe.sizes.first().copied(),
        Role::Arg(i) => probe.sizes.get(i + 1).copied(),
        Role::Return => probe.returned_size,
        Role::TargetInstance => probe.target_size,
        _ => None,
    }
}

/// `@TargetMethodOrField`: the called method's name, or with `fqn` as BTrace writes it:
/// how it is called, its return type, `Class#name` and its parameter types when it has
/// some (`virtual java.lang.String java.lang.String#toUpperCase`,
/// `static void app.Db#query(java.lang.String, int[])`).
fn target_method(callee: &Callee, fqn: bool) -> String {
    if !fqn {
        return callee.method.clone();
    }
    let (params, ret) = java_types(&callee.descriptor);
    let mut text = format!("{} {ret} {}#{}", callee.invoke, callee.class, callee.method);
    if !params.is_empty() {
        text.push_str(&format!("({})", params.join(", ")));
    }
    text
}

/// A field as `@TargetMethodOrField` gives it: its name, or with `fqn` `pkg.Class.field`
/// (`field` is the latter).
fn target_field(field: &str, fqn: bool) -> String {
    match fqn {
        true => field.to_string(),
        false => field.rsplit('.').next().unwrap_or(field).to_string(),
    }
}

/// A method descriptor's parameter and return types as Java writes them.
fn java_types(descriptor: &str) -> (Vec<String>, String) {
    let mut types = Vec::new();
    let mut rest = descriptor.trim_start_matches('(');
    let mut params = None;
    while let Some(c) = rest.chars().next() {
        if c == ')' {
            params = Some(std::mem::take(&mut types));
            rest = &rest[1..];
            continue;
        }
        let dims = rest.len() - rest.trim_start_matches('[').len();
        rest = &rest[dims..];
        let (base, len) = match rest.as_bytes().first() {
            Some(b'L') => {
                let end = rest.find(';').unwrap_or(rest.len() - 1);
                (rest[1..end].replace('/', "."), end + 1)
            }
            Some(code) => {
                let name = match code {
                    b'Z' => "boolean",
                    b'B' => "byte",
                    b'C' => "char",
                    b'S' => "short",
                    b'I' => "int",
                    b'J' => "long",
                    b'F' => "float",
                    b'D' => "double",
                    _ => "void",
                };
                (name.to_string(), 1)
            }
            None => break,
        };
        types.push(format!("{base}{}", "[]".repeat(dims)));
        rest = &rest[len.min(rest.len())..];
    }
    let ret = types.pop().unwrap_or_else(|| "void".into());
    (params.unwrap_or_default(), ret)
}
