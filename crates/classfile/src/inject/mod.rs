//! Placing probe calls into one method.
//!
//! Probe code is straight-line and stack-neutral: values living on the operand stack (return
//! value, exception, new object, monitor, field value) are duplicated, boxed and parked in one
//! fresh local slot before the probe's arguments are pushed, so the method computes exactly
//! what it computed before. In a method with a [`Guard`](crate::guard::Guard) the entry
//! stores the guard's verdict in a local of its own, and each place's probe code is skipped
//! by one branch when it is 0 (with a stack map frame where the branch lands).
//!
//! [`instrument_class`] rewrites each method some probe of the plan selects. For one method,
//! `instrument_method` learns what it needs of the method (`analysis`), then places each
//! probe by its point: `entry`, `exit` (returns and the exception exit), `calls` and
//! `instructions` (allocations, monitors, field accesses, lines), all through the shared
//! placement of `place`; `layout` writes the new code.

mod analysis;
mod calls;
mod class;
mod entry;
mod exit;
mod instructions;
mod layout;
mod opcodes;
mod place;
mod site;
mod snippet;

pub use class::{instrument_class, Instrumented};
use snippet::Refs;

use crate::class_file::{ClassFile, ACC_STATIC};
use crate::code::{CodeAttribute, Edit};
use crate::constant_pool::ConstantPool;
use crate::descriptor::parse_method_descriptor;
use crate::error::{Error, Result};
use crate::guard;
use crate::instruction::{self, op, Insn};
use crate::plan::{InjectionPlan, Point, Probe, Registry, Value};
use crate::stackmap::{self, Frame, VType};
use crate::typeflow::{self, MethodInfo};
use analysis::{initialized_ranges, line_starts, wanted_states, Facts};
use place::Placer;
use site::{wants, Method};

/// Instruments method `mi` of `cf` with `probes`. Returns whether the method changed.
#[allow(clippy::too_many_arguments)]
pub(crate) fn instrument_method(
    cf: &mut ClassFile,
    mi: usize,
    class_name: &str,
    name: &str,
    desc: &str,
    plan: &InjectionPlan,
    probes: &[(usize, &Probe)],
    refs: &mut Refs,
    registry: &mut Registry,
) -> Result<bool> {
    let Some((code_pos, code, insns)) = decode_code(cf, mi)? else {
        return Ok(false);
    };
    let cp = &mut cf.constant_pool;
    let is_static = cf.methods[mi].access_flags & ACC_STATIC != 0;
    let is_init = name == "<init>";
    let with_frames = cf.major_version >= 50;
    let md = parse_method_descriptor(desc.as_bytes())?;
    let initial = typeflow::initial_locals(
        cp,
        cf.this_class,
        is_static,
        is_init,
        desc.as_bytes(),
        code.max_locals,
    )?;
    let frames = stack_map(cp, &code, &initial, with_frames)?;

    // A guard on the arguments, where it compiles for this method (else its probes run for
    // every call, and whoever receives them filters).
    let guard = plan
        .guards
        .iter()
        .find(|(filter, _)| filter.matches(class_name, name, desc))
        .and_then(|(_, g)| guard::compile(g, &md.params, is_static, cp).ok());

    let uninit_this = matches!(initial.first(), Some(VType::UninitializedThis));
    let info = MethodInfo {
        this_class: cf.this_class,
        max_locals: code.max_locals,
        insns: &insns,
        code_len: code.code.len(),
        exception_table: &code.exception_table,
        frames: if with_frames { Some(&frames) } else { None },
        initial_locals: &initial,
    };
    let want = wanted_states(&insns, probes, uninit_this, guard.is_some());
    let states = typeflow::states(cp, &info, &want)?;

    let method_id = registry.add_method(class_name, name, desc);
    let marked = probes.iter().any(|(_, p)| wants(p, Value::Mark));
    // The mark, then the guard's verdict, then the stash, after the method's own locals.
    let mark_slots = if marked { 2 } else { 0 };
    let pass = guard.is_some().then_some(code.max_locals + mark_slots);
    let mut facts = Facts {
        insns: &insns,
        states: &states,
        initial: &initial,
        method: Method {
            method_id,
            is_static,
            params: md.params.clone(),
            stash: code.max_locals + mark_slots + u16::from(pass.is_some()),
            mark: marked.then_some(code.max_locals),
            runtime_class: &plan.runtime_class,
        },
        ret: md.ret,
        is_init,
        with_frames,
        pass,
        covered: initialized_ranges(&states, insns.len(), uninit_this),
        lines: line_starts(cp, &code, &insns)?,
        spills: Vec::new(),
        bootstrap_owners: analysis::bootstrap_owners(cp, &cf.attributes),
        catches: analysis::catches(&code, &insns)?,
    };
    let mut placer = Placer::new(cp, refs, registry, insns.len());
    placer.prologue(&facts, plan, guard.as_ref())?;
    let mut spills = placer.spill_operands(&facts, probes)?;
    placer.spill_insn_operands(&facts, probes, &mut spills)?;
    facts.spills = spills;
    for &probe in probes {
        placer.place_probe(&facts, probe)?;
    }
    placer.cover_call_blocks(&facts, &code)?;
    placer.skip_rejected(&facts)?;
    let Some(edit) = placer.into_edit(&facts)? else {
        return Ok(false);
    };
    let new_code = layout::rewrite(cp, &code, &facts, &edit, &info, &frames)?;
    cf.methods[mi].attributes[code_pos].info = new_code.write();
    Ok(true)
}

/// Method `mi`'s `Code` attribute (with its index among the method's attributes) and
/// instructions; none for an abstract or native method.
fn decode_code(cf: &ClassFile, mi: usize) -> Result<Option<(usize, CodeAttribute, Vec<Insn>)>> {
    let Some(code_pos) = cf.methods[mi].attributes.iter().position(|a| {
        cf.constant_pool
            .utf8(a.name_index)
            .is_ok_and(|n| n == b"Code")
    }) else {
        return Ok(None);
    };
    let code = CodeAttribute::parse(&cf.methods[mi].attributes[code_pos].info)?;
    let insns = instruction::decode(&code.code)?;
    if insns
        .iter()
        .any(|i| matches!(i.opcode, op::JSR | op::JSR_W | op::RET))
    {
        return Err(Error::Unsupported("jsr/ret subroutines"));
    }
    Ok(Some((code_pos, code, insns)))
}

/// The method's decoded `StackMapTable` (none before class version 50).
fn stack_map(
    cp: &ConstantPool,
    code: &CodeAttribute,
    initial: &[VType],
    with_frames: bool,
) -> Result<Vec<Frame>> {
    match code
        .attributes
        .iter()
        .find(|a| cp.utf8(a.name_index).is_ok_and(|n| n == b"StackMapTable"))
    {
        Some(a) if with_frames => stackmap::decode(&a.info, initial),
        _ => Ok(Vec::new()),
    }
}

impl Placer<'_> {
    /// Places one probe by its point.
    fn place_probe(&mut self, f: &Facts, probe: (usize, &Probe)) -> Result<()> {
        match &probe.1.point {
            Point::Entry => self.entry(f, probe),
            Point::Return => self.returns(f, probe),
            Point::ExceptionExit => self.exception_exit(f, probe),
            Point::BeforeCall(filter) => self.calls(f, probe, filter, false),
            Point::AfterCall(filter) => self.calls(f, probe, filter, true),
            Point::Allocation => self.allocations(f, probe),
            Point::MonitorEnter => self.monitors(f, probe, op::MONITORENTER),
            Point::MonitorExit => self.monitors(f, probe, op::MONITOREXIT),
            Point::FieldRead(filter) => self.field_accesses(f, probe, filter, true),
            Point::FieldWrite(filter) => self.field_accesses(f, probe, filter, false),
            Point::Line(only) => self.lines(f, probe, only),
            Point::Instruction(kind) => self.instructions(f, probe, *kind),
        }
    }

    /// The finished edit, with the stack and locals its code adds; none when no probe
    /// code was placed.
    fn into_edit(self, f: &Facts) -> Result<Option<Edit>> {
        let mut edit = self.edit;
        edit.prologue.extend(self.entry);
        if edit.is_empty() {
            return Ok(None);
        }
        edit.extra_stack = u16::try_from(self.peak).map_err(|_| Error::TooLarge("max_stack"))?;
        let spill_size = f
            .spills
            .iter()
            .flatten()
            .map(|c| c.size(f.spill_base()))
            .max()
            .unwrap_or(0);
        let stash = if spill_size > 0 {
            1 + spill_size
        } else {
            u16::from(self.used_stash || !self.call_blocks.is_empty() || self.exit_block.is_some())
        };
        let mark = if f.method.mark.is_some() { 2 } else { 0 };
        edit.extra_locals = stash + mark + u16::from(f.pass.is_some());
        Ok(Some(edit))
    }
}
