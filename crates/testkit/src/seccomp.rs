//! A seccomp filter that makes `perf_event_open` fail with `EPERM` in a started process, as
//! Docker's default seccomp profile does: the condition under which jtap's `cpu` engine must
//! fall back to a timer.

use std::io;

/// `offsetof(struct seccomp_data, nr)` and `arch`.
const NR_OFFSET: u32 = 0;
const ARCH_OFFSET: u32 = 4;
/// `AUDIT_ARCH_X86_64`.
const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
const BPF_LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const BPF_JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const BPF_RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;

fn statement(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump_if_equal(k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter {
        code: BPF_JEQ_K,
        jt,
        jf,
        k,
    }
}

/// Installs the filter on the calling thread (and what it execs). Meant for `pre_exec`: it
/// allocates nothing and makes two system calls.
pub fn deny_perf_event_open() -> io::Result<()> {
    let program = [
        statement(BPF_LD_W_ABS, ARCH_OFFSET),
        // Another architecture's numbers mean other calls: allow.
        jump_if_equal(AUDIT_ARCH_X86_64, 0, 3),
        statement(BPF_LD_W_ABS, NR_OFFSET),
        jump_if_equal(libc::SYS_perf_event_open as u32, 0, 1),
        statement(BPF_RET_K, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32),
        statement(BPF_RET_K, libc::SECCOMP_RET_ALLOW),
    ];
    let fprog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: plain prctl calls; `fprog` points at `program`, alive for the call (the kernel
    // copies the filter).
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER,
            &fprog as *const libc::sock_fprog,
        ) != 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}
