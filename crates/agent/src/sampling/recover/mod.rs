//! Recovering samples `AsyncGetCallTrace` gives up on with `unknown_java` (−5).
//!
//! AGCT starts its walk from the interrupted frame only if that frame looks complete: a
//! compiled frame past its prologue with a known frame size, or an interpreted frame. It
//! returns −5 when the thread was stopped anywhere else: in a stub the VM generated (vtable
//! and itable stubs, arraycopy and the other StubRoutines, C1's runtime stubs, the I2C/C2I
//! adapters), in a compiled method's prologue before its frame exists or its epilogue after
//! the frame is gone, in its inline cache check, or in the fast path of the `hashCode`
//! native wrappers. Measured on H2 and javac (docs/USAGE.md): 1.7–3 % of samples before
//! this module's last additions, ≤ 0.8 % with them.
//!
//! In all those places the code tells where the return address into the caller is. The
//! handler then calls AGCT a second time with a copy of the signal context whose pc is that
//! return address, whose sp is just above it (and whose rbp is the caller's where the stub
//! saved it): the walk starts in the caller. The processing thread puts back what the sample
//! was in (a `[vtable stub]` or `[jlong_disjoint_arraycopy]` leaf, or the compiled method)
//! from the recorded pc.
//!
//! - Frameless stubs (vtable, itable, inline cache buffer): at `[sp]`.
//! - Stubs that build a frame pointer frame (their first instructions are `push rbp; mov
//!   rbp, rsp`): at `[rbp + 8]`, except at those two instructions and the final `ret`.
//! - I2C adapters (interpreted caller): the caller's interpreted frame is at rbp, its sp in
//!   r13. C2I adapters (compiled caller): at `[sp]`, with the caller's sp just above it or,
//!   once the adapter has moved it, in r13 (see [`adapter`]).
//! - Compiled methods: the instruction patterns of C1's and C2's prologues, epilogues, entry
//!   barriers and inline cache checks on x86_64 ([`prologue_epilogue_slot`],
//!   [`inline_cache_check`], [`hash_code_fast_path`]), read from the code at the pc.
//!   `MethodHandle`'s intrinsics (`linkToStatic`, `invokeBasic`, …) are frameless
//!   trampolines: the code map enters their nmethods here as frameless stubs.
//! - Native code called from Java without leaving it (leaf runtime calls such as monitor
//!   exit on JDK 11): libjvm's frame pointer chain up to the return address into generated
//!   code ([`native_caller`]); the native frames themselves come from the native unwinder.
//!
//! - A safepoint poll that trapped: the VM's signal handler sends the thread to the first
//!   instruction of a safepoint handler stub, and a signal pending then (a perf event's that
//!   counts page faults: the poll's fault is one) interrupts it there. The thread keeps the
//!   poll's pc, and the walk starts at the poll with the other registers unchanged
//!   ([`at_trapped_poll`]).
//!
//! Which stub a pc is in comes from [`STUBS`], a handler-readable table of the VM's stub
//! ranges by kind, filled by the code map from DynamicCodeGenerated (append-only, atomics
//! only), with the code cache's bounds (the VM's own where jtap's walker reads them, else
//! those of the code seen so far, nmethods included). Reads of the stack
//! stay between sp and the thread's stack base, which jtap's walker reads from the VM's
//! thread ([`crate::walk::Walker::stack`]); without it only the frameless and nmethod cases
//! are tried, within a page above sp. A retry only happens when the word found is itself in
//! the code cache; AGCT then checks the frame it is given as it checks any signal context
//! (code blob, frame size, sender inside the thread's stack).

use std::ffi::c_void;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

/// What a recovered sample was in (`SampleHeader::recovered`).
pub const NOT_RECOVERED: u8 = 0;
/// The pc was in a stub the VM generated (a vtable stub, arraycopy, an adapter, …).
pub const FROM_STUB: u8 = 1;
/// The pc was in a compiled method where its frame is not set up (prologue, epilogue, inline
/// cache check, a `hashCode` fast path).
pub const FROM_NMETHOD: u8 = 2;
/// The pc was in native code a compiled or interpreted method called without leaving Java
/// (a leaf runtime call: monitor exit, math, arraycopy helpers).
pub const FROM_NATIVE: u8 = 3;

/// The pc was the first instruction of a safepoint handler, where a poll that trapped was
/// sent: the walk started at the poll.
pub const FROM_POLL: u8 = 4;

/// Most stub ranges kept (adjacent stubs but framed ones merge: several hundred are typical).
const CAPACITY: usize = 1024;
/// Stubs this close to the previous range's end (their headers lie between) merge with it
/// where their kind allows ([`StubKind::merges`]).
const MERGE_GAP: usize = 128;

/// A range of generated code and its [`StubKind`] (as a byte).
struct Range {
    start: AtomicUsize,
    end: AtomicUsize,
    kind: AtomicU8,
}

/// Code ranges the handler consults (see the module documentation).
pub struct Table {
    ranges: [Range; CAPACITY],
    len: AtomicUsize,
    /// Lowest and highest address of any generated code seen (nmethods and stubs).
    code_low: AtomicUsize,
    code_high: AtomicUsize,
    /// The template interpreter's code.
    interpreter_start: AtomicUsize,
    interpreter_end: AtomicUsize,
    /// libjvm's executable mapping.
    vm_start: AtomicUsize,
    vm_end: AtomicUsize,
}

/// What a piece of code the VM generated (other than an nmethod) does with its frame, which
/// tells where the return address into its caller is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum StubKind {
    /// Entered by `call`, builds no frame (vtable and itable stubs, and the inline cache
    /// buffer's `mov rax, value; jmp entry`): it stays at `[sp]`.
    Frameless = 1,
    /// Builds a frame pointer frame first (`push rbp; mov rbp, rsp`, left by `leave; ret`),
    /// perhaps after one register move: the arraycopy and array fill stubs and most other
    /// StubRoutines, C1's runtime stubs. It is at `[rbp + 8]`.
    Framed = 2,
    /// The I2C/C2I adapters between interpreted and compiled calling conventions.
    Adapter = 3,
    /// The stubs a safepoint poll that trapped is sent to (`SafepointBlob`): the VM's signal
    /// handler moves the pc to their first instruction and keeps the poll's in the thread.
    SafepointHandler = 4,
    /// Anything else (the interpreter, runtime stubs, the call stub, …).
    Other = 5,
}

impl StubKind {
    /// The kind of the stub the VM names `name` whose code starts with `code`.
    pub fn of(name: &str, code: &[u8]) -> StubKind {
        // "vtable chunks": the blobs holding them, where the code cache is read blob by blob.
        if matches!(
            name,
            "vtable stub" | "itable stub" | "vtable chunks" | "InlineCacheBuffer"
        ) {
            return StubKind::Frameless;
        }
        if name == "I2C/C2I adapters" {
            return StubKind::Adapter;
        }
        if name == "SafepointBlob" {
            return StubKind::SafepointHandler;
        }
        if frame_setup_at(code).is_some() {
            StubKind::Framed
        } else {
            StubKind::Other
        }
    }

    /// Whether a range of this kind takes in a neighbour of the same kind: not a framed stub
    /// (its range tells a call into it from one into its neighbour, see [`calls_stub_of`]),
    /// nor a safepoint handler (its first instruction is where a trapped poll resumes).
    fn merges(self) -> bool {
        !matches!(self, StubKind::Framed | StubKind::SafepointHandler)
    }

    fn from_byte(byte: u8) -> Option<StubKind> {
        [
            StubKind::Frameless,
            StubKind::Framed,
            StubKind::Adapter,
            StubKind::SafepointHandler,
            StubKind::Other,
        ]
        .into_iter()
        .find(|kind| *kind as u8 == byte)
    }
}

const PUSH_RBP: u8 = 0x55;
const POP_RBP: u8 = 0x5d;
const LEAVE: u8 = 0xc9;
const RET: u8 = 0xc3;

/// `mov rbp, rsp` in either of its two encodings.
fn is_mov_rbp_rsp(code: &[u8]) -> bool {
    code.starts_with(&[0x48, 0x89, 0xe5]) || code.starts_with(&[0x48, 0x8b, 0xec])
}

/// Bytes of a 64-bit register-to-register `mov` (REX.W, 89 or 8B, a register operand) at the
/// start of `code`: the array fill stubs (JDK 21+) move their count into r11 before they
/// build their frame.
fn register_move_len(code: &[u8]) -> Option<usize> {
    match code {
        [rex, 0x89 | 0x8b, modrm, ..] if rex & 0xf8 == 0x48 && modrm >> 6 == 0b11 => Some(3),
        _ => None,
    }
}

/// Where a stub whose code starts with `code` builds its frame pointer frame (`push rbp; mov
/// rbp, rsp`): at its first instruction, or after one register move.
fn frame_setup_at(code: &[u8]) -> Option<usize> {
    let at = if code.first() == Some(&PUSH_RBP) {
        0
    } else {
        register_move_len(code)?
    };
    (code.get(at) == Some(&PUSH_RBP) && code.get(at + 1..).is_some_and(is_mov_rbp_rsp))
        .then_some(at)
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Range = Range {
    start: AtomicUsize::new(0),
    end: AtomicUsize::new(0),
    kind: AtomicU8::new(0),
};

/// The process's table (one sampler at a time).
pub static STUBS: Table = Table::new();

impl Table {
    const fn new() -> Table {
        Table {
            ranges: [EMPTY; CAPACITY],
            len: AtomicUsize::new(0),
            code_low: AtomicUsize::new(usize::MAX),
            code_high: AtomicUsize::new(0),
            interpreter_start: AtomicUsize::new(0),
            interpreter_end: AtomicUsize::new(0),
            vm_start: AtomicUsize::new(0),
            vm_end: AtomicUsize::new(0),
        }
    }

    /// Forgets everything (while no handler samples: before the sampler activates).
    pub fn clear(&self) {
        self.len.store(0, Ordering::SeqCst);
        self.code_low.store(usize::MAX, Ordering::SeqCst);
        self.code_high.store(0, Ordering::SeqCst);
        self.interpreter_start.store(0, Ordering::SeqCst);
        self.interpreter_end.store(0, Ordering::SeqCst);
    }

    /// Records where libjvm's code is (once per process: [`Table::clear`] keeps it).
    pub fn set_vm_library(&self, start: usize, end: usize) {
        self.vm_end.store(end, Ordering::Release);
        self.vm_start.store(start, Ordering::Release);
    }

    /// Whether `address` lies in libjvm's code. Async-signal-safe.
    fn in_vm(&self, address: usize) -> bool {
        self.vm_start.load(Ordering::Acquire) <= address
            && address < self.vm_end.load(Ordering::Acquire)
    }

    /// Records where the template interpreter's code is.
    pub fn set_interpreter(&self, start: usize, end: usize) {
        self.note_code(start, end);
        self.interpreter_end.store(end, Ordering::Release);
        self.interpreter_start.store(start, Ordering::Release);
    }

    /// The interpreter's code, if known. Async-signal-safe.
    fn interpreter(&self) -> Option<std::ops::Range<usize>> {
        let start = self.interpreter_start.load(Ordering::Acquire);
        let end = self.interpreter_end.load(Ordering::Acquire);
        (start != 0 && start < end).then_some(start..end)
    }

    /// Stub ranges kept, and how many fit.
    pub fn fill(&self) -> (usize, usize) {
        (self.len.load(Ordering::Acquire).min(CAPACITY), CAPACITY)
    }

    /// Widens the code cache's known bounds to `[start, end)`.
    pub fn note_code(&self, start: usize, end: usize) {
        self.code_low.fetch_min(start, Ordering::Release);
        self.code_high.fetch_max(end, Ordering::Release);
    }

    /// Records a blob the VM generated. Called with the code map locked (one writer).
    pub fn add_stub(&self, start: usize, end: usize, kind: StubKind) {
        self.note_code(start, end);
        let len = self.len.load(Ordering::Acquire);
        if len > 0 && kind.merges() {
            let last = &self.ranges[len - 1];
            let (last_start, last_end) = (
                last.start.load(Ordering::Relaxed),
                last.end.load(Ordering::Relaxed),
            );
            if last.kind.load(Ordering::Relaxed) == kind as u8
                && start >= last_start
                && start <= last_end.saturating_add(MERGE_GAP)
            {
                if end > last_end {
                    last.end.store(end, Ordering::Release);
                }
                return;
            }
        }
        if len == CAPACITY {
            return;
        }
        let range = &self.ranges[len];
        range.start.store(start, Ordering::Relaxed);
        range.end.store(end, Ordering::Relaxed);
        range.kind.store(kind as u8, Ordering::Relaxed);
        self.len.store(len + 1, Ordering::Release);
    }

    /// The kind of stub holding `pc`, the innermost where ranges nest (a named stub inside
    /// the blob of all StubRoutines); None outside every stub. Async-signal-safe.
    fn kind_at(&self, pc: usize) -> Option<StubKind> {
        self.innermost(pc).map(|(_, kind)| kind)
    }

    /// The start and kind of the innermost range holding `pc`. Async-signal-safe.
    fn innermost(&self, pc: usize) -> Option<(usize, StubKind)> {
        let len = self.len.load(Ordering::Acquire).min(CAPACITY);
        let mut found: Option<(usize, StubKind)> = None;
        for range in &self.ranges[..len] {
            let start = range.start.load(Ordering::Relaxed);
            if start <= pc && pc < range.end.load(Ordering::Acquire) {
                let kind = StubKind::from_byte(range.kind.load(Ordering::Relaxed));
                // The enum's order is from most to least specific.
                if let Some(kind) = kind.filter(|&k| found.is_none_or(|(_, f)| (k as u8) < f as u8))
                {
                    found = Some((start, kind));
                }
            }
        }
        found
    }

    /// Whether `pc` is the first instruction of a safepoint handler. Async-signal-safe.
    fn is_safepoint_handler_entry(&self, pc: usize) -> bool {
        self.innermost(pc) == Some((pc, StubKind::SafepointHandler))
    }

    /// Whether `address` lies in an nmethod (generated code outside every stub, as far as
    /// this table knows). Async-signal-safe.
    fn in_nmethod(&self, address: usize) -> bool {
        self.in_code(address) && self.kind_at(address).is_none()
    }

    /// Whether `address` lies in generated code seen so far. Async-signal-safe.
    fn in_code(&self, address: usize) -> bool {
        self.code_low.load(Ordering::Acquire) <= address
            && address < self.code_high.load(Ordering::Acquire)
    }
}

/// How far below the interrupted sp the handler's own frame may be for the two to count as
/// one stack: the kernel's signal frame (with extended register state, a few KiB) and this
/// handler's frames lie between.
const MAX_HANDLER_DEPTH: usize = 256 << 10;
/// Farthest above sp a return address is looked for (a prologue's frame size).
const MAX_SLOT: usize = 4096;
/// Largest frame of a framed stub (C1's runtime stubs save every register) and of an
/// interpreted frame below an I2C adapter (its expression stack and the arguments).
const MAX_FRAME: usize = 64 << 10;
/// Farthest above sp a framed stub's return address is looked for when its frame pointer
/// says nothing (the SHA-2 stubs' frames: under 2 KiB).
const MAX_STUB_SCAN: usize = 4 << 10;
/// Largest area a C2I adapter adds below its caller's sp (the arguments, two words each).
const MAX_C2I_AREA: usize = 8 << 10;

/// Where a retried walk starts: the caller's pc and sp, and its frame pointer when known
/// (else the interrupted one is kept).
#[cfg(target_arch = "x86_64")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Resume {
    pc: usize,
    sp: usize,
    fp: Option<usize>,
}

/// The interrupted registers a retry looks at.
#[cfg(target_arch = "x86_64")]
#[derive(Debug, Clone, Copy)]
struct Interrupted {
    pc: usize,
    sp: usize,
    fp: usize,
    /// The interpreter's sender sp in an I2C adapter (and after a C2I adapter set it).
    r13: usize,
    /// A C2I adapter's return address while it moves it.
    rax: usize,
}

/// The interrupted thread's stack as far as it may be read: from sp to the stack's base
/// (when the VM's thread says where that is), or to the farthest slot above sp.
#[cfg(target_arch = "x86_64")]
struct Stack {
    sp: usize,
    high: usize,
    /// The base came from the thread; without it only the interrupted frame is read.
    known: bool,
}

#[cfg(target_arch = "x86_64")]
impl Stack {
    /// The word at `address`, if it lies inside this stack.
    fn word(&self, address: usize) -> Option<usize> {
        if !address.is_multiple_of(8) || address < self.sp || address.checked_add(8)? > self.high {
            return None;
        }
        // SAFETY: 8-byte aligned, between the interrupted sp and the stack's base (or inside
        // the interrupted frame), all of it mapped (see `retry_from_caller`).
        Some(unsafe { std::ptr::read_volatile(address as *const usize) })
    }
}

/// A copy of the signal context `context` as it was at the safepoint poll that trapped, and
/// the poll's pc, when the context's pc is the first instruction of a safepoint handler. The
/// VM's signal handler moved the pc there from the poll, which `poll_pc` reads from the
/// thread, and a signal pending then arrives before that instruction runs: a perf event
/// sampling page faults always does (the poll's fault is one). Every other register is still
/// the poll's.
///
/// # Safety
/// `context` is the handler's ucontext, on the sampled thread.
#[cfg(target_arch = "x86_64")]
pub unsafe fn at_trapped_poll(
    context: *mut c_void,
    poll_pc: impl FnOnce() -> Option<usize>,
) -> Option<(libc::ucontext_t, usize)> {
    if context.is_null() {
        return None;
    }
    // SAFETY: the caller's contract: a ucontext_t.
    let original = unsafe { &*(context as *const libc::ucontext_t) };
    let pc = original.uc_mcontext.gregs[libc::REG_RIP as usize] as usize;
    if !STUBS.is_safepoint_handler_entry(pc) {
        return None;
    }
    let poll = poll_pc().filter(|&poll| STUBS.in_nmethod(poll))?;
    // SAFETY: a plain copy of the signal's ucontext, as in `retry_from_caller`.
    let mut at_poll: libc::ucontext_t = unsafe { std::ptr::read(original) };
    at_poll.uc_mcontext.gregs[libc::REG_RIP as usize] = poll as i64;
    Some((at_poll, poll))
}

/// Other architectures: no safepoint handler is recognised.
///
/// # Safety
/// None needed; the signature matches the x86_64 version.
#[cfg(not(target_arch = "x86_64"))]
pub unsafe fn at_trapped_poll(
    _context: *mut c_void,
    _poll_pc: impl FnOnce() -> Option<usize>,
) -> Option<(libc::ucontext_t, usize)> {
    None
}

/// Retries `AsyncGetCallTrace` from the caller when the interrupted pc is where the return
/// address is known (see the module documentation). `stack` is the thread's stack as the VM
/// records it, when known. Returns the new frame count (> 0), what the sample was in and the
/// pc the walk started from, or None.
///
/// # Safety
/// `context` is the handler's ucontext, on the sampled thread; `stack` is that thread's
/// stack; `walk` calls AGCT with the context it is given (and is only called with a context
/// on this stack).
#[cfg(target_arch = "x86_64")]
pub unsafe fn retry_from_caller(
    context: *mut c_void,
    stack: Option<std::ops::Range<usize>>,
    walk: &mut dyn FnMut(*mut c_void) -> i32,
) -> Option<(i32, u8, u64)> {
    if context.is_null() {
        return None;
    }
    // SAFETY: the caller's contract: a ucontext_t.
    let original = unsafe { &*(context as *const libc::ucontext_t) };
    let register = |r: libc::c_int| original.uc_mcontext.gregs[r as usize] as usize;
    let at = Interrupted {
        pc: register(libc::REG_RIP),
        sp: register(libc::REG_RSP),
        fp: register(libc::REG_RBP),
        r13: register(libc::REG_R13),
        rax: register(libc::REG_RAX),
    };
    let table = &STUBS;
    if !at.sp.is_multiple_of(8) {
        return None;
    }
    let here = &at as *const Interrupted as usize;
    // The handler runs on the interrupted thread's own stack (HotSpot's Java threads have no
    // alternate signal stack; with one, `here` is elsewhere and nothing is read): the kernel
    // pushed the signal frame just below sp, and this frame lies below that. A thread stack
    // is one mapping from its guard pages up to its base, so all of `[sp, base)` is mapped;
    // without the base, `[sp, sp + MAX_SLOT)` is taken to be (the interrupted code's frame
    // and its callers lie above sp).
    if here >= at.sp || at.sp - here > MAX_HANDLER_DEPTH {
        return None;
    }
    let stack = match stack {
        Some(bounds) if bounds.contains(&at.sp) => Stack {
            sp: at.sp,
            high: bounds.end,
            known: true,
        },
        Some(_) => return None,
        None => Stack {
            sp: at.sp,
            high: at.sp.saturating_add(MAX_SLOT + 8),
            known: false,
        },
    };
    let (resumes, what) = if table.in_code(at.pc) {
        resumes_in_code(table, &stack, &at)?
    } else if stack.known {
        (native_caller(table, &stack, &at), FROM_NATIVE)
    } else {
        return None;
    };
    for resume in resumes.into_iter().flatten() {
        if !table.in_code(resume.pc) {
            continue;
        }
        // SAFETY: a plain copy of the signal's ucontext into this frame. glibc's ucontext_t
        // is longer than the kernel's `struct ucontext`; what follows the latter in the
        // kernel's signal frame (siginfo, then the saved FPU state of at least 512 bytes) is
        // on this same mapped stack, so all of it is readable. Its fpregs pointer still points
        // at the original's, which outlives the call; AsyncGetCallTrace reads only rip, rsp
        // and rbp.
        let mut caller: libc::ucontext_t = unsafe { std::ptr::read(original) };
        caller.uc_mcontext.gregs[libc::REG_RIP as usize] = resume.pc as i64;
        caller.uc_mcontext.gregs[libc::REG_RSP as usize] = resume.sp as i64;
        if let Some(fp) = resume.fp {
            caller.uc_mcontext.gregs[libc::REG_RBP as usize] = fp as i64;
        }
        let frames = walk(&mut caller as *mut libc::ucontext_t as *mut c_void);
        if frames > 0 {
            return Some((frames, what, resume.pc as u64));
        }
    }
    None
}

/// Where to resume when the pc is in generated code: the caller of a stub, or of an nmethod
/// stopped where its frame is not set up.
#[cfg(target_arch = "x86_64")]
fn resumes_in_code(
    table: &Table,
    stack: &Stack,
    at: &Interrupted,
) -> Option<([Option<Resume>; 2], u8)> {
    Some(match table.kind_at(at.pc) {
        Some(StubKind::Frameless) => ([slot(stack, at.sp, 0), None], FROM_STUB),
        Some(StubKind::Framed) if stack.known => (
            [
                framed_stub(stack, at),
                return_address_above(table, stack, at),
            ],
            FROM_STUB,
        ),
        Some(StubKind::Adapter) if stack.known => ([adapter(table, stack, at), None], FROM_STUB),
        Some(_) => return None,
        None => {
            let code = Code::at(at.pc);
            let offset =
                prologue_epilogue_slot(&code).or_else(|| code.in_frameless_entry().then_some(0))?;
            ([slot(stack, at.sp, offset), None], FROM_NMETHOD)
        }
    })
}

/// Whether a compiled method's frame is set up at `pc`, a pc inside it: not in its prologue or
/// epilogue, its inline cache check or a `hashCode` fast path. Async-signal-safe.
#[cfg(target_arch = "x86_64")]
pub fn frame_set_up(pc: usize) -> bool {
    let code = Code::at(pc);
    prologue_epilogue_slot(&code).is_none() && !code.in_frameless_entry()
}

/// Unknown on other architectures (where jtap's walker does not walk).
#[cfg(not(target_arch = "x86_64"))]
pub fn frame_set_up(_pc: usize) -> bool {
    false
}

/// Most native frames walked from a native function called from Java code back to that code.
const MAX_NATIVE_FRAMES: usize = 32;
/// Words above sp searched for libjvm's innermost frame when rbp does not lead to it.
const SCAN_WORDS: usize = 256;

/// Where to resume when the pc is in native code (libjvm, libc) while the thread is in Java:
/// a leaf runtime call compiled or interpreted code made without recording its last Java
/// frame (`SharedRuntime::complete_monitor_unlocking_C`, the math and arraycopy helpers, the
/// C1 runtime entries before their state transition). libjvm is built with frame pointers,
/// so the rbp chain leads from its frames to the first return address into generated code;
/// libc's functions between (without frame pointers) leave rbp as they found it. At the
/// leaf's first instruction, before it saved rbp, the return address is at `[sp]`. When
/// the code returned into is a stub (C1's runtime stubs), the stub's own caller is taken.
#[cfg(target_arch = "x86_64")]
fn native_caller(table: &Table, stack: &Stack, at: &Interrupted) -> [Option<Resume>; 2] {
    let through_stub = |resume: Resume| -> Option<Resume> {
        match table.kind_at(resume.pc) {
            None => Some(resume),
            Some(StubKind::Framed) => {
                let caller = Interrupted {
                    pc: resume.pc,
                    sp: resume.sp,
                    fp: resume.fp?,
                    r13: 0,
                    rax: 0,
                };
                framed_stub(stack, &caller).filter(|r| table.in_nmethod(r.pc))
            }
            Some(_) => None,
        }
    };
    // The first return address into generated code along libjvm's frame pointer chain from
    // `fp`, every frame before it returning into libjvm.
    let chain = |mut fp: usize| -> Option<Resume> {
        for _ in 0..MAX_NATIVE_FRAMES {
            let pc = stack.word(fp.checked_add(8)?)?;
            let next = stack.word(fp)?;
            if !table.in_vm(pc) {
                return table.in_code(pc).then_some(Resume {
                    pc,
                    sp: fp + 16,
                    fp: Some(next),
                });
            }
            if next <= fp {
                return None;
            }
            fp = next;
        }
        None
    };
    // Inside libc, rbp may be any value (it is a general register there): the innermost
    // libjvm frame is then found by its record above sp, a saved rbp higher on the stack
    // followed by a return address into libjvm.
    let from_chain = chain(at.fp).or_else(|| {
        (0..SCAN_WORDS).find_map(|i| {
            let record = at.sp.checked_add(8 * i)?;
            table
                .in_vm(stack.word(record.checked_add(8)?)?)
                .then(|| chain(record))?
        })
    });
    [
        from_chain.and_then(through_stub),
        slot(stack, at.sp, 0).and_then(through_stub),
    ]
}

/// The caller of a frame whose return address is `offset` bytes above `sp`.
#[cfg(target_arch = "x86_64")]
fn slot(stack: &Stack, sp: usize, offset: usize) -> Option<Resume> {
    if offset > MAX_SLOT {
        return None;
    }
    let at = sp.checked_add(offset)?;
    Some(Resume {
        pc: stack.word(at)?,
        sp: at + 8,
        fp: None,
    })
}

/// The caller of a stub that builds a frame pointer frame (`push rbp; mov rbp, rsp` …
/// `leave; ret`), perhaps after a register move: there, at its first two instructions and
/// its `ret` the return address is near sp, everywhere else at `[rbp + 8]` with the caller's
/// rbp below it.
#[cfg(target_arch = "x86_64")]
fn framed_stub(stack: &Stack, at: &Interrupted) -> Option<Resume> {
    let code = Code::at(at.pc);
    let (before, here) = code.near();
    // At the frame's setup, or at a register move before it.
    if frame_setup_at(here).is_some() {
        return slot(stack, at.sp, 0);
    }
    if is_mov_rbp_rsp(here) && before.ends_with(&[PUSH_RBP]) {
        return slot(stack, at.sp, 8);
    }
    if here[0] == RET && (before.ends_with(&[LEAVE]) || before.ends_with(&[POP_RBP])) {
        return slot(stack, at.sp, 0);
    }
    if at.fp < at.sp || at.fp - at.sp > MAX_FRAME {
        return None;
    }
    Some(Resume {
        pc: stack.word(at.fp.checked_add(8)?)?,
        sp: at.fp + 16,
        fp: Some(stack.word(at.fp)?),
    })
}

/// The caller of a framed stub whose frame pointer says nothing: the first word above sp,
/// within [`MAX_STUB_SCAN`], that returns into an nmethod right after a `call` of the stub
/// `at.pc` is in. HotSpot's AVX2 SHA-256 and SHA-512 stubs (CPUs without SHA-NI) use rbp as
/// a data register and keep the entry sp in a stack slot; below their return address lie
/// data, saved registers and stale words of earlier frames, which the `call` test tells from
/// it (a stale return address follows some other call).
#[cfg(target_arch = "x86_64")]
fn return_address_above(table: &Table, stack: &Stack, at: &Interrupted) -> Option<Resume> {
    (0..MAX_STUB_SCAN).step_by(8).find_map(|offset| {
        let slot = at.sp.checked_add(offset)?;
        let word = stack.word(slot)?;
        (table.in_nmethod(word) && calls_stub_of(table, word, at.pc)).then_some(Resume {
            pc: word,
            sp: slot + 8,
            fp: None,
        })
    })
}

/// Whether the instructions before `return_address` call the stub `pc` is in, at or before
/// `pc`: a direct `call` (`e8` rel32), or C2's runtime call `mov r10, imm64; call r10` (`49
/// ba` imm64, `41 ff d2`). (A stale return address after a call of a neighbouring stub, such
/// as an arraycopy stub next to the SHA-2 ones, is in another range.)
#[cfg(target_arch = "x86_64")]
fn calls_stub_of(table: &Table, return_address: usize, pc: usize) -> bool {
    // A word of the stack that falls in the code cache's range need not be in code that is
    // mapped (the range spans the code heaps' uncommitted parts): copied, not read.
    let Some([p0, p1, i0, i1, i2, i3, i4, i5, i6, i7, q0, q1, q2]) = copied_before(return_address)
    else {
        return false;
    };
    let target = if i6 == 0xe8 {
        return_address.wrapping_add_signed(i32::from_le_bytes([i7, q0, q1, q2]) as isize)
    } else if [p0, p1, q0, q1, q2] == [0x49, 0xba, 0x41, 0xff, 0xd2] {
        u64::from_le_bytes([i0, i1, i2, i3, i4, i5, i6, i7]) as usize
    } else {
        return false;
    };
    target <= pc
        && table
            .innermost(pc)
            .is_some_and(|stub| table.innermost(target) == Some(stub))
}

/// The `N` bytes right before `address`, copied with `process_vm_readv` on this very process:
/// a system call, which fails where they are not mapped instead of faulting.
/// Async-signal-safe.
#[cfg(target_arch = "x86_64")]
fn copied_before<const N: usize>(address: usize) -> Option<[u8; N]> {
    let mut bytes = [0u8; N];
    let local = libc::iovec {
        iov_base: bytes.as_mut_ptr().cast(),
        iov_len: N,
    };
    let remote = libc::iovec {
        iov_base: address.checked_sub(N)? as *mut c_void,
        iov_len: N,
    };
    // SAFETY: the local buffer is `bytes` (N bytes); the remote range is only read, by the
    // kernel, which reports an unmapped one as an error.
    let copied = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    (copied == N as isize).then_some(bytes)
}

/// The caller of an I2C or C2I adapter, most likely first (HotSpot's
/// `gen_i2c_adapter`/`gen_c2i_adapter` on x86_64):
/// - I2C (interpreted caller): rbp is the caller's frame and r13 its sp at the call, which
///   the interpreter also recorded in the frame's `last_sp` slot (`[rbp - 16]`, absolute
///   before JDK 22 and in words relative to rbp from then on). The walk starts in that
///   interpreted frame.
/// - C2I (compiled caller): the adapter is entered by `call` with the stack 16-byte
///   aligned, so sp ≡ 8 (mod 16) until it pops the return address into rax and sets r13 to
///   the caller's sp; then it moves sp down by a multiple of 16 and stores the return
///   address at `[sp]`.
#[cfg(target_arch = "x86_64")]
fn adapter(table: &Table, stack: &Stack, at: &Interrupted) -> Option<Resume> {
    let interpreted = || -> Option<Resume> {
        let interpreter = table.interpreter()?;
        if at.fp <= at.sp || at.fp - at.sp > MAX_FRAME || at.r13 <= at.sp || at.r13 > at.fp {
            return None;
        }
        let last_sp = stack.word(at.fp - 16)?;
        let relative = (at.r13 as isize - at.fp as isize) >> 3;
        if last_sp != at.r13 && last_sp as isize != relative {
            return None;
        }
        // The interpreter's return address pushed before the jump into the adapter, or any
        // pc of the interpreter: the walk only needs to know the frame is interpreted.
        let pc = stack
            .word(at.r13 - 8)
            .filter(|pc| interpreter.contains(pc))
            .unwrap_or(interpreter.start);
        Some(Resume {
            pc,
            sp: at.r13,
            fp: Some(at.fp),
        })
    };
    let compiled = || -> Option<Resume> {
        if at.sp % 16 == 8 {
            let resume = slot(stack, at.sp, 0)?;
            return table.in_nmethod(resume.pc).then_some(resume);
        }
        if at.r13 < at.sp || at.r13 - at.sp > MAX_C2I_AREA || !at.r13.is_multiple_of(16) {
            return None;
        }
        let top = stack.word(at.sp)?;
        let pc = if at.r13 > at.sp && table.in_nmethod(top) {
            top
        } else {
            at.rax
        };
        table.in_nmethod(pc).then_some(Resume {
            pc,
            sp: at.r13,
            fp: None,
        })
    };
    interpreted().or_else(compiled)
}

/// Only x86_64 knows where its return addresses are.
///
/// # Safety
/// None needed; the signature matches the x86_64 version.
#[cfg(not(target_arch = "x86_64"))]
pub unsafe fn retry_from_caller(
    _context: *mut c_void,
    _stack: Option<std::ops::Range<usize>>,
    _walk: &mut dyn FnMut(*mut c_void) -> i32,
) -> Option<(i32, u8, u64)> {
    None
}

/// The nmethod entry barrier (JDK 21+): `cmp dword [r15 + d8], imm32`.
const BARRIER: [u8; 3] = [0x41, 0x81, 0x7f];

/// Where the return address is in an nmethod's entry barrier (and its branch) whose code
/// follows the 8 bytes `before`: after `push rbp; sub rsp, n`, or after `sub rsp, n;
/// mov [rsp + n - 8], rbp` (C2 frames without a bang).
fn barrier_slot(before: &[u8]) -> Option<usize> {
    let before_is = |k: usize, prefix: &[u8]| {
        let last = before.get(before.len().wrapping_sub(k)..);
        last.is_some_and(|last| last.starts_with(prefix))
    };
    if before_is(5, &[0x48, 0x89, 0x6c, 0x24]) || before_is(5, &[0x55, 0x48, 0x83, 0xec]) {
        return Some(usize::from(before[7]) + 8);
    }
    if before_is(8, &[0x55, 0x48, 0x81, 0xec]) {
        let n = u32::from_le_bytes([before[4], before[5], before[6], before[7]]);
        return Some(n as usize + 8);
    }
    None
}

/// Bytes of code read on each side of an interrupted pc.
const AROUND: usize = 64;
/// Bytes in a page, and in a word, of the code read.
const PAGE: usize = 4096;
const WORD: usize = 8;

/// The code around an interrupted pc: [`AROUND`] bytes before it and as many from it, those
/// outside pc's page zero: the page holding the interrupted instruction is mapped and
/// readable (the CPU was executing from it), its neighbours need not be.
#[cfg(target_arch = "x86_64")]
struct Code([u8; 2 * AROUND]);

#[cfg(target_arch = "x86_64")]
impl Code {
    fn at(pc: usize) -> Code {
        let page = pc & !(PAGE - 1);
        let start = pc.wrapping_sub(AROUND);
        // Whole aligned words from the one holding `start`: a word holding a byte of pc's
        // page lies in it.
        let first = start & !(WORD - 1);
        let mut words = [0u8; 2 * AROUND + WORD];
        for (i, word) in words.chunks_exact_mut(WORD).enumerate() {
            let address = first.wrapping_add(i * WORD);
            if address & !(PAGE - 1) == page {
                // SAFETY: an aligned word inside the page of the interrupted instruction (see
                // above).
                let value = unsafe { std::ptr::read_volatile(address as *const u64) };
                word.copy_from_slice(&value.to_ne_bytes());
            }
        }
        let mut bytes = [0u8; 2 * AROUND];
        if let Some(window) = words.get(start - first..start - first + 2 * AROUND) {
            bytes.copy_from_slice(window);
        }
        Code(bytes)
    }

    /// The 8 bytes ending `back` bytes before pc.
    fn before(&self, back: usize) -> &[u8] {
        let start = AROUND.checked_sub(back.saturating_add(8));
        start
            .and_then(|start| self.0.get(start..start + 8))
            .unwrap_or_default()
    }

    /// The 8 bytes before pc and the 16 from it.
    fn near(&self) -> (&[u8], &[u8]) {
        (&self.0[AROUND - 8..AROUND], &self.0[AROUND..AROUND + 16])
    }

    /// Whether pc lies in code an nmethod runs before building its frame: its inline cache
    /// check (`mov r10, [rsi + 8]`: REX, `8b 56 08`), or a `hashCode` fast path (`cmp rsi, 0`:
    /// REX, `83 fe 00`).
    fn in_frameless_entry(&self) -> bool {
        self.inside([0x8b, 0x56, 0x08], inline_cache_check)
            || self.inside([0x83, 0xfe, 0x00], hash_code_fast_path)
    }

    /// Whether pc lies in a piece of code starting up to [`AROUND`] bytes before it whose
    /// length `parse` tells from its bytes (None: not that code). Such code begins with a REX
    /// prefix (`0x40`–`0x4f`) and the three bytes `lead`; only such starts are parsed.
    fn inside(&self, lead: [u8; 3], parse: fn(&[u8]) -> Option<usize>) -> bool {
        let code = &self.0;
        // memchr's vector search finds the few offsets holding `lead[0]`.
        memchr::memchr_iter(lead[0], &code[1..AROUND + 2]).any(|start| {
            let Some(candidate) = code.get(start..) else {
                return false;
            };
            candidate.get(2..4) == Some(&lead[1..])
                && candidate.first().is_some_and(|rex| rex & 0xf0 == 0x40)
                && parse(candidate).is_some_and(|len| start + len > AROUND)
        })
    }
}

/// The length of an nmethod's inline cache check at the start of `code` (its unverified
/// entry, before any frame: the receiver's class loaded from `[rsi + 8]`, decoded, compared
/// with the cached one, `jne` to the miss handler, then the nops that align the verified
/// entry), or None.
fn inline_cache_check(code: &[u8]) -> Option<usize> {
    let mut len = match code.get(..4)? {
        [0x44 | 0x4c, 0x8b, 0x56, 0x08] => 4, // mov r10(d), [rsi + 8]
        _ => return None,
    };
    // Compressed class pointers with a base: mov r11, imm64; add r10, r11 — or, on JDK 11,
    // through the heap base register: mov r12, imm64; add r10, r12; xor r12, r12.
    if code.get(len..len + 2)? == [0x49, 0xbb]
        && code.get(len + 10..len + 13)? == [0x4d, 0x03, 0xd3]
    {
        len += 13;
    } else if code.get(len..len + 2)? == [0x49, 0xbc]
        && code.get(len + 10..len + 16)? == [0x4d, 0x03, 0xd4, 0x4d, 0x33, 0xe4]
    {
        len += 16;
    }
    // With a shift: shl r10, imm8.
    if code.get(len..len + 3)? == [0x49, 0xc1, 0xe2] {
        len += 4;
    }
    len += match code.get(len..len + 3)? {
        [0x49, 0x3b, 0xc2] | [0x4c, 0x3b, 0xd0] => 3, // cmp rax, r10 | cmp r10, rax
        [0x44 | 0x4c, 0x3b, 0x50] => 4,               // cmp r10(d), [rax + d8] (JDK 22+)
        _ => return None,
    };
    (code.get(len..len + 2)? == [0x0f, 0x85])
        .then(|| len + 6 + nops_len(code.get(len + 6..).unwrap_or_default()))
}

/// The length of the nop instructions at the start of `code`: `90`, and the address nops
/// `0f 1f /0` HotSpot pads with, each after any `66` prefixes.
fn nops_len(code: &[u8]) -> usize {
    let mut len = 0;
    loop {
        let prefixes = code[len..].iter().take_while(|&&b| b == 0x66).count();
        let at = len + prefixes;
        let nop = match code.get(at..at + 3) {
            Some([0x90, ..]) => 1,
            Some([0x0f, 0x1f, 0x00]) => 3,
            Some([0x0f, 0x1f, 0x40]) => 4,
            Some([0x0f, 0x1f, 0x44]) => 5,
            Some([0x0f, 0x1f, 0x80]) => 7,
            Some([0x0f, 0x1f, 0x84]) => 8,
            _ => return len,
        };
        if at + nop > code.len() {
            return len;
        }
        len = at + nop;
    }
}

/// The length of the fast path of `Object.hashCode`'s and `System.identityHashCode`'s native
/// wrappers at the start of `code`, which return the hash from the object's header before
/// building a frame: a null check (`cmp rsi, 0; jne; xor rax, rax; ret`), the header loaded
/// (`mov rax, [rsi]`), tests, shifts and masks, then `je slow; ret`. None if not that code.
fn hash_code_fast_path(code: &[u8]) -> Option<usize> {
    const START: [u8; 17] = [
        0x48, 0x83, 0xfe, 0x00, 0x0f, 0x85, 0x04, 0x00, 0x00, 0x00, 0x48, 0x33, 0xc0, 0xc3, 0x48,
        0x8b, 0x06,
    ];
    if !code.starts_with(&START) {
        return None;
    }
    // The final `je slow; ret` lies within the next few instructions.
    (START.len()..code.len().min(START.len() + 48))
        .find(|&i| code.get(i..i + 2) == Some(&[0x0f, 0x84]) && code.get(i + 6) == Some(&RET))
        .map(|i| i + 7)
}

/// Where the return address is, relative to sp, at `pc` in a C1/C2 nmethod's prologue or
/// epilogue on x86_64 (HotSpot's `verified_entry`, `remove_frame` and return poll):
///
/// ```text
/// mov [rsp-bang], eax     89 84 24 d32      <- at: [sp]
/// push rbp                55                <- at: [sp]   (after a bang)
/// sub rsp, n              48 83 ec i8 | 48 81 ec i32   <- at: [sp + 8]   (after push rbp)
///   or, without bang:
/// sub rsp, n              48 81 ec i32      <- at: [sp]
/// mov [rsp+n-8], rbp      48 89 6c 24 d8    <- at: [sp + n]
/// cmp [r15+d], i32        41 81 7f d8 i32   <- at: [sp + n] (JDK 21+ entry barrier after the mov)
///   with a bang, the barrier follows `sub rsp, n`:
/// cmp [r15+d], i32        41 81 7f d8 i32   <- at: [sp + n + 8]
/// jne slow                0f 85 d32         <- as at the barrier (C2)
/// je +5; call slow        74 05 e8 d32      <- as at the barrier (C1)
/// …
/// add rsp, n              48 83 c4 i8 | 48 81 c4 i32
/// pop rbp                 5d                <- at: [sp + 8] (after add rsp)
/// cmp rsp, [r15+d]        49 3b 67 d8 | 49 3b a7 d32   <- at: [sp] (after pop rbp)
/// ja slow                 0f 87 d32         <- at: [sp] (after that cmp)
/// ret                     c3                <- at: [sp] (after pop rbp)
///   or, JDK 11's poll after pop rbp:
/// mov r10, [r15+d]        4d 8b 97 d32      <- at: [sp]
/// test [r10], eax         41 85 02          <- at: [sp]
/// ret                     c3                <- at: [sp]
/// ```
#[cfg(target_arch = "x86_64")]
fn prologue_epilogue_slot(code: &Code) -> Option<usize> {
    let (before, at) = code.near();
    let ends_with = |pattern: &[u8]| before.ends_with(pattern);
    // `before[8 - k ..]` are the k bytes before pc.
    let before_is = |k: usize, prefix: &[u8]| {
        let last = before.get(before.len().wrapping_sub(k)..);
        last.is_some_and(|last| last.starts_with(prefix))
    };
    // Stack bang (negative displacement), the first instruction of a verified entry.
    if at.starts_with(&[0x89, 0x84, 0x24]) && at[6] & 0x80 != 0 {
        return Some(0);
    }
    // push rbp right after the bang.
    if at[0] == 0x55 && before_is(7, &[0x89, 0x84, 0x24]) {
        return Some(0);
    }
    // A frame without stack bang (C2, small frames): `sub rsp, n` (always a 32-bit
    // immediate) then `mov [rsp + n - 8], rbp`, nothing pushed before.
    let saves_rbp = |code: &[u8], n: u32| {
        code.starts_with(&[0x48, 0x89, 0x6c, 0x24]) && u32::from(code[4]) + 8 == n
    };
    if at.starts_with(&[0x48, 0x81, 0xec]) && !ends_with(&[0x55]) {
        let n = u32::from_le_bytes([at[3], at[4], at[5], at[6]]);
        if saves_rbp(&at[7..], n) {
            return Some(0);
        }
    }
    if before_is(7, &[0x48, 0x81, 0xec]) && before[0] != 0x55 {
        let n = u32::from_le_bytes([before[4], before[5], before[6], before[7]]);
        if saves_rbp(at, n) {
            return Some(n as usize);
        }
    }
    // sub rsp after push rbp.
    if (at.starts_with(&[0x48, 0x83, 0xec]) || at.starts_with(&[0x48, 0x81, 0xec]))
        && ends_with(&[0x55])
    {
        return Some(8);
    }
    // JDK 21+ nmethod entry barrier right after `push rbp; sub rsp, n`, or after `sub rsp, n;
    // mov [rsp + n - 8], rbp` (C2 frames without a bang).
    if at.starts_with(&BARRIER) {
        return barrier_slot(before);
    }
    // The barrier's branch to its slow path: `jne slow` (C2), or `je +5; call slow` (C1).
    let barrier_before = |back: usize| code.before(back).starts_with(&BARRIER);
    if (at.starts_with(&[0x0f, 0x85]) || at.starts_with(&[0x74, 0x05])) && barrier_before(0) {
        return barrier_slot(code.before(8));
    }
    if at[0] == 0xe8 && code.before(0).ends_with(&[0x74, 0x05]) && barrier_before(2) {
        return barrier_slot(code.before(10));
    }
    // pop rbp after add rsp.
    if at[0] == 0x5d && (before_is(4, &[0x48, 0x83, 0xc4]) || before_is(7, &[0x48, 0x81, 0xc4])) {
        return Some(8);
    }
    // The return poll after pop rbp.
    let return_poll = at.starts_with(&[0x49, 0x3b, 0x67]) || at.starts_with(&[0x49, 0x3b, 0xa7]);
    if return_poll && ends_with(&[0x5d]) {
        return Some(0);
    }
    // JDK 11's return poll after pop rbp: mov r10, [r15+d32]; test [r10], eax.
    if at.starts_with(&[0x4d, 0x8b, 0x97]) && ends_with(&[0x5d]) {
        return Some(0);
    }
    // (The same two instructions poll at a loop's back edge, where the frame is set up: only
    // after `pop rbp` are they the return's.)
    if at.starts_with(&[0x41, 0x85, 0x02]) && before_is(7, &[0x4d, 0x8b, 0x97]) && before[0] == 0x5d
    {
        return Some(0);
    }
    // ja after the return poll.
    if at.starts_with(&[0x0f, 0x87])
        && (before_is(4, &[0x49, 0x3b, 0x67]) && before[3] == 0x5d
            || before_is(7, &[0x49, 0x3b, 0xa7]) && before[0] == 0x5d)
    {
        return Some(0);
    }
    // ret after pop rbp or after the return poll's ja.
    if at[0] == 0xc3
        && (ends_with(&[0x5d]) || before_is(6, &[0x0f, 0x87]) || ends_with(&[0x41, 0x85, 0x02]))
    {
        return Some(0);
    }
    None
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests;
