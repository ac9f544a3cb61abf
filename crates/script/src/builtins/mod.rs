//! The `BTraceUtils` functions scripts call (by their unqualified names, as the static
//! import and the nested classes `Strings`, `Threads`, `Time`, `Collections`, `Atomic`,
//! `Aggregations`, `Profiling`, `Sys` give them), run in the client on values the probes
//! captured.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::firing::Fired;
use crate::value::Value;

mod aggregations;
mod collections;
mod facts;
mod jfr;
mod jvm;
mod memory;
mod numbers;
mod refused;
mod speculation;
#[cfg(test)]
mod tests;
mod text;
mod threads;

use aggregations::{aggregations, profiling};
use collections::{atomics, deques, maps};
pub use facts::{Counter, Facts, Heap};
use jfr::jfr;
pub use jfr::{new_event, Committed, JfrEvent};
use jvm::{jvm, vm};
use memory::memory;
pub use memory::pool_usage;
use numbers::numbers;
pub use refused::refusal;
use speculation::speculation;
pub use speculation::Speculations;
use text::{output, strings};
use threads::{reflection, threads_and_time};

/// Every function [`call`] runs.
const NAMES: &[&str] = &[
    // Output.
    "print",
    "println",
    "printArray",
    "printNumberMap",
    "printMap",
    "printAggregation",
    // Strings.
    "str",
    "strcat",
    "strlen",
    "length",
    "substr",
    "indexOf",
    "lastIndexOf",
    "startsWith",
    "endsWith",
    "matches",
    "toUpperCase",
    "toLowerCase",
    "compareTo",
    "concat",
    // Stacks, threads, time.
    "jstack",
    "jstackStr",
    "currentThread",
    "name",
    "threadId",
    "timeMillis",
    "timeNanos",
    "timestamp",
    // Numbers.
    "parseInt",
    "parseLong",
    "box",
    "unbox",
    // Maps and atomics.
    "newHashMap",
    "newWeakMap",
    "put",
    "get",
    "containsKey",
    "remove",
    "size",
    "isEmpty",
    "clear",
    "newAtomicInteger",
    "newAtomicLong",
    "incrementAndGet",
    "decrementAndGet",
    "getAndIncrement",
    "getAndDecrement",
    "addAndGet",
    "getAndAdd",
    "set",
    // Aggregations.
    "newAggregation",
    "newAggregationKey",
    "addToAggregation",
    "clearAggregation",
    // `Profiling`.
    "newProfiler",
    "recordEntry",
    "recordExit",
    "snapshot",
    "snapshotAndReset",
    "reset",
    "printSnapshot",
    // The session.
    "exit",
    // The JVM (`Sys.Env`, `Sys.VM`, `Sys.Memory`): facts the client reads without running
    // code in it.
    "property",
    "getenv",
    "vmUptime",
    "vmStartTime",
    "availableProcessors",
    "usedMemory",
    "totalMemory",
    "freeMemory",
    "maxMemory",
    "heapUsage",
    "gc",
    "dumpHeap",
    "getpid",
    "jstackAll",
    "deadlocks",
    // Objects as the agent described them.
    "printFields",
    "field",
    "classOf",
    "getInt",
    "getLong",
    "getShort",
    "getByte",
    "getChar",
    "getBoolean",
    "getFloat",
    "getDouble",
    // Run by the machine, which knows what the probe measured.
    "sizeof",
    // Strings and output (issue #34).
    "printNumber",
    "printStringMap",
    "strcmp",
    "stricmp",
    "compareToIgnoreCase",
    "strstr",
    "toHexString",
    "regexp",
    "pattern",
    "newStringBuilder",
    "append",
    "identityHashCode",
    "identityStr",
    "compare",
    // Numbers.
    "parseShort",
    "parseByte",
    "parseFloat",
    "parseDouble",
    "parseBoolean",
    "exp",
    "log",
    "log10",
    "isNaN",
    "isInfinite",
    "random",
    // Deques, maps and atomics.
    "newDeque",
    "push",
    "addLast",
    "poll",
    "peek",
    "peekFirst",
    "peekLast",
    "removeFirst",
    "removeLast",
    "contains",
    "toArray",
    "containsValue",
    "putAll",
    "copy",
    "getAndSet",
    "compareAndSet",
    "weakCompareAndSet",
    "lazySet",
    // Threads, time, the probe, classes by name, references.
    "millis",
    "nanos",
    "probeClass",
    "probeMethod",
    "probeLine",
    "classForName",
    "isArray",
    "isPrimitive",
    "getComponentType",
    "weakRef",
    "softRef",
    "deref",
    "getInstrumentationLevel",
    "setInstrumentationLevel",
    "dtraceProbe",
    "probe",
    // Aggregations, stacks.
    "truncateAggregation",
    "jstackAllStr",
    // Sys.VM, Sys.Env, Counters.
    "vmVersion",
    "classPath",
    "libraryPath",
    "isBootClassPathSupported",
    "vmArguments",
    "printVmArguments",
    "threadCount",
    "peakThreadCount",
    "daemonThreadCount",
    "totalStartedThreadCount",
    "perfLong",
    "perfInt",
    "perfString",
    "properties",
    "printProperties",
    "printEnv",
    "processCPUTime",
    "systemLoadAverage",
    // Sys.Memory.
    "nonHeapUsage",
    "getMemoryPoolUsage",
    "init",
    "used",
    "committed",
    "max",
    "getTotalGcTime",
    // `Jfr` (`commit` too).
    "prepareEvent",
    "setEventField",
    "shouldCommit",
    "begin",
    "end",
    // Speculation.
    "speculation",
    "speculate",
    "commit",
    "discard",
    // One-liners' projection (`jtap trace --print`).
    "__print",
    "$",
    "$length",
];

/// Whether `name` is a function [`call`] runs.
pub fn exists(name: &str) -> bool {
    NAMES.contains(&name)
}

/// What functions see of the running script.
pub struct Context<'a> {
    /// The probe being handled, if any.
    pub probe: Option<&'a Fired>,
    /// Text printed so far.
    pub out: &'a mut String,
    /// `exit(code)` was called.
    pub exit: &'a mut Option<i32>,
    /// The script's arguments (`$(n)`).
    pub args: &'a [String],
    /// `setInstrumentationLevel`'s level.
    pub level: &'a mut i64,
    /// The speculative buffers.
    pub speculations: &'a mut Speculations,
    /// The JVM's facts, when the script runs against one.
    pub facts: Option<&'a dyn Facts>,
    /// The script's JFR event types.
    pub events: &'a [crate::ast::EventType],
    /// The session's recording of JFR events, when it has one (else they are printed).
    pub committed: Option<&'a mut Vec<Committed>>,
}

/// Runs a function.
pub fn call(name: &str, args: Vec<Value>, cx: &mut Context) -> Result<Value, String> {
    let c = Call { name, args };
    for family in FAMILIES {
        if let Some(value) = family(&c, cx)? {
            return Ok(value);
        }
    }
    Err(format!("{name} does not take {} arguments", c.args.len()))
}

/// A function's name and arguments.
struct Call<'n> {
    name: &'n str,
    args: Vec<Value>,
}

impl Call<'_> {
    /// Argument `i` (null when missing).
    fn arg(&self, i: usize) -> Value {
        self.args.get(i).cloned().unwrap_or(Value::Null)
    }

    /// Argument `i` as a number, or an error naming the function.
    fn int(&self, i: usize) -> Result<i64, String> {
        self.arg(i)
            .as_int()
            .ok_or_else(|| format!("{}: argument {} is not a number", self.name, i + 1))
    }

    /// Argument `i` as text.
    fn text(&self, i: usize) -> String {
        self.arg(i).to_string()
    }
}

/// The functions of one family: a call's value, or none when the family has no function of
/// that name taking that many arguments.
type Family = fn(&Call, &mut Context) -> Result<Option<Value>, String>;

/// The families in the order they are asked (`get` is a field's before a map's before an
/// atomic's).
const FAMILIES: [Family; 16] = [
    output,
    profiling,
    strings,
    threads_and_time,
    numbers,
    reflection,
    deques,
    maps,
    atomics,
    aggregations,
    jvm,
    vm,
    memory,
    jfr,
    speculation,
    session,
];

/// The session: `exit`, the script's arguments (`$(n)`, `$(name)`, `$length`), its instrumentation
/// level, DTrace's no-op probes.
fn session(c: &Call, cx: &mut Context) -> Result<Option<Value>, String> {
    Ok(Some(match (c.name, c.args.len()) {
        ("exit", 0 | 1) => {
            *cx.exit = Some(if c.args.is_empty() {
                0
            } else {
                c.int(0)? as i32
            });
            Value::Null
        }
        // `Sys.$("name")`: the value of `name=value` (BTrace's `ArgsMap.get(key)`).
        ("$", 1) if matches!(c.arg(0), Value::Str(_)) => crate::Arguments::new(cx.args)
            .get(&c.text(0))
            .map_or(Value::Null, Value::str),
        ("$", 1) => cx
            .args
            .get(c.int(0)?.max(0) as usize)
            .map_or(Value::Null, |a| Value::str(a)),
        ("$length", 0) => Value::Int(cx.args.len() as i64),
        ("getInstrumentationLevel", 0) => Value::Int(*cx.level),
        ("setInstrumentationLevel", 1) => {
            let level = c.int(0)?;
            if level >= 0 {
                *cx.level = level;
            }
            Value::Null
        }
        // DTrace probes: a no-op, as in BTrace where there is no DTrace.
        ("dtraceProbe" | "probe", 2..=4) => Value::Int(0),
        _ => return Ok(None),
    }))
}

pub(super) fn facts<'a>(cx: &Context<'a>, name: &str) -> Result<&'a dyn Facts, String> {
    cx.facts
        .ok_or_else(|| format!("{name}: no JVM to ask (the script runs without one)"))
}

pub(super) fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}
