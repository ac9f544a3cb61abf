//! `Sys` (`Env`, `VM`, `Memory`): facts the client reads of the JVM without running code in
//! it, and its thread dump.

use super::{facts, now_ns, Call, Context};
use crate::value::Value;

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

/// The JVM (`Sys.Env`, `Sys.VM`, `Sys.Memory`): facts the client reads without running code
/// in it, and its thread dump.
pub(super) fn jvm(c: &Call, cx: &mut Context) -> Result<Option<Value>, String> {
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
        ("jstackAll" | "jstackAllStr", 0 | 1) => {
            let dump = facts(cx, name)?
                .thread_dump()
                .ok_or_else(|| format!("{name}: the JVM gave no thread dump"))?;
            let dump = format!("{}\n", dump.trim_end());
            if name == "jstackAllStr" {
                return Ok(Some(Value::built(dump)?));
            }
            cx.out.push_str(&dump);
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
