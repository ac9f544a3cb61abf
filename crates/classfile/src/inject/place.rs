//! Shared placement: the edit being built for one method, and putting a probe call into it.

use super::analysis::Facts;
use super::site::Site;
use super::snippet::{Refs, Snippet};
use crate::code::{Block, Edit, Pos};
use crate::constant_pool::ConstantPool;
use crate::descriptor::FieldType;
use crate::error::{Error, Result};
use crate::instruction::{emit_local, op};
use crate::plan::{Probe, Registry, Value};
use crate::stackmap::{Frame, VType};

/// Where straight-line probe code goes.
#[derive(Clone, Copy)]
pub(super) enum At {
    /// The prologue: the mark and the guard's verdict, run once at entry.
    Prologue,
    /// The entry probes' code, after the prologue.
    Entry,
    /// Before instruction `i`.
    Before(usize),
    /// After instruction `i`, when execution falls through it.
    After(usize),
}

/// The edit of one method as its probes are placed, and what placing them needs.
pub(super) struct Placer<'a> {
    pub(super) cp: &'a mut ConstantPool,
    pub(super) refs: &'a mut Refs,
    pub(super) registry: &'a mut Registry,
    pub(super) edit: Edit,
    /// The entry probes' code, apart from the prologue's mark and guard.
    pub(super) entry: Vec<u8>,
    /// The most stack slots any probe code uses.
    pub(super) peak: i32,
    /// Whether probe code parks a value in the stash slot.
    pub(super) used_stash: bool,
    /// The first exception-exit handler block.
    pub(super) exit_block: Option<usize>,
    /// Per instruction, the site id of the call there (-1: none yet); shared by the call's
    /// before and after probes.
    pub(super) call_sites: Vec<i32>,
    /// (call instruction, block) of the handlers covering just one call.
    pub(super) call_blocks: Vec<(usize, usize)>,
}

impl<'a> Placer<'a> {
    /// Nothing placed yet in a method of `n` instructions.
    pub(super) fn new(
        cp: &'a mut ConstantPool,
        refs: &'a mut Refs,
        registry: &'a mut Registry,
        n: usize,
    ) -> Self {
        Placer {
            cp,
            refs,
            registry,
            edit: Edit::new(n),
            entry: Vec::new(),
            peak: 0,
            used_stash: false,
            exit_block: None,
            call_sites: Vec::new(),
            call_blocks: Vec::new(),
        }
    }

    fn code(&mut self, at: At) -> &mut Vec<u8> {
        match at {
            At::Prologue => &mut self.edit.prologue,
            At::Entry => &mut self.entry,
            At::Before(i) => &mut self.edit.before[i],
            At::After(i) => &mut self.edit.after[i],
        }
    }

    /// The code at `at`, to be continued (at stack depth 0) and put back with [`Self::put`].
    pub(super) fn take(&mut self, at: At) -> Snippet {
        Snippet::on(std::mem::take(self.code(at)), 0)
    }

    /// Puts the code of a snippet made with [`Self::take`] back where it came from.
    pub(super) fn put(&mut self, at: At, s: Snippet) {
        self.peak = self.peak.max(s.peak);
        *self.code(at) = s.code;
    }

    /// Adds the call of probe `pi` at `at` with values as available at `site`; `stash`, the
    /// type of the value on top of the stack and what it is, parks it for the probe first.
    pub(super) fn place(
        &mut self,
        f: &Facts,
        at: At,
        (pi, probe): (usize, &Probe),
        mut site: Site,
        stash: Option<(FieldType<'_>, Value)>,
    ) -> Result<()> {
        let mut s = self.take(at);
        if let Some((t, value)) = stash {
            s.capture(self.cp, self.refs, t, f.method.stash)?;
            self.used_stash = true;
            site.stashed = Some(value);
        }
        f.method
            .call(self.cp, self.refs, &mut s, pi, probe, &site)?;
        self.put(at, s);
        Ok(())
    }

    /// Appends a catch-all handler block calling probe `pi` with the exception (at `site`),
    /// then rethrowing it; the handler's frame has `locals`. With `pass`, the call is skipped
    /// when the guard rejected the method's call. Returns the block's index.
    pub(super) fn rethrowing(
        &mut self,
        f: &Facts,
        (pi, probe): (usize, &Probe),
        site: Site,
        pass: Option<u16>,
        locals: Vec<VType>,
    ) -> Result<usize> {
        let mut s = Snippet::new(1);
        let throwable = self.refs.throwable(self.cp)?;
        s.capture(
            self.cp,
            self.refs,
            FieldType::Reference(b"java/lang/Throwable"),
            f.method.stash,
        )?;
        self.used_stash = true;
        let skip = pass.map(|slot| {
            s.local(op::ILOAD, slot, 1);
            s.emit(&[op::IFEQ, 0, 0], -1);
            s.code.len() - 3
        });
        let site = Site {
            stashed: Some(Value::Thrown),
            ..site
        };
        f.method
            .call(self.cp, self.refs, &mut s, pi, probe, &site)?;
        let frame = f.with_frames.then(|| Frame {
            offset: 0,
            locals,
            stack: vec![VType::Object(throwable)],
        });
        if let Some(at) = skip {
            let landing = s.code.len();
            patch_branch(&mut s.code, at, landing)?;
            if let Some(frame) = &frame {
                let block = Pos::BlockAt(self.edit.blocks.len(), landing as u32);
                self.edit.frames.push((block, frame.clone()));
            }
        }
        s.emit(&[op::ATHROW], -1);
        self.peak = self.peak.max(s.peak);
        self.edit.blocks.push(Block {
            code: s.code,
            frame,
        });
        Ok(self.edit.blocks.len() - 1)
    }
}

/// `code`, run only when local `pass` is not 0: `iload pass; ifeq <after code>; code`.
pub(super) fn skip_unless_passed(pass: u16, code: Vec<u8>) -> Result<Vec<u8>> {
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
