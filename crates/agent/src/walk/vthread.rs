//! Which virtual thread a carrier thread runs (JDK 21+), read in a signal handler: its id
//! and name, so samples of virtual threads are attributed to them rather than to their
//! carrier; and its continuation's stack chunks, where the frames it has not thawed since
//! its last remount are ([`Chunk`]).
//!
//! A `JavaThread` holds two handles: `_threadObj`, its own `java.lang.Thread`, and
//! `_vthread`, the thread it currently runs — the same object unless a virtual thread is
//! mounted. The Java side (the `tid` and `name` fields of `Thread`, a `String`'s bytes) is
//! laid out by the class loader, so its offsets are asked of the VM once, through JNI and
//! `jdk.internal.misc.Unsafe` (JNI calls are not subject to module access checks); an
//! array's length offset is found by reading a new array whose length is known.
//!
//! References decode as the heap stores them: plain addresses, compressed oops, or ZGC's
//! colored pointers ([`Pointers`]). Every read in the handler goes through [`Fetch`]: an
//! object a concurrent GC has moved, or a reference that may point where an object was,
//! ends the lookup and the sample stays with its carrier.

use std::ffi::CStr;
use std::ptr;

use jtap_jvmti::sys;

use super::fetch::Fetch;
use super::structs::VmStructs;
use crate::thread::{current_jni, Vm};

/// Bytes of a virtual thread's name kept with a sample (ASCII; longer names are cut).
pub const NAME_BYTES: usize = 32;

/// The virtual thread a sampled carrier was running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mounted {
    /// `Thread.threadId()`.
    pub id: u64,
    name: [u8; NAME_BYTES],
    name_len: u8,
    /// Whether the name could be read (see [`VirtualThreads::name`]).
    name_read: bool,
}

impl Mounted {
    /// Its name (empty for an unnamed one, the default), cut to [`NAME_BYTES`]; None when
    /// the handler could not read it.
    pub fn name(&self) -> Option<&str> {
        self.name_read
            .then(|| std::str::from_utf8(&self.name[..usize::from(self.name_len)]).unwrap_or(""))
    }

    /// The same virtual thread named `name` (as the JVM gave it where the handler could not
    /// read it), cut to [`NAME_BYTES`] on a character boundary.
    pub fn named(mut self, name: &str) -> Mounted {
        let mut len = name.len().min(NAME_BYTES);
        while !name.is_char_boundary(len) {
            len -= 1;
        }
        self.name[..len].copy_from_slice(&name.as_bytes()[..len]);
        (self.name_len, self.name_read) = (len as u8, true);
        self
    }

    /// How the JDK shows it: `VirtualThread[#21]`, `VirtualThread[#21,worker-3]` (unnamed
    /// when the name could not be read).
    pub fn label(&self) -> String {
        label(self.id, self.name().unwrap_or(""))
    }
}

/// How the JDK shows virtual thread `id` named `name` (empty: unnamed).
pub fn label(id: u64, name: &str) -> String {
    match name {
        "" => format!("VirtualThread[#{id}]"),
        name => format!("VirtualThread[#{id},{name}]"),
    }
}

/// Where a virtual thread's id and name are, in this VM.
#[derive(Debug)]
pub struct VirtualThreads {
    /// `JavaThread::_threadObj` and `_vthread`: handles (a pointer to the oop).
    thread_object: usize,
    mounted_object: usize,
    /// Where the Java objects' fields are.
    java: JavaOffsets,
    /// How references decode.
    pointers: Pointers,
    /// Where a continuation's frozen frames are, if this libjvm's symbols say.
    frozen: Option<FrozenOffsets>,
}

/// Offsets of a virtual thread's frozen frames: `VirtualThread.cont`, `Continuation.tail`
/// (its newest stack chunk), a `StackChunk`'s `parent`, `size`, `sp` and `bottom` (ints, in
/// words), and where a chunk's copy of the stack begins in it. HotSpot keeps them in static
/// variables (`java_lang_VirtualThread::_continuation_offset`, …) that only the library's
/// full symbol table names.
#[derive(Debug)]
struct FrozenOffsets {
    continuation: usize,
    tail: usize,
    chunk_parent: usize,
    chunk_size: usize,
    chunk_sp: usize,
    chunk_bottom: usize,
    chunk_stack: usize,
    /// Address of `StubRoutines::_cont_returnBarrier`: the stub a lazily thawed frame returns
    /// to while its callers are still frozen.
    return_barrier: usize,
}

impl FrozenOffsets {
    fn resolve(vm: Vm) -> Result<FrozenOffsets, String> {
        let int = |name: &str| -> Result<usize, String> {
            let address = crate::libjvm::local_variable(vm, name)?;
            // SAFETY: an `int` static of the loaded libjvm.so, set when its class was loaded
            // at start-up and constant since.
            let value = unsafe { *(address as *const i32) };
            usize::try_from(value)
                .ok()
                .filter(|&offset| offset > 0)
                .ok_or_else(|| format!("{name} is {value}"))
        };
        Ok(FrozenOffsets {
            continuation: int("_ZN23java_lang_VirtualThread20_continuation_offsetE")?,
            tail: int("_ZN28jdk_internal_vm_Continuation12_tail_offsetE")?,
            chunk_parent: int("_ZN26jdk_internal_vm_StackChunk14_parent_offsetE")?,
            chunk_size: int("_ZN26jdk_internal_vm_StackChunk12_size_offsetE")?,
            chunk_sp: int("_ZN26jdk_internal_vm_StackChunk10_sp_offsetE")?,
            chunk_bottom: int("_ZN26jdk_internal_vm_StackChunk14_bottom_offsetE")?,
            chunk_stack: int("_ZN23InstanceStackChunkKlass16_offset_of_stackE")?,
            return_barrier: crate::libjvm::local_variable(
                vm,
                "_ZN12StubRoutines19_cont_returnBarrierE",
            )?,
        })
    }
}

/// Where generational ZGC keeps a pointer's remapped color (one bit of four, JDK 21–25),
/// the highest of its 16 bits of color: the address lies just above that bit, so the lowest
/// bit set from here on gives the shift it was colored with, and a pointer with nothing above
/// these bits is null.
const ZGC_REMAPPED_BITS: std::ops::Range<u32> = 12..16;

/// The shift a generational ZGC pointer was colored with (see [`ZGC_REMAPPED_BITS`]).
fn remapped_shift(stored: usize) -> Option<u32> {
    ZGC_REMAPPED_BITS
        .into_iter()
        .find(|&bit| stored & (1 << bit) != 0)
        .map(|bit| bit + 1)
}

/// `base + offset`, None past the end of the address space: `base` was read from the VM's
/// memory in a signal handler and may be anything (overflow would panic in a debug build,
/// and a panic in a handler aborts the JVM).
fn at(base: usize, offset: usize) -> Option<usize> {
    base.checked_add(offset)
}

/// One stack chunk of a continuation, as read in a signal handler: the frozen frames lie from
/// `sp` (the top one's) up to `end`, each frame's return address in the word below its sp.
#[derive(Debug, Clone, Copy)]
pub struct Chunk {
    /// Where the chunk's copy of the stack begins.
    pub start: usize,
    pub sp: usize,
    pub end: usize,
    /// The chunk with the older frames (0: none), or None when the reference to it cannot be
    /// followed: one generational ZGC has not healed since its last phase change (it may
    /// point where the chunk was before a relocation).
    pub parent: Option<usize>,
}

/// Most words a stack chunk is taken to hold (HotSpot's are a few KiB to a few MiB).
const MAX_CHUNK_WORDS: usize = 1 << 24;

/// How the heap stores a reference, so the handler can follow it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pointers {
    /// The object's address. Non-generational ZGC (JDK 21–23 without `ZGenerational`)
    /// keeps color bits in it too, but maps the heap once per color, so such a pointer reads
    /// as it is; two pointers to one object are the same object when equal under
    /// `identity_mask` (`ZAddressOffsetMask` there, all bits otherwise).
    Plain { identity_mask: usize },
    /// Compressed oops in fields (`base + (narrow << shift)`); handles hold plain addresses.
    Narrow { base: usize, shift: u32 },
    /// Generational ZGC (JDK 21+): every reference, handles too, is the address shifted
    /// left by `ZPointerLoadShift` with color bits below. One with a bit of the current
    /// `ZPointerLoadBadMask` may still point where its object was before a relocation, so
    /// it is not followed. Both change at each phase of a collection (the shift is where
    /// the current color's bit is), so they are read where `load_shift` and `load_bad_mask`
    /// are, every time.
    Colored {
        load_shift: usize,
        load_bad_mask: usize,
    },
}

impl Pointers {
    /// Finds out from the VM's structures (after the heap is initialised).
    fn resolve(structs: &VmStructs, reference_size: usize) -> Result<Pointers, String> {
        // SAFETY (both closures): static variables of the loaded libjvm.so, of the type
        // read, set when the heap was initialised at start-up and constant since, or
        // pointers to them that the VM's own structure tables describe.
        // SAFETY: as above.
        let read = |address: usize| unsafe { *(address as *const usize) };
        // SAFETY: as above.
        let read_int = |address: usize| unsafe { *(address as *const i32) };
        if reference_size == 4 {
            let static_of = |names: [&str; 2]| {
                names
                    .iter()
                    .find_map(|name| structs.address("CompressedOops", name).ok())
                    .ok_or("the JVM does not describe CompressedOops")
            };
            let base = read(static_of(["_narrow_oop._base", "_base"])?);
            let shift = read_int(static_of(["_narrow_oop._shift", "_shift"])?) as u32;
            return Ok(Pointers::Narrow { base, shift });
        }
        // ZGC publishes its globals to the serviceability agent through pointers in one
        // instance; a global is 0 unless that collector initialised it.
        let zgc_global = |ty: &str, field: &str| -> Option<usize> {
            let instance = read(structs.address(ty, "_instance_p").ok()?);
            let pointer = read(instance + structs.offset(&[ty], field).ok()?);
            (instance != 0 && pointer != 0).then_some(pointer)
        };
        if let (Some(load_shift), Some(load_bad_mask)) = (
            zgc_global("ZGlobalsForVMStructs", "_ZPointerLoadShift"),
            zgc_global("ZGlobalsForVMStructs", "_ZPointerLoadBadMask"),
        ) {
            // Set (non-zero) only when generational ZGC is the collector.
            if read(load_shift) != 0 {
                return Ok(Pointers::Colored {
                    load_shift,
                    load_bad_mask,
                });
            }
        }
        let offset_mask = ["XGlobalsForVMStructs", "ZGlobalsForVMStructs"]
            .iter()
            .find_map(|ty| zgc_global(ty, "_ZAddressOffsetMask"))
            .map(read)
            .filter(|&mask| mask != 0);
        Ok(Pointers::Plain {
            identity_mask: offset_mask.unwrap_or(usize::MAX),
        })
    }

    /// The object a handle (an `oop*`) refers to, 0 for null. Async-signal-safe.
    fn handle(self, fetch: &Fetch, handle: usize) -> Option<usize> {
        let slot = fetch.word(handle)?;
        let stored = fetch.word(slot)?;
        match self {
            Pointers::Colored { .. } => self.uncolor(fetch, stored),
            _ => Some(stored),
        }
    }

    /// Where a handle's object was when the handle was last written or healed: to compare,
    /// not to follow. (A carrier's own `Thread` object is old and rarely moves, but its
    /// handle is rarely read by the VM either, so under generational ZGC it can stay
    /// load-bad from one collection to the next.)
    fn handle_identity(self, fetch: &Fetch, handle: usize) -> Option<usize> {
        let stored = fetch.word(fetch.word(handle)?)?;
        Some(match self {
            // Each color has its own bit: the remapped one names the shift it was made with.
            Pointers::Colored { .. } if stored >> ZGC_REMAPPED_BITS.end == 0 => 0,
            Pointers::Colored { .. } => stored >> remapped_shift(stored)?,
            _ => stored,
        })
    }

    /// The object the reference field at `address` points to, 0 for null.
    fn field(self, fetch: &Fetch, address: usize) -> Option<usize> {
        match self {
            Pointers::Plain { .. } => fetch.word(address),
            Pointers::Narrow { base, shift } => {
                let narrow = fetch.value::<u32>(address)?;
                Some(if narrow == 0 {
                    0
                } else {
                    base + ((narrow as usize) << shift)
                })
            }
            Pointers::Colored { .. } => self.uncolor(fetch, fetch.word(address)?),
        }
    }

    /// A generational ZGC pointer's address, if it is safe to follow.
    fn uncolor(self, fetch: &Fetch, stored: usize) -> Option<usize> {
        let Pointers::Colored {
            load_shift,
            load_bad_mask,
        } = self
        else {
            return Some(stored);
        };
        // A null reference may carry any color, an old one too.
        if stored >> ZGC_REMAPPED_BITS.end == 0 {
            return Some(0);
        }
        let shift = u32::try_from(fetch.word(load_shift)?)
            .ok()
            .filter(|&shift| shift < usize::BITS)?;
        (stored & fetch.word(load_bad_mask)? == 0).then_some(stored >> shift)
    }

    /// Whether two decoded references are to one object.
    fn same(self, a: usize, b: usize) -> bool {
        match self {
            Pointers::Plain { identity_mask } => a & identity_mask == b & identity_mask,
            _ => a == b,
        }
    }
}

impl VirtualThreads {
    /// Resolves the offsets on a thread attached to the VM (JDK 21+), or says why not.
    pub fn resolve(vm: Vm, structs: &VmStructs) -> Result<VirtualThreads, String> {
        let thread_object = structs.offset(&["JavaThread"], "_threadObj")?;
        let mounted_object = structs.offset(&["JavaThread"], "_vthread")?;
        let jni = current_jni(vm.0).ok_or("this thread is not attached to the JVM")?;
        // SAFETY: `jni` is this attached thread's JNIEnv.
        let java = unsafe { JavaOffsets::ask(jni) }?;
        let pointers = Pointers::resolve(structs, java.reference_size)?;
        let frozen = FrozenOffsets::resolve(vm)
            .inspect_err(|e| log!("walker: frames frozen in stack chunks not walked: {e}"))
            .ok();
        Ok(VirtualThreads {
            thread_object,
            mounted_object,
            java,
            pointers,
            frozen,
        })
    }

    /// The virtual thread `thread` (a `JavaThread`) runs, if any. Async-signal-safe.
    pub fn mounted(&self, fetch: &Fetch, thread: usize) -> Option<Mounted> {
        let mounted = self.virtual_thread(fetch, thread)?;
        let id = fetch.word(at(mounted, self.java.tid)?)? as u64;
        // Thread ids start at 1 and count up; anything else is not a thread.
        if id == 0 || id >= 1 << 48 {
            return None;
        }
        let mut found = Mounted {
            id,
            name: [0; NAME_BYTES],
            name_len: 0,
            name_read: false,
        };
        if let Some(len) = self.name(fetch, mounted, &mut found.name) {
            (found.name_len, found.name_read) = (len, true);
        }
        Some(found)
    }

    /// The `VirtualThread` object carrier `thread` (a `JavaThread`) runs: its `_vthread`,
    /// unless that is its own `Thread` (no virtual thread mounted).
    fn virtual_thread(&self, fetch: &Fetch, thread: usize) -> Option<usize> {
        let mounted = self
            .pointers
            .handle(fetch, at(thread, self.mounted_object)?)?;
        let own = self
            .pointers
            .handle_identity(fetch, at(thread, self.thread_object)?)?;
        (mounted != 0 && !self.pointers.same(mounted, own)).then_some(mounted)
    }

    /// Address of the variable holding the return barrier's address, if frozen frames can be
    /// walked.
    pub fn return_barrier(&self) -> Option<usize> {
        Some(self.frozen.as_ref()?.return_barrier)
    }

    /// The continuation of the virtual thread `thread` (a `JavaThread`) runs, and its newest
    /// stack chunk (0 if none). Async-signal-safe.
    pub fn continuation(&self, fetch: &Fetch, thread: usize) -> Option<(usize, usize)> {
        let frozen = self.frozen.as_ref()?;
        let mounted = self.virtual_thread(fetch, thread)?;
        let continuation = self
            .pointers
            .field(fetch, at(mounted, frozen.continuation)?)?;
        if continuation == 0 {
            return None;
        }
        let tail = self.pointers.field(fetch, at(continuation, frozen.tail)?)?;
        Some((continuation, tail))
    }

    /// Stack chunk `chunk`'s frames, if its fields are consistent. Async-signal-safe.
    pub fn chunk(&self, fetch: &Fetch, chunk: usize) -> Option<Chunk> {
        let frozen = self.frozen.as_ref()?;
        let int = |offset: usize| {
            let value = fetch.value::<i32>(at(chunk, offset)?)?;
            usize::try_from(value).ok()
        };
        let (size, sp, bottom) = (
            int(frozen.chunk_size)?,
            int(frozen.chunk_sp)?,
            int(frozen.chunk_bottom)?,
        );
        if size > MAX_CHUNK_WORDS || sp > bottom || bottom > size {
            return None;
        }
        let start = at(chunk, frozen.chunk_stack)?;
        let word = std::mem::size_of::<usize>();
        Some(Chunk {
            start,
            sp: at(start, sp * word)?,
            end: at(start, bottom * word)?,
            parent: self.pointers.field(fetch, at(chunk, frozen.chunk_parent)?),
        })
    }

    /// Whether two references read by this walker are to the same object.
    pub fn same_object(&self, a: usize, b: usize) -> bool {
        self.pointers.same(a, b)
    }

    /// Copies the ASCII of thread `object`'s name into `out` (other characters as `?`);
    /// how many bytes. None when a reference on the way cannot be followed: under
    /// generational ZGC, a `name` the VM has not loaded since a collection keeps an old
    /// color, and the address it holds may no longer be the `String`'s.
    fn name(&self, fetch: &Fetch, object: usize, out: &mut [u8; NAME_BYTES]) -> Option<u8> {
        let string = self.pointers.field(fetch, at(object, self.java.name)?)?;
        if string == 0 {
            return Some(0);
        }
        let bytes = self
            .pointers
            .field(fetch, at(string, self.java.string_value)?)?;
        let utf16 = fetch.value::<u8>(at(string, self.java.string_coder)?)? != 0;
        let length =
            usize::try_from(fetch.value::<i32>(at(bytes, self.java.array_length)?)?).ok()?;
        let width = if utf16 { 2 } else { 1 };
        let chars = (length / width).min(NAME_BYTES);
        // One fetch per word of the array, not per byte.
        let mut word = (usize::MAX, 0usize);
        let mut byte = |address: usize| -> Option<u8> {
            let aligned = address & !(std::mem::size_of::<usize>() - 1);
            if word.0 != aligned {
                word = (aligned, fetch.word(aligned)?);
            }
            Some(super::fetch::cut(word.1, address - aligned))
        };
        for (i, slot) in out.iter_mut().enumerate().take(chars) {
            let address = at(bytes, self.java.array_base + i * width)?;
            let (low, high) = if utf16 {
                (byte(address)?, byte(at(address, 1)?)?)
            } else {
                (byte(address)?, 0)
            };
            *slot = if high == 0 && low.is_ascii() && !low.is_ascii_control() {
                low
            } else {
                b'?'
            };
        }
        Some(chars as u8)
    }
}

/// Offsets the VM gives out about Java objects.
#[derive(Debug)]
struct JavaOffsets {
    /// `java.lang.Thread.tid` (long) and `.name` (String).
    tid: usize,
    name: usize,
    /// `java.lang.String.value` (byte[]) and `.coder` (0: Latin-1, 1: UTF-16).
    string_value: usize,
    string_coder: usize,
    /// A `byte[]`'s length (int) and first element.
    array_length: usize,
    array_base: usize,
    /// Bytes of a reference field: 4 with compressed oops.
    reference_size: usize,
}

/// A length no header word of a `byte[]` holds by chance.
const PROBE_LENGTH: i32 = 0x2a5b;

impl JavaOffsets {
    /// Asks `jdk.internal.misc.Unsafe`.
    ///
    /// # Safety
    /// `jni` is the calling thread's JNIEnv.
    unsafe fn ask(jni: *mut sys::JNIEnv) -> Result<JavaOffsets, String> {
        // SAFETY: (caller) `jni` is this thread's; every reference made is a local one of a
        // frame popped before returning; exceptions are checked and cleared.
        unsafe {
            if jni!(jni, PushLocalFrame(16)) != Some(0) {
                return Err("no JNI local frame".into());
            }
            let offsets = Self::ask_in_frame(jni);
            if jni!(jni, ExceptionCheck()) != Some(0) {
                jni!(jni, ExceptionClear());
            }
            jni!(jni, PopLocalFrame(ptr::null_mut()));
            offsets
        }
    }

    /// # Safety
    /// As [`JavaOffsets::ask`], inside a local frame.
    unsafe fn ask_in_frame(jni: *mut sys::JNIEnv) -> Result<JavaOffsets, String> {
        let failed = |what: &str| format!("cannot ask Unsafe for {what}");
        // SAFETY: (caller) valid env; names and descriptors are NUL-terminated; every result
        // is checked before use.
        unsafe {
            let class = |name: &CStr| {
                let class = jni!(jni, FindClass(name.as_ptr())).unwrap_or(ptr::null_mut());
                (!class.is_null() && jni!(jni, ExceptionCheck()) == Some(0))
                    .then_some(class)
                    .ok_or_else(|| failed(&name.to_string_lossy()))
            };
            let unsafe_class = class(c"jdk/internal/misc/Unsafe")?;
            let method = |name: &CStr, descriptor: &CStr| {
                let id = jni!(
                    jni,
                    GetMethodID(unsafe_class, name.as_ptr(), descriptor.as_ptr())
                )
                .unwrap_or(ptr::null_mut());
                (!id.is_null())
                    .then_some(id)
                    .ok_or_else(|| failed(&name.to_string_lossy()))
            };
            let get_unsafe = jni!(
                jni,
                GetStaticMethodID(
                    unsafe_class,
                    c"getUnsafe".as_ptr(),
                    c"()Ljdk/internal/misc/Unsafe;".as_ptr()
                )
            )
            .unwrap_or(ptr::null_mut());
            if get_unsafe.is_null() {
                return Err(failed("getUnsafe"));
            }
            let the_unsafe = jni!(jni, CallStaticObjectMethod(unsafe_class, get_unsafe))
                .unwrap_or(ptr::null_mut());
            if the_unsafe.is_null() || jni!(jni, ExceptionCheck()) != Some(0) {
                return Err(failed("itself"));
            }
            let field_offset = method(
                c"objectFieldOffset",
                c"(Ljava/lang/Class;Ljava/lang/String;)J",
            )?;
            let get_int = method(c"getInt", c"(Ljava/lang/Object;J)I")?;
            let offset_of = |class_name: &CStr, field: &CStr| -> Result<usize, String> {
                let holder = class(class_name)?;
                let name = jni!(jni, NewStringUTF(field.as_ptr())).unwrap_or(ptr::null_mut());
                let offset =
                    jni!(jni, CallLongMethod(the_unsafe, field_offset, holder, name)).unwrap_or(-1);
                if jni!(jni, ExceptionCheck()) != Some(0) || offset <= 0 {
                    return Err(failed(&field.to_string_lossy()));
                }
                Ok(offset as usize)
            };
            // `arrayBaseOffset` and `arrayIndexScale` return an int until JDK 22, a long since.
            let array_layout = |class_name: &CStr, name: &CStr| -> Result<usize, String> {
                let array_class = class(class_name)?;
                let value = match method(name, c"(Ljava/lang/Class;)I") {
                    Ok(id) => jni!(jni, CallIntMethod(the_unsafe, id, array_class)).map(i64::from),
                    Err(_) => {
                        jni!(jni, ExceptionClear());
                        let id = method(name, c"(Ljava/lang/Class;)J")?;
                        jni!(jni, CallLongMethod(the_unsafe, id, array_class))
                    }
                };
                match value {
                    Some(value) if value > 0 && jni!(jni, ExceptionCheck()) == Some(0) => {
                        Ok(value as usize)
                    }
                    _ => Err(failed(&name.to_string_lossy())),
                }
            };
            let array_base = array_layout(c"[B", c"arrayBaseOffset")?;
            let reference_size = array_layout(c"[Ljava/lang/Object;", c"arrayIndexScale")?;
            let probe = jni!(jni, NewByteArray(PROBE_LENGTH)).unwrap_or(ptr::null_mut());
            if probe.is_null() {
                return Err(failed("an array"));
            }
            let array_length = (4..array_base)
                .step_by(4)
                .find(|&offset| {
                    jni!(
                        jni,
                        CallIntMethod(the_unsafe, get_int, probe, offset as i64)
                    ) == Some(PROBE_LENGTH)
                })
                .ok_or_else(|| failed("an array's length"))?;
            Ok(JavaOffsets {
                tid: offset_of(c"java/lang/Thread", c"tid")?,
                name: offset_of(c"java/lang/Thread", c"name")?,
                string_value: offset_of(c"java/lang/String", c"value")?,
                string_coder: offset_of(c"java/lang/String", c"coder")?,
                array_length,
                array_base,
                reference_size,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_read_as_the_jdk_prints_virtual_threads() {
        let mut mounted = Mounted {
            id: 21,
            name: [0; NAME_BYTES],
            name_len: 0,
            name_read: true,
        };
        assert_eq!(mounted.label(), "VirtualThread[#21]");
        mounted.name[..8].copy_from_slice(b"worker-3");
        mounted.name_len = 8;
        assert_eq!(mounted.name(), Some("worker-3"));
        assert_eq!(mounted.label(), "VirtualThread[#21,worker-3]");
        mounted.name_read = false;
        assert_eq!(mounted.name(), None);
        assert_eq!(mounted.label(), "VirtualThread[#21]");
        assert_eq!(
            mounted.named("crowd-7").label(),
            "VirtualThread[#21,crowd-7]"
        );
        // Cut to NAME_BYTES, never inside a character.
        let long = format!("{}é", "x".repeat(NAME_BYTES - 1));
        assert_eq!(mounted.named(&long).name(), Some(&long[..NAME_BYTES - 1]));
    }
}
