//! Call sites and the operands of calls and field accesses: probes before and after matching
//! calls (with a handler covering just the call for its exceptions), and the copies of a
//! call's or field access's operands the probes there take.

use std::borrow::Cow;

use super::analysis::{trimmed, Facts};
use super::place::{At, Placer};
use super::site::{wants, Site, Spill};
use super::snippet::erase;
use crate::code::{offset_index, CodeAttribute, NewHandler, Pos};
use crate::constant_pool::{Constant, ConstantPool};
use crate::descriptor::{parse_field_descriptor, return_type, FieldType};
use crate::error::{Error, Result};
use crate::instruction::{op, Insn, Operand};
use crate::plan::{MemberFilter, Point, Probe, Value};
use crate::stackmap::VType;
use crate::typeflow::State;

/// What a call or field access takes off the operand stack, for [`Spill`].
struct Operands {
    /// The member as the code refers to it, which a probe's filter matches.
    owner: String,
    name: String,
    descriptor: String,
    /// The values above the receiver, as a method descriptor's parameters.
    on_stack: String,
    /// Whether a receiver (or a field's object) lies below them.
    receiver: bool,
}

/// A call's operands: its arguments, and its receiver but for static calls and constructors
/// (whose receiver is not initialized before the call: it stays put).
fn call_operands(cp: &ConstantPool, insn: &Insn) -> Result<Option<Operands>> {
    Ok(
        call_target(cp, insn)?.map(|(owner, name, descriptor)| Operands {
            receiver: !matches!(insn.opcode, op::INVOKESTATIC | op::INVOKEDYNAMIC)
                && name != "<init>",
            owner: owner.into_owned(),
            name: name.into_owned(),
            on_stack: descriptor.to_string(),
            descriptor: descriptor.into_owned(),
        }),
    )
}

/// A field read's (`write` false) or write's operands: the object but for static fields, and
/// a write's value above it.
fn field_operands(cp: &ConstantPool, insn: &Insn, write: bool) -> Result<Option<Operands>> {
    let (reads, writes) = (
        matches!(insn.opcode, op::GETSTATIC | op::GETFIELD),
        matches!(insn.opcode, op::PUTSTATIC | op::PUTFIELD),
    );
    let Operand::Cp(c) = insn.operand else {
        return Ok(None);
    };
    if !(write && writes || !write && reads) {
        return Ok(None);
    }
    let r = cp.member_ref(c)?;
    let descriptor = String::from_utf8_lossy(r.descriptor).into_owned();
    Ok(Some(Operands {
        owner: String::from_utf8_lossy(r.owner).into_owned(),
        name: String::from_utf8_lossy(r.name).into_owned(),
        on_stack: if write {
            format!("({descriptor})V")
        } else {
            "()V".to_string()
        },
        descriptor,
        receiver: matches!(insn.opcode, op::GETFIELD | op::PUTFIELD),
    }))
}

impl Placer<'_> {
    /// Copies the operands of the calls and field accesses whose probes take the called
    /// method's receiver or arguments, or the accessed object (a write's value too, which
    /// sits above it on the stack), into locals after the stash before anything else runs
    /// there (one area, reused by each). Returns the copies by instruction.
    pub(super) fn spill_operands(
        &mut self,
        f: &Facts,
        probes: &[(usize, &Probe)],
    ) -> Result<Vec<Option<Spill>>> {
        let mut spills: Vec<Option<Spill>> = Vec::new();
        for &(_, probe) in probes {
            let (Point::BeforeCall(filter)
            | Point::AfterCall(filter)
            | Point::FieldRead(filter)
            | Point::FieldWrite(filter)) = &probe.point
            else {
                continue;
            };
            if !wants(probe, Value::Target) && !wants(probe, Value::CallArgs) {
                continue;
            }
            if spills.is_empty() {
                spills = vec![None; f.insns.len()];
            }
            for (i, insn) in f.insns.iter().enumerate() {
                if spills[i].is_some() {
                    continue;
                }
                let spilled = match &probe.point {
                    Point::FieldRead(_) | Point::FieldWrite(_) => {
                        field_operands(self.cp, insn, matches!(probe.point, Point::FieldWrite(_)))?
                    }
                    _ => call_operands(self.cp, insn)?,
                };
                let Some(mut operands) = spilled else {
                    continue;
                };
                if !filter.matches(&operands.owner, &operands.name, &operands.descriptor) {
                    continue;
                }
                // A constructor writes its own fields before its super call: that object is
                // not initialized yet and stays put.
                if operands.receiver && matches!(insn.opcode, op::PUTFIELD) {
                    operands.receiver =
                        written_object_initialized(&operands, f.states[i].as_ref())?;
                }
                let mut s = self.take(At::Before(i));
                spills[i] = Some(Spill::emit(
                    &mut s,
                    operands.on_stack.as_bytes(),
                    operands.receiver,
                    f.spill_base(),
                )?);
                self.put(At::Before(i), s);
            }
        }
        Ok(spills)
    }

    /// A probe before (`after` false) or after the calls matching `filter`.
    pub(super) fn calls(
        &mut self,
        f: &Facts,
        probe: (usize, &Probe),
        filter: &MemberFilter,
        after: bool,
    ) -> Result<()> {
        for (i, insn) in f.insns.iter().enumerate() {
            let Some((owner, mname, mdesc)) = call_target(self.cp, insn)? else {
                continue;
            };
            if !filter.matches(&owner, &mname, &mdesc) {
                continue;
            }
            if self.call_sites.is_empty() {
                self.call_sites = vec![-1; f.insns.len()];
            }
            let site_id = match self.call_sites[i] {
                id if id >= 0 => id,
                _ => {
                    let named = indy_owner(self.cp, insn, &f.bootstrap_owners).unwrap_or(&owner);
                    let id = self.registry.add_site(
                        f.method.method_id,
                        insn.offset,
                        insn.opcode,
                        "call",
                        format!("{named}.{mname}{mdesc}"),
                    );
                    self.call_sites[i] = id;
                    id
                }
            };
            let ret = erase(return_type(mdesc.as_bytes())?);
            let site = Site {
                site_id,
                this_ok: f.this_initialized(i),
                spilled: f.spills.get(i).and_then(Option::as_ref),
                ..Site::plain()
            };
            if after {
                self.after_call(f, probe, i, site, ret)?;
            } else {
                self.place(f, At::Before(i), probe, site, None)?;
            }
        }
        Ok(())
    }

    /// A probe after call `i` (returning `ret`), on its normal return and, through a handler
    /// covering just the call and rethrowing, for its exceptions.
    fn after_call(
        &mut self,
        f: &Facts,
        (pi, probe): (usize, &Probe),
        i: usize,
        site: Site,
        ret: FieldType<'_>,
    ) -> Result<()> {
        let site_id = site.site_id;
        let returned = (ret != FieldType::Void && wants(probe, Value::ReturnValue))
            .then_some((ret, Value::ReturnValue));
        self.place(f, At::After(i), (pi, probe), site, returned)?;
        let Some(st) = f.states[i].as_ref() else {
            return Ok(());
        };
        if has_uninitialized(st) {
            return Ok(());
        }
        let site = Site {
            site_id,
            ..Site::plain()
        };
        let k = self.rethrowing(f, (pi, probe), site, None, trimmed(&st.locals))?;
        self.edit.handlers_first.push(NewHandler {
            start: Pos::Insn(i),
            end: Pos::AfterInsn(i),
            handler: Pos::Block(k),
            catch_type: 0,
        });
        self.call_blocks.push((i, k));
        Ok(())
    }

    /// The code of the call-site handlers must stay covered by whatever covered the call:
    /// the method's own handlers, and the exception exit's.
    pub(super) fn cover_call_blocks(&mut self, f: &Facts, code: &CodeAttribute) -> Result<()> {
        let n = f.insns.len();
        let offsets = if self.call_blocks.is_empty() {
            Vec::new()
        } else {
            offset_index(f.insns, code.code.len())
        };
        for &(i, k) in &self.call_blocks {
            let off = f.insns[i].offset;
            for e in &code.exception_table {
                if (e.start_pc as u32..e.end_pc as u32).contains(&off) {
                    let h = offsets
                        .get(e.handler_pc as usize)
                        .copied()
                        .filter(|&h| (h as usize) < n)
                        .ok_or(Error::BadAttribute("exception handler offset"))?;
                    self.edit.handlers_last.push(NewHandler {
                        start: Pos::Block(k),
                        end: Pos::BlockEnd(k),
                        handler: Pos::Start(h as usize),
                        catch_type: e.catch_type,
                    });
                }
            }
            if let Some(x) = self.exit_block {
                if f.is_covered(i) {
                    self.edit.handlers_last.push(NewHandler {
                        start: Pos::Block(k),
                        end: Pos::BlockEnd(k),
                        handler: Pos::Block(x),
                        catch_type: 0,
                    });
                }
            }
        }
        Ok(())
    }
}

/// Whether the object whose field `operands` writes is initialized before the write (in
/// `state`, the write's incoming state).
fn written_object_initialized(operands: &Operands, state: Option<&State>) -> Result<bool> {
    let value_slots = parse_field_descriptor(operands.descriptor.as_bytes())?.slots();
    let object = state.and_then(|st| {
        st.stack
            .len()
            .checked_sub(usize::from(value_slots) + 1)
            .map(|at| st.stack[at])
    });
    Ok(matches!(object, Some(VType::Object(_) | VType::Null)))
}

/// Whether a local in `s` holds an object not initialized yet.
fn has_uninitialized(s: &State) -> bool {
    s.locals
        .iter()
        .any(|t| matches!(t, VType::Uninitialized(_) | VType::UninitializedThis))
}

/// Owner, name and descriptor of a called method.
type CallTarget<'a> = (Cow<'a, str>, Cow<'a, str>, Cow<'a, str>);

/// The class of an `invokedynamic`'s bootstrap method (`StringConcatFactory`,
/// `LambdaMetafactory`, ...), which names its call site.
fn indy_owner<'a>(cp: &ConstantPool, insn: &Insn, owners: &'a [String]) -> Option<&'a str> {
    let Operand::Cp(c) = insn.operand else {
        return None;
    };
    match (insn.opcode, cp.get(c)) {
        (op::INVOKEDYNAMIC, Ok(Constant::InvokeDynamic(bootstrap, _))) => owners
            .get(bootstrap as usize)
            .map(String::as_str)
            .filter(|owner| !owner.is_empty()),
        _ => None,
    }
}

/// Owner, name and descriptor of an invoke instruction (owner is empty for invokedynamic).
fn call_target<'a>(cp: &'a ConstantPool, insn: &Insn) -> Result<Option<CallTarget<'a>>> {
    let Operand::Cp(c) = insn.operand else {
        return Ok(None);
    };
    let lossy = String::from_utf8_lossy;
    match insn.opcode {
        op::INVOKEVIRTUAL..=op::INVOKEINTERFACE => {
            let r = cp.member_ref(c)?;
            Ok(Some((lossy(r.owner), lossy(r.name), lossy(r.descriptor))))
        }
        op::INVOKEDYNAMIC => match cp.get(c)? {
            Constant::InvokeDynamic(_, nt) => {
                let (n, d) = cp.name_and_type(nt)?;
                Ok(Some((Cow::Borrowed(""), lossy(n), lossy(d))))
            }
            _ => Err(Error::BadConstant {
                index: c,
                expected: "InvokeDynamic",
            }),
        },
        _ => Ok(None),
    }
}
