//! Per-thread perf_event counters, the signal source of the `cpu` and `perf` engines: each
//! thread's counter overflows every period of its event and signals that very thread
//! (`F_SETOWN_EX` + `F_OWNER_TID`, `O_ASYNC`, `F_SETSIG` SIGPROF); each overflow disables
//! the counter until the handler re-arms it (`PERF_EVENT_IOC_REFRESH`). Counters follow
//! threads through ThreadStart/ThreadEnd ([`super::threads`]), and record the call chain
//! (and with `cstack=dwarf` the user registers and a stack copy) into a ring per thread
//! ([`super::perf`]).

use std::collections::HashMap;
use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use jtap_protocol::NativeStacks;
use perf_event_open_sys as perf;

use super::perf::{self as perf_fds, Ring};
use super::signal::CPU_SIGNAL;
use super::threads::{self, ThreadTimer};

/// `fcntl` commands and the owner structure of `<fcntl.h>` that the libc crate does not
/// declare for glibc targets (values from the Linux UAPI, the same on every architecture).
mod fcntl {
    pub const F_SETSIG: libc::c_int = 10;
    pub const F_SETOWN_EX: libc::c_int = 15;
    pub const F_OWNER_TID: libc::c_int = 0;

    /// `struct f_owner_ex`.
    #[repr(C)]
    pub struct OwnerEx {
        pub kind: libc::c_int,
        pub pid: libc::pid_t,
    }
}

/// What a counter counts: a perf_event type and config, and how many events make a sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counter {
    /// `PERF_TYPE_*`.
    pub kind: u32,
    /// The event within its type (`PERF_COUNT_SW_*`, a tracepoint's id, ...).
    pub config: u64,
    /// Events between samples (nanoseconds for the clocks).
    pub period: u64,
    /// Stays enabled, signalling every overflow, instead of being re-armed by the handler
    /// after each: tracepoints, whose overflow comes as the thread is switched out, when a
    /// re-arm races with the kernel's deferred disable and leaves the counter off.
    pub continuous: bool,
}

impl Counter {
    /// CPU time, a sample every `period` of it.
    pub fn cpu_clock(period: Duration) -> Counter {
        Counter {
            kind: perf::bindings::PERF_TYPE_SOFTWARE,
            config: u64::from(perf::bindings::PERF_COUNT_SW_CPU_CLOCK),
            period: (period.as_nanos() as u64).max(1),
            continuous: false,
        }
    }
}

/// One perf_event counter per thread, with the ring its call chains (and stack copies) go
/// to (none where it could not be mapped).
pub struct PerfCounters {
    counter: Counter,
    user_only: bool,
    native: NativeStacks,
    fds: HashMap<i32, (RawFd, Option<Ring>)>,
    /// Threads whose ring could not be mapped (logged once).
    ringless: u64,
    /// Threads that fell back from `dwarf` to `fp` (logged once).
    without_stacks: u64,
}

impl PerfCounters {
    /// Counters of `counter` (`user_only`: user-mode events only), with native frames taken
    /// as `native` says.
    pub fn new(counter: Counter, user_only: bool, native: NativeStacks) -> PerfCounters {
        PerfCounters {
            counter,
            user_only,
            native,
            fds: HashMap::new(),
            ringless: 0,
            without_stacks: 0,
        }
    }

    fn open(&self, tid: i32, native: NativeStacks) -> io::Result<RawFd> {
        use perf::bindings::{
            PERF_SAMPLE_CALLCHAIN, PERF_SAMPLE_REGS_USER, PERF_SAMPLE_STACK_USER,
        };
        let sample_type = match native {
            NativeStacks::Dwarf => {
                PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER
            }
            NativeStacks::FramePointers => PERF_SAMPLE_CALLCHAIN,
            NativeStacks::No => 0,
        };
        let mut attr = perf::bindings::perf_event_attr {
            type_: self.counter.kind,
            size: std::mem::size_of::<perf::bindings::perf_event_attr>() as u32,
            config: self.counter.config,
            sample_type: u64::from(sample_type),
            ..Default::default()
        };
        if native == NativeStacks::Dwarf {
            attr.sample_regs_user = perf_fds::USER_REGS;
            attr.sample_stack_user = perf_fds::STACK_BYTES as u32;
        }
        attr.__bindgen_anon_1.sample_period = self.counter.period.max(1);
        attr.__bindgen_anon_2.wakeup_events = 1;
        attr.set_disabled(1);
        if self.user_only {
            attr.set_exclude_kernel(1);
            attr.set_exclude_callchain_kernel(1);
        }
        // SAFETY: a filled-in attr of the size it declares; pid is one of our threads.
        let fd = unsafe {
            perf::perf_event_open(
                &mut attr,
                tid,
                -1,
                -1,
                perf::bindings::PERF_FLAG_FD_CLOEXEC as _,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(fd)
    }

    /// Opens the counter of thread `tid` and maps its ring, falling back from `dwarf` to `fp`
    /// where the larger ring cannot be mapped.
    fn open_with_ring(&mut self, tid: i32) -> io::Result<(RawFd, Option<Ring>)> {
        let fd = self.open(tid, self.native)?;
        if self.native == NativeStacks::No {
            return Ok((fd, None));
        }
        let with_stack = self.native == NativeStacks::Dwarf;
        let e = match Ring::map(fd, with_stack) {
            Ok(ring) => return Ok((fd, Some(ring))),
            Err(e) => e,
        };
        let fd = if with_stack {
            if self.without_stacks == 0 {
                log!("perf: no stack-copy ring for thread {tid} ({e}); its native frames come from frame pointers");
            }
            self.without_stacks += 1;
            // SAFETY: our own descriptor, not yet registered anywhere.
            unsafe { libc::close(fd) };
            let fd = self.open(tid, NativeStacks::FramePointers)?;
            match Ring::map(fd, false) {
                Ok(ring) => return Ok((fd, Some(ring))),
                Err(_) => fd,
            }
        } else {
            fd
        };
        if self.ringless == 0 {
            log!(
                "perf: no call-chain ring for thread {tid} ({e}); its samples have Java frames only"
            );
        }
        self.ringless += 1;
        Ok((fd, None))
    }

    /// Routes the descriptor's overflow signal to thread `tid` and starts the counter.
    fn route(fd: RawFd, tid: i32, continuous: bool) -> io::Result<()> {
        let owner = fcntl::OwnerEx {
            kind: fcntl::F_OWNER_TID,
            pid: tid,
        };
        // SAFETY: fcntl/ioctl on a perf_event descriptor we just opened.
        let ok = unsafe {
            libc::fcntl(fd, libc::F_SETFL, libc::O_ASYNC) == 0
                && libc::fcntl(fd, fcntl::F_SETSIG, CPU_SIGNAL) == 0
                && libc::fcntl(fd, fcntl::F_SETOWN_EX, &owner as *const fcntl::OwnerEx) == 0
                && perf::ioctls::RESET(fd, 0) == 0
                && if continuous {
                    perf::ioctls::ENABLE(fd, 0) == 0
                } else {
                    perf::ioctls::REFRESH(fd, 1) == 0
                }
        };
        if ok {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Checks that counters of `counter` work here (on the calling thread).
    pub fn probe(counter: Counter, user_only: bool) -> io::Result<()> {
        let counters = PerfCounters::new(counter, user_only, NativeStacks::FramePointers);
        let fd = counters.open(threads::current_tid(), NativeStacks::FramePointers)?;
        // SAFETY: closing the descriptor we just opened.
        unsafe { libc::close(fd) };
        Ok(())
    }
}

impl ThreadTimer for PerfCounters {
    fn arm(&mut self, tid: i32) -> io::Result<()> {
        let (fd, ring) = self.open_with_ring(tid)?;
        if !perf_fds::register(fd, ring.as_ref(), self.counter.continuous, tid) {
            drop(ring);
            // SAFETY: our own descriptor.
            unsafe { libc::close(fd) };
            return Err(io::Error::other(format!(
                "descriptor {fd} is too high to track"
            )));
        }
        if let Err(e) = Self::route(fd, tid, self.counter.continuous) {
            perf_fds::unregister(fd);
            drop(ring);
            // SAFETY: our own descriptor.
            unsafe { libc::close(fd) };
            return Err(e);
        }
        self.fds.insert(tid, (fd, ring));
        Ok(())
    }

    fn disarm(&mut self, tid: i32) {
        if let Some((fd, ring)) = self.fds.remove(&tid) {
            // Forgotten before the ring goes: a handler on this thread (the only one that
            // reads the ring) then leaves it alone.
            perf_fds::unregister(fd);
            // SAFETY: our own descriptor, disabled then closed once.
            unsafe { perf::ioctls::DISABLE(fd, 0) };
            drop(ring);
            // SAFETY: as above.
            unsafe { libc::close(fd) };
        }
    }
}
