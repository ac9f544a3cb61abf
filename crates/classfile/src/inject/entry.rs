//! Method entry: the prologue reading the mark and the guard's verdict, the entry probes, and
//! the branches that skip a rejected call's entry and return probes.

use super::analysis::{trimmed, Facts};
use super::place::{skip_unless_passed, At, Placer};
use super::site::Site;
use crate::code::Pos;
use crate::error::Result;
use crate::guard::Compiled;
use crate::instruction::op;
use crate::plan::{InjectionPlan, Probe};
use crate::stackmap::Frame;

impl Placer<'_> {
    /// The prologue: the plan's clock read into the mark's local, then the guard's verdict
    /// stored in its own.
    pub(super) fn prologue(
        &mut self,
        f: &Facts,
        plan: &InjectionPlan,
        guard: Option<&Compiled>,
    ) -> Result<()> {
        if let Some(slot) = f.method.mark {
            let mut s = self.take(At::Prologue);
            let (opcode, clock) = self.refs.clock(self.cp, plan)?;
            s.cp_insn(opcode, clock, 2);
            s.local(op::LSTORE, slot, -2);
            self.put(At::Prologue, s);
        }
        if let (Some(compiled), Some(slot)) = (guard, f.pass) {
            let mut s = self.take(At::Prologue);
            s.emit(&compiled.code, 1);
            s.peak = s.peak.max(compiled.peak);
            s.local(op::ISTORE, slot, -1);
            self.put(At::Prologue, s);
        }
        Ok(())
    }

    /// An entry probe, with `this` (but in constructors) and the arguments.
    pub(super) fn entry(&mut self, f: &Facts, probe: (usize, &Probe)) -> Result<()> {
        let site = Site {
            this_ok: !f.method.is_static && !f.is_init,
            args_ok: true,
            ..Site::plain()
        };
        self.place(f, At::Entry, probe, site, None)
    }

    /// A rejected call skips the entry probes and every return's (they are all the method's
    /// own probes: a guarded method has no others); the exception exit's skips itself.
    pub(super) fn skip_rejected(&mut self, f: &Facts) -> Result<()> {
        let Some(slot) = f.pass else {
            return Ok(());
        };
        if !self.entry.is_empty() {
            self.entry = skip_unless_passed(slot, std::mem::take(&mut self.entry))?;
            if f.with_frames {
                let frame = Frame {
                    offset: 0,
                    locals: f.initial.to_vec(),
                    stack: Vec::new(),
                };
                self.edit.frames.push((Pos::Start(0), frame));
            }
        }
        for (i, insn) in f.insns.iter().enumerate() {
            if !matches!(insn.opcode, op::IRETURN..=op::RETURN) || self.edit.before[i].is_empty() {
                continue;
            }
            // Unreachable returns keep their probes: they never run.
            let Some(st) = f.states[i].as_ref() else {
                continue;
            };
            let code = std::mem::take(&mut self.edit.before[i]);
            self.edit.before[i] = skip_unless_passed(slot, code)?;
            if f.with_frames {
                let frame = Frame {
                    offset: 0,
                    locals: trimmed(&st.locals),
                    stack: st.stack.clone(),
                };
                self.edit.frames.push((Pos::Insn(i), frame));
            }
        }
        Ok(())
    }
}
