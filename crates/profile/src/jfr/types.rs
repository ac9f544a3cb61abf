//! The types a jtap recording declares in its metadata, in one table: the JDK's own event and
//! constant-pool types (with the subset of their fields jtap fills), the annotations that tell
//! readers what a value is (a time, a duration, bytes), and async-profiler's wall-clock and
//! native memory events.
//! Readers that follow the metadata a file carries would take a subset of a JDK type's
//! fields, but some read by position (async-profiler's `jfrconv`): every type has the JDK's
//! leading fields in the JDK's order, unused ones written as null or zero.

/// Type ids: small numbers, so every reference is a one-byte varint. 0 and 1 are the
/// metadata and checkpoint records.
pub mod id {
    /// `long`.
    pub const LONG: u64 = 2;
    /// `int`.
    pub const INT: u64 = 3;
    /// `boolean`.
    pub const BOOLEAN: u64 = 4;
    /// `java.lang.String`.
    pub const STRING: u64 = 5;
    /// `java.lang.Thread`.
    pub const THREAD: u64 = 6;
    /// `java.lang.Class`.
    pub const CLASS: u64 = 7;
    /// `jdk.types.Symbol`.
    pub const SYMBOL: u64 = 8;
    /// `jdk.types.Package`.
    pub const PACKAGE: u64 = 9;
    /// `jdk.types.Method`.
    pub const METHOD: u64 = 10;
    /// `jdk.types.StackTrace`.
    pub const STACK_TRACE: u64 = 11;
    /// `jdk.types.StackFrame` (inline in stack traces, no pool).
    pub const STACK_FRAME: u64 = 12;
    /// `jdk.types.FrameType`.
    pub const FRAME_TYPE: u64 = 13;
    /// `jdk.types.ThreadState`.
    pub const THREAD_STATE: u64 = 14;
    /// `jdk.ExecutionSample`.
    pub const EXECUTION_SAMPLE: u64 = 20;
    /// `profiler.WallClockSample` (async-profiler's name for wall-clock samples).
    pub const WALL_CLOCK_SAMPLE: u64 = 21;
    /// `jdk.ObjectAllocationSample`.
    pub const ALLOCATION_SAMPLE: u64 = 22;
    /// `jdk.JavaMonitorEnter`.
    pub const MONITOR_ENTER: u64 = 23;
    /// `jdk.ThreadPark`.
    pub const THREAD_PARK: u64 = 24;
    /// `jdk.ActiveSetting`.
    pub const ACTIVE_SETTING: u64 = 25;
    /// `jdk.MethodTrace` (a traced call, as JDK 25's method tracing records it).
    pub const METHOD_TRACE: u64 = 26;
    /// `profiler.Malloc` (async-profiler's native memory allocation event).
    pub const MALLOC: u64 = 27;
    /// `jdk.types.ClassLoader`.
    pub const CLASS_LOADER: u64 = 15;
    /// `short`.
    pub const SHORT: u64 = 16;
    /// `jdk.OldObjectSample`.
    pub const OLD_OBJECT_SAMPLE: u64 = 28;
    /// `jdk.types.OldObject`.
    pub const OLD_OBJECT: u64 = 30;
    /// `jdk.types.Reference`: how an old object is referred to, and by what.
    pub const REFERENCE: u64 = 31;
    /// `jdk.types.OldObjectArray`.
    pub const OLD_OBJECT_ARRAY: u64 = 32;
    /// `jdk.types.OldObjectField`.
    pub const OLD_OBJECT_FIELD: u64 = 33;
    /// `jdk.types.OldObjectGcRoot`.
    pub const OLD_OBJECT_GC_ROOT: u64 = 34;
    /// `jdk.jfr.Label`.
    pub const LABEL: u64 = 40;
    /// `jdk.jfr.Timestamp`.
    pub const TIMESTAMP: u64 = 41;
    /// `jdk.jfr.Timespan`.
    pub const TIMESPAN: u64 = 42;
    /// `jdk.jfr.DataAmount`.
    pub const DATA_AMOUNT: u64 = 43;
    /// `jdk.jfr.Category`.
    pub const CATEGORY: u64 = 44;
}

/// One declared type.
pub struct Type {
    /// Its id.
    pub id: u64,
    /// Its Java name.
    pub name: &'static str,
    /// `jdk.jfr.Event` for events, `java.lang.annotation.Annotation` for annotations.
    pub super_type: Option<&'static str>,
    /// Its label (`@Label`) and, for events, its category path.
    pub label: Option<&'static str>,
    /// Event categories (`@Category`), outermost first.
    pub category: &'static [&'static str],
    /// A type of one field that readers take as that field's value (`simpleType`).
    pub simple: bool,
    /// Its fields, in the order values are written.
    pub fields: &'static [Field],
}

/// One field of a [`Type`].
pub struct Field {
    /// Its name.
    pub name: &'static str,
    /// Its type's id.
    pub type_id: u64,
    /// Written as a reference into the type's constant pool.
    pub pooled: bool,
    /// An array of the type.
    pub array: bool,
    /// Its label.
    pub label: &'static str,
    /// What the value is: a tick count since the epoch, a tick count, bytes.
    pub unit: Unit,
}

/// What a field's number stands for (an annotation on the field).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Nothing said.
    None,
    /// `@Timestamp("TICKS")`.
    Timestamp,
    /// `@Timespan("TICKS")`.
    Timespan,
    /// `@DataAmount("BYTES")`.
    Bytes,
}

const fn field(name: &'static str, type_id: u64, label: &'static str) -> Field {
    Field {
        name,
        type_id,
        pooled: false,
        array: false,
        label,
        unit: Unit::None,
    }
}

const fn pooled(name: &'static str, type_id: u64, label: &'static str) -> Field {
    Field {
        pooled: true,
        ..field(name, type_id, label)
    }
}

const fn with_unit(field: Field, unit: Unit) -> Field {
    Field { unit, ..field }
}

const START_TIME: Field = with_unit(field("startTime", id::LONG, "Start Time"), Unit::Timestamp);
const DURATION: Field = with_unit(field("duration", id::LONG, "Duration"), Unit::Timespan);
const EVENT_THREAD: Field = pooled("eventThread", id::THREAD, "Event Thread");
const STACK_TRACE: Field = pooled("stackTrace", id::STACK_TRACE, "Stack Trace");

const fn plain(id: u64, name: &'static str, fields: &'static [Field]) -> Type {
    Type {
        id,
        name,
        super_type: None,
        label: None,
        category: &[],
        simple: false,
        fields,
    }
}

const fn simple(id: u64, name: &'static str, fields: &'static [Field]) -> Type {
    Type {
        simple: true,
        ..plain(id, name, fields)
    }
}

const fn annotation(id: u64, name: &'static str, fields: &'static [Field]) -> Type {
    Type {
        super_type: Some("java.lang.annotation.Annotation"),
        ..plain(id, name, fields)
    }
}

const fn event(
    id: u64,
    name: &'static str,
    label: &'static str,
    category: &'static [&'static str],
    fields: &'static [Field],
) -> Type {
    Type {
        id,
        name,
        super_type: Some("jdk.jfr.Event"),
        label: Some(label),
        category,
        simple: false,
        fields,
    }
}

const VALUE: &[Field] = &[field("value", id::STRING, "")];
const PROFILING: &[&str] = &["Java Virtual Machine", "Profiling"];
const LOCKING: &[&str] = &["Java Application"];

/// Every type of a jtap recording.
pub const TYPES: &[Type] = &[
    plain(id::LONG, "long", &[]),
    plain(id::INT, "int", &[]),
    plain(id::BOOLEAN, "boolean", &[]),
    plain(id::STRING, "java.lang.String", &[]),
    plain(id::SHORT, "short", &[]),
    annotation(id::LABEL, "jdk.jfr.Label", VALUE),
    annotation(id::TIMESTAMP, "jdk.jfr.Timestamp", VALUE),
    annotation(id::TIMESPAN, "jdk.jfr.Timespan", VALUE),
    annotation(id::DATA_AMOUNT, "jdk.jfr.DataAmount", VALUE),
    annotation(
        id::CATEGORY,
        "jdk.jfr.Category",
        &[Field {
            array: true,
            ..field("value", id::STRING, "")
        }],
    ),
    plain(
        id::THREAD,
        "java.lang.Thread",
        &[
            field("osName", id::STRING, "OS Thread Name"),
            field("osThreadId", id::LONG, "OS Thread Id"),
            field("javaName", id::STRING, "Java Thread Name"),
            field("javaThreadId", id::LONG, "Java Thread Id"),
            field("virtual", id::BOOLEAN, "Virtual Thread"),
        ],
    ),
    plain(
        id::CLASS,
        "java.lang.Class",
        &[
            pooled("classLoader", id::CLASS_LOADER, "Class Loader"),
            pooled("name", id::SYMBOL, "Name"),
            pooled("package", id::PACKAGE, "Package"),
            field("modifiers", id::INT, "Access Modifiers"),
            field("hidden", id::BOOLEAN, "Hidden"),
        ],
    ),
    plain(
        id::CLASS_LOADER,
        "jdk.types.ClassLoader",
        &[
            pooled("type", id::CLASS, "Type"),
            pooled("name", id::SYMBOL, "Name"),
        ],
    ),
    simple(
        id::SYMBOL,
        "jdk.types.Symbol",
        &[field("string", id::STRING, "String")],
    ),
    plain(
        id::PACKAGE,
        "jdk.types.Package",
        &[pooled("name", id::SYMBOL, "Name")],
    ),
    plain(
        id::METHOD,
        "jdk.types.Method",
        &[
            pooled("type", id::CLASS, "Type"),
            pooled("name", id::SYMBOL, "Name"),
            pooled("descriptor", id::SYMBOL, "Descriptor"),
            field("modifiers", id::INT, "Access Modifiers"),
            field("hidden", id::BOOLEAN, "Hidden"),
        ],
    ),
    plain(
        id::STACK_TRACE,
        "jdk.types.StackTrace",
        &[
            field("truncated", id::BOOLEAN, "Truncated"),
            Field {
                array: true,
                ..field("frames", id::STACK_FRAME, "Stack Frames")
            },
        ],
    ),
    plain(
        id::STACK_FRAME,
        "jdk.types.StackFrame",
        &[
            pooled("method", id::METHOD, "Java Method"),
            field("lineNumber", id::INT, "Line Number"),
            field("bytecodeIndex", id::INT, "Bytecode Index"),
            pooled("type", id::FRAME_TYPE, "Frame Type"),
        ],
    ),
    simple(
        id::FRAME_TYPE,
        "jdk.types.FrameType",
        &[field("description", id::STRING, "Description")],
    ),
    simple(
        id::THREAD_STATE,
        "jdk.types.ThreadState",
        &[field("name", id::STRING, "Name")],
    ),
    event(
        id::EXECUTION_SAMPLE,
        "jdk.ExecutionSample",
        "Method Profiling Sample",
        PROFILING,
        &[
            START_TIME,
            pooled("sampledThread", id::THREAD, "Thread"),
            STACK_TRACE,
            pooled("state", id::THREAD_STATE, "Thread State"),
        ],
    ),
    event(
        id::WALL_CLOCK_SAMPLE,
        "profiler.WallClockSample",
        "Wall Clock Sample",
        PROFILING,
        &[
            START_TIME,
            pooled("sampledThread", id::THREAD, "Thread"),
            STACK_TRACE,
            pooled("state", id::THREAD_STATE, "Thread State"),
            field("samples", id::INT, "Samples"),
        ],
    ),
    event(
        id::ALLOCATION_SAMPLE,
        "jdk.ObjectAllocationSample",
        "Object Allocation Sample",
        &["Java Application"],
        &[
            START_TIME,
            EVENT_THREAD,
            STACK_TRACE,
            pooled("objectClass", id::CLASS, "Object Class"),
            with_unit(field("weight", id::LONG, "Sample Weight"), Unit::Bytes),
        ],
    ),
    event(
        id::MONITOR_ENTER,
        "jdk.JavaMonitorEnter",
        "Java Monitor Blocked",
        LOCKING,
        &[
            START_TIME,
            DURATION,
            EVENT_THREAD,
            STACK_TRACE,
            pooled("monitorClass", id::CLASS, "Monitor Class"),
            pooled("previousOwner", id::THREAD, "Previous Monitor Owner"),
            field("address", id::LONG, "Monitor Address"),
        ],
    ),
    event(
        id::THREAD_PARK,
        "jdk.ThreadPark",
        "Java Thread Park",
        LOCKING,
        &[
            START_TIME,
            DURATION,
            EVENT_THREAD,
            STACK_TRACE,
            pooled("parkedClass", id::CLASS, "Class Parked On"),
            with_unit(field("timeout", id::LONG, "Park Timeout"), Unit::Timespan),
            with_unit(field("until", id::LONG, "Park Until"), Unit::Timestamp),
            field("address", id::LONG, "Address of Object Parked"),
        ],
    ),
    event(
        id::MALLOC,
        "profiler.Malloc",
        "malloc",
        &["Java Virtual Machine", "Native Memory"],
        &[
            START_TIME,
            EVENT_THREAD,
            STACK_TRACE,
            field("address", id::LONG, "Address"),
            with_unit(field("size", id::LONG, "Size"), Unit::Bytes),
        ],
    ),
    event(
        id::METHOD_TRACE,
        "jdk.MethodTrace",
        "Method Trace",
        &["Java Virtual Machine", "Method Tracing"],
        &[
            START_TIME,
            DURATION,
            EVENT_THREAD,
            STACK_TRACE,
            pooled("method", id::METHOD, "Method"),
        ],
    ),
    plain(
        id::OLD_OBJECT,
        "jdk.types.OldObject",
        &[
            field("address", id::LONG, "Memory Address"),
            pooled("type", id::CLASS, "Java Class"),
            field("description", id::STRING, "Object Description"),
            pooled("referrer", id::REFERENCE, "Referrer Object"),
        ],
    ),
    plain(
        id::REFERENCE,
        "jdk.types.Reference",
        &[
            pooled("array", id::OLD_OBJECT_ARRAY, "Array Information"),
            pooled("field", id::OLD_OBJECT_FIELD, "Field Information"),
            pooled("object", id::OLD_OBJECT, "Object"),
            field("skip", id::INT, "Skip Value"),
        ],
    ),
    plain(
        id::OLD_OBJECT_ARRAY,
        "jdk.types.OldObjectArray",
        &[
            field("size", id::INT, "Array Size"),
            field("index", id::INT, "Index"),
        ],
    ),
    plain(
        id::OLD_OBJECT_FIELD,
        "jdk.types.OldObjectField",
        &[
            field("name", id::STRING, "Field"),
            field("modifiers", id::SHORT, "Field Modifiers"),
        ],
    ),
    plain(
        id::OLD_OBJECT_GC_ROOT,
        "jdk.types.OldObjectGcRoot",
        &[
            field("description", id::STRING, "Root Description"),
            field("system", id::STRING, "System"),
            field("type", id::STRING, "Type"),
        ],
    ),
    event(
        id::OLD_OBJECT_SAMPLE,
        "jdk.OldObjectSample",
        "Old Object Sample",
        PROFILING,
        &[
            START_TIME,
            DURATION,
            EVENT_THREAD,
            STACK_TRACE,
            with_unit(
                field("allocationTime", id::LONG, "Allocation Time"),
                Unit::Timestamp,
            ),
            with_unit(field("objectSize", id::LONG, "Object Size"), Unit::Bytes),
            with_unit(field("objectAge", id::LONG, "Object Age"), Unit::Timespan),
            with_unit(
                field("lastKnownHeapUsage", id::LONG, "Last Known Heap Usage"),
                Unit::Bytes,
            ),
            pooled("object", id::OLD_OBJECT, "Object"),
            field("arrayElements", id::INT, "Array Elements"),
            pooled("root", id::OLD_OBJECT_GC_ROOT, "GC Root"),
        ],
    ),
    event(
        id::ACTIVE_SETTING,
        "jdk.ActiveSetting",
        "Recording Setting",
        &["Flight Recorder"],
        &[
            START_TIME,
            field("id", id::LONG, "Event Id"),
            field("name", id::STRING, "Setting Name"),
            field("value", id::STRING, "Setting Value"),
        ],
    ),
];

#[cfg(test)]
mod tests {
    use super::TYPES;

    /// Readers that read by position (async-profiler's `jfrconv`) take these fields in this
    /// order, as the JDK and async-profiler write them: each type must lead with them.
    #[test]
    fn types_lead_with_the_fields_positional_readers_expect() {
        let expected: &[(&str, &[&str])] = &[
            (
                "java.lang.Thread",
                &["osName", "osThreadId", "javaName", "javaThreadId"],
            ),
            (
                "java.lang.Class",
                &["classLoader", "name", "package", "modifiers"],
            ),
            (
                "jdk.types.Method",
                &["type", "name", "descriptor", "modifiers", "hidden"],
            ),
            ("jdk.types.StackTrace", &["truncated", "frames"]),
            (
                "jdk.types.StackFrame",
                &["method", "lineNumber", "bytecodeIndex", "type"],
            ),
            (
                "jdk.ExecutionSample",
                &["startTime", "sampledThread", "stackTrace", "state"],
            ),
            (
                "profiler.WallClockSample",
                &[
                    "startTime",
                    "sampledThread",
                    "stackTrace",
                    "state",
                    "samples",
                ],
            ),
            (
                "jdk.ObjectAllocationSample",
                &[
                    "startTime",
                    "eventThread",
                    "stackTrace",
                    "objectClass",
                    "weight",
                ],
            ),
            (
                "jdk.JavaMonitorEnter",
                &[
                    "startTime",
                    "duration",
                    "eventThread",
                    "stackTrace",
                    "monitorClass",
                    "previousOwner",
                    "address",
                ],
            ),
            (
                "jdk.ThreadPark",
                &[
                    "startTime",
                    "duration",
                    "eventThread",
                    "stackTrace",
                    "parkedClass",
                    "timeout",
                    "until",
                    "address",
                ],
            ),
            (
                "jdk.MethodTrace",
                &[
                    "startTime",
                    "duration",
                    "eventThread",
                    "stackTrace",
                    "method",
                ],
            ),
            (
                "profiler.Malloc",
                &["startTime", "eventThread", "stackTrace", "address", "size"],
            ),
        ];
        for (name, fields) in expected {
            let declared = TYPES.iter().find(|t| t.name == *name).expect(name);
            let names: Vec<&str> = declared.fields.iter().map(|f| f.name).collect();
            assert!(names.starts_with(fields), "{name}: {names:?}");
        }
    }
}
