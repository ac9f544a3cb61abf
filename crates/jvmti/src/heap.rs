//! Object tags, heap iteration, GC and heap sampling.

use std::ffi::c_void;

use crate::env::Env;
use crate::error::Result;
use crate::memory::Allocation;
use crate::sys;

impl Env {
    /// The object's tag (0: untagged). Needs `can_tag_objects`.
    ///
    /// # Safety
    /// `object` is a valid object reference.
    pub unsafe fn tag(&self, object: sys::jobject) -> Result<i64> {
        let mut tag: sys::jlong = 0;
        // SAFETY: caller's contract; local out-parameter.
        unsafe { jvmti_call!(self.raw(), GetTag(object, &mut tag)) }?;
        Ok(tag)
    }

    /// Tags an object (0 removes the tag). Needs `can_tag_objects`.
    ///
    /// # Safety
    /// `object` is a valid object reference.
    pub unsafe fn set_tag(&self, object: sys::jobject, tag: i64) -> Result<()> {
        // SAFETY: caller's contract.
        unsafe { jvmti_call!(self.raw(), SetTag(object, tag)) }
    }

    /// The object's size in bytes as the VM lays it out.
    ///
    /// # Safety
    /// `object` is a valid object reference.
    pub unsafe fn object_size(&self, object: sys::jobject) -> Result<i64> {
        let mut size: sys::jlong = 0;
        // SAFETY: caller's contract; local out-parameter.
        unsafe { jvmti_call!(self.raw(), GetObjectSize(object, &mut size)) }?;
        Ok(size)
    }

    /// Runs every callback of `callbacks` for each heap object matching `filter` (a
    /// `JVMTI_HEAP_FILTER_*` mask) and `class` (null: all). Needs `can_tag_objects`.
    ///
    /// # Safety
    /// `class` is null or a valid class reference; the callbacks follow the JVMTI heap
    /// callback rules (no JNI, no JVMTI except raw monitors) and accept `user_data`.
    pub unsafe fn iterate_through_heap(
        &self,
        filter: sys::jint,
        class: sys::jclass,
        callbacks: &sys::jvmtiHeapCallbacks,
        user_data: *const c_void,
    ) -> Result<()> {
        // SAFETY: caller's contract; `callbacks` outlives the call.
        unsafe {
            jvmti_call!(
                self.raw(),
                IterateThroughHeap(filter, class, callbacks, user_data)
            )
        }
    }

    /// Follows references from the heap roots (`initial` null) or from `initial`, calling
    /// `callbacks` for each reference whose referee matches `filter` and `class`, in a
    /// safepoint: the application is paused throughout. Needs `can_tag_objects`.
    ///
    /// # Safety
    /// `class` and `initial` are null or valid references; the callbacks follow the JVMTI
    /// heap callback rules (no JNI, no JVMTI except raw monitors) and accept `user_data`.
    pub unsafe fn follow_references(
        &self,
        filter: sys::jint,
        class: sys::jclass,
        initial: sys::jobject,
        callbacks: &sys::jvmtiHeapCallbacks,
        user_data: *const c_void,
    ) -> Result<()> {
        // SAFETY: caller's contract; `callbacks` outlives the call.
        unsafe {
            jvmti_call!(
                self.raw(),
                FollowReferences(filter, class, initial, callbacks, user_data)
            )
        }
    }

    /// The objects carrying these tags, with their tags, as local references of the calling
    /// thread. Needs `can_tag_objects`.
    pub fn objects_with_tags(&self, tags: &[i64]) -> Result<Vec<(sys::jobject, i64)>> {
        let (mut count, mut objects, mut found): (sys::jint, *mut sys::jobject, *mut sys::jlong) =
            (0, std::ptr::null_mut(), std::ptr::null_mut());
        // SAFETY: valid env; `tags` holds its length's tags; out-parameters on our stack.
        unsafe {
            jvmti_call!(
                self.raw(),
                GetObjectsWithTags(
                    tags.len() as sys::jint,
                    tags.as_ptr(),
                    &mut count,
                    &mut objects,
                    &mut found
                )
            )
        }?;
        let count = count.max(0) as usize;
        // SAFETY: JVMTI allocated both arrays with `count` elements; each is freed once.
        let (objects, found) = unsafe {
            (
                Allocation::from_raw(self.raw(), objects, count),
                Allocation::from_raw(self.raw(), found, count),
            )
        };
        Ok(objects.iter().copied().zip(found.iter().copied()).collect())
    }

    /// Asks the VM for a full garbage collection and waits for it.
    pub fn force_garbage_collection(&self) -> Result<()> {
        // SAFETY: valid env, no arguments.
        unsafe { jvmti_call!(self.raw(), ForceGarbageCollection()) }
    }

    /// Sets the mean bytes between SampledObjectAlloc events (0: every allocation).
    pub fn set_heap_sampling_interval(&self, bytes: i32) -> Result<()> {
        // SAFETY: valid env, plain integer argument.
        unsafe { jvmti_call!(self.raw(), SetHeapSamplingInterval(bytes)) }
    }
}
