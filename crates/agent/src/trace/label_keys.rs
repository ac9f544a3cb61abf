//! Reading a `by=` key (`this.command.sql`, `arg1.uri`) at an entry call, with plain JNI
//! field reads: no getter, `toString()` or other Java code runs.
//!
//! Finding a field by name means asking JVMTI for every field of the class and its
//! superclasses, which costs far more than the entry call it labels (a point read of H2
//! spent a third of its time there). What a reader learns of a class — the fields it found by
//! name, whether it is `String` — is therefore kept under a number the class object is tagged
//! with (a JVMTI tag in the labelling session's environment, which disposing of the
//! environment forgets). A string at the end of a key is looked up by its UTF-16 units
//! among those seen before: the same text again (a prepared statement's SQL, a URI) is its
//! label without decoding, escaping or interning it. After an entry's first call, a key
//! costs a tag lookup per step, the field reads and a copy of the string's characters.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::RwLock;

use jtap_jvmti::{sys, EnvRef};
use jtap_protocol::label::{Root, ValuePath};

use super::ffi::{Jni, Value};
use super::values::Describer;

/// The longest label text kept from a key's value.
const TEXT_CAP: usize = 200;
/// Marks a tag that numbers a class, apart from the labels tasks are tagged with.
const CLASS_TAG: i64 = 1 << 62;
/// Classes described at most; later ones are looked at on every call.
const MOST_CLASSES: usize = 4096;

/// A field found by name: its id (as an address: ids are the JVM's, valid while the class
/// is loaded, and a tagged class unloaded takes its tag with it) and JVM type.
type Found = Option<(usize, String)>;

/// What a reader knows of one tagged class.
#[derive(Default)]
struct Class {
    is_string: Option<bool>,
    fields: Vec<(String, Found)>,
}

/// Reads keys' values, remembering classes.
pub struct KeyReader {
    env: EnvRef<'static>,
    classes: RwLock<HashMap<i64, Class>>,
    next: AtomicI64,
    /// The labels of the strings seen, by their units (the last unit 1 when cut short);
    /// as many as labels can be.
    strings: RwLock<HashMap<Vec<u16>, u32>>,
}

impl KeyReader {
    /// A reader tagging classes in `env`.
    pub fn new(env: EnvRef<'static>) -> KeyReader {
        KeyReader {
            env,
            classes: RwLock::new(HashMap::new()),
            next: AtomicI64::new(1),
            strings: RwLock::new(HashMap::new()),
        }
    }

    /// The label of the value of `path` in an entry call with receiver `this` and arguments
    /// `args`: `label` of its text — a string's characters (at most [`TEXT_CAP`]), a
    /// primitive's value, other objects as `trace --args` shows them; `null` where a step
    /// meets null, `[no field X]` where a class has no such field. None when the path starts
    /// past the arguments.
    pub fn label(
        &self,
        jni: Jni,
        (this, args): (sys::jobject, sys::jobject),
        path: &ValuePath,
        label: impl Fn(&str) -> u32,
    ) -> Option<u32> {
        let root = match path.root {
            Root::This => this,
            Root::Arg(n) if !args.is_null() && usize::from(n) <= jni.array_length(args) => {
                jni.object_element(args, usize::from(n) - 1)
            }
            Root::Arg(_) => return None,
        };
        let id = jni.with_local_frame(16, || match self.follow(jni, root, &path.fields) {
            Ok(text) => label(&text),
            Err(string) => self.string_label(jni, string, &label),
        });
        if root != this {
            jni.delete_local(root);
        }
        Some(id.unwrap_or_else(|| label("")))
    }

    /// The label of string `string`: its text's, found by its characters when seen before.
    fn string_label(&self, jni: Jni, string: sys::jobject, label: impl Fn(&str) -> u32) -> u32 {
        let Some((mut units, cut)) = jni.string_units(string, TEXT_CAP) else {
            return label("");
        };
        units.push(u16::from(cut));
        let seen = self.strings.read().unwrap_or_else(|e| e.into_inner());
        if let Some(&id) = seen.get(&units) {
            return id;
        }
        drop(seen);
        let mut text = String::from_utf16_lossy(&units[..units.len() - 1]);
        if cut {
            text.push_str("...");
        }
        let id = label(&text);
        let mut seen = self.strings.write().unwrap_or_else(|e| e.into_inner());
        if seen.len() < crate::label::MAX_LABELS {
            seen.insert(units, id);
        }
        id
    }

    /// The text at the end of `fields` from `object`, or Err with the string it ends at.
    fn follow(
        &self,
        jni: Jni,
        mut object: sys::jobject,
        fields: &[String],
    ) -> Result<String, sys::jobject> {
        for (step, name) in fields.iter().enumerate() {
            if object.is_null() {
                return Ok("null".into());
            }
            let Some((id, signature)) = self.field(jni, object, name) else {
                return Ok(format!("[no field {name}]"));
            };
            match jni.field_value(object, id as sys::jfieldID, &signature) {
                Value::Object(next) => object = next,
                primitive if step + 1 == fields.len() => return Ok(primitive_text(primitive)),
                _ => return Ok(format!("[{name} is not an object]")),
            }
        }
        if object.is_null() {
            return Ok("null".into());
        }
        if self.is_string(jni, object) {
            return Err(object);
        }
        Ok(Describer::new(self.env, jni, false, false)
            .map(|d| d.value(object))
            .unwrap_or_default())
    }

    /// The number `class` is tagged with, tagging it if it has none (None when the JVM
    /// refuses, or [`MOST_CLASSES`] are known). Two threads tagging one class at once leave
    /// one number, and what the other learnt unused.
    fn class_tag(&self, class: sys::jclass) -> Option<i64> {
        // SAFETY: a live local reference of this thread.
        let tag = unsafe { self.env.tag(class) }.ok()?;
        if tag & CLASS_TAG != 0 {
            return Some(tag);
        }
        if self.next.load(Ordering::Relaxed) > MOST_CLASSES as i64 {
            return None;
        }
        let tag = CLASS_TAG | self.next.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { self.env.set_tag(class, tag) }.ok()?;
        Some(tag)
    }

    /// What is known of the class tagged `tag`, if anything.
    fn known<T>(&self, tag: Option<i64>, look: impl FnOnce(&Class) -> Option<T>) -> Option<T> {
        let classes = self.classes.read().unwrap_or_else(|e| e.into_inner());
        look(classes.get(&tag?)?)
    }

    /// Adds to what is known of the class tagged `tag`.
    fn learn(&self, tag: Option<i64>, add: impl FnOnce(&mut Class)) {
        if let Some(tag) = tag {
            let mut classes = self.classes.write().unwrap_or_else(|e| e.into_inner());
            add(classes.entry(tag).or_default());
        }
    }

    /// Whether `object` is a `java.lang.String`.
    fn is_string(&self, jni: Jni, object: sys::jobject) -> bool {
        let class = jni.object_class(object);
        let tag = self.class_tag(class);
        let is_string = self.known(tag, |c| c.is_string).unwrap_or_else(|| {
            let is = jni.class_signature(&self.env, class).as_deref() == Some("Ljava/lang/String;");
            self.learn(tag, |c| c.is_string = Some(is));
            is
        });
        jni.delete_local(class);
        is_string
    }

    /// Instance field `name` of `object`'s class or a superclass: its id and JVM type.
    fn field(&self, jni: Jni, object: sys::jobject, name: &str) -> Found {
        let class = jni.object_class(object);
        let tag = self.class_tag(class);
        let known = self.known(tag, |c| {
            c.fields
                .iter()
                .find(|(field, _)| field == name)
                .map(|(_, found)| found.clone())
        });
        if let Some(found) = known {
            jni.delete_local(class);
            return found;
        }
        let found = self.look_up(jni, class, name);
        self.learn(tag, |c| c.fields.push((name.to_string(), found.clone())));
        found
    }

    /// Walks `class` (a local reference, deleted) and its superclasses for field `name`.
    fn look_up(&self, jni: Jni, mut class: sys::jclass, name: &str) -> Found {
        while !class.is_null() {
            let found = jni
                .instance_fields(&self.env, class, usize::MAX)
                .into_iter()
                .find(|f| f.name == name);
            if let Some(field) = found {
                jni.delete_local(class);
                return Some((field.id as usize, field.signature));
            }
            let parent = jni.superclass(class);
            jni.delete_local(class);
            class = parent;
        }
        None
    }
}

fn primitive_text(value: Value) -> String {
    match value {
        Value::Boolean(v) => v.to_string(),
        Value::Byte(v) => v.to_string(),
        Value::Char(v) => char::from_u32(u32::from(v)).unwrap_or('?').to_string(),
        Value::Short(v) => v.to_string(),
        Value::Int(v) => v.to_string(),
        Value::Long(v) => v.to_string(),
        Value::Float(v) => v.to_string(),
        Value::Double(v) => v.to_string(),
        Value::Object(_) => String::new(),
    }
}
