//! Probes at single instructions of a kind ([`InsnKind`]): array loads and stores, throws,
//! the starts of typed catch handlers and type checks. The operands the instruction takes
//! (the array and index, the value stored, the exception, the object checked) are copied into
//! locals just before it, as a call's are (see [`Spill`]), and the probe takes them as
//! [`Value::Target`] and [`Value::CallArgs`].

use super::analysis::Facts;
use super::place::{At, Placer};
use super::site::{wants, Site, Spill};
use crate::constant_pool::ConstantPool;
use crate::descriptor::{java_name, FieldType};
use crate::error::Result;
use crate::instruction::{op, Insn, Operand};
use crate::plan::{InsnKind, Point, Probe, Value};

/// `iaload`, the first array load (`iaload laload faload daload aaload baload caload saload`).
const IALOAD: u8 = 0x2e;
/// `iastore`, the first array store (in the loads' order).
const IASTORE: u8 = 0x4f;

/// The element types of the array loads and stores, in opcode order.
const ELEMENTS: [FieldType<'static>; 8] = [
    FieldType::Int,
    FieldType::Long,
    FieldType::Float,
    FieldType::Double,
    FieldType::Reference(b"java/lang/Object"),
    FieldType::Byte,
    FieldType::Char,
    FieldType::Short,
];

impl Placer<'_> {
    /// Copies the operands of the instructions whose probes take them (see [`operands`])
    /// into `spills`, by instruction (made as long as the method when still empty).
    pub(super) fn spill_insn_operands(
        &mut self,
        f: &Facts,
        probes: &[(usize, &Probe)],
        spills: &mut Vec<Option<Spill>>,
    ) -> Result<()> {
        for &(_, probe) in probes {
            let Point::Instruction(kind) = probe.point else {
                continue;
            };
            if !wants(probe, Value::Target) && !wants(probe, Value::CallArgs) {
                continue;
            }
            if spills.is_empty() {
                *spills = vec![None; f.insns.len()];
            }
            for (i, insn) in f.insns.iter().enumerate() {
                if spills[i].is_some() {
                    continue;
                }
                let Some(on_stack) = operands(insn, kind, catch_type(f, i).is_some()) else {
                    continue;
                };
                let mut s = self.take(At::Before(i));
                spills[i] = Some(Spill::emit(
                    &mut s,
                    on_stack.as_bytes(),
                    true,
                    f.spill_base(),
                )?);
                self.put(At::Before(i), s);
            }
        }
        Ok(())
    }

    /// A probe at each instruction of `kind`: after array loads (with the element loaded),
    /// before the others.
    pub(super) fn instructions(
        &mut self,
        f: &Facts,
        probe: (usize, &Probe),
        kind: InsnKind,
    ) -> Result<()> {
        for (i, insn) in f.insns.iter().enumerate() {
            let caught = catch_type(f, i);
            if operands(insn, kind, caught.is_some()).is_none() {
                continue;
            }
            let detail = detail(self.cp, insn, caught)?;
            let site_id = self.registry.add_site(
                f.method.method_id,
                insn.offset,
                insn.opcode,
                kind_name(kind),
                detail,
            );
            let site = Site {
                site_id,
                this_ok: f.this_initialized(i),
                spilled: f.spills.get(i).and_then(Option::as_ref),
                ..Site::plain()
            };
            if kind == InsnKind::ArrayLoad {
                let element = ELEMENTS[usize::from(insn.opcode - IALOAD)];
                let loaded =
                    wants(probe.1, Value::ReturnValue).then_some((element, Value::ReturnValue));
                self.place(f, At::After(i), probe, site, loaded)?;
            } else {
                self.place(f, At::Before(i), probe, site, None)?;
            }
        }
        Ok(())
    }
}

/// The site kind registered for `kind`.
fn kind_name(kind: InsnKind) -> &'static str {
    match kind {
        InsnKind::ArrayLoad => "aget",
        InsnKind::ArrayStore => "aset",
        InsnKind::Throw => "throw",
        InsnKind::Catch => "catch",
        InsnKind::CheckCast => "checkcast",
        InsnKind::InstanceOf => "instanceof",
    }
}

/// The catch type (a class constant) of the typed handler starting at instruction `i`.
fn catch_type(f: &Facts, i: usize) -> Option<u16> {
    f.catches.iter().find(|&&(at, _)| at == i).map(|&(_, c)| c)
}

/// When `insn` is an instruction of `kind` (`catch_start`: it starts a typed handler), what
/// it takes off the stack above the object (array, exception, object checked), as a method
/// descriptor's parameters.
fn operands(insn: &Insn, kind: InsnKind, catch_start: bool) -> Option<String> {
    let element = |first: u8| {
        let k = insn.opcode.checked_sub(first).map(usize::from)?;
        ELEMENTS.get(k).copied()
    };
    match kind {
        InsnKind::ArrayLoad => element(IALOAD).map(|_| "(I)V".to_string()),
        InsnKind::ArrayStore => element(IASTORE).map(|t| {
            let t = match t {
                FieldType::Reference(_) => "Ljava/lang/Object;".to_string(),
                other => char::from(other.primitive_char().unwrap_or(b'I')).to_string(),
            };
            format!("(I{t})V")
        }),
        InsnKind::Throw => (insn.opcode == op::ATHROW).then(|| "()V".into()),
        InsnKind::Catch => catch_start.then(|| "()V".into()),
        InsnKind::CheckCast => (insn.opcode == op::CHECKCAST).then(|| "()V".into()),
        InsnKind::InstanceOf => (insn.opcode == op::INSTANCEOF).then(|| "()V".into()),
    }
}

/// The type a site involves, as Java names it: an array access's element type, the type a
/// check tests or a handler catches; empty for a throw.
fn detail(cp: &ConstantPool, insn: &Insn, caught: Option<u16>) -> Result<String> {
    let class = match (insn.opcode, &insn.operand, caught) {
        (_, _, Some(c)) => c,
        (op::CHECKCAST | op::INSTANCEOF, &Operand::Cp(c), _) => c,
        (IALOAD..=0x35, _, _) => return Ok(java_element(insn.opcode - IALOAD)),
        (IASTORE..=0x56, _, _) => return Ok(java_element(insn.opcode - IASTORE)),
        _ => return Ok(String::new()),
    };
    Ok(java_name(&String::from_utf8_lossy(cp.class_name(class)?)))
}

/// The Java name of element type `k` of [`ELEMENTS`].
fn java_element(k: u8) -> String {
    match ELEMENTS[usize::from(k)] {
        FieldType::Reference(_) => "java.lang.Object".into(),
        t => java_name(&char::from(t.primitive_char().unwrap_or(b'I')).to_string()),
    }
}
