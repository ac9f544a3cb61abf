//! Memory the JVMTI allocator owns: what `Allocate` and many JVMTI functions hand out, freed
//! with `Deallocate` when the [`Allocation`] drops.

use std::ffi::{c_char, CStr};
use std::ops::Deref;
use std::ptr;

use crate::env::Env;
use crate::error::Result;
use crate::sys;

/// `len` values of `T` in JVMTI-allocated memory; deallocated on drop.
#[derive(Debug)]
pub struct Allocation<T> {
    env: *mut sys::jvmtiEnv,
    ptr: *mut T,
    len: usize,
}

impl<T> Allocation<T> {
    /// Takes ownership of memory JVMTI allocated.
    ///
    /// # Safety
    /// `ptr` is null or was allocated by `env`'s JVMTI allocator and holds `len` initialised
    /// values of `T`, and nobody else frees it.
    pub(crate) unsafe fn from_raw(
        env: *mut sys::jvmtiEnv,
        ptr: *mut T,
        len: usize,
    ) -> Allocation<T> {
        Allocation {
            env,
            ptr,
            len: if ptr.is_null() { 0 } else { len },
        }
    }

    /// The start of the memory (for passing to C).
    pub fn as_mut_ptr(&mut self) -> *mut T {
        self.ptr
    }
}

impl<T> Deref for Allocation<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        if self.ptr.is_null() {
            return &[];
        }
        // SAFETY: from_raw's contract: `ptr` holds `len` initialised values we own.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl<T> Drop for Allocation<T> {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            // SAFETY: the memory came from this env's allocator and is freed exactly once.
            // Nothing useful can be done if Deallocate fails while dropping.
            let _ = unsafe { jvmti_call!(self.env, Deallocate(self.ptr.cast())) };
        }
    }
}

impl Env {
    /// Allocates `bytes` zeroed bytes with the JVMTI allocator.
    pub fn allocate(&self, bytes: usize) -> Result<Allocation<u8>> {
        let mut mem: *mut u8 = ptr::null_mut();
        // SAFETY: valid env, pointer to a local out-parameter.
        unsafe { jvmti_call!(self.raw(), Allocate(bytes as sys::jlong, &mut mem)) }?;
        // SAFETY: Allocate returned `bytes` bytes (or null for 0); we zero them before
        // handing them out as initialised.
        unsafe {
            if !mem.is_null() {
                ptr::write_bytes(mem, 0, bytes);
            }
            Ok(Allocation::from_raw(self.raw(), mem, bytes))
        }
    }

    /// Copies a JVMTI-allocated C string into a `String` and deallocates it.
    ///
    /// # Safety
    /// `text` is null or a NUL-terminated string this env allocated, not freed elsewhere.
    pub(crate) unsafe fn take_string(&self, text: *mut c_char) -> String {
        if text.is_null() {
            return String::new();
        }
        // SAFETY: the caller guarantees a NUL-terminated string we now own.
        let owned = unsafe { Allocation::from_raw(self.raw(), text, 1) };
        // SAFETY: as above; the Allocation frees it after the copy.
        let copy = unsafe { CStr::from_ptr(owned.ptr) }
            .to_string_lossy()
            .into_owned();
        drop(owned);
        copy
    }
}
