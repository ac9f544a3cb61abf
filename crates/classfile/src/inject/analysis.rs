//! What instrumenting needs to know of a method: which instructions need their incoming
//! state, where `this` is initialized, where lines start, and which locals probe code uses.

use super::site::{Method, Spill};
use crate::class_file::Attribute;
use crate::code::CodeAttribute;
use crate::constant_pool::{Constant, ConstantPool};
use crate::descriptor::FieldType;
use crate::error::{Error, Result};
use crate::instruction::{op, Insn};
use crate::plan::{Point, Probe, Value};
use crate::stackmap::VType;
use crate::typeflow::State;

/// What placement knows of the method being instrumented.
pub(super) struct Facts<'a> {
    pub(super) insns: &'a [Insn],
    /// The incoming state of the instructions [`wanted_states`] asked for.
    pub(super) states: &'a [Option<State>],
    /// The implicit initial frame's locals (slot form).
    pub(super) initial: &'a [VType],
    pub(super) method: Method<'a>,
    pub(super) ret: FieldType<'a>,
    pub(super) is_init: bool,
    /// Whether the class carries stack map frames (version 50 and later).
    pub(super) with_frames: bool,
    /// The local holding the guard's verdict, when the method has a guard.
    pub(super) pass: Option<u16>,
    /// Instruction ranges an exception-exit handler may cover (see [`initialized_ranges`]).
    pub(super) covered: Vec<(usize, usize)>,
    /// For each instruction, the line that starts there.
    pub(super) lines: Vec<Option<u16>>,
    /// For each instruction, where the call or field access there copied its operands.
    pub(super) spills: Vec<Option<Spill>>,
    /// The class of each of the class's bootstrap methods (`BootstrapMethods`, in order),
    /// which names an `invokedynamic` call site.
    pub(super) bootstrap_owners: Vec<String>,
    /// The typed catch handlers: (first instruction, the caught class's constant).
    pub(super) catches: Vec<(usize, u16)>,
}

impl Facts<'_> {
    /// Whether `this` is initialized before instruction `i` (in a constructor, after its
    /// super call).
    pub(super) fn this_initialized(&self, i: usize) -> bool {
        !self.method.is_static
            && self.states[i]
                .as_ref()
                .is_some_and(|s| matches!(s.locals.first(), Some(VType::Object(_))))
    }

    /// Whether an exception-exit handler covers instruction `i`.
    pub(super) fn is_covered(&self, i: usize) -> bool {
        self.covered.iter().any(|&(a, b)| (a..b).contains(&i))
    }

    /// First local of the area the calls' operands are copied to, after the stash.
    pub(super) fn spill_base(&self) -> u16 {
        self.method.stash + 1
    }
}

/// Which instructions need their incoming state. States are needed at returns for
/// `this`/arguments (and a guard's frames), at calls for the call handlers' frames and
/// `this`, at constructor calls for allocations, at field accesses for `this` and the
/// object, and everywhere in constructors (`uninit_this`).
pub(super) fn wanted_states(
    insns: &[Insn],
    probes: &[(usize, &Probe)],
    uninit_this: bool,
    guarded: bool,
) -> Vec<bool> {
    let at_returns = guarded
        || probes.iter().any(|(_, p)| {
            p.point == Point::Return
                && (p.values.contains(&Value::This) || p.values.contains(&Value::Args))
        });
    let at_calls = probes.iter().any(|(_, p)| match p.point {
        Point::AfterCall(_) => true,
        Point::BeforeCall(_) => p.values.contains(&Value::This),
        _ => false,
    });
    let at_inits = probes.iter().any(|(_, p)| p.point == Point::Allocation);
    let at_fields = probes.iter().any(|(_, p)| {
        matches!(p.point, Point::FieldRead(_) | Point::FieldWrite(_))
            && (p.values.contains(&Value::This) || p.values.contains(&Value::Target))
    });
    // Instruction points: their `this` anywhere (catch handlers start anywhere).
    let everywhere = probes
        .iter()
        .any(|(_, p)| matches!(p.point, Point::Instruction(_)));
    insns
        .iter()
        .map(|insn| {
            uninit_this
                || everywhere
                || at_returns && matches!(insn.opcode, op::IRETURN..=op::RETURN)
                || at_calls && matches!(insn.opcode, op::INVOKEVIRTUAL..=op::INVOKEDYNAMIC)
                || at_inits && insn.opcode == op::INVOKESPECIAL
                || at_fields && matches!(insn.opcode, op::GETSTATIC..=op::PUTFIELD)
        })
        .collect()
}

/// The ranges of the `n` instructions an exception-exit handler may cover: where `this` is
/// initialized (in constructors, `uninit_this`: after the super/this call, on every path).
pub(super) fn initialized_ranges(
    states: &[Option<State>],
    n: usize,
    uninit_this: bool,
) -> Vec<(usize, usize)> {
    if !uninit_this {
        return vec![(0, n)];
    }
    let mut v = Vec::new();
    let mut run: Option<usize> = None;
    let ends = states.iter().map(Some).chain(std::iter::once(None));
    for (i, st) in ends.enumerate() {
        let ok = st.is_some_and(|s| {
            s.as_ref()
                .is_some_and(|s| !s.locals.contains(&VType::UninitializedThis))
        });
        match (ok, run) {
            (true, None) => run = Some(i),
            (false, Some(r)) => {
                v.push((r, i));
                run = None;
            }
            _ => {}
        }
    }
    v
}

/// Whether the locals in `state` still hold the parameters with their declared kinds.
pub(super) fn params_intact(state: &State, is_static: bool, params: &[FieldType<'_>]) -> bool {
    let mut slot = if is_static { 0 } else { 1 };
    for &p in params {
        let ok = match (p, state.locals.get(slot)) {
            (FieldType::Long, Some(VType::Long))
            | (FieldType::Double, Some(VType::Double))
            | (FieldType::Float, Some(VType::Float)) => true,
            (FieldType::Reference(_), Some(VType::Object(_) | VType::Null)) => true,
            (
                FieldType::Long | FieldType::Double | FieldType::Float | FieldType::Reference(_),
                _,
            ) => false,
            (_, Some(VType::Integer)) => true,
            _ => false,
        };
        if !ok {
            return false;
        }
        slot += p.slots() as usize;
    }
    true
}

/// `locals` without trailing `Top`s (keeping the second half of a trailing long/double).
pub(super) fn trimmed(locals: &[VType]) -> Vec<VType> {
    let mut len = 0;
    let mut i = 0;
    while i < locals.len() {
        let w = if locals[i].is_wide() { 2 } else { 1 };
        if locals[i] != VType::Top {
            len = (i + w).min(locals.len());
        }
        i += w;
    }
    locals[..len].to_vec()
}

/// For each instruction, the line that starts there (first LineNumberTable entry).
pub(super) fn line_starts(
    cp: &ConstantPool,
    code: &CodeAttribute,
    insns: &[Insn],
) -> Result<Vec<Option<u16>>> {
    let mut v = vec![None; insns.len()];
    let map = crate::code::offset_index(insns, code.code.len());
    for a in &code.attributes {
        if cp.utf8(a.name_index)? != b"LineNumberTable" {
            continue;
        }
        let info = &a.info;
        let k = info
            .get(..2)
            .map_or(0, |b| u16::from_be_bytes([b[0], b[1]])) as usize;
        for e in 0..k {
            let Some(b) = info.get(2 + 4 * e..6 + 4 * e) else {
                return Err(Error::BadAttribute("LineNumberTable"));
            };
            let pc = u16::from_be_bytes([b[0], b[1]]) as usize;
            let line = u16::from_be_bytes([b[2], b[3]]);
            match map.get(pc) {
                Some(&i) if (i as usize) < insns.len() => {
                    v[i as usize].get_or_insert(line);
                }
                _ => return Err(Error::BadAttribute("LineNumberTable")),
            }
        }
    }
    Ok(v)
}

/// The typed handlers of `code`'s exception table (a `finally` catches any type: not one),
/// each handler once: (its first instruction, the caught class's constant).
pub(super) fn catches(code: &CodeAttribute, insns: &[Insn]) -> Result<Vec<(usize, u16)>> {
    let map = crate::code::offset_index(insns, code.code.len());
    let mut v: Vec<(usize, u16)> = Vec::new();
    for e in code.exception_table.iter().filter(|e| e.catch_type != 0) {
        let i = match map.get(e.handler_pc as usize) {
            Some(&i) if (i as usize) < insns.len() => i as usize,
            _ => return Err(Error::BadAttribute("exception handler offset")),
        };
        if !v.iter().any(|&(at, _)| at == i) {
            v.push((i, e.catch_type));
        }
    }
    Ok(v)
}

/// The class of each bootstrap method of the class (its `BootstrapMethods` attribute, in
/// order); empty where it has none or the attribute is malformed (sites are then named
/// without a class, as before).
pub(super) fn bootstrap_owners(cp: &ConstantPool, attributes: &[Attribute]) -> Vec<String> {
    let Some(info) = attributes
        .iter()
        .find(|a| {
            cp.utf8(a.name_index)
                .is_ok_and(|n| n == b"BootstrapMethods")
        })
        .map(|a| a.info.as_slice())
    else {
        return Vec::new();
    };
    let u2 = |at: usize| {
        info.get(at..at + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
    };
    let mut owners = Vec::new();
    let mut at = 2;
    for _ in 0..u2(0).unwrap_or(0) {
        let (Some(handle), Some(arguments)) = (u2(at), u2(at + 2)) else {
            return Vec::new();
        };
        let owner = match cp.get(handle) {
            Ok(Constant::MethodHandle(_, reference)) => cp
                .member_ref(reference)
                .map(|r| String::from_utf8_lossy(r.owner).into_owned())
                .unwrap_or_default(),
            _ => String::new(),
        };
        owners.push(owner);
        at += 4 + 2 * arguments as usize;
    }
    owners
}
