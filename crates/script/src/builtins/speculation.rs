//! `Speculation`: output held in numbered buffers until the script commits or discards it,
//! as BTrace's speculative buffers (per thread, ids never reused).

use std::collections::HashMap;

use super::{Call, Context};
use crate::limits::MAX_TEXT;
use crate::value::Value;

/// Most speculations a script opens (BTrace's `Short.MAX_VALUE`); `speculation()` then
/// gives -1.
const MAX_SPECULATIONS: i64 = i16::MAX as i64;

/// The speculative buffers of a script, and which one each thread writes to.
#[derive(Debug, Default)]
pub struct Speculations {
    buffers: HashMap<i64, String>,
    next_id: i64,
    /// Per thread (its kernel id, 0 outside probes): the buffer it speculates into.
    current: HashMap<u32, i64>,
}

impl Speculations {
    /// Moves what a function printed (`out` from `mark` on) into the buffer the thread
    /// speculates into, if any; a buffer grown past [`MAX_TEXT`] keeps only a note of it.
    pub fn divert(&mut self, tid: u32, out: &mut String, mark: usize) {
        let Some(id) = self.current.get(&tid) else {
            return;
        };
        let Some(buffer) = self.buffers.get_mut(id) else {
            return;
        };
        let printed = out.split_off(mark.min(out.len()));
        if buffer.len() + printed.len() > MAX_TEXT {
            *buffer = format!("speculative buffer overflow: {id}\n");
        } else {
            buffer.push_str(&printed);
        }
    }

    fn valid(&self, id: i64) -> Result<i64, String> {
        match self.buffers.contains_key(&id) {
            true => Ok(id),
            false => Err(format!("invalid speculative buffer id: {id}")),
        }
    }
}

/// `speculation()`, `speculate(id)`, `commit(id)`, `discard(id)`.
pub(super) fn speculation(c: &Call, cx: &mut Context) -> Result<Option<Value>, String> {
    let tid = cx.probe.map_or(0, |p| p.tid);
    let speculations = &mut *cx.speculations;
    Ok(Some(match (c.name, c.args.len()) {
        ("speculation", 0) => {
            if speculations.next_id >= MAX_SPECULATIONS {
                return Ok(Some(Value::Int(-1)));
            }
            let id = speculations.next_id;
            speculations.next_id += 1;
            speculations.buffers.insert(id, String::new());
            Value::Int(id)
        }
        ("speculate", 1) => {
            let id = speculations.valid(c.int(0)?)?;
            speculations.current.insert(tid, id);
            Value::Null
        }
        ("commit" | "discard", 1) => {
            let id = speculations.valid(c.int(0)?)?;
            speculations.current.remove(&tid);
            let held = std::mem::take(speculations.buffers.get_mut(&id).expect("valid"));
            if c.name == "commit" {
                cx.out.push_str(&held);
            }
            Value::Null
        }
        _ => return Ok(None),
    }))
}
