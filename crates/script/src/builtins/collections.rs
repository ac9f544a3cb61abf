//! `Collections` and `Atomic`.

use std::cell::RefCell;
use std::rc::Rc;

use super::{Call, Context};
use crate::limits::MAX_ENTRIES;
use crate::value::Value;

/// Maps (`Collections`).
pub(super) fn maps(c: &Call, _: &mut Context) -> Result<Option<Value>, String> {
    let (name, arg) = (c.name, |i: usize| c.arg(i));
    Ok(Some(match (name, c.args.len()) {
        ("newHashMap" | "newWeakMap", 0) => Value::Map(Rc::new(RefCell::new(Vec::new()))),
        ("put", 3) => map_op(&arg(0), name, |m| {
            let key = arg(1);
            let full = m.len() >= MAX_ENTRIES;
            match m.iter_mut().find(|(k, _)| k.same(&key)) {
                Some((_, v)) => Ok(std::mem::replace(v, arg(2))),
                None if full => Err(format!("put: maps are capped at {MAX_ENTRIES} entries")),
                None => {
                    m.push((key, arg(2)));
                    Ok(Value::Null)
                }
            }
        })??,
        ("get", 2) => map_op(&arg(0), name, |m| {
            m.iter()
                .find(|(k, _)| k.same(&arg(1)))
                .map_or(Value::Null, |(_, v)| v.clone())
        })?,
        ("containsKey", 2) => map_op(&arg(0), name, |m| {
            Value::Bool(m.iter().any(|(k, _)| k.same(&arg(1))))
        })?,
        ("remove", 2) => map_op(&arg(0), name, |m| {
            match m.iter().position(|(k, _)| k.same(&arg(1))) {
                Some(i) => m.remove(i).1,
                None => Value::Null,
            }
        })?,
        ("containsValue", 2) => map_op(&arg(0), name, |m| {
            Value::Bool(m.iter().any(|(_, v)| v.same(&arg(1))))
        })?,
        // `putAll(src, dst)`; `copy(src, dst)` clears `dst` first.
        ("putAll" | "copy", 2) => {
            let source = map_op(&arg(0), name, |m| m.clone())?;
            map_op(&arg(1), name, |m| {
                if name == "copy" {
                    m.clear();
                }
                for (key, value) in source {
                    let full = m.len() >= MAX_ENTRIES;
                    match m.iter_mut().find(|(k, _)| k.same(&key)) {
                        Some((_, v)) => *v = value,
                        None if full => {
                            return Err(format!("{name}: maps are capped at {MAX_ENTRIES} entries"))
                        }
                        None => m.push((key, value)),
                    }
                }
                Ok(Value::Null)
            })??
        }
        ("size", 1) => map_op(&arg(0), name, |m| Value::Int(m.len() as i64))?,
        ("isEmpty", 1) => map_op(&arg(0), name, |m| Value::Bool(m.is_empty()))?,
        ("clear", 1) => map_op(&arg(0), name, |m| {
            m.clear();
            Value::Null
        })?,
        _ => return Ok(None),
    }))
}

/// Deques (`Collections.newDeque()`), and `contains`/`toArray` of any collection.
pub(super) fn deques(c: &Call, _: &mut Context) -> Result<Option<Value>, String> {
    let name = c.name;
    if let ("contains", 2, Value::Array(items)) = (name, c.args.len(), c.arg(0)) {
        return Ok(Some(Value::Bool(items.iter().any(|v| v.same(&c.arg(1))))));
    }
    if name == "newDeque" && c.args.is_empty() {
        return Ok(Some(Value::Deque(Rc::default())));
    }
    let Value::Deque(deque) = c.arg(0) else {
        return Ok(None);
    };
    let mut deque = deque.borrow_mut();
    let empty = |what: &str| format!("{name}: the deque is empty ({what})");
    Ok(Some(match (name, c.args.len()) {
        ("push" | "addLast", 2) if deque.len() >= MAX_ENTRIES => {
            return Err(format!(
                "{name}: deques are capped at {MAX_ENTRIES} elements"
            ))
        }
        ("push", 2) => {
            deque.push_front(c.arg(1));
            Value::Null
        }
        ("addLast", 2) => {
            deque.push_back(c.arg(1));
            Value::Null
        }
        ("poll", 1) => deque.pop_front().unwrap_or_default(),
        ("peek" | "peekFirst", 1) => deque.front().cloned().unwrap_or_default(),
        ("peekLast", 1) => deque.back().cloned().unwrap_or_default(),
        ("removeFirst", 1) => deque
            .pop_front()
            .ok_or_else(|| empty("NoSuchElementException"))?,
        ("removeLast", 1) => deque
            .pop_back()
            .ok_or_else(|| empty("NoSuchElementException"))?,
        ("contains", 2) => Value::Bool(deque.iter().any(|v| v.same(&c.arg(1)))),
        ("toArray", 1) => Value::Array(deque.iter().cloned().collect()),
        ("size", 1) => Value::Int(deque.len() as i64),
        ("isEmpty", 1) => Value::Bool(deque.is_empty()),
        ("clear", 1) => {
            deque.clear();
            Value::Null
        }
        _ => return Ok(None),
    }))
}

/// Atomics (`Atomic`).
pub(super) fn atomics(c: &Call, _: &mut Context) -> Result<Option<Value>, String> {
    let (name, arg) = (c.name, |i: usize| c.arg(i));
    Ok(Some(match (name, c.args.len()) {
        ("newAtomicInteger" | "newAtomicLong", 1) => {
            Value::Atomic(Rc::new(RefCell::new(c.int(0)?)))
        }
        ("get", 1) => match arg(0) {
            Value::Atomic(a) => Value::Int(*a.borrow()),
            other => return Err(format!("get: {other} is not an atomic")),
        },
        ("getAndSet", 2) => {
            let new = c.int(1)?;
            atomic(&arg(0), name, |a| Value::Int(std::mem::replace(a, new)))?
        }
        ("compareAndSet" | "weakCompareAndSet", 3) => {
            let (expected, new) = (c.int(1)?, c.int(2)?);
            atomic(&arg(0), name, |a| {
                let swapped = *a == expected;
                if swapped {
                    *a = new;
                }
                Value::Bool(swapped)
            })?
        }
        ("set" | "lazySet", 2) => atomic(&arg(0), name, |a| {
            *a = c.int(1).unwrap_or(0);
            Value::Null
        })?,
        ("incrementAndGet", 1) => atomic(&arg(0), name, |a| {
            *a += 1;
            Value::Int(*a)
        })?,
        ("decrementAndGet", 1) => atomic(&arg(0), name, |a| {
            *a -= 1;
            Value::Int(*a)
        })?,
        ("getAndIncrement", 1) => atomic(&arg(0), name, |a| {
            *a += 1;
            Value::Int(*a - 1)
        })?,
        ("getAndDecrement", 1) => atomic(&arg(0), name, |a| {
            *a -= 1;
            Value::Int(*a + 1)
        })?,
        ("addAndGet", 2) => {
            let d = c.int(1)?;
            atomic(&arg(0), name, |a| {
                *a += d;
                Value::Int(*a)
            })?
        }
        ("getAndAdd", 2) => {
            let d = c.int(1)?;
            atomic(&arg(0), name, |a| {
                *a += d;
                Value::Int(*a - d)
            })?
        }
        _ => return Ok(None),
    }))
}

fn map_op<T>(
    map: &Value,
    name: &str,
    f: impl FnOnce(&mut Vec<(Value, Value)>) -> T,
) -> Result<T, String> {
    match map {
        Value::Map(m) => Ok(f(&mut m.borrow_mut())),
        other => Err(format!("{name}: {other} is not a map")),
    }
}

fn atomic(value: &Value, name: &str, f: impl FnOnce(&mut i64) -> Value) -> Result<Value, String> {
    match value {
        Value::Atomic(a) => Ok(f(&mut a.borrow_mut())),
        other => Err(format!("{name}: {other} is not an atomic")),
    }
}
