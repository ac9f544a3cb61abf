//! Printing, `Strings` and `Numbers`.

use super::aggregations::print_aggregation;
use super::{Call, Context};
use std::rc::Rc;

use crate::limits::MAX_TEXT;
use crate::value::Value;

/// Printing: `print`, `println`, `printArray`, `printMap`, `printAggregation`, …
pub(super) fn output(c: &Call, cx: &mut Context) -> Result<Option<Value>, String> {
    match (c.name, c.args.len()) {
        ("print", 1) => cx.out.push_str(&c.text(0)),
        ("println", 0) => cx.out.push('\n'),
        ("println" | "printArray" | "printFields", 1) => {
            cx.out.push_str(&c.text(0));
            cx.out.push('\n');
        }
        ("printMap", 1) => print_map("", &c.arg(0), cx.out),
        ("printNumberMap" | "printStringMap" | "printMap", 2) => {
            print_map(&c.text(0), &c.arg(1), cx.out)
        }
        ("printNumber", 2) => {
            let name = c.text(0);
            if !name.is_empty() {
                cx.out.push_str(&name);
                cx.out.push_str(" = ");
            }
            cx.out.push_str(&c.text(1));
            cx.out.push('\n');
        }
        ("printAggregation", 2) => {
            cx.out.push_str(&c.text(0));
            cx.out.push('\n');
            if let Value::Aggregation(agg) = c.arg(1) {
                print_aggregation(&agg.borrow(), cx.out);
            }
        }
        ("__print", _) => {
            let values: Vec<String> = c.args.iter().map(Value::to_string).collect();
            cx.out.push_str(&values.join(", "));
            cx.out.push('\n');
        }
        _ => return Ok(None),
    }
    Ok(Some(Value::Null))
}

/// `Strings`.
pub(super) fn strings(c: &Call, _: &mut Context) -> Result<Option<Value>, String> {
    let s = Value::str;
    let text = |i: usize| c.text(i);
    Ok(Some(match (c.name, c.args.len()) {
        ("str", 1) => s(&text(0)),
        ("strcat" | "concat", 2) => Value::built(text(0) + &text(1))?,
        ("strlen" | "length", 1) => Value::Int(text(0).chars().count() as i64),
        ("substr", 2 | 3) => {
            let chars: Vec<char> = text(0).chars().collect();
            let start = c.int(1)?.clamp(0, chars.len() as i64) as usize;
            let end = if c.args.len() == 3 {
                c.int(2)?.clamp(start as i64, chars.len() as i64) as usize
            } else {
                chars.len()
            };
            s(&chars[start..end].iter().collect::<String>())
        }
        ("indexOf", 2) => Value::Int(char_index(&text(0), text(0).find(&text(1)))),
        ("lastIndexOf", 2) => Value::Int(char_index(&text(0), text(0).rfind(&text(1)))),
        ("startsWith", 2) => Value::Bool(text(0).starts_with(&text(1))),
        ("endsWith", 2) => Value::Bool(text(0).ends_with(&text(1))),
        ("matches", 2) => {
            // BTrace: matches(regex, string).
            let re = regex::Regex::new(&format!("^(?:{})$", text(0)))
                .map_err(|e| format!("matches: bad regular expression: {e}"))?;
            Value::Bool(re.is_match(&text(1)))
        }
        ("toUpperCase", 1) => s(&text(0).to_uppercase()),
        ("toLowerCase", 1) => s(&text(0).to_lowercase()),
        ("compareTo" | "strcmp", 2) => Value::Int(java_compare(&text(0), &text(1), |u| u)),
        ("compareToIgnoreCase" | "stricmp", 2) => {
            Value::Int(java_compare(&text(0), &text(1), fold_case))
        }
        ("strstr", 2) => Value::Int(char_index(&text(0), text(0).find(&text(1)))),
        ("toHexString", 1) => s(&to_hex(c.int(0)?)),
        // A pattern is its regular expression, with Java's flags written inline.
        ("regexp" | "pattern", 1 | 2) => {
            let flags = if c.args.len() == 2 { c.int(1)? } else { 0 };
            let regex = inline_flags(flags) + &text(0);
            regex::Regex::new(&regex)
                .map_err(|e| format!("{}: bad regular expression: {e}", c.name))?;
            s(&regex)
        }
        ("newStringBuilder", 0 | 1) => Value::Builder(Rc::default()),
        ("append", 2) => match c.arg(0) {
            Value::Builder(builder) => {
                let grown = builder.borrow().len() + text(1).len();
                if grown > MAX_TEXT {
                    return Err(format!(
                        "append: scripts' strings are capped at {} MiB",
                        MAX_TEXT >> 20
                    ));
                }
                builder.borrow_mut().push_str(&text(1));
                Value::Builder(builder)
            }
            other => return Err(format!("append: {other} is not a string builder")),
        },
        // Java's `identityHashCode`, `identityStr` and `compare`, from the agent's
        // descriptions (`pkg.Class@hash{...}`): only objects have an identity.
        ("identityHashCode", 1) => Value::Int(identity(&c.arg(0), c.name)?.1),
        ("identityStr", 1) => {
            let (class, hash) = identity(&c.arg(0), c.name)?;
            s(&format!("{class}@{:x}", hash as u32))
        }
        ("compare", 2) => Value::Bool(match (c.arg(0), c.arg(1)) {
            (Value::Object(a), Value::Object(b)) => identity_of(&a) == identity_of(&b),
            (a, b) => a.same(&b),
        }),
        _ => return Ok(None),
    }))
}

/// Prints a map as BTrace does: its name on a line (when it has one), then `key = value`
/// lines.
fn print_map(name: &str, map: &Value, out: &mut String) {
    if !name.is_empty() {
        out.push_str(name);
        out.push('\n');
    }
    if let Value::Map(map) = map {
        for (k, v) in map.borrow().iter() {
            out.push_str(&format!("{k} = {v}\n"));
        }
    }
}

/// Java's `String.compareTo` on UTF-16 units mapped by `unit`: the difference of the
/// first units that differ, else of the lengths.
fn java_compare(a: &str, b: &str, unit: fn(u16) -> u16) -> i64 {
    let (a, b): (Vec<u16>, Vec<u16>) = (a.encode_utf16().collect(), b.encode_utf16().collect());
    a.iter()
        .zip(&b)
        .map(|(&x, &y)| i64::from(unit(x)) - i64::from(unit(y)))
        .find(|&d| d != 0)
        .unwrap_or(a.len() as i64 - b.len() as i64)
}

/// `Character.toLowerCase(Character.toUpperCase(c))`, as `compareToIgnoreCase` folds a unit.
fn fold_case(unit: u16) -> u16 {
    let Some(c) = char::from_u32(u32::from(unit)) else {
        return unit;
    };
    let upper = only(c.to_uppercase()).unwrap_or(c);
    let lower = only(upper.to_lowercase()).unwrap_or(upper);
    u16::try_from(u32::from(lower)).unwrap_or(unit)
}

/// The one char of a case mapping (none when it maps to several).
fn only(mut chars: impl Iterator<Item = char>) -> Option<char> {
    let first = chars.next()?;
    chars.next().is_none().then_some(first)
}

/// `Integer.toHexString` for values an `int` holds, `Long.toHexString` beyond.
fn to_hex(n: i64) -> String {
    match i32::try_from(n) {
        Ok(int) => format!("{:x}", int as u32),
        Err(_) => format!("{:x}", n as u64),
    }
}

/// `java.util.regex.Pattern`'s flags as inline flags of a regular expression.
fn inline_flags(flags: i64) -> String {
    let letters: String = [(2, 'i'), (4, 'x'), (8, 'm'), (32, 's')]
        .iter()
        .filter(|(bit, _)| flags & bit != 0)
        .map(|&(_, letter)| letter)
        .collect();
    match letters.is_empty() {
        true => letters,
        false => format!("(?{letters})"),
    }
}

/// An object's class and identity hash, from its description.
fn identity(value: &Value, function: &str) -> Result<(String, i64), String> {
    let described = match value {
        Value::Object(text) => identity_of(text),
        _ => None,
    };
    described.ok_or_else(|| format!("{function}: {value} has no identity jtap knows (only objects the agent described have one)"))
}

/// `pkg.Class@hash` of a description: the class and the identity hash.
fn identity_of(description: &str) -> Option<(String, i64)> {
    let (class, rest) = description.split_once('@')?;
    let hex: String = rest.chars().take_while(char::is_ascii_hexdigit).collect();
    let hash = u32::from_str_radix(&hex, 16).ok()? as i32;
    Some((class.to_string(), i64::from(hash)))
}

fn char_index(text: &str, byte: Option<usize>) -> i64 {
    byte.map_or(-1, |b| text[..b].chars().count() as i64)
}
