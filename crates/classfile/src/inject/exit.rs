//! Method exits: probes before every return, and the catch-all handler calling the probes of
//! an exception leaving the method.

use super::analysis::{params_intact, Facts};
use super::place::{At, Placer};
use super::site::{wants, Site};
use crate::code::{NewHandler, Pos};
use crate::descriptor::FieldType;
use crate::error::Result;
use crate::instruction::op;
use crate::plan::{Probe, Value};
use crate::stackmap::VType;

impl Placer<'_> {
    /// A return probe before every return instruction, with the value returned.
    pub(super) fn returns(&mut self, f: &Facts, (pi, probe): (usize, &Probe)) -> Result<()> {
        let m = &f.method;
        for (i, insn) in f.insns.iter().enumerate() {
            if !matches!(insn.opcode, op::IRETURN..=op::RETURN) {
                continue;
            }
            let st = f.states[i].as_ref();
            let mut site = Site {
                site_id: -1,
                this_ok: !m.is_static
                    && st.map_or(!f.is_init, |s| {
                        matches!(s.locals.first(), Some(VType::Object(_)))
                    }),
                args_ok: st.is_some_and(|s| params_intact(s, m.is_static, &m.params)),
                ..Site::plain()
            };
            if wants(probe, Value::SiteId) {
                site.site_id = self.registry.add_site(
                    m.method_id,
                    insn.offset,
                    insn.opcode,
                    "return",
                    String::new(),
                );
            }
            let returned = (f.ret != FieldType::Void && wants(probe, Value::ReturnValue))
                .then_some((f.ret, Value::ReturnValue));
            self.place(f, At::Before(i), (pi, probe), site, returned)?;
        }
        Ok(())
    }

    /// An exception-exit probe: one handler block, covering the code where `this` is
    /// initialized, calls it with the exception and rethrows it.
    pub(super) fn exception_exit(&mut self, f: &Facts, probe: (usize, &Probe)) -> Result<()> {
        if f.covered.is_empty() {
            return Ok(());
        }
        let k = self.rethrowing(f, probe, Site::plain(), f.pass, Vec::new())?;
        for &(a, b) in &f.covered {
            self.edit.handlers_last.push(NewHandler {
                start: Pos::Start(a),
                end: Pos::Start(b),
                handler: Pos::Block(k),
                catch_type: 0,
            });
        }
        self.exit_block.get_or_insert(k);
        Ok(())
    }
}
