//! The profiling signals (SIGPROF for CPU time, SIGVTALRM for wall-clock time): installing
//! the handler once, recognising which signals are ours, and the handler itself.
//!
//! The handler is async-signal-safe: atomics, jtap's stack walker (whose reads of the VM
//! cannot fault, see [`crate::walk`]), `AsyncGetCallTrace`, `GetEnv` (only on threads
//! the VM knows, see [`super::jvm::VmThreadKey`]), `gettid`/`ioctl`/`process_vm_readv`
//! system calls (the last copies the top of the stack for DWARF unwinding, failing rather than
//! faulting where the stack ends), reading the thread's own perf_event ring buffer (see
//! [`super::perf`]) and the interrupted registers in its signal context; no
//! allocation, no lock, no formatting. It saves and restores `errno`. A SIGPROF that is not
//! ours (wrong origin, or no engine running) goes to the handler that was installed before
//! ours, if that was a function; the default action (terminating the JVM) is never taken.
//!
//! Several engines sample at once (e.g. `cpu` and `wall`) when their signals come from
//! different [`Source`]s: the handler tells them apart by the signal and its siginfo and
//! records each into the target of its source. Wall-clock samples come on a signal of their
//! own: a standard signal is not queued, so a wall-clock SIGPROF pending on a thread would
//! swallow a perf_event counter's SIGPROF, and that counter, re-armed only by the handler,
//! would then sample the thread no more. Neither signal interrupts the handler of the other.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{
    AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering,
};
use std::sync::Mutex;
use std::time::Duration;

use jtap_jvmti::sys;

use super::asgct::{AsyncGetCallTrace, CallFrame, CallTrace};
use super::buffer::{SampleBuffer, SampleHeader, WALKED_BY_ASGCT, WALKED_BY_VM, WALKS_DIFFERED};
use super::jvm::VmThreadKey;
use super::owed::OwedTicks;
use super::perf;
use super::recover;
use crate::gate::Gate;
use crate::walk::{Began, Comparison, Interrupted, Kind, Stats, Stop, TopPc, Walker};

/// AsyncGetCallTrace's `ticks_unknown_Java`: a Java thread stopped where no frame is set up.
const UNKNOWN_JAVA: i32 = -5;

/// The signal of the CPU-time engines (perf_event counters, timers).
pub const CPU_SIGNAL: c_int = libc::SIGPROF;
/// The signal the wall-clock engine sends with `tgkill`.
pub const WALL_SIGNAL: c_int = libc::SIGVTALRM;
/// Both, in the order of [`PREVIOUS`].
const SIGNALS: [c_int; 2] = [CPU_SIGNAL, WALL_SIGNAL];

/// Where an engine's signals come from; the handler takes each into its source's target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Source {
    /// A perf_event counter's overflow (`si_code` POLL_*, `si_fd` one of ours).
    PerfEvent = 1,
    /// `setitimer(ITIMER_PROF)` (`si_code` SI_KERNEL).
    Itimer = 2,
    /// A POSIX timer from `timer_create` (`si_code` SI_TIMER).
    PosixTimer = 3,
    /// `tgkill` from this process (`si_code` SI_TKILL, `si_pid` ours).
    Tgkill = 4,
}

/// What handlers write into, set while an engine samples.
pub struct Target {
    /// The sample buffer.
    pub buffer: SampleBuffer,
    /// `AsyncGetCallTrace`.
    pub asgct: AsyncGetCallTrace,
    /// The VM, for the sampled thread's `JNIEnv`.
    pub vm: *mut sys::JavaVM,
    /// Tells the VM's threads from native ones before asking for a `JNIEnv`.
    pub vm_threads: VmThreadKey,
    /// Weight of each sample (nanoseconds); the wall engine adjusts it as it goes.
    pub weight: AtomicU64,
    /// `tgkill` ticks signalled and not yet sampled, by thread.
    pub owed: OwedTicks,
    /// Timer and `tgkill` samples: copy the top of the user stack into the slot (for DWARF
    /// unwinding), as perf_events does for the `cpu` engine.
    pub copies_stacks: bool,
    /// jtap's stack walker, if it knows this VM: it tells where a thread's stack is, for
    /// walking samples `AsyncGetCallTrace` gives up on from their caller.
    pub walker: Option<&'static Walker>,
    /// Who walks the Java stacks.
    pub walks: Walks,
    /// How stacks were walked.
    pub stats: Stats,
    /// With [`Walks::Vm`], samples still to be walked both ways before jtap's walker walks
    /// alone.
    pub unverified: AtomicU32,
    /// jtap's walker differed from `AsyncGetCallTrace` (beyond the interrupted frame's
    /// scopes) on a verified sample: it walks no more.
    pub distrusted: AtomicBool,
}

/// Samples of each sampler walked both ways before jtap's walker is trusted alone.
pub const VERIFIED_SAMPLES: u32 = 64;

impl Target {
    /// Whether this sample is one of the first, walked both ways to verify jtap's walker.
    fn verifies_next(&self) -> bool {
        self.unverified.load(Ordering::Relaxed) > 0
            && self
                .unverified
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_ok()
    }
}

/// Who walks a sample's Java stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Walks {
    /// jtap's walker, and `AsyncGetCallTrace` where it stops; the first
    /// [`VERIFIED_SAMPLES`] are walked both ways, and one difference other than those
    /// [`compare`] accepts leaves every later sample to `AsyncGetCallTrace`.
    Vm,
    /// `AsyncGetCallTrace` only.
    Asgct,
    /// Both, each into half of the slot, compared; `AsyncGetCallTrace`'s stack is kept.
    Check,
}

// SAFETY: the VM pointer is process-global and thread safe; the buffer is Sync.
unsafe impl Sync for Target {}
// SAFETY: as above.
unsafe impl Send for Target {}

impl Source {
    /// Every source, in the order of [`SLOTS`].
    const ALL: [Source; 4] = [
        Source::PerfEvent,
        Source::Itimer,
        Source::PosixTimer,
        Source::Tgkill,
    ];

    fn slot(self) -> &'static Slot {
        &SLOTS[self as usize - 1]
    }

    /// The signal this source's engines use.
    pub fn signal(self) -> c_int {
        match self {
            Source::Tgkill => WALL_SIGNAL,
            Source::PerfEvent | Source::Itimer | Source::PosixTimer => CPU_SIGNAL,
        }
    }

    /// The source of `signal` with this siginfo, if it is one jtap's engines make.
    ///
    /// # Safety
    /// `info` points at the siginfo the kernel passed.
    unsafe fn of(signal: c_int, info: *const libc::siginfo_t) -> Option<Source> {
        // SAFETY: the caller's contract.
        let code = unsafe { (*info).si_code };
        Source::ALL.into_iter().find(|&source| {
            source.signal() == signal
                && match source {
                    Source::PerfEvent => (POLL_IN..=POLL_HUP).contains(&code),
                    Source::Itimer => code == libc::SI_KERNEL,
                    Source::PosixTimer => code == libc::SI_TIMER,
                    Source::Tgkill => {
                        code == libc::SI_TKILL
                            // SAFETY: SI_TKILL siginfo carries the sender's pid.
                            && unsafe { (*info).si_pid() } == PID.load(Ordering::Relaxed)
                    }
                }
        })
    }
}

/// One source's target, while an engine takes its signals.
struct Slot {
    /// Set while the source is active (before the gate opens, cleared before it closes).
    active: AtomicBool,
    target: AtomicPtr<Target>,
    gate: Gate,
}

impl Slot {
    const fn new() -> Slot {
        Slot {
            active: AtomicBool::new(false),
            target: AtomicPtr::new(std::ptr::null_mut()),
            gate: Gate::new(),
        }
    }
}

static SLOTS: [Slot; 4] = [Slot::new(), Slot::new(), Slot::new(), Slot::new()];
static PID: AtomicI32 = AtomicI32::new(0);
/// The handler installed before ours (`sa_sigaction`, 0 until installed) and its flags, per
/// signal of [`SIGNALS`].
struct Previous {
    handler: AtomicUsize,
    flags: AtomicI32,
}

static PREVIOUS: [Previous; 2] = [
    Previous {
        handler: AtomicUsize::new(0),
        flags: AtomicI32::new(0),
    },
    Previous {
        handler: AtomicUsize::new(0),
        flags: AtomicI32::new(0),
    },
];
static INSTALL: Mutex<bool> = Mutex::new(false);

/// Installs the handler for both signals (once per process; it stays, passing signals on
/// while idle).
pub fn install() -> Result<(), String> {
    let mut installed = INSTALL.lock().unwrap_or_else(|e| e.into_inner());
    if *installed {
        return Ok(());
    }
    // SAFETY: getpid has no preconditions.
    PID.store(unsafe { libc::getpid() }, Ordering::SeqCst);
    for (signal, previous_slot) in SIGNALS.into_iter().zip(&PREVIOUS) {
        // SAFETY: sigaction with a zeroed (valid) struct naming our extern "C" handler and
        // a mask built with sigemptyset/sigaddset; the previous disposition is read into a
        // local.
        let previous = unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = handle as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            for other in SIGNALS {
                libc::sigaddset(&mut action.sa_mask, other);
            }
            let mut previous: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(signal, &action, &mut previous) != 0 {
                return Err(format!(
                    "sigaction({signal}): {}",
                    std::io::Error::last_os_error()
                ));
            }
            previous
        };
        previous_slot
            .flags
            .store(previous.sa_flags, Ordering::SeqCst);
        previous_slot
            .handler
            .store(previous.sa_sigaction, Ordering::SeqCst);
    }
    *installed = true;
    Ok(())
}

/// Starts taking signals from `source` into `target`. The target must stay alive until
/// [`deactivate`] returns; one target per source at a time (the agent keeps engines of one
/// source from running together).
pub fn activate(target: &Target, source: Source) {
    let slot = source.slot();
    slot.target
        .store(target as *const Target as *mut Target, Ordering::SeqCst);
    slot.gate.open();
    slot.active.store(true, Ordering::SeqCst);
}

/// Stops taking signals from `source` and waits until no handler is inside its target (up
/// to 2 s). Returns how many handlers were still running at the deadline (0: the target may
/// be freed).
pub fn deactivate(source: Source) -> usize {
    let slot = source.slot();
    slot.active.store(false, Ordering::SeqCst);
    let stuck = slot.gate.close_and_drain(Duration::from_secs(2));
    if stuck == 0 {
        slot.target.store(std::ptr::null_mut(), Ordering::SeqCst);
    }
    stuck
}

/// Per-thread scheduler state recorded with wall-clock samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ThreadState {
    /// On a CPU (or runnable) when signalled.
    Running = 1,
    /// Blocked in a system call (sleep, wait, park, I/O, monitor) when signalled.
    Sleeping = 2,
}

impl ThreadState {
    /// The state recorded as byte `b`, if any.
    pub fn from_byte(b: u8) -> Option<ThreadState> {
        match b {
            1 => Some(ThreadState::Running),
            2 => Some(ThreadState::Sleeping),
            _ => None,
        }
    }

    /// `running` or `sleeping`.
    pub fn name(self) -> &'static str {
        match self {
            ThreadState::Running => "running",
            ThreadState::Sleeping => "sleeping",
        }
    }
}

/// `si_overrun` of a POSIX timer's siginfo (after `si_tid`, at byte 20): expirations that
/// happened before the signal was delivered, each a sample the thread earned.
///
/// # Safety
/// `info` points at the siginfo the kernel passed, with `si_code` SI_TIMER.
unsafe fn si_overrun(info: *const libc::siginfo_t) -> c_int {
    // SAFETY: the caller's contract; siginfo_t is 128 bytes.
    unsafe { *(info as *const u8).add(20).cast::<c_int>() }
}

/// `si_code`s of a signal from a file descriptor (`POLL_IN` … `POLL_HUP` in `<signal.h>`).
const POLL_IN: c_int = 1;
const POLL_HUP: c_int = 6;

/// `si_fd` of a SIGPOLL-style siginfo (after `si_band`, at byte 24 on 64-bit Linux).
///
/// # Safety
/// `info` points at the siginfo the kernel passed.
unsafe fn si_fd(info: *const libc::siginfo_t) -> c_int {
    // SAFETY: the caller's contract; siginfo_t is 128 bytes.
    unsafe { *(info as *const u8).add(24).cast::<c_int>() }
}

extern "C" fn handle(signal: c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
    // SAFETY: errno is thread-local; reading and restoring it is async-signal-safe.
    let errno = unsafe { *libc::__errno_location() };
    // SAFETY: the kernel passes a valid siginfo and ucontext to an SA_SIGINFO handler.
    if !unsafe { take(signal, info, context) } {
        // SAFETY: as above; the previous handler expects what the kernel passed.
        unsafe { chain(signal, info, context) };
    }
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

/// Records a sample if the signal is ours; false if it is someone else's.
///
/// # Safety
/// `info` and `context` are what the kernel passed to the handler.
unsafe fn take(signal: c_int, info: *mut libc::siginfo_t, context: *mut c_void) -> bool {
    if info.is_null() {
        return false;
    }
    // SAFETY: the caller's contract.
    let Some(source) = (unsafe { Source::of(signal, info) }) else {
        return false;
    };
    let slot = source.slot();
    if !slot.active.load(Ordering::Acquire) {
        return false;
    }
    let Some(_pass) = slot.gate.enter() else {
        return true;
    };
    let target = slot.target.load(Ordering::Acquire);
    // The perf_event descriptor that signalled, if it is one of ours.
    let perf_fd = if source == Source::PerfEvent {
        // SAFETY: the caller's contract; si_fd is meaningful for POLL_* codes.
        Some(unsafe { si_fd(info) }).filter(|&fd| perf::is_ours(fd))
    } else {
        None
    };
    if !target.is_null() {
        // SAFETY: the target stays alive while the gate is open (deactivate drains it first).
        let target = unsafe { &*target };
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) } as i32;
        let count = match source {
            // SAFETY: the caller's contract; SI_TIMER siginfo carries the overrun.
            Source::PosixTimer => 1 + unsafe { si_overrun(info) }.clamp(0, 1000) as u32,
            // The ticks signalled since the thread's last sample (see `owed`); none when an
            // earlier sample took this signal's.
            Source::Tgkill => target.owed.take(tid).unwrap_or(1),
            Source::PerfEvent | Source::Itimer => 1,
        };
        if count > 0 {
            // SAFETY: the caller's contract for context.
            unsafe {
                record(
                    target,
                    context,
                    tid,
                    source == Source::Tgkill,
                    count,
                    perf_fd,
                )
            };
        }
    }
    if let Some(fd) = perf_fd.filter(|&fd| perf::rearms(fd)) {
        // SAFETY: re-arms one more overflow on our own perf_event descriptor.
        unsafe { perf_event_open_sys::ioctls::REFRESH(fd, 1) };
    }
    true
}

/// Records one sample of thread `tid` (the caller) standing for `count` events: the Java
/// frames, the thread's state when `with_state`, and the call chain in the ring of `perf_fd`
/// (the descriptor that signalled this thread), if any.
///
/// # Safety
/// `context` is the handler's ucontext, on the sampled thread.
unsafe fn record(
    target: &Target,
    context: *mut c_void,
    tid: i32,
    with_state: bool,
    count: u32,
    perf_fd: Option<c_int>,
) {
    let Some(mut claim) = target.buffer.claim() else {
        return;
    };
    let time_ns = monotonic_ns();
    let (mut recovered, mut caller_pc) = (recover::NOT_RECOVERED, 0);
    let mut walked = Walked::default();
    let jni = target.vm_threads.current_jni(target.vm);
    // SAFETY: `jni` is this thread's.
    let virtual_thread = jni.and_then(|jni| target.walker.and_then(|w| unsafe { w.mounted(jni) }));
    let num_frames = match jni {
        Some(jni) => {
            let frames = claim.frames();
            // SAFETY: the caller's contract; `jni` is this thread's.
            walked = unsafe {
                walk(
                    target,
                    jni,
                    frames,
                    context,
                    TopPc::Anywhere(recover::frame_set_up),
                )
            };
            // Where a safepoint poll trapped, the walk starts at the poll.
            let trapped_poll = (walked.num_frames == UNKNOWN_JAVA)
                .then(|| {
                    let poll_pc = || target.walker?.trapped_pc(jni);
                    // SAFETY: the caller's contract.
                    unsafe { recover::at_trapped_poll(context, poll_pc) }
                })
                .flatten();
            let mut at_poll;
            let context = match trapped_poll {
                Some((copy, poll)) => {
                    at_poll = copy;
                    let at_poll = &mut at_poll as *mut libc::ucontext_t as *mut c_void;
                    // SAFETY: a copy of the caller's context, on this thread's stack.
                    walked = unsafe {
                        walk(
                            target,
                            jni,
                            frames,
                            at_poll,
                            TopPc::Anywhere(recover::frame_set_up),
                        )
                    };
                    (recovered, caller_pc) = (recover::FROM_POLL, poll as u64);
                    at_poll
                }
                None => context,
            };
            if walked.num_frames == UNKNOWN_JAVA {
                // SAFETY: `jni` is this thread's, and a signal handler runs on the thread.
                let stack = target.walker.and_then(|w| unsafe { w.stack(jni) });
                let mut from_caller = |context: *mut c_void| {
                    // SAFETY: as above; the context's pc is a return address.
                    walked = unsafe { walk(target, jni, frames, context, TopPc::AtReturn) };
                    walked.num_frames
                };
                // SAFETY: the caller's contract; `stack` is this thread's; `from_caller` only
                // walks.
                let retried =
                    unsafe { recover::retry_from_caller(context, stack, &mut from_caller) };
                match retried {
                    Some((_, what, from)) => (recovered, caller_pc) = (what, from),
                    None => {
                        walked.num_frames = UNKNOWN_JAVA;
                        (recovered, caller_pc) = (recover::NOT_RECOVERED, 0);
                    }
                }
            }
            walked.num_frames
        }
        None => -3, // not a VM thread: AsyncGetCallTrace's "unknown, not Java"
    };
    let stack_hash = match claim.frames().get(..num_frames.max(0) as usize) {
        Some(frames) if walked.by == WALKED_BY_VM => stack_hash(frames),
        _ => 0,
    };
    // SAFETY: the caller's contract.
    let state = with_state.then(|| unsafe { interrupted_state(context) });
    let mut user_regs = [0u64; 3];
    // SAFETY: the caller's contract.
    let pc = unsafe { interrupted_pc(context) };
    // Native frames are those above the Java ones: none when the thread was in the code
    // cache (JIT code, the interpreter, stubs), which needs neither a copy of the stack to
    // unwind nor the user frames of the kernel's call chain (its frame-pointer walk through
    // Java frames, which the processing thread would drop).
    let native_top = !target
        .walker
        .is_some_and(|walker| walker.code_range().contains(&(pc as usize)));
    let (chain, stack) = match perf_fd {
        Some(fd) => {
            let (chain, bytes) = claim.chain_and_stack();
            let user = perf::UserStack {
                regs: &mut user_regs,
                bytes: if native_top { bytes } else { &mut [] },
            };
            perf::take_sample(fd, tid, chain, native_top, user)
        }
        None if target.copies_stacks && native_top => {
            let (_, bytes) = claim.chain_and_stack();
            // SAFETY: the caller's contract.
            (0, unsafe { copy_own_stack(context, &mut user_regs, bytes) })
        }
        None => (0, 0),
    };
    // Read last, so that the handler's own time does not count as the thread's running.
    let asleep_at_cpu_ns = match state {
        Some(ThreadState::Sleeping) => clock_ns(libc::CLOCK_THREAD_CPUTIME_ID),
        _ => 0,
    };
    claim.commit(SampleHeader {
        tid,
        time_ns,
        num_frames,
        weight: target.weight.load(Ordering::Relaxed),
        count,
        state: state.map_or(0, |state| state as u8),
        asleep_at_cpu_ns,
        pc,
        recovered,
        caller_pc,
        walker: walked.by,
        checked: walked.checked,
        stack_hash,
        virtual_thread,
        label: crate::label::current(crate::label::key(tid, virtual_thread.map(|m| m.id))),
        user_regs,
        chain: u16::try_from(chain).unwrap_or(u16::MAX),
        stack: u16::try_from(stack).unwrap_or(0),
    });
}

/// A 64-bit hash of the frames (method, bytecode index, kind) of a stack: one full 64×64-bit
/// multiply per frame (wyhash's mixing), so that two of the stacks a program runs practically
/// never share one. Never 0.
fn stack_hash(frames: &[CallFrame]) -> u64 {
    const SEED: u64 = 0xa076_1d64_78bd_642f;
    const SITE: u64 = 0xe703_7ed1_a0b4_28db;
    let mix = |a: u64, b: u64| {
        let product = u128::from(a) * u128::from(b);
        product as u64 ^ (product >> 64) as u64
    };
    let start = SEED ^ frames.len() as u64;
    let hash = frames.iter().fold(start, |hash, frame| {
        let site = u64::from(frame.bci as u32) << 8 | u64::from(frame.kind);
        mix(hash ^ frame.method as u64, site ^ SITE)
    });
    hash.max(1)
}

/// A walk's result: frames written (or `AsyncGetCallTrace`'s failure code), by whom
/// (`WALKED_BY_*`), and, where both walked and differed, jtap's walker's frame count.
#[derive(Default, Clone, Copy)]
struct Walked {
    num_frames: i32,
    by: u8,
    checked: u16,
}

/// Walks the interrupted thread's Java stack into `frames` as `target.walks` says. `top` says
/// where in its code the top frame stopped (see [`Walker::interrupted`]).
///
/// # Safety
/// `context` is the handler's ucontext (or a copy of it with a caller's registers), on the
/// sampled thread, whose JNIEnv is `jni`.
unsafe fn walk(
    target: &Target,
    jni: *mut sys::JNIEnv,
    frames: &mut [CallFrame],
    context: *mut c_void,
    top: TopPc,
) -> Walked {
    let asgct = |frames: &mut [CallFrame]| {
        let mut trace = CallTrace {
            env: jni,
            num_frames: 0,
            frames: frames.as_mut_ptr(),
        };
        // SAFETY: the trace has room for `frames.len()` frames; the context is the caller's.
        unsafe { (target.asgct)(&mut trace, frames.len() as i32, context) };
        trace.num_frames
    };
    let trusted = !target.distrusted.load(Ordering::Relaxed);
    let walker = match (target.walker, target.walks) {
        (Some(walker), Walks::Vm) if trusted => walker,
        (Some(walker), Walks::Check) => walker,
        _ => {
            return Walked {
                num_frames: asgct(frames),
                by: WALKED_BY_ASGCT,
                checked: 0,
            }
        }
    };
    // SAFETY: the caller's contract.
    let registers = unsafe { interrupted_registers(context) };
    let vm_walk = |frames: &mut [CallFrame]| match registers {
        // SAFETY: `jni` is this thread's; the registers are its signal's.
        Some(registers) => unsafe { walker.interrupted(jni, registers, top, frames) }
            .inspect_err(|&stop| target.stats.stopped(stop)),
        None => Err(Stop::Inconsistent),
    };
    if target.walks == Walks::Vm && !target.verifies_next() {
        match vm_walk(frames) {
            Ok(walked) => {
                target.stats.walked();
                return Walked {
                    num_frames: walked.count as i32,
                    by: WALKED_BY_VM,
                    checked: 0,
                };
            }
            // What AsyncGetCallTrace would say without walking: the caller's frame is then
            // found from the code (see `recover`).
            Err(Stop::NotSetUp) => {
                return Walked {
                    num_frames: UNKNOWN_JAVA,
                    by: WALKED_BY_ASGCT,
                    checked: 0,
                }
            }
            Err(_) => {}
        }
        return Walked {
            num_frames: asgct(frames),
            by: WALKED_BY_ASGCT,
            checked: 0,
        };
    }
    let (kept, theirs) = frames.split_at_mut(frames.len() / 2);
    let ours = vm_walk(theirs).ok();
    let num_frames = asgct(kept);
    let mut walked = Walked {
        num_frames,
        by: WALKED_BY_ASGCT,
        checked: 0,
    };
    let compared = ours.filter(|_| num_frames > 0).and_then(|ours| {
        let walked_by_both = (theirs.get(..ours.count)?, kept.get(..num_frames as usize)?);
        Some((ours, walked_by_both))
    });
    if let Some((ours, (ours_frames, asgct_frames))) = compared {
        let count = ours.count;
        let comparison = compare(ours_frames, asgct_frames, ours);
        target.stats.compared(comparison);
        if comparison == Comparison::Differed && target.walks == Walks::Vm {
            target.distrusted.store(true, Ordering::Relaxed);
        }
        match (comparison, target.walks) {
            (Comparison::Same, Walks::Check) => {}
            (Comparison::Differed, _) | (_, Walks::Check) => {
                walked.by = WALKS_DIFFERED;
                walked.checked = count as u16;
            }
            // Where they agree but for what jtap's walker reads better (frozen frames, frames
            // below where the other stopped, the descriptor at a call), the stack of the walker
            // asked for (`vm`: only it and `check` walk both ways) is jtap's.
            _ => {
                let count = count.min(kept.len());
                for (to, from) in kept.iter_mut().zip(ours_frames) {
                    *to = *from;
                }
                target.stats.walked();
                walked = Walked {
                    num_frames: count as i32,
                    by: WALKED_BY_VM,
                    checked: 0,
                };
            }
        }
    }
    walked
}

/// How jtap's walker's frames (`ours`, kinds known, from the walk `walked`) compare with
/// `AsyncGetCallTrace`'s. A stack may differ in several accepted ways at once (the top frame's
/// scopes, and frames read from stack chunks or below where the other stopped); it is
/// counted by the first of them from the top.
fn compare(ours: &[CallFrame], theirs: &[CallFrame], walked: Interrupted) -> Comparison {
    match below(ours, theirs, walked.read_frozen, false) {
        Some(Below::Same) => return Comparison::Same,
        Some(Below::Further) => return Comparison::WentFurther,
        Some(Below::Frozen) => return Comparison::ReadFrozen,
        None => {}
    }
    // The interrupted frame's scopes: its inlined methods, then the compiled one.
    let top = ours
        .iter()
        .position(|f| f.kind() != Some(Kind::Inlined))
        .map_or(ours.len(), |i| i + 1);
    let callers = ours.get(top..).unwrap_or_default();
    let compiled = ours.get(top.wrapping_sub(1));
    let compiled_top = compiled.and_then(CallFrame::kind) == Some(Kind::Compiled);
    let compiled = compiled.map(|frame| frame.method);
    // Their scopes of the same compiled method, then our callers.
    let scopes_only = compiled_top
        && theirs.iter().enumerate().any(|(i, frame)| {
            Some(frame.method) == compiled
                && below(
                    callers,
                    theirs.get(i + 1..).unwrap_or_default(),
                    walked.read_frozen,
                    true,
                )
                .is_some()
        });
    match (scopes_only, walked.began) {
        (true, Began::Signal) if walked.top_at_descriptor => Comparison::DifferedAtDescriptor,
        (true, Began::Signal) => Comparison::DifferedAtTop,
        (true, Began::Anchor | Began::StubReturn) => Comparison::DifferedAtDescriptor,
        (false, _) => Comparison::Differed,
    }
}

/// How our frames compare with theirs from one frame down, where they agree.
enum Below {
    Same,
    /// Theirs stopped early.
    Further,
    /// Ours has frames between two of theirs: read from stack chunks.
    Frozen,
}

/// How `ours` compares with `theirs` if they agree but for the accepted differences of
/// [`Below`]; `anchored` when the frame above both is known to be the same (frozen frames may
/// then come first).
fn below(
    ours: &[CallFrame],
    theirs: &[CallFrame],
    read_frozen: bool,
    anchored: bool,
) -> Option<Below> {
    let same = |a: &CallFrame, b: &CallFrame| a.method == b.method && a.bci == b.bci;
    let common = ours
        .iter()
        .zip(theirs)
        .take_while(|(a, b)| same(a, b))
        .count();
    if common == theirs.len() {
        return Some(match ours.len() == theirs.len() {
            true => Below::Same,
            false => Below::Further,
        });
    }
    let common_bottom = ours
        .iter()
        .rev()
        .zip(theirs.iter().rev())
        .take_while(|(a, b)| same(a, b))
        .count();
    let frozen = read_frozen
        && (anchored || common > 0)
        && common + common_bottom >= theirs.len()
        && ours.len() > theirs.len();
    frozen.then_some(Below::Frozen)
}

/// The interrupted pc, sp and fp, on x86-64 (where jtap's walker walks).
///
/// # Safety
/// `context` is the handler's ucontext (or null).
#[cfg(target_arch = "x86_64")]
unsafe fn interrupted_registers(context: *mut c_void) -> Option<(usize, usize, usize)> {
    if context.is_null() {
        return None;
    }
    // SAFETY: the caller's contract: a ucontext_t.
    let registers = unsafe { &(*(context as *const libc::ucontext_t)).uc_mcontext.gregs };
    let register = |r: c_int| registers[r as usize] as usize;
    Some((
        register(libc::REG_RIP),
        register(libc::REG_RSP),
        register(libc::REG_RBP),
    ))
}

/// jtap's walker walks x86-64 frames only.
///
/// # Safety
/// None needed; kept `unsafe` for the same signature as on x86_64.
#[cfg(not(target_arch = "x86_64"))]
unsafe fn interrupted_registers(_context: *mut c_void) -> Option<(usize, usize, usize)> {
    None
}

/// CLOCK_MONOTONIC in nanoseconds (async-signal-safe: clock_gettime is, and the vDSO serves
/// it without a system call).
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// The time of `clock`, in ns (0 if it cannot be read). Async-signal-safe.
fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid timespec to write into.
    unsafe { libc::clock_gettime(clock, &mut now) };
    (now.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(now.tv_nsec as u64)
}

/// The interrupted instruction pointer, for telling interpreted, compiled and inlined frames
/// apart (see [`super::code`]); 0 without a context.
///
/// # Safety
/// `context` is the handler's ucontext.
#[cfg(target_arch = "x86_64")]
unsafe fn interrupted_pc(context: *mut c_void) -> u64 {
    if context.is_null() {
        return 0;
    }
    // SAFETY: the caller's contract: a ucontext_t.
    let registers = unsafe { &(*(context as *const libc::ucontext_t)).uc_mcontext.gregs };
    registers[libc::REG_RIP as usize] as u64
}

/// The interrupted instruction pointer (see the x86_64 version).
///
/// # Safety
/// `context` is the handler's ucontext.
#[cfg(target_arch = "aarch64")]
unsafe fn interrupted_pc(context: *mut c_void) -> u64 {
    if context.is_null() {
        return 0;
    }
    // SAFETY: the caller's contract: a ucontext_t.
    unsafe { (*(context as *const libc::ucontext_t)).uc_mcontext.pc }
}

/// Unknown on other architectures: every frame is then classified by the heuristic.
///
/// # Safety
/// None needed; kept `unsafe` for the same signature as on x86_64.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
unsafe fn interrupted_pc(_context: *mut c_void) -> u64 {
    0
}

/// Copies the interrupted user registers (bp, sp, ip) into `regs` and the user stack from sp
/// up into `out` with `process_vm_readv` on this very process: a system call (so
/// async-signal-safe) that returns an error instead of faulting where the stack ends. The
/// range is split at page boundaries so that a read reaching past the top of the stack keeps
/// the pages before it. Returns the bytes copied (0 where the call is refused, e.g. by a
/// container's seccomp profile).
///
/// # Safety
/// `context` is the handler's ucontext.
#[cfg(target_arch = "x86_64")]
unsafe fn copy_own_stack(context: *mut c_void, regs: &mut [u64; 3], out: &mut [u8]) -> usize {
    if context.is_null() || out.is_empty() {
        return 0;
    }
    // SAFETY: the caller's contract: a ucontext_t.
    let registers = unsafe { &(*(context as *const libc::ucontext_t)).uc_mcontext.gregs };
    let sp = registers[libc::REG_RSP as usize] as usize;
    *regs = [
        registers[libc::REG_RBP as usize] as u64,
        sp as u64,
        registers[libc::REG_RIP as usize] as u64,
    ];
    const PAGE: usize = 4096;
    let mut remote = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; 4];
    let (mut at, end, mut pieces) = (sp, sp.saturating_add(out.len()), 0);
    while at < end && pieces < remote.len() {
        let next = ((at / PAGE) + 1).saturating_mul(PAGE).min(end);
        remote[pieces] = libc::iovec {
            iov_base: at as *mut c_void,
            iov_len: next - at,
        };
        (at, pieces) = (next, pieces + 1);
    }
    let local = libc::iovec {
        iov_base: out.as_mut_ptr().cast(),
        iov_len: at - sp,
    };
    // SAFETY: the local buffer is `out` (at least `at - sp` bytes); the remote ranges are
    // only read, by the kernel, which reports an unmapped one as an error.
    let copied = unsafe {
        libc::process_vm_readv(
            libc::getpid(),
            &local,
            1,
            remote.as_ptr(),
            pieces as libc::c_ulong,
            0,
        )
    };
    usize::try_from(copied).unwrap_or(0)
}

/// No stack copies on other architectures.
///
/// # Safety
/// None needed; kept `unsafe` for the same signature as on x86_64.
#[cfg(not(target_arch = "x86_64"))]
unsafe fn copy_own_stack(_context: *mut c_void, _regs: &mut [u64; 3], _out: &mut [u8]) -> usize {
    0
}

/// Whether the signal interrupted a system call: the kernel leaves the instruction pointer
/// on the `syscall` instruction (restartable call) or right after it with `-EINTR` in rax.
///
/// # Safety
/// `context` is the handler's ucontext.
#[cfg(target_arch = "x86_64")]
unsafe fn interrupted_state(context: *mut c_void) -> ThreadState {
    if context.is_null() {
        return ThreadState::Running;
    }
    // SAFETY: the caller's contract: a ucontext_t.
    let registers = unsafe { &(*(context as *const libc::ucontext_t)).uc_mcontext.gregs };
    let ip = registers[libc::REG_RIP as usize] as usize;
    let rax = registers[libc::REG_RAX as usize];
    const SYSCALL: [u8; 2] = [0x0f, 0x05];
    let at = |address: usize| code_bytes(ip, address);
    if ip >= 2
        && ((at(ip) == Some(SYSCALL))
            || (rax == -(libc::EINTR as i64) && at(ip - 2) == Some(SYSCALL)))
    {
        ThreadState::Sleeping
    } else {
        ThreadState::Running
    }
}

/// The two bytes of code at `address` near the interrupted `ip`, or None if they cannot be
/// read. Bytes in the page of `ip` are read directly: that page is mapped and readable (the
/// CPU was executing from it), as in [`recover`]'s reads of the code around a pc. Where the
/// two bytes reach into a neighbouring page (`ip` at a page's first bytes, or its last), which
/// need not be mapped, they are copied with `process_vm_readv` on this very process, a system
/// call that fails instead of faulting.
#[cfg(target_arch = "x86_64")]
fn code_bytes(ip: usize, address: usize) -> Option<[u8; 2]> {
    const PAGE: usize = 4096;
    let page = ip & !(PAGE - 1);
    let last = address.checked_add(1)?;
    if address & !(PAGE - 1) == page && last & !(PAGE - 1) == page {
        // SAFETY: both bytes lie in the page of the interrupted instruction (see above).
        return Some(unsafe { std::ptr::read_volatile(address as *const [u8; 2]) });
    }
    let mut bytes = [0u8; 2];
    let local = libc::iovec {
        iov_base: bytes.as_mut_ptr().cast(),
        iov_len: bytes.len(),
    };
    let remote = libc::iovec {
        iov_base: address as *mut c_void,
        iov_len: bytes.len(),
    };
    // SAFETY: the local buffer is `bytes` (2 bytes); the remote range is only read, by the
    // kernel, which reports an unmapped one as an error.
    let copied = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    (copied == bytes.len() as isize).then_some(bytes)
}

/// Without an instruction decoder for this architecture every thread counts as running.
///
/// # Safety
/// None needed; kept `unsafe` for the same signature as on x86_64.
#[cfg(not(target_arch = "x86_64"))]
unsafe fn interrupted_state(_context: *mut c_void) -> ThreadState {
    ThreadState::Running
}

/// Passes a signal that is not ours to the previous handler, unless that was the default
/// action or "ignore".
///
/// # Safety
/// The arguments are what the kernel passed to our handler.
unsafe fn chain(signal: c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
    let Some(slot) = SIGNALS
        .iter()
        .position(|&s| s == signal)
        .map(|i| &PREVIOUS[i])
    else {
        return;
    };
    let previous = slot.handler.load(Ordering::Relaxed);
    if previous == libc::SIG_DFL || previous == libc::SIG_IGN {
        return;
    }
    if slot.flags.load(Ordering::Relaxed) & libc::SA_SIGINFO != 0 {
        // SAFETY: an SA_SIGINFO handler has this signature.
        let function: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) =
            unsafe { std::mem::transmute(previous) };
        function(signal, info, context);
    } else {
        // SAFETY: a plain handler has this signature.
        let function: extern "C" fn(c_int) = unsafe { std::mem::transmute(previous) };
        function(signal);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn code_bytes_next_to_an_unmapped_page_are_none_not_a_fault() {
        const PAGE: usize = 4096;
        // SAFETY: a fresh anonymous mapping of two pages, the second made unreadable; both
        // unmapped at the end.
        unsafe {
            let base = libc::mmap(
                std::ptr::null_mut(),
                2 * PAGE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(base, libc::MAP_FAILED);
            let base = base as usize;
            assert_eq!(
                libc::mprotect((base + PAGE) as *mut c_void, PAGE, libc::PROT_NONE),
                0
            );
            let end = base + PAGE;
            std::ptr::write((end - 2) as *mut [u8; 2], [0x0f, 0x05]);
            assert_eq!(code_bytes(end - 2, end - 2), Some([0x0f, 0x05]));
            // Read from the unreadable page's side: through the system call, which fails.
            assert_eq!(code_bytes(end, end - 2), Some([0x0f, 0x05]));
            assert_eq!(code_bytes(end - 1, end - 1), None);
            libc::munmap(base as *mut c_void, 2 * PAGE);
        }
    }

    /// A frame of method number `method` at `bci`, of `kind` as jtap's walker writes it.
    fn frame(method: usize, bci: i32, kind: Option<Kind>) -> CallFrame {
        CallFrame {
            bci,
            kind: kind.map_or(0, |k| k as u8 + 1),
            method: method as sys::jmethodID,
        }
    }

    #[test]
    fn a_stacks_hash_tells_it_from_stacks_differing_in_any_frame() {
        let base: Vec<CallFrame> = (0..100)
            .map(|i| frame(0x7f00_0000 + 8 * (i % 3), i as i32, Some(Kind::Compiled)))
            .collect();
        let hash = stack_hash(&base);
        assert_eq!(stack_hash(&base.clone()), hash);
        let mut seen = std::collections::HashSet::from([hash, stack_hash(&[])]);
        for i in 0..base.len() {
            let mut other = base.clone();
            other[i].bci += 1;
            assert!(seen.insert(stack_hash(&other)), "bci of frame {i}");
            other[i].bci -= 1;
            other[i].kind = Kind::Inlined as u8 + 1;
            assert!(seen.insert(stack_hash(&other)), "kind of frame {i}");
            other[i].kind = base[i].kind;
            other[i].method = 0x7f00_1000 as sys::jmethodID;
            assert!(seen.insert(stack_hash(&other)), "method of frame {i}");
        }
        assert!(seen.insert(stack_hash(&base[1..])), "one frame fewer");
        assert!(!seen.contains(&0));
    }

    #[test]
    fn walks_differing_only_in_the_top_compiled_frames_scopes_are_told_apart() {
        use Kind::{Compiled, Inlined, Interpreted};
        // jtap's: 3 inlined into 2, compiled, called from 1, interpreted.
        let ours = [
            frame(3, 4, Some(Inlined)),
            frame(2, 18, Some(Compiled)),
            frame(1, 7, Some(Interpreted)),
        ];
        let plain = |frames: &[(usize, i32)]| -> Vec<CallFrame> {
            frames.iter().map(|&(m, b)| frame(m, b, None)).collect()
        };
        let same = plain(&[(3, 4), (2, 18), (1, 7)]);
        let later_scope = plain(&[(2, 21), (1, 7)]);
        let shorter = plain(&[(3, 4), (2, 18)]);
        let other_caller = plain(&[(2, 21), (1, 9)]);
        // Seen on Jetty, JDK 11: `AsyncGetCallTrace` took another descriptor of the top
        // frame and stopped before its caller (at a call from the VM).
        let later_scope_stopped = plain(&[(2, -1)]);
        let walked = |began| Interrupted {
            count: 0,
            began,
            read_frozen: false,
            top_at_descriptor: false,
        };
        for began in [Began::Signal, Began::Anchor] {
            assert_eq!(compare(&ours, &same, walked(began)), Comparison::Same);
            assert_eq!(
                compare(&ours, &shorter, walked(began)),
                Comparison::WentFurther
            );
            assert_eq!(
                compare(&ours, &other_caller, walked(began)),
                Comparison::Differed
            );
        }
        assert_eq!(
            compare(&ours, &later_scope, walked(Began::Signal)),
            Comparison::DifferedAtTop
        );
        assert_eq!(
            compare(&ours, &later_scope, walked(Began::Anchor)),
            Comparison::DifferedAtDescriptor
        );
        let at_descriptor = Interrupted {
            top_at_descriptor: true,
            ..walked(Began::Signal)
        };
        assert_eq!(
            compare(&ours, &later_scope, at_descriptor),
            Comparison::DifferedAtDescriptor
        );
        assert_eq!(
            compare(&ours, &later_scope_stopped, walked(Began::Signal)),
            Comparison::DifferedAtTop
        );
        // An interpreted top frame has no scopes to differ in.
        let interpreted = [
            frame(2, 18, Some(Interpreted)),
            frame(1, 7, Some(Interpreted)),
        ];
        assert_eq!(
            compare(&interpreted, &later_scope, walked(Began::Signal)),
            Comparison::Differed
        );
    }

    #[test]
    fn frames_read_from_stack_chunks_are_told_apart_from_other_differences() {
        use Kind::{Compiled, Interpreted};
        // jtap's: 4 thawed, 3 and 2 frozen in a stack chunk, 1 the continuation's entry.
        let ours = [
            frame(4, 1, Some(Compiled)),
            frame(3, 2, Some(Compiled)),
            frame(2, 3, Some(Interpreted)),
            frame(1, 4, Some(Compiled)),
        ];
        let skipped = [frame(4, 1, None), frame(1, 4, None)];
        let frozen = Interrupted {
            count: ours.len(),
            began: Began::Signal,
            read_frozen: true,
            top_at_descriptor: false,
        };
        assert_eq!(compare(&ours, &skipped, frozen), Comparison::ReadFrozen);
        let other_bottom = [frame(4, 1, None), frame(9, 4, None)];
        assert_eq!(compare(&ours, &other_bottom, frozen), Comparison::Differed);
        let not_frozen = Interrupted {
            read_frozen: false,
            ..frozen
        };
        assert_eq!(compare(&ours, &skipped, not_frozen), Comparison::Differed);
        // Seen on JDK 21 with ZGC: the top frame's descriptor differs as well.
        let other_descriptor = [frame(4, 7, None), frame(1, 4, None)];
        assert_eq!(
            compare(&ours, &other_descriptor, frozen),
            Comparison::DifferedAtTop
        );
        assert_eq!(
            compare(&ours, &other_descriptor, not_frozen),
            Comparison::Differed
        );
    }
}
