//! Decoding and encoding of JVM instructions.

use crate::error::{Error, Result};

/// Opcode constants used by this crate: only the instructions it emits or inspects by name.
/// Each constant is its instruction's JVMS §6.5 mnemonic upper-cased (`ICONST_M1` is
/// `iconst_m1`, 0x02), so the spec is its documentation.
#[allow(missing_docs)]
pub mod op {
    pub const NOP: u8 = 0x00;
    pub const ACONST_NULL: u8 = 0x01;
    pub const ICONST_M1: u8 = 0x02;
    pub const ICONST_0: u8 = 0x03;
    pub const LCONST_0: u8 = 0x09;
    pub const BIPUSH: u8 = 0x10;
    pub const SIPUSH: u8 = 0x11;
    pub const LDC: u8 = 0x12;
    pub const LDC_W: u8 = 0x13;
    pub const LDC2_W: u8 = 0x14;
    pub const ILOAD: u8 = 0x15;
    pub const LLOAD: u8 = 0x16;
    pub const FLOAD: u8 = 0x17;
    pub const DLOAD: u8 = 0x18;
    pub const ALOAD: u8 = 0x19;
    pub const ALOAD_0: u8 = 0x2a;
    pub const ISTORE: u8 = 0x36;
    pub const LSTORE: u8 = 0x37;
    pub const FSTORE: u8 = 0x38;
    pub const DSTORE: u8 = 0x39;
    pub const ASTORE: u8 = 0x3a;
    pub const AASTORE: u8 = 0x53;
    pub const POP: u8 = 0x57;
    pub const DUP: u8 = 0x59;
    pub const DUP_X1: u8 = 0x5a;
    pub const DUP2: u8 = 0x5c;
    pub const SWAP: u8 = 0x5f;
    pub const IINC: u8 = 0x84;
    pub const LSUB: u8 = 0x65;
    pub const LCMP: u8 = 0x94;
    pub const IFEQ: u8 = 0x99;
    pub const IFLT: u8 = 0x9b;
    pub const IF_ACMPNE: u8 = 0xa6;
    pub const GOTO: u8 = 0xa7;
    pub const JSR: u8 = 0xa8;
    pub const RET: u8 = 0xa9;
    pub const TABLESWITCH: u8 = 0xaa;
    pub const LOOKUPSWITCH: u8 = 0xab;
    pub const IRETURN: u8 = 0xac;
    pub const LRETURN: u8 = 0xad;
    pub const FRETURN: u8 = 0xae;
    pub const DRETURN: u8 = 0xaf;
    pub const ARETURN: u8 = 0xb0;
    pub const RETURN: u8 = 0xb1;
    pub const GETSTATIC: u8 = 0xb2;
    pub const PUTSTATIC: u8 = 0xb3;
    pub const GETFIELD: u8 = 0xb4;
    pub const PUTFIELD: u8 = 0xb5;
    pub const INVOKEVIRTUAL: u8 = 0xb6;
    pub const INVOKESPECIAL: u8 = 0xb7;
    pub const INVOKESTATIC: u8 = 0xb8;
    pub const INVOKEINTERFACE: u8 = 0xb9;
    pub const INVOKEDYNAMIC: u8 = 0xba;
    pub const NEW: u8 = 0xbb;
    pub const NEWARRAY: u8 = 0xbc;
    pub const ANEWARRAY: u8 = 0xbd;
    pub const ARRAYLENGTH: u8 = 0xbe;
    pub const ATHROW: u8 = 0xbf;
    pub const CHECKCAST: u8 = 0xc0;
    pub const INSTANCEOF: u8 = 0xc1;
    pub const MONITORENTER: u8 = 0xc2;
    pub const MONITOREXIT: u8 = 0xc3;
    pub const WIDE: u8 = 0xc4;
    pub const MULTIANEWARRAY: u8 = 0xc5;
    pub const IFNULL: u8 = 0xc6;
    pub const IFNONNULL: u8 = 0xc7;
    pub const GOTO_W: u8 = 0xc8;
    pub const JSR_W: u8 = 0xc9;
}

/// The operand of a decoded instruction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Operand {
    /// No operand (or one implied by the opcode, e.g. `iconst_2`).
    None,
    /// A local variable index (loads, stores, `ret`; also the implicit `_0`..`_3` forms).
    Local(u16),
    /// `iinc`.
    Iinc {
        /// Local variable index.
        index: u16,
        /// Increment.
        delta: i16,
    },
    /// `bipush`/`sipush` value.
    Int(i32),
    /// A constant pool index (ldc family, field and method instructions, `new`, casts).
    Cp(u16),
    /// `multianewarray` class index and dimensions.
    MultiANewArray(u16, u8),
    /// `newarray` element type code.
    NewArray(u8),
    /// A branch target (absolute offset in the original code).
    Branch(u32),
    /// `tableswitch`.
    TableSwitch {
        /// Default target.
        default: u32,
        /// Lowest key.
        low: i32,
        /// Targets for keys `low..=low+len-1`.
        targets: Vec<u32>,
    },
    /// `lookupswitch`.
    LookupSwitch {
        /// Default target.
        default: u32,
        /// Key/target pairs.
        pairs: Vec<(i32, u32)>,
    },
}

/// One decoded instruction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Insn {
    /// Offset in the code array.
    pub offset: u32,
    /// Encoded length in bytes.
    pub len: u32,
    /// Opcode (for `wide` forms, the widened opcode; see [`Insn::wide`]).
    pub opcode: u8,
    /// Whether the instruction had a `wide` prefix.
    pub wide: bool,
    /// Decoded operand.
    pub operand: Operand,
}

impl Insn {
    /// Branch targets of this instruction (absolute original offsets).
    pub fn targets(&self) -> Vec<u32> {
        match &self.operand {
            Operand::Branch(t) => vec![*t],
            Operand::TableSwitch {
                default, targets, ..
            } => {
                let mut v = targets.clone();
                v.push(*default);
                v
            }
            Operand::LookupSwitch { default, pairs } => {
                let mut v: Vec<u32> = pairs.iter().map(|p| p.1).collect();
                v.push(*default);
                v
            }
            _ => Vec::new(),
        }
    }

    /// True when execution never falls through to the next instruction.
    pub fn is_unconditional(&self) -> bool {
        matches!(
            self.opcode,
            op::GOTO
                | op::GOTO_W
                | op::TABLESWITCH
                | op::LOOKUPSWITCH
                | op::ATHROW
                | op::RET
                | op::IRETURN..=op::RETURN
        )
    }

    /// True for `if*` instructions (conditional two-way branches).
    pub fn is_conditional_branch(&self) -> bool {
        matches!(
            self.opcode,
            op::IFEQ..=op::IF_ACMPNE | op::IFNULL | op::IFNONNULL
        )
    }
}

fn be_i16(code: &[u8], at: usize) -> Option<i16> {
    Some(i16::from_be_bytes([*code.get(at)?, *code.get(at + 1)?]))
}

fn be_u16(code: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*code.get(at)?, *code.get(at + 1)?]))
}

fn be_i32(code: &[u8], at: usize) -> Option<i32> {
    Some(i32::from_be_bytes([
        *code.get(at)?,
        *code.get(at + 1)?,
        *code.get(at + 2)?,
        *code.get(at + 3)?,
    ]))
}

/// Length of the instruction at `pc`, without decoding its operands.
fn fixed_len(opcode: u8) -> Option<u32> {
    Some(match opcode {
        0x00..=0x0f
        | 0x1a..=0x35
        | 0x3b..=0x83
        | 0x85..=0x98
        | 0xac..=0xb1
        | 0xbe
        | 0xbf
        | 0xc2
        | 0xc3 => 1,
        0x10 | 0x12 | 0x15..=0x19 | 0x36..=0x3a | 0xa9 | 0xbc => 2,
        0x11
        | 0x13
        | 0x14
        | 0x84
        | 0x99..=0xa8
        | 0xb2..=0xb8
        | 0xbb
        | 0xbd
        | 0xc0
        | 0xc1
        | 0xc6
        | 0xc7 => 3,
        0xc5 => 4,
        0xb9 | 0xba | 0xc8 | 0xc9 => 5,
        _ => return None,
    })
}

/// Decodes a whole code array. Branch targets are checked to be instruction boundaries.
pub fn decode(code: &[u8]) -> Result<Vec<Insn>> {
    let mut insns = Vec::with_capacity(code.len() / 2 + 1);
    let mut pc = 0usize;
    while pc < code.len() {
        let opcode = code[pc];
        let (len, wide, opc, operand) = match opcode {
            op::TABLESWITCH => table_switch(code, pc)?,
            op::LOOKUPSWITCH => lookup_switch(code, pc)?,
            op::WIDE => wide_form(code, pc)?,
            _ => fixed(code, pc, opcode)?,
        };
        insns.push(Insn {
            offset: pc as u32,
            len: len as u32,
            opcode: opc,
            wide,
            operand,
        });
        pc += len;
    }
    check_targets(code, &insns)?;
    Ok(insns)
}

/// An instruction as decoded at one offset: its length, whether `wide` prefixes it, its
/// opcode (the modified one for `wide`) and its operand.
type Decoded = (usize, bool, u8, Operand);

/// The error for bad code at `offset`.
fn bad(offset: usize, reason: &'static str) -> Error {
    Error::BadCode {
        offset: offset as u32,
        reason,
    }
}

/// The target of a branch at `pc` by `delta`, which must not lie before the code's start.
fn branch_target(pc: usize, delta: i64) -> Result<u32> {
    u32::try_from(pc as i64 + delta).map_err(|_| bad(pc, "branch before code start"))
}

/// A `tableswitch` at `pc`.
fn table_switch(code: &[u8], pc: usize) -> Result<Decoded> {
    let truncated = || bad(pc, "truncated instruction");
    let base = (pc + 4) & !3;
    let default = be_i32(code, base).ok_or_else(truncated)?;
    let low = be_i32(code, base + 4).ok_or_else(truncated)?;
    let high = be_i32(code, base + 8).ok_or_else(truncated)?;
    if high < low {
        return Err(bad(pc, "tableswitch high < low"));
    }
    let n = (high as i64 - low as i64 + 1) as usize;
    if base + 12 + n.saturating_mul(4) > code.len() {
        return Err(truncated());
    }
    let mut targets = Vec::with_capacity(n);
    for k in 0..n {
        let d = be_i32(code, base + 12 + 4 * k).ok_or_else(truncated)?;
        targets.push(branch_target(pc, d as i64)?);
    }
    let len = base + 12 + 4 * n - pc;
    let operand = Operand::TableSwitch {
        default: branch_target(pc, default as i64)?,
        low,
        targets,
    };
    Ok((len, false, op::TABLESWITCH, operand))
}

/// A `lookupswitch` at `pc`.
fn lookup_switch(code: &[u8], pc: usize) -> Result<Decoded> {
    let truncated = || bad(pc, "truncated instruction");
    let base = (pc + 4) & !3;
    let default = be_i32(code, base).ok_or_else(truncated)?;
    let npairs = be_i32(code, base + 4).ok_or_else(truncated)?;
    let n = usize::try_from(npairs).map_err(|_| bad(pc, "negative lookupswitch count"))?;
    if base + 8 + n.saturating_mul(8) > code.len() {
        return Err(truncated());
    }
    let mut pairs = Vec::with_capacity(n);
    for k in 0..n {
        let key = be_i32(code, base + 8 + 8 * k).ok_or_else(truncated)?;
        let t = be_i32(code, base + 12 + 8 * k).ok_or_else(truncated)?;
        pairs.push((key, branch_target(pc, t as i64)?));
    }
    let len = base + 8 + 8 * n - pc;
    let operand = Operand::LookupSwitch {
        default: branch_target(pc, default as i64)?,
        pairs,
    };
    Ok((len, false, op::LOOKUPSWITCH, operand))
}

/// A `wide` instruction at `pc`: a load, store or `ret` with a two-byte index, or `iinc`
/// with a two-byte index and delta.
fn wide_form(code: &[u8], pc: usize) -> Result<Decoded> {
    let truncated = || bad(pc, "truncated instruction");
    let inner = *code.get(pc + 1).ok_or_else(truncated)?;
    let index = be_u16(code, pc + 2).ok_or_else(truncated)?;
    match inner {
        op::IINC => {
            let delta = be_i16(code, pc + 4).ok_or_else(truncated)?;
            Ok((6, true, inner, Operand::Iinc { index, delta }))
        }
        0x15..=0x19 | 0x36..=0x3a | op::RET => Ok((4, true, inner, Operand::Local(index))),
        _ => Err(bad(pc, "bad wide opcode")),
    }
}

/// An instruction of fixed length at `pc`.
fn fixed(code: &[u8], pc: usize, opcode: u8) -> Result<Decoded> {
    let len = fixed_len(opcode).ok_or_else(|| bad(pc, "invalid opcode"))? as usize;
    if pc + len > code.len() {
        return Err(bad(pc, "truncated instruction"));
    }
    let b1 = code.get(pc + 1).copied().unwrap_or(0);
    let u2 = be_u16(code, pc + 1).unwrap_or(0);
    let operand = match opcode {
        op::BIPUSH => Operand::Int(b1 as i8 as i32),
        op::SIPUSH => Operand::Int(u2 as i16 as i32),
        op::LDC => Operand::Cp(b1 as u16),
        0x15..=0x19 | 0x36..=0x3a | op::RET => Operand::Local(b1 as u16),
        0x1a..=0x2d => Operand::Local(((opcode - 0x1a) % 4) as u16),
        0x3b..=0x4e => Operand::Local(((opcode - 0x3b) % 4) as u16),
        op::IINC => Operand::Iinc {
            index: b1 as u16,
            delta: b1_i8(code, pc + 2),
        },
        0x99..=0xa8 | op::IFNULL | op::IFNONNULL => {
            Operand::Branch(branch_target(pc, u2 as i16 as i64)?)
        }
        op::GOTO_W | op::JSR_W => {
            let d = be_i32(code, pc + 1).ok_or_else(|| bad(pc, "truncated instruction"))?;
            Operand::Branch(branch_target(pc, d as i64)?)
        }
        op::LDC_W
        | op::LDC2_W
        | 0xb2..=0xb9
        | op::INVOKEDYNAMIC
        | op::NEW
        | op::ANEWARRAY
        | op::CHECKCAST
        | op::INSTANCEOF => Operand::Cp(u2),
        op::MULTIANEWARRAY => Operand::MultiANewArray(u2, code.get(pc + 3).copied().unwrap_or(0)),
        op::NEWARRAY => Operand::NewArray(b1),
        _ => Operand::None,
    };
    Ok((len, false, opcode, operand))
}

/// Checks that every branch target of `insns` is the start of an instruction.
fn check_targets(code: &[u8], insns: &[Insn]) -> Result<()> {
    let mut boundary = vec![false; code.len() + 1];
    for i in insns {
        boundary[i.offset as usize] = true;
    }
    let ok =
        |t: u32| t as usize != code.len() && boundary.get(t as usize).copied().unwrap_or(false);
    for i in insns {
        let valid = match &i.operand {
            Operand::Branch(t) => ok(*t),
            Operand::TableSwitch {
                default, targets, ..
            } => ok(*default) && targets.iter().all(|&t| ok(t)),
            Operand::LookupSwitch { default, pairs } => {
                ok(*default) && pairs.iter().all(|&(_, t)| ok(t))
            }
            _ => true,
        };
        if !valid {
            return Err(bad(
                i.offset as usize,
                "branch target is not an instruction",
            ));
        }
    }
    Ok(())
}

fn b1_i8(code: &[u8], at: usize) -> i16 {
    code.get(at).map_or(0, |&b| b as i8 as i16)
}

/// The conditional branch with the opposite condition (`ifeq` ↔ `ifne`, `ifnull` ↔ `ifnonnull`…).
pub fn invert_condition(opcode: u8) -> u8 {
    match opcode {
        op::IFNULL => op::IFNONNULL,
        op::IFNONNULL => op::IFNULL,
        // ifeq/ifne, iflt/ifge, ifgt/ifle, if_icmpeq/ne, … come in pairs starting at an odd opcode.
        o if (o - op::IFEQ).is_multiple_of(2) => o + 1,
        o => o - 1,
    }
}

/// The mnemonics of opcodes 0 to 201 (`jsr_w`), by opcode.
const MNEMONICS: [&str; 202] = [
    "nop",
    "aconst_null",
    "iconst_m1",
    "iconst_0",
    "iconst_1",
    "iconst_2",
    "iconst_3",
    "iconst_4",
    "iconst_5",
    "lconst_0",
    "lconst_1",
    "fconst_0",
    "fconst_1",
    "fconst_2",
    "dconst_0",
    "dconst_1",
    "bipush",
    "sipush",
    "ldc",
    "ldc_w",
    "ldc2_w",
    "iload",
    "lload",
    "fload",
    "dload",
    "aload",
    "iload_0",
    "iload_1",
    "iload_2",
    "iload_3",
    "lload_0",
    "lload_1",
    "lload_2",
    "lload_3",
    "fload_0",
    "fload_1",
    "fload_2",
    "fload_3",
    "dload_0",
    "dload_1",
    "dload_2",
    "dload_3",
    "aload_0",
    "aload_1",
    "aload_2",
    "aload_3",
    "iaload",
    "laload",
    "faload",
    "daload",
    "aaload",
    "baload",
    "caload",
    "saload",
    "istore",
    "lstore",
    "fstore",
    "dstore",
    "astore",
    "istore_0",
    "istore_1",
    "istore_2",
    "istore_3",
    "lstore_0",
    "lstore_1",
    "lstore_2",
    "lstore_3",
    "fstore_0",
    "fstore_1",
    "fstore_2",
    "fstore_3",
    "dstore_0",
    "dstore_1",
    "dstore_2",
    "dstore_3",
    "astore_0",
    "astore_1",
    "astore_2",
    "astore_3",
    "iastore",
    "lastore",
    "fastore",
    "dastore",
    "aastore",
    "bastore",
    "castore",
    "sastore",
    "pop",
    "pop2",
    "dup",
    "dup_x1",
    "dup_x2",
    "dup2",
    "dup2_x1",
    "dup2_x2",
    "swap",
    "iadd",
    "ladd",
    "fadd",
    "dadd",
    "isub",
    "lsub",
    "fsub",
    "dsub",
    "imul",
    "lmul",
    "fmul",
    "dmul",
    "idiv",
    "ldiv",
    "fdiv",
    "ddiv",
    "irem",
    "lrem",
    "frem",
    "drem",
    "ineg",
    "lneg",
    "fneg",
    "dneg",
    "ishl",
    "lshl",
    "ishr",
    "lshr",
    "iushr",
    "lushr",
    "iand",
    "land",
    "ior",
    "lor",
    "ixor",
    "lxor",
    "iinc",
    "i2l",
    "i2f",
    "i2d",
    "l2i",
    "l2f",
    "l2d",
    "f2i",
    "f2l",
    "f2d",
    "d2i",
    "d2l",
    "d2f",
    "i2b",
    "i2c",
    "i2s",
    "lcmp",
    "fcmpl",
    "fcmpg",
    "dcmpl",
    "dcmpg",
    "ifeq",
    "ifne",
    "iflt",
    "ifge",
    "ifgt",
    "ifle",
    "if_icmpeq",
    "if_icmpne",
    "if_icmplt",
    "if_icmpge",
    "if_icmpgt",
    "if_icmple",
    "if_acmpeq",
    "if_acmpne",
    "goto",
    "jsr",
    "ret",
    "tableswitch",
    "lookupswitch",
    "ireturn",
    "lreturn",
    "freturn",
    "dreturn",
    "areturn",
    "return",
    "getstatic",
    "putstatic",
    "getfield",
    "putfield",
    "invokevirtual",
    "invokespecial",
    "invokestatic",
    "invokeinterface",
    "invokedynamic",
    "new",
    "newarray",
    "anewarray",
    "arraylength",
    "athrow",
    "checkcast",
    "instanceof",
    "monitorenter",
    "monitorexit",
    "wide",
    "multianewarray",
    "ifnull",
    "ifnonnull",
    "goto_w",
    "jsr_w",
];

/// Mnemonic of an opcode (for listings).
pub fn mnemonic(opcode: u8) -> &'static str {
    MNEMONICS.get(opcode as usize).copied().unwrap_or("invalid")
}

/// Appends `ldc`/`ldc_w` for constant pool index `index`.
pub fn emit_ldc(out: &mut Vec<u8>, index: u16) {
    if index <= 0xFF {
        out.extend_from_slice(&[op::LDC, index as u8]);
    } else {
        out.push(op::LDC_W);
        out.extend_from_slice(&index.to_be_bytes());
    }
}

/// Appends `opcode index16` (field, method, class instructions).
pub fn emit_cp(out: &mut Vec<u8>, opcode: u8, index: u16) {
    out.push(opcode);
    out.extend_from_slice(&index.to_be_bytes());
}

/// Appends a load or store of local `index` with base opcode `opcode` (`iload`, `astore`, …).
pub fn emit_local(out: &mut Vec<u8>, opcode: u8, index: u16) {
    if index <= 0xFF {
        out.extend_from_slice(&[opcode, index as u8]);
    } else {
        out.extend_from_slice(&[op::WIDE, opcode]);
        out.extend_from_slice(&index.to_be_bytes());
    }
}
