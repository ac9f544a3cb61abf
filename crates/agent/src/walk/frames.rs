//! The walk: from a thread's last Java frame (its frame anchor) to the bottom of its stack,
//! frame by frame, as HotSpot's own `frame::sender` does on x86-64.
//!
//! - An interpreted frame (pc in the interpreter) keeps its `Method*` and bytecode pointer in
//!   fixed slots below its frame pointer; its caller's sp, pc and fp are above it.
//! - A compiled frame (pc in an nmethod) is found in the nmethod's pc descriptors: at a call's
//!   return address the descriptor is exact and names a scope chain in the debug information:
//!   the inlined methods innermost first, each with its bytecode index, then the compiled one.
//!   Its caller's frame starts `frame_size` words above its own.
//! - A stub with a frame (a runtime stub, an adapter) has no Java frame and is stepped over the
//!   same way.
//! - The call stub (a Java call from the VM or native code) holds the `JavaCallWrapper`, whose
//!   anchor is the caller's last Java frame: the walk goes on from there.
//! - The frame of a continuation's entry (`Continuation.enterSpecial`, JDK 21+) lies below a
//!   virtual thread's bottom frame: the walk ends there, as JVMTI's stacks of virtual threads do.
//!
//! Only the walking thread's own stack is walked, at a point where HotSpot keeps it walkable (a
//! JVMTI event callback or a native method): its frames and their code cannot go away during
//! the walk. Every stack read is checked against the thread's stack bounds and every code read
//! against the code heap that holds the blob; anything unexpected ends the walk with a
//! [`Stop`], never a guess. This is the FFI module of the walker: its `unsafe` blocks are the
//! reads of the VM's memory.

use super::layout::{
    BlobKind, CodeStart, DebugInfo, Layout, ACC_NATIVE, INTERPRETER_BCP_SLOT,
    INTERPRETER_METHOD_SLOT, INTERPRETER_SENDER_SP_SLOT,
};
use super::Frame;

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
    /// The thread is in Java code or between states, where its frames may be half-built.
    NotWalkable,
}

impl Stop {
    /// Every reason, in declaration order (`stop as usize` indexes it).
    pub const ALL: [Stop; 8] = [
        Stop::OffStack,
        Stop::UnknownCode,
        Stop::Frameless,
        Stop::NoDebugInfo,
        Stop::NoMethodId,
        Stop::Inconsistent,
        Stop::TooDeep,
        Stop::NotWalkable,
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
        }
    }
}

/// Most physical frames stepped through in one walk.
const MAX_STEPS: usize = 4096;
/// Lowest address taken for a pointer (the zero page and the first 64 KiB are never mapped).
const LOWEST: usize = 1 << 16;

/// One physical frame's registers.
#[derive(Clone, Copy)]
struct Registers {
    sp: usize,
    /// The caller's sp before the callee's adapter extended it (HotSpot's `unextended_sp`).
    unextended_sp: usize,
    fp: usize,
    pc: usize,
}

/// The walk of one thread: its stack bounds and the VM's layout.
pub struct Walk<'a> {
    layout: &'a Layout,
    stack_low: usize,
    stack_high: usize,
}

impl<'a> Walk<'a> {
    /// The walk of `thread`, a `JavaThread*`.
    ///
    /// # Safety
    /// `thread` is the calling thread's own `JavaThread`, and `layout` the running VM's.
    pub unsafe fn new(layout: &'a Layout, thread: usize) -> Result<Self, Stop> {
        // SAFETY: the caller's contract.
        let stack = unsafe { stack_of(layout, thread) }.ok_or(Stop::Inconsistent)?;
        // SAFETY: the caller's JavaThread is live; the state is its field.
        let state = unsafe { read::<i32>(thread + layout.thread_state) };
        if !layout.walkable_states.contains(&state) {
            return Err(Stop::NotWalkable);
        }
        Ok(Walk {
            layout,
            stack_low: stack.start,
            stack_high: stack.end,
        })
    }

    /// Writes up to `out.len()` frames of `thread`'s Java stack, top first; the count written.
    ///
    /// # Safety
    /// As for [`Walk::new`], on the same thread, while its stack is walkable.
    pub unsafe fn frames(&self, thread: usize, out: &mut [Frame]) -> Result<usize, Stop> {
        let layout = self.layout;
        // SAFETY: the caller's own JavaThread; its anchor is a field.
        let Some(mut at) = (unsafe { self.anchored(thread + layout.thread_anchor)? }) else {
            return Ok(0);
        };
        // SAFETY: static variables of the loaded libjvm.so.
        let (queue, call_stub_return) = unsafe {
            (
                read::<usize>(layout.interpreter),
                read::<usize>(layout.call_stub_return),
            )
        };
        let interpreter = if queue >= LOWEST {
            // SAFETY: the interpreter's StubQueue, created at VM start and never freed.
            let (start, limit) = unsafe {
                (
                    read::<usize>(queue + layout.queue_buffer),
                    read::<i32>(queue + layout.queue_limit),
                )
            };
            start..start + limit.max(0) as usize
        } else {
            0..0
        };
        // SAFETY: a static variable of the loaded libjvm.so.
        let continuation_return = layout
            .continuation_return
            .map(|variable| unsafe { read::<usize>(variable) })
            .filter(|&pc| pc != 0);
        let mut count = 0;
        for _ in 0..MAX_STEPS {
            if count == out.len() {
                return Ok(count);
            }
            if interpreter.contains(&at.pc) {
                let method = self.stack_word(at.fp, INTERPRETER_METHOD_SLOT)?;
                let bcp = self.stack_word(at.fp, INTERPRETER_BCP_SLOT)?;
                // SAFETY: a Method* from a live interpreted frame of this thread.
                out[count] = unsafe { self.interpreted(method, bcp)? };
                count += 1;
                at = Registers {
                    sp: at.fp + 2 * WORD,
                    unextended_sp: self.stack_word(at.fp, INTERPRETER_SENDER_SP_SLOT)?,
                    fp: self.stack_word(at.fp, 0)?,
                    pc: self.stack_word(at.fp, 1)?,
                };
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
                    Some(caller) => at = caller,
                    None => return Ok(count),
                }
                continue;
            }
            // SAFETY: the code cache's heaps, read as CodeCache::find_blob does.
            let blob = unsafe { self.find_blob(at.pc)? };
            // SAFETY: as above.
            if blob.nmethod && unsafe { self.enters_continuation(&blob, continuation_return) } {
                // A virtual thread's stack ends here (what follows is its carrier's).
                return Ok(count);
            }
            if blob.nmethod {
                // SAFETY: an nmethod with an activation on this thread's stack.
                count += unsafe { self.compiled(&blob, at.pc, &mut out[count..])? };
            }
            if blob.frame_words == 0 {
                return Err(Stop::Frameless);
            }
            let sender_sp = at.unextended_sp + blob.frame_words * WORD;
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

    /// Whether `blob` is the entry of continuations (`Continuation.enterSpecial`, a native
    /// method's nmethod), the one holding `continuation_return`. It has several return
    /// addresses (a first mount and a thaw return to different ones), hence the blob.
    unsafe fn enters_continuation(&self, blob: &Blob, continuation_return: Option<usize>) -> bool {
        let Some(return_pc) = continuation_return else {
            return false;
        };
        // SAFETY: (caller) an nmethod on this thread's stack; its method is a Method*.
        let method = unsafe { read::<usize>(blob.address + self.layout.nmethod_method) };
        // SAFETY: as above; the code cache lookup reads only the heaps' own structures.
        plausible(method)
            && unsafe { self.is_native(method) }
            && unsafe { self.find_blob(return_pc) }.is_ok_and(|entry| entry.address == blob.address)
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
            && address + WORD <= self.stack_high
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

    /// The frame of an interpreted method at bytecode pointer `bcp` (0 in a native method).
    unsafe fn interpreted(&self, method: usize, bcp: usize) -> Result<Frame, Stop> {
        // SAFETY: (caller) a Method* of a live frame.
        let id = unsafe { self.method_id(method)? };
        // SAFETY: as above.
        if bcp == 0 || unsafe { self.is_native(method) } {
            return Ok((id, -1));
        }
        // SAFETY: as above; the ConstMethod is the method's.
        let code = unsafe { read::<usize>(method + self.layout.method_const) }
            + self.layout.const_method_size;
        match bcp.checked_sub(code) {
            Some(bci) if bci < 1 << 16 => Ok((id, bci as i64)),
            _ => Err(Stop::Inconsistent),
        }
    }

    unsafe fn is_native(&self, method: usize) -> bool {
        // SAFETY: (caller) a Method*; the flags are a field of it.
        unsafe { read::<u16>(method + self.layout.method_flags) & ACC_NATIVE != 0 }
    }

    /// The jmethodID of `method`: the slot of its class's jmethodID cache at its id number,
    /// which must point back at it.
    unsafe fn method_id(&self, method: usize) -> Result<usize, Stop> {
        let layout = self.layout;
        if !plausible(method) {
            return Err(Stop::Inconsistent);
        }
        // SAFETY: a live Method* (caller); each pointer followed is checked non-null and
        // aligned first; the cache's first word is its length.
        unsafe {
            let const_method = read::<usize>(method + layout.method_const);
            if !plausible(const_method) {
                return Err(Stop::Inconsistent);
            }
            let pool = read::<usize>(const_method + layout.const_method_pool);
            if !plausible(pool) {
                return Err(Stop::Inconsistent);
            }
            let holder = read::<usize>(pool + layout.pool_holder);
            if !plausible(holder) {
                return Err(Stop::Inconsistent);
            }
            let ids = read::<usize>(holder + layout.jmethod_ids);
            if ids == 0 {
                return Err(Stop::NoMethodId);
            }
            if !plausible(ids) {
                return Err(Stop::Inconsistent);
            }
            let idnum = usize::from(read::<u16>(const_method + layout.const_method_idnum));
            if idnum + 1 > read::<usize>(ids) {
                return Err(Stop::NoMethodId);
            }
            let id = read::<usize>(ids + (idnum + 1) * WORD);
            if id == 0 {
                return Err(Stop::NoMethodId);
            }
            if !plausible(id) || read::<usize>(id) != method {
                return Err(Stop::Inconsistent);
            }
            Ok(id)
        }
    }

    /// The code blob holding `pc`, found in the code heaps' segment maps as HotSpot's
    /// `CodeHeap::find_blob` does.
    unsafe fn find_blob(&self, pc: usize) -> Result<Blob, Stop> {
        let layout = self.layout;
        // SAFETY: CodeCache::_heaps and the heaps it lists live as long as the VM; segment
        // map and block reads stay inside the heap found to hold `pc`.
        unsafe {
            let heaps = read::<usize>(layout.code_heaps);
            if heaps < LOWEST {
                return Err(Stop::UnknownCode);
            }
            let count = read::<i32>(heaps + layout.array_len).clamp(0, 16) as usize;
            let data = read::<usize>(heaps + layout.array_data);
            for i in 0..count {
                let heap = read::<usize>(data + i * WORD);
                if heap < LOWEST {
                    continue;
                }
                let memory = heap + layout.heap_memory;
                let low = read::<usize>(memory + layout.space_low);
                let high = read::<usize>(memory + layout.space_high);
                if !(low..high).contains(&pc) {
                    continue;
                }
                let shift = read::<i32>(heap + layout.heap_log2_segment_size);
                if !(0..32).contains(&shift) {
                    return Err(Stop::Inconsistent);
                }
                let segmap = read::<usize>(heap + layout.heap_segmap + layout.space_low);
                let mut segment = (pc - low) >> shift;
                let mut tag = read::<u8>(segmap + segment);
                if tag == 0xFF {
                    return Err(Stop::UnknownCode);
                }
                while tag > 0 {
                    segment = segment
                        .checked_sub(usize::from(tag))
                        .ok_or(Stop::Inconsistent)?;
                    tag = read::<u8>(segmap + segment);
                }
                let block = low + (segment << shift);
                if !read::<bool>(block + layout.block_used) {
                    return Err(Stop::UnknownCode);
                }
                let blob = block + layout.block_size;
                let nmethod = match layout.blob_kind {
                    BlobKind::Field { offset, nmethod } => read::<u8>(blob + offset) == nmethod,
                    BlobKind::Name(offset) => {
                        let name = read::<usize>(blob + offset);
                        name >= LOWEST
                            && std::ffi::CStr::from_ptr(name as *const std::ffi::c_char)
                                .to_bytes()
                                .ends_with(b"nmethod")
                    }
                };
                let frame_words = read::<i32>(blob + layout.blob_frame_size).clamp(0, 1 << 20);
                return Ok(Blob {
                    address: blob,
                    nmethod,
                    frame_words: frame_words as usize,
                });
            }
            Err(Stop::UnknownCode)
        }
    }

    /// The frames of compiled `blob` at return address `pc`: its scopes, innermost first
    /// (the method itself, native, for a native wrapper).
    unsafe fn compiled(&self, blob: &Blob, pc: usize, out: &mut [Frame]) -> Result<usize, Stop> {
        let layout = self.layout;
        let nm = blob.address;
        // SAFETY: an nmethod with an activation on this thread's stack stays installed while
        // the walk runs; its debug information is read within the bounds it records.
        unsafe {
            let method = read::<usize>(nm + layout.nmethod_method);
            if method != 0 && self.is_native(method) {
                if out.is_empty() {
                    return Ok(0);
                }
                out[0] = (self.method_id(method)?, -1);
                return Ok(1);
            }
            let code = match layout.blob_code {
                CodeStart::Address(field) => read::<usize>(nm + field),
                CodeStart::Offset(field) => nm + read::<i32>(nm + field).max(0) as usize,
            };
            let (pcs, pcs_end, scopes, metadata) = match layout.debug {
                DebugInfo::InBlob {
                    scopes_data,
                    pcs,
                    pcs_end,
                    metadata,
                } => {
                    let scopes = read::<usize>(nm + scopes_data);
                    (
                        nm + read::<i32>(nm + pcs).max(0) as usize,
                        nm + read::<i32>(nm + pcs_end).max(0) as usize,
                        scopes,
                        (nm + read::<i32>(nm + metadata).max(0) as usize)..scopes,
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
                    let immutable = read::<usize>(nm + immutable_data);
                    let mutable = read::<usize>(nm + mutable_data);
                    let relocations = read::<i32>(nm + relocation_size).max(0) as usize;
                    let mutable_size = read::<i32>(nm + mutable_data_size).max(0) as usize;
                    (
                        immutable + read::<i32>(nm + pcs).max(0) as usize,
                        immutable + read::<i32>(nm + scopes).max(0) as usize,
                        immutable + read::<i32>(nm + scopes).max(0) as usize,
                        (mutable + relocations)..(mutable + mutable_size),
                    )
                }
            };
            let offset = pc.checked_sub(code).ok_or(Stop::NoDebugInfo)?;
            let mut decode = find_scope(pcs, pcs_end, offset).ok_or(Stop::NoDebugInfo)? as usize;
            let mut count = 0;
            while count < out.len() {
                let mut at = scopes + decode;
                let sender = self.compressed(&mut at);
                let index = self.compressed(&mut at) as usize;
                let bci = i64::from(self.compressed(&mut at)) - 1;
                let slot = metadata.start + index.wrapping_sub(1) * WORD;
                if index == 0 || slot + WORD > metadata.end {
                    return Err(Stop::Inconsistent);
                }
                let method = read::<usize>(slot);
                out[count] = (self.method_id(method)?, bci.max(-1));
                count += 1;
                if sender == 0 {
                    break;
                }
                decode = sender as usize;
            }
            Ok(count)
        }
    }

    /// One compressed `int` of a debug stream at `*at` (HotSpot's `CompressedReadStream`).
    unsafe fn compressed(&self, at: &mut usize) -> u32 {
        // Pack200's UNSIGNED5 coding: bytes below `low` end a number, each other byte adds 6
        // bits; JDK 20+ excludes the zero byte (every byte is one more).
        let excluded = u32::from(self.layout.unsigned5);
        let low = 256 - 64 - excluded;
        let mut sum = 0u32;
        for i in 0..5 {
            // SAFETY: (caller) inside the nmethod's scopes data; a number is at most 5 bytes.
            let b = u32::from(unsafe { read::<u8>(*at) }).wrapping_sub(excluded);
            *at += 1;
            sum = sum.wrapping_add(b << (6 * i));
            if b < low {
                break;
            }
        }
        sum
    }
}

/// A code blob holding a pc.
struct Blob {
    address: usize,
    nmethod: bool,
    frame_words: usize,
}

const WORD: usize = std::mem::size_of::<usize>();
/// Size of a `PcDesc`: `int pc_offset, scope_decode_offset, obj_decode_offset, flags`.
const PC_DESC: usize = 16;

/// The scope decode offset of the pc descriptor for code `offset` in the sorted table
/// `pcs..end` (binary search for an exact match; 0 is "no scope").
///
/// # Safety
/// `pcs..end` is an nmethod's table of pc descriptors.
unsafe fn find_scope(pcs: usize, end: usize, offset: usize) -> Option<u32> {
    if end <= pcs {
        return None;
    }
    let (mut low, mut high) = (0, (end - pcs) / PC_DESC);
    while low < high {
        let mid = (low + high) / 2;
        // SAFETY: (caller) `mid` indexes the table.
        let at = unsafe { read::<i32>(pcs + mid * PC_DESC) } as i64;
        match at.cmp(&(offset as i64)) {
            std::cmp::Ordering::Less => low = mid + 1,
            std::cmp::Ordering::Greater => high = mid,
            std::cmp::Ordering::Equal => {
                // SAFETY: as above.
                let decode = unsafe { read::<i32>(pcs + mid * PC_DESC + 4) };
                return (decode > 0).then_some(decode as u32);
            }
        }
    }
    None
}

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
