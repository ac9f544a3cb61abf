//! Java values as bounded, one-line text for `--args` and `--return` (and thrown
//! exceptions), described on the application's thread without running application code.
//!
//! By default only code of the JDK whose result is known and cheap runs (the rule BTrace's
//! `str()` follows): strings, boxed primitives, enums (their name), `Class`, arrays and
//! throwables (class and message) are read with plain JNI field and array reads; BigDecimal,
//! BigInteger, UUID, `java.time` values, `File` and `URI` by their `toString()` (the exact JDK
//! class only, never an application subclass); collections and maps of the JDK's own classes
//! by iterating them. Every other object is `ClassName@identityhash{field=value, ...}` with
//! the values of its first primitive, string, boxed and enum fields, read without getters or
//! class initialisation. With `--to-string`, application objects are described by their
//! `toString()` (and any collection iterated), as the user asked.
//!
//! Every value is capped at [`VALUE_CAP`] characters (then `...`), arrays and collections at
//! [`ELEMENTS`] elements, and control characters are escaped (`\n`, `\t`, `\u0001`), so a
//! call stays one line.

use std::fmt::Write as _;

use jtap_jvmti::{sys, EnvRef};

use super::ffi::{Jni, Known, Value};
use jtap_classfile::descriptor::java_name;

/// Longest text of one value.
pub const VALUE_CAP: usize = 256;
/// Between the values of [`Describer::values`]: the ASCII unit separator.
pub const SEPARATOR: char = '\u{1f}';
/// Before the size a [`Describer::measured`] value ends with: the ASCII record separator.
pub const SIZE_MARK: char = '\u{1e}';
/// Longest text of `this` and the arguments together.
pub const ARGS_CAP: usize = VALUE_CAP * 4;
/// Elements shown of an array or collection.
const ELEMENTS: usize = 8;
/// Fields shown of an application object.
const FIELDS: usize = 8;
/// Fields looked at per class of an application object.
const FIELDS_SCANNED: usize = 32;
/// Longest text of one field value inside an application object.
const FIELD_CAP: usize = 64;
/// Nesting of arrays and collections shown (deeper ones by type and size only).
const DEPTH: u32 = 2;
/// BigIntegers longer than this many 32-bit words are shown by their size: their
/// `toString()` costs quadratic time.
const BIG_WORDS: usize = 32;

/// JDK classes described by their own `toString()` (exact classes: no subclass can override
/// it).
const JDK_TO_STRING: [&str; 21] = [
    "java/math/BigDecimal",
    "java/math/BigInteger",
    "java/util/UUID",
    "java/io/File",
    "java/net/URI",
    "java/time/Duration",
    "java/time/Instant",
    "java/time/LocalDate",
    "java/time/LocalDateTime",
    "java/time/LocalTime",
    "java/time/MonthDay",
    "java/time/OffsetDateTime",
    "java/time/OffsetTime",
    "java/time/Period",
    "java/time/Year",
    "java/time/YearMonth",
    "java/time/ZoneOffset",
    "java/time/ZoneRegion",
    "java/time/ZonedDateTime",
    "java/util/Locale",
    "java/util/Currency",
];

/// JDK collection classes (with their inner view classes) whose iteration runs only JDK code
/// and never blocks.
const JDK_COLLECTIONS: [&str; 23] = [
    "java/util/ArrayList",
    "java/util/LinkedList",
    "java/util/ArrayDeque",
    "java/util/PriorityQueue",
    "java/util/HashMap",
    "java/util/LinkedHashMap",
    "java/util/TreeMap",
    "java/util/IdentityHashMap",
    "java/util/EnumMap",
    "java/util/HashSet",
    "java/util/LinkedHashSet",
    "java/util/TreeSet",
    "java/util/RegularEnumSet",
    "java/util/JumboEnumSet",
    "java/util/Arrays",
    "java/util/ImmutableCollections",
    "java/util/concurrent/ConcurrentHashMap",
    "java/util/concurrent/CopyOnWriteArrayList",
    "java/util/concurrent/CopyOnWriteArraySet",
    "java/util/concurrent/ConcurrentLinkedQueue",
    "java/util/concurrent/ConcurrentLinkedDeque",
    "java/util/concurrent/ConcurrentSkipListMap",
    "java/util/concurrent/ConcurrentSkipListSet",
];

/// Name prefixes of more such classes (`Collections.emptyList()`, `singletonMap()` ...).
const JDK_COLLECTION_PREFIXES: [&str; 2] = [
    "java/util/Collections$Empty",
    "java/util/Collections$Singleton",
];

/// `java.util.Collections` wrappers: described as the collection (field `c`) or map (field
/// `m`) they wrap, read without calling them (a synchronized one would take its lock).
const JDK_WRAPPERS: [&str; 3] = [
    "java/util/Collections$Unmodifiable",
    "java/util/Collections$Synchronized",
    "java/util/Collections$Checked",
];

/// Describes values on the calling (application) thread. Use inside a JNI local frame.
pub struct Describer {
    jni: Jni,
    env: EnvRef<'static>,
    known: &'static Known,
    /// Call `toString()` of application objects (`--to-string`).
    to_string: bool,
    /// Measure values ([`Describer::measured`]).
    sizes: bool,
    /// Run no Java code at all, not even the JDK's: JDK value classes and collections are
    /// objects like any other (`java.util.HashMap@hash{size=3}`), read field by field
    /// (`jtap inspect`).
    plain: bool,
}

impl Describer {
    /// A describer for this thread; None when the JVM's classes or jtap's JVMTI environment
    /// are unavailable.
    pub fn new(env: EnvRef<'static>, jni: Jni, to_string: bool, sizes: bool) -> Option<Describer> {
        Some(Describer {
            jni,
            env,
            known: Known::get(jni)?,
            to_string,
            sizes,
            plain: false,
        })
    }

    /// A describer that runs no Java code at all, not even the JDK's: only JNI field, array
    /// and string reads and JVMTI questions.
    pub fn plain(env: EnvRef<'static>, jni: Jni) -> Option<Describer> {
        Some(Describer {
            plain: true,
            ..Describer::new(env, jni, false, false)?
        })
    }

    /// One value as [`Describer::value`] describes it; when the describer measures, followed
    /// by [`SIZE_MARK`] and the object's shallow size in bytes (JVMTI's `GetObjectSize`,
    /// what `Instrumentation.getObjectSize` returns; 0 for `null`).
    pub fn measured(&self, object: sys::jobject) -> String {
        let mut text = self.value(object);
        if self.sizes {
            let size = match object.is_null() {
                true => 0,
                false => self.jni.object_size(&self.env, object).unwrap_or(0),
            };
            let _ = write!(text, "{SIZE_MARK}{size}");
        }
        text
    }

    /// Splits what [`Describer::measured`] gave into the description and the size (0 when
    /// it holds none).
    pub fn split_size(measured: &str) -> (&str, u64) {
        match measured.rsplit_once(SIZE_MARK) {
            Some((text, size)) => (text, size.parse().unwrap_or(0)),
            None => (measured, 0),
        }
    }

    /// A value read from a field (a reference in it is a local reference, deleted here), as
    /// [`Describer::value`] describes objects and Java prints primitives.
    pub fn read(&self, value: Value) -> String {
        match value {
            Value::Object(object) => {
                let text = self.value(object);
                self.jni.delete_local(object);
                text
            }
            primitive => {
                let mut out = String::new();
                push_value(primitive, &mut out);
                out
            }
        }
    }

    /// One value, at most [`VALUE_CAP`] characters (then `...`).
    pub fn value(&self, object: sys::jobject) -> String {
        let mut out = String::new();
        self.describe(object, VALUE_CAP, 0, &mut out);
        cut(out, VALUE_CAP)
    }

    /// `this` (null for static methods and constructors) and the arguments, as
    /// `this=<value> args=[<value>, ...]` (`args=[...]` alone without `this`), each value
    /// capped, all at most [`ARGS_CAP`].
    pub fn call(&self, this: sys::jobject, args: sys::jobject) -> String {
        let this = (!this.is_null()).then(|| self.value(this));
        let count = match args.is_null() {
            true => 0,
            false => self.jni.array_length(args),
        };
        call_text(this.as_deref(), count, |i| {
            let item = self.jni.object_element(args, i);
            let text = self.value(item);
            self.jni.delete_local(item);
            text
        })
    }

    /// `this` (`null` for static methods and constructors' callers) and each argument, each
    /// capped, joined by [`SEPARATOR`] (which no description holds: control characters are
    /// escaped).
    pub fn values(&self, this: sys::jobject, args: sys::jobject) -> String {
        let mut values = vec![self.measured(this)];
        values.extend(self.elements_with(args, Self::measured));
        values.join(&SEPARATOR.to_string())
    }

    /// The elements of `array` (an `Object[]`; none when null), each described.
    pub fn elements(&self, array: sys::jobject) -> Vec<String> {
        self.elements_with(array, Self::value)
    }

    fn elements_with(
        &self,
        array: sys::jobject,
        describe: fn(&Self, sys::jobject) -> String,
    ) -> Vec<String> {
        if array.is_null() {
            return Vec::new();
        }
        (0..self.jni.array_length(array))
            .map(|i| {
                let item = self.jni.object_element(array, i);
                let text = describe(self, item);
                self.jni.delete_local(item);
                text
            })
            .collect()
    }

    fn describe(&self, object: sys::jobject, cap: usize, depth: u32, out: &mut String) {
        if object.is_null() {
            out.push_str("null");
            return;
        }
        let class = self.jni.object_class(object);
        let signature = self
            .jni
            .class_signature(&self.env, class)
            .unwrap_or_default();
        self.describe_as(object, class, &signature, cap, depth, out);
        self.jni.delete_local(class);
    }

    fn describe_as(
        &self,
        object: sys::jobject,
        class: sys::jclass,
        signature: &str,
        cap: usize,
        depth: u32,
        out: &mut String,
    ) {
        let internal = signature
            .strip_prefix('L')
            .and_then(|s| s.strip_suffix(';'))
            .unwrap_or(signature);
        if internal == "java/lang/String" {
            let text = self.jni.string(object, cap).unwrap_or_default();
            return quoted(&text, cap, out);
        }
        if let Some(value) = self.boxed(object, class, internal) {
            return push_value(value, out);
        }
        if let Some(element) = signature.strip_prefix('[') {
            return self.array(object, element, cap, depth, out);
        }
        if internal == "java/lang/Class" {
            let name = self
                .jni
                .class_signature(&self.env, object)
                .map(|s| java_name(&s))
                .unwrap_or_else(|| "?".into());
            out.push_str("class ");
            out.push_str(&name);
            return;
        }
        if self.jni.is_instance_of(object, self.known.enum_class) {
            return self.enum_name(object, out);
        }
        if self.jni.is_instance_of(object, self.known.throwable) {
            return self.throwable(object, signature, cap, out);
        }
        if JDK_TO_STRING.contains(&internal) && !self.plain {
            return self.jdk_to_string(object, class, internal, cap, out);
        }
        if let Some(inner) = self.unwrap_wrapper(object, class, internal) {
            self.describe(inner, cap, depth, out);
            self.jni.delete_local(inner);
            return;
        }
        let is_map = self.jni.is_instance_of(object, self.known.map);
        let collection = is_map || self.jni.is_instance_of(object, self.known.collection);
        if collection && self.plain {
            return self.sized(object, class, signature, out);
        }
        if collection && (self.to_string || is_jdk_collection(internal)) {
            if depth < DEPTH {
                return self.collection(object, is_map, cap, depth, out);
            }
            out.push_str(&java_name(signature));
            return;
        }
        if self.to_string {
            self.to_string_into(object, cap, out);
            return;
        }
        self.object(object, class, signature, cap, out);
    }

    /// The value of a boxed primitive, read from its `value` field.
    fn boxed(&self, object: sys::jobject, class: sys::jclass, internal: &str) -> Option<Value> {
        let signature = match internal {
            "java/lang/Integer" => c"I",
            "java/lang/Long" => c"J",
            "java/lang/Boolean" => c"Z",
            "java/lang/Character" => c"C",
            "java/lang/Double" => c"D",
            "java/lang/Float" => c"F",
            "java/lang/Short" => c"S",
            "java/lang/Byte" => c"B",
            _ => return None,
        };
        let id = self.jni.field_id(class, c"value", signature)?;
        let value = self
            .jni
            .field_value(object, id, signature.to_str().unwrap_or("I"));
        Some(value)
    }

    /// The object's own `toString()`, capped and escaped (or what it threw).
    fn to_string_into(&self, object: sys::jobject, cap: usize, out: &mut String) {
        match self
            .jni
            .call_string(&self.env, object, self.known.to_string, cap)
        {
            Ok(text) => escape_into(&text, false, out),
            Err(thrown) => {
                let _ = write!(out, "<toString() threw {thrown}>");
            }
        }
    }

    fn enum_name(&self, object: sys::jobject, out: &mut String) {
        match self
            .jni
            .field_value(object, self.known.enum_name, "Ljava/lang/String;")
        {
            Value::Object(name) if !name.is_null() => {
                out.push_str(&self.jni.string(name, VALUE_CAP).unwrap_or_default());
                self.jni.delete_local(name);
            }
            _ => out.push('?'),
        }
    }

    /// `ClassName: message`, like `Throwable.toString()` without calling an override of it
    /// or of `getLocalizedMessage()`.
    fn throwable(&self, object: sys::jobject, signature: &str, cap: usize, out: &mut String) {
        out.push_str(&java_name(signature));
        if let Value::Object(message) =
            self.jni
                .field_value(object, self.known.detail_message, "Ljava/lang/String;")
        {
            if !message.is_null() {
                out.push_str(": ");
                let text = self.jni.string(message, cap).unwrap_or_default();
                escape_into(&text, false, out);
                self.jni.delete_local(message);
            }
        }
    }

    fn jdk_to_string(
        &self,
        object: sys::jobject,
        class: sys::jclass,
        internal: &str,
        cap: usize,
        out: &mut String,
    ) {
        let words = match internal {
            "java/math/BigInteger" => self.big_integer_words(object, class),
            "java/math/BigDecimal" => self
                .jni
                .field_id(class, c"intVal", c"Ljava/math/BigInteger;")
                .and_then(
                    |id| match self.jni.field_value(object, id, "Ljava/math/BigInteger;") {
                        Value::Object(big) if !big.is_null() => {
                            let big_class = self.jni.object_class(big);
                            let words = self.big_integer_words(big, big_class);
                            self.jni.delete_local(big_class);
                            self.jni.delete_local(big);
                            words
                        }
                        _ => None,
                    },
                ),
            _ => None,
        };
        if let Some(words) = words.filter(|&w| w > BIG_WORDS) {
            let _ = write!(out, "{}({} bits)", java_name(internal), words * 32);
            return;
        }
        self.to_string_into(object, cap, out);
    }

    /// The length of a BigInteger's magnitude in 32-bit words.
    fn big_integer_words(&self, object: sys::jobject, class: sys::jclass) -> Option<usize> {
        let id = self.jni.field_id(class, c"mag", c"[I")?;
        match self.jni.field_value(object, id, "[I") {
            Value::Object(mag) if !mag.is_null() => {
                let words = self.jni.array_length(mag);
                self.jni.delete_local(mag);
                Some(words)
            }
            _ => None,
        }
    }

    /// The collection or map a `java.util.Collections` wrapper wraps (a local reference).
    fn unwrap_wrapper(
        &self,
        object: sys::jobject,
        class: sys::jclass,
        internal: &str,
    ) -> Option<sys::jobject> {
        if !JDK_WRAPPERS.iter().any(|w| internal.starts_with(w)) {
            return None;
        }
        let (name, signature) = if self.jni.is_instance_of(object, self.known.map) {
            (c"m", c"Ljava/util/Map;")
        } else {
            (c"c", c"Ljava/util/Collection;")
        };
        let id = self.jni.field_id(class, name, signature)?;
        match self
            .jni
            .field_value(object, id, signature.to_str().unwrap_or_default())
        {
            Value::Object(inner) if !inner.is_null() => Some(inner),
            _ => None,
        }
    }

    /// `int[12]{0, 1, 4, ...}`, `java.lang.Object[3]{"a", 1, null}`.
    fn array(&self, object: sys::jobject, element: &str, cap: usize, depth: u32, out: &mut String) {
        let len = self.jni.array_length(object);
        let _ = write!(out, "{}[{len}]", java_name(element));
        if depth >= DEPTH {
            return;
        }
        out.push('{');
        let code = element.as_bytes().first().copied().unwrap_or(b'L');
        if matches!(code, b'L' | b'[') {
            for i in 0..len.min(ELEMENTS) {
                if i > 0 {
                    out.push_str(", ");
                }
                let item = self.jni.object_element(object, i);
                self.describe(item, cap, depth + 1, out);
                self.jni.delete_local(item);
                if out.len() > cap {
                    break;
                }
            }
        } else {
            for (i, value) in self
                .jni
                .primitive_elements(object, code, ELEMENTS)
                .into_iter()
                .enumerate()
            {
                if i > 0 {
                    out.push_str(", ");
                }
                push_value(value, out);
            }
        }
        if len > ELEMENTS {
            out.push_str(", ...");
        }
        out.push('}');
    }

    /// `[a, b, ... (100 elements)]`, `{k=v, ...}`: the first elements, by iterating.
    fn collection(
        &self,
        object: sys::jobject,
        map: bool,
        cap: usize,
        depth: u32,
        out: &mut String,
    ) {
        let known = self.known;
        let items = if map {
            self.jni.call_object(object, known.entry_set)
        } else {
            object
        };
        if items.is_null() {
            out.push_str("<unavailable>");
            return;
        }
        let size = self.jni.call_int(items, known.size).unwrap_or(0).max(0) as usize;
        let iterator = self.jni.call_object(items, known.iterator);
        out.push(if map { '{' } else { '[' });
        let mut shown = 0;
        while !iterator.is_null()
            && shown < ELEMENTS
            && out.len() <= cap
            && self.jni.call_bool(iterator, known.has_next)
        {
            let item = self.jni.call_object(iterator, known.next);
            if shown > 0 {
                out.push_str(", ");
            }
            if map && !item.is_null() {
                let key = self.jni.call_object(item, known.get_key);
                self.describe(key, cap, depth + 1, out);
                self.jni.delete_local(key);
                out.push('=');
                let value = self.jni.call_object(item, known.get_value);
                self.describe(value, cap, depth + 1, out);
                self.jni.delete_local(value);
            } else {
                self.describe(item, cap, depth + 1, out);
            }
            self.jni.delete_local(item);
            shown += 1;
        }
        self.jni.delete_local(iterator);
        if map {
            self.jni.delete_local(items);
        }
        if size > shown {
            let _ = write!(
                out,
                "{}... ({size} elements)",
                if shown > 0 { ", " } else { "" }
            );
        }
        out.push(if map { '}' } else { ']' });
    }

    /// A collection or map without iterating it: `ClassName@hash`, with `{size=N}` when its
    /// class (the JDK's own, mostly) keeps the size in an `int size` field.
    fn sized(&self, object: sys::jobject, class: sys::jclass, signature: &str, out: &mut String) {
        out.push_str(&java_name(signature));
        if let Some(hash) = self.jni.identity_hash(&self.env, object) {
            let _ = write!(out, "@{hash:x}");
        }
        if let Some(id) = self.jni.field_id(class, c"size", c"I") {
            if let Value::Int(size) = self.jni.field_value(object, id, "I") {
                let _ = write!(out, "{{size={size}}}");
            }
        }
    }

    /// `ClassName@hash{field=value, ...}`: the identity hash and the first fields (of the
    /// class, then of its superclasses outside the JDK) holding primitives, strings, boxed
    /// values or enums.
    fn object(
        &self,
        object: sys::jobject,
        class: sys::jclass,
        signature: &str,
        cap: usize,
        out: &mut String,
    ) {
        out.push_str(&java_name(signature));
        if let Some(hash) = self.jni.identity_hash(&self.env, object) {
            let _ = write!(out, "@{hash:x}");
        }
        let mut shown = 0;
        let mut more = false;
        let mut current = class;
        while !current.is_null() && !more {
            let name = self
                .jni
                .class_signature(&self.env, current)
                .unwrap_or_default();
            if is_jdk_class(&name) {
                break;
            }
            for field in self.jni.instance_fields(&self.env, current, FIELDS_SCANNED) {
                let Some(text) = self.field_text(object, field.id, &field.signature) else {
                    continue;
                };
                if shown == FIELDS || out.len() > cap {
                    more = true;
                    break;
                }
                out.push_str(if shown == 0 { "{" } else { ", " });
                let _ = write!(out, "{}={text}", field.name);
                shown += 1;
            }
            let parent = self.jni.superclass(current);
            if current != class {
                self.jni.delete_local(current);
            }
            current = parent;
        }
        if current != class {
            self.jni.delete_local(current);
        }
        if more {
            out.push_str(", ...");
        }
        if shown > 0 {
            out.push('}');
        }
    }

    /// A field's value as text, when it holds a primitive, a string, a boxed value, an enum
    /// or null (of a field declared with one of those types).
    fn field_text(
        &self,
        object: sys::jobject,
        id: sys::jfieldID,
        signature: &str,
    ) -> Option<String> {
        let mut text = String::new();
        match self.jni.field_value(object, id, signature) {
            Value::Object(value) if value.is_null() => {
                if !is_value_type(signature) {
                    return None;
                }
                text.push_str("null");
            }
            Value::Object(value) => {
                let class = self.jni.object_class(value);
                let runtime = self
                    .jni
                    .class_signature(&self.env, class)
                    .unwrap_or_default();
                let shown = is_value_type(&runtime)
                    || self.jni.is_instance_of(value, self.known.enum_class);
                if shown {
                    self.describe_as(value, class, &runtime, FIELD_CAP, DEPTH, &mut text);
                }
                self.jni.delete_local(class);
                self.jni.delete_local(value);
                if !shown {
                    return None;
                }
            }
            primitive => push_value(primitive, &mut text),
        }
        Some(cut(text, FIELD_CAP))
    }
}

/// Whether a class (by signature) belongs to the JDK: its fields are not shown.
fn is_jdk_class(signature: &str) -> bool {
    ["Ljava/", "Ljavax/", "Ljdk/", "Lsun/", "Lcom/sun/"]
        .iter()
        .any(|p| signature.starts_with(p))
}

/// Whether a field of this type (signature) is shown inside an application object.
fn is_value_type(signature: &str) -> bool {
    matches!(
        signature,
        "Ljava/lang/String;"
            | "Ljava/lang/Integer;"
            | "Ljava/lang/Long;"
            | "Ljava/lang/Boolean;"
            | "Ljava/lang/Character;"
            | "Ljava/lang/Double;"
            | "Ljava/lang/Float;"
            | "Ljava/lang/Short;"
            | "Ljava/lang/Byte;"
    )
}

/// Whether a class (internal name) is one of the JDK collections iterated by default.
fn is_jdk_collection(internal: &str) -> bool {
    JDK_COLLECTIONS.iter().any(|c| {
        internal
            .strip_prefix(c)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('$'))
    }) || JDK_COLLECTION_PREFIXES
        .iter()
        .any(|p| internal.starts_with(p))
}

/// A primitive as Java prints it (`char` quoted).
fn push_value(value: Value, out: &mut String) {
    let float = |v: f64, out: &mut String| {
        if v.is_nan() {
            out.push_str("NaN");
        } else if v.is_infinite() {
            out.push_str(if v > 0.0 { "Infinity" } else { "-Infinity" });
        } else {
            let _ = write!(out, "{v:?}");
        }
    };
    let _ = match value {
        Value::Boolean(v) => write!(out, "{v}"),
        Value::Byte(v) => write!(out, "{v}"),
        Value::Short(v) => write!(out, "{v}"),
        Value::Int(v) => write!(out, "{v}"),
        Value::Long(v) => write!(out, "{v}"),
        Value::Float(v) => {
            float(v as f64, out);
            Ok(())
        }
        Value::Double(v) => {
            float(v, out);
            Ok(())
        }
        Value::Char(v) => {
            out.push('\'');
            escape_into(&String::from_utf16_lossy(&[v]), false, out);
            out.push('\'');
            Ok(())
        }
        Value::Object(_) => write!(out, "?"),
    };
}

/// `text` in double quotes, escaped, at most `cap` characters in all (cut with `..."`).
fn quoted(text: &str, cap: usize, out: &mut String) {
    let mut body = String::new();
    escape_into(text, true, &mut body);
    out.push('"');
    if body.chars().count() + 2 <= cap {
        out.push_str(&body);
    } else {
        // Cut between escapes, leaving room for `..."`.
        let room = cap.saturating_sub(5);
        let mut kept = String::new();
        for c in text.chars() {
            let mut unit = String::new();
            escape_into(&c.to_string(), true, &mut unit);
            if kept.chars().count() + unit.chars().count() > room {
                break;
            }
            kept.push_str(&unit);
        }
        out.push_str(&kept);
        out.push_str("...");
    }
    out.push('"');
}

/// Appends `text` with control characters escaped (`\n`, `\t`, `\r`, else `\uXXXX`; line and
/// paragraph separators too), and in a quoted string also `"` and `\`.
pub fn escape_into(text: &str, in_quotes: bool, out: &mut String) {
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '"' | '\\' if in_quotes => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() || c == '\u{2028}' || c == '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
}

/// `text` cut to `cap` characters, with `...` when cut.
/// `this=<this> args=[<arg>, ...]` (without `this=` when there is none), `arg(i)` giving the
/// `i`th of `count` arguments, at most [`ARGS_CAP`] characters.
fn call_text(this: Option<&str>, count: usize, mut arg: impl FnMut(usize) -> String) -> String {
    let mut out = String::new();
    if let Some(this) = this {
        out.push_str("this=");
        out.push_str(this);
        out.push(' ');
    }
    out.push_str("args=[");
    for i in 0..count {
        if i > 0 {
            out.push_str(", ");
        }
        if out.chars().count() > ARGS_CAP {
            out.push_str("...");
            break;
        }
        out.push_str(&arg(i));
    }
    out.push(']');
    cut(out, ARGS_CAP)
}

fn cut(text: String, cap: usize) -> String {
    match text.char_indices().nth(cap) {
        Some((end, _)) => format!("{}...", &text[..end]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_quotes_in_strings() {
        let mut out = String::new();
        escape_into("a\tb\nc\r\u{1}\u{7f}\u{2028}\"\\", true, &mut out);
        assert_eq!(out, r#"a\tb\nc\r\u0001\u007f\u2028\"\\"#);
    }

    #[test]
    fn long_strings_are_cut_inside_their_quotes() {
        let mut out = String::new();
        quoted(&"a".repeat(1000), 20, &mut out);
        assert_eq!(out, format!("\"{}...\"", "a".repeat(15)));
        assert_eq!(out.chars().count(), 20);
        let mut out = String::new();
        quoted(&"\n".repeat(100), 12, &mut out);
        assert_eq!(out, format!("\"{}...\"", "\\n".repeat(3)));
        let mut short = String::new();
        quoted("hi", 20, &mut short);
        assert_eq!(short, "\"hi\"");
    }

    #[test]
    fn only_the_jdks_own_collections_are_iterated() {
        for name in [
            "java/util/ArrayList",
            "java/util/ArrayList$SubList",
            "java/util/HashMap$KeySet",
            "java/util/Arrays$ArrayList",
            "java/util/ImmutableCollections$ListN",
            "java/util/Collections$EmptyList",
            "java/util/Collections$SingletonMap",
        ] {
            assert!(is_jdk_collection(name), "{name}");
        }
        for name in [
            "com/acme/MyList",
            "java/util/ArrayListX",
            "java/util/Vector",
            "java/util/Hashtable",
            "java/util/concurrent/LinkedBlockingQueue",
            "java/util/Collections$SetFromMap",
        ] {
            assert!(!is_jdk_collection(name), "{name}");
        }
    }

    #[test]
    fn arguments_are_named_with_or_without_this() {
        let args = |i: usize| ["1", "\"a\""][i].to_string();
        assert_eq!(call_text(None, 2, args), "args=[1, \"a\"]");
        assert_eq!(
            call_text(Some("Foo@1"), 2, args),
            "this=Foo@1 args=[1, \"a\"]"
        );
        assert_eq!(call_text(None, 0, args), "args=[]");
        let long = call_text(None, 100, |_| "x".repeat(VALUE_CAP));
        assert!(long.starts_with("args=[x") && long.chars().count() <= ARGS_CAP + 3);
    }

    #[test]
    fn primitives_print_as_java_does() {
        let text = |v| {
            let mut out = String::new();
            push_value(v, &mut out);
            out
        };
        assert_eq!(text(Value::Double(0.5)), "0.5");
        assert_eq!(text(Value::Double(1.0)), "1.0");
        assert_eq!(text(Value::Float(f32::INFINITY)), "Infinity");
        assert_eq!(text(Value::Char(b'\n' as u16)), "'\\n'");
        assert_eq!(text(Value::Long(-3)), "-3");
    }
}
