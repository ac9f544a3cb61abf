//! The instrumented method's new code: the edit laid out by [`relayout`], with the frames it
//! needs where widened branches fall through and for the locals probe code keeps.

use super::analysis::{trimmed, Facts};
use crate::code::{relayout, CodeAttribute, Edit, Frames};
use crate::constant_pool::ConstantPool;
use crate::error::{Error, Result};
use crate::instruction::{op, Insn};
use crate::stackmap::{Frame, VType};
use crate::typeflow::{self, MethodInfo, State};

/// Lays out `code` with `edit` applied; `info` and `frames` describe the original method.
pub(super) fn rewrite(
    cp: &mut ConstantPool,
    code: &CodeAttribute,
    f: &Facts,
    edit: &Edit,
    info: &MethodInfo,
    frames: &[Frame],
) -> Result<CodeAttribute> {
    // States after conditional branches, for frames at branches that get widened.
    let ft_states = if f.with_frames && may_widen(code, f.insns, edit) {
        let mask: Vec<bool> = f.insns.iter().map(|x| x.is_conditional_branch()).collect();
        typeflow::states(cp, info, &mask)?
    } else {
        Vec::new()
    };
    let mut fallthrough = |i: usize| fallthrough_frame(&ft_states, f.insns, i);
    let kept: Vec<(u16, VType)> = f
        .method
        .mark
        .map(|slot| (slot, VType::Long))
        .into_iter()
        .chain(f.pass.map(|slot| (slot, VType::Integer)))
        .collect();
    let frames_arg = f.with_frames.then(|| Frames {
        initial_locals: f.initial,
        frames,
        fallthrough: &mut fallthrough,
        kept_locals: &kept,
    });
    relayout(code, f.insns, edit, cp, frames_arg)
}

/// Whether the code with `edit` applied may grow past the reach of a short branch.
fn may_widen(code: &CodeAttribute, insns: &[Insn], edit: &Edit) -> bool {
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
    code.code.len() + inserted + growth > 32767
}

/// The frame where conditional branch `i` falls through, from its incoming state in
/// `states`.
fn fallthrough_frame(states: &[Option<State>], insns: &[Insn], i: usize) -> Result<Frame> {
    let st = states
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
}
