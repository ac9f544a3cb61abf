//! Recovering samples `AsyncGetCallTrace` gives up on with `unknown_java` (−5).
//!
//! AGCT starts its walk from the interrupted frame only if that frame looks complete: a
//! compiled frame past its prologue with a known frame size, or an interpreted frame. It
//! returns −5 when the thread was stopped where no frame is set up: in a vtable or itable
//! stub (a buffer blob without a frame size, entered by a `call`), in a compiled method's
//! prologue before its frame exists, or in its epilogue after the frame is gone. Measured on
//! H2 (see the README): on JDK 25 three quarters of these samples are in vtable stubs, on
//! JDK 17 most are nmethod prologues and epilogues.
//!
//! In all those places the return address into the caller is on the stack at a place the
//! code tells: at `[sp]` in a stub and before `push rbp`, at `[sp + 8]` between `push rbp`
//! and `sub rsp`, and after `add rsp` before `pop rbp`. The handler then calls AGCT a second
//! time with a copy of the signal context whose pc is that return address and whose sp is
//! just above it: the walk starts in the caller. The processing thread puts back what the
//! sample was in (a `[vtable stub]` leaf, or the compiled method whose prologue/epilogue it
//! was) from the recorded pc.
//!
//! Where the return address is comes from:
//! - [`FRAMELESS`], a handler-readable table of the VM's vtable/itable stub ranges, filled by
//!   the code map from DynamicCodeGenerated (append-only, atomics only), and the code cache's
//!   bounds seen so far (any generated code, nmethods included);
//! - for a pc in the code cache but in none of the VM's named blobs (so in an nmethod), the
//!   few instruction patterns HotSpot's C1 and C2 prologues and epilogues use on x86_64
//!   ([`prologue_epilogue_slot`]), read from the code at the pc.
//!
//! A retry only happens when the word found is itself in the code cache; AGCT then checks the
//! frame it is given as it checks any signal context (code blob, frame size, sender inside
//! the thread's stack).

use std::ffi::c_void;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

/// What a recovered sample was in (`SampleHeader::recovered`).
pub const NOT_RECOVERED: u8 = 0;
/// The pc was in a stub the VM generated without a frame (vtable/itable stub).
pub const FROM_STUB: u8 = 1;
/// The pc was in a compiled method's prologue or epilogue.
pub const FROM_NMETHOD: u8 = 2;

/// Most stub ranges kept (adjacent stubs merge, so a few dozen are typical).
const CAPACITY: usize = 1024;
/// Stubs this close to the previous range's end (their headers lie between) merge with it.
const MERGE_GAP: usize = 128;

/// A range of generated code, and whether it is a frameless stub (1) or other VM code (2).
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
}

/// Kind of [`Table`] entry: a vtable/itable stub.
const STUB_FRAMELESS: u8 = 1;
/// Kind of [`Table`] entry: other code the VM generated (interpreter, runtime stubs,
/// adapters, …), where the nmethod patterns must not be applied.
const STUB_OTHER: u8 = 2;

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Range = Range {
    start: AtomicUsize::new(0),
    end: AtomicUsize::new(0),
    kind: AtomicU8::new(0),
};

/// The process's table (one sampler at a time).
pub static FRAMELESS: Table = Table {
    ranges: [EMPTY; CAPACITY],
    len: AtomicUsize::new(0),
    code_low: AtomicUsize::new(usize::MAX),
    code_high: AtomicUsize::new(0),
};

/// Whether the VM's name for a generated blob is a stub entered by `call` that builds no
/// frame, so that the return address stays at `[sp]` throughout.
pub fn is_frameless_stub(name: &str) -> bool {
    matches!(name, "vtable stub" | "itable stub")
}

impl Table {
    /// Forgets everything (while no handler samples: before the sampler activates).
    pub fn clear(&self) {
        self.len.store(0, Ordering::SeqCst);
        self.code_low.store(usize::MAX, Ordering::SeqCst);
        self.code_high.store(0, Ordering::SeqCst);
    }

    /// Widens the code cache's known bounds to `[start, end)`.
    pub fn note_code(&self, start: usize, end: usize) {
        self.code_low.fetch_min(start, Ordering::Release);
        self.code_high.fetch_max(end, Ordering::Release);
    }

    /// Records a blob the VM generated. Called with the code map locked (one writer).
    pub fn add_stub(&self, start: usize, end: usize, frameless: bool) {
        self.note_code(start, end);
        let kind = if frameless {
            STUB_FRAMELESS
        } else {
            STUB_OTHER
        };
        let len = self.len.load(Ordering::Acquire);
        if len > 0 {
            let last = &self.ranges[len - 1];
            let (last_start, last_end) = (
                last.start.load(Ordering::Relaxed),
                last.end.load(Ordering::Relaxed),
            );
            if last.kind.load(Ordering::Relaxed) == kind
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
        range.kind.store(kind, Ordering::Relaxed);
        self.len.store(len + 1, Ordering::Release);
    }

    /// The kind of table entry holding `pc` (0: none; a frameless stub wins over a blob
    /// around it). Async-signal-safe.
    fn kind_at(&self, pc: usize) -> u8 {
        let len = self.len.load(Ordering::Acquire).min(CAPACITY);
        let mut found = 0;
        for range in &self.ranges[..len] {
            if range.start.load(Ordering::Relaxed) <= pc && pc < range.end.load(Ordering::Acquire) {
                match range.kind.load(Ordering::Relaxed) {
                    STUB_FRAMELESS => return STUB_FRAMELESS,
                    kind => found = kind,
                }
            }
        }
        found
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

/// Retries `AsyncGetCallTrace` from the caller when the interrupted pc is where the return
/// address is on the stack (see the module documentation). Returns the new frame count
/// (> 0), what the sample was in and the return address the walk started from, or None.
///
/// # Safety
/// `context` is the handler's ucontext, on the sampled thread; `walk` calls AGCT with the
/// context it is given (and is only called with a context on this stack).
#[cfg(target_arch = "x86_64")]
pub unsafe fn retry_from_caller(
    context: *mut c_void,
    walk: &mut dyn FnMut(*mut c_void) -> i32,
) -> Option<(i32, u8, u64)> {
    if context.is_null() {
        return None;
    }
    // SAFETY: the caller's contract: a ucontext_t.
    let original = unsafe { &*(context as *const libc::ucontext_t) };
    let pc = original.uc_mcontext.gregs[libc::REG_RIP as usize] as usize;
    let sp = original.uc_mcontext.gregs[libc::REG_RSP as usize] as usize;
    let table = &FRAMELESS;
    if !table.in_code(pc) || !sp.is_multiple_of(8) {
        return None;
    }
    let (slot, what) = match table.kind_at(pc) {
        STUB_FRAMELESS => (0, FROM_STUB),
        STUB_OTHER => return None,
        _ => (prologue_epilogue_slot(pc)?, FROM_NMETHOD),
    };
    if slot > MAX_SLOT {
        return None;
    }
    let here = &slot as *const usize as usize;
    // The handler runs on the interrupted thread's own stack (HotSpot's Java threads have no
    // alternate signal stack; with one, `here` is elsewhere and nothing is read): the kernel
    // pushed the signal frame just below sp, and this frame lies below that. A thread stack
    // is one mapping from its guard pages up to its base, and the interrupted code's frame
    // and its callers lie above sp, so `[sp, sp + slot + 8)`, inside the interrupted frame
    // (the return address of the call into it is its top word), is mapped and readable.
    if here >= sp || sp - here > MAX_HANDLER_DEPTH {
        return None;
    }
    let at = sp.checked_add(slot)?;
    // SAFETY: `at` is 8-byte aligned and inside the live stack, as argued above.
    let return_address = unsafe { std::ptr::read_volatile(at as *const usize) };
    if !table.in_code(return_address) {
        return None;
    }
    // SAFETY: a plain copy of the signal's ucontext into this frame. glibc's ucontext_t is
    // longer than the kernel's `struct ucontext`; what follows the latter in the kernel's
    // signal frame (siginfo, then the saved FPU state of at least 512 bytes) is on this same
    // mapped stack, so all of it is readable. Its fpregs pointer still points at the
    // original's, which outlives the call; AsyncGetCallTrace reads only rip, rsp and rbp.
    let mut caller: libc::ucontext_t = unsafe { std::ptr::read(original) };
    caller.uc_mcontext.gregs[libc::REG_RIP as usize] = return_address as i64;
    caller.uc_mcontext.gregs[libc::REG_RSP as usize] = (at + 8) as i64;
    let frames = walk(&mut caller as *mut libc::ucontext_t as *mut c_void);
    (frames > 0).then_some((frames, what, return_address as u64))
}

/// Only x86_64 knows where its return addresses are.
///
/// # Safety
/// None needed; the signature matches the x86_64 version.
#[cfg(not(target_arch = "x86_64"))]
pub unsafe fn retry_from_caller(
    _context: *mut c_void,
    _walk: &mut dyn FnMut(*mut c_void) -> i32,
) -> Option<(i32, u8, u64)> {
    None
}

/// 24 bytes of code around `pc` (from `pc - 8`), the ones outside pc's page zero:
/// the page holding the interrupted instruction is mapped and readable (the CPU was executing
/// from it), its neighbours need not be.
#[cfg(target_arch = "x86_64")]
fn code_around(pc: usize) -> [u8; 24] {
    let page = pc & !4095;
    let mut bytes = [0u8; 24];
    for (i, byte) in bytes.iter_mut().enumerate() {
        let address = (pc + i).wrapping_sub(8);
        if address & !4095 == page {
            // SAFETY: inside the page of the interrupted instruction (see above).
            *byte = unsafe { std::ptr::read_volatile(address as *const u8) };
        }
    }
    bytes
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
fn prologue_epilogue_slot(pc: usize) -> Option<usize> {
    let code = code_around(pc);
    let (before, at) = code.split_at(8);
    let ends_with = |pattern: &[u8]| before.ends_with(pattern);
    // `before[8 - k ..]` are the k bytes before pc.
    let before_is = |k: usize, prefix: &[u8]| before[8 - k..].starts_with(prefix);
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
    if at.starts_with(&[0x41, 0x81, 0x7f]) {
        if before_is(5, &[0x48, 0x89, 0x6c, 0x24]) {
            return Some(usize::from(before[7]) + 8);
        }
        if before_is(5, &[0x55, 0x48, 0x83, 0xec]) {
            return Some(usize::from(before[7]) + 8);
        }
        if before_is(8, &[0x55, 0x48, 0x81, 0xec]) {
            let n = u32::from_le_bytes([before[4], before[5], before[6], before[7]]);
            return Some(n as usize + 8);
        }
        return None;
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
    if at.starts_with(&[0x41, 0x85, 0x02]) && before_is(7, &[0x4d, 0x8b, 0x97]) {
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
mod tests {
    use super::*;

    #[test]
    fn stub_ranges_merge_and_answer_by_kind() {
        let table = Table {
            ranges: [EMPTY; CAPACITY],
            len: AtomicUsize::new(0),
            code_low: AtomicUsize::new(usize::MAX),
            code_high: AtomicUsize::new(0),
        };
        table.add_stub(0x1000, 0x2000, false);
        table.add_stub(0x1100, 0x1120, true);
        table.add_stub(0x1140, 0x1160, true); // merges with the previous stub
        assert_eq!(table.len.load(Ordering::Relaxed), 2);
        assert_eq!(table.kind_at(0x1150), STUB_FRAMELESS);
        assert_eq!(table.kind_at(0x1800), STUB_OTHER);
        assert_eq!(table.kind_at(0x3000), 0);
        table.note_code(0x5000, 0x6000);
        assert!(table.in_code(0x5fff) && table.in_code(0x1000) && !table.in_code(0x6000));
        assert!(is_frameless_stub("itable stub") && !is_frameless_stub("Interpreter"));
    }

    /// The slot at each instruction of `code`, laid out in a page-aligned buffer at `offset`.
    fn slots(code: &[u8], at: &[usize]) -> Vec<Option<usize>> {
        let mut page = vec![0xccu8; 3 * 4096];
        let base = (page.as_ptr() as usize + 4095) & !4095;
        let start = base + 64 - page.as_ptr() as usize;
        page[start..start + code.len()].copy_from_slice(code);
        at.iter()
            .map(|&i| prologue_epilogue_slot(page.as_ptr() as usize + start + i))
            .collect()
    }

    #[test]
    fn prologue_and_epilogue_patterns() {
        // mov [rsp-0x14000], eax; push rbp; sub rsp, 0x30; cmp [r15+0x20], 1; mov eax, ecx
        let prologue = [
            0x89, 0x84, 0x24, 0x00, 0xc0, 0xfe, 0xff, 0x55, 0x48, 0x83, 0xec, 0x30, 0x41, 0x81,
            0x7f, 0x20, 0x01, 0x00, 0x00, 0x00, 0x89, 0xc8,
        ];
        assert_eq!(
            slots(&prologue, &[0, 7, 8, 12, 20]),
            [Some(0), Some(0), Some(8), Some(0x38), None]
        );
        // add rsp, 0x30; pop rbp; cmp rsp, [r15+0x28]; ja +0x10; ret
        let epilogue = [
            0x48, 0x83, 0xc4, 0x30, 0x5d, 0x49, 0x3b, 0x67, 0x28, 0x0f, 0x87, 0x10, 0x00, 0x00,
            0x00, 0xc3,
        ];
        assert_eq!(
            slots(&epilogue, &[0, 4, 5, 9, 15]),
            [None, Some(8), Some(0), Some(0), Some(0)]
        );
        // Without bang: sub rsp, 0x18; mov [rsp+0x10], rbp; mov eax, edx
        let small = [
            0x66, 0x90, 0x48, 0x81, 0xec, 0x18, 0x00, 0x00, 0x00, 0x48, 0x89, 0x6c, 0x24, 0x10,
            0x8b, 0xc2,
        ];
        assert_eq!(slots(&small, &[2, 9, 14]), [Some(0), Some(0x18), None]);
        // JDK 21: sub rsp, 0x18; mov [rsp+0x10], rbp; cmp [r15+0x20], 1; lea eax, [rdx+4]
        let barrier = [
            0x48, 0x81, 0xec, 0x18, 0x00, 0x00, 0x00, 0x48, 0x89, 0x6c, 0x24, 0x10, 0x41, 0x81,
            0x7f, 0x20, 0x01, 0x00, 0x00, 0x00, 0x8d, 0x42, 0x04,
        ];
        assert_eq!(slots(&barrier, &[12, 20]), [Some(0x18), None]);
        // JDK 11: pop rbp; mov r10, [r15+0x108]; test [r10], eax; ret
        let jdk11 = [
            0x5d, 0x4d, 0x8b, 0x97, 0x08, 0x01, 0x00, 0x00, 0x41, 0x85, 0x02, 0xc3,
        ];
        assert_eq!(slots(&jdk11, &[1, 8, 11]), [Some(0), Some(0), Some(0)]);
        // A lone push rbp or ret is not recognised.
        assert_eq!(slots(&[0x90, 0x55, 0x90, 0xc3], &[1, 3]), [None, None]);
    }
}
