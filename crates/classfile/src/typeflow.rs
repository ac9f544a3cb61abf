//! Verification types of locals and stack at chosen instructions.
//!
//! A linear pass in the style of the JVM's type checker: the state flows from one instruction
//! to the next and is replaced by the `StackMapTable` frame wherever one exists. Methods without
//! frames (class files before version 50) fall back to the state recorded at the first branch to
//! a target; that is only an approximation, and is used only where no frames are written.

use std::collections::HashMap;

use crate::code::{offset_index, ExceptionEntry};
use crate::constant_pool::{Constant, ConstantPool};
use crate::descriptor::{parse_field_descriptor, parse_method_descriptor, FieldType};
use crate::error::{Error, Result};
use crate::instruction::{op, Insn, Operand};
use crate::stackmap::{Frame, VType};

/// Locals and operand stack, in slot form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct State {
    /// One entry per local slot (`max_locals` long).
    pub locals: Vec<VType>,
    /// Operand stack slots, bottom first.
    pub stack: Vec<VType>,
}

/// What the pass needs to know about the method.
pub struct MethodInfo<'a> {
    /// Class entry of the declaring class.
    pub this_class: u16,
    /// Max locals.
    pub max_locals: u16,
    /// Instructions.
    pub insns: &'a [Insn],
    /// Code length.
    pub code_len: usize,
    /// Exception table.
    pub exception_table: &'a [ExceptionEntry],
    /// Decoded frames, if the method has a StackMapTable (or is ≥ 50).
    pub frames: Option<&'a [Frame]>,
    /// Implicit initial locals (slot form).
    pub initial_locals: &'a [VType],
}

/// The verification type of a field type (appending Class entries as needed).
pub fn vtype_of(cp: &mut ConstantPool, t: FieldType<'_>) -> Result<Option<VType>> {
    Ok(Some(match t {
        FieldType::Void => return Ok(None),
        FieldType::Long => VType::Long,
        FieldType::Double => VType::Double,
        FieldType::Float => VType::Float,
        FieldType::Reference(name) => VType::Object(cp.add_class_bytes(name)?),
        _ => VType::Integer,
    }))
}

/// Initial locals of a method (slot form): `this` and the parameters.
pub fn initial_locals(
    cp: &mut ConstantPool,
    this_class: u16,
    is_static: bool,
    is_init: bool,
    descriptor: &[u8],
    max_locals: u16,
) -> Result<Vec<VType>> {
    let d = parse_method_descriptor(descriptor)?;
    let mut v = Vec::with_capacity(max_locals as usize);
    if !is_static {
        let object = cp.class_name(this_class)? == b"java/lang/Object";
        v.push(if is_init && !object {
            VType::UninitializedThis
        } else {
            VType::Object(this_class)
        });
    }
    for p in d.params {
        if let Some(t) = vtype_of(cp, p)? {
            v.push(t);
            if t.is_wide() {
                v.push(VType::Top);
            }
        }
    }
    if v.len() > max_locals as usize {
        return Err(Error::BadAttribute(
            "Code (max_locals too small for the parameters)",
        ));
    }
    Ok(v)
}

fn push(stack: &mut Vec<VType>, t: VType) {
    stack.push(t);
    if t.is_wide() {
        stack.push(VType::Top);
    }
}

/// Computes the state before each instruction whose `want` flag is set.
pub fn states(
    cp: &mut ConstantPool,
    m: &MethodInfo<'_>,
    want: &[bool],
) -> Result<Vec<Option<State>>> {
    let n = m.insns.len();
    let map = offset_index(m.insns, m.code_len);
    let mut frame_at: Vec<Option<&Frame>> = vec![None; n];
    if let Some(frames) = m.frames {
        for f in frames {
            match map.get(f.offset as usize) {
                Some(&i) if (i as usize) < n => frame_at[i as usize] = Some(f),
                _ => return Err(Error::BadStackMap("frame offset is not an instruction")),
            }
        }
    }
    let mut recorded: Vec<Option<State>> = vec![None; if m.frames.is_none() { n } else { 0 }];
    let mut out: Vec<Option<State>> = vec![None; n];
    let mut cache = ShapeCache::new();
    let ml = m.max_locals as usize;
    let mut first = m.initial_locals.to_vec();
    first.resize(ml, VType::Top);
    let mut cur: Option<State> = Some(State {
        locals: first,
        stack: Vec::new(),
    });
    for (i, insn) in m.insns.iter().enumerate() {
        if let Some(f) = frame_at[i] {
            let mut locals = f.locals.clone();
            if locals.len() > ml {
                return Err(Error::BadStackMap("frame has more locals than max_locals"));
            }
            locals.resize(ml, VType::Top);
            cur = Some(State {
                locals,
                stack: f.stack.clone(),
            });
        } else if cur.is_none() && m.frames.is_none() {
            cur = recorded[i].take();
        }
        let Some(state) = cur.as_mut() else { continue };
        if want[i] {
            out[i] = Some(state.clone());
        }
        if m.frames.is_none() {
            // Approximate the states at handlers and branch targets (old class files only).
            for e in m.exception_table {
                if (e.start_pc as u32..e.end_pc as u32).contains(&insn.offset) {
                    if let Some(&h) = map.get(e.handler_pc as usize) {
                        if let Some(slot) = recorded.get_mut(h as usize) {
                            if slot.is_none() {
                                let t = if e.catch_type == 0 {
                                    cp.add_class("java/lang/Throwable")?
                                } else {
                                    e.catch_type
                                };
                                *slot = Some(State {
                                    locals: state.locals.clone(),
                                    stack: vec![VType::Object(t)],
                                });
                            }
                        }
                    }
                }
            }
        }
        let fallthrough = step(cp, &mut cache, m, insn, state)?;
        if m.frames.is_none() {
            for t in insn.targets() {
                if let Some(&h) = map.get(t as usize) {
                    if let Some(slot) = recorded.get_mut(h as usize) {
                        if slot.is_none() {
                            *slot = Some(state.clone());
                        }
                    }
                }
            }
        }
        if !fallthrough {
            cur = None;
        }
    }
    Ok(out)
}

fn underflow(insn: &Insn) -> Error {
    Error::BadCode {
        offset: insn.offset,
        reason: "operand stack underflow",
    }
}

/// Stack effect of a field or method reference.
#[derive(Clone, Copy)]
struct Shape {
    /// Slots popped (arguments, or the field value for puts).
    slots: u16,
    /// Type pushed (the field type, or the return type).
    ret: Option<VType>,
    /// Whether the method is `<init>`.
    init: bool,
}

/// Shapes of member references by constant pool index, computed once per pass.
type ShapeCache = HashMap<u16, Shape>;

fn member_shape(
    cp: &mut ConstantPool,
    cache: &mut ShapeCache,
    c: u16,
    method: bool,
) -> Result<Shape> {
    if let Some(s) = cache.get(&c) {
        return Ok(*s);
    }
    let (name, d) = match cp.get(c)? {
        Constant::InvokeDynamic(_, nt) if method => cp.name_and_type(nt)?,
        _ => {
            let r = cp.member_ref(c)?;
            (r.name, r.descriptor)
        }
    };
    let init = name == b"<init>";
    let (slots, ret) = if method {
        let md = parse_method_descriptor(d)?;
        (md.param_slots(), md.ret)
    } else {
        let t = parse_field_descriptor(d)?;
        (t.slots(), t)
    };
    let ret = match ret {
        FieldType::Reference(n) => {
            let n = n.to_vec();
            Some(VType::Object(cp.add_class_bytes(&n)?))
        }
        FieldType::Void => None,
        FieldType::Long => Some(VType::Long),
        FieldType::Double => Some(VType::Double),
        FieldType::Float => Some(VType::Float),
        _ => Some(VType::Integer),
    };
    let shape = Shape { slots, ret, init };
    cache.insert(c, shape);
    Ok(shape)
}

/// Applies one instruction to `s`. Returns false when execution cannot fall through.
fn step(
    cp: &mut ConstantPool,
    cache: &mut ShapeCache,
    m: &MethodInfo<'_>,
    insn: &Insn,
    s: &mut State,
) -> Result<bool> {
    match insn.opcode {
        op::NOP | op::IINC => {}
        op::ACONST_NULL..=op::LDC2_W => constant(cp, insn, s)?,
        op::ILOAD..=0x2d => load(insn, s)?,
        0x2e..=0x35 => array_load(cp, insn, s)?,
        op::ISTORE..=0x4e => store(insn, s)?,
        0x4f..=0x56 => pop(
            s,
            insn,
            if matches!(insn.opcode, 0x50 | 0x52) {
                4
            } else {
                3
            },
        )?,
        op::POP..=op::SWAP => stack_op(insn, s)?,
        0x60..=0x83 => arithmetic(insn, s)?,
        0x85..=0x93 => conversion(insn, s)?,
        0x94 | 0x97 | 0x98 => {
            pop(s, insn, 4)?;
            push(&mut s.stack, VType::Integer);
        }
        0x95 | 0x96 => {
            pop(s, insn, 2)?;
            push(&mut s.stack, VType::Integer);
        }
        0x99..=0x9e | op::IFNULL | op::IFNONNULL => pop(s, insn, 1)?,
        0x9f..=0xa6 => pop(s, insn, 2)?,
        op::GOTO | op::GOTO_W => return Ok(false),
        op::JSR | op::JSR_W | op::RET => return Err(Error::Unsupported("jsr/ret subroutines")),
        op::TABLESWITCH | op::LOOKUPSWITCH => {
            pop(s, insn, 1)?;
            return Ok(false);
        }
        op::IRETURN..=op::RETURN | op::ATHROW => return Ok(false),
        op::GETSTATIC..=op::PUTFIELD => field(cp, cache, insn, s)?,
        op::INVOKEVIRTUAL..=op::INVOKEDYNAMIC => invoke(cp, cache, m, insn, s)?,
        op::NEW
        | op::NEWARRAY
        | op::ANEWARRAY
        | op::ARRAYLENGTH
        | op::CHECKCAST
        | op::INSTANCEOF
        | op::MULTIANEWARRAY => object(cp, insn, s)?,
        op::MONITORENTER | op::MONITOREXIT => pop(s, insn, 1)?,
        _ => {
            return Err(Error::BadCode {
                offset: insn.offset,
                reason: "invalid opcode",
            })
        }
    }
    Ok(true)
}

/// The primitive kinds in opcode order (`i`, `l`, `f`, `d`).
const PRIM: [VType; 4] = [VType::Integer, VType::Long, VType::Float, VType::Double];

/// Stack slots of a value of type `t`.
fn size(t: VType) -> usize {
    if t.is_wide() {
        2
    } else {
        1
    }
}

/// Pops `k` slots off the stack of `s` (the state before `insn`).
fn pop(s: &mut State, insn: &Insn, k: usize) -> Result<()> {
    if s.stack.len() < k {
        return Err(underflow(insn));
    }
    s.stack.truncate(s.stack.len() - k);
    Ok(())
}

/// The local variable index `insn` names (0 for the short forms, which name none).
fn local_index(insn: &Insn) -> u16 {
    match insn.operand {
        Operand::Local(i) => i,
        _ => 0,
    }
}

/// Constants: `aconst_null`, `iconst`..`dconst`, `bipush`, `sipush`, `ldc`.
fn constant(cp: &mut ConstantPool, insn: &Insn, s: &mut State) -> Result<()> {
    use VType::*;
    let t = match insn.opcode {
        op::ACONST_NULL => Null,
        0x02..=0x08 | op::BIPUSH | op::SIPUSH => Integer,
        0x09 | 0x0a => Long,
        0x0b..=0x0d => Float,
        0x0e | 0x0f => Double,
        _ => {
            let Operand::Cp(c) = insn.operand else {
                return Err(underflow(insn));
            };
            loadable(cp, c)?
        }
    };
    push(&mut s.stack, t);
    Ok(())
}

/// The type `ldc` pushes for constant `c`.
fn loadable(cp: &mut ConstantPool, c: u16) -> Result<VType> {
    use VType::*;
    Ok(match cp.get(c)? {
        Constant::Integer(_) => Integer,
        Constant::Float(_) => Float,
        Constant::Long(_) => Long,
        Constant::Double(_) => Double,
        Constant::String(_) => Object(cp.add_class("java/lang/String")?),
        Constant::Class(_) => Object(cp.add_class("java/lang/Class")?),
        Constant::MethodType(_) => Object(cp.add_class("java/lang/invoke/MethodType")?),
        Constant::MethodHandle(..) => Object(cp.add_class("java/lang/invoke/MethodHandle")?),
        Constant::Dynamic(_, nt) => {
            let d = cp.name_and_type(nt)?.1.to_vec();
            vtype_of(cp, parse_field_descriptor(&d)?)?.unwrap_or(Top)
        }
        _ => {
            return Err(Error::BadConstant {
                index: c,
                expected: "loadable constant",
            })
        }
    })
}

/// Loads of locals: `iload`..`aload` and their short forms.
fn load(insn: &Insn, s: &mut State) -> Result<()> {
    let opc = insn.opcode;
    let t = match opc {
        0x15..=0x18 => PRIM[(opc - 0x15) as usize],
        0x1a..=0x29 => PRIM[((opc - 0x1a) / 4) as usize],
        _ => {
            let i = local_index(insn);
            s.locals.get(i as usize).copied().ok_or(Error::BadCode {
                offset: insn.offset,
                reason: "local index out of range",
            })?
        }
    };
    push(&mut s.stack, t);
    Ok(())
}

/// Array loads: `iaload`..`saload`.
fn array_load(cp: &mut ConstantPool, insn: &Insn, s: &mut State) -> Result<()> {
    use VType::*;
    let idx_arr = s
        .stack
        .len()
        .checked_sub(2)
        .ok_or_else(|| underflow(insn))?;
    let arr = s.stack[idx_arr];
    pop(s, insn, 2)?;
    let t = match insn.opcode {
        0x2f => Long,
        0x30 => Float,
        0x31 => Double,
        0x32 => match arr {
            Object(c) => {
                let name = cp.class_name(c)?.to_vec();
                match name.get(1) {
                    Some(b'L') if name.len() > 3 => {
                        Object(cp.add_class_bytes(&name[2..name.len() - 1])?)
                    }
                    Some(b'[') => Object(cp.add_class_bytes(&name[1..])?),
                    _ => {
                        return Err(Error::BadCode {
                            offset: insn.offset,
                            reason: "aaload on a non-array",
                        })
                    }
                }
            }
            _ => Null,
        },
        _ => Integer,
    };
    push(&mut s.stack, t);
    Ok(())
}

/// Stores into locals: `istore`..`astore` and their short forms.
fn store(insn: &Insn, s: &mut State) -> Result<()> {
    let opc = insn.opcode;
    let index = local_index(insn);
    let wide = match opc {
        0x36..=0x3a => matches!(opc, 0x37 | 0x39),
        _ => matches!((opc - 0x3b) / 4, 1 | 3),
    };
    let k = if wide { 2 } else { 1 };
    let base = s
        .stack
        .len()
        .checked_sub(k)
        .ok_or_else(|| underflow(insn))?;
    let t = s.stack[base];
    pop(s, insn, k)?;
    let i = index as usize;
    if i + k > s.locals.len() {
        return Err(Error::BadCode {
            offset: insn.offset,
            reason: "local index out of range",
        });
    }
    s.locals[i] = t;
    if wide {
        s.locals[i + 1] = VType::Top;
    }
    if i > 0 && s.locals[i - 1].is_wide() {
        s.locals[i - 1] = VType::Top;
    }
    Ok(())
}

/// Stack manipulation: `pop`, `pop2`, the `dup`s and `swap`.
fn stack_op(insn: &Insn, s: &mut State) -> Result<()> {
    let opc = insn.opcode;
    match opc {
        0x57 => return pop(s, insn, 1),
        0x58 => return pop(s, insn, 2),
        _ => {}
    }
    let len = s.stack.len();
    let need = match opc {
        0x59 => 1,
        0x5a | 0x5c | 0x5f => 2,
        0x5b | 0x5d => 3,
        _ => 4,
    };
    if len < need {
        return Err(underflow(insn));
    }
    let st = &mut s.stack;
    let v1 = st[len - 1];
    match opc {
        0x59 => st.push(v1),
        0x5a => st.insert(len - 2, v1),
        0x5b => st.insert(len - 3, v1),
        0x5c => {
            let v2 = st[len - 2];
            st.extend_from_slice(&[v2, v1]);
        }
        0x5d => {
            let v2 = st[len - 2];
            st.splice(len - 3..len - 3, [v2, v1]);
        }
        0x5e => {
            let v2 = st[len - 2];
            st.splice(len - 4..len - 4, [v2, v1]);
        }
        _ => st.swap(len - 1, len - 2),
    }
    Ok(())
}

/// Arithmetic, shifts and bitwise operations: `iadd`..`lxor`.
fn arithmetic(insn: &Insn, s: &mut State) -> Result<()> {
    use VType::*;
    let opc = insn.opcode;
    let (popped, t) = match opc {
        0x60..=0x73 => {
            let t = PRIM[((opc - 0x60) % 4) as usize];
            (2 * size(t), t)
        }
        0x74..=0x77 => {
            let t = PRIM[(opc - 0x74) as usize];
            (size(t), t)
        }
        0x78..=0x7d => {
            let t = if (opc - 0x78).is_multiple_of(2) {
                Integer
            } else {
                Long
            };
            (1 + size(t), t)
        }
        _ => {
            let t = if (opc - 0x7e).is_multiple_of(2) {
                Integer
            } else {
                Long
            };
            (2 * size(t), t)
        }
    };
    pop(s, insn, popped)?;
    push(&mut s.stack, t);
    Ok(())
}

/// Conversions: `i2l`..`i2s`.
fn conversion(insn: &Insn, s: &mut State) -> Result<()> {
    use VType::*;
    let (from, to) = match insn.opcode {
        0x85 => (Integer, Long),
        0x86 => (Integer, Float),
        0x87 => (Integer, Double),
        0x88 => (Long, Integer),
        0x89 => (Long, Float),
        0x8a => (Long, Double),
        0x8b => (Float, Integer),
        0x8c => (Float, Long),
        0x8d => (Float, Double),
        0x8e => (Double, Integer),
        0x8f => (Double, Long),
        0x90 => (Double, Float),
        _ => (Integer, Integer),
    };
    pop(s, insn, size(from))?;
    push(&mut s.stack, to);
    Ok(())
}

/// Field accesses: `getstatic`, `putstatic`, `getfield`, `putfield`.
fn field(cp: &mut ConstantPool, cache: &mut ShapeCache, insn: &Insn, s: &mut State) -> Result<()> {
    let Operand::Cp(c) = insn.operand else {
        return Err(underflow(insn));
    };
    let shape = member_shape(cp, cache, c, false)?;
    let t = shape.ret.unwrap_or(VType::Top);
    match insn.opcode {
        op::GETSTATIC => push(&mut s.stack, t),
        op::PUTSTATIC => pop(s, insn, shape.slots as usize)?,
        op::GETFIELD => {
            pop(s, insn, 1)?;
            push(&mut s.stack, t);
        }
        _ => pop(s, insn, shape.slots as usize + 1)?,
    }
    Ok(())
}

/// Calls: the `invoke…` instructions; a constructor call initializes its receiver.
fn invoke(
    cp: &mut ConstantPool,
    cache: &mut ShapeCache,
    m: &MethodInfo<'_>,
    insn: &Insn,
    s: &mut State,
) -> Result<()> {
    let opc = insn.opcode;
    let Operand::Cp(c) = insn.operand else {
        return Err(underflow(insn));
    };
    let shape = member_shape(cp, cache, c, true)?;
    pop(s, insn, shape.slots as usize)?;
    if opc != op::INVOKESTATIC && opc != op::INVOKEDYNAMIC {
        let recv = *s.stack.last().ok_or_else(|| underflow(insn))?;
        pop(s, insn, 1)?;
        if opc == op::INVOKESPECIAL && shape.init {
            initialize(m, recv, s)?;
        }
    }
    if let Some(t) = shape.ret {
        push(&mut s.stack, t);
    }
    Ok(())
}

/// Replaces the uninitialized `recv` of a constructor call by its initialized type
/// everywhere in `s`.
fn initialize(m: &MethodInfo<'_>, recv: VType, s: &mut State) -> Result<()> {
    let init = match recv {
        VType::UninitializedThis => VType::Object(m.this_class),
        VType::Uninitialized(off) => {
            let new_insn = m
                .insns
                .binary_search_by_key(&off, |x| x.offset)
                .ok()
                .map(|k| &m.insns[k])
                .filter(|x| x.opcode == op::NEW);
            match new_insn.map(|x| &x.operand) {
                Some(Operand::Cp(cls)) => VType::Object(*cls),
                _ => return Err(Error::BadStackMap("uninitialized type without its new")),
            }
        }
        other => other,
    };
    if init != recv {
        for t in s.locals.iter_mut().chain(s.stack.iter_mut()) {
            if *t == recv {
                *t = init;
            }
        }
    }
    Ok(())
}

/// Object and array creation and type checks: `new`, `newarray`, `anewarray`,
/// `arraylength`, `checkcast`, `instanceof`, `multianewarray`.
fn object(cp: &mut ConstantPool, insn: &Insn, s: &mut State) -> Result<()> {
    use VType::*;
    let t = match insn.opcode {
        op::NEW => Uninitialized(insn.offset),
        op::NEWARRAY => {
            pop(s, insn, 1)?;
            let Operand::NewArray(code) = insn.operand else {
                return Err(underflow(insn));
            };
            Object(cp.add_class(primitive_array(insn, code)?)?)
        }
        op::ANEWARRAY => {
            pop(s, insn, 1)?;
            let Operand::Cp(c) = insn.operand else {
                return Err(underflow(insn));
            };
            let elem = cp.class_name(c)?;
            let mut name = Vec::with_capacity(elem.len() + 3);
            name.push(b'[');
            if elem.first() == Some(&b'[') {
                name.extend_from_slice(elem);
            } else {
                name.push(b'L');
                name.extend_from_slice(elem);
                name.push(b';');
            }
            Object(cp.add_class_bytes(&name)?)
        }
        op::ARRAYLENGTH | op::INSTANCEOF => {
            pop(s, insn, 1)?;
            Integer
        }
        op::CHECKCAST => {
            pop(s, insn, 1)?;
            let Operand::Cp(c) = insn.operand else {
                return Err(underflow(insn));
            };
            Object(c)
        }
        _ => {
            let Operand::MultiANewArray(c, dims) = insn.operand else {
                return Err(underflow(insn));
            };
            pop(s, insn, dims as usize)?;
            Object(c)
        }
    };
    push(&mut s.stack, t);
    Ok(())
}

/// The array class `newarray` creates for its type `code`.
fn primitive_array(insn: &Insn, code: u8) -> Result<&'static str> {
    Ok(match code {
        4 => "[Z",
        5 => "[C",
        6 => "[F",
        7 => "[D",
        8 => "[B",
        9 => "[S",
        10 => "[I",
        11 => "[J",
        _ => {
            return Err(Error::BadCode {
                offset: insn.offset,
                reason: "bad newarray type",
            })
        }
    })
}
