//! Hooks on C library functions the JVM's libraries and JNI code call: installed by rewriting
//! the global offset table entries the loaded libraries call them through ([`got`]) and
//! removed by writing the old entries back, without restarting the JVM. The engines that
//! record native calls (`nativemem`, `io`, `nativelock`) are built on this:
//!
//! - [`install`]: any set of (function name → hook) entries into every loaded library but the
//!   C library, the dynamic linker and this agent; the [`Installation`] it returns writes every
//!   entry back when uninstalled or dropped. Libraries loaded later are hooked at the next
//!   start. Two installations never hook the same function.
//! - [`entry_stub!`]: the assembly entry point of a hook for an N-argument function, which
//!   catches the caller's frame pointer and return address before any Rust code can change
//!   them and passes them to the Rust hook as two more arguments (a [`Caller`]).
//! - [`Caller::native_frames`]: the caller's native frames along its frame-pointer chain.
//! - [`on_hooked_thread`]: runs a hook's recording work on the calling thread: never entered
//!   again from inside itself (a recorder calling a hooked function only forwards), never on
//!   the agent's own threads, `errno` as the hooked call left it, no panic into the caller.
//! - [`site`]: records a hooked call at its site, with native and Java stacks, into a site
//!   table, and makes the table a profile.
//! - [`timed`]: calls timed by their hooks and recorded when they take a threshold (the io
//!   and nativelock engines).
//! - [`malloc`]: the hooks on the C allocator (the nativemem engine).
//!
//! A hook calls the C library's own function (with the caller's arguments, returning what it
//! returned) and does its own work before or after; what it records goes nowhere near the
//! call's result.

mod got;
pub mod malloc;
pub mod site;
pub mod timed;

use std::cell::Cell;
use std::ffi::c_void;
use std::sync::Mutex;

/// One function to hook: its C name and the address of its entry stub ([`entry_stub!`]).
#[derive(Debug, Clone, Copy)]
pub struct Hook {
    /// The C name, as the libraries' dynamic symbols spell it (`read`, `pread64`).
    pub name: &'static str,
    /// The entry stub, with the function's signature (plus the caller's frame).
    pub entry: usize,
}

impl Hook {
    /// The hook of function `name` whose entry is `stub` (declared by [`entry_stub!`]).
    pub fn new(name: &'static str, stub: unsafe extern "C" fn()) -> Hook {
        Hook {
            name,
            entry: stub as usize,
        }
    }
}

/// The hooks of one [`install`]: the entries rewritten and what they held. Uninstalled on
/// drop.
pub struct Installation {
    owner: &'static str,
    names: Vec<&'static str>,
    entries: Vec<(usize, usize)>,
    objects: usize,
}

/// The function names hooked by some installation now.
static HOOKED: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());

/// Installs `hooks` into every loaded library but the C library, the dynamic linker and this
/// agent (the old entries are written back when the installation is dropped). `owner` names
/// the engine in messages. Fails when a function is hooked already or
/// no library calls any of them through a table jtap can rewrite.
///
/// # Safety
/// Each hook's `entry` is a function with the signature of the C function it is named for.
pub unsafe fn install(owner: &'static str, hooks: &[Hook]) -> Result<Installation, String> {
    let mut hooked = HOOKED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(hook) = hooks.iter().find(|h| hooked.contains(&h.name)) {
        return Err(format!("{} is hooked already", hook.name));
    }
    let names: Vec<&'static str> = hooks.iter().map(|h| h.name).collect();
    let slots = got::find(&names, &|object| {
        let file = object.rsplit('/').next().unwrap_or(object);
        !(file.starts_with("libc.so")
            || file.starts_with("ld-linux")
            || file.starts_with("libjtap_agent")
            || file.starts_with("linux-vdso"))
    });
    let mut installation = Installation {
        owner,
        names: names.clone(),
        entries: Vec::new(),
        objects: 0,
    };
    let mut objects = std::collections::BTreeSet::new();
    for slot in &slots {
        // SAFETY: an entry `got::find` found for this function; (caller) the hook has its
        // signature.
        match unsafe { got::exchange(slot.address, hooks[slot.function].entry) } {
            Ok(previous) => {
                installation.entries.push((slot.address, previous));
                objects.insert(slot.object.as_str());
            }
            Err(e) => log!("{owner}: {}: {e}", slot.object),
        }
    }
    if installation.entries.is_empty() {
        return Err(format!(
            "no loaded library calls {} through a table jtap can hook",
            names.join(", ")
        ));
    }
    installation.objects = objects.len();
    log!(
        "{owner}: hooked {} entries in {} libraries",
        installation.entries.len(),
        installation.objects
    );
    hooked.extend(names);
    Ok(installation)
}

impl Installation {
    /// How many libraries were hooked.
    pub fn libraries(&self) -> usize {
        self.objects
    }
}

impl Drop for Installation {
    fn drop(&mut self) {
        for (address, previous) in self.entries.drain(..) {
            // SAFETY: the entry was rewritten by `install` from this very value.
            if let Err(e) = unsafe { got::exchange(address, previous) } {
                log!("{}: restoring {address:#x}: {e}", self.owner);
            }
        }
        let mut hooked = HOOKED.lock().unwrap_or_else(|e| e.into_inner());
        hooked.retain(|name| !self.names.contains(name));
    }
}

/// Where a hooked function was called from: the caller's return address and frame pointer on
/// entry to the hook, as its [`entry_stub!`] caught them.
#[derive(Debug, Clone, Copy)]
pub struct Caller {
    /// The return address into the caller.
    pub return_address: usize,
    /// The caller's frame pointer (rbp).
    pub frame_pointer: usize,
}

impl Caller {
    /// Up to `out.len()` return addresses of the caller's native frames, innermost first: the
    /// hook's return address, then along the frame-pointer chain while it stays on this
    /// thread's stack and goes up, and until a return address enters `stop` (JIT code, where
    /// Java frames begin). Called from a recorder, on the hooked thread.
    pub fn native_frames(&self, stop: &std::ops::Range<usize>, out: &mut [u64]) -> usize {
        let (low, high) = stack_bounds();
        let mut count = 0;
        let mut pc = self.return_address;
        let mut fp = self.frame_pointer;
        while count < out.len() && pc != 0 && !stop.contains(&pc) {
            out[count] = pc as u64;
            count += 1;
            if !fp.is_multiple_of(8) || fp < low || fp + 16 > high {
                break;
            }
            // SAFETY: both words lie on this thread's stack (checked above), which is mapped.
            let (next, ret) = unsafe { (*(fp as *const usize), *((fp + 8) as *const usize)) };
            if next <= fp {
                break;
            }
            fp = next;
            pc = ret;
        }
        count
    }
}

thread_local! {
    /// Inside a recorder: hooks entered again only forward.
    static BUSY: Cell<bool> = const { Cell::new(false) };
    /// This thread's stack, for the frame-pointer walk (found once).
    static STACK: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
}

/// This thread's stack as (lowest, highest) address, found once per thread.
fn stack_bounds() -> (usize, usize) {
    STACK.with(|stack| {
        if stack.get().1 == 0 {
            // SAFETY: pthread_getattr_np fills the attribute object for the calling thread,
            // which is destroyed after its stack is read.
            unsafe {
                let mut attr: libc::pthread_attr_t = std::mem::zeroed();
                if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) == 0 {
                    let mut base: *mut c_void = std::ptr::null_mut();
                    let mut size = 0usize;
                    if libc::pthread_attr_getstack(&attr, &mut base, &mut size) == 0 {
                        stack.set((base as usize, base as usize + size));
                    }
                    libc::pthread_attr_destroy(&mut attr);
                }
            }
        }
        stack.get()
    })
}

/// Runs a hook's recording work on the hooked thread: not on the agent's own threads, not
/// again while this thread is inside one already (the work calling a hooked function), with
/// `errno` kept as the hooked call left it, and with any panic caught (it must never unwind
/// into the C caller).
pub fn on_hooked_thread(work: impl FnOnce()) {
    if crate::thread::is_own_thread() {
        return;
    }
    let Some(_busy) = Busy::enter() else { return };
    // SAFETY: errno is the calling thread's; its location is valid for the thread's life.
    let errno = unsafe { *libc::__errno_location() };
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

/// This thread is inside a recorder until dropped: hooks it enters meanwhile only forward.
struct Busy;

impl Busy {
    /// None when the thread is inside a recorder already.
    fn enter() -> Option<Busy> {
        (!BUSY.with(|busy| busy.replace(true))).then_some(Busy)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        BUSY.with(|busy| busy.set(false));
    }
}

/// The entry point `$stub` of a hook for a C function of `$args` integer or pointer
/// arguments (1 to 6): it passes the caller's frame pointer (rbp, untouched since the call)
/// and return address (the word at rsp) to the Rust hook `$hook` as two more arguments (in
/// the argument registers after the function's own, or on the stack when those run out),
/// and the hook returns to the caller. `$hook` is an `extern "C"` function taking the C
/// function's arguments, then `fp: usize, ret: usize` (see [`Caller`]). The stub's address,
/// for a [`Hook`], is `$stub as usize` (declared as a function of no arguments: never call it
/// from Rust).
macro_rules! entry_stub {
    ($stub:ident => $hook:path, 1) => {
        $crate::hooks::entry_stub!(@jump $stub, $hook, "mov rsi, rbp", "mov rdx, [rsp]");
    };
    ($stub:ident => $hook:path, 2) => {
        $crate::hooks::entry_stub!(@jump $stub, $hook, "mov rdx, rbp", "mov rcx, [rsp]");
    };
    ($stub:ident => $hook:path, 3) => {
        $crate::hooks::entry_stub!(@jump $stub, $hook, "mov rcx, rbp", "mov r8, [rsp]");
    };
    ($stub:ident => $hook:path, 4) => {
        $crate::hooks::entry_stub!(@jump $stub, $hook, "mov r8, rbp", "mov r9, [rsp]");
    };
    // The return address goes on the stack as the seventh argument: pushed (which also
    // aligns the stack for the call), the hook called, and the stub returns.
    ($stub:ident => $hook:path, 5) => {
        $crate::hooks::entry_stub!(@call $stub, $hook,
            "mov r9, rbp\n mov rax, [rsp]\n push rax", "add rsp, 8");
    };
    // Both go on the stack as the seventh and eighth arguments.
    ($stub:ident => $hook:path, 6) => {
        $crate::hooks::entry_stub!(@call $stub, $hook,
            "mov rax, [rsp]\n sub rsp, 8\n push rax\n push rbp", "add rsp, 24");
    };
    (@jump $stub:ident, $hook:path, $fp:literal, $ret:literal) => {
        std::arch::global_asm!(
            ".pushsection .text.jtap_hooks,\"ax\",@progbits",
            concat!(".globl ", stringify!($stub)),
            concat!(".hidden ", stringify!($stub)),
            concat!(stringify!($stub), ":"),
            $fp,
            $ret,
            "jmp {hook}",
            ".popsection",
            hook = sym $hook,
        );
        extern "C" {
            fn $stub();
        }
    };
    (@call $stub:ident, $hook:path, $before:literal, $after:literal) => {
        std::arch::global_asm!(
            ".pushsection .text.jtap_hooks,\"ax\",@progbits",
            concat!(".globl ", stringify!($stub)),
            concat!(".hidden ", stringify!($stub)),
            concat!(stringify!($stub), ":"),
            $before,
            "call {hook}",
            $after,
            "ret",
            ".popsection",
            hook = sym $hook,
        );
        extern "C" {
            fn $stub();
        }
    };
}
pub(crate) use entry_stub;
