//! Placing probe calls into one method.
//!
//! Probe code is straight-line and stack-neutral: values living on the operand stack (return
//! value, exception, new object, monitor, field value) are duplicated, boxed and parked in one
//! fresh local slot before the probe's arguments are pushed, so the method computes exactly
//! what it computed before. In a method with a [`Guard`](crate::guard::Guard) the entry
//! stores the guard's verdict in a local of its own, and each place's probe code is skipped
//! by one branch when it is 0 (with a stack map frame where the branch lands).

use std::borrow::Cow;

use crate::class_file::{ClassFile, ACC_STATIC};
use crate::code::{relayout, Block, CodeAttribute, Edit, Frames, NewHandler, Pos};
use crate::constant_pool::{Constant, ConstantPool};
use crate::descriptor::{parse_field_descriptor, parse_method_descriptor, return_type, FieldType};
use crate::error::{Error, Result};
use crate::guard;
use crate::instruction::{self, emit_cp, emit_ldc, emit_local, op, Insn, Operand};
use crate::plan::{Clock, InjectionPlan, Point, Probe, Registry, Value};
use crate::stackmap::{self, Frame, VType};
use crate::typeflow::{self, MethodInfo, State};

/// Straight-line code with its operand stack accounting.
struct Snippet {
    code: Vec<u8>,
    depth: i32,
    peak: i32,
}

impl Snippet {
    fn new(depth: i32) -> Self {
        Snippet {
            code: Vec::with_capacity(48),
            depth,
            peak: depth,
        }
    }

    /// Continues `code` (taken from its place in an [`Edit`]) at stack depth `depth`.
    fn on(code: Vec<u8>, depth: i32) -> Self {
        Snippet {
            code,
            depth,
            peak: depth,
        }
    }

    fn emit(&mut self, bytes: &[u8], delta: i32) {
        self.code.extend_from_slice(bytes);
        self.depth += delta;
        self.peak = self.peak.max(self.depth);
    }

    fn int(&mut self, cp: &mut ConstantPool, v: i32) -> Result<()> {
        match v {
            -1..=5 => self.emit(&[(op::ICONST_0 as i32 + v) as u8], 1),
            -128..=127 => self.emit(&[op::BIPUSH, v as u8], 1),
            -32768..=32767 => self.emit(&[op::SIPUSH, (v >> 8) as u8, v as u8], 1),
            _ => {
                let mut b = Vec::new();
                emit_ldc(&mut b, cp.add_integer(v)?);
                self.emit(&b, 1);
            }
        }
        Ok(())
    }

    fn cp_insn(&mut self, opcode: u8, index: u16, delta: i32) {
        let mut b = Vec::with_capacity(3);
        emit_cp(&mut b, opcode, index);
        self.emit(&b, delta);
    }

    fn local(&mut self, opcode: u8, index: u16, delta: i32) {
        let mut b = Vec::with_capacity(4);
        emit_local(&mut b, opcode, index);
        self.emit(&b, delta);
    }

    /// Boxes the primitive of type `t` on top of the stack.
    fn boxed(&mut self, cp: &mut ConstantPool, refs: &mut Refs, t: FieldType<'_>) -> Result<()> {
        let (class, desc) = match t {
            FieldType::Boolean => ("java/lang/Boolean", "(Z)Ljava/lang/Boolean;"),
            FieldType::Byte => ("java/lang/Byte", "(B)Ljava/lang/Byte;"),
            FieldType::Char => ("java/lang/Character", "(C)Ljava/lang/Character;"),
            FieldType::Short => ("java/lang/Short", "(S)Ljava/lang/Short;"),
            FieldType::Int => ("java/lang/Integer", "(I)Ljava/lang/Integer;"),
            FieldType::Long => ("java/lang/Long", "(J)Ljava/lang/Long;"),
            FieldType::Float => ("java/lang/Float", "(F)Ljava/lang/Float;"),
            FieldType::Double => ("java/lang/Double", "(D)Ljava/lang/Double;"),
            _ => return Ok(()),
        };
        let k = b"BCDFIJSZ"
            .iter()
            .position(|&c| Some(c) == t.primitive_char())
            .unwrap_or(0);
        let slot = &mut refs.boxing[k];
        let m = match *slot {
            Some(m) => m,
            None => *slot.insert(cp.add_method_ref(class, "valueOf", desc)?),
        };
        self.cp_insn(op::INVOKESTATIC, m, 1 - t.slots() as i32);
        Ok(())
    }

    /// Copies the value of type `t` on top of the stack, boxed, into local `slot`.
    fn capture(
        &mut self,
        cp: &mut ConstantPool,
        refs: &mut Refs,
        t: FieldType<'_>,
        slot: u16,
    ) -> Result<()> {
        if t.slots() == 2 {
            self.emit(&[op::DUP2], 2);
        } else {
            self.emit(&[op::DUP], 1);
        }
        self.boxed(cp, refs, t)?;
        self.local(op::ASTORE, slot, -1);
        Ok(())
    }
}

/// Constant pool indices used by probe code, cached for one class.
pub(crate) struct Refs {
    probes: Vec<Option<u16>>,
    boxing: [Option<u16>; 8],
    object: Option<u16>,
    throwable: Option<u16>,
    clock: Option<u16>,
}

impl Refs {
    /// An empty cache for a plan with `probes` probes.
    pub(crate) fn new(probes: usize) -> Self {
        Refs {
            probes: vec![None; probes],
            boxing: [None; 8],
            object: None,
            throwable: None,
            clock: None,
        }
    }

    fn probe(
        &mut self,
        cp: &mut ConstantPool,
        runtime_class: &str,
        pi: usize,
        probe: &Probe,
    ) -> Result<u16> {
        if let Some(Some(m)) = self.probes.get(pi) {
            return Ok(*m);
        }
        let m = cp.add_method_ref(runtime_class, &probe.method, &probe.descriptor())?;
        if let Some(slot) = self.probes.get_mut(pi) {
            *slot = Some(m);
        }
        Ok(m)
    }

    fn object(&mut self, cp: &mut ConstantPool) -> Result<u16> {
        match self.object {
            Some(c) => Ok(c),
            None => Ok(*self.object.insert(cp.add_class("java/lang/Object")?)),
        }
    }

    /// The plan's clock (see [`InjectionPlan::clock`]): its field or method reference, and
    /// the instruction reading it.
    fn clock(&mut self, cp: &mut ConstantPool, plan: &InjectionPlan) -> Result<(u8, u16)> {
        let clock = plan.clock.as_ref().ok_or(Error::Unsupported(
            "a probe takes the entry mark but the plan names no clock",
        ))?;
        let opcode = match clock {
            Clock::Field(_) => op::GETSTATIC,
            Clock::Method(_) => op::INVOKESTATIC,
        };
        if let Some(index) = self.clock {
            return Ok((opcode, index));
        }
        let index = match clock {
            Clock::Field(name) => cp.add_field_ref(&plan.runtime_class, name, "J")?,
            Clock::Method(name) => cp.add_method_ref(&plan.runtime_class, name, "()J")?,
        };
        Ok((opcode, *self.clock.insert(index)))
    }

    fn throwable(&mut self, cp: &mut ConstantPool) -> Result<u16> {
        match self.throwable {
            Some(c) => Ok(c),
            None => Ok(*self.throwable.insert(cp.add_class("java/lang/Throwable")?)),
        }
    }
}

/// The type without its class name (probe code only needs the kind).
fn erase(t: FieldType<'_>) -> FieldType<'static> {
    match t {
        FieldType::Reference(_) => FieldType::Reference(b"java/lang/Object"),
        FieldType::Byte => FieldType::Byte,
        FieldType::Char => FieldType::Char,
        FieldType::Double => FieldType::Double,
        FieldType::Float => FieldType::Float,
        FieldType::Int => FieldType::Int,
        FieldType::Long => FieldType::Long,
        FieldType::Short => FieldType::Short,
        FieldType::Boolean => FieldType::Boolean,
        FieldType::Void => FieldType::Void,
    }
}

fn store_opcode(t: FieldType<'_>) -> u8 {
    match t {
        FieldType::Long => op::LSTORE,
        FieldType::Float => op::FSTORE,
        FieldType::Double => op::DSTORE,
        FieldType::Reference(_) => op::ASTORE,
        _ => op::ISTORE,
    }
}

fn load_opcode(t: FieldType<'_>) -> u8 {
    match t {
        FieldType::Long => op::LLOAD,
        FieldType::Float => op::FLOAD,
        FieldType::Double => op::DLOAD,
        FieldType::Reference(_) => op::ALOAD,
        _ => op::ILOAD,
    }
}

/// What the values of one probe call resolve to at one point.
struct Site<'s> {
    site_id: i32,
    line: i32,
    this_ok: bool,
    args_ok: bool,
    /// The value parked in the stash slot, if any.
    stashed: Option<Value>,
    /// At a call: where its receiver and arguments were copied.
    spilled: Option<&'s Spill>,
}

/// Locals holding a call's receiver (unless static or a constructor's) and arguments, copied
/// off the operand stack just before the call for the probes there and after it.
#[derive(Clone)]
struct Spill {
    receiver: Option<u16>,
    args: Vec<(u16, FieldType<'static>)>,
}

impl Spill {
    /// Emits the copy at a call of `descriptor` (top of the stack: its arguments, then its
    /// receiver when `receiver`), into locals from `base`; the stack is left as it was.
    fn emit(s: &mut Snippet, descriptor: &[u8], receiver: bool, base: u16) -> Result<Spill> {
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
    fn size(&self, base: u16) -> u16 {
        let end = self
            .args
            .last()
            .map(|&(at, p)| at + p.slots())
            .or(self.receiver.map(|at| at + 1));
        end.map_or(0, |end| end - base)
    }
}

struct Method<'a> {
    method_id: i32,
    is_static: bool,
    params: Vec<FieldType<'a>>,
    stash: u16,
    /// The local holding [`Value::Mark`] (two slots), when a probe takes it.
    mark: Option<u16>,
    runtime_class: &'a str,
}

impl Method<'_> {
    /// Emits the call of `probe` with values as available at `site`.
    fn call(
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

fn wants(probe: &Probe, v: Value) -> bool {
    probe.values.contains(&v)
}

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

/// Whether the locals in `state` still hold the parameters with their declared kinds.
fn params_intact(state: &State, is_static: bool, params: &[FieldType<'_>]) -> bool {
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

fn has_uninitialized(s: &State) -> bool {
    s.locals
        .iter()
        .any(|t| matches!(t, VType::Uninitialized(_) | VType::UninitializedThis))
}

/// `locals` without trailing `Top`s (keeping the second half of a trailing long/double).
fn trimmed(locals: &[VType]) -> Vec<VType> {
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
    let Some(code_pos) = cf.methods[mi].attributes.iter().position(|a| {
        cf.constant_pool
            .utf8(a.name_index)
            .is_ok_and(|n| n == b"Code")
    }) else {
        return Ok(false);
    };
    let code = CodeAttribute::parse(&cf.methods[mi].attributes[code_pos].info)?;
    let insns = instruction::decode(&code.code)?;
    if insns
        .iter()
        .any(|i| matches!(i.opcode, op::JSR | op::JSR_W | op::RET))
    {
        return Err(Error::Unsupported("jsr/ret subroutines"));
    }
    let cp = &mut cf.constant_pool;
    let is_static = cf.methods[mi].access_flags & ACC_STATIC != 0;
    let is_init = name == "<init>";
    let with_frames = cf.major_version >= 50;
    let md = parse_method_descriptor(desc.as_bytes())?;
    let n = insns.len();

    let initial = typeflow::initial_locals(
        cp,
        cf.this_class,
        is_static,
        is_init,
        desc.as_bytes(),
        code.max_locals,
    )?;
    let frames: Vec<Frame> = match code
        .attributes
        .iter()
        .find(|a| cp.utf8(a.name_index).is_ok_and(|n| n == b"StackMapTable"))
    {
        Some(a) if with_frames => stackmap::decode(&a.info, &initial)?,
        _ => Vec::new(),
    };

    // A guard on the arguments, where it compiles for this method (else its probes run for
    // every call, and whoever receives them filters).
    let guard = plan
        .guards
        .iter()
        .find(|(filter, _)| filter.matches(class_name, name, desc))
        .and_then(|(_, g)| guard::compile(g, &md.params, is_static, cp).ok());

    // Which instructions need their incoming state.
    let uninit_this = matches!(initial.first(), Some(VType::UninitializedThis));
    // States are needed at returns for `this`/arguments, at calls for the call handlers'
    // frames and `this`, at constructor calls for allocations, at field accesses for `this`
    // and the object, and everywhere in constructors.
    let at_returns = guard.is_some()
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
    let want: Vec<bool> = insns
        .iter()
        .map(|insn| {
            uninit_this
                || at_returns && matches!(insn.opcode, op::IRETURN..=op::RETURN)
                || at_calls && matches!(insn.opcode, op::INVOKEVIRTUAL..=op::INVOKEDYNAMIC)
                || at_inits && insn.opcode == op::INVOKESPECIAL
                || at_fields && matches!(insn.opcode, op::GETSTATIC..=op::PUTFIELD)
        })
        .collect();
    let info = MethodInfo {
        this_class: cf.this_class,
        max_locals: code.max_locals,
        insns: &insns,
        code_len: code.code.len(),
        exception_table: &code.exception_table,
        frames: if with_frames { Some(&frames) } else { None },
        initial_locals: &initial,
    };
    let states = typeflow::states(cp, &info, &want)?;

    let method_id = registry.add_method(class_name, name, desc);
    let marked = probes.iter().any(|(_, p)| wants(p, Value::Mark));
    // The guard's verdict, after the mark.
    let pass = guard
        .is_some()
        .then_some(code.max_locals + if marked { 2 } else { 0 });
    let m = Method {
        method_id,
        is_static,
        params: md.params.clone(),
        stash: code.max_locals + if marked { 2 } else { 0 } + u16::from(pass.is_some()),
        mark: marked.then_some(code.max_locals),
        runtime_class: &plan.runtime_class,
    };
    let mut edit = Edit::new(n);
    let mut peak = 0i32;
    let mut used_stash = false;
    if let Some(slot) = m.mark {
        let mut s = Snippet::new(0);
        let (opcode, clock) = refs.clock(cp, plan)?;
        s.cp_insn(opcode, clock, 2);
        s.local(op::LSTORE, slot, -2);
        finish(s, &mut edit.prologue, &mut peak);
    }
    if let (Some(compiled), Some(slot)) = (&guard, pass) {
        let mut s = Snippet::on(std::mem::take(&mut edit.prologue), 0);
        s.emit(&compiled.code, 1);
        s.peak = s.peak.max(compiled.peak);
        s.local(op::ISTORE, slot, -1);
        finish(s, &mut edit.prologue, &mut peak);
    }
    // The entry probes' code, apart from the prologue's mark and guard.
    let mut entry = Vec::new();

    // Exception-exit handlers may only cover code where `this` is initialized (in constructors:
    // after the super/this call, on every path).
    let covered: Vec<(usize, usize)> = if uninit_this {
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
    } else {
        vec![(0, n)]
    };
    let is_covered = |i: usize| covered.iter().any(|&(a, b)| (a..b).contains(&i));
    let at_line: Vec<Option<u16>> = line_starts(cp, &code, &insns)?;

    // Calls whose probes take the called method's receiver or arguments: copied into
    // locals after the stash before anything else runs there (one area, reused by each call).
    let spill_base = m.stash + 1;
    let mut spills: Vec<Option<Spill>> = Vec::new();
    // Field accesses whose probes take the accessed object likewise (a write's value too,
    // which sits above it on the stack).
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
            spills = vec![None; n];
        }
        for (i, insn) in insns.iter().enumerate() {
            if spills[i].is_some() {
                continue;
            }
            let spilled = match &probe.point {
                Point::FieldRead(_) | Point::FieldWrite(_) => {
                    field_operands(cp, insn, matches!(probe.point, Point::FieldWrite(_)))?
                }
                _ => call_operands(cp, insn)?,
            };
            let Some(mut operands) = spilled else {
                continue;
            };
            if !filter.matches(&operands.owner, &operands.name, &operands.descriptor) {
                continue;
            }
            // A constructor writes its own fields before its super call: that object is not
            // initialized yet and stays put.
            if operands.receiver && matches!(insn.opcode, op::PUTFIELD) {
                let value_slots = parse_field_descriptor(operands.descriptor.as_bytes())?.slots();
                let object = states[i].as_ref().and_then(|st| {
                    st.stack
                        .len()
                        .checked_sub(usize::from(value_slots) + 1)
                        .map(|at| st.stack[at])
                });
                operands.receiver = matches!(object, Some(VType::Object(_) | VType::Null));
            }
            let mut s = Snippet::on(std::mem::take(&mut edit.before[i]), 0);
            spills[i] = Some(Spill::emit(
                &mut s,
                operands.on_stack.as_bytes(),
                operands.receiver,
                spill_base,
            )?);
            finish(s, &mut edit.before[i], &mut peak);
        }
    }
    let spill_size = spills
        .iter()
        .flatten()
        .map(|c| c.size(spill_base))
        .max()
        .unwrap_or(0);

    let mut exit_block: Option<usize> = None;
    // One site id per call, shared by its before and after probes.
    let mut call_sites: Vec<i32> = Vec::new();
    let mut call_blocks: Vec<(usize, usize)> = Vec::new();
    for &(pi, probe) in probes {
        let plain = Site {
            site_id: -1,
            line: -1,
            this_ok: false,
            args_ok: false,
            stashed: None,
            spilled: None,
        };
        match &probe.point {
            Point::Entry => {
                let site = Site {
                    this_ok: !is_static && !is_init,
                    args_ok: true,
                    ..plain
                };
                let mut s = Snippet::on(std::mem::take(&mut entry), 0);
                m.call(cp, refs, &mut s, pi, probe, &site)?;
                finish(s, &mut entry, &mut peak);
            }
            Point::Return => {
                for (i, insn) in insns.iter().enumerate() {
                    if !matches!(insn.opcode, op::IRETURN..=op::RETURN) {
                        continue;
                    }
                    let st = states[i].as_ref();
                    let mut s = Snippet::on(std::mem::take(&mut edit.before[i]), 0);
                    let mut site = Site {
                        site_id: -1,
                        this_ok: !is_static
                            && st.map_or(!is_init, |s| {
                                matches!(s.locals.first(), Some(VType::Object(_)))
                            }),
                        args_ok: st.is_some_and(|s| params_intact(s, is_static, &m.params)),
                        ..plain
                    };
                    if wants(probe, Value::SiteId) {
                        site.site_id = registry.add_site(
                            method_id,
                            insn.offset,
                            insn.opcode,
                            "return",
                            String::new(),
                        );
                    }
                    if md.ret != FieldType::Void && wants(probe, Value::ReturnValue) {
                        s.capture(cp, refs, md.ret, m.stash)?;
                        used_stash = true;
                        site.stashed = Some(Value::ReturnValue);
                    }
                    m.call(cp, refs, &mut s, pi, probe, &site)?;
                    finish(s, &mut edit.before[i], &mut peak);
                }
            }
            Point::ExceptionExit => {
                if covered.is_empty() {
                    continue;
                }
                let mut s = Snippet::new(1);
                let throwable = refs.throwable(cp)?;
                s.capture(
                    cp,
                    refs,
                    FieldType::Reference(b"java/lang/Throwable"),
                    m.stash,
                )?;
                used_stash = true;
                let skip = pass.map(|slot| {
                    s.local(op::ILOAD, slot, 1);
                    s.emit(&[op::IFEQ, 0, 0], -1);
                    s.code.len() - 3
                });
                m.call(
                    cp,
                    refs,
                    &mut s,
                    pi,
                    probe,
                    &Site {
                        stashed: Some(Value::Thrown),
                        ..plain
                    },
                )?;
                let frame = with_frames.then(|| Frame {
                    offset: 0,
                    locals: Vec::new(),
                    stack: vec![VType::Object(throwable)],
                });
                if let Some(at) = skip {
                    let landing = s.code.len();
                    patch_branch(&mut s.code, at, landing)?;
                    if let Some(frame) = &frame {
                        let block = Pos::BlockAt(edit.blocks.len(), landing as u32);
                        edit.frames.push((block, frame.clone()));
                    }
                }
                s.emit(&[op::ATHROW], -1);
                peak = peak.max(s.peak);
                edit.blocks.push(Block {
                    code: s.code,
                    frame,
                });
                let k = edit.blocks.len() - 1;
                for &(a, b) in &covered {
                    edit.handlers_last.push(NewHandler {
                        start: Pos::Start(a),
                        end: Pos::Start(b),
                        handler: Pos::Block(k),
                        catch_type: 0,
                    });
                }
                exit_block.get_or_insert(k);
            }
            Point::BeforeCall(filter) | Point::AfterCall(filter) => {
                let after = matches!(probe.point, Point::AfterCall(_));
                for (i, insn) in insns.iter().enumerate() {
                    let Some((owner, mname, mdesc)) = call_target(cp, insn)? else {
                        continue;
                    };
                    if !filter.matches(&owner, &mname, &mdesc) {
                        continue;
                    }
                    if call_sites.is_empty() {
                        call_sites = vec![-1; n];
                    }
                    let site_id = match call_sites[i] {
                        id if id >= 0 => id,
                        _ => {
                            let id = registry.add_site(
                                method_id,
                                insn.offset,
                                insn.opcode,
                                "call",
                                format!("{owner}.{mname}{mdesc}"),
                            );
                            call_sites[i] = id;
                            id
                        }
                    };
                    let ret = erase(return_type(mdesc.as_bytes())?);
                    let spilled = spills.get(i).and_then(Option::as_ref);
                    let site = Site {
                        site_id,
                        // `this`, once initialized (in a constructor, after its super call).
                        this_ok: !is_static
                            && states[i].as_ref().is_some_and(|s| {
                                matches!(s.locals.first(), Some(VType::Object(_)))
                            }),
                        spilled,
                        ..plain
                    };
                    if !after {
                        let mut s = Snippet::on(std::mem::take(&mut edit.before[i]), 0);
                        m.call(cp, refs, &mut s, pi, probe, &site)?;
                        finish(s, &mut edit.before[i], &mut peak);
                        continue;
                    }
                    let mut s = Snippet::on(std::mem::take(&mut edit.after[i]), 0);
                    let mut normal = Site { ..site };
                    if ret != FieldType::Void && wants(probe, Value::ReturnValue) {
                        s.capture(cp, refs, ret, m.stash)?;
                        used_stash = true;
                        normal.stashed = Some(Value::ReturnValue);
                    }
                    m.call(cp, refs, &mut s, pi, probe, &normal)?;
                    finish(s, &mut edit.after[i], &mut peak);
                    // The call's own exceptions: a handler covering just the call, rethrowing.
                    let Some(st) = states[i].as_ref() else {
                        continue;
                    };
                    if has_uninitialized(st) {
                        continue;
                    }
                    let throwable = refs.throwable(cp)?;
                    let mut s = Snippet::new(1);
                    s.capture(
                        cp,
                        refs,
                        FieldType::Reference(b"java/lang/Throwable"),
                        m.stash,
                    )?;
                    m.call(
                        cp,
                        refs,
                        &mut s,
                        pi,
                        probe,
                        &Site {
                            site_id,
                            stashed: Some(Value::Thrown),
                            ..plain
                        },
                    )?;
                    s.emit(&[op::ATHROW], -1);
                    peak = peak.max(s.peak);
                    let frame = with_frames.then(|| Frame {
                        offset: 0,
                        locals: trimmed(&st.locals),
                        stack: vec![VType::Object(throwable)],
                    });
                    edit.blocks.push(Block {
                        code: s.code,
                        frame,
                    });
                    let k = edit.blocks.len() - 1;
                    edit.handlers_first.push(NewHandler {
                        start: Pos::Insn(i),
                        end: Pos::AfterInsn(i),
                        handler: Pos::Block(k),
                        catch_type: 0,
                    });
                    call_blocks.push((i, k));
                }
            }
            Point::Allocation => {
                for (i, insn) in insns.iter().enumerate() {
                    let (at, detail) = match insn.opcode {
                        op::NEWARRAY | op::ANEWARRAY | op::MULTIANEWARRAY => {
                            (Some(i), alloc_detail(cp, insn))
                        }
                        op::NEW => (
                            constructor_call(cp, &insns, i, &states)?,
                            alloc_detail(cp, insn),
                        ),
                        _ => continue,
                    };
                    let Some(j) = at else { continue };
                    let site_id =
                        registry.add_site(method_id, insn.offset, insn.opcode, "alloc", detail);
                    let mut s = Snippet::on(std::mem::take(&mut edit.after[j]), 0);
                    s.capture(cp, refs, FieldType::Reference(b"java/lang/Object"), m.stash)?;
                    used_stash = true;
                    m.call(
                        cp,
                        refs,
                        &mut s,
                        pi,
                        probe,
                        &Site {
                            site_id,
                            stashed: Some(Value::NewObject),
                            ..plain
                        },
                    )?;
                    finish(s, &mut edit.after[j], &mut peak);
                }
            }
            Point::MonitorEnter | Point::MonitorExit => {
                let opcode = if probe.point == Point::MonitorEnter {
                    op::MONITORENTER
                } else {
                    op::MONITOREXIT
                };
                for (i, insn) in insns.iter().enumerate() {
                    if insn.opcode != opcode {
                        continue;
                    }
                    let kind = if opcode == op::MONITORENTER {
                        "monitorenter"
                    } else {
                        "monitorexit"
                    };
                    let site_id =
                        registry.add_site(method_id, insn.offset, insn.opcode, kind, String::new());
                    let mut s = Snippet::on(std::mem::take(&mut edit.before[i]), 0);
                    s.capture(cp, refs, FieldType::Reference(b"java/lang/Object"), m.stash)?;
                    used_stash = true;
                    m.call(
                        cp,
                        refs,
                        &mut s,
                        pi,
                        probe,
                        &Site {
                            site_id,
                            stashed: Some(Value::Lock),
                            ..plain
                        },
                    )?;
                    finish(s, &mut edit.before[i], &mut peak);
                }
            }
            Point::FieldRead(filter) | Point::FieldWrite(filter) => {
                let read = matches!(probe.point, Point::FieldRead(_));
                for (i, insn) in insns.iter().enumerate() {
                    let is_read = matches!(insn.opcode, op::GETSTATIC | op::GETFIELD);
                    let is_write = matches!(insn.opcode, op::PUTSTATIC | op::PUTFIELD);
                    if !(read && is_read || !read && is_write) {
                        continue;
                    }
                    let Operand::Cp(c) = insn.operand else {
                        continue;
                    };
                    let r = cp.member_ref(c)?;
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
                    let site_id = registry.add_site(
                        method_id,
                        insn.offset,
                        insn.opcode,
                        kind,
                        format!("{owner}.{fname}"),
                    );
                    let dest = if read {
                        &mut edit.after[i]
                    } else {
                        &mut edit.before[i]
                    };
                    let mut s = Snippet::on(std::mem::take(dest), 0);
                    s.capture(cp, refs, t, m.stash)?;
                    used_stash = true;
                    m.call(
                        cp,
                        refs,
                        &mut s,
                        pi,
                        probe,
                        &Site {
                            site_id,
                            // `this`, once initialized (in a constructor, after its super
                            // call; fields are written before it too).
                            this_ok: !is_static
                                && states[i].as_ref().is_some_and(|s| {
                                    matches!(s.locals.first(), Some(VType::Object(_)))
                                }),
                            stashed: Some(Value::FieldValue),
                            spilled: spills.get(i).and_then(Option::as_ref),
                            ..plain
                        },
                    )?;
                    finish(
                        s,
                        if read {
                            &mut edit.after[i]
                        } else {
                            &mut edit.before[i]
                        },
                        &mut peak,
                    );
                }
            }
            Point::Line(only) => {
                for (i, line) in at_line.iter().enumerate() {
                    let Some(line) = *line else { continue };
                    if !only.is_empty() && !only.contains(&u32::from(line)) {
                        continue;
                    }
                    let site_id = registry.add_site(
                        method_id,
                        insns[i].offset,
                        insns[i].opcode,
                        "line",
                        String::new(),
                    );
                    let mut s = Snippet::on(std::mem::take(&mut edit.before[i]), 0);
                    m.call(
                        cp,
                        refs,
                        &mut s,
                        pi,
                        probe,
                        &Site {
                            site_id,
                            line: line as i32,
                            ..plain
                        },
                    )?;
                    finish(s, &mut edit.before[i], &mut peak);
                }
            }
        }
    }
    // The code of the call-site handlers must stay covered by whatever covered the call.
    let offsets = if call_blocks.is_empty() {
        Vec::new()
    } else {
        crate::code::offset_index(&insns, code.code.len())
    };
    for &(i, k) in &call_blocks {
        let off = insns[i].offset;
        for e in &code.exception_table {
            if (e.start_pc as u32..e.end_pc as u32).contains(&off) {
                let h = offsets
                    .get(e.handler_pc as usize)
                    .copied()
                    .filter(|&h| (h as usize) < n)
                    .ok_or(Error::BadAttribute("exception handler offset"))?;
                edit.handlers_last.push(NewHandler {
                    start: Pos::Block(k),
                    end: Pos::BlockEnd(k),
                    handler: Pos::Start(h as usize),
                    catch_type: e.catch_type,
                });
            }
        }
        if let Some(x) = exit_block {
            if is_covered(i) {
                edit.handlers_last.push(NewHandler {
                    start: Pos::Block(k),
                    end: Pos::BlockEnd(k),
                    handler: Pos::Block(x),
                    catch_type: 0,
                });
            }
        }
    }
    // A rejected call skips the entry probes and every return's (they are all the method's
    // own probes: a guarded method has no others); the exception exit's skipped above.
    if let Some(slot) = pass {
        if !entry.is_empty() {
            entry = skip_unless_passed(slot, entry)?;
            if with_frames {
                let frame = Frame {
                    offset: 0,
                    locals: initial.clone(),
                    stack: Vec::new(),
                };
                edit.frames.push((Pos::Start(0), frame));
            }
        }
        for (i, insn) in insns.iter().enumerate() {
            if !matches!(insn.opcode, op::IRETURN..=op::RETURN) || edit.before[i].is_empty() {
                continue;
            }
            // Unreachable returns keep their probes: they never run.
            let Some(st) = states[i].as_ref() else {
                continue;
            };
            edit.before[i] = skip_unless_passed(slot, std::mem::take(&mut edit.before[i]))?;
            if with_frames {
                let frame = Frame {
                    offset: 0,
                    locals: trimmed(&st.locals),
                    stack: st.stack.clone(),
                };
                edit.frames.push((Pos::Insn(i), frame));
            }
        }
    }
    edit.prologue.extend(entry);
    if edit.is_empty() {
        return Ok(false);
    }
    edit.extra_stack = u16::try_from(peak).map_err(|_| Error::TooLarge("max_stack"))?;
    edit.extra_locals = if spill_size > 0 {
        1 + spill_size
    } else {
        u16::from(used_stash || !call_blocks.is_empty() || exit_block.is_some())
    } + if marked { 2 } else { 0 }
        + u16::from(pass.is_some());

    // States after conditional branches, for frames at branches that get widened.
    let inserted: usize = edit.prologue.len()
        + edit
            .before
            .iter()
            .chain(&edit.after)
            .map(Vec::len)
            .sum::<usize>()
        + edit.blocks.iter().map(|b| b.code.len()).sum::<usize>();
    let growth: usize = insns
        .iter()
        .map(|x| {
            if x.is_conditional_branch() || x.opcode == op::GOTO {
                5
            } else {
                3
            }
        })
        .sum();
    let ft_states = if with_frames && code.code.len() + inserted + growth > 32767 {
        let mask: Vec<bool> = insns.iter().map(|x| x.is_conditional_branch()).collect();
        typeflow::states(cp, &info, &mask)?
    } else {
        Vec::new()
    };
    let mut fallthrough = |i: usize| -> Result<Frame> {
        let st = ft_states
            .get(i)
            .cloned()
            .flatten()
            .ok_or(Error::BadStackMap("no state at a widened branch"))?;
        let pops = if matches!(insns[i].opcode, 0x9f..=0xa6) {
            2
        } else {
            1
        };
        let mut stack = st.stack;
        stack.truncate(stack.len().saturating_sub(pops));
        Ok(Frame {
            offset: 0,
            locals: trimmed(&st.locals),
            stack,
        })
    };
    let kept: Vec<(u16, VType)> = m
        .mark
        .map(|slot| (slot, VType::Long))
        .into_iter()
        .chain(pass.map(|slot| (slot, VType::Integer)))
        .collect();
    let frames_arg = with_frames.then(|| Frames {
        initial_locals: &initial,
        frames: &frames,
        fallthrough: &mut fallthrough,
        kept_locals: &kept,
    });
    let new_code = relayout(&code, &insns, &edit, cp, frames_arg)?;
    cf.methods[mi].attributes[code_pos].info = new_code.write();
    Ok(true)
}

/// `code`, run only when local `pass` is not 0: `iload pass; ifeq <after code>; code`.
fn skip_unless_passed(pass: u16, code: Vec<u8>) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(code.len() + 7);
    emit_local(&mut out, op::ILOAD, pass);
    let at = out.len();
    out.extend_from_slice(&[op::IFEQ, 0, 0]);
    out.extend_from_slice(&code);
    let end = out.len();
    patch_branch(&mut out, at, end)?;
    Ok(out)
}

/// Points the branch at `at` in `code` to `target` (both offsets into `code`).
fn patch_branch(code: &mut [u8], at: usize, target: usize) -> Result<()> {
    let offset = i16::try_from(target - at).map_err(|_| Error::TooLarge("probe code"))?;
    code[at + 1..at + 3].copy_from_slice(&offset.to_be_bytes());
    Ok(())
}

/// Puts the code of a snippet made with [`Snippet::on`] back where it came from.
fn finish(s: Snippet, dest: &mut Vec<u8>, peak: &mut i32) {
    *peak = (*peak).max(s.peak);
    *dest = s.code;
}

/// Owner, name and descriptor of a called method.
type CallTarget<'a> = (Cow<'a, str>, Cow<'a, str>, Cow<'a, str>);

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

/// For each instruction, the line that starts there (first LineNumberTable entry).
fn line_starts(
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
