//! Paths from the GC roots to chosen objects (`leaks`). One `FollowReferences` from the heap's
//! roots, in a safepoint, notes for each object it reaches the reference that reached it
//! first, tagging the object with a number of the walk's own; each chosen object's path is
//! then read back root first and each step named: the field that holds the reference (found
//! by reading the referrer's fields with JNI: no Java code runs), the array index, or the kind
//! of root (a system class, a local variable of a method, a JNI global, …).
//!
//! A path from a long-lived root (a class, a JNI global) is preferred over a shorter one from a
//! root that lasts one call (a local variable, a JNI local of a native method, a held monitor):
//! what keeps a leak alive is what outlives the call that happened to hold it while the walk ran.
//!
//! The walk pauses the application while it runs, as a heap dump does: it stops once every
//! chosen object is reached from a long-lived root, or after [`MOST_VISITED`] objects. Its tags stay on the objects
//! until the environment is disposed of, so it runs in the alloc engine's environment just
//! before the engine disposes of it.

use std::collections::{HashMap, HashSet};

use jtap_jvmti::{sys, Env};

use super::follow::{self, Reference, Visitor};
use crate::trace::ffi::{Jni, Value};
use jtap_classfile::descriptor::java_name;

/// Most objects one walk visits.
pub const MOST_VISITED: usize = 2_000_000;
/// The walk's own tags start here, above any tag the alloc engine hands out.
const FIRST_WALK_TAG: i64 = 1 << 48;
/// Longest path read back (a linked list can make them long).
const MOST_STEPS: usize = 64;

/// How the walk first reached an object.
#[derive(Clone, Copy)]
struct Link {
    /// The referrer's tag; 0 for a root.
    from: i64,
    kind: sys::jvmtiHeapReferenceKind,
    /// The field or array index, for those kinds.
    index: i32,
    /// The method whose local variable holds it (stack-local roots).
    method: sys::jmethodID,
    /// References from a root to it on this path.
    depth: u32,
    /// Whether the path starts at a root that lasts one call (see [`lasts_one_call`]).
    transient: bool,
}

impl Link {
    /// Which of two links to keep: the smaller, a long-lived root first, then the shorter.
    fn rank(&self) -> (bool, u32) {
        (self.transient, self.depth)
    }
}

/// Roots that hold an object only while a call runs or a lock is held.
fn lasts_one_call(kind: sys::jvmtiHeapReferenceKind) -> bool {
    matches!(
        kind,
        sys::JVMTI_HEAP_REFERENCE_STACK_LOCAL
            | sys::JVMTI_HEAP_REFERENCE_JNI_LOCAL
            | sys::JVMTI_HEAP_REFERENCE_MONITOR
            | sys::JVMTI_HEAP_REFERENCE_THREAD
    )
}

/// What the walk has found so far; the callback's user data.
struct Walk {
    next_tag: i64,
    links: HashMap<i64, Link>,
    targets: HashSet<i64>,
    /// Targets not yet reached from a long-lived root.
    left: usize,
}

impl Walk {
    /// An object tagged `tag` (0: untagged) reached through `link`: its tag from now on, and
    /// whether to follow its references, stop, or skip them. The walk goes depth first, so an
    /// object reached again by a better path (see [`Link::rank`]) takes that path (a rank
    /// recorded on a path only ever shrinks, and always exceeds its referrer's: no path can
    /// loop).
    fn reached(&mut self, tag: i64, mut link: Link) -> (i64, sys::jint) {
        const VISIT: sys::jint = sys::JVMTI_VISIT_OBJECTS as sys::jint;
        const ABORT: sys::jint = sys::JVMTI_VISIT_ABORT as sys::jint;
        (link.transient, link.depth) = match link.from {
            0 => (lasts_one_call(link.kind), 0),
            from => self
                .links
                .get(&from)
                .map_or((true, u32::MAX - 1), |l| (l.transient, l.depth + 1)),
        };
        if let Some(&known) = self.links.get(&tag) {
            // A path recorded from a short-lived root may have come to start at a long-lived
            // one since, when a referrer on it was reached again: ask before replacing it.
            let better =
                link.rank() < known.rank() && (!link.transient || self.starts_short_lived(known));
            if better {
                self.links.insert(tag, link);
                if known.transient && !link.transient && self.settled(tag) {
                    return (tag, ABORT);
                }
            }
            return (tag, VISIT);
        }
        if self.links.len() >= MOST_VISITED {
            return (tag, ABORT);
        }
        let tag = match tag {
            0 => {
                self.next_tag += 1;
                self.next_tag
            }
            tag => tag,
        };
        self.links.insert(tag, link);
        if !link.transient && self.settled(tag) {
            return (tag, ABORT);
        }
        (tag, VISIT)
    }

    /// Whether the path through `link` starts at a short-lived root now. Ends: the depths
    /// recorded along a path fall.
    fn starts_short_lived(&self, mut link: Link) -> bool {
        while let Some(&referrer) = self.links.get(&link.from) {
            link = referrer;
        }
        link.transient
    }

    /// Notes that `tag` is now reached from a long-lived root; true when it was the last
    /// target to be.
    fn settled(&mut self, tag: i64) -> bool {
        if !self.targets.contains(&tag) {
            return false;
        }
        self.left -= 1;
        self.left == 0
    }

    /// The links from a root to `target`, root first; None if the walk did not reach it.
    fn path(&self, target: i64) -> Option<Vec<(i64, Link)>> {
        let mut path = Vec::new();
        let mut tag = target;
        while path.len() < MOST_STEPS {
            let link = *self.links.get(&tag)?;
            path.push((tag, link));
            if link.from == 0 {
                path.reverse();
                return Some(path);
            }
            tag = link.from;
        }
        None
    }
}

impl Visitor for Walk {
    fn reference(&mut self, reference: Reference, tag: i64) -> (i64, sys::jint) {
        let link = Link {
            from: reference.referrer.unwrap_or(0),
            kind: reference.kind,
            index: reference.index,
            method: reference.method,
            depth: 0,
            transient: false,
        };
        self.reached(tag, link)
    }
}

/// A path from a GC root to a chosen object, root first.
pub struct RootPath {
    /// Each step as text.
    pub steps: Vec<String>,
    /// The tag of each object on it (the last is the chosen object's).
    pub objects: Vec<i64>,
}

/// The paths from a GC root to each of `targets` (tags the caller gave objects) the walk
/// reaches.
pub fn paths_to(env: &Env, jni: Jni, targets: &[i64]) -> HashMap<i64, RootPath> {
    let mut walk = Walk {
        next_tag: FIRST_WALK_TAG,
        links: HashMap::new(),
        targets: targets.iter().copied().collect(),
        left: 0,
    };
    walk.left = walk.targets.len();
    if targets.is_empty() {
        return HashMap::new();
    }
    let walked = follow::follow(env, std::ptr::null_mut(), &mut walk);
    if let Err(e) = walked {
        log!("leaks: FollowReferences failed: {e}");
        return HashMap::new();
    }
    log!(
        "leaks: the walk reached {} objects, {} of {} chosen ones ({} from a long-lived root)",
        walk.links.len(),
        targets
            .iter()
            .filter(|t| walk.links.contains_key(t))
            .count(),
        walk.targets.len(),
        walk.targets.len() - walk.left,
    );
    let paths: Vec<(i64, Vec<(i64, Link)>)> = targets
        .iter()
        .filter_map(|&t| Some((t, walk.path(t)?)))
        .collect();
    let mut tags: Vec<i64> = paths
        .iter()
        .flat_map(|(_, p)| p.iter().map(|s| s.0))
        .collect();
    tags.sort_unstable();
    tags.dedup();
    let described = jni.with_local_frame(16, || {
        let Ok(objects) = env.objects_with_tags(&tags) else {
            return HashMap::new();
        };
        let objects: HashMap<i64, sys::jobject> =
            objects.into_iter().map(|(o, t)| (t, o)).collect();
        let describe = Describe {
            env,
            jni,
            objects: &objects,
        };
        paths
            .iter()
            .filter_map(|(target, path)| {
                let found = RootPath {
                    steps: describe.path(path)?,
                    objects: path.iter().map(|&(tag, _)| tag).collect(),
                };
                Some((*target, found))
            })
            .collect()
    });
    described.unwrap_or_default()
}

/// Names the steps of paths, from the objects on them.
struct Describe<'a> {
    env: &'a Env,
    jni: Jni,
    objects: &'a HashMap<i64, sys::jobject>,
}

impl Describe<'_> {
    fn path(&self, path: &[(i64, Link)]) -> Option<Vec<String>> {
        let mut steps = Vec::with_capacity(path.len());
        let mut referrer = None;
        for &(tag, link) in path {
            let object = *self.objects.get(&tag)?;
            let how = match referrer {
                None => self.root(link),
                Some(referrer) => self.reference(referrer, object, link),
            };
            steps.push(format!("{how}: {}", self.class_of(object)));
            referrer = Some(object);
        }
        Some(steps)
    }

    /// What kind of root holds the first object.
    fn root(&self, link: Link) -> String {
        match link.kind {
            sys::JVMTI_HEAP_REFERENCE_SYSTEM_CLASS => "system class".into(),
            sys::JVMTI_HEAP_REFERENCE_JNI_GLOBAL => "JNI global reference".into(),
            sys::JVMTI_HEAP_REFERENCE_JNI_LOCAL => "JNI local reference".into(),
            sys::JVMTI_HEAP_REFERENCE_MONITOR => "monitor held".into(),
            sys::JVMTI_HEAP_REFERENCE_THREAD => "thread".into(),
            sys::JVMTI_HEAP_REFERENCE_STACK_LOCAL => match self.method(link.method) {
                Some(method) => format!("local variable of {method}"),
                None => "local variable".into(),
            },
            _ => "other root".into(),
        }
    }

    /// How `referrer` refers to `object`.
    fn reference(&self, referrer: sys::jobject, object: sys::jobject, link: Link) -> String {
        match link.kind {
            sys::JVMTI_HEAP_REFERENCE_FIELD => {
                self.field_holding(referrer, object, false).map_or_else(
                    || format!("field #{}", link.index),
                    |name| format!(".{name}"),
                )
            }
            sys::JVMTI_HEAP_REFERENCE_STATIC_FIELD => {
                self.field_holding(referrer, object, true).map_or_else(
                    || format!("static field #{}", link.index),
                    |name| format!("static {name}"),
                )
            }
            sys::JVMTI_HEAP_REFERENCE_ARRAY_ELEMENT => format!("[{}]", link.index),
            sys::JVMTI_HEAP_REFERENCE_CLASS => "its class".into(),
            sys::JVMTI_HEAP_REFERENCE_CLASS_LOADER => "its class loader".into(),
            sys::JVMTI_HEAP_REFERENCE_SIGNERS => "its signers".into(),
            sys::JVMTI_HEAP_REFERENCE_PROTECTION_DOMAIN => "its protection domain".into(),
            sys::JVMTI_HEAP_REFERENCE_INTERFACE => "an interface".into(),
            sys::JVMTI_HEAP_REFERENCE_SUPERCLASS => "its superclass".into(),
            sys::JVMTI_HEAP_REFERENCE_CONSTANT_POOL => "its constant pool".into(),
            _ => "a reference".into(),
        }
    }

    /// The name of the field of `referrer` (its static fields when `statics`: the referrer
    /// is then a class) that holds `object`, searched up the class hierarchy.
    fn field_holding(
        &self,
        referrer: sys::jobject,
        object: sys::jobject,
        statics: bool,
    ) -> Option<String> {
        let mut class = match statics {
            true => referrer,
            false => self.jni.object_class(referrer),
        };
        while !class.is_null() {
            for field in self
                .jni
                .declared_fields(self.env, class, usize::MAX, statics)
            {
                if !field.signature.starts_with(['L', '[']) {
                    continue;
                }
                let value = match statics {
                    true => self.jni.static_object(class, field.id),
                    false => match self.jni.field_value(referrer, field.id, &field.signature) {
                        Value::Object(value) => value,
                        _ => continue,
                    },
                };
                let found = !value.is_null() && self.jni.is_same(value, object);
                self.jni.delete_local(value);
                if found {
                    return Some(field.name);
                }
            }
            // Static fields are the class's own.
            if statics {
                return None;
            }
            class = self.jni.superclass(class);
        }
        None
    }

    /// The Java name of `object`'s class; for a class object, `class` and the class's name.
    fn class_of(&self, object: sys::jobject) -> String {
        let class = self.jni.object_class(object);
        let name = self
            .jni
            .class_signature(self.env, class)
            .unwrap_or_default();
        if name == "Ljava/lang/Class;" {
            let own = self
                .jni
                .class_signature(self.env, object)
                .unwrap_or_default();
            return format!("class {}", java_name(&own));
        }
        java_name(&name)
    }

    /// `Class.method` of a jmethodID.
    fn method(&self, method: sys::jmethodID) -> Option<String> {
        if method.is_null() {
            return None;
        }
        // SAFETY: a method id the VM reported for a frame on a live thread's stack.
        let (name, _) = unsafe { self.env.method_name(method) }.ok()?;
        // SAFETY: as above.
        let class = unsafe { self.env.method_declaring_class(method) }.ok()?;
        let signature = self
            .jni
            .class_signature(self.env, class)
            .unwrap_or_default();
        Some(format!("{}.{name}", java_name(&signature)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(from: i64, kind: sys::jvmtiHeapReferenceKind) -> Link {
        Link {
            from,
            kind,
            index: 0,
            method: std::ptr::null_mut(),
            depth: 0,
            transient: false,
        }
    }

    #[test]
    fn an_object_keeps_the_shortest_path_seen_and_the_walk_stops_at_the_last_target() {
        let mut walk = Walk {
            next_tag: FIRST_WALK_TAG,
            links: HashMap::new(),
            targets: HashSet::from([7, 9]),
            left: 2,
        };
        let visit = sys::JVMTI_VISIT_OBJECTS as sys::jint;
        // A root, then an object it refers to, then the target 7 (already tagged).
        let (root, verdict) = walk.reached(0, link(0, sys::JVMTI_HEAP_REFERENCE_SYSTEM_CLASS));
        assert_eq!((root, verdict), (FIRST_WALK_TAG + 1, visit));
        let (list, _) = walk.reached(0, link(root, sys::JVMTI_HEAP_REFERENCE_STATIC_FIELD));
        assert_eq!(
            walk.reached(7, link(list, sys::JVMTI_HEAP_REFERENCE_ARRAY_ELEMENT)),
            (7, visit)
        );
        let path: Vec<i64> = walk.path(7).unwrap().iter().map(|s| s.0).collect();
        assert_eq!(path, [root, list, 7]);
        // A longer way to 7 does not change its path, a shorter one does; and a way from
        // its own descendants cannot replace it.
        let (deeper, _) = walk.reached(0, link(list, sys::JVMTI_HEAP_REFERENCE_FIELD));
        assert_eq!(
            walk.reached(7, link(deeper, sys::JVMTI_HEAP_REFERENCE_FIELD))
                .0,
            7
        );
        assert_eq!(walk.path(7).unwrap().len(), 3);
        walk.reached(7, link(root, sys::JVMTI_HEAP_REFERENCE_FIELD));
        let path: Vec<i64> = walk.path(7).unwrap().iter().map(|s| s.0).collect();
        assert_eq!(path, [root, 7]);
        walk.reached(list, link(7, sys::JVMTI_HEAP_REFERENCE_FIELD));
        assert_eq!(walk.path(list).unwrap().len(), 2);
        assert!(walk.path(9).is_none());
        // The last target ends the walk.
        let abort = sys::JVMTI_VISIT_ABORT as sys::jint;
        assert_eq!(
            walk.reached(9, link(list, sys::JVMTI_HEAP_REFERENCE_ARRAY_ELEMENT)),
            (9, abort)
        );
    }

    #[test]
    fn a_long_lived_root_wins_over_a_shorter_path_from_a_local_variable() {
        let mut walk = Walk {
            next_tag: FIRST_WALK_TAG,
            links: HashMap::new(),
            targets: HashSet::from([7]),
            left: 1,
        };
        let visit = sys::JVMTI_VISIT_OBJECTS as sys::jint;
        let abort = sys::JVMTI_VISIT_ABORT as sys::jint;
        // A local variable holds the map that holds 7: the walk goes on.
        let (map, _) = walk.reached(0, link(0, sys::JVMTI_HEAP_REFERENCE_JNI_LOCAL));
        assert_eq!(
            walk.reached(7, link(map, sys::JVMTI_HEAP_REFERENCE_FIELD)),
            (7, visit)
        );
        // A class's static field holds the same map: its path now starts at the class, and
        // 7, reached through it, is settled.
        let (class, _) = walk.reached(0, link(0, sys::JVMTI_HEAP_REFERENCE_SYSTEM_CLASS));
        let (holder, _) = walk.reached(0, link(class, sys::JVMTI_HEAP_REFERENCE_CLASS_LOADER));
        walk.reached(map, link(holder, sys::JVMTI_HEAP_REFERENCE_STATIC_FIELD));
        let path: Vec<i64> = walk.path(7).unwrap().iter().map(|s| s.0).collect();
        assert_eq!(path, [class, holder, map, 7]);
        // A shorter way from a local variable does not take it back; one from the class does
        // and ends the walk.
        let (local, _) = walk.reached(0, link(0, sys::JVMTI_HEAP_REFERENCE_STACK_LOCAL));
        walk.reached(7, link(local, sys::JVMTI_HEAP_REFERENCE_FIELD));
        assert_eq!(walk.path(7).unwrap().len(), 4);
        assert_eq!(
            walk.reached(7, link(class, sys::JVMTI_HEAP_REFERENCE_STATIC_FIELD)),
            (7, abort)
        );
        assert_eq!(walk.path(7).unwrap().len(), 2);
    }
}
