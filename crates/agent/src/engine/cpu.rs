//! The `cpu` engine: a perf_events software counter (`cpu-clock`) on each thread, which
//! overflows every interval of the thread's CPU time. Its descriptor is set to signal that
//! very thread (`F_SETOWN_EX` + `F_OWNER_TID`, `O_ASYNC`, `F_SETSIG` SIGPROF); each overflow
//! disables the counter until the handler re-arms it (`PERF_EVENT_IOC_REFRESH`). Counters
//! follow threads through ThreadStart/ThreadEnd.
//!
//! Each counter also records the sampled thread's call chain (`PERF_SAMPLE_CALLCHAIN`) into
//! a ring buffer mapped per thread, which the handler copies next to the Java frames: the
//! native frames under a JNI method, the JVM's own C++ frames, and kernel frames (see
//! [`crate::sampling::perf`]). With `alluser` the counters count user-mode CPU time only
//! (`exclude_kernel`, as async-profiler's `--all-user`), so no sample has kernel frames;
//! that also works where `perf_event_paranoid` 2 forbids unprivileged users to sample the
//! kernel. `cstack=` chooses how native frames are walked: `dwarf` (the default) also has
//! the kernel copy the user registers and the top of the stack with each sample, for the
//! processing thread to unwind with the libraries' call-frame information (see
//! [`crate::sampling::perf`]); `fp` keeps the kernel's frame-pointer walk alone; `no` asks
//! for no call chain (Java frames only). Where a thread's larger DWARF ring cannot be mapped
//! (the locked-memory limit), that thread falls back to `fp`.
//!
//! Where `perf_event_open` fails (a container's seccomp profile, `perf_event_paranoid` 3),
//! the engine falls back to `ctimer`, then to `itimer`, and the profile's metadata names
//! the engine that ran.

use std::collections::HashMap;
use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use jtap_jvmti::Capabilities;
use jtap_protocol::{NativeStacks, Options};
use perf_event_open_sys as perf;

use super::ctimer::CtimerEngine;
use super::itimer::ItimerEngine;
use super::{interval, Context, Engine, Report, CPU_INTERVAL};
use crate::sampling::perf::{self as perf_fds, Ring};
use crate::sampling::signal::{Source, CPU_SIGNAL};
use crate::sampling::threads::{self, ThreadTimer};
use crate::sampling::{self, Sampler, Settings};

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

/// The engine: perf_events when they work, else a fallback engine.
#[derive(Default)]
pub struct CpuEngine {
    sampler: Option<Sampler>,
    fallback: Option<Box<dyn Engine>>,
}

/// One perf_event counter per thread, with the ring its call chains (and stack copies) go
/// to (none where it could not be mapped).
struct PerfCounters {
    period: Duration,
    user_only: bool,
    native: NativeStacks,
    fds: HashMap<i32, (RawFd, Option<Ring>)>,
    /// Threads whose ring could not be mapped (logged once).
    ringless: u64,
    /// Threads that fell back from `dwarf` to `fp` (logged once).
    without_stacks: u64,
}

impl PerfCounters {
    fn new(period: Duration, user_only: bool, native: NativeStacks) -> PerfCounters {
        PerfCounters {
            period,
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
            type_: perf::bindings::PERF_TYPE_SOFTWARE,
            size: std::mem::size_of::<perf::bindings::perf_event_attr>() as u32,
            config: u64::from(perf::bindings::PERF_COUNT_SW_CPU_CLOCK),
            sample_type: u64::from(sample_type),
            ..Default::default()
        };
        if native == NativeStacks::Dwarf {
            attr.sample_regs_user = perf_fds::USER_REGS;
            attr.sample_stack_user = perf_fds::STACK_BYTES as u32;
        }
        attr.__bindgen_anon_1.sample_period = (self.period.as_nanos() as u64).max(1);
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
                log!("cpu: no stack-copy ring for thread {tid} ({e}); its native frames come from frame pointers");
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
                "cpu: no call-chain ring for thread {tid} ({e}); its samples have Java frames only"
            );
        }
        self.ringless += 1;
        Ok((fd, None))
    }

    /// Routes the descriptor's overflow signal to thread `tid` and starts the counter.
    fn route(fd: RawFd, tid: i32) -> io::Result<()> {
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
                && perf::ioctls::REFRESH(fd, 1) == 0
        };
        if ok {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Checks that counters work here (on the calling thread).
    fn probe(period: Duration, user_only: bool) -> io::Result<()> {
        let counters = PerfCounters::new(period, user_only, NativeStacks::FramePointers);
        let fd = counters.open(threads::current_tid(), NativeStacks::FramePointers)?;
        // SAFETY: closing the descriptor we just opened.
        unsafe { libc::close(fd) };
        Ok(())
    }
}

impl ThreadTimer for PerfCounters {
    fn arm(&mut self, tid: i32) -> io::Result<()> {
        let (fd, ring) = self.open_with_ring(tid)?;
        if !perf_fds::register(fd, ring.as_ref()) {
            drop(ring);
            // SAFETY: our own descriptor.
            unsafe { libc::close(fd) };
            return Err(io::Error::other(format!(
                "descriptor {fd} is too high to track"
            )));
        }
        if let Err(e) = Self::route(fd, tid) {
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

impl Engine for CpuEngine {
    fn name(&self) -> &'static str {
        self.fallback.as_ref().map_or("cpu", |f| f.name())
    }

    fn capabilities(&self) -> Capabilities {
        sampling::capabilities()
    }

    fn start(&mut self, context: &Context, options: &Options) -> Result<(), String> {
        let period = interval(options, CPU_INTERVAL);
        if let Err(e) = PerfCounters::probe(period, options.alluser) {
            log!("cpu: perf_event_open failed ({e}); falling back to ctimer");
            let mut ctimer: Box<dyn Engine> = Box::new(CtimerEngine::new("cpu"));
            let started = ctimer.start(context, options).or_else(|e| {
                log!("cpu: ctimer failed ({e}); falling back to itimer");
                ctimer = Box::new(ItimerEngine::new("cpu"));
                ctimer.start(context, options)
            });
            started?;
            self.fallback = Some(ctimer);
            return Ok(());
        }
        let settings = Settings::from_options(options, "cpu", "cpu", period, Source::PerfEvent)?;
        let sampler = Sampler::start(context.env, context.vm, settings)?;
        match threads::arm_all(Box::new(PerfCounters::new(
            period,
            options.alluser,
            options.cstack.unwrap_or_default(),
        ))) {
            Ok(armed) => log!("cpu: perf_event counters on {armed} threads"),
            Err(e) => {
                sampler.stop();
                return Err(format!("perf_event_open: {e}"));
            }
        }
        self.sampler = Some(sampler);
        Ok(())
    }

    fn dump(&self) -> Report {
        match &self.fallback {
            Some(fallback) => fallback.dump(),
            None => Report::so_far(self.sampler.as_ref()),
        }
    }

    fn progress(&self) -> Option<(u64, u64)> {
        match &self.fallback {
            Some(fallback) => fallback.progress(),
            None => self.sampler.as_ref().map(Sampler::progress),
        }
    }

    fn stop(&mut self, context: &Context) -> Report {
        if let Some(mut fallback) = self.fallback.take() {
            return fallback.stop(context);
        }
        // Signals first (the handler then ignores stray ones), then the signal sources.
        let profile = self.sampler.take().map(Sampler::stop).unwrap_or_default();
        let failures = threads::disarm_all();
        if failures != 0 {
            log!("cpu: {failures} threads could not get a counter");
        }
        Report::Profile(Box::new(profile))
    }
}
