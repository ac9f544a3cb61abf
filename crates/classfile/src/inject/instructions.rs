//! Probes at single instructions of the body: allocations, monitors, field accesses and line
//! starts.

use super::analysis::Facts;
use super::place::{At, Placer};
use super::site::Site;
use crate::constant_pool::ConstantPool;
use crate::descriptor::{parse_field_descriptor, parse_method_descriptor, FieldType};
use crate::error::Result;
use crate::instruction::{op, Insn, Operand};
use crate::plan::{MemberFilter, Probe, Value};
use crate::stackmap::VType;
use crate::typeflow::State;

impl Placer<'_> {
    /// An allocation probe after every array creation, and after the constructor call of
    /// every `new` whose object stays on the stack, with the new object.
    pub(super) fn allocations(&mut self, f: &Facts, probe: (usize, &Probe)) -> Result<()> {
        for (i, insn) in f.insns.iter().enumerate() {
            let at = match insn.opcode {
                op::NEWARRAY | op::ANEWARRAY | op::MULTIANEWARRAY => Some(i),
                op::NEW => constructor_call(self.cp, f.insns, i, f.states)?,
                _ => continue,
            };
            let Some(j) = at else { continue };
            let detail = alloc_detail(self.cp, insn);
            let site_id = self.registry.add_site(
                f.method.method_id,
                insn.offset,
                insn.opcode,
                "alloc",
                detail,
            );
            let site = Site {
                site_id,
                ..Site::plain()
            };
            let object = (FieldType::Reference(b"java/lang/Object"), Value::NewObject);
            self.place(f, At::After(j), probe, site, Some(object))?;
        }
        Ok(())
    }

    /// A monitor probe before every instruction `opcode` (`monitorenter` or `monitorexit`),
    /// with the monitor object.
    pub(super) fn monitors(&mut self, f: &Facts, probe: (usize, &Probe), opcode: u8) -> Result<()> {
        let kind = if opcode == op::MONITORENTER {
            "monitorenter"
        } else {
            "monitorexit"
        };
        for (i, insn) in f.insns.iter().enumerate() {
            if insn.opcode != opcode {
                continue;
            }
            let site_id = self.registry.add_site(
                f.method.method_id,
                insn.offset,
                insn.opcode,
                kind,
                String::new(),
            );
            let site = Site {
                site_id,
                ..Site::plain()
            };
            let lock = (FieldType::Reference(b"java/lang/Object"), Value::Lock);
            self.place(f, At::Before(i), probe, site, Some(lock))?;
        }
        Ok(())
    }

    /// A field probe after every read (`read`) or before every write of the fields matching
    /// `filter`, with the value read or written.
    pub(super) fn field_accesses(
        &mut self,
        f: &Facts,
        probe: (usize, &Probe),
        filter: &MemberFilter,
        read: bool,
    ) -> Result<()> {
        for (i, insn) in f.insns.iter().enumerate() {
            let is_read = matches!(insn.opcode, op::GETSTATIC | op::GETFIELD);
            let is_write = matches!(insn.opcode, op::PUTSTATIC | op::PUTFIELD);
            if !(read && is_read || !read && is_write) {
                continue;
            }
            let Operand::Cp(c) = insn.operand else {
                continue;
            };
            let r = self.cp.member_ref(c)?;
            let (owner, fname, fdesc) = (
                String::from_utf8_lossy(r.owner).into_owned(),
                String::from_utf8_lossy(r.name).into_owned(),
                r.descriptor.to_vec(),
            );
            if !filter.matches(&owner, &fname, &String::from_utf8_lossy(&fdesc)) {
                continue;
            }
            let t = parse_field_descriptor(&fdesc)?;
            let kind = if read { "field-read" } else { "field-write" };
            let site_id = self.registry.add_site(
                f.method.method_id,
                insn.offset,
                insn.opcode,
                kind,
                format!("{owner}.{fname}"),
            );
            let site = Site {
                site_id,
                // `this`, once initialized (fields are written before the super call too).
                this_ok: f.this_initialized(i),
                spilled: f.spills.get(i).and_then(Option::as_ref),
                ..Site::plain()
            };
            let at = if read { At::After(i) } else { At::Before(i) };
            self.place(f, at, probe, site, Some((t, Value::FieldValue)))?;
        }
        Ok(())
    }

    /// A line probe at the first instruction of each line, of lines `only` when any are
    /// given.
    pub(super) fn lines(&mut self, f: &Facts, probe: (usize, &Probe), only: &[u32]) -> Result<()> {
        for (i, line) in f.lines.iter().enumerate() {
            let Some(line) = *line else { continue };
            if !only.is_empty() && !only.contains(&u32::from(line)) {
                continue;
            }
            let insn = &f.insns[i];
            let site_id = self.registry.add_site(
                f.method.method_id,
                insn.offset,
                insn.opcode,
                "line",
                String::new(),
            );
            let site = Site {
                site_id,
                line: line as i32,
                ..Site::plain()
            };
            self.place(f, At::Before(i), probe, site, None)?;
        }
        Ok(())
    }
}

/// What an allocation creates: the class or array class, or `newarray <type code>`.
fn alloc_detail(cp: &ConstantPool, insn: &Insn) -> String {
    match insn.operand {
        Operand::Cp(c) | Operand::MultiANewArray(c, _) => cp
            .class_name(c)
            .map(|n| String::from_utf8_lossy(n).into_owned())
            .unwrap_or_default(),
        Operand::NewArray(t) => format!("newarray {t}"),
        _ => String::new(),
    }
}

/// The `invokespecial <init>` initializing the object created by `new` at instruction `i`, when a
/// copy of the object stays on the stack after it (the usual `new; dup; …; invokespecial`).
fn constructor_call(
    cp: &ConstantPool,
    insns: &[Insn],
    i: usize,
    states: &[Option<State>],
) -> Result<Option<usize>> {
    let target = VType::Uninitialized(insns[i].offset);
    for (j, insn) in insns.iter().enumerate().skip(i + 1) {
        if insn.opcode != op::INVOKESPECIAL {
            continue;
        }
        let Some(st) = states[j].as_ref() else {
            continue;
        };
        let Operand::Cp(c) = insn.operand else {
            continue;
        };
        let r = cp.member_ref(c)?;
        if r.name != b"<init>" {
            continue;
        }
        let k = parse_method_descriptor(r.descriptor)?.param_slots() as usize;
        let len = st.stack.len();
        if len > k && st.stack[len - 1 - k] == target {
            return Ok((len > k + 1 && st.stack[len - 2 - k] == target).then_some(j));
        }
    }
    Ok(None)
}
