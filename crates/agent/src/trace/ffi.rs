//! The JNI and JVMTI calls tracing makes that have no wrapper in `jtap-jvmti`: defining and
//! binding the runtime class, turning Java values into bounded text, thread names, module
//! reads, bytecodes and the allocation that a class-file hook returns. This is the tracing
//! FFI module: every `unsafe` block of `trace` lives here.

use std::ffi::{c_char, c_void, CStr, CString};
use std::ptr;
use std::sync::OnceLock;

use jtap_jvmti::{sys, Env};

use crate::thread::Vm;

/// Calls JNI function `$f` through the table of `$env` (a `*mut sys::JNIEnv`); `None` when
/// the VM lacks it. Use inside `unsafe`.
macro_rules! jni {
    ($env:expr, $f:ident ( $($arg:expr),* $(,)? )) => {{
        let env: *mut sys::JNIEnv = $env;
        (**env).$f.map(|function| function(env $(, $arg)*))
    }};
}

/// Calls JVMTI function `$f` of `$env` (a `*mut sys::jvmtiEnv`), true on success.
macro_rules! jvmti {
    ($env:expr, $f:ident ( $($arg:expr),* $(,)? )) => {{
        let env: *mut sys::jvmtiEnv = $env;
        (**env).$f.map(|function| function(env $(, $arg)*)) == Some(sys::JVMTI_ERROR_NONE)
    }};
}

/// The calling thread's JNI environment: valid only on this thread, for this call.
#[derive(Clone, Copy)]
pub struct Jni(*mut sys::JNIEnv);

/// A native method to bind: name, JVM descriptor and the function.
pub struct Native {
    /// Method name.
    pub name: &'static CStr,
    /// JVM descriptor.
    pub signature: &'static CStr,
    /// The `extern "system"` function.
    pub function: *mut c_void,
}

/// A JNI global reference, valid on every thread until the end of the process (tracing never
/// frees the few it keeps: the runtime class and `java/lang` classes).
#[derive(Clone, Copy)]
pub struct Global(sys::jobject);

// SAFETY: a global reference may be used from any thread.
unsafe impl Send for Global {}
// SAFETY: as above.
unsafe impl Sync for Global {}

impl Global {
    /// The reference, for JNI and JVMTI calls.
    pub fn raw(self) -> sys::jobject {
        self.0
    }
}

impl Jni {
    /// The environment a native method or event callback received.
    ///
    /// # Safety
    /// `env` is the JNIEnv the VM passed to the current call on this thread.
    pub unsafe fn from_raw(env: *mut sys::JNIEnv) -> Jni {
        Jni(env)
    }

    /// The calling thread's environment, if it is attached to the VM.
    pub fn current(vm: Vm) -> Option<Jni> {
        let mut env: *mut c_void = ptr::null_mut();
        // SAFETY: vm is the VM's invocation interface; GetEnv only writes the out-parameter.
        let code = unsafe {
            (**vm.0)
                .GetEnv
                .map(|get| get(vm.0, &mut env, sys::JNI_VERSION_1_8 as sys::jint))
        };
        (code == Some(sys::JNI_OK as sys::jint) && !env.is_null()).then(|| Jni(env.cast()))
    }

    /// Clears a pending exception; true if there was one.
    pub fn clear_exception(self) -> bool {
        // SAFETY: valid env of the calling thread.
        unsafe {
            if jni!(self.0, ExceptionCheck()) == Some(0) {
                return false;
            }
            jni!(self.0, ExceptionClear());
        }
        true
    }

    /// Defines a class in the bootstrap loader from its bytes; a global reference to it.
    pub fn define_boot_class(self, name: &CStr, bytes: &[u8]) -> Result<Global, String> {
        // SAFETY: valid env; a null loader means the bootstrap loader; the buffer outlives
        // the call and its length is passed.
        let class = unsafe {
            jni!(
                self.0,
                DefineClass(
                    name.as_ptr(),
                    ptr::null_mut(),
                    bytes.as_ptr().cast(),
                    bytes.len() as sys::jsize
                )
            )
        };
        let class = class.unwrap_or(ptr::null_mut());
        if self.clear_exception() || class.is_null() {
            return Err(format!("DefineClass({}) failed", name.to_string_lossy()));
        }
        self.global(class)
            .ok_or_else(|| "NewGlobalRef failed".to_string())
    }

    /// A loaded class by internal name (its loader: the caller's, or the bootstrap one).
    pub fn find_class(self, name: &CStr) -> Option<Global> {
        // SAFETY: valid env and NUL-terminated name.
        let class = unsafe { jni!(self.0, FindClass(name.as_ptr())) }.unwrap_or(ptr::null_mut());
        if self.clear_exception() || class.is_null() {
            return None;
        }
        let global = self.global(class);
        self.delete_local(class);
        global
    }

    /// Binds `natives` to the native methods of `class`.
    pub fn register_natives(self, class: Global, natives: &[Native]) -> Result<(), String> {
        let table: Vec<sys::JNINativeMethod> = natives
            .iter()
            .map(|n| sys::JNINativeMethod {
                name: n.name.as_ptr() as *mut c_char,
                signature: n.signature.as_ptr() as *mut c_char,
                fnPtr: n.function,
            })
            .collect();
        // SAFETY: valid env and class; the table and its strings outlive the call.
        let code = unsafe {
            jni!(
                self.0,
                RegisterNatives(class.0, table.as_ptr(), table.len() as sys::jint)
            )
        };
        if self.clear_exception() || code != Some(0) {
            return Err("RegisterNatives failed".into());
        }
        Ok(())
    }

    /// A global reference to `object`.
    pub fn global(self, object: sys::jobject) -> Option<Global> {
        // SAFETY: valid env; object is a live reference.
        let global = unsafe { jni!(self.0, NewGlobalRef(object)) }.unwrap_or(ptr::null_mut());
        (!global.is_null()).then_some(Global(global))
    }

    /// Deletes a local reference (null is ignored).
    pub fn delete_local(self, object: sys::jobject) {
        if !object.is_null() {
            // SAFETY: valid env; object is a local reference of this thread.
            unsafe { jni!(self.0, DeleteLocalRef(object)) };
        }
    }

    /// The class of `object` (a local reference the caller deletes), or null.
    pub fn object_class(self, object: sys::jobject) -> sys::jclass {
        // SAFETY: valid env; object is a live, non-null reference (checked by the caller).
        unsafe { jni!(self.0, GetObjectClass(object)) }.unwrap_or(ptr::null_mut())
    }

    /// Whether `sub` is `sup` or extends or implements it.
    pub fn is_assignable(self, sub: sys::jclass, sup: sys::jclass) -> bool {
        // SAFETY: valid env; both are live class references.
        let yes = unsafe { jni!(self.0, IsAssignableFrom(sub, sup)) } == Some(1);
        !self.clear_exception() && yes
    }

    /// The module of `class` (a local reference), or null.
    pub fn module_of(self, class: sys::jclass) -> sys::jobject {
        // SAFETY: valid env and class reference; GetModule exists since JNI 9.
        let module = unsafe { jni!(self.0, GetModule(class)) }.unwrap_or(ptr::null_mut());
        self.clear_exception();
        module
    }

    /// Runs `body` inside a JNI local frame, so every local reference it makes is freed.
    pub fn with_local_frame<T>(self, capacity: i32, body: impl FnOnce() -> T) -> Option<T> {
        // SAFETY: valid env.
        if unsafe { jni!(self.0, PushLocalFrame(capacity)) } != Some(0) {
            self.clear_exception();
            return None;
        }
        let result = body();
        // SAFETY: pops the frame pushed above.
        unsafe { jni!(self.0, PopLocalFrame(ptr::null_mut())) };
        Some(result)
    }

    /// `object` as bounded text: strings quoted, arrays and collections by their first
    /// elements, everything else by `toString()`; at most `cap` characters, longer text cut
    /// with `...`. Never leaves an exception pending. Call inside [`Jni::with_local_frame`].
    pub fn describe(self, object: sys::jobject, cap: usize) -> String {
        let mut out = String::new();
        self.describe_into(object, cap, 0, &mut out);
        cut(out, cap)
    }

    fn describe_into(self, object: sys::jobject, cap: usize, depth: u32, out: &mut String) {
        if object.is_null() {
            out.push_str("null");
            return;
        }
        let Some(ids) = Ids::get(self) else {
            out.push_str("<unavailable>");
            return;
        };
        // SAFETY (all calls below): valid env; object is a live local reference; method ids
        // come from the classes they are called on; results are checked for exceptions.
        let class = unsafe { jni!(self.0, GetObjectClass(object)) }.unwrap_or(ptr::null_mut());
        let name = self
            .call_string(class, ids.class_get_name, &[])
            .unwrap_or_default();
        self.delete_local(class);
        if name == "java.lang.String" {
            out.push('"');
            out.push_str(&self.string(object, cap).unwrap_or_default());
            out.push('"');
            return;
        }
        if let Some(element) = name.strip_prefix('[') {
            // SAFETY: object is an array.
            let len = unsafe { jni!(self.0, GetArrayLength(object)) }
                .unwrap_or(0)
                .max(0);
            if element.starts_with(['L', '[']) && depth < 2 {
                out.push('[');
                for i in 0..len.min(ELEMENTS as i32) {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    // SAFETY: i < len.
                    let item = unsafe { jni!(self.0, GetObjectArrayElement(object, i)) }
                        .unwrap_or(ptr::null_mut());
                    self.clear_exception();
                    self.describe_into(item, cap, depth + 1, out);
                    self.delete_local(item);
                    if out.len() > cap {
                        break;
                    }
                }
                if len as usize > ELEMENTS {
                    out.push_str(", ...");
                }
                out.push(']');
                return;
            }
            if let Some(&(_, to_string, copy_of)) = ids
                .arrays
                .iter()
                .find(|(code, _, _)| element.as_bytes().first() == Some(code))
            {
                let mut array = object;
                if len as usize > ELEMENTS {
                    let args = [
                        sys::jvalue { l: object },
                        sys::jvalue { i: ELEMENTS as i32 },
                    ];
                    array = unsafe {
                        jni!(
                            self.0,
                            CallStaticObjectMethodA(ids.arrays_class.0, copy_of, args.as_ptr())
                        )
                    }
                    .unwrap_or(ptr::null_mut());
                    if self.clear_exception() {
                        array = ptr::null_mut();
                    }
                }
                let args = [sys::jvalue { l: array }];
                let text = unsafe {
                    jni!(
                        self.0,
                        CallStaticObjectMethodA(ids.arrays_class.0, to_string, args.as_ptr())
                    )
                }
                .unwrap_or(ptr::null_mut());
                let text = if self.clear_exception() {
                    None
                } else {
                    self.string(text, cap)
                };
                let text = text.unwrap_or_default();
                if len as usize > ELEMENTS {
                    out.push_str(text.strip_suffix(']').unwrap_or(&text));
                    out.push_str(", ...]");
                } else {
                    out.push_str(&text);
                }
                return;
            }
        }
        if depth < 2 {
            for (interface, via_entries) in [(ids.collection, false), (ids.map, true)] {
                // SAFETY: both are class references.
                if unsafe { jni!(self.0, IsInstanceOf(object, interface.0)) } == Some(1) {
                    self.describe_collection(object, via_entries, ids, cap, depth, out);
                    return;
                }
            }
        }
        match self.call_string(object, ids.to_string, &[]) {
            Ok(text) => out.push_str(&text),
            Err(thrown) => out.push_str(&format!("<toString() threw {thrown}>")),
        }
    }

    fn describe_collection(
        self,
        object: sys::jobject,
        map: bool,
        ids: &Ids,
        cap: usize,
        depth: u32,
        out: &mut String,
    ) {
        let call_object = |target: sys::jobject, method: sys::jmethodID| -> sys::jobject {
            // SAFETY: valid env; method belongs to target's type; exceptions cleared below.
            let result = unsafe { jni!(self.0, CallObjectMethodA(target, method, ptr::null())) }
                .unwrap_or(ptr::null_mut());
            if self.clear_exception() {
                ptr::null_mut()
            } else {
                result
            }
        };
        let collection = if map {
            call_object(object, ids.entry_set)
        } else {
            object
        };
        if collection.is_null() {
            out.push_str("<unavailable>");
            return;
        }
        // SAFETY: valid env; collection is a java.util.Collection.
        let size =
            unsafe { jni!(self.0, CallIntMethodA(collection, ids.size, ptr::null())) }.unwrap_or(0);
        self.clear_exception();
        let iterator = call_object(collection, ids.iterator);
        out.push(if map { '{' } else { '[' });
        let mut shown = 0;
        while !iterator.is_null() && shown < ELEMENTS && out.len() <= cap {
            // SAFETY: iterator is a java.util.Iterator.
            let more = unsafe {
                jni!(
                    self.0,
                    CallBooleanMethodA(iterator, ids.has_next, ptr::null())
                )
            } == Some(1);
            if self.clear_exception() || !more {
                break;
            }
            let item = call_object(iterator, ids.next);
            if shown > 0 {
                out.push_str(", ");
            }
            self.describe_into(item, cap, depth + 1, out);
            self.delete_local(item);
            shown += 1;
        }
        if (size as usize) > shown {
            out.push_str(&format!(
                "{}... ({size} elements)",
                if shown > 0 { ", " } else { "" }
            ));
        }
        out.push(if map { '}' } else { ']' });
    }

    /// Calls a `String`-returning method; on an exception, its class name as the error.
    fn call_string(
        self,
        target: sys::jobject,
        method: sys::jmethodID,
        args: &[sys::jvalue],
    ) -> Result<String, String> {
        // SAFETY: valid env; the caller passes a method of target's type and its arguments.
        let text = unsafe { jni!(self.0, CallObjectMethodA(target, method, args.as_ptr())) }
            .unwrap_or(ptr::null_mut());
        // SAFETY: valid env.
        let thrown = unsafe { jni!(self.0, ExceptionOccurred()) }.unwrap_or(ptr::null_mut());
        if !thrown.is_null() {
            // SAFETY: valid env.
            unsafe { jni!(self.0, ExceptionClear()) };
            let name = Ids::get(self)
                .and_then(|ids| {
                    // SAFETY: thrown is a live local reference.
                    let class =
                        unsafe { jni!(self.0, GetObjectClass(thrown)) }.unwrap_or(ptr::null_mut());
                    let name = self.call_plain_string(class, ids.class_get_name);
                    self.delete_local(class);
                    name
                })
                .unwrap_or_else(|| "an exception".into());
            self.delete_local(thrown);
            return Err(name);
        }
        Ok(self
            .string(text, usize::MAX)
            .unwrap_or_else(|| "null".into()))
    }

    /// Like [`Jni::call_string`], for calls made while handling another exception.
    fn call_plain_string(self, target: sys::jobject, method: sys::jmethodID) -> Option<String> {
        // SAFETY: valid env; method of target's type, no arguments.
        let text = unsafe { jni!(self.0, CallObjectMethodA(target, method, ptr::null())) }
            .unwrap_or(ptr::null_mut());
        if self.clear_exception() {
            return None;
        }
        self.string(text, usize::MAX)
    }

    /// The first `cap` characters of a `java.lang.String`.
    fn string(self, text: sys::jstring, cap: usize) -> Option<String> {
        if text.is_null() {
            return None;
        }
        // SAFETY: text is a java.lang.String reference; the region is within its length and
        // the buffer holds the modified UTF-8 of that many characters (≤ 3 bytes each) + NUL.
        unsafe {
            let len = jni!(self.0, GetStringLength(text)).unwrap_or(0).max(0) as usize;
            let take = len.min(cap.min(1 << 16));
            let mut buf = vec![0u8; take * 3 + 1];
            jni!(
                self.0,
                GetStringUTFRegion(text, 0, take as sys::jsize, buf.as_mut_ptr().cast())
            );
            if self.clear_exception() {
                return None;
            }
            let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
            let mut s = String::from_utf8_lossy(&buf[..end]).into_owned();
            if take < len {
                s.push_str("...");
            }
            Some(s)
        }
    }
}

/// Elements shown of an array or collection.
const ELEMENTS: usize = 8;

/// `text` cut to `cap` characters, with `...` when cut.
fn cut(text: String, cap: usize) -> String {
    match text.char_indices().nth(cap) {
        Some((end, _)) => format!("{}...", &text[..end]),
        None => text,
    }
}

/// Method ids of `java.lang`/`java.util` methods used to describe values (classes of the
/// bootstrap loader are never unloaded, so the ids stay valid).
struct Ids {
    to_string: sys::jmethodID,
    class_get_name: sys::jmethodID,
    collection: Global,
    map: Global,
    size: sys::jmethodID,
    iterator: sys::jmethodID,
    has_next: sys::jmethodID,
    next: sys::jmethodID,
    entry_set: sys::jmethodID,
    arrays_class: Global,
    /// Per primitive array type: descriptor char, `Arrays.toString`, `Arrays.copyOf`.
    arrays: Vec<(u8, sys::jmethodID, sys::jmethodID)>,
}

// SAFETY: method ids and global references are valid on every thread.
unsafe impl Send for Ids {}
// SAFETY: as above; the struct is immutable once built.
unsafe impl Sync for Ids {}

impl Ids {
    fn get(jni: Jni) -> Option<&'static Ids> {
        static IDS: OnceLock<Option<Ids>> = OnceLock::new();
        IDS.get_or_init(|| Ids::load(jni)).as_ref()
    }

    fn load(jni: Jni) -> Option<Ids> {
        let method =
            |class: Global, name: &str, sig: &str, is_static: bool| -> Option<sys::jmethodID> {
                let (name, sig) = (CString::new(name).ok()?, CString::new(sig).ok()?);
                // SAFETY: valid env and class; NUL-terminated strings.
                let id = unsafe {
                    if is_static {
                        jni!(
                            jni.0,
                            GetStaticMethodID(class.0, name.as_ptr(), sig.as_ptr())
                        )
                    } else {
                        jni!(jni.0, GetMethodID(class.0, name.as_ptr(), sig.as_ptr()))
                    }
                }
                .unwrap_or(ptr::null_mut());
                (!jni.clear_exception() && !id.is_null()).then_some(id)
            };
        let object = jni.find_class(c"java/lang/Object")?;
        let class = jni.find_class(c"java/lang/Class")?;
        let collection = jni.find_class(c"java/util/Collection")?;
        let map = jni.find_class(c"java/util/Map")?;
        let iterator = jni.find_class(c"java/util/Iterator")?;
        let arrays_class = jni.find_class(c"java/util/Arrays")?;
        let mut arrays = Vec::new();
        for code in *b"ZBCSIJFD" {
            let array = format!("[{}", code as char);
            arrays.push((
                code,
                method(
                    arrays_class,
                    "toString",
                    &format!("({array})Ljava/lang/String;"),
                    true,
                )?,
                method(arrays_class, "copyOf", &format!("({array}I){array}"), true)?,
            ));
        }
        Some(Ids {
            to_string: method(object, "toString", "()Ljava/lang/String;", false)?,
            class_get_name: method(class, "getName", "()Ljava/lang/String;", false)?,
            size: method(collection, "size", "()I", false)?,
            iterator: method(collection, "iterator", "()Ljava/util/Iterator;", false)?,
            has_next: method(iterator, "hasNext", "()Z", false)?,
            next: method(iterator, "next", "()Ljava/lang/Object;", false)?,
            entry_set: method(map, "entrySet", "()Ljava/util/Set;", false)?,
            collection,
            map,
            arrays_class,
            arrays,
        })
    }
}

/// The calling thread's name (JVMTI GetThreadInfo), or `None` when it has no Java thread.
pub fn current_thread_name(env: Env, jni: Jni) -> Option<String> {
    let mut info = sys::jvmtiThreadInfo::default();
    // SAFETY: valid env; a null thread means the current one; out-parameter on our stack.
    if !unsafe { jvmti!(env.raw(), GetThreadInfo(ptr::null_mut(), &mut info)) } {
        return None;
    }
    let name = if info.name.is_null() {
        None
    } else {
        // SAFETY: JVMTI returned a NUL-terminated string it allocated, freed right after.
        let name = unsafe { CStr::from_ptr(info.name) }
            .to_string_lossy()
            .into_owned();
        deallocate(env, info.name.cast());
        Some(name)
    };
    jni.delete_local(info.thread_group);
    jni.delete_local(info.context_class_loader);
    name
}

fn deallocate(env: Env, memory: *mut u8) {
    // SAFETY: memory was allocated by this env's JVMTI allocator and is freed once.
    let _ = unsafe { jvmti!(env.raw(), Deallocate(memory)) };
}

/// Bytes allocated with the JVMTI allocator and handed to the VM (a class-file hook's
/// `new_class_data`): the VM frees them.
pub fn give_to_vm(env: Env, bytes: &[u8], len_out: *mut sys::jint, data_out: *mut *mut u8) -> bool {
    let mut memory: *mut u8 = ptr::null_mut();
    // SAFETY: valid env; out-parameter on our stack.
    if !unsafe { jvmti!(env.raw(), Allocate(bytes.len() as sys::jlong, &mut memory)) }
        || memory.is_null()
    {
        return false;
    }
    // SAFETY: memory holds bytes.len() bytes; the out-pointers are the hook's, valid for
    // this call.
    unsafe {
        ptr::copy_nonoverlapping(bytes.as_ptr(), memory, bytes.len());
        *len_out = bytes.len() as sys::jint;
        *data_out = memory;
    }
    true
}

/// The class bytes a class-file hook received.
///
/// # Safety
/// `data` points at `len` bytes valid for the duration of the hook call.
pub unsafe fn hook_bytes<'a>(data: *const u8, len: sys::jint) -> &'a [u8] {
    if data.is_null() || len <= 0 {
        return &[];
    }
    // SAFETY: the caller's contract.
    unsafe { std::slice::from_raw_parts(data, len as usize) }
}

/// A class name the hook received (null for some hidden classes).
///
/// # Safety
/// `name` is null or a NUL-terminated string valid for the hook call.
pub unsafe fn hook_name(name: *const c_char) -> Option<String> {
    // SAFETY: the caller's contract.
    (!name.is_null()).then(|| {
        unsafe { CStr::from_ptr(name) }
            .to_string_lossy()
            .into_owned()
    })
}

/// Whether JVMTI may retransform `class` (false for arrays, primitives, hidden classes).
pub fn is_modifiable(env: Env, class: sys::jclass) -> bool {
    let mut modifiable: sys::jboolean = 0;
    // SAFETY: valid env; class is a live reference; out-parameter on our stack.
    unsafe { jvmti!(env.raw(), IsModifiableClass(class, &mut modifiable)) && modifiable != 0 }
}

/// Whether the class has been linked (verified and prepared): before that, the VM reports
/// its methods' bytecodes differently.
pub fn is_linked(env: Env, class: sys::jclass) -> bool {
    let mut status: sys::jint = 0;
    // SAFETY: valid env; class is a live reference; out-parameter on our stack.
    let known = unsafe { jvmti!(env.raw(), GetClassStatus(class, &mut status)) };
    let linked = (sys::JVMTI_CLASS_STATUS_VERIFIED | sys::JVMTI_CLASS_STATUS_PREPARED) as sys::jint;
    known && status & linked == linked
}

/// Lets `module` read `to` (so classes of a named module can call the runtime class, which
/// sits in the bootstrap loader's unnamed module). True when done or not needed.
pub fn add_module_reads(env: Env, module: sys::jobject, to: sys::jobject) -> bool {
    if module.is_null() || to.is_null() {
        return true;
    }
    // SAFETY: valid env; both are live module references.
    unsafe { jvmti!(env.raw(), AddModuleReads(module, to)) }
}

/// The named module defining `package` (internal form, `java/util`) in `loader`, or null.
pub fn named_module(env: Env, loader: sys::jobject, package: &str) -> sys::jobject {
    let Ok(package) = CString::new(package) else {
        return ptr::null_mut();
    };
    let mut module: sys::jobject = ptr::null_mut();
    // SAFETY: valid env; loader is null (bootstrap) or a live reference; out-parameter.
    if unsafe {
        jvmti!(
            env.raw(),
            GetNamedModule(loader, package.as_ptr(), &mut module)
        )
    } {
        module
    } else {
        ptr::null_mut()
    }
}

/// The method's bytecodes as the VM holds them now (needs `can_get_bytecodes`).
pub fn bytecodes(env: Env, method: sys::jmethodID) -> Option<Vec<u8>> {
    let (mut len, mut code): (sys::jint, *mut u8) = (0, ptr::null_mut());
    // SAFETY: valid env and method id; out-parameters on our stack.
    if !unsafe { jvmti!(env.raw(), GetBytecodes(method, &mut len, &mut code)) } || code.is_null() {
        return None;
    }
    // SAFETY: JVMTI returned len bytes it allocated; copied, then freed once.
    let copy = unsafe { std::slice::from_raw_parts(code, len.max(0) as usize) }.to_vec();
    deallocate(env, code);
    Some(copy)
}

/// `CLOCK_MONOTONIC_COARSE` in nanoseconds: the time of the last kernel tick, read from the
/// vDSO without touching the TSC (resolution 1/HZ).
pub fn monotonic_coarse_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The CPU's time-stamp counter.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub fn rdtsc() -> u64 {
    // SAFETY: RDTSC has no preconditions and touches no memory.
    #[allow(unused_unsafe)]
    unsafe {
        std::arch::x86_64::_rdtsc()
    }
}
