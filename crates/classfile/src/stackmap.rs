//! `StackMapTable`: decoding to absolute frames and re-encoding with the shortest frame forms.
//!
//! Frames are held in *slot form*: a `long` or `double` occupies two entries (`Long`, `Top`), as
//! in the verifier's own model, so locals can be indexed by local variable number.

use crate::bytes::{Reader, WriteBe};
use crate::error::{Error, Result};

/// A verification type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VType {
    /// `top` (unusable, or the second half of a long/double).
    Top,
    /// `int` (also boolean, byte, char, short).
    Integer,
    /// `float`.
    Float,
    /// `long` (first slot).
    Long,
    /// `double` (first slot).
    Double,
    /// The null type.
    Null,
    /// `this` in a constructor before the super/this constructor call.
    UninitializedThis,
    /// A class or array type (constant pool Class index).
    Object(u16),
    /// An object created by the `new` at this code offset, not yet initialized.
    Uninitialized(u32),
}

impl VType {
    /// True for `long` and `double`.
    pub fn is_wide(self) -> bool {
        matches!(self, VType::Long | VType::Double)
    }
}

/// A frame at an absolute code offset, in slot form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Code offset the frame applies to.
    pub offset: u32,
    /// Local variable types, one per slot.
    pub locals: Vec<VType>,
    /// Operand stack types, one per slot (bottom first).
    pub stack: Vec<VType>,
}

/// Converts the class file's list form (a long is one entry) to slot form.
pub fn to_slots(entries: &[VType]) -> Vec<VType> {
    let mut v = Vec::with_capacity(entries.len() + 2);
    for &e in entries {
        v.push(e);
        if e.is_wide() {
            v.push(VType::Top);
        }
    }
    v
}

/// Converts slot form to the class file's list form.
pub fn to_entries(slots: &[VType]) -> Vec<VType> {
    let mut v = Vec::with_capacity(slots.len());
    let mut i = 0;
    while i < slots.len() {
        v.push(slots[i]);
        i += if slots[i].is_wide() { 2 } else { 1 };
    }
    v
}

fn read_vtype(r: &mut Reader<'_>) -> Result<VType> {
    Ok(match r.u1("verification type")? {
        0 => VType::Top,
        1 => VType::Integer,
        2 => VType::Float,
        3 => VType::Double,
        4 => VType::Long,
        5 => VType::Null,
        6 => VType::UninitializedThis,
        7 => VType::Object(r.u2("object type")?),
        8 => VType::Uninitialized(r.u2("uninitialized offset")? as u32),
        _ => return Err(Error::BadStackMap("unknown verification type tag")),
    })
}

fn write_vtype(out: &mut Vec<u8>, t: VType) -> Result<()> {
    match t {
        VType::Top => out.u1(0),
        VType::Integer => out.u1(1),
        VType::Float => out.u1(2),
        VType::Double => out.u1(3),
        VType::Long => out.u1(4),
        VType::Null => out.u1(5),
        VType::UninitializedThis => out.u1(6),
        VType::Object(c) => {
            out.u1(7);
            out.u2(c);
        }
        VType::Uninitialized(o) => {
            out.u1(8);
            out.u2(u16::try_from(o).map_err(|_| Error::TooLarge("uninitialized offset"))?);
        }
    }
    Ok(())
}

/// Decodes a `StackMapTable` body. `initial_locals` is the implicit first frame (slot form).
pub fn decode(data: &[u8], initial_locals: &[VType]) -> Result<Vec<Frame>> {
    let mut r = Reader::new(data);
    let n = r.u2("number_of_entries")?;
    let mut frames: Vec<Frame> = Vec::with_capacity(n as usize);
    let mut locals = to_entries(initial_locals);
    let mut offset: i64 = -1;
    for _ in 0..n {
        let ft = r.u1("frame type")?;
        let (delta, stack) = match ft {
            0..=63 => (ft as u16, Vec::new()),
            64..=127 => (ft as u16 - 64, vec![read_vtype(&mut r)?]),
            247 => {
                let d = r.u2("offset_delta")?;
                (d, vec![read_vtype(&mut r)?])
            }
            248..=250 => {
                let d = r.u2("offset_delta")?;
                let k = (251 - ft) as usize;
                if locals.len() < k {
                    return Err(Error::BadStackMap("chop frame removes too many locals"));
                }
                locals.truncate(locals.len() - k);
                (d, Vec::new())
            }
            251 => (r.u2("offset_delta")?, Vec::new()),
            252..=254 => {
                let d = r.u2("offset_delta")?;
                for _ in 0..(ft - 251) {
                    locals.push(read_vtype(&mut r)?);
                }
                (d, Vec::new())
            }
            255 => {
                let d = r.u2("offset_delta")?;
                let nl = r.u2("number_of_locals")?;
                locals.clear();
                for _ in 0..nl {
                    locals.push(read_vtype(&mut r)?);
                }
                let ns = r.u2("number_of_stack_items")?;
                let mut stack = Vec::with_capacity(ns as usize);
                for _ in 0..ns {
                    stack.push(read_vtype(&mut r)?);
                }
                (d, stack)
            }
            _ => return Err(Error::BadStackMap("reserved frame type")),
        };
        offset += delta as i64 + 1;
        frames.push(Frame {
            offset: offset as u32,
            locals: to_slots(&locals),
            stack: to_slots(&stack),
        });
    }
    if r.remaining() != 0 {
        return Err(Error::BadStackMap("trailing bytes"));
    }
    Ok(frames)
}

/// Encodes frames (sorted by strictly increasing offset) as a `StackMapTable` body.
pub fn encode(frames: &[Frame], initial_locals: &[VType]) -> Result<Vec<u8>> {
    encode_slices(
        frames
            .iter()
            .map(|f| (f.offset, &f.locals[..], &f.stack[..])),
        frames.len(),
        initial_locals,
    )
}

/// Slot form to list form, into a reused buffer.
fn entries_into(slots: &[VType], out: &mut Vec<VType>) {
    out.clear();
    let mut i = 0;
    while i < slots.len() {
        out.push(slots[i]);
        i += if slots[i].is_wide() { 2 } else { 1 };
    }
}

/// [`encode`] over (offset, locals, stack) triples in slot form.
pub(crate) fn encode_slices<'a>(
    frames: impl Iterator<Item = (u32, &'a [VType], &'a [VType])>,
    count: usize,
    initial_locals: &[VType],
) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(count * 4 + 2);
    out.u2(u16::try_from(count).map_err(|_| Error::TooLarge("StackMapTable"))?);
    let mut prev_locals = to_entries(initial_locals);
    let (mut locals, mut stack) = (Vec::new(), Vec::new());
    let mut prev_offset: Option<u32> = None;
    for (offset, frame_locals, frame_stack) in frames {
        let delta = match prev_offset {
            None => offset,
            Some(p) if offset > p => offset - p - 1,
            Some(_) => return Err(Error::BadStackMap("frames out of order")),
        };
        let delta = u16::try_from(delta).map_err(|_| Error::TooLarge("frame offset"))?;
        entries_into(frame_locals, &mut locals);
        entries_into(frame_stack, &mut stack);
        let same = locals == prev_locals;
        if same && stack.is_empty() {
            if delta < 64 {
                out.u1(delta as u8);
            } else {
                out.u1(251);
                out.u2(delta);
            }
        } else if same && stack.len() == 1 {
            if delta < 64 {
                out.u1(64 + delta as u8);
            } else {
                out.u1(247);
                out.u2(delta);
            }
            write_vtype(&mut out, stack[0])?;
        } else if stack.is_empty()
            && locals.len() < prev_locals.len()
            && prev_locals.len() - locals.len() <= 3
            && prev_locals[..locals.len()] == locals[..]
        {
            out.u1((251 - (prev_locals.len() - locals.len())) as u8);
            out.u2(delta);
        } else if stack.is_empty()
            && locals.len() > prev_locals.len()
            && locals.len() - prev_locals.len() <= 3
            && locals[..prev_locals.len()] == prev_locals[..]
        {
            out.u1((251 + (locals.len() - prev_locals.len())) as u8);
            out.u2(delta);
            for &t in &locals[prev_locals.len()..] {
                write_vtype(&mut out, t)?;
            }
        } else {
            out.u1(255);
            out.u2(delta);
            out.u2(locals.len() as u16);
            for &t in &locals {
                write_vtype(&mut out, t)?;
            }
            out.u2(stack.len() as u16);
            for &t in &stack {
                write_vtype(&mut out, t)?;
            }
        }
        std::mem::swap(&mut prev_locals, &mut locals);
        prev_offset = Some(offset);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use VType::*;

    fn frame(offset: u32, locals: &[VType], stack: &[VType]) -> Frame {
        Frame {
            offset,
            locals: to_slots(locals),
            stack: to_slots(stack),
        }
    }

    #[test]
    fn every_frame_form_round_trips() {
        let init = [Object(1), Integer];
        let frames = vec![
            frame(0, &init, &[]),                                 // same_frame, delta 0
            frame(5, &init, &[Long]),                             // same_locals_1_stack_item
            frame(200, &init, &[]),                               // same_frame_extended
            frame(300, &init, &[Uninitialized(7)]), // same_locals_1_stack_item_extended
            frame(301, &[Object(1), Integer, Double, Null], &[]), // append 2
            frame(302, &[Object(1)], &[]),          // chop 3 (entries, not slots)
            frame(303, &[Top, Float], &[Integer, Object(3)]), // full
            frame(1000, &[Top, Float], &[]),        // same (long delta)
        ];
        let body = encode(&frames, &to_slots(&init)).unwrap();
        assert_eq!(decode(&body, &to_slots(&init)).unwrap(), frames);
        let types: Vec<u8> = {
            let mut r = Reader::new(&body);
            r.u2("n").unwrap();
            let mut v = Vec::new();
            for _ in &frames {
                let t = r.u1("t").unwrap();
                v.push(t);
                match t {
                    0..=63 => {}
                    64..=127 => skip_type(&mut r),
                    247 => {
                        r.u2("d").unwrap();
                        skip_type(&mut r)
                    }
                    248..=251 => {
                        r.u2("d").unwrap();
                    }
                    252..=254 => {
                        r.u2("d").unwrap();
                        for _ in 0..t - 251 {
                            skip_type(&mut r)
                        }
                    }
                    _ => {
                        r.u2("d").unwrap();
                        for _ in 0..r.u2("n").unwrap() {
                            skip_type(&mut r)
                        }
                        for _ in 0..r.u2("n").unwrap() {
                            skip_type(&mut r)
                        }
                    }
                }
            }
            v
        };
        assert_eq!(types, vec![0, 64 + 4, 251, 247, 253, 248, 255, 251]);
    }

    fn skip_type(r: &mut Reader<'_>) {
        if r.u1("tag").unwrap() >= 7 {
            r.u2("x").unwrap();
        }
    }

    #[test]
    fn malformed_tables_are_errors() {
        assert!(decode(&[0, 1, 200], &[]).is_err());
        assert!(decode(&[0, 1, 248, 0, 0], &[]).is_err());
        assert!(decode(&[0, 2, 0], &[]).is_err());
        assert!(decode(&[0, 1, 64, 9], &[]).is_err());
    }
}
