//! Printing, `Strings` and `Numbers`.

use super::aggregations::print_aggregation;
use super::{Call, Context};
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
        ("printNumberMap" | "printMap", 2) => {
            cx.out.push_str(&c.text(0));
            cx.out.push('\n');
            if let Value::Map(map) = c.arg(1) {
                for (k, v) in map.borrow().iter() {
                    cx.out.push_str(&format!("{k} = {v}\n"));
                }
            }
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
        ("compareTo", 2) => Value::Int(match text(0).cmp(&text(1)) {
            std::cmp::Ordering::Less => -1,
            std::cmp::Ordering::Equal => 0,
            std::cmp::Ordering::Greater => 1,
        }),
        _ => return Ok(None),
    }))
}

/// Numbers: parsing, boxing.
pub(super) fn numbers(c: &Call, _: &mut Context) -> Result<Option<Value>, String> {
    let name = c.name;
    Ok(Some(match (name, c.args.len()) {
        ("parseInt" | "parseLong", 1) => Value::Int(
            c.text(0)
                .trim()
                .parse()
                .map_err(|_| format!("{name}: {:?} is not a number", c.text(0)))?,
        ),
        ("box" | "unbox", 1) => c.arg(0),
        _ => return Ok(None),
    }))
}

fn char_index(text: &str, byte: Option<usize>) -> i64 {
    byte.map_or(-1, |b| text[..b].chars().count() as i64)
}
