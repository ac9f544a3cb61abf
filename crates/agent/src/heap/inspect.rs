//! `inspect`: the instances of a class with their fields (or the value at a path of fields),
//! or one of its static fields, read through JVMTI and JNI without running any Java code and
//! without writing to the heap (`jtap inspect`; it replaced a heap dump of the whole heap).
//!
//! - The classes of the name are found among the loaded classes by their signatures: one
//!   per defining loader, each shown.
//! - Instances: one `IterateThroughHeap` per class with the class as its class filter (a
//!   pointer comparison per object; the VM looks up no tag for the others) counts them all
//!   and tags the first `limit=` — in a JVMTI environment of the action's own, disposed of
//!   at the end, so no tag outlives the action — and `GetObjectsWithTags` hands them back.
//!   Their fields (the class's own, then each superclass's) are read with JNI
//!   `Get<Type>Field` and described as the tracer describes values, but running no Java code
//!   at all, not even the JDK's ([`Describer::plain`]).
//! - A static: `GetClassFields` and JNI `GetStatic<Type>Field` on the class (then its
//!   superclasses), which does not initialise it; `GetClassStatus` tells whether its
//!   initialiser has run.
//!
//! Bounded: at most [`MAX_INSPECT`] instances, [`MOST_FIELDS`] fields each, paths of at most
//! [`MAX_PATH`] fields (the option grammar checks both), every value capped by the describer.
//! The heap walks happen at safepoints: the record gives how long they paused the JVM.

use std::ffi::c_void;
use std::time::Instant;

use jtap_classfile::descriptor::java_name;
use jtap_jvmti::{sys, Env, EnvRef};
use jtap_protocol::options::{MAX_INSPECT, MAX_PATH};
use jtap_protocol::records::{FieldValue, InspectedClass, Inspection, Instance};
use jtap_protocol::Options;

use crate::heap::env::OwnEnv;
use crate::thread::Vm;
use crate::trace::ffi::{self, Jni, Value};
use crate::trace::values::Describer;

/// Instances shown when `limit=` is not given.
const DEFAULT_LIMIT: u32 = 5;
/// Fields listed per instance, over its class and superclasses.
const MOST_FIELDS: usize = 256;
/// Close names offered for a class that is not loaded.
const MOST_SIMILAR: usize = 5;

/// What one heap walk counts and tags, shared with its callback.
struct Walk {
    /// Instances seen.
    count: u64,
    /// Instances tagged.
    tagged: u64,
    /// The most to tag.
    limit: u64,
    /// The tag they get.
    tag: i64,
}

/// An instance field of a class or one of its superclasses.
struct Field {
    name: String,
    id: sys::jfieldID,
    signature: String,
}

/// Answers `inspect,class=...` (with `limit=`, `path=` or `static=`).
pub fn run(vm: Vm, env: EnvRef<'static>, options: &Options) -> Result<Inspection, String> {
    let name = options.class.clone().ok_or("inspect needs class=<name>")?;
    let limit = options.limit.unwrap_or(DEFAULT_LIMIT).min(MAX_INSPECT);
    let steps: Vec<&str> = match &options.path {
        Some(path) => path.split('.').take(MAX_PATH).collect(),
        None => Vec::new(),
    };
    let own = OwnEnv::new(vm, &["can_tag_objects"])?;
    if own.env().phase() != Ok(sys::JVMTI_PHASE_LIVE) {
        return Err("inspect needs a running JVM (not at start-up or shutdown)".into());
    }
    let _frame = vm
        .local_frame(64)
        .ok_or("this thread is not attached to the VM")?;
    let jni = Jni::current(vm).ok_or("this thread is not attached to the VM")?;
    let describer =
        Describer::plain(env, jni).ok_or("the JVM's java.lang classes are unavailable")?;
    let (classes, similar) = find_classes(&env, &name)?;
    let mut inspection = Inspection {
        class: name.clone(),
        path: options.path.clone(),
        static_field: options.static_field.clone(),
        classes: Vec::new(),
        similar,
        walk_ms: None,
    };
    let mut walk_ms = 0.0;
    for (index, &class) in classes.iter().enumerate() {
        let loader = match ffi::class_loader(&env, class) {
            Some(loader) if !loader.is_null() => {
                let text = describer.value(loader);
                jni.delete_local(loader);
                text
            }
            _ => "<bootstrap>".to_string(),
        };
        let mut inspected = InspectedClass {
            loader,
            initialized: ffi::is_initialized(&env, class),
            instances: 0,
            shown: Vec::new(),
            static_value: None,
        };
        if let Some(field) = &options.static_field {
            inspected.static_value = static_value(jni, &env, &describer, class, field);
        } else {
            let tag = index as i64 + 1;
            let (walk, ms) = walk_heap(own.env(), class, limit, tag)?;
            walk_ms += ms;
            inspected.instances = walk.count;
            let objects = own
                .env()
                .objects_with_tags(&[tag])
                .map_err(|e| e.to_string())?;
            let fields = instance_fields(jni, &env, class);
            for (object, _) in objects {
                let shown = jni.with_local_frame(64, || {
                    describe_instance(jni, &env, &describer, &name, object, &fields, &steps)
                });
                jni.delete_local(object);
                inspected.shown.extend(shown);
            }
        }
        inspection.classes.push(inspected);
    }
    if options.static_field.is_none() && !classes.is_empty() {
        inspection.walk_ms = Some(walk_ms);
    }
    Ok(inspection)
}

/// The loaded classes named `name` (local references), and when there is none, a few loaded
/// classes with close names.
fn find_classes(env: &Env, name: &str) -> Result<(Vec<sys::jclass>, Vec<String>), String> {
    let wanted = format!("L{};", name.replace('.', "/"));
    let simple = |text: &str| -> String {
        let after = text.rsplit(['/', '.']).next().unwrap_or(text);
        after.trim_end_matches(';').to_ascii_lowercase()
    };
    let wanted_simple = simple(name);
    let loaded = env.loaded_classes().map_err(|e| e.to_string())?;
    let mut found = Vec::new();
    let mut similar = Vec::new();
    for &class in loaded.iter() {
        // SAFETY: a local reference GetLoadedClasses made in the caller's frame.
        let Ok(signature) = (unsafe { env.class_signature(class) }) else {
            continue;
        };
        if signature == wanted {
            found.push(class);
        } else if signature.starts_with('L') && simple(&signature).contains(&wanted_simple) {
            similar.push(java_name(&signature));
        }
    }
    if !found.is_empty() {
        return Ok((found, Vec::new()));
    }
    similar.sort_by_key(|s| (s.len(), s.clone()));
    similar.dedup();
    similar.truncate(MOST_SIMILAR);
    Ok((found, similar))
}

/// Counts the instances of exactly `class` and tags the first `limit` with `tag`; and the
/// walk's duration in ms.
fn walk_heap(env: &Env, class: sys::jclass, limit: u32, tag: i64) -> Result<(Walk, f64), String> {
    let mut walk = Walk {
        count: 0,
        tagged: 0,
        limit: u64::from(limit),
        tag,
    };
    let callbacks = sys::jvmtiHeapCallbacks {
        heap_iteration_callback: Some(count_and_tag),
        ..Default::default()
    };
    let started = Instant::now();
    // SAFETY: `class` is a live local reference; the callback only touches `walk` through
    // user_data, which outlives the call and is used by the one thread running the callbacks.
    unsafe {
        env.iterate_through_heap(
            0,
            class,
            &callbacks,
            (&mut walk as *mut Walk).cast::<c_void>(),
        )
    }
    .map_err(|e| e.to_string())?;
    Ok((walk, started.elapsed().as_secs_f64() * 1e3))
}

/// Heap iteration callback: counts an instance and tags it while fewer than the limit are.
/// Runs at a safepoint in the VM's thread: no JNI, and no panic (it cannot unwind into the
/// VM).
unsafe extern "C" fn count_and_tag(
    _class_tag: sys::jlong,
    _size: sys::jlong,
    tag: *mut sys::jlong,
    _length: sys::jint,
    user_data: *mut c_void,
) -> sys::jint {
    // SAFETY: user_data is the `&mut Walk` walk_heap passed, alive and not otherwise
    // borrowed while IterateThroughHeap runs.
    let walk = unsafe { &mut *user_data.cast::<Walk>() };
    walk.count += 1;
    if walk.tagged < walk.limit && !tag.is_null() {
        // SAFETY: JVMTI passes the object's tag slot, which the callback may set.
        unsafe { *tag = walk.tag };
        walk.tagged += 1;
    }
    sys::JVMTI_VISIT_OBJECTS as sys::jint
}

/// The instance fields of `class` and its superclasses, the class's own first.
fn instance_fields(jni: Jni, env: &Env, class: sys::jclass) -> Vec<Field> {
    let mut fields = Vec::new();
    let mut current = jni.superclass(class);
    let mut declared = jni.instance_fields(env, class, MOST_FIELDS);
    loop {
        for field in declared {
            if fields.len() == MOST_FIELDS {
                break;
            }
            fields.push(Field {
                name: field.name,
                id: field.id,
                signature: field.signature,
            });
        }
        if current.is_null() || fields.len() == MOST_FIELDS {
            jni.delete_local(current);
            return fields;
        }
        declared = jni.instance_fields(env, current, MOST_FIELDS);
        let parent = jni.superclass(current);
        jni.delete_local(current);
        current = parent;
    }
}

/// One instance: `Class@hash` with its fields, or with the value at `steps`.
fn describe_instance(
    jni: Jni,
    env: &Env,
    describer: &Describer,
    name: &str,
    object: sys::jobject,
    fields: &[Field],
    steps: &[&str],
) -> Instance {
    let object_name = match jni.identity_hash(env, object) {
        Some(hash) => format!("{name}@{hash:x}"),
        None => name.to_string(),
    };
    if !steps.is_empty() {
        return Instance {
            object: object_name,
            fields: Vec::new(),
            value: Some(follow(jni, env, describer, object, steps)),
        };
    }
    let fields = fields
        .iter()
        .map(|field| FieldValue {
            name: field.name.clone(),
            value: describer.read(jni.field_value(object, field.id, &field.signature)),
        })
        .collect();
    Instance {
        object: object_name,
        fields,
        value: None,
    }
}

/// The value at the end of a path of field names from `object`: `null` where a step meets
/// null, `[no field X]` where an object's class has no such field.
fn follow(
    jni: Jni,
    env: &Env,
    describer: &Describer,
    mut object: sys::jobject,
    steps: &[&str],
) -> String {
    for (index, name) in steps.iter().enumerate() {
        if object.is_null() {
            return "null".into();
        }
        let class = jni.object_class(object);
        let field = field_named(jni, env, class, name);
        jni.delete_local(class);
        let Some((id, signature)) = field else {
            return format!("[no field {name}]");
        };
        match jni.field_value(object, id, &signature) {
            Value::Object(next) => object = next,
            primitive if index + 1 == steps.len() => return describer.read(primitive),
            _ => return format!("[{name} is not an object]"),
        }
    }
    describer.value(object)
}

/// Instance field `name` of `class` or a superclass: its id and JVM type.
fn field_named(
    jni: Jni,
    env: &Env,
    class: sys::jclass,
    name: &str,
) -> Option<(sys::jfieldID, String)> {
    let mut current = class;
    while !current.is_null() {
        let found = jni
            .instance_fields(env, current, usize::MAX)
            .into_iter()
            .find(|f| f.name == name);
        let parent = jni.superclass(current);
        if current != class {
            jni.delete_local(current);
        }
        if let Some(field) = found {
            jni.delete_local(parent);
            return Some((field.id, field.signature));
        }
        current = parent;
    }
    None
}

/// Static field `name` of `class` (or of a superclass) described; None when there is none.
fn static_value(
    jni: Jni,
    env: &Env,
    describer: &Describer,
    class: sys::jclass,
    name: &str,
) -> Option<String> {
    let mut current = class;
    let mut found = None;
    while !current.is_null() && found.is_none() {
        found = jni
            .declared_fields(env, current, usize::MAX, true)
            .into_iter()
            .find(|f| f.name == name)
            .map(|field| describer.read(jni.static_value(current, field.id, &field.signature)));
        let parent = jni.superclass(current);
        if current != class {
            jni.delete_local(current);
        }
        current = parent;
    }
    jni.delete_local(current);
    found
}
