//! The io engine: file and socket calls of the JVM's libraries and JNI code that take at least
//! a threshold (`io=<duration>`, default 1ms), weighted by the time they took, with native and
//! Java stacks.
//!
//! Hooked ([`crate::hooks`]): `read`, `write`, `pread`/`pread64`, `pwrite`/`pwrite64`, `readv`,
//! `writev`, `send`, `sendto`, `recv`, `recvfrom`, `connect`, `accept`, `accept4`, `poll`,
//! `epoll_wait` and `select`. Each hook times the C library's call with two reads of the
//! monotonic clock (the vDSO's, about 20 ns each); a call under the threshold costs nothing
//! more. One at or above it is recorded at its site ([`crate::hooks::site`]): the call as the
//! leaf, with what its descriptor is when it has one (`read(socket)`, `write(file)`,
//! `read(pipe)`, `read(device)`: one `fstat`), then the native and the Java frames.
//!
//! Not seen: calls from the C library itself (`fread`, `getaddrinfo`), calls the JIT
//! compiles inline (none in HotSpot: Java I/O goes through JNI), and libraries loaded after
//! the start.

use std::ffi::{c_int, c_void};
use std::time::{Duration, Instant};

use jtap_jvmti::Capabilities;
use jtap_profile::event;
use jtap_protocol::Options;

use super::{Context, Engine, Report};
use crate::hooks::timed::{TimedCalls, Timing};
use crate::hooks::{entry_stub, Caller, Hook};

/// Default threshold: calls shorter than this are not recorded.
pub const DEFAULT_THRESHOLD: Duration = Duration::from_millis(1);

static CALLS: TimedCalls = TimedCalls::new(&event::IO);

/// The engine.
#[derive(Default)]
pub struct IoEngine {
    timing: Option<Timing>,
}

impl Engine for IoEngine {
    fn name(&self) -> &'static str {
        event::IO.name
    }

    /// None on the agent's environment: the hook engines' own resolves methods.
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }

    fn start(&mut self, context: &Context, options: &Options) -> Result<(), String> {
        let threshold = options.io.flatten().unwrap_or(DEFAULT_THRESHOLD);
        // SAFETY: each stub has the signature of the function it is named for (see below).
        let timing = unsafe { CALLS.start(context.vm, options, threshold, &hooked()) }?;
        self.timing = Some(timing);
        Ok(())
    }

    fn dump(&self) -> Report {
        match &self.timing {
            Some(timing) => Report::Profile(Box::new(CALLS.profile(timing))),
            None => Report::Text(format!("{}: not running", self.name())),
        }
    }

    fn stop(&mut self, _context: &Context) -> Report {
        match self.timing.take() {
            Some(timing) => Report::Profile(Box::new(CALLS.stop(timing))),
            None => Report::Text(format!("{}: not running", self.name())),
        }
    }
}

/// A call that took `start`'s elapsed time: recorded when that reaches the threshold, named
/// `name` (with its descriptor's kind when `fd` is one).
fn done(name: &'static str, fd: Option<c_int>, start: Instant, fp: usize, ret: usize) {
    let caller = Caller {
        return_address: ret,
        frame_pointer: fp,
    };
    let leaf = || match fd.and_then(kind) {
        Some(kind) => format!("{name}({kind})"),
        None => name.to_string(),
    };
    CALLS.took(start.elapsed().as_nanos() as u64, leaf, &caller);
}

/// What descriptor `fd` is: a socket, a file, a pipe or a device.
fn kind(fd: c_int) -> Option<&'static str> {
    // SAFETY: fstat writes the status of `fd` into `status`, a local of its type.
    let mode = unsafe {
        let mut status: libc::stat = std::mem::zeroed();
        (libc::fstat(fd, &mut status) == 0).then_some(status.st_mode & libc::S_IFMT)?
    };
    match mode {
        libc::S_IFSOCK => Some("socket"),
        libc::S_IFREG => Some("file"),
        libc::S_IFIFO => Some("pipe"),
        libc::S_IFCHR | libc::S_IFBLK => Some("device"),
        _ => None,
    }
}

/// The hooks, by C name.
fn hooked() -> Vec<Hook> {
    vec![
        Hook::new("read", jtap_io_read),
        Hook::new("write", jtap_io_write),
        Hook::new("pread", jtap_io_pread),
        Hook::new("pread64", jtap_io_pread),
        Hook::new("pwrite", jtap_io_pwrite),
        Hook::new("pwrite64", jtap_io_pwrite),
        Hook::new("readv", jtap_io_readv),
        Hook::new("writev", jtap_io_writev),
        Hook::new("send", jtap_io_send),
        Hook::new("sendto", jtap_io_sendto),
        Hook::new("recv", jtap_io_recv),
        Hook::new("recvfrom", jtap_io_recvfrom),
        Hook::new("connect", jtap_io_connect),
        Hook::new("accept", jtap_io_accept),
        Hook::new("accept4", jtap_io_accept4),
        Hook::new("poll", jtap_io_poll),
        Hook::new("epoll_wait", jtap_io_epoll_wait),
        Hook::new("select", jtap_io_select),
    ]
}

entry_stub!(jtap_io_read => read_hook, 3);
entry_stub!(jtap_io_write => write_hook, 3);
entry_stub!(jtap_io_pread => pread_hook, 4);
entry_stub!(jtap_io_pwrite => pwrite_hook, 4);
entry_stub!(jtap_io_readv => readv_hook, 3);
entry_stub!(jtap_io_writev => writev_hook, 3);
entry_stub!(jtap_io_send => send_hook, 4);
entry_stub!(jtap_io_sendto => sendto_hook, 6);
entry_stub!(jtap_io_recv => recv_hook, 4);
entry_stub!(jtap_io_recvfrom => recvfrom_hook, 6);
entry_stub!(jtap_io_connect => connect_hook, 3);
entry_stub!(jtap_io_accept => accept_hook, 3);
entry_stub!(jtap_io_accept4 => accept4_hook, 4);
entry_stub!(jtap_io_poll => poll_hook, 3);
entry_stub!(jtap_io_epoll_wait => epoll_wait_hook, 4);
entry_stub!(jtap_io_select => select_hook, 5);

// The hooks: each calls the C library's function with the caller's arguments, times it and
// returns what it returned ("C-unwind": these are cancellation points, and a thread cancelled
// inside one unwinds through the hook, which holds nothing to clean up).

extern "C-unwind" fn read_hook(
    fd: c_int,
    buf: *mut c_void,
    n: usize,
    fp: usize,
    ret: usize,
) -> isize {
    let start = Instant::now();
    // SAFETY: the C library's function, with the caller's arguments.
    let result = unsafe { libc::read(fd, buf, n) };
    done("read", Some(fd), start, fp, ret);
    result
}

extern "C-unwind" fn write_hook(
    fd: c_int,
    buf: *const c_void,
    n: usize,
    fp: usize,
    ret: usize,
) -> isize {
    let start = Instant::now();
    // SAFETY: the C library's function, with the caller's arguments.
    let result = unsafe { libc::write(fd, buf, n) };
    done("write", Some(fd), start, fp, ret);
    result
}

extern "C-unwind" fn pread_hook(
    fd: c_int,
    buf: *mut c_void,
    n: usize,
    offset: i64,
    fp: usize,
    ret: usize,
) -> isize {
    let start = Instant::now();
    // SAFETY: the C library's function, with the caller's arguments.
    let result = unsafe { libc::pread(fd, buf, n, offset) };
    done("pread", Some(fd), start, fp, ret);
    result
}

extern "C-unwind" fn pwrite_hook(
    fd: c_int,
    buf: *const c_void,
    n: usize,
    offset: i64,
    fp: usize,
    ret: usize,
) -> isize {
    let start = Instant::now();
    // SAFETY: the C library's function, with the caller's arguments.
    let result = unsafe { libc::pwrite(fd, buf, n, offset) };
    done("pwrite", Some(fd), start, fp, ret);
    result
}

extern "C-unwind" fn readv_hook(
    fd: c_int,
    iov: *const libc::iovec,
    count: c_int,
    fp: usize,
    ret: usize,
) -> isize {
    let start = Instant::now();
    // SAFETY: the C library's function, with the caller's arguments.
    let result = unsafe { libc::readv(fd, iov, count) };
    done("readv", Some(fd), start, fp, ret);
    result
}

extern "C-unwind" fn writev_hook(
    fd: c_int,
    iov: *const libc::iovec,
    count: c_int,
    fp: usize,
    ret: usize,
) -> isize {
    let start = Instant::now();
    // SAFETY: the C library's function, with the caller's arguments.
    let result = unsafe { libc::writev(fd, iov, count) };
    done("writev", Some(fd), start, fp, ret);
    result
}

extern "C-unwind" fn send_hook(
    fd: c_int,
    buf: *const c_void,
    n: usize,
    flags: c_int,
    fp: usize,
    ret: usize,
) -> isize {
    let start = Instant::now();
    // SAFETY: the C library's function, with the caller's arguments.
    let result = unsafe { libc::send(fd, buf, n, flags) };
    done("send", Some(fd), start, fp, ret);
    result
}

// sendto's six arguments and the stub's two.
#[allow(clippy::too_many_arguments)]
extern "C-unwind" fn sendto_hook(
    fd: c_int,
    buf: *const c_void,
    n: usize,
    flags: c_int,
    to: *const libc::sockaddr,
    length: libc::socklen_t,
    fp: usize,
    ret: usize,
) -> isize {
    let start = Instant::now();
    // SAFETY: the C library's function, with the caller's arguments.
    let result = unsafe { libc::sendto(fd, buf, n, flags, to, length) };
    done("sendto", Some(fd), start, fp, ret);
    result
}

extern "C-unwind" fn recv_hook(
    fd: c_int,
    buf: *mut c_void,
    n: usize,
    flags: c_int,
    fp: usize,
    ret: usize,
) -> isize {
    let start = Instant::now();
    // SAFETY: the C library's function, with the caller's arguments.
    let result = unsafe { libc::recv(fd, buf, n, flags) };
    done("recv", Some(fd), start, fp, ret);
    result
}

// recvfrom's six arguments and the stub's two.
#[allow(clippy::too_many_arguments)]
extern "C-unwind" fn recvfrom_hook(
    fd: c_int,
    buf: *mut c_void,
    n: usize,
    flags: c_int,
    from: *mut libc::sockaddr,
    length: *mut libc::socklen_t,
    fp: usize,
    ret: usize,
) -> isize {
    let start = Instant::now();
    // SAFETY: the C library's function, with the caller's arguments.
    let result = unsafe { libc::recvfrom(fd, buf, n, flags, from, length) };
    done("recvfrom", Some(fd), start, fp, ret);
    result
}

extern "C-unwind" fn connect_hook(
    fd: c_int,
    address: *const libc::sockaddr,
    length: libc::socklen_t,
    fp: usize,
    ret: usize,
) -> c_int {
    let start = Instant::now();
    // SAFETY: the C library's function, with the caller's arguments.
    let result = unsafe { libc::connect(fd, address, length) };
    done("connect", Some(fd), start, fp, ret);
    result
}

extern "C-unwind" fn accept_hook(
    fd: c_int,
    address: *mut libc::sockaddr,
    length: *mut libc::socklen_t,
    fp: usize,
    ret: usize,
) -> c_int {
    let start = Instant::now();
    // SAFETY: the C library's function, with the caller's arguments.
    let result = unsafe { libc::accept(fd, address, length) };
    done("accept", Some(fd), start, fp, ret);
    result
}

extern "C-unwind" fn accept4_hook(
    fd: c_int,
    address: *mut libc::sockaddr,
    length: *mut libc::socklen_t,
    flags: c_int,
    fp: usize,
    ret: usize,
) -> c_int {
    let start = Instant::now();
    // SAFETY: the C library's function, with the caller's arguments.
    let result = unsafe { libc::accept4(fd, address, length, flags) };
    done("accept4", Some(fd), start, fp, ret);
    result
}

extern "C-unwind" fn poll_hook(
    fds: *mut libc::pollfd,
    count: libc::nfds_t,
    timeout: c_int,
    fp: usize,
    ret: usize,
) -> c_int {
    let start = Instant::now();
    // SAFETY: the C library's function, with the caller's arguments.
    let result = unsafe { libc::poll(fds, count, timeout) };
    done("poll", None, start, fp, ret);
    result
}

extern "C-unwind" fn epoll_wait_hook(
    epoll: c_int,
    events: *mut libc::epoll_event,
    most: c_int,
    timeout: c_int,
    fp: usize,
    ret: usize,
) -> c_int {
    let start = Instant::now();
    // SAFETY: the C library's function, with the caller's arguments.
    let result = unsafe { libc::epoll_wait(epoll, events, most, timeout) };
    done("epoll_wait", None, start, fp, ret);
    result
}

extern "C-unwind" fn select_hook(
    count: c_int,
    read: *mut libc::fd_set,
    write: *mut libc::fd_set,
    error: *mut libc::fd_set,
    timeout: *mut libc::timeval,
    fp: usize,
    ret: usize,
) -> c_int {
    let start = Instant::now();
    // SAFETY: the C library's function, with the caller's arguments.
    let result = unsafe { libc::select(count, read, write, error, timeout) };
    done("select", None, start, fp, ret);
    result
}
