//! The operators of handler bodies and the values they start with: defaults, Java's
//! assignment conversions, binary operators, `instanceof`, array and field reads.

use crate::ast::Type;
use crate::value::{self, Value};

/// The value a field or local of `ty` starts with.
pub(crate) fn default_of(ty: &Type) -> Value {
    match ty {
        Type::Boolean => Value::Bool(false),
        Type::Integral(_) => Value::Int(0),
        Type::Floating(_) => Value::Float(0.0),
        Type::String | Type::Object(_) => Value::Null,
    }
}

/// A value as a variable of `ty` holds it (`(int) 2.5` is 2, a `long` from an `int`, …).
pub(crate) fn coerce(ty: &Type, value: Value) -> Value {
    match (ty, value) {
        (Type::Integral(width), v @ (Value::Int(_) | Value::Float(_))) => {
            let n = v.as_int().unwrap_or(0);
            Value::Int(match *width {
                "byte" => n as i8 as i64,
                "short" => n as i16 as i64,
                "char" => n as u16 as i64,
                "int" => n as i32 as i64,
                _ => n,
            })
        }
        (Type::Floating(_), Value::Int(n)) => Value::Float(n as f64),
        (Type::String, v @ Value::Object(_)) => Value::str(&v.to_string()),
        (_, v) => v,
    }
}

/// `x op y` for Java's binary operators.
pub(crate) fn binary(op: &str, x: &Value, y: &Value) -> Result<Value, String> {
    use Value::{Bool, Float, Int};
    let fail = || format!("{op} does not apply to {x} and {y}");
    Ok(match (op, x, y) {
        ("+", Value::Str(_), _) | ("+", _, Value::Str(_)) => Value::built(format!("{x}{y}"))?,
        ("==", ..) => Bool(x.same(y)),
        ("!=", ..) => Bool(!x.same(y)),
        (_, Int(a), Int(b)) => match op {
            "+" => Int(a.wrapping_add(*b)),
            "-" => Int(a.wrapping_sub(*b)),
            "*" => Int(a.wrapping_mul(*b)),
            "/" | "%" if *b == 0 => return Err("division by zero".into()),
            "/" => Int(a.wrapping_div(*b)),
            "%" => Int(a.wrapping_rem(*b)),
            "<" => Bool(a < b),
            "<=" => Bool(a <= b),
            ">" => Bool(a > b),
            ">=" => Bool(a >= b),
            "&" => Int(a & b),
            "|" => Int(a | b),
            "^" => Int(a ^ b),
            "<<" => Int(a.wrapping_shl(*b as u32)),
            ">>" => Int(a.wrapping_shr(*b as u32)),
            ">>>" => Int(((*a as u64) >> (*b as u32 & 63)) as i64),
            _ => return Err(fail()),
        },
        (_, Int(_) | Float(_), Int(_) | Float(_)) => {
            let (a, b) = (x.as_float().unwrap_or(0.0), y.as_float().unwrap_or(0.0));
            match op {
                "+" => Float(a + b),
                "-" => Float(a - b),
                "*" => Float(a * b),
                "/" => Float(a / b),
                "%" => Float(a % b),
                "<" => Bool(a < b),
                "<=" => Bool(a <= b),
                ">" => Bool(a > b),
                ">=" => Bool(a >= b),
                _ => return Err(fail()),
            }
        }
        (_, Bool(a), Bool(b)) => match op {
            "&" => Bool(a & b),
            "|" => Bool(a | b),
            "^" => Bool(a ^ b),
            _ => return Err(fail()),
        },
        _ => return Err(fail()),
    })
}

/// `v instanceof ty`, as far as the value tells.
pub(crate) fn instance_of(v: &Value, ty: &str) -> bool {
    match v {
        Value::Null => false,
        Value::Str(_) => matches!(
            ty,
            "String" | "java.lang.String" | "Object" | "CharSequence"
        ),
        Value::Object(d) => d.starts_with(ty) || ty == "Object",
        _ => ty == "Object",
    }
}

/// `array[index]`.
pub(crate) fn element(array: Value, index: i64) -> Result<Value, String> {
    match array {
        Value::Array(items) | Value::Key(items) => items
            .get(usize::try_from(index).map_err(|_| format!("index {index} out of bounds"))?)
            .cloned()
            .ok_or_else(|| format!("index {index} out of bounds for length {}", items.len())),
        other => Err(format!("{other} is not an array")),
    }
}

/// `object.field`: a field of an object's description, or a string's or array's `length`.
pub(crate) fn field_of(object: &Value, field: &str) -> Result<Value, String> {
    match object {
        Value::Object(description) => value::field_of(description, field).ok_or_else(|| {
            // The class, not the whole description: the same error each call.
            let class = description.split(['@', '{']).next().unwrap_or("");
            format!(
                "{class} shows no field {field} (an object's description holds its first primitive, string, boxed and enum fields)"
            )
        }),
        Value::Str(s) if field == "length" => Ok(Value::Int(s.chars().count() as i64)),
        Value::Array(items) if field == "length" => Ok(Value::Int(items.len() as i64)),
        _ => Err(format!("{object} has no field {field}")),
    }
}
