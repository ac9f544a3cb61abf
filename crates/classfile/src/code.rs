//! The `Code` attribute and its re-layout after code insertion.
//!
//! This is hand-written rather than taken from a crate because none edits Code attributes
//! correctly: ristretto_classfile, for one, mis-writes StackMapTable deltas and frame types and
//! does not remap `Uninitialized(offset)` or local-variable ranges.
//!
//! An [`Edit`] says which straight-line snippets go where: a prologue, code *before* an
//! instruction (branches to the instruction run it too), code *after* an instruction (run only
//! when execution falls through), and handler blocks appended after the original code.
//! [`relayout`] lays the result out, widening branches that no longer reach (`goto` → `goto_w`,
//! `if<c> L` → `if<!c> +8; goto_w L`), recomputing switch padding, and relocating the
//! exception table, `LineNumberTable`, `LocalVariable(Type)Table` and `StackMapTable`.

use std::borrow::Cow;

use crate::bytes::{Reader, WriteBe};
use crate::class_file::Attribute;
use crate::constant_pool::ConstantPool;
use crate::error::{Error, Result};
use crate::instruction::{invert_condition, op, Insn, Operand};
use crate::stackmap::{self, Frame, VType};

/// One exception table entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExceptionEntry {
    /// Start of the protected range (inclusive).
    pub start_pc: u16,
    /// End of the protected range (exclusive).
    pub end_pc: u16,
    /// Handler offset.
    pub handler_pc: u16,
    /// Class entry of the caught type, 0 for any.
    pub catch_type: u16,
}

/// A parsed `Code` attribute.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeAttribute {
    /// Maximum operand stack depth.
    pub max_stack: u16,
    /// Number of local variable slots.
    pub max_locals: u16,
    /// The bytecode.
    pub code: Vec<u8>,
    /// Exception handlers, in priority order.
    pub exception_table: Vec<ExceptionEntry>,
    /// Attributes of the Code attribute.
    pub attributes: Vec<Attribute>,
}

impl CodeAttribute {
    /// Parses a Code attribute body.
    pub fn parse(info: &[u8]) -> Result<Self> {
        let mut r = Reader::new(info);
        let max_stack = r.u2("max_stack")?;
        let max_locals = r.u2("max_locals")?;
        let len = r.u4("code_length")? as usize;
        if len == 0 || len > 65535 {
            return Err(Error::BadAttribute("Code"));
        }
        let code = r.bytes(len, "code")?.to_vec();
        let n = r.u2("exception_table_length")?;
        let mut exception_table = Vec::with_capacity(n as usize);
        for _ in 0..n {
            exception_table.push(ExceptionEntry {
                start_pc: r.u2("start_pc")?,
                end_pc: r.u2("end_pc")?,
                handler_pc: r.u2("handler_pc")?,
                catch_type: r.u2("catch_type")?,
            });
        }
        let na = r.u2("attributes_count")?;
        let mut attributes = Vec::with_capacity(na as usize);
        for _ in 0..na {
            let name_index = r.u2("attribute name")?;
            let l = r.u4("attribute length")? as usize;
            attributes.push(Attribute {
                name_index,
                info: r.bytes(l, "attribute")?.to_vec(),
            });
        }
        if r.remaining() != 0 {
            return Err(Error::BadAttribute("Code"));
        }
        Ok(CodeAttribute {
            max_stack,
            max_locals,
            code,
            exception_table,
            attributes,
        })
    }

    /// Serializes the attribute body.
    pub fn write(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.code.len() + 64);
        out.u2(self.max_stack);
        out.u2(self.max_locals);
        out.u4(self.code.len() as u32);
        out.extend_from_slice(&self.code);
        out.u2(self.exception_table.len() as u16);
        for e in &self.exception_table {
            out.u2(e.start_pc);
            out.u2(e.end_pc);
            out.u2(e.handler_pc);
            out.u2(e.catch_type);
        }
        out.u2(self.attributes.len() as u16);
        for a in &self.attributes {
            out.u2(a.name_index);
            out.u4(a.info.len() as u32);
            out.extend_from_slice(&a.info);
        }
        out
    }
}

/// A position in the rewritten code, named by original instruction index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pos {
    /// Start of the code inserted before instruction `i` (`i == n`: end of the original code).
    Start(usize),
    /// The instruction `i` itself.
    Insn(usize),
    /// Just after instruction `i` (start of the code inserted after it).
    AfterInsn(usize),
    /// Start of appended block `k`.
    Block(usize),
    /// End of appended block `k`.
    BlockEnd(usize),
    /// Bytes into appended block `k`.
    BlockAt(usize, u32),
}

/// A new exception table entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NewHandler {
    /// Start of the protected range.
    pub start: Pos,
    /// End of the protected range (exclusive).
    pub end: Pos,
    /// Handler start.
    pub handler: Pos,
    /// Caught class entry, 0 for any.
    pub catch_type: u16,
}

/// A block appended after the original code (exception handlers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block {
    /// Straight-line code; must not fall off its end.
    pub code: Vec<u8>,
    /// Frame at the block's start (its `offset` is ignored); needed when the method has frames.
    pub frame: Option<Frame>,
}

/// Insertions into one method's code.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Edit {
    /// Code run once at method entry (branches to instruction 0 skip it).
    pub prologue: Vec<u8>,
    /// Per instruction: code run before it, also when it is reached by a branch.
    pub before: Vec<Vec<u8>>,
    /// Per instruction: code run after it when execution falls through.
    pub after: Vec<Vec<u8>>,
    /// Blocks appended after the original code.
    pub blocks: Vec<Block>,
    /// Exception entries placed before the original ones (higher priority).
    pub handlers_first: Vec<NewHandler>,
    /// Exception entries placed after the original ones.
    pub handlers_last: Vec<NewHandler>,
    /// Added to max_stack.
    pub extra_stack: u16,
    /// Added to max_locals.
    pub extra_locals: u16,
    /// Frames inside inserted code, at the targets of its own branches (in slot form, their
    /// `offset` ignored; the kept locals are added). One where the method has a frame already
    /// is left out: that frame holds there.
    pub frames: Vec<(Pos, Frame)>,
}

impl Edit {
    /// An empty edit for a method with `n` instructions.
    pub fn new(n: usize) -> Self {
        Edit {
            before: vec![Vec::new(); n],
            after: vec![Vec::new(); n],
            ..Edit::default()
        }
    }

    /// True when nothing is inserted.
    pub fn is_empty(&self) -> bool {
        self.prologue.is_empty()
            && self.blocks.is_empty()
            && self.before.iter().all(Vec::is_empty)
            && self.after.iter().all(Vec::is_empty)
    }
}

/// Frame information for [`relayout`], present when the method must carry a `StackMapTable`.
pub struct Frames<'a> {
    /// The implicit initial frame's locals (slot form).
    pub initial_locals: &'a [VType],
    /// The method's decoded frames (original offsets).
    pub frames: &'a [Frame],
    /// Frame after conditional branch `i` when it falls through (needed when it is widened).
    pub fallthrough: &'a mut dyn FnMut(usize) -> Result<Frame>,
    /// Locals the prologue sets and the inserted code reads anywhere later (slots at or
    /// beyond the method's own locals, types): added to every frame.
    pub kept_locals: &'a [(u16, VType)],
}

/// Maps original offsets to instruction indices (`n` for the end of the code).
pub fn offset_index(insns: &[Insn], code_len: usize) -> Vec<u32> {
    let mut v = vec![u32::MAX; code_len + 1];
    for (i, insn) in insns.iter().enumerate() {
        v[insn.offset as usize] = i as u32;
    }
    v[code_len] = insns.len() as u32;
    v
}

fn idx(map: &[u32], offset: usize, what: &'static str) -> Result<usize> {
    match map.get(offset) {
        Some(&i) if i != u32::MAX => Ok(i as usize),
        _ => Err(Error::BadCode {
            offset: offset as u32,
            reason: what,
        }),
    }
}

struct Layout {
    start: Vec<u32>,
    at: Vec<u32>,
    end: Vec<u32>,
    block: Vec<u32>,
    total: u32,
}

impl Layout {
    fn pos(&self, p: Pos, edit: &Edit) -> Result<u32> {
        let get = |v: &[u32], i: usize| {
            v.get(i)
                .copied()
                .ok_or(Error::BadStackMap("position out of range"))
        };
        Ok(match p {
            Pos::Start(i) => get(&self.start, i)?,
            Pos::Insn(i) => get(&self.at, i)?,
            Pos::AfterInsn(i) => get(&self.end, i)?,
            Pos::Block(k) => get(&self.block, k)?,
            Pos::BlockEnd(k) => {
                get(&self.block, k)? + edit.blocks.get(k).map_or(0, |b| b.code.len() as u32)
            }
            Pos::BlockAt(k, offset) => get(&self.block, k)? + offset,
        })
    }
}

fn insn_size(insn: &Insn, pc: u32, wide: bool) -> u32 {
    match insn.opcode {
        op::TABLESWITCH | op::LOOKUPSWITCH => {
            let pad = (4 - (pc + 1) % 4) % 4;
            let body = match &insn.operand {
                Operand::TableSwitch { targets, .. } => 12 + 4 * targets.len() as u32,
                Operand::LookupSwitch { pairs, .. } => 8 + 8 * pairs.len() as u32,
                _ => 0,
            };
            1 + pad + body
        }
        op::GOTO_W | op::JSR_W => 5,
        op::GOTO | op::JSR if wide => 5,
        _ if wide && insn.is_conditional_branch() => 8,
        _ => insn.len,
    }
}

fn is_short_branch(insn: &Insn) -> bool {
    matches!(insn.opcode, op::GOTO | op::JSR) || insn.is_conditional_branch()
}

fn compute_layout(insns: &[Insn], edit: &Edit, wide: &[bool]) -> Layout {
    let n = insns.len();
    let mut start = Vec::with_capacity(n + 1);
    let mut at = Vec::with_capacity(n);
    let mut end = Vec::with_capacity(n);
    let mut pc = edit.prologue.len() as u32;
    for (i, insn) in insns.iter().enumerate() {
        start.push(pc);
        pc += edit.before[i].len() as u32;
        at.push(pc);
        pc += insn_size(insn, pc, wide[i]);
        end.push(pc);
        pc += edit.after[i].len() as u32;
    }
    start.push(pc);
    let mut block = Vec::with_capacity(edit.blocks.len());
    for b in &edit.blocks {
        block.push(pc);
        pc += b.code.len() as u32;
    }
    Layout {
        start,
        at,
        end,
        block,
        total: pc,
    }
}

/// Lays out `insns` with `edit` applied and returns the new Code attribute.
///
/// `frames` must be given when the method has (or needs) a `StackMapTable`.
pub fn relayout(
    code: &CodeAttribute,
    insns: &[Insn],
    edit: &Edit,
    cp: &mut ConstantPool,
    mut frames: Option<Frames<'_>>,
) -> Result<CodeAttribute> {
    let n = insns.len();
    if edit.before.len() != n || edit.after.len() != n {
        return Err(Error::Unsupported(
            "edit does not match the instruction count",
        ));
    }
    let map = offset_index(insns, code.code.len());
    let targets = Targets::new(insns, &map)?;
    let (layout, wide) = widen(insns, edit, &targets);
    if layout.total > 65535 {
        return Err(Error::TooLarge("code longer than 65535 bytes"));
    }
    let relaid = Relaid {
        code,
        insns,
        edit,
        map,
        layout,
        wide,
    };
    let out = relaid.emit(&targets);
    let exception_table = relaid.exception_table()?;
    let attributes = relaid.attributes(cp, frames.as_mut())?;
    let max_stack = code
        .max_stack
        .checked_add(edit.extra_stack)
        .ok_or(Error::TooLarge("max_stack"))?;
    let max_locals = code
        .max_locals
        .checked_add(edit.extra_locals)
        .ok_or(Error::TooLarge("max_locals"))?;
    Ok(CodeAttribute {
        max_stack,
        max_locals,
        code: out,
        exception_table,
        attributes,
    })
}

/// Branch targets as instruction indices: `targets[start[i]..start[i + 1]]` for instruction
/// `i` (for switches, the cases then the default).
struct Targets {
    start: Vec<u32>,
    targets: Vec<usize>,
}

impl Targets {
    /// The targets of `insns`, whose instructions `map` indexes by original offset.
    fn new(insns: &[Insn], map: &[u32]) -> Result<Self> {
        let mut start: Vec<u32> = Vec::with_capacity(insns.len() + 1);
        let mut targets: Vec<usize> = Vec::with_capacity(insns.len() / 4);
        for insn in insns {
            start.push(targets.len() as u32);
            match &insn.operand {
                Operand::Branch(t) => targets.push(idx(map, *t as usize, "branch target")?),
                Operand::TableSwitch { .. } | Operand::LookupSwitch { .. } => {
                    for t in insn.targets() {
                        targets.push(idx(map, t as usize, "branch target")?);
                    }
                }
                _ => {}
            }
        }
        start.push(targets.len() as u32);
        Ok(Targets { start, targets })
    }

    /// The targets of instruction `i`.
    fn of(&self, i: usize) -> &[usize] {
        &self.targets[self.start[i] as usize..self.start[i + 1] as usize]
    }
}

/// Lays out the code, widening branches until every one reaches; returns the layout and
/// which branches are wide.
fn widen(insns: &[Insn], edit: &Edit, targets: &Targets) -> (Layout, Vec<bool>) {
    let mut wide = vec![false; insns.len()];
    loop {
        let l = compute_layout(insns, edit, &wide);
        let mut changed = false;
        for (i, insn) in insns.iter().enumerate() {
            if !wide[i] && is_short_branch(insn) {
                let t = targets.of(i).first().copied().unwrap_or(0);
                let delta = l.start[t] as i64 - l.at[i] as i64;
                if delta < i16::MIN as i64 || delta > i16::MAX as i64 {
                    wide[i] = true;
                    changed = true;
                }
            }
        }
        if !changed {
            return (l, wide);
        }
    }
}

/// The original code and the edit laid out: what the new code, exception table and
/// attributes are written from.
struct Relaid<'a> {
    code: &'a CodeAttribute,
    insns: &'a [Insn],
    edit: &'a Edit,
    /// Instruction indices by original offset (see [`offset_index`]).
    map: Vec<u32>,
    layout: Layout,
    /// Which branches are widened.
    wide: Vec<bool>,
}

impl Relaid<'_> {
    /// The new code: the inserted code around the original instructions, with branches and
    /// switches relocated.
    fn emit(&self, targets: &Targets) -> Vec<u8> {
        let (edit, layout) = (self.edit, &self.layout);
        let mut out = Vec::with_capacity(layout.total as usize);
        out.extend_from_slice(&edit.prologue);
        for (i, insn) in self.insns.iter().enumerate() {
            out.extend_from_slice(&edit.before[i]);
            let pc = layout.at[i];
            debug_assert_eq!(out.len() as u32, pc);
            let rel = |t: usize, from: u32| layout.start[t] as i64 - from as i64;
            match &insn.operand {
                Operand::Branch(_) => {
                    let t = targets.of(i).first().copied().unwrap_or(0);
                    emit_branch(&mut out, insn.opcode, self.wide[i], pc, layout.start[t]);
                }
                Operand::TableSwitch {
                    low, targets: ts, ..
                } => {
                    out.push(insn.opcode);
                    while out.len() % 4 != 0 {
                        out.push(0);
                    }
                    let tg = targets.of(i);
                    out.u4(rel(tg[tg.len() - 1], pc) as i32 as u32);
                    out.u4(*low as u32);
                    out.u4((*low as i64 + ts.len() as i64 - 1) as i32 as u32);
                    for &t in &tg[..tg.len() - 1] {
                        out.u4(rel(t, pc) as i32 as u32);
                    }
                }
                Operand::LookupSwitch { pairs, .. } => {
                    out.push(insn.opcode);
                    while out.len() % 4 != 0 {
                        out.push(0);
                    }
                    let tg = targets.of(i);
                    out.u4(rel(tg[tg.len() - 1], pc) as i32 as u32);
                    out.u4(pairs.len() as u32);
                    for (k, (key, _)) in pairs.iter().enumerate() {
                        out.u4(*key as u32);
                        out.u4(rel(tg[k], pc) as i32 as u32);
                    }
                }
                _ => {
                    let s = insn.offset as usize;
                    out.extend_from_slice(&self.code.code[s..s + insn.len as usize]);
                }
            }
            out.extend_from_slice(&edit.after[i]);
        }
        for b in &edit.blocks {
            out.extend_from_slice(&b.code);
        }
        debug_assert_eq!(out.len() as u32, layout.total);
        out
    }

    /// Where the instruction at original offset `off` starts now (with the code inserted
    /// before it).
    fn start_of(&self, off: u16) -> Result<u16> {
        Ok(self.layout.start[idx(&self.map, off as usize, "range boundary")?] as u16)
    }

    /// The exception table entry of handler `h`.
    fn new_entry(&self, h: &NewHandler) -> Result<ExceptionEntry> {
        let pos = |p: Pos| -> Result<u16> { Ok(self.layout.pos(p, self.edit)? as u16) };
        Ok(ExceptionEntry {
            start_pc: pos(h.start)?,
            end_pc: pos(h.end)?,
            handler_pc: pos(h.handler)?,
            catch_type: h.catch_type,
        })
    }

    /// The exception table: the edit's first handlers, the original ones relocated, then the
    /// edit's last handlers.
    fn exception_table(&self) -> Result<Vec<ExceptionEntry>> {
        let (code, edit) = (self.code, self.edit);
        let mut exception_table = Vec::with_capacity(
            code.exception_table.len() + edit.handlers_first.len() + edit.handlers_last.len(),
        );
        for h in &edit.handlers_first {
            exception_table.push(self.new_entry(h)?);
        }
        for e in &code.exception_table {
            if e.start_pc >= e.end_pc {
                return Err(Error::BadAttribute("exception table range"));
            }
            exception_table.push(ExceptionEntry {
                start_pc: self.start_of(e.start_pc)?,
                end_pc: self.start_of(e.end_pc)?,
                handler_pc: self.start_of(e.handler_pc)?,
                catch_type: e.catch_type,
            });
        }
        for h in &edit.handlers_last {
            exception_table.push(self.new_entry(h)?);
        }
        Ok(exception_table)
    }

    /// The Code attribute's attributes, their offsets relocated, with the `StackMapTable`
    /// written from `frames` (added when the method had none).
    fn attributes(
        &self,
        cp: &mut ConstantPool,
        mut frames: Option<&mut Frames<'_>>,
    ) -> Result<Vec<Attribute>> {
        let mut attributes = Vec::with_capacity(self.code.attributes.len() + 1);
        let mut wrote_stackmap = false;
        for a in &self.code.attributes {
            let info = match cp.utf8(a.name_index)? {
                b"LineNumberTable" => self.line_numbers(&a.info)?,
                b"LocalVariableTable" | b"LocalVariableTypeTable" => {
                    self.local_variables(&a.info)?
                }
                b"StackMapTable" => match frames.as_deref_mut() {
                    Some(f) => {
                        wrote_stackmap = true;
                        self.frames(f)?
                    }
                    None => {
                        return Err(Error::BadStackMap(
                            "StackMapTable without frame information",
                        ))
                    }
                },
                // Type annotations on code carry offsets into it; they are not visible to
                // reflection and are dropped rather than left pointing at the wrong
                // instructions.
                b"RuntimeVisibleTypeAnnotations" | b"RuntimeInvisibleTypeAnnotations" => continue,
                _ => a.info.clone(),
            };
            attributes.push(Attribute {
                name_index: a.name_index,
                info,
            });
        }
        if !wrote_stackmap {
            if let Some(f) = frames {
                let body = self.frames(f)?;
                if body != [0, 0] {
                    attributes.push(Attribute {
                        name_index: cp.add_utf8("StackMapTable")?,
                        info: body,
                    });
                }
            }
        }
        Ok(attributes)
    }

    /// A `LineNumberTable` with its start offsets relocated.
    fn line_numbers(&self, info: &[u8]) -> Result<Vec<u8>> {
        let mut r = Reader::new(info);
        let k = r.u2("line_number_table_length")?;
        let mut o = Vec::with_capacity(info.len());
        o.u2(k);
        for _ in 0..k {
            o.u2(self.start_of(r.u2("start_pc")?)?);
            o.u2(r.u2("line_number")?);
        }
        Ok(o)
    }

    /// A `LocalVariableTable` or `LocalVariableTypeTable` with its ranges relocated.
    fn local_variables(&self, info: &[u8]) -> Result<Vec<u8>> {
        let mut r = Reader::new(info);
        let k = r.u2("local_variable_table_length")?;
        let mut o = Vec::with_capacity(info.len());
        o.u2(k);
        for _ in 0..k {
            let s = r.u2("start_pc")?;
            let l = r.u2("length")?;
            let end = s as usize + l as usize;
            let ns = if s == 0 { 0 } else { self.start_of(s)? };
            let ne = self.layout.start[idx(&self.map, end, "local variable range end")?] as u16;
            o.u2(ns);
            o.u2(ne - ns);
            o.extend_from_slice(r.bytes(6, "local variable entry")?);
        }
        Ok(o)
    }

    /// The `StackMapTable` of the new code.
    fn frames(&self, f: &mut Frames<'_>) -> Result<Vec<u8>> {
        encode_frames(
            f,
            self.insns,
            self.edit,
            &self.map,
            &self.layout,
            &self.wide,
        )
    }
}

/// Writes branch `opcode` at `pc` to `target` (both offsets in the new code): as it was, or
/// `wide` (`goto_w`/`jsr_w`, or a conditional branch inverted over a `goto_w`).
fn emit_branch(out: &mut Vec<u8>, opcode: u8, wide: bool, pc: u32, target: u32) {
    let rel = |from: u32| target as i64 - from as i64;
    if matches!(opcode, op::GOTO_W | op::JSR_W) || (wide && matches!(opcode, op::GOTO | op::JSR)) {
        out.push(if matches!(opcode, op::GOTO | op::GOTO_W) {
            op::GOTO_W
        } else {
            op::JSR_W
        });
        out.u4(rel(pc) as i32 as u32);
    } else if wide {
        out.push(invert_condition(opcode));
        out.u2(8);
        out.push(op::GOTO_W);
        out.u4(rel(pc + 3) as i32 as u32);
    } else {
        out.push(opcode);
        out.u2(rel(pc) as i16 as u16);
    }
}

/// `v` with `Uninitialized` offsets moved to where their `new` instructions now are.
fn remap<'v>(v: &'v [VType], map: &[u32], layout: &Layout) -> Result<Cow<'v, [VType]>> {
    if !v.iter().any(|t| matches!(t, VType::Uninitialized(_))) {
        return Ok(Cow::Borrowed(v));
    }
    let mut out = v.to_vec();
    for t in out.iter_mut() {
        if let VType::Uninitialized(o) = *t {
            let i = idx(map, o as usize, "uninitialized offset")?;
            *t = VType::Uninitialized(
                *layout
                    .at
                    .get(i)
                    .ok_or(Error::BadStackMap("uninitialized offset"))?,
            );
        }
    }
    Ok(Cow::Owned(out))
}

/// Frame locals `v` (slot form) with local `slot` of type `t` added, the slots between them `Top`.
fn with_local(v: &[VType], slot: u16, t: VType) -> Result<Vec<VType>> {
    let slot = slot as usize;
    if v.len() > slot {
        return Err(Error::BadStackMap(
            "a frame uses the slot of an added local",
        ));
    }
    let mut out = Vec::with_capacity(slot + 2);
    out.extend_from_slice(v);
    out.resize(slot, VType::Top);
    out.push(t);
    if t.is_wide() {
        out.push(VType::Top);
    }
    Ok(out)
}

/// A stack map frame at its offset in the new code: (offset, locals, stack).
type PlacedFrame<'a> = (u32, Cow<'a, [VType]>, Cow<'a, [VType]>);

fn encode_frames(
    f: &mut Frames<'_>,
    insns: &[Insn],
    edit: &Edit,
    map: &[u32],
    layout: &Layout,
    wide: &[bool],
) -> Result<Vec<u8>> {
    let n = insns.len();
    let kept = f.kept_locals;
    fn placed<'v>(
        v: &'v [VType],
        map: &[u32],
        layout: &Layout,
        kept: &[(u16, VType)],
    ) -> Result<Cow<'v, [VType]>> {
        let mut v = remap(v, map, layout)?;
        for &(slot, t) in kept {
            v = Cow::Owned(with_local(&v, slot, t)?);
        }
        Ok(v)
    }
    let remap_locals = |v| placed(v, map, layout, kept);
    let mut has_frame = vec![false; n + 1];
    let mut out: Vec<PlacedFrame<'_>> = Vec::with_capacity(f.frames.len() + edit.blocks.len());
    let frames: &[Frame] = f.frames;
    for fr in frames {
        let i = idx(map, fr.offset as usize, "frame offset")?;
        if i >= n {
            return Err(Error::BadStackMap("frame at end of code"));
        }
        has_frame[i] = true;
        out.push((
            layout.start[i],
            remap_locals(&fr.locals)?,
            remap(&fr.stack, map, layout)?,
        ));
    }
    for (i, insn) in insns.iter().enumerate() {
        if wide[i]
            && insn.is_conditional_branch()
            && !(edit.after[i].is_empty() && has_frame.get(i + 1) == Some(&true))
        {
            let fr = (f.fallthrough)(i)?;
            let l = Cow::Owned(placed(&fr.locals, map, layout, kept)?.into_owned());
            let s = Cow::Owned(remap(&fr.stack, map, layout)?.into_owned());
            out.push((layout.at[i] + 8, l, s));
        }
    }
    for (k, b) in edit.blocks.iter().enumerate() {
        if let Some(fr) = &b.frame {
            out.push((
                layout.block[k],
                remap_locals(&fr.locals)?,
                remap(&fr.stack, map, layout)?,
            ));
        }
    }
    for (p, fr) in &edit.frames {
        let offset = layout.pos(*p, edit)?;
        if out.iter().all(|placed| placed.0 != offset) {
            out.push((
                offset,
                remap_locals(&fr.locals)?,
                remap(&fr.stack, map, layout)?,
            ));
        }
    }
    out.sort_by_key(|fr| fr.0);
    if out.windows(2).any(|w| w[0].0 == w[1].0) {
        return Err(Error::BadStackMap("two frames at one offset"));
    }
    stackmap::encode_slices(
        out.iter().map(|(o, l, s)| (*o, &**l, &**s)),
        out.len(),
        f.initial_locals,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::instruction::decode;

    /// iload_0; tableswitch {0: L1; default: L2}; L1: iconst_1; ireturn; L2: iconst_2; ireturn
    fn switch_code() -> CodeAttribute {
        let mut code = vec![0x1a, op::TABLESWITCH, 0, 0];
        for v in [21i32, 0, 0, 19] {
            code.extend_from_slice(&v.to_be_bytes());
        }
        code.extend_from_slice(&[0x04, op::IRETURN, 0x05, op::IRETURN]);
        CodeAttribute {
            max_stack: 1,
            max_locals: 1,
            code,
            exception_table: Vec::new(),
            attributes: Vec::new(),
        }
    }

    #[test]
    fn switch_padding_and_targets_follow_insertions() {
        let code = switch_code();
        let insns = decode(&code.code).unwrap();
        assert_eq!(insns.len(), 6);
        let mut cp = crate::class_file::ClassFile::parse(&minimal_class())
            .unwrap()
            .constant_pool;
        for extra in 0..4usize {
            let mut edit = Edit::new(insns.len());
            edit.before[1] = vec![op::NOP; extra];
            edit.before[2] = vec![op::NOP; 2];
            let out = relayout(&code, &insns, &edit, &mut cp, None).unwrap();
            let d = decode(&out.code).unwrap();
            let Operand::TableSwitch {
                default, targets, ..
            } = &d[1 + extra].operand
            else {
                panic!()
            };
            // Targets point at the start of the inserted code before `iconst_1` / at `iconst_2`.
            assert_eq!(
                out.code[targets[0] as usize..targets[0] as usize + 3],
                [op::NOP, op::NOP, 0x04]
            );
            assert_eq!(out.code[*default as usize], 0x05);
        }
    }

    #[test]
    fn far_branches_are_widened() {
        // iload_0; ifeq L; iconst_1; ireturn; L: iconst_2; ireturn — then 40000 bytes before iconst_1.
        let code = CodeAttribute {
            max_stack: 1,
            max_locals: 1,
            code: vec![0x1a, op::IFEQ, 0, 5, 0x04, op::IRETURN, 0x05, op::IRETURN],
            exception_table: Vec::new(),
            attributes: Vec::new(),
        };
        let insns = decode(&code.code).unwrap();
        let mut edit = Edit::new(insns.len());
        edit.before[2] = vec![op::NOP; 40000];
        let mut cp = crate::class_file::ClassFile::parse(&minimal_class())
            .unwrap()
            .constant_pool;
        let out = relayout(&code, &insns, &edit, &mut cp, None).unwrap();
        assert_eq!(&out.code[1..4], &[op::IFEQ + 1, 0, 8]);
        assert_eq!(out.code[4], op::GOTO_W);
        let d = decode(&out.code).unwrap();
        let Operand::Branch(t) = d[2].operand else {
            panic!()
        };
        assert_eq!(out.code[t as usize], 0x05);
        assert_eq!(out.code.len(), 8 + 5 + 40000);
    }

    fn minimal_class() -> Vec<u8> {
        let mut v = vec![0xCA, 0xFE, 0xBA, 0xBE, 0, 0, 0, 52, 0, 3];
        v.extend_from_slice(b"\x01\x00\x01A\x07\x00\x01");
        v.extend_from_slice(&[0, 0x21, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        v
    }
}
