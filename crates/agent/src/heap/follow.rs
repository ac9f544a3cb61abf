//! JVMTI's `FollowReferences` behind a safe visitor: the leak report's paths from the GC roots
//! (`roots`) and what one object reaches (`reach`) implement [`Visitor`]; the callback that
//! HotSpot calls, in a safepoint, decodes each reference for them here.

use std::ffi::c_void;

use jtap_jvmti::{sys, Env};

/// One reference a walk reports.
#[derive(Debug, Clone, Copy)]
pub struct Reference {
    /// Its kind (`JVMTI_HEAP_REFERENCE_FIELD`, a root kind, ...).
    pub kind: sys::jvmtiHeapReferenceKind,
    /// The field or array index, for those kinds; 0 otherwise.
    pub index: i32,
    /// The method whose local variable holds it, for stack-local roots; null otherwise.
    pub method: sys::jmethodID,
    /// The referrer's tag; None for a root.
    pub referrer: Option<i64>,
    /// The size of the object referred to, in bytes.
    pub size: i64,
}

/// What a walk does with each reference, in a safepoint: no JNI, no JVMTI, no blocking.
pub trait Visitor {
    /// A reference to an object tagged `tag` (0: untagged): the tag it keeps from now on, and
    /// JVMTI's visit control (`JVMTI_VISIT_OBJECTS` to follow its references, 0 not to,
    /// `JVMTI_VISIT_ABORT` to end the walk).
    fn reference(&mut self, reference: Reference, tag: i64) -> (i64, sys::jint);
}

/// Follows references from the heap's roots (`initial` null) or from `initial`, handing each
/// to `visitor`. The application pauses throughout.
pub fn follow<V: Visitor>(
    env: &Env,
    initial: sys::jobject,
    visitor: &mut V,
) -> jtap_jvmti::Result<()> {
    let callbacks = sys::jvmtiHeapCallbacks {
        heap_reference_callback: Some(on_reference::<V>),
        ..Default::default()
    };
    // SAFETY: a null class; `initial` is null or a live reference (the caller's); the
    // callback keeps to the heap callback rules and takes `visitor`, which outlives the call.
    unsafe {
        env.follow_references(
            0,
            std::ptr::null_mut(),
            initial,
            &callbacks,
            std::ptr::from_mut(visitor).cast::<c_void>(),
        )
    }
}

/// FollowReferences' callback: the application is stopped; no JNI or JVMTI here.
unsafe extern "C" fn on_reference<V: Visitor>(
    kind: sys::jvmtiHeapReferenceKind,
    info: *const sys::jvmtiHeapReferenceInfo,
    _class_tag: sys::jlong,
    _referrer_class_tag: sys::jlong,
    size: sys::jlong,
    tag: *mut sys::jlong,
    referrer_tag: *mut sys::jlong,
    _length: sys::jint,
    user_data: *mut c_void,
) -> sys::jint {
    // A panic ends the walk instead of unwinding into the VM.
    let mut verdict = sys::JVMTI_VISIT_ABORT as sys::jint;
    crate::callback::guard_callback(|| {
        // SAFETY: `user_data` is the visitor `follow` hands to FollowReferences, used by this
        // walk alone; `tag` is valid for the callback, `referrer_tag` is null for a root, and
        // `info` is null or describes a reference of this kind.
        unsafe {
            let visitor = &mut *user_data.cast::<V>();
            let (index, method) = match (info.is_null(), kind) {
                (true, _) => (0, std::ptr::null_mut()),
                (
                    false,
                    sys::JVMTI_HEAP_REFERENCE_FIELD | sys::JVMTI_HEAP_REFERENCE_STATIC_FIELD,
                ) => ((*info).field.index, std::ptr::null_mut()),
                (false, sys::JVMTI_HEAP_REFERENCE_ARRAY_ELEMENT) => {
                    ((*info).array.index, std::ptr::null_mut())
                }
                (false, sys::JVMTI_HEAP_REFERENCE_STACK_LOCAL) => (0, (*info).stack_local.method),
                _ => (0, std::ptr::null_mut()),
            };
            let referrer = (!referrer_tag.is_null()).then(|| *referrer_tag);
            let reference = Reference {
                kind,
                index,
                method,
                referrer,
                size,
            };
            let (new_tag, answer) = visitor.reference(reference, *tag);
            *tag = new_tag;
            verdict = answer;
        }
    });
    verdict
}
