//! The call of one probe: its values as they resolve at one point of the method.

use super::snippet::{erase, load_opcode, store_opcode, Refs, Snippet};
use crate::constant_pool::ConstantPool;
use crate::descriptor::{parse_method_descriptor, FieldType};
use crate::error::{Error, Result};
use crate::instruction::op;
use crate::plan::{Probe, Value};

/// What the values of one probe call resolve to at one point.
pub(super) struct Site<'s> {
    pub(super) site_id: i32,
    pub(super) line: i32,
    pub(super) this_ok: bool,
    pub(super) args_ok: bool,
    /// The value parked in the stash slot, if any.
    pub(super) stashed: Option<Value>,
    /// At a call: where its receiver and arguments were copied.
    pub(super) spilled: Option<&'s Spill>,
}

impl Site<'_> {
    /// A site with none of the values: no site id or line, neither `this` nor the
    /// arguments, nothing stashed or spilled.
    pub(super) fn plain() -> Self {
        Site {
            site_id: -1,
            line: -1,
            this_ok: false,
            args_ok: false,
            stashed: None,
            spilled: None,
        }
    }
}

/// The instrumented method as its probe calls see it.
pub(super) struct Method<'a> {
    pub(super) method_id: i32,
    pub(super) is_static: bool,
    pub(super) params: Vec<FieldType<'a>>,
    /// The local where a value living on the operand stack is parked for the probes.
    pub(super) stash: u16,
    /// The local holding [`Value::Mark`] (two slots), when a probe takes it.
    pub(super) mark: Option<u16>,
    pub(super) runtime_class: &'a str,
}

impl Method<'_> {
    /// Emits the call of `probe` with values as available at `site`.
    pub(super) fn call(
        &self,
        cp: &mut ConstantPool,
        refs: &mut Refs,
        s: &mut Snippet,
        pi: usize,
        probe: &Probe,
        site: &Site,
    ) -> Result<()> {
        for &v in &probe.values {
            match v {
                Value::MethodId => s.int(cp, self.method_id)?,
                Value::SiteId => s.int(cp, site.site_id)?,
                Value::LineNumber => s.int(cp, site.line)?,
                Value::This if site.this_ok => s.emit(&[op::ALOAD_0], 1),
                Value::Args if site.args_ok => {
                    s.int(cp, self.params.len() as i32)?;
                    let object = refs.object(cp)?;
                    s.cp_insn(op::ANEWARRAY, object, 0);
                    let mut slot: u16 = if self.is_static { 0 } else { 1 };
                    for (k, &p) in self.params.iter().enumerate() {
                        s.emit(&[op::DUP], 1);
                        s.int(cp, k as i32)?;
                        s.local(load_opcode(p), slot, p.slots() as i32);
                        s.boxed(cp, refs, p)?;
                        s.emit(&[op::AASTORE], -3);
                        slot += p.slots();
                    }
                }
                Value::Mark => match self.mark {
                    Some(slot) => s.local(op::LLOAD, slot, 2),
                    None => s.emit(&[op::LCONST_0], 2),
                },
                Value::Target => match site.spilled.and_then(|c| c.receiver) {
                    Some(slot) => s.local(op::ALOAD, slot, 1),
                    None => s.emit(&[op::ACONST_NULL], 1),
                },
                Value::CallArgs if site.spilled.is_some() => {
                    let args = &site.spilled.map_or(&[][..], |c| &c.args[..]);
                    s.int(cp, args.len() as i32)?;
                    let object = refs.object(cp)?;
                    s.cp_insn(op::ANEWARRAY, object, 0);
                    for (k, &(slot, p)) in args.iter().enumerate() {
                        s.emit(&[op::DUP], 1);
                        s.int(cp, k as i32)?;
                        s.local(load_opcode(p), slot, p.slots() as i32);
                        s.boxed(cp, refs, p)?;
                        s.emit(&[op::AASTORE], -3);
                    }
                }
                v if site.stashed == Some(v) => s.local(op::ALOAD, self.stash, 1),
                _ => s.emit(&[op::ACONST_NULL], 1),
            }
        }
        let m = refs.probe(cp, self.runtime_class, pi, probe)?;
        s.cp_insn(
            op::INVOKESTATIC,
            m,
            -(probe.values.iter().map(|v| v.slots()).sum::<i32>()),
        );
        Ok(())
    }
}

/// Whether `probe` takes value `v`.
pub(super) fn wants(probe: &Probe, v: Value) -> bool {
    probe.values.contains(&v)
}

/// Locals holding a call's receiver (unless static or a constructor's) and arguments, copied
/// off the operand stack just before the call for the probes there and after it.
#[derive(Clone)]
pub(super) struct Spill {
    pub(super) receiver: Option<u16>,
    pub(super) args: Vec<(u16, FieldType<'static>)>,
}

impl Spill {
    /// Emits the copy at a call of `descriptor` (top of the stack: its arguments, then its
    /// receiver when `receiver`), into locals from `base`; the stack is left as it was.
    pub(super) fn emit(
        s: &mut Snippet,
        descriptor: &[u8],
        receiver: bool,
        base: u16,
    ) -> Result<Spill> {
        let params = parse_method_descriptor(descriptor)?.params;
        let mut slot = base;
        let receiver = receiver.then(|| {
            slot += 1;
            base
        });
        let mut args = Vec::with_capacity(params.len());
        for p in params {
            let p = erase(p);
            args.push((slot, p));
            slot = slot
                .checked_add(p.slots())
                .ok_or(Error::TooLarge("max_locals"))?;
        }
        for &(at, p) in args.iter().rev() {
            s.local(store_opcode(p), at, -(p.slots() as i32));
        }
        if let Some(at) = receiver {
            s.local(op::ASTORE, at, -1);
            s.local(op::ALOAD, at, 1);
        }
        for &(at, p) in &args {
            s.local(load_opcode(p), at, p.slots() as i32);
        }
        Ok(Spill { receiver, args })
    }

    /// Locals it takes.
    pub(super) fn size(&self, base: u16) -> u16 {
        let end = self
            .args
            .last()
            .map(|&(at, p)| at + p.slots())
            .or(self.receiver.map(|at| at + 1));
        end.map_or(0, |end| end - base)
    }
}
