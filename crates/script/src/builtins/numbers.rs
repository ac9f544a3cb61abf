//! `Numbers`: parsing as Java's `parseX` do, `Math`'s functions, boxing.

use std::cell::Cell;

use super::{now_ns, Call, Context};
use crate::value::Value;

/// `Numbers`.
pub(super) fn numbers(c: &Call, _: &mut Context) -> Result<Option<Value>, String> {
    let name = c.name;
    let float = |i: usize| {
        c.arg(i)
            .as_float()
            .ok_or_else(|| format!("{name}: argument {} is not a number", i + 1))
    };
    Ok(Some(match (name, c.args.len()) {
        ("parseInt" | "parseLong" | "parseShort" | "parseByte", 1) => {
            Value::Int(parse_integer(name, &c.text(0))?)
        }
        ("parseFloat" | "parseDouble", 1) => Value::Float(parse_float(name, &c.text(0))?),
        ("parseBoolean", 1) => Value::Bool(c.text(0).eq_ignore_ascii_case("true")),
        ("exp", 1) => Value::Float(float(0)?.exp()),
        ("log", 1) => Value::Float(float(0)?.ln()),
        ("log10", 1) => Value::Float(float(0)?.log10()),
        ("isNaN", 1) => Value::Bool(float(0)?.is_nan()),
        ("isInfinite", 1) => Value::Bool(float(0)?.is_infinite()),
        ("random", 0) => Value::Int(i64::from(random_int())),
        ("box" | "unbox", 1) => c.arg(0),
        _ => return Ok(None),
    }))
}

/// Java's `Integer.parseInt` and its kin: decimal, an optional sign, no spaces, within the
/// type's range.
fn parse_integer(function: &str, text: &str) -> Result<i64, String> {
    let (min, max) = match function {
        "parseByte" => (i64::from(i8::MIN), i64::from(i8::MAX)),
        "parseShort" => (i64::from(i16::MIN), i64::from(i16::MAX)),
        "parseInt" => (i64::from(i32::MIN), i64::from(i32::MAX)),
        _ => (i64::MIN, i64::MAX),
    };
    text.trim()
        .parse::<i64>()
        .ok()
        .filter(|n| (min..=max).contains(n))
        .ok_or_else(|| format!("{function}: For input string: \"{text}\""))
}

/// Java's `Double.parseDouble`: spaces around and a `d`/`f` suffix allowed.
fn parse_float(function: &str, text: &str) -> Result<f64, String> {
    let trimmed = text.trim();
    let number = trimmed
        .strip_suffix(['d', 'D', 'f', 'F'])
        .unwrap_or(trimmed);
    let parsed = match number {
        "NaN" => Some(f64::NAN),
        "Infinity" | "+Infinity" => Some(f64::INFINITY),
        "-Infinity" => Some(f64::NEG_INFINITY),
        // Rust's own spellings of these (`inf`, `nan`) are no Java number.
        _ if number.to_ascii_lowercase().contains(['i', 'n']) => None,
        _ => number.parse().ok(),
    };
    parsed.ok_or_else(|| format!("{function}: For input string: \"{text}\""))
}

thread_local! {
    /// The state of [`random_int`]'s generator, seeded by the clock on first use.
    static RANDOM: Cell<u64> = const { Cell::new(0) };
}

/// A pseudo-random `int` (xorshift64*), as `Numbers.random()` gives one.
fn random_int() -> i32 {
    RANDOM.with(|state| {
        let mut x = state.get();
        if x == 0 {
            x = (now_ns() as u64) | 1;
        }
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        state.set(x);
        (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) as i32
    })
}
