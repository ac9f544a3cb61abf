//! Guards: a condition on a method's arguments, evaluated once at its entry, that decides for
//! the whole call whether its probes run (see [`crate::InjectionPlan::guards`]). A call the
//! condition rejects then costs the method a few arithmetic instructions and one branch per
//! probe, which the JIT compiles with the method: no boxing, no call.
//!
//! The condition compiles to straight-line code leaving `1` (passed) or `0` on the stack:
//! comparisons go through `lcmp`/`dcmpl`/`dcmpg`, whose -1/0/1 result is turned into 0/1 by
//! arithmetic, and `&&`, `||`, `!` are `iand`, `ior`, `ixor` (the operands have no side
//! effects, so evaluating both sides changes nothing). Null tests call `Objects.isNull` and
//! `Objects.nonNull`, JDK methods the JIT inlines. Branch-free code needs no stack map frames
//! of its own.

use crate::bytes::WriteBe;
use crate::constant_pool::ConstantPool;
use crate::descriptor::FieldType;
use crate::error::{Error, Result};
use crate::instruction::op;

/// A condition on the arguments of a method.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Guard {
    /// Two operands compared as numbers (as Java compares them after widening: as `long`s,
    /// or as `double`s when either is a `float`, a `double` or [`Operand::Real`]).
    Compare(Operand, Comparison, Operand),
    /// Whether argument `n` (a reference) is null (`true`) or not (`false`).
    Null(u16, bool),
    /// Not.
    Not(Box<Guard>),
    /// All of them (`&&`); true when empty.
    All(Vec<Guard>),
    /// Any of them (`||`); false when empty.
    Any(Vec<Guard>),
}

/// A value a guard compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operand {
    /// Argument `n` (0: the first declared parameter), as the call received it: a primitive
    /// (`boolean` and `char` as their numbers).
    Arg(u16),
    /// An integer constant.
    Integer(i64),
    /// A floating-point constant, by its IEEE 754 bits.
    Real(u64),
}

/// How two operands compare.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Comparison {
    /// `==`.
    Eq,
    /// `!=`.
    Ne,
    /// `<`.
    Lt,
    /// `<=`.
    Le,
    /// `>`.
    Gt,
    /// `>=`.
    Ge,
}

/// Straight-line code evaluating a guard: leaves `int` 0 or 1 on the stack.
pub(crate) struct Compiled {
    pub code: Vec<u8>,
    /// Most stack slots it uses.
    pub peak: i32,
}

/// Compiles `guard` for a method whose parameters are `params` (in locals from slot 0, or 1
/// when it has `this`), or says why it cannot be: an argument it names is missing, or is not
/// of a type the test applies to.
pub(crate) fn compile(
    guard: &Guard,
    params: &[FieldType<'_>],
    is_static: bool,
    cp: &mut ConstantPool,
) -> Result<Compiled> {
    let mut slots = Vec::with_capacity(params.len());
    let mut slot: u16 = if is_static { 0 } else { 1 };
    for p in params {
        slots.push(slot);
        slot += p.slots();
    }
    let mut emitter = Emitter {
        code: Vec::new(),
        depth: 0,
        peak: 0,
        params,
        slots: &slots,
        cp,
    };
    emitter.guard(guard)?;
    Ok(Compiled {
        code: emitter.code,
        peak: emitter.peak,
    })
}

struct Emitter<'a, 'p> {
    code: Vec<u8>,
    depth: i32,
    peak: i32,
    params: &'a [FieldType<'p>],
    slots: &'a [u16],
    cp: &'a mut ConstantPool,
}

/// How a compared value is loaded.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Width {
    Long,
    Double,
}

impl<'p> Emitter<'_, 'p> {
    fn emit(&mut self, bytes: &[u8], delta: i32) {
        self.code.extend_from_slice(bytes);
        self.depth += delta;
        self.peak = self.peak.max(self.depth);
    }

    fn guard(&mut self, guard: &Guard) -> Result<()> {
        match guard {
            Guard::Compare(left, comparison, right) => self.compare(*left, *comparison, *right),
            Guard::Null(n, is_null) => {
                let (t, slot) = self.arg(*n)?;
                if !matches!(t, FieldType::Reference(_)) {
                    return Err(Error::Unsupported("a null test of a primitive argument"));
                }
                self.local(op::ALOAD, slot, 1);
                let name = if *is_null { "isNull" } else { "nonNull" };
                let method =
                    self.cp
                        .add_method_ref("java/util/Objects", name, "(Ljava/lang/Object;)Z")?;
                self.emit(&[op::INVOKESTATIC], 0);
                self.code.u2(method);
                Ok(())
            }
            Guard::Not(inner) => {
                self.guard(inner)?;
                self.emit(&[ICONST_1], 1);
                self.emit(&[IXOR], -1);
                Ok(())
            }
            Guard::All(guards) | Guard::Any(guards) => {
                let (empty, join) = match guard {
                    Guard::All(_) => (ICONST_1, IAND),
                    _ => (ICONST_0, IOR),
                };
                let Some((first, rest)) = guards.split_first() else {
                    self.emit(&[empty], 1);
                    return Ok(());
                };
                self.guard(first)?;
                for g in rest {
                    self.guard(g)?;
                    self.emit(&[join], -1);
                }
                Ok(())
            }
        }
    }

    /// Leaves 1 if `left comparison right`, else 0.
    fn compare(&mut self, left: Operand, comparison: Comparison, right: Operand) -> Result<()> {
        let width = match (self.width(left)?, self.width(right)?) {
            (Width::Long, Width::Long) => Width::Long,
            _ => Width::Double,
        };
        self.load(left, width)?;
        self.load(right, width)?;
        // -1, 0 or 1; a NaN gives the answer that makes the comparison false (and `!=` true).
        let compare = match (width, comparison) {
            (Width::Long, _) => op::LCMP,
            (Width::Double, Comparison::Lt | Comparison::Le) => DCMPG,
            (Width::Double, _) => DCMPL,
        };
        self.emit(&[compare], -3);
        // From c in {-1, 0, 1} to 0 or 1 without a branch.
        let bytes: &[u8] = match comparison {
            Comparison::Gt => &[ICONST_1, IADD, ICONST_1, ISHR], // (c + 1) >> 1
            Comparison::Ge => &[ICONST_2, IADD, ICONST_1, ISHR], // (c + 2) >> 1
            Comparison::Lt => &[ICONST_1, op::SWAP, ISUB, ICONST_1, ISHR], // (1 - c) >> 1
            Comparison::Le => &[ICONST_2, op::SWAP, ISUB, ICONST_1, ISHR], // (2 - c) >> 1
            Comparison::Ne => &[ICONST_1, IAND],                 // c & 1
            Comparison::Eq => &[ICONST_1, IAND, ICONST_1, IXOR], // (c & 1) ^ 1
        };
        self.emit(bytes, 0);
        // One int pushed at a time above the result.
        self.peak = self.peak.max(self.depth + 1);
        Ok(())
    }

    fn width(&self, operand: Operand) -> Result<Width> {
        Ok(match operand {
            Operand::Integer(_) => Width::Long,
            Operand::Real(_) => Width::Double,
            Operand::Arg(n) => match self.arg(n)?.0 {
                FieldType::Float | FieldType::Double => Width::Double,
                FieldType::Reference(_) | FieldType::Void => {
                    return Err(Error::Unsupported(
                        "a numeric comparison of a reference argument",
                    ))
                }
                _ => Width::Long,
            },
        })
    }

    /// Pushes `operand` as a `long` or a `double`.
    fn load(&mut self, operand: Operand, width: Width) -> Result<()> {
        match operand {
            Operand::Arg(n) => {
                let (t, slot) = self.arg(n)?;
                let (load, convert): (u8, &[u8]) = match (t, width) {
                    (FieldType::Long, Width::Long) => (op::LLOAD, &[]),
                    (FieldType::Long, Width::Double) => (op::LLOAD, &[L2D]),
                    (FieldType::Float, _) => (op::FLOAD, &[F2D]),
                    (FieldType::Double, _) => (op::DLOAD, &[]),
                    (_, Width::Long) => (op::ILOAD, &[I2L]),
                    (_, Width::Double) => (op::ILOAD, &[I2D]),
                };
                self.local(load, slot, t.slots() as i32);
                self.emit(convert, 2 - t.slots() as i32);
            }
            Operand::Integer(v) => match width {
                Width::Long => {
                    let index = self.cp.add_long(v)?;
                    self.wide_constant(index);
                }
                Width::Double => {
                    let index = self.cp.add_double((v as f64).to_bits())?;
                    self.wide_constant(index);
                }
            },
            Operand::Real(bits) => {
                let index = self.cp.add_double(bits)?;
                self.wide_constant(index);
            }
        }
        Ok(())
    }

    /// `ldc2_w` of constant pool entry `index`.
    fn wide_constant(&mut self, index: u16) {
        self.emit(&[op::LDC2_W], 2);
        self.code.u2(index);
    }

    fn arg(&self, n: u16) -> Result<(FieldType<'p>, u16)> {
        let n = usize::from(n);
        match (self.params.get(n), self.slots.get(n)) {
            (Some(&t), Some(&slot)) => Ok((t, slot)),
            _ => Err(Error::Unsupported(
                "a guard on an argument the method lacks",
            )),
        }
    }

    fn local(&mut self, opcode: u8, slot: u16, delta: i32) {
        match u8::try_from(slot) {
            Ok(slot) => self.emit(&[opcode, slot], delta),
            Err(_) => {
                self.emit(&[op::WIDE, opcode], delta);
                self.code.u2(slot);
            }
        }
    }
}

const ICONST_0: u8 = 0x03;
const ICONST_1: u8 = 0x04;
const ICONST_2: u8 = 0x05;
const IADD: u8 = 0x60;
const ISUB: u8 = 0x64;
const ISHR: u8 = 0x7a;
const IAND: u8 = 0x7e;
const IOR: u8 = 0x80;
const IXOR: u8 = 0x82;
const I2L: u8 = 0x85;
const I2D: u8 = 0x87;
const L2D: u8 = 0x8a;
const F2D: u8 = 0x8d;
const DCMPL: u8 = 0x97;
const DCMPG: u8 = 0x98;
