//! A Java stack walker of jtap's own: HotSpot's frames read directly, with the offsets the VM
//! publishes about itself, instead of asking JVMTI's `GetStackTrace` (which builds a vframe
//! object per frame and costs most of an allocation sample).
//!
//! - `structs`: the VM's structure tables (`gHotSpotVMStructs` and friends).
//! - `layout`: the offsets and frame slots the walk uses, per HotSpot 11–25 family.
//! - `fetch`: reads of the VM's memory that cannot fault.
//! - `code`: the code cache: its heaps, the interpreter, the call stub.
//! - `frames`: the walk itself.
//! - `ids`: jmethodIDs remembered from one walk to the next.
//! - `mirror`: the `Klass*` a `jclass` names, for the alloc engine's class lookups.
//! - `stats`: counts of walks, fallbacks and comparisons, for the log.
//! - `vthread`: which virtual thread a carrier runs, and where its continuation keeps the
//!   frames it has not thawed yet (JDK 21+).
//!
//! [`Walker::resolve`] reads the tables once; [`Walker::current`] walks the calling thread's
//! stack from inside a JVMTI callback or native method, where HotSpot keeps it walkable;
//! [`Walker::interrupted`] walks it from a signal handler, wherever the thread was. A walk
//! that meets anything it does not understand stops with a reason, and the caller asks JVMTI
//! (or `AsyncGetCallTrace`). [`Walker::stack`] tells a signal handler where its thread's
//! stack is.

mod code;
mod fetch;
mod frames;
mod ids;
mod layout;
mod mirror;
mod stats;
mod structs;
mod vthread;

use std::cell::RefCell;
use std::ops::Range;
use std::sync::OnceLock;

use jtap_jvmti::sys;

use frames::Memo;
pub use frames::{Began, Frames, JavaFrame, Kind, Stop, TopPc};

pub use mirror::Mirrors;
pub use stats::{Comparison, Stats};
pub use vthread::{label as vthread_label, Mounted};

use code::CodeCache;
pub use code::StubBlob;
use fetch::Fetch;
use frames::{Start, Walk};
use ids::Methods;

use crate::thread::{current_jni, Vm};
use layout::Layout;
use structs::VmStructs;
use vthread::VirtualThreads;

/// A frame as JVMTI's `GetStackTrace` gives it: jmethodID (as an address) and location (the
/// bytecode index, -1 for a native method).
pub type Frame = (usize, i64);

/// What a walk from a signal handler gave ([`Walker::interrupted`]).
#[derive(Debug, Clone, Copy)]
pub struct Interrupted {
    /// Frames written.
    pub count: usize,
    /// Where the walk began.
    pub began: Began,
    /// Whether it read frames frozen in a virtual thread's stack chunks, which
    /// `AsyncGetCallTrace` steps over.
    pub read_frozen: bool,
    /// Whether its top compiled frame's pc is where a pc descriptor is recorded, which
    /// `AsyncGetCallTrace` looks past.
    pub top_at_descriptor: bool,
}

thread_local! {
    /// What a thread's walks from callbacks remembered of the nmethods they met (a walk from
    /// a signal keeps its own on its stack: no thread-local there).
    static KEPT: RefCell<Memo> = const { RefCell::new(Memo::new()) };
}

/// The walker of this VM, once resolved.
static WALKER: OnceLock<Walker> = OnceLock::new();

/// The walker of this VM, resolved on first use (on a thread attached to the VM; `version`
/// is JVMTI's version number), or why it cannot be had now. A failure is not kept: before
/// the VM runs (an agent started at start-up) no thread is attached yet, and a later start
/// may succeed.
pub fn walker(vm: Vm, jvmti_version: u32) -> Result<&'static Walker, String> {
    if let Some(walker) = WALKER.get() {
        return Ok(walker);
    }
    let walker = Walker::resolve(vm, jvmti_version)?;
    Ok(WALKER.get_or_init(|| walker))
}

/// The walker, if it was resolved.
pub fn resolved() -> Option<&'static Walker> {
    WALKER.get()
}

/// The walker of one running VM.
pub struct Walker {
    layout: Layout,
    fetch: Fetch,
    /// Bytes from a `JavaThread` to the `JNIEnv` inside it.
    env_offset: usize,
    /// Where a mounted virtual thread's id and name are (JDK 21+).
    virtual_threads: Option<VirtualThreads>,
    /// The code cache, read once.
    code: CodeCache,
    /// Methods met by walks, for the next ones.
    methods: Methods,
}

impl Walker {
    /// Where JIT-compiled code, the interpreter and stubs live (the code cache).
    pub fn code_range(&self) -> Range<usize> {
        // SAFETY: static variables of the loaded libjvm.so, set at VM start.
        unsafe {
            let low = *(self.layout.code_low as *const usize);
            let high = *(self.layout.code_high as *const usize);
            low..high
        }
    }

    /// The code cache's blobs that are not nmethods (see [`code::CodeCache::stubs`]).
    pub fn stubs(&self) -> Vec<StubBlob> {
        self.code.stubs(&self.layout, &self.fetch)
    }

    /// Reads the structure tables of the VM whose JVMTI version is `jvmti_version`, on a
    /// thread attached to it (which measures where a thread's `JNIEnv` lies in its
    /// `JavaThread`), or says why this VM cannot be walked.
    fn resolve(vm: Vm, jvmti_version: u32) -> Result<Walker, String> {
        let jdk = (jvmti_version >> 16) & 0x0FFF;
        // SAFETY: the symbols are looked up in the JVM's own loaded libjvm.so.
        let structs = unsafe { VmStructs::read(|name| crate::libjvm::exported(vm, name))? };
        let mut layout = Layout::resolve(&structs, jdk)?;
        if jdk >= 21 && layout.continuation_return.is_none() {
            layout.continuation_return = Some(crate::libjvm::local_variable(
                vm,
                "_ZN17ContinuationEntry10_return_pcE",
            )?);
        }
        layout.stub_descriptors =
            crate::libjvm::local_variable(vm, "_ZN12StubCodeDesc5_listE").ok();
        let thread_size = structs.size("JavaThread")?;
        let env_offset = env_offset(vm)?;
        if env_offset == 0 || env_offset >= thread_size {
            return Err(format!(
                "a thread's JNIEnv is {env_offset} bytes into its JavaThread of {thread_size}"
            ));
        }
        if layout.nmethod_compile_id.is_none() {
            log!("walker: no nmethod compile ids: walks from callbacks remember no frames");
        }
        let fetch = Fetch::resolve(vm)?;
        let code = CodeCache::read(&layout, &fetch)?;
        let virtual_threads = (jdk >= 21)
            .then(|| VirtualThreads::resolve(vm, &structs))
            .and_then(|resolved| {
                resolved
                    .inspect_err(|e| log!("walker: virtual threads stay with their carriers: {e}"))
                    .ok()
            });
        Ok(Walker {
            layout,
            fetch,
            env_offset,
            virtual_threads,
            code,
            methods: Methods::new(),
        })
    }

    /// Whether `id` is a real jmethodID ([`frames::is_method_id`]): checked before a walk's
    /// jmethodID reaches JVMTI.
    pub fn is_method_id(&self, id: usize) -> bool {
        frames::is_method_id(&self.layout, &self.fetch, id)
    }

    /// The calling thread's stack, as its `JavaThread` records it. Async-signal-safe.
    ///
    /// # Safety
    /// `jni` is the calling thread's JNIEnv.
    pub unsafe fn stack(&self, jni: *mut sys::JNIEnv) -> Option<Range<usize>> {
        let thread = (jni as usize).wrapping_sub(self.env_offset);
        // SAFETY: (caller) the calling thread's own JavaThread.
        unsafe { frames::stack_of(&self.layout, thread) }
    }

    /// Where the VM's signal handler last found the calling thread before it sent it on to a
    /// handler stub: the pc of a safepoint poll that trapped (or of an implicit exception).
    /// `jni` is the calling thread's JNIEnv (read without faulting). Async-signal-safe.
    pub fn trapped_pc(&self, jni: *mut sys::JNIEnv) -> Option<usize> {
        let thread = (jni as usize).wrapping_sub(self.env_offset);
        let offset = self.layout.thread_saved_exception_pc?;
        self.fetch
            .value::<usize>(thread.wrapping_add(offset))
            .filter(|&pc| pc != 0)
    }

    /// The virtual thread the calling thread runs, if it is a carrier running one (JDK 21+).
    /// Async-signal-safe.
    ///
    /// # Safety
    /// `jni` is the calling thread's JNIEnv.
    pub unsafe fn mounted(&self, jni: *mut sys::JNIEnv) -> Option<Mounted> {
        let thread = (jni as usize).wrapping_sub(self.env_offset);
        self.virtual_threads.as_ref()?.mounted(&self.fetch, thread)
    }

    /// Writes up to `out.len()` frames of the calling thread's Java stack, top first, and
    /// returns how many.
    ///
    /// # Safety
    /// `jni` is the calling thread's JNIEnv, and the thread is inside a JVMTI event callback
    /// or a native method (where its last Java frame is recorded and its stack walkable).
    pub unsafe fn current(&self, jni: *mut sys::JNIEnv, out: &mut [Frame]) -> Result<usize, Stop> {
        // SAFETY: (caller) the thread's stack is walkable from its anchor.
        unsafe { self.walk(jni, Start::Anchor, out) }
    }

    /// Writes up to `out.room()` frames of the calling thread's Java stack, top first, from a
    /// signal handler that interrupted the thread at `pc`, `sp` and `fp`: from there if it
    /// ran Java code, else from its last Java frame. `top` says where in its code the top
    /// frame stopped. Async-signal-safe.
    ///
    /// # Safety
    /// `jni` is the calling thread's JNIEnv; the registers are the signal's.
    pub unsafe fn interrupted<F: Frames + ?Sized>(
        &self,
        jni: *mut sys::JNIEnv,
        (pc, sp, fp): (usize, usize, usize),
        top: TopPc,
        out: &mut F,
    ) -> Result<Interrupted, Stop> {
        let start = Start::Interrupted { pc, sp, fp, top };
        // SAFETY: (caller) as in `walk`.
        unsafe {
            let (thread, walk) = self.walk_of(jni)?;
            let began = match (walk.in_java(), top) {
                (false, _) => Began::Anchor,
                (true, TopPc::AtReturn) => Began::StubReturn,
                (true, TopPc::Anywhere(_)) => Began::Signal,
            };
            let count = walk.frames(thread, start, out, &mut Memo::new())?;
            Ok(Interrupted {
                count,
                began,
                read_frozen: walk.read_frozen(),
                top_at_descriptor: walk.top_at_descriptor(),
            })
        }
    }

    /// # Safety
    /// `jni` is the calling thread's JNIEnv, and `start` where its stack may be walked from.
    unsafe fn walk<F: Frames + ?Sized>(
        &self,
        jni: *mut sys::JNIEnv,
        start: Start,
        out: &mut F,
    ) -> Result<usize, Stop> {
        // SAFETY: (caller) the calling thread's JNIEnv.
        unsafe {
            let (thread, walk) = self.walk_of(jni)?;
            // A walk inside another (a hooked `malloc` under a callback's) or on a thread
            // whose locals are gone takes a memo of its own.
            let kept = KEPT.try_with(|kept| match kept.try_borrow_mut() {
                Ok(mut memo) => Some(walk.frames(thread, start, &mut *out, &mut memo)),
                Err(_) => None,
            });
            match kept.ok().flatten() {
                Some(walked) => walked,
                None => walk.frames(thread, start, out, &mut Memo::new()),
            }
        }
    }

    /// The calling thread's `JavaThread` and a walk of it.
    ///
    /// # Safety
    /// `jni` is the calling thread's JNIEnv.
    unsafe fn walk_of(&self, jni: *mut sys::JNIEnv) -> Result<(usize, Walk<'_>), Stop> {
        let thread = (jni as usize).wrapping_sub(self.env_offset);
        // SAFETY: (caller) `thread` is the calling thread's own JavaThread, whose JNIEnv
        // lies `env_offset` bytes into it in this VM.
        let walk = unsafe {
            Walk::new(
                &self.layout,
                &self.fetch,
                &self.methods,
                &self.code,
                self.virtual_threads.as_ref(),
                thread,
            )?
        };
        Ok((thread, walk))
    }
}

/// Where the calling thread's `JNIEnv` lies in its `JavaThread`: the JavaThread's address is
/// what `java.lang.Thread.eetop` holds.
fn env_offset(vm: Vm) -> Result<usize, String> {
    let jni = current_jni(vm.0).ok_or("this thread is not attached to the JVM")?;
    // SAFETY: `jni` is this attached thread's JNIEnv; every reference made is a local one of
    // this thread, freed before returning; a pending exception is cleared.
    unsafe {
        let functions = &**jni;
        let (
            Some(find_class),
            Some(static_method),
            Some(call_static),
            Some(field_id),
            Some(long_field),
            Some(delete),
            Some(check),
            Some(clear),
        ) = (
            functions.FindClass,
            functions.GetStaticMethodID,
            functions.CallStaticObjectMethod,
            functions.GetFieldID,
            functions.GetLongField,
            functions.DeleteLocalRef,
            functions.ExceptionCheck,
            functions.ExceptionClear,
        )
        else {
            return Err("the JNI function table is incomplete".into());
        };
        let class = find_class(jni, c"java/lang/Thread".as_ptr());
        if class.is_null() {
            clear(jni);
            return Err("java.lang.Thread not found".into());
        }
        let current = static_method(
            jni,
            class,
            c"currentThread".as_ptr(),
            c"()Ljava/lang/Thread;".as_ptr(),
        );
        let eetop = field_id(jni, class, c"eetop".as_ptr(), c"J".as_ptr());
        if current.is_null() || eetop.is_null() {
            clear(jni);
            delete(jni, class);
            return Err("java.lang.Thread has no eetop field".into());
        }
        let thread = call_static(jni, class, current);
        if check(jni) != 0 || thread.is_null() {
            clear(jni);
            delete(jni, class);
            return Err("Thread.currentThread() failed".into());
        }
        let java_thread = long_field(jni, thread, eetop) as usize;
        delete(jni, thread);
        delete(jni, class);
        (jni as usize)
            .checked_sub(java_thread)
            .ok_or_else(|| "a JNIEnv lies below its JavaThread".into())
    }
}
