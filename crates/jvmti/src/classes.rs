//! Classes, methods and line numbers, and retransformation.
//!
//! The JNI handles these functions take must be valid references of this VM (local
//! references only on the thread that got them); hence the functions are `unsafe`.

use std::ptr;

use crate::env::Env;
use crate::error::Result;
use crate::memory::Allocation;
use crate::sys;

impl Env {
    /// Every loaded class, as local references of the calling (attached) thread.
    pub fn loaded_classes(&self) -> Result<Allocation<sys::jclass>> {
        let (mut count, mut classes) = (0, ptr::null_mut());
        // SAFETY: valid env, local out-parameters.
        unsafe { jvmti_call!(self.raw(), GetLoadedClasses(&mut count, &mut classes)) }?;
        // SAFETY: JVMTI allocated `count` class references for us.
        Ok(unsafe { Allocation::from_raw(self.raw(), classes, count as usize) })
    }

    /// The class's JVM signature, e.g. `Ljava/lang/String;`.
    ///
    /// # Safety
    /// `class` is a valid class reference.
    pub unsafe fn class_signature(&self, class: sys::jclass) -> Result<String> {
        let mut signature = ptr::null_mut();
        // SAFETY: caller's contract for `class`; a null generic pointer is allowed.
        unsafe {
            jvmti_call!(
                self.raw(),
                GetClassSignature(class, &mut signature, ptr::null_mut())
            )
        }?;
        // SAFETY: JVMTI allocated the string for us.
        Ok(unsafe { self.take_string(signature) })
    }

    /// The class's source file name attribute (needs `can_get_source_file_name`).
    ///
    /// # Safety
    /// `class` is a valid class reference.
    pub unsafe fn source_file_name(&self, class: sys::jclass) -> Result<String> {
        let mut name = ptr::null_mut();
        // SAFETY: caller's contract for `class`; local out-parameter.
        unsafe { jvmti_call!(self.raw(), GetSourceFileName(class, &mut name)) }?;
        // SAFETY: JVMTI allocated the string for us.
        Ok(unsafe { self.take_string(name) })
    }

    /// The methods a class declares; creates their jmethodIDs.
    ///
    /// # Safety
    /// `class` is a valid class reference.
    pub unsafe fn class_methods(&self, class: sys::jclass) -> Result<Allocation<sys::jmethodID>> {
        let (mut count, mut methods) = (0, ptr::null_mut());
        // SAFETY: caller's contract for `class`; local out-parameters.
        unsafe { jvmti_call!(self.raw(), GetClassMethods(class, &mut count, &mut methods)) }?;
        // SAFETY: JVMTI allocated `count` method IDs for us.
        Ok(unsafe { Allocation::from_raw(self.raw(), methods, count as usize) })
    }

    /// A class's constant pool as the class file lays it out (`constant_pool_count`, then
    /// the entries' bytes; needs `can_get_constant_pool`).
    ///
    /// # Safety
    /// `class` is a valid class reference.
    pub unsafe fn constant_pool(&self, class: sys::jclass) -> Result<(u16, Allocation<u8>)> {
        let (mut count, mut len, mut bytes) = (0, 0, ptr::null_mut());
        // SAFETY: caller's contract for `class`; local out-parameters.
        unsafe {
            jvmti_call!(
                self.raw(),
                GetConstantPool(class, &mut count, &mut len, &mut bytes)
            )
        }?;
        // SAFETY: JVMTI allocated `len` bytes for us.
        let bytes = unsafe { Allocation::from_raw(self.raw(), bytes, len.max(0) as usize) };
        Ok((u16::try_from(count).unwrap_or(0), bytes))
    }

    /// A method's name and JVM signature, e.g. `("run", "()V")`.
    ///
    /// # Safety
    /// `method` is a valid jmethodID (its class not unloaded).
    pub unsafe fn method_name(&self, method: sys::jmethodID) -> Result<(String, String)> {
        let (mut name, mut signature) = (ptr::null_mut(), ptr::null_mut());
        // SAFETY: caller's contract for `method`; local out-parameters, null generic pointer.
        unsafe {
            jvmti_call!(
                self.raw(),
                GetMethodName(method, &mut name, &mut signature, ptr::null_mut())
            )
        }?;
        // SAFETY: JVMTI allocated both strings for us.
        Ok(unsafe { (self.take_string(name), self.take_string(signature)) })
    }

    /// A method's access flags (`ACC_NATIVE` = 0x0100, …).
    ///
    /// # Safety
    /// `method` is a valid jmethodID.
    pub unsafe fn method_modifiers(&self, method: sys::jmethodID) -> Result<i32> {
        let mut modifiers = 0;
        // SAFETY: caller's contract; local out-parameter.
        unsafe { jvmti_call!(self.raw(), GetMethodModifiers(method, &mut modifiers)) }?;
        Ok(modifiers)
    }

    /// The class declaring a method, as a local reference.
    ///
    /// # Safety
    /// `method` is a valid jmethodID; the calling thread is attached to the VM.
    pub unsafe fn method_declaring_class(&self, method: sys::jmethodID) -> Result<sys::jclass> {
        let mut class = ptr::null_mut();
        // SAFETY: caller's contract; local out-parameter.
        unsafe { jvmti_call!(self.raw(), GetMethodDeclaringClass(method, &mut class)) }?;
        Ok(class)
    }

    /// The method's line number table (needs `can_get_line_numbers`).
    ///
    /// # Safety
    /// `method` is a valid jmethodID.
    pub unsafe fn line_number_table(
        &self,
        method: sys::jmethodID,
    ) -> Result<Allocation<sys::jvmtiLineNumberEntry>> {
        let (mut count, mut table) = (0, ptr::null_mut());
        // SAFETY: caller's contract; local out-parameters.
        unsafe {
            jvmti_call!(
                self.raw(),
                GetLineNumberTable(method, &mut count, &mut table)
            )
        }?;
        // SAFETY: JVMTI allocated `count` entries for us.
        Ok(unsafe { Allocation::from_raw(self.raw(), table, count as usize) })
    }

    /// Retransforms classes: ClassFileLoadHook sees each again (needs `can_retransform_classes`).
    ///
    /// # Safety
    /// Every element is a valid class reference; the calling thread is attached to the VM.
    pub unsafe fn retransform_classes(&self, classes: &[sys::jclass]) -> Result<()> {
        // SAFETY: caller's contract; the slice outlives the call and its length is passed.
        unsafe {
            jvmti_call!(
                self.raw(),
                RetransformClasses(classes.len() as sys::jint, classes.as_ptr())
            )
        }
    }
}
