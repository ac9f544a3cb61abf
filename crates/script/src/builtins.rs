//! The `BTraceUtils` functions scripts call (by their unqualified names, as the static
//! import and the nested classes `Strings`, `Threads`, `Time`, `Collections`, `Atomic`,
//! `Aggregations`, `Profiling`, `Sys` give them), run in the client on values the probes
//! captured.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::machine::Fired;
use crate::profiler::Profiler;
use crate::value::{self, Aggregation, Tally, Value, MAX_ENTRIES};

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
    // One-liners' projection (`jtap trace --print`).
    "__print",
    "$",
    "$length",
];

/// Whether `name` is a function [`call`] runs.
pub fn exists(name: &str) -> bool {
    NAMES.contains(&name)
}

/// What the client can tell of the JVM for `Sys.*` functions, read without running code in
/// it (system properties over the attach protocol, the environment from `/proc`, the GC's
/// perf counters).
pub trait Facts {
    /// A system property.
    fn property(&self, name: &str) -> Option<String>;
    /// An environment variable of the JVM's process.
    fn getenv(&self, name: &str) -> Option<String>;
    /// When the JVM started, milliseconds since the Unix epoch.
    fn start_time_ms(&self) -> Option<i64>;
    /// Processors the JVM may use.
    fn processors(&self) -> Option<i64>;
    /// The Java heap's sizes.
    fn heap(&self) -> Option<Heap>;
    /// The JVM's process id.
    fn pid(&self) -> i64;
    /// Seconds east of UTC of the local time zone at `epoch_secs`.
    fn utc_offset_seconds(&self, epoch_secs: i64) -> i64;
    /// Runs a diagnostic command in the JVM (`GC.run`, `GC.heap_dump`: operations of the VM,
    /// no application code) and gives its output, or why it failed.
    fn jcmd(&self, command: &[&str]) -> Result<String, String>;
    /// The JVM's thread dump, as `jstack` prints it (the attach protocol's `threaddump`: a
    /// safepoint operation of the VM, no Java code runs).
    fn thread_dump(&self) -> Option<String>;
}

/// The Java heap's sizes in bytes, as `java.lang.management.MemoryUsage` has them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Heap {
    /// What the JVM asked for at start-up (`InitialHeapSize`).
    pub initial: i64,
    /// Used.
    pub used: i64,
    /// Committed.
    pub committed: i64,
    /// The most it may grow to (`MaxHeapSize`).
    pub max: i64,
}

impl Heap {
    /// As `MemoryUsage.toString()` writes it.
    fn describe(&self) -> String {
        let part = |name: &str, v: i64| format!("{name} = {v}({}K)", v >> 10);
        [
            part("init", self.initial),
            part("used", self.used),
            part("committed", self.committed),
            part("max", self.max),
        ]
        .join(" ")
    }
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
    /// The JVM's facts, when the script runs against one.
    pub facts: Option<&'a dyn Facts>,
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
const FAMILIES: [Family; 11] = [
    output,
    profiling,
    strings,
    threads_and_time,
    numbers,
    reflection,
    maps,
    atomics,
    aggregations,
    jvm,
    session,
];

/// Printing: `print`, `println`, `printArray`, `printMap`, `printAggregation`, …
fn output(c: &Call, cx: &mut Context) -> Result<Option<Value>, String> {
    match (c.name, c.args.len()) {
        ("print", 1) => cx.out.push_str(&c.text(0)),
        ("println", 0) => cx.out.push('\n'),
        ("println" | "printArray" | "printFields", 1) => {
            cx.out.push_str(&c.text(0));
            cx.out.push('\n');
        }
        ("printNumberMap" | "printMap", 2) => {
            cx.out.push_str(&c.text(0));
            cx.out.push('\n');
            if let Value::Map(map) = c.arg(1) {
                for (k, v) in map.borrow().iter() {
                    cx.out.push_str(&format!("{k} = {v}\n"));
                }
            }
        }
        ("printAggregation", 2) => {
            cx.out.push_str(&c.text(0));
            cx.out.push('\n');
            if let Value::Aggregation(agg) = c.arg(1) {
                print_aggregation(&agg.borrow(), cx.out);
            }
        }
        ("__print", _) => {
            let values: Vec<String> = c.args.iter().map(Value::to_string).collect();
            cx.out.push_str(&values.join(", "));
            cx.out.push('\n');
        }
        _ => return Ok(None),
    }
    Ok(Some(Value::Null))
}

/// `Profiling`: profilers recording the time of blocks, their snapshots.
fn profiling(c: &Call, cx: &mut Context) -> Result<Option<Value>, String> {
    let name = c.name;
    Ok(Some(match (name, c.args.len()) {
        ("newProfiler", 0 | 1) => Value::Profiler(Rc::default()),
        // The call's start is known when it ends: recordExit does the work.
        ("recordEntry", 2) => profiler(&c.arg(0), name).map(|_| Value::Null)?,
        ("recordExit", 3) => {
            let profiler = profiler(&c.arg(0), name)?;
            let duration = u64::try_from(c.int(2)?).unwrap_or(0);
            let (tid, start) = match cx.probe {
                Some(probe) => (probe.tid, probe.start_ns),
                None => (0, (now_ns() as u64).saturating_sub(duration)),
            };
            if !profiler
                .borrow_mut()
                .record(&c.text(1), tid, start, duration)
            {
                return Err(format!(
                    "recordExit: a profiler holds at most {MAX_ENTRIES} blocks"
                ));
            }
            Value::Null
        }
        ("snapshot", 1) => Value::Profiler(Rc::new(RefCell::new(
            profiler(&c.arg(0), name)?.borrow().clone(),
        ))),
        ("snapshotAndReset", 1) => {
            let profiler = profiler(&c.arg(0), name)?;
            let snapshot = std::mem::take(&mut *profiler.borrow_mut());
            Value::Profiler(Rc::new(RefCell::new(snapshot)))
        }
        ("reset", 1) => {
            profiler(&c.arg(0), name)?.borrow_mut().reset();
            Value::Null
        }
        ("printSnapshot", 2) => {
            let grid = profiler(&c.arg(1), name)?.borrow().grid();
            cx.out.push_str(&c.text(0));
            cx.out.push('\n');
            print_grid(&grid, cx.out);
            Value::Null
        }
        _ => return Ok(None),
    }))
}

/// `Strings`.
fn strings(c: &Call, _: &mut Context) -> Result<Option<Value>, String> {
    let s = Value::str;
    let text = |i: usize| c.text(i);
    Ok(Some(match (c.name, c.args.len()) {
        ("str", 1) => s(&text(0)),
        ("strcat" | "concat", 2) => Value::built(text(0) + &text(1))?,
        ("strlen" | "length", 1) => Value::Int(text(0).chars().count() as i64),
        ("substr", 2 | 3) => {
            let chars: Vec<char> = text(0).chars().collect();
            let start = c.int(1)?.clamp(0, chars.len() as i64) as usize;
            let end = if c.args.len() == 3 {
                c.int(2)?.clamp(start as i64, chars.len() as i64) as usize
            } else {
                chars.len()
            };
            s(&chars[start..end].iter().collect::<String>())
        }
        ("indexOf", 2) => Value::Int(char_index(&text(0), text(0).find(&text(1)))),
        ("lastIndexOf", 2) => Value::Int(char_index(&text(0), text(0).rfind(&text(1)))),
        ("startsWith", 2) => Value::Bool(text(0).starts_with(&text(1))),
        ("endsWith", 2) => Value::Bool(text(0).ends_with(&text(1))),
        ("matches", 2) => {
            // BTrace: matches(regex, string).
            let re = regex::Regex::new(&format!("^(?:{})$", text(0)))
                .map_err(|e| format!("matches: bad regular expression: {e}"))?;
            Value::Bool(re.is_match(&text(1)))
        }
        ("toUpperCase", 1) => s(&text(0).to_uppercase()),
        ("toLowerCase", 1) => s(&text(0).to_lowercase()),
        ("compareTo", 2) => Value::Int(match text(0).cmp(&text(1)) {
            std::cmp::Ordering::Less => -1,
            std::cmp::Ordering::Equal => 0,
            std::cmp::Ordering::Greater => 1,
        }),
        _ => return Ok(None),
    }))
}

/// `Threads` and `Time`: stacks, the current thread, clocks and timestamps.
fn threads_and_time(c: &Call, cx: &mut Context) -> Result<Option<Value>, String> {
    let s = Value::str;
    Ok(Some(match (c.name, c.args.len()) {
        ("jstack" | "jstackStr", 0 | 1) => {
            let limit = if c.args.len() == 1 {
                c.int(0)?.max(0) as usize
            } else {
                usize::MAX
            };
            let frames = cx.probe.map(|p| p.stack.as_slice()).unwrap_or_default();
            let mut stack = String::new();
            for frame in frames.iter().take(limit) {
                stack.push_str(frame);
                stack.push('\n');
            }
            if c.name == "jstackStr" {
                return Ok(Some(s(&stack)));
            }
            cx.out.push_str(&stack);
            Value::Null
        }
        ("currentThread", 0) => match cx.probe {
            Some(p) => Value::Thread {
                name: Rc::from(p.thread.as_str()),
                tid: p.tid,
            },
            None => Value::Thread {
                name: Rc::from("jtap"),
                tid: 0,
            },
        },
        ("name", 1) => match c.arg(0) {
            Value::Thread { name, .. } => Value::Str(name),
            other => s(&other.to_string()),
        },
        ("threadId", 1) => match c.arg(0) {
            Value::Thread { tid, .. } => Value::Int(i64::from(tid)),
            _ => Value::Int(0),
        },
        ("timeMillis", 0) => Value::Int(now_ns() / 1_000_000),
        ("timeNanos", 0) => Value::Int(now_ns()),
        ("timestamp", 0 | 1) => {
            // `new SimpleDateFormat()`'s pattern (en_US) unless given one.
            let pattern = if c.args.is_empty() {
                "M/d/yy, h:mm a".to_string()
            } else {
                c.text(0)
            };
            let now_ms = now_ns() / 1_000_000;
            let offset = facts(cx, c.name)?.utc_offset_seconds(now_ms.div_euclid(1000));
            s(&crate::time::format(&pattern, now_ms, offset)?)
        }
        _ => return Ok(None),
    }))
}

/// Numbers: parsing, boxing.
fn numbers(c: &Call, _: &mut Context) -> Result<Option<Value>, String> {
    let name = c.name;
    Ok(Some(match (name, c.args.len()) {
        ("parseInt" | "parseLong", 1) => Value::Int(
            c.text(0)
                .trim()
                .parse()
                .map_err(|_| format!("{name}: {:?} is not a number", c.text(0)))?,
        ),
        ("box" | "unbox", 1) => c.arg(0),
        _ => return Ok(None),
    }))
}

/// `Reflective`: a field handle is its name; an object's value of it comes from the
/// object's description (its first primitive, string, boxed and enum fields).
fn reflection(c: &Call, _: &mut Context) -> Result<Option<Value>, String> {
    let s = Value::str;
    Ok(Some(match (c.name, c.args.len()) {
        ("field", 2 | 3) => Value::Field(c.text(1).into()),
        // An object's class, as its description names it (`pkg.Class@hash{...}`).
        ("classOf", 1) => match c.arg(0) {
            Value::Object(description) => s(description.split(['@', '{']).next().unwrap_or("")),
            Value::Str(_) => s("java.lang.String"),
            other => return Err(format!("classOf: {other} is not an object")),
        },
        (
            "get" | "getInt" | "getLong" | "getShort" | "getByte" | "getChar" | "getBoolean"
            | "getFloat" | "getDouble",
            2,
        ) if matches!(c.arg(0), Value::Field(_)) => read_field(&c.arg(0), &c.arg(1), c.name)?,
        _ => return Ok(None),
    }))
}

/// Maps (`Collections`).
fn maps(c: &Call, _: &mut Context) -> Result<Option<Value>, String> {
    let (name, arg) = (c.name, |i: usize| c.arg(i));
    Ok(Some(match (name, c.args.len()) {
        ("newHashMap" | "newWeakMap", 0) => Value::Map(Rc::new(RefCell::new(Vec::new()))),
        ("put", 3) => map_op(&arg(0), name, |m| {
            let key = arg(1);
            let full = m.len() >= MAX_ENTRIES;
            match m.iter_mut().find(|(k, _)| k.same(&key)) {
                Some((_, v)) => Ok(std::mem::replace(v, arg(2))),
                None if full => Err(format!("put: maps are capped at {MAX_ENTRIES} entries")),
                None => {
                    m.push((key, arg(2)));
                    Ok(Value::Null)
                }
            }
        })??,
        ("get", 2) => map_op(&arg(0), name, |m| {
            m.iter()
                .find(|(k, _)| k.same(&arg(1)))
                .map_or(Value::Null, |(_, v)| v.clone())
        })?,
        ("containsKey", 2) => map_op(&arg(0), name, |m| {
            Value::Bool(m.iter().any(|(k, _)| k.same(&arg(1))))
        })?,
        ("remove", 2) => map_op(&arg(0), name, |m| {
            match m.iter().position(|(k, _)| k.same(&arg(1))) {
                Some(i) => m.remove(i).1,
                None => Value::Null,
            }
        })?,
        ("size", 1) => map_op(&arg(0), name, |m| Value::Int(m.len() as i64))?,
        ("isEmpty", 1) => map_op(&arg(0), name, |m| Value::Bool(m.is_empty()))?,
        ("clear", 1) => map_op(&arg(0), name, |m| {
            m.clear();
            Value::Null
        })?,
        _ => return Ok(None),
    }))
}

/// Atomics (`Atomic`).
fn atomics(c: &Call, _: &mut Context) -> Result<Option<Value>, String> {
    let (name, arg) = (c.name, |i: usize| c.arg(i));
    Ok(Some(match (name, c.args.len()) {
        ("newAtomicInteger" | "newAtomicLong", 1) => {
            Value::Atomic(Rc::new(RefCell::new(c.int(0)?)))
        }
        ("get", 1) => match arg(0) {
            Value::Atomic(a) => Value::Int(*a.borrow()),
            other => return Err(format!("get: {other} is not an atomic")),
        },
        ("set", 2) => atomic(&arg(0), name, |a| {
            *a = c.int(1).unwrap_or(0);
            Value::Null
        })?,
        ("incrementAndGet", 1) => atomic(&arg(0), name, |a| {
            *a += 1;
            Value::Int(*a)
        })?,
        ("decrementAndGet", 1) => atomic(&arg(0), name, |a| {
            *a -= 1;
            Value::Int(*a)
        })?,
        ("getAndIncrement", 1) => atomic(&arg(0), name, |a| {
            *a += 1;
            Value::Int(*a - 1)
        })?,
        ("getAndDecrement", 1) => atomic(&arg(0), name, |a| {
            *a -= 1;
            Value::Int(*a + 1)
        })?,
        ("addAndGet", 2) => {
            let d = c.int(1)?;
            atomic(&arg(0), name, |a| {
                *a += d;
                Value::Int(*a)
            })?
        }
        ("getAndAdd", 2) => {
            let d = c.int(1)?;
            atomic(&arg(0), name, |a| {
                *a += d;
                Value::Int(*a - d)
            })?
        }
        _ => return Ok(None),
    }))
}

/// `Aggregations`.
fn aggregations(c: &Call, _: &mut Context) -> Result<Option<Value>, String> {
    Ok(Some(match (c.name, c.args.len()) {
        ("newAggregation", 1) => match c.arg(0) {
            Value::Constant(f) if matches!(&*f, "COUNT" | "SUM" | "MINIMUM" | "MAXIMUM" | "AVERAGE" | "QUANTIZE") => {
                Value::Aggregation(Rc::new(RefCell::new(Aggregation::new(&f))))
            }
            other => return Err(format!("newAggregation: {other} is not an aggregation function jtap has (COUNT, SUM, MINIMUM, MAXIMUM, AVERAGE, QUANTIZE)")),
        },
        ("newAggregationKey", _) => Value::Key(c.args.as_slice().into()),
        ("addToAggregation", 2 | 3) => {
            let (key, value) = match c.args.len() {
                3 => (match c.arg(1) {
                    Value::Key(k) => k.to_vec(),
                    other => vec![other],
                }, c.int(2)?),
                _ => (Vec::new(), c.int(1)?),
            };
            match c.arg(0) {
                Value::Aggregation(agg) => {
                    if !agg.borrow_mut().add(key, value) {
                        return Err(format!("addToAggregation: aggregations are capped at {MAX_ENTRIES} keys"));
                    }
                }
                other => return Err(format!("addToAggregation: {other} is not an aggregation")),
            }
            Value::Null
        }
        ("clearAggregation", 1) => {
            if let Value::Aggregation(agg) = c.arg(0) {
                agg.borrow_mut().rows.clear();
            }
            Value::Null
        }
        _ => return Ok(None),
    }))
}

/// The JVM (`Sys.Env`, `Sys.VM`, `Sys.Memory`): facts the client reads without running code
/// in it, and its thread dump.
fn jvm(c: &Call, cx: &mut Context) -> Result<Option<Value>, String> {
    let (name, text) = (c.name, |i: usize| c.text(i));
    Ok(Some(match (name, c.args.len()) {
        ("property" | "getenv", 1) => {
            let facts = facts(cx, name)?;
            let found = match name {
                "property" => facts.property(&text(0)),
                _ => facts.getenv(&text(0)),
            };
            found.map_or(Value::Null, |v| Value::str(&v))
        }
        ("vmStartTime", 0) => Value::Int(facts(cx, name)?.start_time_ms().unwrap_or(0)),
        ("vmUptime", 0) => Value::Int(
            facts(cx, name)?
                .start_time_ms()
                .map_or(0, |start| now_ns() / 1_000_000 - start),
        ),
        ("availableProcessors", 0) => Value::Int(facts(cx, name)?.processors().unwrap_or(0)),
        ("usedMemory" | "totalMemory" | "freeMemory" | "maxMemory", 0) => {
            let heap = facts(cx, name)?.heap().unwrap_or_default();
            Value::Int(match name {
                "usedMemory" => heap.used,
                "totalMemory" => heap.committed,
                "freeMemory" => heap.committed - heap.used,
                _ => heap.max,
            })
        }
        ("heapUsage", 0) => {
            let heap = facts(cx, name)?.heap().unwrap_or_default();
            Value::Object(heap.describe().into())
        }
        ("getpid", 0) => Value::Int(facts(cx, name)?.pid()),
        ("gc", 0) => {
            facts(cx, name)?
                .jcmd(&["GC.run"])
                .map_err(|e| format!("gc: {e}"))?;
            Value::Null
        }
        // BTrace's `dumpHeap(file[, live])`: the file is the JVM's (relative to its directory).
        ("dumpHeap", 1 | 2) => {
            let file = text(0);
            let all = c.args.len() == 2 && !c.arg(1).truthy();
            let mut command = vec!["GC.heap_dump"];
            if all {
                command.push("-all");
            }
            command.push(&file);
            let output = facts(cx, name)?
                .jcmd(&command)
                .map_err(|e| format!("dumpHeap: {e}"))?;
            if !output.contains("Heap dump file created") {
                return Err(format!("dumpHeap: {}", output.trim()));
            }
            Value::Null
        }
        // Every thread's stack, as the JVM's thread dump has it.
        ("jstackAll", 0 | 1) => {
            let dump = facts(cx, name)?
                .thread_dump()
                .ok_or("jstackAll: the JVM gave no thread dump")?;
            cx.out.push_str(dump.trim_end());
            cx.out.push('\n');
            Value::Null
        }
        // The deadlocks the JVM's thread dump reports (nothing when there are none).
        ("deadlocks", 0 | 1) => {
            let dump = facts(cx, name)?
                .thread_dump()
                .ok_or("deadlocks: the JVM gave no thread dump")?;
            let with_stacks = c.args.len() == 1 && matches!(c.arg(0), Value::Bool(true));
            if let Some(report) = deadlock_report(&dump, with_stacks) {
                cx.out.push_str(&report);
            }
            Value::Null
        }
        _ => return Ok(None),
    }))
}

/// The session: `exit`, and the script's arguments (`$`, `$length`).
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
        ("$", 1) => cx
            .args
            .get(c.int(0)?.max(0) as usize)
            .map_or(Value::Null, |a| Value::str(a)),
        ("$length", 0) => Value::Int(cx.args.len() as i64),
        _ => return Ok(None),
    }))
}

/// The deadlocks section of a thread dump (`Found one Java-level deadlock:`, who waits for
/// what, and the closing `Found N deadlock.`), with the threads' stacks when asked for.
fn deadlock_report(dump: &str, with_stacks: bool) -> Option<String> {
    let start = dump.find("Found one Java-level deadlock:")?;
    let mut report = String::new();
    let mut in_stacks = false;
    for line in dump[start..].lines() {
        if line.starts_with("Java stack information") {
            in_stacks = true;
        } else if line.starts_with("Found one Java-level deadlock") {
            in_stacks = false;
        }
        let summary = line
            .strip_prefix("Found ")
            .and_then(|rest| rest.split_once(' '))
            .is_some_and(|(n, word)| n.parse::<u32>().is_ok() && word.starts_with("deadlock"));
        if with_stacks || !in_stacks || summary {
            report.push_str(line);
            report.push('\n');
        }
        if summary {
            break;
        }
    }
    Some(report)
}

/// `Reflective.get*(field, object)`: the field's value in the object's description.
fn read_field(field: &Value, object: &Value, function: &str) -> Result<Value, String> {
    let Value::Field(field) = field else {
        return Err(format!("{function}: {field} is not a field"));
    };
    match object {
        Value::Object(description) => value::field_of(description, field).ok_or_else(|| {
            let class = description.split(['@', '{']).next().unwrap_or("");
            format!("{function}: {class} shows no field {field} (an object's description holds its first primitive, string, boxed and enum fields)")
        }),
        Value::Null => Err(format!("{function}: reading field {field} of null")),
        other => Err(format!("{function}: {other} is not an object")),
    }
}

fn facts<'a>(cx: &Context<'a>, name: &str) -> Result<&'a dyn Facts, String> {
    cx.facts
        .ok_or_else(|| format!("{name}: no JVM to ask (the script runs without one)"))
}

fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

fn char_index(text: &str, byte: Option<usize>) -> i64 {
    byte.map_or(-1, |b| text[..b].chars().count() as i64)
}

fn map_op<T>(
    map: &Value,
    name: &str,
    f: impl FnOnce(&mut Vec<(Value, Value)>) -> T,
) -> Result<T, String> {
    match map {
        Value::Map(m) => Ok(f(&mut m.borrow_mut())),
        other => Err(format!("{name}: {other} is not a map")),
    }
}

fn atomic(value: &Value, name: &str, f: impl FnOnce(&mut i64) -> Value) -> Result<Value, String> {
    match value {
        Value::Atomic(a) => Ok(f(&mut a.borrow_mut())),
        other => Err(format!("{name}: {other} is not an atomic")),
    }
}

/// An aggregation as BTrace prints it (its grid): a row per key in ascending order of value,
/// each cell after two spaces, strings left- and numbers right-aligned to their column's
/// widest value.
/// A profiler argument, or an error naming the function.
fn profiler(value: &Value, function: &str) -> Result<Rc<RefCell<Profiler>>, String> {
    match value {
        Value::Profiler(p) => Ok(p.clone()),
        other => Err(format!("{function}: {other} is not a profiler")),
    }
}

fn print_aggregation(agg: &Aggregation, out: &mut String) {
    let mut rows: Vec<&(Vec<Value>, Tally)> = agg.rows.iter().collect();
    rows.sort_by_key(|(_, tally)| agg.result(tally));
    let cells: Vec<Vec<(String, bool)>> = rows
        .into_iter()
        .map(|(key, tally)| {
            let value = match agg.function.as_str() {
                // BTrace's grid shows a multi-line cell on lines of its own, each after a tab.
                "QUANTIZE" => {
                    let mut text = String::from("\n");
                    for line in histogram(&tally.buckets).lines() {
                        text.push('\t');
                        text.push_str(line);
                        text.push('\n');
                    }
                    (text, false)
                }
                _ => (agg.result(tally).to_string(), true),
            };
            key.iter()
                .map(|k| (k.to_string(), matches!(k, Value::Int(_) | Value::Float(_))))
                .chain([value])
                .collect()
        })
        .collect();
    print_grid(&cells, out);
}

/// A `QUANTIZE` row's distribution as BTrace prints it: each bucket from the one below the
/// lowest used to the one above the highest, its label, a bar of 40 and the count.
fn histogram(buckets: &[u64]) -> String {
    let used: Vec<usize> = (0..buckets.len()).filter(|&i| buckets[i] > 0).collect();
    let (Some(&low), Some(&high)) = (used.first(), used.last()) else {
        return String::new();
    };
    let (low, high) = (low.saturating_sub(1), (high + 1).min(buckets.len() - 1));
    let total: u64 = buckets.iter().sum();
    let mut out = String::from("          value  ------------- Distribution ------------- count\n");
    for (i, &count) in buckets.iter().enumerate().take(high + 1).skip(low) {
        let bar = (40 * count / total.max(1)) as usize;
        out.push_str(&format!(
            "{:>15} |{}{} {count}\n",
            value::bucket_label(i),
            "@".repeat(bar),
            " ".repeat(40 - bar)
        ));
    }
    out
}

/// Rows of cells as BTrace prints a grid: each cell after two spaces, numbers right-aligned
/// and text left-aligned to the column's widest cell.
fn print_grid(cells: &[Vec<(String, bool)>], out: &mut String) {
    let columns = cells.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            cells
                .iter()
                .filter_map(|row| row.get(c))
                .map(|(text, _)| text.chars().count())
                .max()
                .unwrap_or(0)
                .max(1)
        })
        .collect();
    for row in cells {
        for (c, (text, number)) in row.iter().enumerate() {
            let width = widths[c];
            match number {
                true => out.push_str(&format!("  {text:>width$}")),
                // A multi-line cell (a distribution) is as wide as it is.
                false if text.contains('\n') => out.push_str(&format!("  {text}")),
                false => out.push_str(&format!("  {text:<width$}")),
            }
        }
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DUMP: &str = "Full thread dump\n\n\"main\" #1 prio=5\n\tat A.main(A.java:1)\n\n\
Found one Java-level deadlock:\n=============================\n\"t2\":\n  waiting to lock monitor 0x1 (object 0x2, a java.lang.Object),\n  which is held by \"t1\"\n\n\
Java stack information for the threads listed above:\n===================================================\n\"t2\":\n\tat D.b(D.java:9)\n\n\
Found 1 deadlock.\n\nJNI global refs: 5\n";

    #[test]
    fn deadlocks_are_the_dumps_deadlock_section() {
        let short = deadlock_report(DUMP, false).unwrap();
        assert!(
            short.starts_with("Found one Java-level deadlock:\n"),
            "{short}"
        );
        assert!(
            short.contains("which is held by \"t1\"") && short.ends_with("Found 1 deadlock.\n"),
            "{short}"
        );
        assert!(
            !short.contains("D.b(D.java:9)") && !short.contains("JNI global"),
            "{short}"
        );
        let long = deadlock_report(DUMP, true).unwrap();
        assert!(
            long.contains("\tat D.b(D.java:9)") && long.ends_with("Found 1 deadlock.\n"),
            "{long}"
        );
        assert_eq!(deadlock_report("Full thread dump\n", false), None);
    }
}
