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

use jtap_profile::event;
use jtap_protocol::Options;

use super::timed::TimedEngine;
use crate::hooks::timed::TimedCalls;
use crate::hooks::{entry_stub, Caller, Hook};

/// Default threshold: calls shorter than this are not recorded.
pub const DEFAULT_THRESHOLD: Duration = Duration::from_millis(1);

static CALLS: TimedCalls = TimedCalls::new(&event::IO);

/// The engine.
pub fn engine() -> TimedEngine {
    let threshold = |options: &Options| options.io.flatten().unwrap_or(DEFAULT_THRESHOLD);
    // SAFETY: each stub has the signature of the function it is named for (see `hooked!`).
    unsafe { TimedEngine::new(&CALLS, threshold, hooked) }
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

/// Hooks of C functions: for each, the entry stub `$stub` ([`entry_stub!`], `$count`
/// arguments) and a hook in a module named for the function that calls the C library's
/// function with the caller's arguments, times it, hands the time to [`done`] with `$fd` (the
/// descriptor it works on, if any) and returns what it returned. The hooks are "C-unwind":
/// these are cancellation points, and a thread cancelled inside one unwinds through the
/// hook, which holds nothing to clean up.
macro_rules! timed_hooks {
    ($($stub:ident, $count:tt: $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty, $fd:expr;)*) => {$(
        mod $name {
            use super::*;

            // Up to six arguments of the C function, and the stub's two.
            #[allow(clippy::too_many_arguments)]
            pub extern "C-unwind" fn hook($($arg: $ty,)* fp: usize, ret: usize) -> $ret {
                let start = Instant::now();
                // SAFETY: the C library's function, with the caller's arguments.
                let result = unsafe { libc::$name($($arg),*) };
                done(stringify!($name), $fd, start, fp, ret);
                result
            }
        }
        entry_stub!($stub => $name::hook, $count);
    )*};
}

timed_hooks! {
    jtap_io_read, 3: read(fd: c_int, buf: *mut c_void, n: usize) -> isize, Some(fd);
    jtap_io_write, 3: write(fd: c_int, buf: *const c_void, n: usize) -> isize, Some(fd);
    jtap_io_pread, 4: pread(fd: c_int, buf: *mut c_void, n: usize, offset: i64) -> isize, Some(fd);
    jtap_io_pwrite, 4: pwrite(fd: c_int, buf: *const c_void, n: usize, offset: i64) -> isize,
        Some(fd);
    jtap_io_readv, 3: readv(fd: c_int, iov: *const libc::iovec, count: c_int) -> isize, Some(fd);
    jtap_io_writev, 3: writev(fd: c_int, iov: *const libc::iovec, count: c_int) -> isize,
        Some(fd);
    jtap_io_send, 4: send(fd: c_int, buf: *const c_void, n: usize, flags: c_int) -> isize,
        Some(fd);
    jtap_io_sendto, 6: sendto(fd: c_int, buf: *const c_void, n: usize, flags: c_int,
        to: *const libc::sockaddr, length: libc::socklen_t) -> isize, Some(fd);
    jtap_io_recv, 4: recv(fd: c_int, buf: *mut c_void, n: usize, flags: c_int) -> isize, Some(fd);
    jtap_io_recvfrom, 6: recvfrom(fd: c_int, buf: *mut c_void, n: usize, flags: c_int,
        from: *mut libc::sockaddr, length: *mut libc::socklen_t) -> isize, Some(fd);
    jtap_io_connect, 3: connect(fd: c_int, address: *const libc::sockaddr,
        length: libc::socklen_t) -> c_int, Some(fd);
    jtap_io_accept, 3: accept(fd: c_int, address: *mut libc::sockaddr,
        length: *mut libc::socklen_t) -> c_int, Some(fd);
    jtap_io_accept4, 4: accept4(fd: c_int, address: *mut libc::sockaddr,
        length: *mut libc::socklen_t, flags: c_int) -> c_int, Some(fd);
    jtap_io_poll, 3: poll(fds: *mut libc::pollfd, count: libc::nfds_t, timeout: c_int) -> c_int,
        None;
    jtap_io_epoll_wait, 4: epoll_wait(epoll: c_int, events: *mut libc::epoll_event, most: c_int,
        timeout: c_int) -> c_int, None;
    jtap_io_select, 5: select(count: c_int, read: *mut libc::fd_set, write: *mut libc::fd_set,
        error: *mut libc::fd_set, timeout: *mut libc::timeval) -> c_int, None;
}
