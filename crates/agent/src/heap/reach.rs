//! What one object keeps (`leaks`): the bytes and objects reachable from it through instance
//! fields and array elements. A leak suspect's paths from a GC root meet in the object that
//! holds its survivors — a collection's element array, a map's table — and what that object
//! reaches is the size of the leak: for a collection whose elements nothing else holds, what
//! a heap analyser would call its retained size.
//!
//! One `FollowReferences` from the object, in a safepoint (the application pauses, as for the
//! paths), follows fields and array elements only: a class, its statics and its loader lead to
//! most of the heap and are not the holder's. Each object is counted once, marked by a tag bit
//! of this walk's own; the walk stops after [`MOST_COUNTED`] objects. It runs in the alloc
//! engine's environment after the paths' walk, whose tags it may mark, just before the engine
//! disposes of it.

use jtap_jvmti::{sys, Env};

use super::follow::{self, Reference, Visitor};
use crate::trace::ffi::Jni;

/// Most objects one count visits.
pub const MOST_COUNTED: u64 = 1_000_000;
/// The tag bit that marks an object counted (above every tag the engine and the paths' walk
/// hand out).
const COUNTED: i64 = 1 << 62;

/// What an object reaches, itself included.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reach {
    /// Bytes of the objects reached.
    pub bytes: u64,
    /// Objects reached.
    pub objects: u64,
    /// Whether the count stopped at [`MOST_COUNTED`]: the amounts are at least these.
    pub capped: bool,
}

impl Visitor for Reach {
    /// Counts each object reached through a field or an array element once, and follows
    /// nothing else.
    fn reference(&mut self, reference: Reference, tag: i64) -> (i64, sys::jint) {
        const VISIT: sys::jint = sys::JVMTI_VISIT_OBJECTS as sys::jint;
        const ABORT: sys::jint = sys::JVMTI_VISIT_ABORT as sys::jint;
        let held = matches!(
            reference.kind,
            sys::JVMTI_HEAP_REFERENCE_FIELD | sys::JVMTI_HEAP_REFERENCE_ARRAY_ELEMENT
        );
        if !held || tag & COUNTED != 0 {
            return (tag, 0);
        }
        if self.objects >= MOST_COUNTED {
            self.capped = true;
            return (tag, ABORT);
        }
        self.objects += 1;
        self.bytes += reference.size.max(0) as u64;
        (tag | COUNTED, VISIT)
    }
}

/// What the object tagged `tag` reaches through fields and array elements, itself included;
/// None if it is gone or the walk fails.
pub fn reachable_from(env: &Env, jni: Jni, tag: i64) -> Option<Reach> {
    jni.with_local_frame(4, || {
        let (object, _) = *env.objects_with_tags(&[tag]).ok()?.first()?;
        // SAFETY: `object` is a live local reference of this thread.
        let own_size = unsafe { env.object_size(object) }.ok()?;
        let mut reach = Reach {
            bytes: own_size.max(0) as u64,
            objects: 1,
            capped: false,
        };
        let walked = follow::follow(env, object, &mut reach);
        if let Err(e) = walked {
            log!("leaks: FollowReferences from a holder failed: {e}");
            return None;
        }
        Some(reach)
    })
    .flatten()
}

/// The object a suspect's paths (tags root first, each ending in a survivor) last pass
/// through together: with one path, the survivor's referrer. None when they share nothing
/// below the root or a path is a bare survivor.
pub fn holder(paths: &[Vec<i64>]) -> Option<(usize, i64)> {
    let first = paths.first()?;
    let shared = match paths.len() {
        1 => first.len().checked_sub(1)?,
        _ => (0..first.len())
            .take_while(|&i| paths.iter().all(|p| p.get(i) == Some(&first[i])))
            .count(),
    };
    // A holder is below the root and is not a survivor itself.
    let at = shared.checked_sub(1)?;
    (at > 0 && paths.iter().all(|p| p.len() > shared)).then(|| (at, first[at]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_meet_in_their_holder() {
        // root 1, static list 2, element array 3, two survivors 4 and 5.
        assert_eq!(holder(&[vec![1, 2, 3, 4], vec![1, 2, 3, 5]]), Some((2, 3)));
        // One path: the survivor's referrer.
        assert_eq!(holder(&[vec![1, 2, 3, 4]]), Some((2, 3)));
        // Nothing shared below the root, or a survivor reached straight from its root.
        assert_eq!(holder(&[vec![1, 2, 4], vec![1, 6, 5]]), None);
        assert_eq!(holder(&[vec![1, 4]]), None);
        assert_eq!(holder(&[]), None);
    }

    #[test]
    fn fields_and_elements_count_once_and_nothing_else_is_followed() {
        let mut reach = Reach::default();
        let to = |kind, size| Reference {
            kind,
            index: 0,
            method: std::ptr::null_mut(),
            referrer: Some(1),
            size,
        };
        let field = sys::JVMTI_HEAP_REFERENCE_FIELD;
        let (tag, visit) = reach.reference(to(field, 24), 0);
        let visit_objects = sys::JVMTI_VISIT_OBJECTS as sys::jint;
        assert_eq!((tag, visit), (COUNTED, visit_objects));
        assert_eq!(reach.reference(to(field, 24), tag), (tag, 0));
        let element = sys::JVMTI_HEAP_REFERENCE_ARRAY_ELEMENT;
        assert_eq!(reach.reference(to(element, 1040), 7).0, 7 | COUNTED);
        let class = sys::JVMTI_HEAP_REFERENCE_CLASS;
        assert_eq!(reach.reference(to(class, 500), 0), (0, 0));
        assert_eq!((reach.bytes, reach.objects), (1064, 2));
    }
}
