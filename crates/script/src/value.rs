//! Values while a script runs, and how BTrace prints them (`str()`: Java's `toString()` for
//! primitives and strings; other objects as the agent described them, never by running their
//! `toString()`).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::fmt;
use std::rc::Rc;

use crate::limits::{MAX_ENTRIES, MAX_TEXT};
use crate::profiler::Profiler;

/// A value.
#[derive(Debug, Clone, Default)]
pub enum Value {
    /// `null`, and what a `void` method returns.
    #[default]
    Null,
    /// `boolean`.
    Bool(bool),
    /// `byte` … `long` (and `char` as its code).
    Int(i64),
    /// `float`, `double`.
    Float(f64),
    /// A string.
    Str(Rc<str>),
    /// An object of the application, as the agent described it (`Class@hash{...}`).
    Object(Rc<str>),
    /// A thread (`currentThread()`).
    Thread {
        /// Its name.
        name: Rc<str>,
        /// Its kernel id.
        tid: u32,
    },
    /// The arguments of a call (`AnyType[]`), or any array.
    Array(Rc<[Value]>),
    /// `Collections.newHashMap()`: insertion order kept.
    Map(Rc<RefCell<Vec<(Value, Value)>>>),
    /// `Collections.newDeque()`.
    Deque(Rc<RefCell<VecDeque<Value>>>),
    /// `Strings.newStringBuilder()`.
    Builder(Rc<RefCell<String>>),
    /// `Atomic.newAtomicInteger/Long`.
    Atomic(Rc<RefCell<i64>>),
    /// `Aggregations.newAggregation(...)`.
    Aggregation(Rc<RefCell<Aggregation>>),
    /// `Profiling.newProfiler()`, or a snapshot of one.
    Profiler(Rc<RefCell<Profiler>>),
    /// `Aggregations.newAggregationKey(...)`.
    Key(Rc<[Value]>),
    /// An enum constant of BTrace's API (`AggregationFunction.COUNT`).
    Constant(Rc<str>),
    /// `Reflective.field(class, name)`: a field, read from objects' descriptions by name.
    Field(Rc<str>),
    /// An `@Event` field (`JfrEvent.Factory`): the script's event type of this index.
    EventFactory(usize),
    /// `Jfr.prepareEvent(factory)`: an event being filled.
    Event(Rc<RefCell<crate::builtins::JfrEvent>>),
}

impl Value {
    /// A string value.
    pub fn str(text: &str) -> Value {
        Value::Str(Rc::from(text))
    }

    /// A string the script built, refused beyond [`MAX_TEXT`].
    pub fn built(text: String) -> Result<Value, String> {
        if text.len() > MAX_TEXT {
            return Err(format!(
                "a string of {} bytes: scripts' strings are capped at {} MiB",
                text.len(),
                MAX_TEXT >> 20
            ));
        }
        Ok(Value::Str(Rc::from(text.as_str())))
    }

    /// Reads back a value the agent described: `null`, booleans, numbers, quoted strings
    /// (with their escapes); anything else stays the object's description.
    pub fn from_described(text: &str) -> Value {
        match text {
            "null" => return Value::Null,
            "true" => return Value::Bool(true),
            "false" => return Value::Bool(false),
            _ => {}
        }
        if let Ok(n) = text.parse::<i64>() {
            return Value::Int(n);
        }
        if text.contains(['.', 'E', 'N', 'I']) {
            if let Ok(x) = text.parse::<f64>() {
                return Value::Float(x);
            }
        }
        if let Some(inner) = text
            .strip_prefix('"')
            .and_then(|t| t.strip_suffix('"').or_else(|| t.strip_suffix("\"...")))
        {
            return Value::Str(Rc::from(unescape(inner).as_str()));
        }
        Value::Object(Rc::from(text))
    }

    /// Java truthiness is only for booleans; other values are false.
    pub fn truthy(&self) -> bool {
        matches!(self, Value::Bool(true))
    }

    /// The value as an integer, when it is a number.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(n) => Some(*n),
            Value::Float(x) => Some(*x as i64),
            Value::Atomic(a) => Some(*a.borrow()),
            _ => None,
        }
    }

    /// The value as a float, when it is a number.
    pub fn as_float(&self) -> Option<f64> {
        match self {
            Value::Int(n) => Some(*n as f64),
            Value::Float(x) => Some(*x),
            _ => None,
        }
    }

    /// Equality as `==` and map keys see it: numbers by value, text by content.
    pub fn same(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::Null, Value::Null) => true,
            (Value::Bool(a), Value::Bool(b)) => a == b,
            (Value::Int(a), Value::Int(b)) => a == b,
            (a @ (Value::Int(_) | Value::Float(_)), b @ (Value::Int(_) | Value::Float(_))) => {
                a.as_float() == b.as_float()
            }
            (Value::Str(a), Value::Str(b)) | (Value::Object(a), Value::Object(b)) => a == b,
            (Value::Constant(a), Value::Constant(b)) | (Value::Field(a), Value::Field(b)) => a == b,
            (Value::Thread { tid: a, .. }, Value::Thread { tid: b, .. }) => a == b,
            (Value::Key(a), Value::Key(b)) => {
                a.len() == b.len() && a.iter().zip(b.iter()).all(|(x, y)| x.same(y))
            }
            (Value::Map(a), Value::Map(b)) => Rc::ptr_eq(a, b),
            (Value::Atomic(a), Value::Atomic(b)) => Rc::ptr_eq(a, b),
            (Value::Deque(a), Value::Deque(b)) => Rc::ptr_eq(a, b),
            (Value::Builder(a), Value::Builder(b)) => Rc::ptr_eq(a, b),
            (Value::Aggregation(a), Value::Aggregation(b)) => Rc::ptr_eq(a, b),
            (Value::Profiler(a), Value::Profiler(b)) => Rc::ptr_eq(a, b),
            (Value::Event(a), Value::Event(b)) => Rc::ptr_eq(a, b),
            (Value::EventFactory(a), Value::EventFactory(b)) => a == b,
            _ => false,
        }
    }
}

impl fmt::Display for Value {
    /// `str(value)`: as Java's `String.valueOf` shows primitives, strings and BTrace's own
    /// objects.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => f.write_str("null"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(n) => write!(f, "{n}"),
            Value::Float(x) => f.write_str(&java_double(*x)),
            Value::Str(s) | Value::Object(s) | Value::Constant(s) => f.write_str(s),
            Value::Field(name) => write!(f, "field {name}"),
            Value::Thread { name, .. } => write!(f, "Thread[{name}]"),
            Value::Array(items) | Value::Key(items) => write_list(f, items.iter()),
            Value::Deque(items) => write_list(f, items.borrow().iter()),
            Value::Builder(text) => f.write_str(&text.borrow()),
            Value::Map(map) => {
                f.write_str("{")?;
                for (i, (k, v)) in map.borrow().iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{k}={v}")?;
                }
                f.write_str("}")
            }
            Value::Atomic(a) => write!(f, "{}", a.borrow()),
            Value::Aggregation(_) => f.write_str("Aggregation"),
            Value::Profiler(_) => f.write_str("Profiler"),
            Value::EventFactory(_) => f.write_str("JfrEvent.Factory"),
            Value::Event(_) => f.write_str("JfrEvent"),
        }
    }
}

/// A list as Java's collections print: `[a, b]`.
fn write_list<'v>(
    f: &mut fmt::Formatter<'_>,
    items: impl Iterator<Item = &'v Value>,
) -> fmt::Result {
    f.write_str("[")?;
    for (i, item) in items.enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{item}")?;
    }
    f.write_str("]")
}

/// Java's `Double.toString`: a decimal point always, scientific notation outside
/// 10^-3..10^7.
fn java_double(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    let magnitude = x.abs();
    if magnitude == 0.0 || (1e-3..1e7).contains(&magnitude) {
        let text = format!("{x}");
        return if text.contains('.') {
            text
        } else {
            format!("{text}.0")
        };
    }
    let text = format!("{x:e}");
    let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
    let mantissa = if mantissa.contains('.') {
        mantissa.to_string()
    } else {
        format!("{mantissa}.0")
    };
    format!("{mantissa}E{exponent}")
}

/// Undoes the agent's escapes (`\n`, `\t`, `\"`, `\\`, `\u0001`).
fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    Some(c) => out.push(c),
                    None => out.push_str(&hex),
                }
            }
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

/// An aggregation: values folded per key by one function.
#[derive(Debug, Clone)]
pub struct Aggregation {
    /// The function (`COUNT`, `SUM`, `MINIMUM`, `MAXIMUM`, `AVERAGE`, `QUANTIZE`).
    pub function: String,
    /// Per key (empty key when none given), in the order keys came.
    pub rows: Vec<(Vec<Value>, Tally)>,
}

/// What an aggregation keeps of one key's values.
#[derive(Debug, Clone)]
pub struct Tally {
    /// How many values.
    pub count: i64,
    /// Their sum.
    pub sum: i64,
    /// The least.
    pub min: i64,
    /// The greatest.
    pub max: i64,
    /// `QUANTIZE`: how many fell in each power-of-two bucket ([`bucket`]); empty otherwise.
    pub buckets: Vec<u64>,
}

/// `QUANTIZE`'s buckets: bucket 64 holds zeroes; bucket `64 + 1 + k` the
/// values from 2^k to 2^(k+1) - 1, and the buckets below zero the negative values alike.
pub const BUCKETS: usize = 128;
const ZERO_BUCKET: usize = 64;

/// The `QUANTIZE` bucket of `value`.
pub fn bucket(value: i64) -> usize {
    let log2 = |v: u64| (63 - v.leading_zeros()) as usize;
    match value {
        0 => ZERO_BUCKET,
        v if v > 0 => ZERO_BUCKET + 1 + log2(v as u64),
        // As BTrace, whose special case is `Integer.MIN_VALUE`.
        v if v == i64::from(i32::MIN) => 0,
        v => ZERO_BUCKET - 1 - log2(v.unsigned_abs()),
    }
}

/// The smallest value of bucket `index` (its label when printed).
pub fn bucket_label(index: usize) -> i64 {
    match index {
        ZERO_BUCKET => 0,
        0 => i64::MIN,
        i if i > ZERO_BUCKET => 1i64 << (i - ZERO_BUCKET - 1),
        i => -(1i64 << (ZERO_BUCKET - i - 1)),
    }
}

impl Aggregation {
    /// An empty aggregation of `function`.
    pub fn new(function: &str) -> Aggregation {
        Aggregation {
            function: function.to_string(),
            rows: Vec::new(),
        }
    }

    /// Adds a value under a key; false when the key is new and the aggregation holds
    /// [`MAX_ENTRIES`] keys already.
    pub fn add(&mut self, key: Vec<Value>, value: i64) -> bool {
        let known = self
            .rows
            .iter()
            .position(|(k, _)| k.len() == key.len() && k.iter().zip(&key).all(|(a, b)| a.same(b)));
        let quantized = self.function == "QUANTIZE";
        let tally = match known {
            Some(i) => &mut self.rows[i].1,
            None if self.rows.len() >= MAX_ENTRIES => return false,
            None => {
                let tally = Tally {
                    count: 0,
                    sum: 0,
                    min: i64::MAX,
                    max: i64::MIN,
                    buckets: if quantized {
                        vec![0; BUCKETS]
                    } else {
                        Vec::new()
                    },
                };
                self.rows.push((key, tally));
                &mut self.rows.last_mut().expect("just pushed").1
            }
        };
        tally.count += 1;
        tally.sum = tally.sum.wrapping_add(value);
        tally.min = tally.min.min(value);
        tally.max = tally.max.max(value);
        if let Some(slot) = tally.buckets.get_mut(bucket(value)) {
            *slot += 1;
        }
        true
    }

    /// A row's value under this aggregation's function (`QUANTIZE`: the label of its highest
    /// bucket, which orders the rows).
    pub fn result(&self, tally: &Tally) -> i64 {
        match self.function.as_str() {
            "COUNT" => tally.count,
            "SUM" => tally.sum,
            "MINIMUM" => tally.min,
            "MAXIMUM" => tally.max,
            "QUANTIZE" => tally
                .buckets
                .iter()
                .rposition(|&n| n > 0)
                .map_or(0, bucket_label),
            _ => tally.sum / tally.count.max(1),
        }
    }
}

/// A field of an object as the agent described it, `pkg.Class@hash{name="x", id=3}`: the
/// description lists the first primitive, string, boxed and enum fields.
pub fn field_of(description: &str, field: &str) -> Option<Value> {
    let inner = description.split_once('{')?.1.strip_suffix('}')?;
    // Split at top-level commas (strings may hold commas and braces).
    let (mut depth, mut quoted, mut escaped, mut start) = (0i32, false, false, 0);
    let mut parts = Vec::new();
    for (i, c) in inner.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            '{' | '[' if !quoted => depth += 1,
            '}' | ']' if !quoted => depth -= 1,
            ',' if !quoted && depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts.into_iter().find_map(|part| {
        let (name, value) = part.trim().split_once('=')?;
        (name == field).then(|| Value::from_described(value))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn described_values_read_back_typed() {
        assert!(matches!(Value::from_described("42"), Value::Int(42)));
        assert!(matches!(Value::from_described("-7"), Value::Int(-7)));
        assert!(matches!(Value::from_described("true"), Value::Bool(true)));
        assert!(matches!(Value::from_described("null"), Value::Null));
        assert!(matches!(Value::from_described("2.5"), Value::Float(x) if x == 2.5));
        let s = Value::from_described("\"a \\\"b\\\"\\n\"");
        assert_eq!(s.to_string(), "a \"b\"\n");
        let o = Value::from_described("app.Order@1f2e{id=3}");
        assert!(matches!(o, Value::Object(_)));
        assert_eq!(o.to_string(), "app.Order@1f2e{id=3}");
    }

    #[test]
    fn doubles_print_as_java_prints_them() {
        assert_eq!(java_double(1.0), "1.0");
        assert_eq!(java_double(2.5), "2.5");
        assert_eq!(java_double(1e7), "1.0E7");
        assert_eq!(java_double(1.5e-4), "1.5E-4");
        assert_eq!(java_double(0.0), "0.0");
    }
}
