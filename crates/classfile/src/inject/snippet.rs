//! Straight-line probe code with its stack accounting, and the constant pool references it
//! uses (cached for one class).

use crate::constant_pool::ConstantPool;
use crate::descriptor::FieldType;
use crate::error::{Error, Result};
use crate::instruction::{emit_cp, emit_ldc, emit_local, op};
use crate::plan::{Clock, InjectionPlan, Probe};

/// Straight-line code with its operand stack accounting.
pub(super) struct Snippet {
    pub(super) code: Vec<u8>,
    depth: i32,
    pub(super) peak: i32,
}

impl Snippet {
    pub(super) fn new(depth: i32) -> Self {
        Snippet {
            code: Vec::with_capacity(48),
            depth,
            peak: depth,
        }
    }

    /// Continues `code` (taken from its place in an edit) at stack depth `depth`.
    pub(super) fn on(code: Vec<u8>, depth: i32) -> Self {
        Snippet {
            code,
            depth,
            peak: depth,
        }
    }

    pub(super) fn emit(&mut self, bytes: &[u8], delta: i32) {
        self.code.extend_from_slice(bytes);
        self.depth += delta;
        self.peak = self.peak.max(self.depth);
    }

    pub(super) fn int(&mut self, cp: &mut ConstantPool, v: i32) -> Result<()> {
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

    pub(super) fn cp_insn(&mut self, opcode: u8, index: u16, delta: i32) {
        let mut b = Vec::with_capacity(3);
        emit_cp(&mut b, opcode, index);
        self.emit(&b, delta);
    }

    pub(super) fn local(&mut self, opcode: u8, index: u16, delta: i32) {
        let mut b = Vec::with_capacity(4);
        emit_local(&mut b, opcode, index);
        self.emit(&b, delta);
    }

    /// Boxes the primitive of type `t` on top of the stack.
    pub(super) fn boxed(
        &mut self,
        cp: &mut ConstantPool,
        refs: &mut Refs,
        t: FieldType<'_>,
    ) -> Result<()> {
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
    pub(super) fn capture(
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

    pub(super) fn probe(
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

    pub(super) fn object(&mut self, cp: &mut ConstantPool) -> Result<u16> {
        match self.object {
            Some(c) => Ok(c),
            None => Ok(*self.object.insert(cp.add_class("java/lang/Object")?)),
        }
    }

    /// The plan's clock (see [`InjectionPlan::clock`]): its field or method reference, and
    /// the instruction reading it.
    pub(super) fn clock(
        &mut self,
        cp: &mut ConstantPool,
        plan: &InjectionPlan,
    ) -> Result<(u8, u16)> {
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

    pub(super) fn throwable(&mut self, cp: &mut ConstantPool) -> Result<u16> {
        match self.throwable {
            Some(c) => Ok(c),
            None => Ok(*self.throwable.insert(cp.add_class("java/lang/Throwable")?)),
        }
    }
}

/// The type without its class name (probe code only needs the kind).
pub(super) fn erase(t: FieldType<'_>) -> FieldType<'static> {
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

pub(super) fn store_opcode(t: FieldType<'_>) -> u8 {
    match t {
        FieldType::Long => op::LSTORE,
        FieldType::Float => op::FSTORE,
        FieldType::Double => op::DSTORE,
        FieldType::Reference(_) => op::ASTORE,
        _ => op::ISTORE,
    }
}

pub(super) fn load_opcode(t: FieldType<'_>) -> u8 {
    match t {
        FieldType::Long => op::LLOAD,
        FieldType::Float => op::FLOAD,
        FieldType::Double => op::DLOAD,
        FieldType::Reference(_) => op::ALOAD,
        _ => op::ILOAD,
    }
}
