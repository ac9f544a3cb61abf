//! `Sys` (`Env`, `VM`, `Memory`): facts the client reads of the JVM without running code in
//! it, and its thread dump.

use super::facts::Counter;
use super::{facts, now_ns, Call, Context};
use crate::value::Value;

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

/// `Sys.VM` and `Sys.Env` facts from the JVM's properties, perf counters and `/proc`, and
/// `Counters`.
pub(super) fn vm(c: &Call, cx: &mut Context) -> Result<Option<Value>, String> {
    let name = c.name;
    let property = |cx: &Context, key: &str| -> Result<Value, String> {
        Ok(facts(cx, name)?
            .property(key)
            .map_or(Value::Null, |v| Value::str(&v)))
    };
    Ok(Some(match (name, c.args.len()) {
        ("vmVersion", 0) => property(cx, "java.vm.version")?,
        ("classPath", 0) => property(cx, "java.class.path")?,
        ("libraryPath", 0) => property(cx, "java.library.path")?,
        // JDK 9 and later have no boot class path.
        ("isBootClassPathSupported", 0) => Value::Bool(false),
        ("vmArguments" | "printVmArguments", 0) => {
            let arguments = match counter(cx, name, "java.rt.vmArgs")? {
                Some(Counter::Text(text)) => text.split_whitespace().map(Value::str).collect(),
                _ => Vec::new(),
            };
            let arguments = Value::Array(arguments.into());
            if name == "vmArguments" {
                return Ok(Some(arguments));
            }
            cx.out.push_str(&format!("{arguments}\n"));
            Value::Null
        }
        (
            "threadCount" | "peakThreadCount" | "daemonThreadCount" | "totalStartedThreadCount",
            0,
        ) => {
            let key = match name {
                "threadCount" => "java.threads.live",
                "peakThreadCount" => "java.threads.livePeak",
                "daemonThreadCount" => "java.threads.daemon",
                _ => "java.threads.started",
            };
            Value::Int(long_counter(cx, name, key)?.unwrap_or(0))
        }
        // BTrace reads the JVM's own perf data: an `int` is the long's low half.
        ("perfLong" | "perfInt", 1) => {
            let value = long_counter(cx, name, &c.text(0))?
                .ok_or_else(|| format!("{name}: the JVM has no number counter {}", c.text(0)))?;
            Value::Int(if name == "perfInt" {
                i64::from(value as i32)
            } else {
                value
            })
        }
        ("perfString", 1) => match counter(cx, name, &c.text(0))? {
            Some(Counter::Text(text)) => Value::str(&text),
            Some(Counter::Long(n)) => Value::str(&n.to_string()),
            None => return Err(format!("{name}: the JVM has no counter {}", c.text(0))),
        },
        ("properties", 0) => pairs(facts(cx, name)?.properties()),
        ("getenv", 0) => pairs(facts(cx, name)?.environment()),
        ("printProperties" | "printEnv", 0) => {
            let facts = facts(cx, name)?;
            let pairs = match name {
                "printProperties" => facts.properties(),
                _ => facts.environment(),
            };
            for (key, value) in pairs {
                cx.out.push_str(&format!("{key} = {value}\n"));
            }
            Value::Null
        }
        ("processCPUTime", 0) => Value::Int(facts(cx, name)?.cpu_time_ns().unwrap_or(-1)),
        ("systemLoadAverage", 0) => Value::Float(facts(cx, name)?.load_average().unwrap_or(-1.0)),
        _ => return Ok(None),
    }))
}

/// A perf data counter of the JVM.
fn counter(cx: &Context, function: &str, key: &str) -> Result<Option<Counter>, String> {
    Ok(facts(cx, function)?.counter(key))
}

/// A perf data counter that holds a number.
fn long_counter(cx: &Context, function: &str, key: &str) -> Result<Option<i64>, String> {
    Ok(match counter(cx, function, key)? {
        Some(Counter::Long(n)) => Some(n),
        _ => None,
    })
}

/// Names and values as a script's map of strings.
fn pairs(pairs: Vec<(String, String)>) -> Value {
    let entries = pairs
        .into_iter()
        .map(|(k, v)| (Value::str(&k), Value::str(&v)))
        .collect();
    Value::Map(std::rc::Rc::new(std::cell::RefCell::new(entries)))
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
