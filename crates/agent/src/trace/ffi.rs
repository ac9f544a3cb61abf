//! The JNI and JVMTI calls tracing makes that have no wrapper in `jtap-jvmti`: defining and
//! binding the runtime class, reading Java values (fields, arrays, strings, class names,
//! identity hashes; see [`super::values`] for what is shown), thread names, module reads,
//! bytecodes and the allocation that a class-file hook returns. This is the tracing
//! FFI module: every `unsafe` block of `trace` lives here.

use jtap_classfile::descriptor::java_name;
use std::ffi::{c_char, c_void, CStr, CString};
use std::ptr;
use std::sync::OnceLock;

use jtap_jvmti::{sys, Env};

use crate::thread::Vm;

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

/// A `static long` field of a class held by a [`Global`]: usable from any attached thread.
#[derive(Clone, Copy)]
pub struct StaticLong {
    class: Global,
    id: sys::jfieldID,
}

// SAFETY: field ids are valid on every thread while their class is loaded (the class is held
// by a global reference).
unsafe impl Send for StaticLong {}
// SAFETY: as above.
unsafe impl Sync for StaticLong {}

/// A class loader held by a JNI weak global reference (null: the bootstrap loader), to tell
/// classes of the same name apart without keeping their loader alive. Deleted with
/// [`Jni::delete_weak`].
#[derive(Clone, Copy)]
pub struct WeakLoader(sys::jweak);

// SAFETY: a weak global reference may be used from any thread.
unsafe impl Send for WeakLoader {}
// SAFETY: as above.
unsafe impl Sync for WeakLoader {}

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

    /// The raw environment, for calls this wrapper does not offer.
    pub fn as_raw(self) -> *mut sys::JNIEnv {
        self.0
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

    /// Holds `loader` (null: the bootstrap loader) weakly; None when the VM has no memory
    /// for the reference.
    pub fn weak_loader(self, loader: sys::jobject) -> Option<WeakLoader> {
        if loader.is_null() {
            return Some(WeakLoader(ptr::null_mut()));
        }
        // SAFETY: valid env; loader is a live reference.
        let weak = unsafe { jni!(self.0, NewWeakGlobalRef(loader)) }.unwrap_or(ptr::null_mut());
        self.clear_exception();
        (!weak.is_null()).then_some(WeakLoader(weak))
    }

    /// Whether `held` is `loader` (null: the bootstrap loader). A loader since collected is
    /// no loader.
    pub fn is_loader(self, held: WeakLoader, loader: sys::jobject) -> bool {
        match (held.0.is_null(), loader.is_null()) {
            (true, true) => true,
            (false, false) => {
                // SAFETY: valid env; a weak global reference not deleted yet and a live one.
                (unsafe { jni!(self.0, IsSameObject(held.0, loader)) }) == Some(1)
            }
            _ => false,
        }
    }

    /// Whether the loader `held` holds was collected.
    pub fn is_collected(self, held: WeakLoader) -> bool {
        // SAFETY: valid env; a weak global reference not deleted yet. A collected object's
        // weak reference is the same object as null.
        !held.0.is_null()
            && (unsafe { jni!(self.0, IsSameObject(held.0, ptr::null_mut())) }) == Some(1)
    }

    /// Deletes the weak reference (the bootstrap loader's null is ignored).
    pub fn delete_weak(self, held: WeakLoader) {
        if !held.0.is_null() {
            // SAFETY: valid env; a weak global reference deleted only here, once.
            unsafe { jni!(self.0, DeleteWeakGlobalRef(held.0)) };
        }
    }

    /// A weak global reference to `object` (a live reference), or None when the VM has no
    /// memory for it.
    pub fn new_weak(self, object: sys::jobject) -> Option<sys::jweak> {
        // SAFETY: valid env; object is a live reference.
        let weak = unsafe { jni!(self.0, NewWeakGlobalRef(object)) }.unwrap_or(ptr::null_mut());
        self.clear_exception();
        (!weak.is_null()).then_some(weak)
    }

    /// Whether the GC cleared `weak` (its object was collected).
    pub fn is_cleared(self, weak: sys::jweak) -> bool {
        // SAFETY: valid env; a weak global reference not deleted yet. A collected object's
        // weak reference is the same object as null.
        (unsafe { jni!(self.0, IsSameObject(weak, ptr::null_mut())) }) == Some(1)
    }

    /// A local reference to `weak`'s object, or null once it was collected.
    pub fn local_of(self, weak: sys::jweak) -> sys::jobject {
        // SAFETY: valid env; a weak global reference not deleted yet.
        unsafe { jni!(self.0, NewLocalRef(weak)) }.unwrap_or(ptr::null_mut())
    }

    /// Deletes a weak global reference, once.
    pub fn delete_weak_ref(self, weak: sys::jweak) {
        // SAFETY: valid env; the caller owns `weak` and deletes it only here.
        unsafe { jni!(self.0, DeleteWeakGlobalRef(weak)) };
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

    /// The signature of `class` (`Ljava/lang/String;`, `[I`), from JVMTI: no Java code runs.
    pub fn class_signature(self, env: &Env, class: sys::jclass) -> Option<String> {
        // SAFETY: valid env; class is a live reference.
        unsafe { env.class_signature(class) }.ok()
    }

    /// The shallow size of `object` in bytes, as the VM lays it out (JVMTI's
    /// `GetObjectSize`).
    pub fn object_size(self, env: &Env, object: sys::jobject) -> Option<u64> {
        // SAFETY: valid env; object is a live reference.
        unsafe { env.object_size(object) }
            .ok()
            .map(|size| size.max(0) as u64)
    }

    /// The identity hash code of `object` (what `System.identityHashCode` returns).
    pub fn identity_hash(self, env: &Env, object: sys::jobject) -> Option<i32> {
        let mut hash: sys::jint = 0;
        // SAFETY: valid env; object is a live reference; out-parameter on our stack.
        unsafe { jvmti!(env.raw(), GetObjectHashCode(object, &mut hash)) }.then_some(hash)
    }

    /// The first `most` instance fields `class` itself declares, in declaration order.
    pub fn instance_fields(self, env: &Env, class: sys::jclass, most: usize) -> Vec<Field> {
        self.declared_fields(env, class, most, false)
    }

    /// The first `most` static fields (`statics`) or instance fields `class` itself declares,
    /// in declaration order.
    pub fn declared_fields(
        self,
        env: &Env,
        class: sys::jclass,
        most: usize,
        statics: bool,
    ) -> Vec<Field> {
        const ACC_STATIC: sys::jint = 0x0008;
        let (mut count, mut ids): (sys::jint, *mut sys::jfieldID) = (0, ptr::null_mut());
        // SAFETY: valid env and class; out-parameters on our stack.
        if !unsafe { jvmti!(env.raw(), GetClassFields(class, &mut count, &mut ids)) }
            || ids.is_null()
        {
            return Vec::new();
        }
        // SAFETY: JVMTI returned `count` field ids it allocated; copied, then freed once.
        let all = unsafe { std::slice::from_raw_parts(ids, count.max(0) as usize) }.to_vec();
        deallocate(env, ids.cast());
        let mut fields = Vec::new();
        for id in all {
            if fields.len() == most {
                break;
            }
            let mut modifiers: sys::jint = 0;
            // SAFETY: valid env, class and field id; out-parameter on our stack.
            if !unsafe { jvmti!(env.raw(), GetFieldModifiers(class, id, &mut modifiers)) }
                || (modifiers & ACC_STATIC != 0) != statics
            {
                continue;
            }
            let (mut name, mut signature): (*mut c_char, *mut c_char) =
                (ptr::null_mut(), ptr::null_mut());
            // SAFETY: as above; a null generic pointer is allowed.
            if !unsafe {
                jvmti!(
                    env.raw(),
                    GetFieldName(class, id, &mut name, &mut signature, ptr::null_mut())
                )
            } {
                continue;
            }
            let text = |p: *mut c_char| {
                // SAFETY: JVMTI returned a NUL-terminated string (or null) it allocated.
                let owned = (!p.is_null())
                    .then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned());
                if !p.is_null() {
                    deallocate(env, p.cast());
                }
                owned.unwrap_or_default()
            };
            let (name, signature) = (text(name), text(signature));
            fields.push(Field {
                id,
                name,
                signature,
            });
        }
        fields
    }

    /// The superclass of `class` (a local reference), or null for `Object` and interfaces.
    pub fn superclass(self, class: sys::jclass) -> sys::jclass {
        // SAFETY: valid env; class is a live reference.
        unsafe { jni!(self.0, GetSuperclass(class)) }.unwrap_or(ptr::null_mut())
    }

    /// The id of instance field `name` (JVM type `signature`) of `class` or its superclasses.
    /// `class` must be initialised (the class of an existing object is), or this initialises it.
    pub fn field_id(
        self,
        class: sys::jclass,
        name: &CStr,
        signature: &CStr,
    ) -> Option<sys::jfieldID> {
        // SAFETY: valid env and class; NUL-terminated strings.
        let id = unsafe { jni!(self.0, GetFieldID(class, name.as_ptr(), signature.as_ptr())) }
            .unwrap_or(ptr::null_mut());
        (!self.clear_exception() && !id.is_null()).then_some(id)
    }

    /// Static field `name` of type `long` of `class` (initialising the class).
    pub fn static_long(self, class: Global, name: &CStr) -> Option<StaticLong> {
        // SAFETY: valid env and class; NUL-terminated strings.
        let id = unsafe {
            jni!(
                self.0,
                GetStaticFieldID(class.raw(), name.as_ptr(), c"J".as_ptr())
            )
        }
        .unwrap_or(ptr::null_mut());
        (!self.clear_exception() && !id.is_null()).then_some(StaticLong { class, id })
    }

    /// Sets a static `long` field.
    pub fn set_static_long(self, field: StaticLong, value: i64) {
        // SAFETY: valid env; the id belongs to the class, which holds a long field by that id.
        unsafe {
            jni!(
                self.0,
                SetStaticLongField(field.class.raw(), field.id, value)
            )
        };
    }

    /// The value of field `id` of `object`, of JVM type `signature`: a plain read, no Java code.
    pub fn field_value(self, object: sys::jobject, id: sys::jfieldID, signature: &str) -> Value {
        let env = self.0;
        // SAFETY: valid env; id is an instance field of object's class with this signature.
        unsafe {
            match signature.as_bytes().first() {
                Some(b'Z') => Value::Boolean(jni!(env, GetBooleanField(object, id)) == Some(1)),
                Some(b'B') => Value::Byte(jni!(env, GetByteField(object, id)).unwrap_or(0)),
                Some(b'C') => Value::Char(jni!(env, GetCharField(object, id)).unwrap_or(0)),
                Some(b'S') => Value::Short(jni!(env, GetShortField(object, id)).unwrap_or(0)),
                Some(b'I') => Value::Int(jni!(env, GetIntField(object, id)).unwrap_or(0)),
                Some(b'J') => Value::Long(jni!(env, GetLongField(object, id)).unwrap_or(0)),
                Some(b'F') => Value::Float(jni!(env, GetFloatField(object, id)).unwrap_or(0.0)),
                Some(b'D') => Value::Double(jni!(env, GetDoubleField(object, id)).unwrap_or(0.0)),
                _ => {
                    Value::Object(jni!(env, GetObjectField(object, id)).unwrap_or(ptr::null_mut()))
                }
            }
        }
    }

    /// The value of the reference-typed static field `id` of `class` (a local reference, or
    /// null): a plain read, no Java code.
    pub fn static_object(self, class: sys::jclass, id: sys::jfieldID) -> sys::jobject {
        // SAFETY: valid env; id is a static reference field of class.
        unsafe { jni!(self.0, GetStaticObjectField(class, id)) }.unwrap_or(ptr::null_mut())
    }

    /// The value of static field `id` of `class`, of JVM type `signature`: a plain read, no
    /// Java code; a class not initialised yet is not initialised by it (its statics read as
    /// their default values, or their constant values).
    pub fn static_value(self, class: sys::jclass, id: sys::jfieldID, signature: &str) -> Value {
        let env = self.0;
        // SAFETY: valid env; id is a static field of class with this signature.
        unsafe {
            match signature.as_bytes().first() {
                Some(b'Z') => {
                    Value::Boolean(jni!(env, GetStaticBooleanField(class, id)) == Some(1))
                }
                Some(b'B') => Value::Byte(jni!(env, GetStaticByteField(class, id)).unwrap_or(0)),
                Some(b'C') => Value::Char(jni!(env, GetStaticCharField(class, id)).unwrap_or(0)),
                Some(b'S') => Value::Short(jni!(env, GetStaticShortField(class, id)).unwrap_or(0)),
                Some(b'I') => Value::Int(jni!(env, GetStaticIntField(class, id)).unwrap_or(0)),
                Some(b'J') => Value::Long(jni!(env, GetStaticLongField(class, id)).unwrap_or(0)),
                Some(b'F') => {
                    Value::Float(jni!(env, GetStaticFloatField(class, id)).unwrap_or(0.0))
                }
                Some(b'D') => {
                    Value::Double(jni!(env, GetStaticDoubleField(class, id)).unwrap_or(0.0))
                }
                _ => Value::Object(self.static_object(class, id)),
            }
        }
    }

    /// Whether two references are to the same object.
    pub fn is_same(self, a: sys::jobject, b: sys::jobject) -> bool {
        // SAFETY: valid env; both are live references (or null).
        (unsafe { jni!(self.0, IsSameObject(a, b)) }) == Some(1)
    }

    /// The length of `array` (an array reference).
    pub fn array_length(self, array: sys::jobject) -> usize {
        // SAFETY: valid env; array is a live array reference (the caller checked its class).
        unsafe { jni!(self.0, GetArrayLength(array)) }
            .unwrap_or(0)
            .max(0) as usize
    }

    /// The first `count` (at most the length) elements of a primitive array whose element
    /// type is the descriptor character `code`.
    pub fn primitive_elements(self, array: sys::jobject, code: u8, count: usize) -> Vec<Value> {
        let n = count.min(self.array_length(array));
        let len = n as sys::jsize;
        macro_rules! region {
            ($get:ident, $t:ty, $zero:expr, $wrap:expr) => {{
                let mut buf: Vec<$t> = vec![$zero; n];
                // SAFETY: valid env; array has this element type and at least n elements;
                // buf holds n of them.
                unsafe { jni!(self.0, $get(array, 0, len, buf.as_mut_ptr())) };
                if self.clear_exception() {
                    return Vec::new();
                }
                buf.into_iter().map($wrap).collect()
            }};
        }
        match code {
            b'Z' => region!(GetBooleanArrayRegion, sys::jboolean, 0, |v| Value::Boolean(
                v != 0
            )),
            b'B' => region!(GetByteArrayRegion, sys::jbyte, 0, Value::Byte),
            b'C' => region!(GetCharArrayRegion, sys::jchar, 0, Value::Char),
            b'S' => region!(GetShortArrayRegion, sys::jshort, 0, Value::Short),
            b'I' => region!(GetIntArrayRegion, sys::jint, 0, Value::Int),
            b'J' => region!(GetLongArrayRegion, sys::jlong, 0, Value::Long),
            b'F' => region!(GetFloatArrayRegion, sys::jfloat, 0.0, Value::Float),
            b'D' => region!(GetDoubleArrayRegion, sys::jdouble, 0.0, Value::Double),
            _ => Vec::new(),
        }
    }

    /// Element `index` of an object array (a local reference), or null.
    pub fn object_element(self, array: sys::jobject, index: usize) -> sys::jobject {
        // SAFETY: valid env; array is an object array; an index out of range only raises an
        // exception, cleared here.
        let item = unsafe { jni!(self.0, GetObjectArrayElement(array, index as sys::jsize)) }
            .unwrap_or(ptr::null_mut());
        if self.clear_exception() {
            return ptr::null_mut();
        }
        item
    }

    /// Whether `object` is an instance of `class`.
    pub fn is_instance_of(self, object: sys::jobject, class: Global) -> bool {
        // SAFETY: valid env; object and class are live references.
        let yes = unsafe { jni!(self.0, IsInstanceOf(object, class.0)) };
        yes == Some(1)
    }

    /// Calls an object-returning method without arguments; null when it throws (cleared).
    pub fn call_object(self, target: sys::jobject, method: sys::jmethodID) -> sys::jobject {
        // SAFETY: valid env; the caller passes a method of target's type taking no arguments.
        let result = unsafe { jni!(self.0, CallObjectMethodA(target, method, ptr::null())) }
            .unwrap_or(ptr::null_mut());
        if self.clear_exception() {
            return ptr::null_mut();
        }
        result
    }

    /// Calls an `int`-returning method without arguments; None when it throws (cleared).
    pub fn call_int(self, target: sys::jobject, method: sys::jmethodID) -> Option<i32> {
        // SAFETY: as for call_object.
        let result = unsafe { jni!(self.0, CallIntMethodA(target, method, ptr::null())) };
        if self.clear_exception() {
            return None;
        }
        result
    }

    /// Calls a `boolean`-returning method without arguments; false when it throws (cleared).
    pub fn call_bool(self, target: sys::jobject, method: sys::jmethodID) -> bool {
        // SAFETY: as for call_object.
        let result = unsafe { jni!(self.0, CallBooleanMethodA(target, method, ptr::null())) };
        !self.clear_exception() && result == Some(1)
    }

    /// Calls a `String`-returning method without arguments and takes at most `cap` characters
    /// of the result; on an exception, the exception's class name (signature-derived, no Java
    /// code) as the error.
    pub fn call_string(
        self,
        env: &Env,
        target: sys::jobject,
        method: sys::jmethodID,
        cap: usize,
    ) -> Result<String, String> {
        // SAFETY: valid env; the caller passes a method of target's type taking no arguments.
        let text = unsafe { jni!(self.0, CallObjectMethodA(target, method, ptr::null())) }
            .unwrap_or(ptr::null_mut());
        // SAFETY: valid env.
        let thrown = unsafe { jni!(self.0, ExceptionOccurred()) }.unwrap_or(ptr::null_mut());
        if !thrown.is_null() {
            // SAFETY: valid env.
            unsafe { jni!(self.0, ExceptionClear()) };
            let class = self.object_class(thrown);
            let name = self
                .class_signature(env, class)
                .map(|s| java_name(&s))
                .unwrap_or_else(|| "an exception".into());
            self.delete_local(class);
            self.delete_local(thrown);
            return Err(name);
        }
        Ok(self.string(text, cap).unwrap_or_else(|| "null".into()))
    }

    /// The first `cap` characters of a `java.lang.String`, with `...` when longer.
    pub fn string(self, text: sys::jstring, cap: usize) -> Option<String> {
        let (units, cut) = self.string_units(text, cap)?;
        let mut s = String::from_utf16_lossy(&units);
        if cut {
            s.push_str("...");
        }
        Some(s)
    }

    /// The first `cap` UTF-16 units of `text`, and whether it has more.
    pub fn string_units(self, text: sys::jstring, cap: usize) -> Option<(Vec<u16>, bool)> {
        if text.is_null() {
            return None;
        }
        // SAFETY: text is a java.lang.String reference; the region is within its length and
        // the buffer holds that many UTF-16 units.
        unsafe {
            let len = jni!(self.0, GetStringLength(text)).unwrap_or(0).max(0) as usize;
            let take = len.min(cap.min(1 << 16));
            let mut buf: Vec<u16> = vec![0; take];
            jni!(
                self.0,
                GetStringRegion(text, 0, take as sys::jsize, buf.as_mut_ptr())
            );
            if self.clear_exception() {
                return None;
            }
            Some((buf, take < len))
        }
    }
}

/// An instance field: its id, name and JVM type.
pub struct Field {
    /// The JNI field id.
    pub id: sys::jfieldID,
    /// The field's name.
    pub name: String,
    /// Its JVM type (`I`, `Ljava/lang/String;`).
    pub signature: String,
}

/// A value read from a field or array element.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    /// `boolean`.
    Boolean(bool),
    /// `byte`.
    Byte(i8),
    /// `char` (one UTF-16 unit).
    Char(u16),
    /// `short`.
    Short(i16),
    /// `int`.
    Int(i32),
    /// `long`.
    Long(i64),
    /// `float`.
    Float(f32),
    /// `double`.
    Double(f64),
    /// A reference (a local reference the caller deletes), possibly null.
    Object(sys::jobject),
}

/// Method ids and classes of `java.lang`/`java.util` used to describe values (classes of
/// the bootstrap loader are never unloaded, so the ids stay valid). All were initialised
/// long before any probe runs: looking them up runs no static initialiser.
pub struct Known {
    /// `Object.toString()`.
    pub to_string: sys::jmethodID,
    /// `java.lang.Enum`.
    pub enum_class: Global,
    /// `Enum.name` (the field, read without calling `name()`).
    pub enum_name: sys::jfieldID,
    /// `java.lang.Throwable`.
    pub throwable: Global,
    /// `Throwable.detailMessage`.
    pub detail_message: sys::jfieldID,
    /// `java.util.Collection`.
    pub collection: Global,
    /// `java.util.Map`.
    pub map: Global,
    /// `Collection.size()`.
    pub size: sys::jmethodID,
    /// `Collection.iterator()`.
    pub iterator: sys::jmethodID,
    /// `Iterator.hasNext()`.
    pub has_next: sys::jmethodID,
    /// `Iterator.next()`.
    pub next: sys::jmethodID,
    /// `Map.entrySet()`.
    pub entry_set: sys::jmethodID,
    /// `Map.Entry.getKey()`.
    pub get_key: sys::jmethodID,
    /// `Map.Entry.getValue()`.
    pub get_value: sys::jmethodID,
    /// `Thread.tid`, the thread's id (read without calling `threadId()`).
    pub thread_id: sys::jfieldID,
}

// SAFETY: method and field ids and global references are valid on every thread.
unsafe impl Send for Known {}
// SAFETY: as above; the struct is immutable once built.
unsafe impl Sync for Known {}

impl Known {
    /// The ids, looked up on first use.
    pub fn get(jni: Jni) -> Option<&'static Known> {
        static KNOWN: OnceLock<Option<Known>> = OnceLock::new();
        KNOWN.get_or_init(|| Known::load(jni)).as_ref()
    }

    fn load(jni: Jni) -> Option<Known> {
        let method = |class: Global, name: &CStr, sig: &CStr| -> Option<sys::jmethodID> {
            // SAFETY: valid env and class; NUL-terminated strings.
            let id = unsafe { jni!(jni.0, GetMethodID(class.0, name.as_ptr(), sig.as_ptr())) }
                .unwrap_or(ptr::null_mut());
            (!jni.clear_exception() && !id.is_null()).then_some(id)
        };
        let object = jni.find_class(c"java/lang/Object")?;
        let enum_class = jni.find_class(c"java/lang/Enum")?;
        let throwable = jni.find_class(c"java/lang/Throwable")?;
        let collection = jni.find_class(c"java/util/Collection")?;
        let map = jni.find_class(c"java/util/Map")?;
        let iterator = jni.find_class(c"java/util/Iterator")?;
        let entry = jni.find_class(c"java/util/Map$Entry")?;
        let thread = jni.find_class(c"java/lang/Thread")?;
        Some(Known {
            thread_id: jni.field_id(thread.0, c"tid", c"J")?,
            to_string: method(object, c"toString", c"()Ljava/lang/String;")?,
            enum_name: jni.field_id(enum_class.0, c"name", c"Ljava/lang/String;")?,
            detail_message: jni.field_id(throwable.0, c"detailMessage", c"Ljava/lang/String;")?,
            size: method(collection, c"size", c"()I")?,
            iterator: method(collection, c"iterator", c"()Ljava/util/Iterator;")?,
            has_next: method(iterator, c"hasNext", c"()Z")?,
            next: method(iterator, c"next", c"()Ljava/lang/Object;")?,
            entry_set: method(map, c"entrySet", c"()Ljava/util/Set;")?,
            get_key: method(entry, c"getKey", c"()Ljava/lang/Object;")?,
            get_value: method(entry, c"getValue", c"()Ljava/lang/Object;")?,
            enum_class,
            throwable,
            collection,
            map,
        })
    }
}

/// The calling thread as traces name it, and whether its OS thread carries virtual threads
/// (then the name belongs to the virtual thread running now, not to the OS thread). A
/// virtual thread is named as the JDK writes it, `VirtualThread[#21]` or
/// `VirtualThread[#21,name]`.
pub fn current_thread_label(env: &Env, jni: Jni) -> Option<(String, bool)> {
    let name = current_thread_name(env, jni)?;
    let mut thread: sys::jthread = ptr::null_mut();
    // SAFETY: valid env; out-parameter on our stack.
    if !unsafe { jvmti!(env.raw(), GetCurrentThread(&mut thread)) } || thread.is_null() {
        return Some((name, false));
    }
    // By class name: looking the classes up could load them (JDK 19 on only, and
    // `CarrierThread` only once virtual threads ran).
    let class = jni.object_class(thread);
    let signature = jni.class_signature(env, class).unwrap_or_default();
    jni.delete_local(class);
    let label = match signature.as_str() {
        "Ljava/lang/VirtualThread;" | "Ljava/lang/ThreadBuilders$BoundVirtualThread;" => {
            let id = match Known::get(jni).map(|k| jni.field_value(thread, k.thread_id, "J")) {
                Some(Value::Long(id)) => id,
                _ => 0,
            };
            let label = match name.as_str() {
                "" => format!("VirtualThread[#{id}]"),
                name => format!("VirtualThread[#{id},{name}]"),
            };
            (label, true)
        }
        "Ljdk/internal/misc/CarrierThread;" => (name, true),
        _ => (name, false),
    };
    jni.delete_local(thread);
    Some(label)
}

/// The calling thread's name (JVMTI GetThreadInfo), or `None` when it has no Java thread.
pub fn current_thread_name(env: &Env, jni: Jni) -> Option<String> {
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

fn deallocate(env: &Env, memory: *mut u8) {
    // SAFETY: memory was allocated by this env's JVMTI allocator and is freed once.
    let _ = unsafe { jvmti!(env.raw(), Deallocate(memory)) };
}

/// Bytes allocated with the JVMTI allocator and handed to the VM (a class-file hook's
/// `new_class_data`): the VM frees them.
pub fn give_to_vm(
    env: &Env,
    bytes: &[u8],
    len_out: *mut sys::jint,
    data_out: *mut *mut u8,
) -> bool {
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
    (!name.is_null()).then(|| {
        // SAFETY: the caller's contract: a NUL-terminated string.
        unsafe { CStr::from_ptr(name) }
            .to_string_lossy()
            .into_owned()
    })
}

/// The loader that defined `class` (a local reference; null for the bootstrap loader).
pub fn class_loader(env: &Env, class: sys::jclass) -> Option<sys::jobject> {
    let mut loader: sys::jobject = ptr::null_mut();
    // SAFETY: valid env; class is a live reference; out-parameter on our stack.
    unsafe { jvmti!(env.raw(), GetClassLoader(class, &mut loader)) }.then_some(loader)
}

/// Whether JVMTI may retransform `class` (false for arrays, primitives, hidden classes).
pub fn is_modifiable(env: &Env, class: sys::jclass) -> bool {
    let mut modifiable: sys::jboolean = 0;
    // SAFETY: valid env; class is a live reference; out-parameter on our stack.
    unsafe { jvmti!(env.raw(), IsModifiableClass(class, &mut modifiable)) && modifiable != 0 }
}

/// The class types the class's constant pool spells, among them those of the annotations
/// of the class and its members (needs `can_get_constant_pool`).
pub fn pool_types(env: &Env, class: sys::jclass) -> Option<Vec<String>> {
    // SAFETY: valid env; class is a live reference.
    let (count, bytes) = unsafe { env.constant_pool(class) }.ok()?;
    let pool = jtap_classfile::ConstantPool::from_entries(count, &bytes).ok()?;
    Some(jtap_classfile::annotations::descriptor_types(&pool))
}

/// Whether the class has been linked (verified and prepared): before that, the VM reports
/// its methods' bytecodes differently, and linking may still fail.
pub fn is_linked(env: &Env, class: sys::jclass) -> bool {
    let linked = (sys::JVMTI_CLASS_STATUS_VERIFIED | sys::JVMTI_CLASS_STATUS_PREPARED) as sys::jint;
    class_status(env, class).is_some_and(|status| status & linked == linked)
}

/// Whether the class's static initialiser has run (its statics hold what it set).
pub fn is_initialized(env: &Env, class: sys::jclass) -> bool {
    class_status(env, class)
        .is_some_and(|status| status & sys::JVMTI_CLASS_STATUS_INITIALIZED as sys::jint != 0)
}

/// Whether the class is in the error state (its linking or static initialiser failed).
pub fn is_erroneous(env: &Env, class: sys::jclass) -> bool {
    class_status(env, class)
        .is_some_and(|status| status & sys::JVMTI_CLASS_STATUS_ERROR as sys::jint != 0)
}

fn class_status(env: &Env, class: sys::jclass) -> Option<sys::jint> {
    let mut status: sys::jint = 0;
    // SAFETY: valid env; class is a live reference; out-parameter on our stack.
    unsafe { jvmti!(env.raw(), GetClassStatus(class, &mut status)) }.then_some(status)
}

/// Lets `module` read `to` (so classes of a named module can call the runtime class, which
/// sits in the bootstrap loader's unnamed module). True when done or not needed.
pub fn add_module_reads(env: &Env, module: sys::jobject, to: sys::jobject) -> bool {
    if module.is_null() || to.is_null() {
        return true;
    }
    // SAFETY: valid env; both are live module references.
    unsafe { jvmti!(env.raw(), AddModuleReads(module, to)) }
}

/// The named module defining `package` (internal form, `java/util`) in `loader`, or null.
pub fn named_module(env: &Env, loader: sys::jobject, package: &str) -> sys::jobject {
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
pub fn bytecodes(env: &Env, method: sys::jmethodID) -> Option<Vec<u8>> {
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

/// The resolution of `CLOCK_MONOTONIC_COARSE` in nanoseconds (1/HZ).
pub fn monotonic_coarse_resolution_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_getres writes one timespec we own.
    unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
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
