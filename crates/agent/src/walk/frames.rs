//! The walk: from a thread's last Java frame (its frame anchor) to the bottom of its stack,
//! frame by frame, as HotSpot's own `frame::sender` does on x86-64.
//!
//! - An interpreted frame (pc in the interpreter) keeps its `Method*` and bytecode pointer in
//!   fixed slots below its frame pointer; its caller's sp, pc and fp are above it.
//! - A compiled frame (pc in an nmethod) is found in the nmethod's pc descriptors, each of
//!   which names a scope chain in the debug information: the inlined methods innermost first,
//!   each with its bytecode index, then the compiled one. C1 and C2 record a descriptor where
//!   the instructions it describes end: at a Java call's return address, and (with
//!   `DebugNonSafepoints`) where a run of one scope's instructions ends. A caller's pc, a
//!   Java call's return address, must have one of its own (which checks the pc read from the
//!   stack). The top frame's pc takes the first descriptor at or after it: a signal's (see
//!   below), or the return address above a stub the signal stopped, whose leaf call into the
//!   stub has none and takes the run it ends. Its caller's frame starts `frame_size` words
//!   above its own.
//! - A stub with a frame (a runtime stub, an adapter) has no Java frame and is stepped over the
//!   same way.
//! - The call stub (a Java call from the VM or native code) holds the `JavaCallWrapper`, whose
//!   anchor is the caller's last Java frame: the walk goes on from there.
//! - The frame of a continuation's entry (`Continuation.enterSpecial`, JDK 21+) lies below a
//!   virtual thread's bottom frame: a walk from the anchor ends there, as JVMTI's stacks of
//!   virtual threads do; one from a signal goes on into the carrier's frames, as
//!   `AsyncGetCallTrace`'s do.
//! - A remounted virtual thread's older frames may still be frozen in its continuation's
//!   stack chunks on the heap: HotSpot thaws a few frames at a time, and the oldest thawed one
//!   returns to the return barrier stub. There the walk reads the chunks' frames (the same
//!   layout as on a stack, but an interpreted frame's frame pointer and slots relative, in
//!   words) and goes on at the continuation's entry frame, which lies just above.
//!
//! Only the walking thread's own stack is walked: from a point where HotSpot keeps it walkable
//! (a JVMTI event callback, a native method, a thread in native code or in the VM when a
//! signal comes), or from a signal's registers while the thread runs Java code. There the top
//! frame may be anywhere in its method, and the caller says whether its frame is set up
//! ([`TopPc`]). A compiled one is taken at the first descriptor at or after the pc too: a
//! signal stops a thread after the instruction that was running, so at a run's end the time
//! was the run's (`AsyncGetCallTrace` looks past the pc and names the next run; against a
//! known truth on H2 that added 0.6–1.3 points to the error of jtap's profiles, see
//! docs/PERFORMANCE.md). Stack reads are checked against the thread's stack bounds; every
//! other read of the VM's memory goes through [`Fetch`], which cannot fault. Anything
//! unexpected ends the walk with a [`Stop`], never a guess. This is the FFI module of the
//! walker: its `unsafe` blocks are the reads of the thread's own stack and `JavaThread`.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::code::{CodeCache, Heap};
use super::fetch::{Fetch, Plain, LOWEST};
use super::ids::{Known, Methods};
use super::layout::{
    BlobKind, CodeStart, DebugInfo, Layout, ACC_NATIVE, INTERPRETER_BCP_SLOT,
    INTERPRETER_LOCALS_SLOT, INTERPRETER_METHOD_SLOT, INTERPRETER_SENDER_SP_SLOT,
};
use super::vthread::{Chunk, VirtualThreads};

/// What a Java frame is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Interpreted,
    /// A compiled method's own frame.
    Compiled,
    /// A method inlined into the compiled frame below it.
    Inlined,
    Native,
}

/// One Java frame: its jmethodID (as an address), bytecode index (-1 in a native method) and
/// kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JavaFrame {
    pub method: usize,
    pub bci: i32,
    pub kind: Kind,
}

/// Where a walk writes its frames, top first.
pub trait Frames {
    /// How many frames fit.
    fn room(&self) -> usize;
    /// Writes frame number `index` (< `room()`; one past the room is not written).
    fn put(&mut self, index: usize, frame: JavaFrame);
}

/// A JVMTI-style frame: jmethodID and location.
impl Frames for [super::Frame] {
    fn room(&self) -> usize {
        self.len()
    }
    fn put(&mut self, index: usize, frame: JavaFrame) {
        // A compiled frame at its method's entry, before the first bytecode (HotSpot's
        // `SynchronizationEntryBCI`, -1: a synchronized method taking its monitor) is at
        // location 0 for JVMTI, as HotSpot's `compiledVFrame::bci` says (`AsyncGetCallTrace`
        // keeps the -1).
        let bci = match frame.kind {
            Kind::Native => frame.bci,
            _ => frame.bci.max(0),
        };
        if let Some(slot) = self.get_mut(index) {
            *slot = (frame.method, i64::from(bci));
        }
    }
}

/// Where a walk starts.
#[derive(Clone, Copy)]
pub enum Start {
    /// The thread's last Java frame, as its `JavaThread` records it.
    Anchor,
    /// A signal's registers while the thread ran Java code; `top` says where in its code
    /// the top frame stopped.
    Interrupted {
        pc: usize,
        sp: usize,
        fp: usize,
        top: TopPc,
    },
}

/// Where in its code the top frame of an interrupted walk stopped.
#[derive(Clone, Copy)]
pub enum TopPc {
    /// Anywhere, where a signal came: the function says whether a compiled method's frame is
    /// set up at a pc (not in its prologue, epilogue or inline cache check).
    Anywhere(fn(usize) -> bool),
    /// At a call's return address, set up: the walk resumes in the caller of the stub a
    /// signal stopped.
    AtReturn,
}

/// Where the walk of an interrupted thread began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Began {
    /// At the signal's registers: the thread ran Java code, its top compiled frame anywhere
    /// between two pcs with debug information.
    Signal,
    /// At the thread's last Java frame: it was in a call (into the VM or native code, or
    /// blocked), its top compiled frame at the call's return address.
    Anchor,
    /// At the return address above a stub the signal stopped ([`TopPc::AtReturn`]): its top
    /// compiled frame at the call into the stub.
    StubReturn,
}

/// Why a walk gave up (the caller then asks JVMTI instead).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// A frame or slot lies outside the thread's stack.
    OffStack,
    /// A pc in no code blob the walker knows (or in a free block).
    UnknownCode,
    /// A stub without a frame size.
    Frameless,
    /// No exact pc descriptor (e.g. a frame being deoptimised).
    NoDebugInfo,
    /// A method without a jmethodID yet (JVMTI creates it).
    NoMethodId,
    /// A value that cannot be what the layout says (a null or misaligned pointer).
    Inconsistent,
    /// More frames than any real stack has.
    TooDeep,
    /// The thread is between states, where its frames may be half-built (or, walked from
    /// its anchor, in Java code).
    NotWalkable,
    /// A read of the VM's memory faulted (a stale or made-up pointer).
    Unreadable,
    /// The interrupted compiled frame is not set up (prologue, epilogue, inline cache check).
    NotSetUp,
    /// A reference the collector has not healed since its last phase change (a stack chunk's
    /// parent under generational ZGC), which may point where its object was before.
    Unhealed,
}

impl Stop {
    /// Every reason, in declaration order (`stop as usize` indexes it).
    pub const ALL: [Stop; 11] = [
        Stop::OffStack,
        Stop::UnknownCode,
        Stop::Frameless,
        Stop::NoDebugInfo,
        Stop::NoMethodId,
        Stop::Inconsistent,
        Stop::TooDeep,
        Stop::NotWalkable,
        Stop::Unreadable,
        Stop::NotSetUp,
        Stop::Unhealed,
    ];
    /// How many reasons there are.
    pub const COUNT: usize = Stop::ALL.len();

    /// The reason in a word or two, for logs.
    pub fn name(self) -> &'static str {
        match self {
            Stop::OffStack => "off the stack",
            Stop::UnknownCode => "unknown code",
            Stop::Frameless => "frameless stub",
            Stop::NoDebugInfo => "no debug info at pc",
            Stop::NoMethodId => "no jmethodID yet",
            Stop::Inconsistent => "inconsistent",
            Stop::TooDeep => "too deep",
            Stop::NotWalkable => "thread not walkable",
            Stop::Unreadable => "unreadable memory",
            Stop::NotSetUp => "frame not set up",
            Stop::Unhealed => "reference not healed by the collector yet",
        }
    }
}

/// Most physical frames stepped through in one walk.
const MAX_STEPS: usize = 4096;
/// Most stack chunks of one continuation read.
const MAX_CHUNKS: usize = 64;
/// Most words between the oldest thawed frame's caller's sp and the continuation's entry
/// (that frame's stack arguments and their padding).
const MAX_ENTRY_GAP: usize = 8;
/// Where a `ContinuationEntry`'s continuation (`_cont`) may be, in words: after `_parent`,
/// itself after a platform-dependent part in some builds.
const ENTRY_CONTINUATION_SLOTS: [isize; 2] = [1, 2];

/// One physical frame's registers.
#[derive(Clone, Copy)]
struct Registers {
    sp: usize,
    /// The caller's sp before the callee's adapter extended it (HotSpot's `unextended_sp`).
    unextended_sp: usize,
    fp: usize,
    pc: usize,
}

/// The walk of one thread: its stack bounds, state and the VM's layout.
pub struct Walk<'a> {
    layout: &'a Layout,
    fetch: &'a Fetch,
    /// Methods met by earlier walks.
    methods: &'a Methods,
    /// Where virtual threads' frozen frames are (JDK 21+).
    threads: Option<&'a VirtualThreads>,
    stack_low: usize,
    stack_high: usize,
    state: i32,
    /// The code cache's heaps, interpreter and call stub, read when the walker was resolved.
    code: &'a CodeCache,
    /// The last word [`Walk::fetch`] read, and its address.
    last_word: Cell<(usize, usize)>,
    /// The continuations' return barrier (0: none), read at the first frame it could be.
    return_barrier: Cell<Option<usize>>,
    /// Whether the walk read frames frozen in a continuation's stack chunks.
    read_frozen: Cell<bool>,
    /// Whether the interrupted compiled frame's pc is where a pc descriptor is recorded.
    top_at_descriptor: Cell<bool>,
}

impl<'a> Walk<'a> {
    /// The walk of `thread`, a `JavaThread*`.
    ///
    /// # Safety
    /// `thread` is the calling thread's own `JavaThread`, and `layout` the running VM's.
    pub unsafe fn new(
        layout: &'a Layout,
        fetch: &'a Fetch,
        methods: &'a Methods,
        code: &'a CodeCache,
        threads: Option<&'a VirtualThreads>,
        thread: usize,
    ) -> Result<Self, Stop> {
        // SAFETY: the caller's contract.
        let stack = unsafe { stack_of(layout, thread) }.ok_or(Stop::Inconsistent)?;
        // SAFETY: the caller's JavaThread is live; the state is its field.
        let state = unsafe { read::<i32>(thread + layout.thread_state) };
        Ok(Walk {
            layout,
            fetch,
            methods,
            threads,
            stack_low: stack.start,
            stack_high: stack.end,
            state,
            code,
            last_word: Cell::new((0, 0)),
            return_barrier: Cell::new(None),
            read_frozen: Cell::new(false),
            top_at_descriptor: Cell::new(false),
        })
    }

    /// Whether the thread runs Java code (a signal's registers are then where its walk starts).
    pub fn in_java(&self) -> bool {
        self.state == self.layout.in_java
    }

    /// Whether the walk so far read frames frozen in a continuation's stack chunks (which
    /// `AsyncGetCallTrace` steps over).
    pub fn read_frozen(&self) -> bool {
        self.read_frozen.get()
    }

    /// Whether the walk's top compiled frame, taken at an interrupted walk's pc, is at a pc
    /// descriptor (where `AsyncGetCallTrace` takes the next one).
    pub fn top_at_descriptor(&self) -> bool {
        self.top_at_descriptor.get()
    }

    /// Writes up to `out.room()` frames of `thread`'s Java stack, top first, from `start`;
    /// the count written. A thread interrupted outside Java code is walked from its anchor.
    ///
    /// # Safety
    /// As for [`Walk::new`], on the same thread; from [`Start::Anchor`] only where its stack
    /// is walkable (the thread is not running Java code).
    pub unsafe fn frames<F: Frames + ?Sized>(
        &self,
        thread: usize,
        start: Start,
        out: &mut F,
        memo: &mut Memo,
    ) -> Result<usize, Stop> {
        let layout = self.layout;
        if layout.nmethod_compile_id.is_none() {
            // Entries of earlier walks cannot be checked without the compile id.
            *memo = Memo::new();
        }
        // JVMTI's stacks of a virtual thread end at its continuation's entry;
        // AsyncGetCallTrace's go on into its carrier's frames.
        let ends_at_continuation = matches!(start, Start::Anchor);
        let (mut at, mut interrupted) = match start {
            Start::Interrupted { pc, sp, fp, top } if self.state == layout.in_java => {
                if !self.on_stack(sp) {
                    return Err(Stop::OffStack);
                }
                let at = Registers {
                    sp,
                    unextended_sp: sp,
                    fp,
                    pc,
                };
                (at, Some(top))
            }
            _ if !layout.walkable_states.contains(&self.state) => return Err(Stop::NotWalkable),
            // SAFETY: the caller's own JavaThread; its anchor is a field.
            _ => match unsafe { self.anchored(thread + layout.thread_anchor)? } {
                Some(at) => (at, None),
                None => return Ok(0),
            },
        };
        let (interpreter, call_stub_return) = (&self.code.interpreter, self.code.call_stub_return);
        let continuation_return = match layout.continuation_return {
            Some(variable) => Some(self.fetch::<usize>(variable)?).filter(|&pc| pc != 0),
            None => None,
        };
        let mut count = 0;
        for _ in 0..MAX_STEPS {
            if count == out.room() {
                return Ok(count);
            }
            let top = interrupted.take();
            if interpreter.contains(&at.pc) {
                if top.is_some() && at.fp < at.sp {
                    return Err(Stop::Inconsistent);
                }
                let method = self.stack_word(at.fp, INTERPRETER_METHOD_SLOT)?;
                let bcp = self.stack_word(at.fp, INTERPRETER_BCP_SLOT)?;
                out.put(count, self.interpreted(method, bcp)?);
                count += 1;
                let sender = Registers {
                    sp: at.fp + 2 * WORD,
                    unextended_sp: self.stack_word(at.fp, INTERPRETER_SENDER_SP_SLOT)?,
                    fp: self.stack_word(at.fp, 0)?,
                    pc: self.stack_word(at.fp, 1)?,
                };
                if sender.sp <= at.sp {
                    return Err(Stop::Inconsistent);
                }
                at = sender;
                continue;
            }
            if at.pc == call_stub_return {
                // A Java call from the VM: go on from the caller's anchor, kept in the wrapper.
                let wrapper = self.stack_word(at.fp, layout.entry_wrapper_slot)?;
                if !self.on_stack(wrapper) {
                    return Err(Stop::OffStack);
                }
                // SAFETY: the JavaCallWrapper lives on this thread's stack (checked).
                match unsafe { self.anchored(wrapper + layout.call_wrapper_anchor)? } {
                    Some(caller) if caller.sp > at.sp => at = caller,
                    Some(_) => return Err(Stop::Inconsistent),
                    None => return Ok(count),
                }
                continue;
            }
            let known = match top {
                None => memo.find(at.pc, |entry| self.still_compiled(entry)),
                Some(_) => None,
            };
            let frame_words = match known {
                Some(known) => {
                    let copied = known.count.min(out.room().saturating_sub(count));
                    for (i, &frame) in known.frames.iter().take(copied).enumerate() {
                        out.put(count + i, frame);
                    }
                    count += copied;
                    known.frame_words
                }
                None => {
                    if top.is_none() && self.is_return_barrier(at.pc) {
                        let frozen =
                            self.frozen(thread, &at, ends_at_continuation, out, &mut count)?;
                        match frozen {
                            Some(entry) => at = entry,
                            None => return Ok(count),
                        }
                        continue;
                    }
                    let blob = self.find_blob(at.pc)?;
                    if let Some(top) = top {
                        if !blob.nmethod {
                            // A stub's frame is left to the caller (the sampler's recovery).
                            return Err(Stop::UnknownCode);
                        }
                        if matches!(top, TopPc::Anywhere(complete) if !complete(at.pc)) {
                            return Err(Stop::NotSetUp);
                        }
                    }
                    if ends_at_continuation
                        && blob.nmethod
                        && self.enters_continuation(&blob, continuation_return)?
                    {
                        // A virtual thread's stack ends here (what follows is its carrier's).
                        return Ok(count);
                    }
                    if blob.nmethod {
                        count += match top {
                            Some(_) => self.compiled(&blob, at.pc, true, out, count, None)?,
                            None => {
                                let entry = memo.claim();
                                entry.frame_words = blob.frame_words;
                                let memo = Some(entry);
                                self.compiled(&blob, at.pc, false, out, count, memo)?
                            }
                        };
                    }
                    blob.frame_words
                }
            };
            if frame_words == 0 {
                return Err(Stop::Frameless);
            }
            let sender_sp = at.unextended_sp.wrapping_add(frame_words * WORD);
            if sender_sp <= at.sp || !self.on_stack(sender_sp - 2 * WORD) {
                return Err(Stop::OffStack);
            }
            at = Registers {
                sp: sender_sp,
                unextended_sp: sender_sp,
                pc: self.stack_word(sender_sp, -1)?,
                fp: self.stack_word(sender_sp, -2)?,
            };
        }
        Err(Stop::TooDeep)
    }

    /// Whether `pc`, a return address, is the return barrier of continuations.
    fn is_return_barrier(&self, pc: usize) -> bool {
        let barrier = self.return_barrier.get().unwrap_or_else(|| {
            let barrier = self
                .threads
                .and_then(VirtualThreads::return_barrier)
                .and_then(|variable| self.fetch::<usize>(variable).ok())
                .unwrap_or(0);
            self.return_barrier.set(Some(barrier));
            barrier
        });
        barrier == pc && pc != 0
    }

    /// Writes the frames the mounted virtual thread's continuation keeps frozen in its stack
    /// chunks, newest chunk first, from `out[*count]` on (`at` returns to the return barrier).
    /// Returns the registers of the continuation's entry frame (`Continuation.enterSpecial`),
    /// where the walk goes on, or None where the stack ends: at the entry (a walk from the
    /// anchor), or with `out` full.
    fn frozen<F: Frames + ?Sized>(
        &self,
        thread: usize,
        at: &Registers,
        ends_at_continuation: bool,
        out: &mut F,
        count: &mut usize,
    ) -> Result<Option<Registers>, Stop> {
        let threads = self.threads.ok_or(Stop::Frameless)?;
        self.read_frozen.set(true);
        let (continuation, mut chunk) = threads
            .continuation(self.fetch, thread)
            .ok_or(Stop::Unreadable)?;
        for _ in 0..MAX_CHUNKS {
            if chunk == 0 {
                break;
            }
            let frames = threads.chunk(self.fetch, chunk).ok_or(Stop::Inconsistent)?;
            if !self.chunk_frames(&frames, out, count)? {
                return Ok(None);
            }
            chunk = frames.parent.ok_or(Stop::Unhealed)?;
        }
        if chunk != 0 {
            return Err(Stop::TooDeep);
        }
        let Some(entry_pc) = self.layout.continuation_return else {
            return Ok(None);
        };
        if ends_at_continuation {
            return Ok(None);
        }
        let entry = self.continuation_entry(thread, at.sp, |entered| {
            threads.same_object(entered, continuation)
        })?;
        Ok(Some(Registers {
            sp: entry,
            unextended_sp: entry,
            fp: at.fp,
            pc: self.fetch::<usize>(entry_pc)?,
        }))
    }

    /// Where the continuation's entry lies: a `ContinuationEntry` at the entry frame's sp,
    /// the oldest thawed frame's caller's sp `sender_sp` (or, if that frame has stack
    /// arguments, above them). The VM's tables give the innermost entry since JDK 25; before,
    /// one at `sender_sp` whose continuation is `ours` is taken (HotSpot 21 puts its
    /// `_cont` one or two words in, behind a platform-dependent part).
    fn continuation_entry(
        &self,
        thread: usize,
        sender_sp: usize,
        ours: impl Fn(usize) -> bool,
    ) -> Result<usize, Stop> {
        let entry = match self.layout.thread_continuation_entry {
            // SAFETY: the caller's own JavaThread; the entry is a field.
            Some(offset) => unsafe { read::<usize>(thread + offset) },
            None => {
                let holds_ours = |slot| self.stack_word(sender_sp, slot).is_ok_and(&ours);
                if !ENTRY_CONTINUATION_SLOTS.into_iter().any(holds_ours) {
                    return Err(Stop::Inconsistent);
                }
                sender_sp
            }
        };
        if entry < sender_sp
            || entry > sender_sp.saturating_add(MAX_ENTRY_GAP * WORD)
            || !self.on_stack(entry)
        {
            return Err(Stop::Inconsistent);
        }
        Ok(entry)
    }

    /// Writes the frames of stack chunk `chunk`, top first, from `out[*count]` on, as
    /// HotSpot's `StackChunkFrameStream` steps through them; false if `out` filled up.
    fn chunk_frames<F: Frames + ?Sized>(
        &self,
        chunk: &Chunk,
        out: &mut F,
        count: &mut usize,
    ) -> Result<bool, Stop> {
        // Frame slots lie inside the chunk's stack, or in the two words of the top frame's
        // return address and frame pointer just below it.
        let read = |address: usize| -> Result<usize, Stop> {
            if address < chunk.start.saturating_sub(2 * WORD) || address >= chunk.end {
                return Err(Stop::Inconsistent);
            }
            self.fetch::<usize>(address)
        };
        // An interpreted frame's frame pointer and slots hold distances in words.
        let relative = |base: usize, words: usize| {
            base.wrapping_add_signed((words as isize).wrapping_mul(WORD as isize))
        };
        let (mut sp, mut unextended_sp) = (chunk.sp, chunk.sp);
        for _ in 0..MAX_STEPS {
            if sp >= chunk.end {
                return Ok(true);
            }
            if *count == out.room() {
                return Ok(false);
            }
            let pc = read(sp - WORD)?;
            let next = if self.code.interpreter.contains(&pc) {
                let link = sp - 2 * WORD;
                let fp = relative(link, read(link)?);
                let slot = |index: isize| fp.wrapping_add_signed(index * WORD as isize);
                let method = read(slot(INTERPRETER_METHOD_SLOT))?;
                let bcp = read(slot(INTERPRETER_BCP_SLOT))?;
                out.put(*count, self.interpreted(method, bcp)?);
                *count += 1;
                let locals = relative(fp, read(slot(INTERPRETER_LOCALS_SLOT))?);
                if locals.saturating_add(WORD) >= chunk.end {
                    return Ok(true);
                }
                unextended_sp = relative(fp, read(slot(INTERPRETER_SENDER_SP_SLOT))?);
                fp.wrapping_add(2 * WORD)
            } else {
                let blob = self.find_blob(pc)?;
                if !blob.nmethod || blob.frame_words == 0 {
                    // A stub frozen on top (a preempted thread's) is not walked.
                    return Err(Stop::Frameless);
                }
                *count += self.compiled(&blob, pc, false, out, *count, None)?;
                let next = unextended_sp.wrapping_add(blob.frame_words * WORD);
                if next.saturating_add(2 * WORD) >= chunk.end {
                    return Ok(true);
                }
                unextended_sp = next;
                next
            };
            if next <= sp {
                return Err(Stop::Inconsistent);
            }
            sp = next;
        }
        Err(Stop::TooDeep)
    }

    /// Whether `blob` is the entry of continuations (`Continuation.enterSpecial`, a native
    /// method's nmethod), the one holding `continuation_return`. It has several return
    /// addresses (a first mount and a thaw return to different ones), hence the blob.
    fn enters_continuation(
        &self,
        blob: &Blob,
        continuation_return: Option<usize>,
    ) -> Result<bool, Stop> {
        let Some(return_pc) = continuation_return else {
            return Ok(false);
        };
        let method = self.code::<usize>(&blob.heap, blob.address + self.layout.nmethod_method)?;
        Ok(plausible(method)
            && self.is_native(method)?
            && self
                .find_blob(return_pc)
                .is_ok_and(|entry| entry.address == blob.address))
    }

    /// The last Java frame a frame anchor records, or None when it records none.
    unsafe fn anchored(&self, anchor: usize) -> Result<Option<Registers>, Stop> {
        let layout = self.layout;
        // SAFETY: the anchor is a field of this thread's JavaThread or of a JavaCallWrapper on
        // its stack (checked by the caller).
        let (sp, pc, fp) = unsafe {
            (
                read::<usize>(anchor + layout.anchor_sp),
                read::<usize>(anchor + layout.anchor_pc),
                read::<usize>(anchor + layout.anchor_fp),
            )
        };
        if sp == 0 {
            return Ok(None);
        }
        if !self.on_stack(sp) {
            return Err(Stop::OffStack);
        }
        // Without a recorded pc, the frame's return address is the word below its sp.
        let pc = if pc == 0 {
            self.stack_word(sp, -1)?
        } else {
            pc
        };
        Ok(Some(Registers {
            sp,
            unextended_sp: sp,
            fp,
            pc,
        }))
    }

    fn on_stack(&self, address: usize) -> bool {
        address.is_multiple_of(WORD)
            && address >= self.stack_low
            && address
                .checked_add(WORD)
                .is_some_and(|end| end <= self.stack_high)
    }

    /// The word `slot` words from `base`, if it lies on this thread's stack.
    fn stack_word(&self, base: usize, slot: isize) -> Result<usize, Stop> {
        let address = base.wrapping_add_signed(slot * WORD as isize);
        if !self.on_stack(address) {
            return Err(Stop::OffStack);
        }
        // SAFETY: checked to lie on this thread's stack, which is mapped while it runs.
        Ok(unsafe { read::<usize>(address) })
    }

    /// A value of the VM's memory, read without faulting. The last word read is kept: debug
    /// streams outside the code heap (JDK 25's) are read a byte at a time.
    fn fetch<T: Plain>(&self, address: usize) -> Result<T, Stop> {
        let word = address & !(WORD - 1);
        if address - word + std::mem::size_of::<T>() > WORD {
            return self.fetch.value(address).ok_or(Stop::Unreadable);
        }
        let value = match self.last_word.get() {
            (at, value) if at == word && at != 0 => value,
            _ => {
                let value = self.fetch.word(word).ok_or(Stop::Unreadable)?;
                self.last_word.set((word, value));
                value
            }
        };
        Ok(super::fetch::cut(value, address - word))
    }

    /// The frame of an interpreted method at bytecode pointer `bcp` (0 in a native method).
    fn interpreted(&self, method: usize, bcp: usize) -> Result<JavaFrame, Stop> {
        let known = self.known(method, Trust::Verify)?;
        if bcp == 0 || known.native {
            return Ok(JavaFrame {
                method: known.id,
                bci: -1,
                kind: Kind::Native,
            });
        }
        match bcp.checked_sub(known.code) {
            Some(bci) if bci < usize::from(known.code_size).max(1) => Ok(JavaFrame {
                method: known.id,
                bci: bci as i32,
                kind: Kind::Interpreted,
            }),
            _ => Err(Stop::Inconsistent),
        }
    }

    fn is_native(&self, method: usize) -> Result<bool, Stop> {
        Ok(self.fetch::<u16>(method.wrapping_add(self.layout.method_flags))? & ACC_NATIVE != 0)
    }

    /// The jmethodID of `method` (see [`Walk::known`]).
    fn method_id(&self, method: usize, trust: Trust) -> Result<usize, Stop> {
        self.known(method, trust).map(|known| known.id)
    }

    /// What the walk needs of `method`: remembered from an earlier walk if its jmethodID's
    /// slot still holds it, else read from its class's jmethodID cache at its id number (the
    /// slot must point back at it where `trust` says so) and from its `ConstMethod`.
    fn known(&self, method: usize, trust: Trust) -> Result<Known, Stop> {
        if !plausible(method) {
            return Err(Stop::Inconsistent);
        }
        if let Some(known) = self.methods.recall(method) {
            if self.fetch::<usize>(known.id) == Ok(method) {
                return Ok(known);
            }
        }
        let layout = self.layout;
        let pointer = |address: usize| -> Result<usize, Stop> {
            let value = self.fetch::<usize>(address)?;
            if plausible(value) {
                Ok(value)
            } else {
                Err(Stop::Inconsistent)
            }
        };
        let const_method = pointer(method.wrapping_add(layout.method_const))?;
        let pool = pointer(const_method.wrapping_add(layout.const_method_pool))?;
        let holder = pointer(pool.wrapping_add(layout.pool_holder))?;
        let ids = self.fetch::<usize>(holder.wrapping_add(layout.jmethod_ids))?;
        if ids == 0 {
            return Err(Stop::NoMethodId);
        }
        if !plausible(ids) {
            return Err(Stop::Inconsistent);
        }
        let idnum =
            usize::from(self.fetch::<u16>(const_method.wrapping_add(layout.const_method_idnum))?);
        if idnum + 1 > self.fetch::<usize>(ids)? {
            return Err(Stop::NoMethodId);
        }
        let id = self.fetch::<usize>(ids.wrapping_add((idnum + 1) * WORD))?;
        if id == 0 {
            return Err(Stop::NoMethodId);
        }
        if !plausible(id) || (trust == Trust::Verify && self.fetch::<usize>(id)? != method) {
            return Err(Stop::Inconsistent);
        }
        let known = Known {
            id,
            code: const_method.wrapping_add(layout.const_method_size),
            code_size: self
                .fetch::<u16>(const_method.wrapping_add(layout.const_method_code_size))?,
            native: self.is_native(method)?,
        };
        self.methods.remember(method, known);
        Ok(known)
    }

    /// A value inside code heap `heap`: read directly where the heap's committed memory holds
    /// it, else without faulting.
    fn code<T: Plain>(&self, heap: &Heap, address: usize) -> Result<T, Stop> {
        if heap.holds(address, std::mem::size_of::<T>()) {
            // SAFETY: inside the heap's committed memory, which stays mapped and readable for
            // the life of the VM; `T` is plain data, valid for any bytes.
            Ok(unsafe { read::<T>(address) })
        } else {
            self.fetch(address)
        }
    }

    /// The code blob holding `pc`, found in the code heaps' segment maps as HotSpot's
    /// `CodeHeap::find_blob` does.
    fn find_blob(&self, pc: usize) -> Result<Blob, Stop> {
        let layout = self.layout;
        let heap = match self.code.holding(pc) {
            Some(heap) => heap,
            None if self.code.refresh(layout, self.fetch) => {
                self.code.holding(pc).ok_or(Stop::UnknownCode)?
            }
            None => return Err(Stop::Unreadable),
        };
        let heap = &heap;
        let segmap = Heap {
            low: heap.segmap,
            high: heap.segmap_high,
            ..*heap
        };
        let mut segment = (pc - heap.low) >> heap.shift;
        let mut tag = self.code::<u8>(&segmap, heap.segmap + segment)?;
        if tag == 0xFF {
            return Err(Stop::UnknownCode);
        }
        while tag > 0 {
            segment = segment
                .checked_sub(usize::from(tag))
                .ok_or(Stop::Inconsistent)?;
            tag = self.code::<u8>(&segmap, heap.segmap + segment)?;
        }
        let block = heap.low + (segment << heap.shift);
        if self.code::<u8>(heap, block + layout.block_used)? == 0 {
            return Err(Stop::UnknownCode);
        }
        let blob = block + layout.block_size;
        let nmethod = match layout.blob_kind {
            BlobKind::Field { offset, nmethod } => self.code::<u8>(heap, blob + offset)? == nmethod,
            BlobKind::Name(offset) => {
                let name = self.code::<usize>(heap, blob + offset)?;
                name >= LOWEST && self.names_nmethod(name)?
            }
        };
        let frame_words = self
            .code::<i32>(heap, blob + layout.blob_frame_size)?
            .clamp(0, 1 << 20);
        Ok(Blob {
            address: blob,
            nmethod,
            frame_words: frame_words as usize,
            heap: *heap,
        })
    }

    /// Whether the nmethod `entry` was read from is still in the code cache: the same method
    /// and compile id at its address. While it is, its frames at the entry's pc stay what they
    /// were; once freed, its memory may hold another nmethod, or anything.
    fn still_compiled(&self, entry: &Remembered) -> bool {
        let (nm, method, compile_id) = entry.nmethod;
        let Some(offset) = self.layout.nmethod_compile_id else {
            return true;
        };
        // An nmethod lies in a code heap, whose memory is read directly.
        let Some(heap) = self.code.holding(nm) else {
            return false;
        };
        self.code::<usize>(&heap, nm + self.layout.nmethod_method) == Ok(method)
            && self.code::<i32>(&heap, nm + offset) == Ok(compile_id)
    }

    /// Whether `name`, a code blob's name, is an nmethod's: "nmethod" or "native nmethod".
    /// Every blob's name is a C string constant of libjvm: those seen are remembered, the two
    /// of nmethods and up to [`OTHER_NAMES`] others (a runtime stub's, which an allocation's
    /// walk meets first each time; reading its name byte by byte was a seventh of the walk).
    fn names_nmethod(&self, name: usize) -> Result<bool, Stop> {
        static NMETHOD_NAMES: [AtomicUsize; 2] = [const { AtomicUsize::new(0) }; 2];
        static OTHERS: [AtomicUsize; OTHER_NAMES] = [const { AtomicUsize::new(0) }; OTHER_NAMES];
        let known = |names: &[AtomicUsize]| names.iter().any(|n| n.load(Ordering::Relaxed) == name);
        if known(&NMETHOD_NAMES) {
            return Ok(true);
        }
        if known(&OTHERS) {
            return Ok(false);
        }
        let nmethod = self.name_ends_with_nmethod(name)?;
        let names: &[AtomicUsize] = if nmethod { &NMETHOD_NAMES } else { &OTHERS };
        if let Some(free) = names.iter().find(|n| n.load(Ordering::Relaxed) == 0) {
            // A race only writes the same constant twice, or loses one (seen again later).
            free.store(name, Ordering::Relaxed);
        }
        Ok(nmethod)
    }

    /// Whether the C string at `name` (a code blob's name) ends with "nmethod": "nmethod" or
    /// "native nmethod".
    fn name_ends_with_nmethod(&self, name: usize) -> Result<bool, Stop> {
        const SUFFIX: &[u8] = b"nmethod";
        let mut tail = [0u8; SUFFIX.len()];
        for length in 0..MAX_NAME {
            let byte = self.fetch::<u8>(name.wrapping_add(length))?;
            if byte == 0 {
                return Ok(length >= SUFFIX.len() && tail == *SUFFIX);
            }
            tail.copy_within(1.., 0);
            tail[SUFFIX.len() - 1] = byte;
        }
        Ok(false)
    }

    /// Writes the frames of compiled `blob` at `pc` from `out[first]` on: its scopes,
    /// innermost first (the method itself, native, for a native wrapper); the count written.
    /// A scope chain read whole goes to `remember` too, if it fits.
    fn compiled<F: Frames + ?Sized>(
        &self,
        blob: &Blob,
        pc: usize,
        top: bool,
        out: &mut F,
        first: usize,
        mut remember: Option<&mut Remembered>,
    ) -> Result<usize, Stop> {
        let layout = self.layout;
        let nm = blob.address;
        let heap = &blob.heap;
        let room = out.room() - first;
        let int = |field: usize| -> Result<usize, Stop> {
            Ok(self.code::<i32>(heap, nm + field)?.max(0) as usize)
        };
        let method = self.code::<usize>(heap, nm + layout.nmethod_method)?;
        if let (Some(entry), Some(offset)) = (remember.as_deref_mut(), layout.nmethod_compile_id) {
            entry.nmethod = (nm, method, self.code::<i32>(heap, nm + offset)?);
        }
        if method != 0 && self.is_native(method)? {
            if room == 0 {
                return Ok(0);
            }
            let frame = JavaFrame {
                method: self.method_id(method, Trust::Compiled)?,
                bci: -1,
                kind: Kind::Native,
            };
            out.put(first, frame);
            return Ok(1);
        }
        let code = match layout.blob_code {
            CodeStart::Address(field) => self.code::<usize>(heap, nm + field)?,
            CodeStart::Offset(field) => nm + int(field)?,
        };
        let (pcs, pcs_end, scopes, metadata) = match layout.debug {
            DebugInfo::InBlob {
                scopes_data,
                pcs,
                pcs_end,
                metadata,
            } => {
                let scopes = self.code::<usize>(heap, nm + scopes_data)?;
                (
                    nm + int(pcs)?,
                    nm + int(pcs_end)?,
                    scopes,
                    (nm + int(metadata)?)..scopes,
                )
            }
            DebugInfo::Apart {
                immutable_data,
                pcs,
                scopes,
                mutable_data,
                relocation_size,
                mutable_data_size,
            } => {
                let immutable = self.code::<usize>(heap, nm + immutable_data)?;
                let mutable = self.code::<usize>(heap, nm + mutable_data)?;
                let relocations = int(relocation_size)?;
                let mutable_size = int(mutable_data_size)?;
                (
                    immutable + int(pcs)?,
                    immutable + int(scopes)?,
                    immutable + int(scopes)?,
                    (mutable + relocations)..(mutable + mutable_size),
                )
            }
        };
        let offset = pc.checked_sub(code).ok_or(Stop::NoDebugInfo)?;
        let (decode, exact) = self
            .find_scope(heap, pcs, pcs_end, offset)?
            .ok_or(Stop::NoDebugInfo)?;
        if top {
            self.top_at_descriptor.set(exact);
        } else if !exact {
            // A caller's pc, read from the stack, is a Java call's return address, which has
            // a descriptor of its own: without one the pc is not what the walk took it for.
            return Err(Stop::NoDebugInfo);
        }
        let mut decode = decode as usize;
        let mut count = 0;
        let mut stream = StreamWord::default();
        while count < room {
            let mut at = scopes + decode;
            let sender = self.compressed(heap, &mut at, &mut stream)?;
            let index = self.compressed(heap, &mut at, &mut stream)? as usize;
            let bci = i64::from(self.compressed(heap, &mut at, &mut stream)?) - 1;
            let slot = metadata.start + index.wrapping_sub(1) * WORD;
            if index == 0 || slot + WORD > metadata.end {
                return Err(Stop::Inconsistent);
            }
            let method = self.code::<usize>(heap, slot)?;
            let frame = JavaFrame {
                method: self.method_id(method, Trust::Compiled)?,
                bci: bci.clamp(-1, i64::from(u16::MAX)) as i32,
                kind: if sender == 0 {
                    Kind::Compiled
                } else {
                    Kind::Inlined
                },
            };
            out.put(first + count, frame);
            if let Some(entry) = remember.as_deref_mut() {
                if count < MEMO_FRAMES {
                    entry.frames[count] = frame;
                }
            }
            count += 1;
            if sender == 0 {
                if let Some(entry) = remember.filter(|_| count <= MEMO_FRAMES) {
                    entry.count = count;
                    entry.pc = pc;
                }
                break;
            }
            decode = sender as usize;
        }
        Ok(count)
    }

    /// The scope decode offset of the first pc descriptor at or after code `offset` in the
    /// sorted table `pcs..end` (0 is "no scope"), and whether it is at `offset` itself.
    fn find_scope(
        &self,
        heap: &Heap,
        pcs: usize,
        end: usize,
        offset: usize,
    ) -> Result<Option<(u32, bool)>, Stop> {
        if end <= pcs {
            return Ok(None);
        }
        let target = offset as i64;
        // The first descriptor at or after `target`.
        let (mut low, mut high) = (0, (end - pcs) / PC_DESC);
        while low < high {
            let mid = (low + high) / 2;
            if i64::from(self.code::<i32>(heap, pcs + mid * PC_DESC)?) < target {
                low = mid + 1;
            } else {
                high = mid;
            }
        }
        if low * PC_DESC >= end - pcs {
            return Ok(None);
        }
        let at = pcs + low * PC_DESC;
        let exact = i64::from(self.code::<i32>(heap, at)?) == target;
        let decode = self.code::<i32>(heap, at + 4)?;
        Ok((decode > 0).then_some((decode as u32, exact)))
    }

    /// One compressed `int` of a debug stream at `*at` (HotSpot's `CompressedReadStream`),
    /// its bytes read a word at a time through `stream`.
    fn compressed(
        &self,
        heap: &Heap,
        at: &mut usize,
        stream: &mut StreamWord,
    ) -> Result<u32, Stop> {
        // Pack200's UNSIGNED5 coding: bytes below `low` end a number, each other byte adds 6
        // bits; JDK 20+ excludes the zero byte (every byte is one more).
        let excluded = u32::from(self.layout.unsigned5);
        let low = 256 - 64 - excluded;
        let mut sum = 0u32;
        for i in 0..5 {
            let b = u32::from(stream.byte(self, heap, *at)?).wrapping_sub(excluded);
            *at += 1;
            sum = sum.wrapping_add(b << (6 * i));
            if b < low {
                break;
            }
        }
        Ok(sum)
    }
}

/// The aligned word of a debug stream read last: a scope's three numbers lie in one or two
/// words, read once each (without faulting, where the stream lies outside the code heap, as
/// JDK 23+'s immutable nmethod data does) rather than once a byte. An aligned word never
/// crosses a page, so it is readable wherever its bytes are.
#[derive(Default)]
struct StreamWord {
    /// The word's address; 0 before the first read.
    address: usize,
    bytes: [u8; WORD],
}

impl StreamWord {
    fn byte(&mut self, walk: &Walk<'_>, heap: &Heap, at: usize) -> Result<u8, Stop> {
        let aligned = at & !(WORD - 1);
        if aligned != self.address || aligned == 0 {
            self.bytes = walk.code::<usize>(heap, aligned)?.to_ne_bytes();
            self.address = aligned;
        }
        self.bytes
            .get(at - aligned)
            .copied()
            .ok_or(Stop::Inconsistent)
    }
}

/// A code blob holding a pc.
struct Blob {
    address: usize,
    nmethod: bool,
    frame_words: usize,
    /// The code heap holding it.
    heap: Heap,
}

const WORD: usize = std::mem::size_of::<usize>();
/// Size of a `PcDesc`: `int pc_offset, scope_decode_offset, obj_decode_offset, flags`.
const PC_DESC: usize = 16;

/// Where a `Method*` comes from, and so whether its jmethodID is checked to point back at it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Trust {
    /// A live nmethod's own metadata: the method is what the nmethod says.
    Compiled,
    /// A stack slot, which an interrupted frame may not have written yet.
    Verify,
}

/// Names of code blobs other than nmethods remembered by [`Walk::names_nmethod`].
const OTHER_NAMES: usize = 16;

/// Most frames a [`Memo`] entry holds: a compiled method and what it inlined at one pc.
const MEMO_FRAMES: usize = 8;
/// Return addresses a walk remembers.
const MEMO_ENTRIES: usize = 8;

/// The frames walks decoded at compiled return addresses, by pc. Recursive code (a tree
/// visitor, a parser, javac's attribution) returns to the same few pcs at many depths, and a
/// thread's walks one after the other (its allocation samples) mostly to the pcs of the walk
/// before; their code blob, scopes and jmethodIDs are read once and copied after that, while
/// the nmethod they were read from is still there ([`Walk::still_compiled`]). About 1.2 KiB,
/// never allocated: on the stack of a walk from a signal, kept by the thread for its walks
/// from callbacks.
pub struct Memo {
    entries: [Remembered; MEMO_ENTRIES],
    /// The entry the next new pc takes (oldest first).
    next: usize,
}

/// The frames of one return address into an nmethod, and its frame size; `pc` is 0 until
/// they were all read.
#[derive(Clone, Copy)]
struct Remembered {
    pc: usize,
    /// The nmethod they were read from: its address, `Method*` and compile id.
    nmethod: (usize, usize, i32),
    frame_words: usize,
    count: usize,
    frames: [JavaFrame; MEMO_FRAMES],
}

const NO_FRAME: JavaFrame = JavaFrame {
    method: 0,
    bci: 0,
    kind: Kind::Compiled,
};

impl Memo {
    /// No pc remembered.
    pub const fn new() -> Memo {
        Memo {
            entries: [Remembered {
                pc: 0,
                nmethod: (0, 0, 0),
                frame_words: 0,
                count: 0,
                frames: [NO_FRAME; MEMO_FRAMES],
            }; MEMO_ENTRIES],
            next: 0,
        }
    }

    /// The entry of `pc` if `valid` says it still holds; a stale one is forgotten.
    fn find(&mut self, pc: usize, valid: impl Fn(&Remembered) -> bool) -> Option<Remembered> {
        let entry = self.entries.iter_mut().find(|e| e.pc == pc && pc != 0)?;
        if valid(entry) {
            return Some(*entry);
        }
        entry.pc = 0;
        None
    }

    /// An entry to fill for a new pc, cleared.
    fn claim(&mut self) -> &mut Remembered {
        let entry = &mut self.entries[self.next % MEMO_ENTRIES];
        self.next = (self.next + 1) % MEMO_ENTRIES;
        entry.pc = 0;
        entry.count = 0;
        entry
    }
}

/// Longest code blob name read.
const MAX_NAME: usize = 64;

/// The stack of `thread`, a `JavaThread*`, from the bounds it records (two reads of its own
/// fields: async-signal-safe), or None if they make no sense.
///
/// # Safety
/// `thread` is the calling thread's own `JavaThread`, and `layout` the running VM's.
pub unsafe fn stack_of(layout: &Layout, thread: usize) -> Option<std::ops::Range<usize>> {
    // SAFETY: the caller's JavaThread is live; the offsets are its fields.
    let (high, size) = unsafe {
        (
            read::<usize>(thread + layout.thread_stack_base),
            read::<usize>(thread + layout.thread_stack_size),
        )
    };
    (high >= LOWEST && size != 0 && size <= high).then(|| high - size..high)
}

/// Whether `pointer` can be a pointer to a VM structure: aligned, and not in the low pages.
/// Whether `id` is a jmethodID as HotSpot made it: its slot holds a `Method*` whose class's
/// jmethodID cache holds `id` at the method's id number. Read without faulting: a walk may
/// have taken a `Method*` from an nmethod freed under it, and JVMTI dereferences a jmethodID
/// blindly. A genuine id passes even when its method was redefined since (its slot then
/// holds the new version, which keeps the id).
pub fn is_method_id(layout: &Layout, fetch: &Fetch, id: usize) -> bool {
    let pointer = |address: usize| fetch.value::<usize>(address).filter(|&v| plausible(v));
    let checked = || -> Option<bool> {
        let method = pointer(id)?;
        let const_method = pointer(method.wrapping_add(layout.method_const))?;
        let pool = pointer(const_method.wrapping_add(layout.const_method_pool))?;
        let holder = pointer(pool.wrapping_add(layout.pool_holder))?;
        let ids = pointer(holder.wrapping_add(layout.jmethod_ids))?;
        let idnum =
            usize::from(fetch.value::<u16>(const_method.wrapping_add(layout.const_method_idnum))?);
        if idnum + 1 > fetch.value::<usize>(ids)? {
            return Some(false);
        }
        Some(fetch.value::<usize>(ids.wrapping_add((idnum + 1) * WORD))? == id)
    };
    checked().unwrap_or(false)
}

fn plausible(pointer: usize) -> bool {
    pointer >= LOWEST && pointer.is_multiple_of(WORD)
}

/// Reads a `T` at `address`.
///
/// # Safety
/// `address` holds a readable `T` of the VM.
unsafe fn read<T: Copy>(address: usize) -> T {
    // SAFETY: (caller) readable; unaligned reads are allowed on x86-64.
    unsafe { std::ptr::read_unaligned(address as *const T) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jvmti_frames_put_a_compiled_methods_entry_at_location_0() {
        let mut out = [(0usize, 0i64); 3];
        let frame = |bci, kind| JavaFrame {
            method: 0x10,
            bci,
            kind,
        };
        out.put(0, frame(-1, Kind::Compiled));
        out.put(1, frame(-1, Kind::Native));
        out.put(2, frame(7, Kind::Inlined));
        assert_eq!(out, [(0x10, 0), (0x10, -1), (0x10, 7)]);
    }
}
