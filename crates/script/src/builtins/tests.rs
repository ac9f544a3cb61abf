//! The functions of BTraceUtils jtap runs, called as a handler calls them.

use super::*;
use crate::value::Value;

/// Calls `name` with no probe and no JVM: its value and what it printed.
fn run(name: &str, args: Vec<Value>) -> Result<(Value, String), String> {
    let (mut out, mut exit, mut level) = (String::new(), None, 0);
    let mut speculations = Speculations::default();
    let mut cx = Context {
        probe: None,
        out: &mut out,
        exit: &mut exit,
        args: &[],
        level: &mut level,
        speculations: &mut speculations,
        facts: None,
        events: &[],
        committed: None,
    };
    let value = call(name, args, &mut cx)?;
    Ok((value, out))
}

/// The value `name` gives.
fn value(name: &str, args: Vec<Value>) -> Value {
    run(name, args).unwrap_or_else(|e| panic!("{name}: {e}")).0
}

/// What `name` prints.
fn printed(name: &str, args: Vec<Value>) -> String {
    run(name, args).unwrap_or_else(|e| panic!("{name}: {e}")).1
}

fn s(text: &str) -> Value {
    Value::str(text)
}

fn int(value: Value) -> i64 {
    value
        .as_int()
        .unwrap_or_else(|| panic!("{value} is no number"))
}

#[test]
fn strings_compare_as_java_does() {
    assert_eq!(int(value("strcmp", vec![s("apple"), s("apricot")])), -2);
    assert_eq!(int(value("compareTo", vec![s("ab"), s("abcd")])), -2);
    assert_eq!(int(value("compareTo", vec![s("b"), s("a")])), 1);
    assert_eq!(int(value("stricmp", vec![s("HeLLo"), s("hello")])), 0);
    assert_eq!(int(value("compareToIgnoreCase", vec![s("B"), s("a")])), 1);
    assert_eq!(int(value("strstr", vec![s("héllo world"), s("wor")])), 6);
    assert_eq!(int(value("strstr", vec![s("abc"), s("x")])), -1);
    assert_eq!(
        value("toHexString", vec![Value::Int(-1)]).to_string(),
        "ffffffff"
    );
    assert_eq!(
        value("toHexString", vec![Value::Int(1 << 40)]).to_string(),
        "10000000000"
    );
}

#[test]
fn patterns_carry_javas_flags() {
    let pattern = value("pattern", vec![s("abc.*"), Value::Int(2)]);
    assert_eq!(pattern.to_string(), "(?i)abc.*");
    assert!(value("matches", vec![pattern, s("ABCdef")]).truthy());
    assert!(!value("matches", vec![value("regexp", vec![s("a+")]), s("ab")]).truthy());
    let bad = run("regexp", vec![s("(")]).unwrap_err();
    assert!(bad.starts_with("regexp: bad regular expression"), "{bad}");
}

#[test]
fn string_builders_append_and_print_their_text() {
    let builder = value("newStringBuilder", vec![]);
    value("append", vec![builder.clone(), s("a")]);
    value("append", vec![builder.clone(), Value::Int(1)]);
    assert_eq!(builder.to_string(), "a1");
    assert_eq!(int(value("length", vec![builder])), 2);
}

#[test]
fn identity_comes_from_the_agents_description() {
    let object = Value::Object("app.Order@1b6d3586{id=7}".into());
    assert_eq!(
        int(value("identityHashCode", vec![object.clone()])),
        0x1b6d3586
    );
    assert_eq!(
        value("identityStr", vec![object.clone()]).to_string(),
        "app.Order@1b6d3586"
    );
    let same = Value::Object("app.Order@1b6d3586{id=8}".into());
    let other = Value::Object("app.Order@2a{id=7}".into());
    assert!(value("compare", vec![object.clone(), same]).truthy());
    assert!(!value("compare", vec![object, other]).truthy());
    assert!(value("compare", vec![s("x"), s("x")]).truthy());
    let string = run("identityHashCode", vec![s("x")]).unwrap_err();
    assert!(string.contains("has no identity"), "{string}");
}

#[test]
fn numbers_parse_and_compute_as_java_does() {
    assert_eq!(int(value("parseByte", vec![s("-128")])), -128);
    assert!(run("parseByte", vec![s("128")])
        .unwrap_err()
        .contains("For input string: \"128\""));
    assert_eq!(value("parseDouble", vec![s(" 1.5d ")]).to_string(), "1.5");
    assert!(run("parseFloat", vec![s("inf")]).is_err());
    assert_eq!(
        value("parseDouble", vec![s("-Infinity")]).to_string(),
        "-Infinity"
    );
    assert!(value("parseBoolean", vec![s("TRUE")]).truthy());
    assert!(!value("parseBoolean", vec![s("yes")]).truthy());
    assert_eq!(value("log10", vec![Value::Int(1000)]).to_string(), "3.0");
    assert_eq!(value("exp", vec![Value::Int(0)]).to_string(), "1.0");
    assert!(value("isNaN", vec![value("log", vec![Value::Int(-1)])]).truthy());
    assert!(value("isInfinite", vec![value("log", vec![Value::Int(0)])]).truthy());
    let (a, b) = (value("random", vec![]), value("random", vec![]));
    assert!(!a.same(&b), "{a} twice");
}

#[test]
fn deques_are_javas_array_deques() {
    let deque = value("newDeque", vec![]);
    value("push", vec![deque.clone(), s("b")]);
    value("push", vec![deque.clone(), s("a")]);
    value("addLast", vec![deque.clone(), s("c")]);
    assert_eq!(deque.to_string(), "[a, b, c]");
    assert_eq!(value("peek", vec![deque.clone()]).to_string(), "a");
    assert_eq!(value("peekLast", vec![deque.clone()]).to_string(), "c");
    assert!(value("contains", vec![deque.clone(), s("b")]).truthy());
    assert_eq!(
        value("toArray", vec![deque.clone()]).to_string(),
        "[a, b, c]"
    );
    assert_eq!(value("removeLast", vec![deque.clone()]).to_string(), "c");
    assert_eq!(value("poll", vec![deque.clone()]).to_string(), "a");
    assert_eq!(int(value("size", vec![deque.clone()])), 1);
    value("clear", vec![deque.clone()]);
    assert!(value("isEmpty", vec![deque.clone()]).truthy());
    assert!(matches!(value("poll", vec![deque.clone()]), Value::Null));
    let empty = run("removeFirst", vec![deque]).unwrap_err();
    assert!(empty.contains("empty"), "{empty}");
}

#[test]
fn maps_copy_and_atomics_swap() {
    let (a, b) = (value("newHashMap", vec![]), value("newHashMap", vec![]));
    value("put", vec![a.clone(), s("k"), Value::Int(1)]);
    value("put", vec![b.clone(), s("old"), Value::Int(0)]);
    value("putAll", vec![a.clone(), b.clone()]);
    assert_eq!(b.to_string(), "{old=0, k=1}");
    value("copy", vec![a.clone(), b.clone()]);
    assert_eq!(b.to_string(), "{k=1}");
    assert!(value("containsValue", vec![b, Value::Int(1)]).truthy());
    let atomic = value("newAtomicInteger", vec![Value::Int(5)]);
    assert_eq!(
        int(value("getAndSet", vec![atomic.clone(), Value::Int(7)])),
        5
    );
    let swap = |expected, new| {
        value(
            "compareAndSet",
            vec![atomic.clone(), Value::Int(expected), Value::Int(new)],
        )
    };
    assert!(!swap(5, 9).truthy());
    assert!(swap(7, 9).truthy());
    value("lazySet", vec![atomic.clone(), Value::Int(3)]);
    assert_eq!(int(value("get", vec![atomic])), 3);
}

#[test]
fn maps_and_numbers_print_as_btrace_prints_them() {
    let map = value("newHashMap", vec![]);
    value("put", vec![map.clone(), s("a"), s("1")]);
    assert_eq!(printed("printMap", vec![map.clone()]), "a = 1\n");
    assert_eq!(printed("printStringMap", vec![s("m"), map]), "m\na = 1\n");
    assert_eq!(
        printed("printNumber", vec![s("n"), Value::Int(4)]),
        "n = 4\n"
    );
    assert_eq!(printed("printNumber", vec![s(""), Value::Int(4)]), "4\n");
}

#[test]
fn aggregations_truncate_to_their_largest_or_smallest_rows() {
    let agg = || {
        let agg = value("newAggregation", vec![Value::Constant("SUM".into())]);
        for (key, n) in [("a", 3), ("b", 1), ("c", 2)] {
            value("addToAggregation", vec![agg.clone(), s(key), Value::Int(n)]);
        }
        agg
    };
    let largest = agg();
    value("truncateAggregation", vec![largest.clone(), Value::Int(2)]);
    assert_eq!(
        printed("printAggregation", vec![s("top"), largest]),
        "top\n  c  2\n  a  3\n"
    );
    let smallest = agg();
    value(
        "truncateAggregation",
        vec![smallest.clone(), Value::Int(-1)],
    );
    assert_eq!(
        printed("printAggregation", vec![s("low"), smallest]),
        "low\n  b  1\n"
    );
}

#[test]
fn classes_are_their_names() {
    assert_eq!(
        value("classForName", vec![s("java.lang.Thread")]).to_string(),
        "java.lang.Thread"
    );
    assert!(value("isArray", vec![s("[I")]).truthy());
    assert!(value("isPrimitive", vec![s("long")]).truthy());
    assert_eq!(
        value("getComponentType", vec![s("[Ljava.lang.String;")]).to_string(),
        "java.lang.String"
    );
    assert_eq!(value("getComponentType", vec![s("[I")]).to_string(), "int");
    assert_eq!(
        value("getComponentType", vec![s("int[][]")]).to_string(),
        "int[]"
    );
    assert!(matches!(
        value("getComponentType", vec![s("int")]),
        Value::Null
    ));
}

#[test]
fn handlers_know_where_their_probe_fired() {
    use crate::machine::Machine;
    let source = r#"import org.openjdk.btrace.core.annotations.*;
import static org.openjdk.btrace.core.BTraceUtils.*;
import org.openjdk.btrace.core.BTraceUtils.D;
@BTrace public class S {
    @OnMethod(clazz = "app.Shop", method = "buy")
    public static void h() {
        setInstrumentationLevel(2);
        setInstrumentationLevel(-1);
        D.probe("shop", "buy");
        println(probeClass() + "." + probeMethod() + ":" + probeLine() + " level " + getInstrumentationLevel());
        println(Time.millis() > 0);
    }
}"#;
    let script = crate::compile(source, "S.java").unwrap_or_else(|e| panic!("{e}"));
    assert!(script.handlers[0].uses_stack, "probeLine takes the stack");
    assert!(
        script.notes[0].starts_with("DTrace probes"),
        "{:?}",
        script.notes
    );
    let mut machine = Machine::new(&script, "S.java", Vec::new(), None);
    let probe = crate::Fired {
        class: "app.Shop".into(),
        method: "buy".into(),
        stack: vec!["app.Shop.buy(Shop.java:42)".into()],
        ..crate::Fired::default()
    };
    machine.fire(0, &probe);
    assert_eq!(machine.take_output(), "app.Shop.buy:42 level 2\ntrue\n");
}

/// A JVM as its perf counters, properties and code cache tell it.
struct FakeJvm;

/// `Compiler.codecache` as JDK 17 prints it.
const CODE_CACHE: &str = "CodeHeap 'non-profiled nmethods': size=120036Kb used=324Kb max_used=324Kb free=119712Kb\n bounds [0x00007f24dcec7000, 0x00007f24dd137000, 0x00007f24e4400000]\nCodeHeap 'non-nmethods': size=5692Kb used=1136Kb max_used=1159Kb free=4555Kb\n bounds [0x00007f24dc938000, 0x00007f24dcba8000, 0x00007f24dcec7000]\n total_blobs=1488 nmethods=1073 adapters=329\n";

impl Facts for FakeJvm {
    fn property(&self, name: &str) -> Option<String> {
        self.properties()
            .into_iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
    }
    fn getenv(&self, _: &str) -> Option<String> {
        None
    }
    fn start_time_ms(&self) -> Option<i64> {
        None
    }
    fn processors(&self) -> Option<i64> {
        None
    }
    fn heap(&self) -> Option<Heap> {
        None
    }
    fn pid(&self) -> i64 {
        1
    }
    fn utc_offset_seconds(&self, _: i64) -> i64 {
        0
    }
    fn jcmd(&self, command: &[&str]) -> Result<String, String> {
        match command {
            ["Compiler.codecache"] => Ok(CODE_CACHE.into()),
            _ => Err("no such command".into()),
        }
    }
    fn thread_dump(&self) -> Option<String> {
        Some("Full thread dump\n\n\"main\" #1\n".into())
    }
    fn counter(&self, name: &str) -> Option<Counter> {
        let long = |n| Some(Counter::Long(n));
        let text = |t: &str| Some(Counter::Text(t.into()));
        match name {
            "java.threads.live" => long(7),
            "java.threads.daemon" => long(6),
            "java.rt.vmArgs" => text("-Xmx64m -Dx=1"),
            "sun.os.hrt.frequency" => long(1_000_000_000),
            "sun.gc.collector.0.time" => long(67_384_571),
            "sun.gc.collector.1.time" => long(2_000_000),
            "sun.gc.policy.name" => text("GarbageFirst"),
            "sun.gc.generation.0.space.0.name" => text("eden"),
            "sun.gc.generation.0.space.0.used" => long(4096),
            "sun.gc.generation.0.space.0.capacity" => long(8192),
            "sun.gc.generation.0.space.0.maxCapacity" => long(65536),
            "sun.gc.generation.0.space.0.initCapacity" => long(1024),
            "sun.gc.generation.0.space.1.name" => text("s1"),
            "sun.gc.metaspace.used" => long(8_243_784),
            "sun.gc.metaspace.capacity" => long(8_454_144),
            "sun.gc.compressedclassspace.used" => long(964_656),
            "sun.gc.compressedclassspace.capacity" => long(1_048_576),
            "sun.gc.compressedclassspace.maxCapacity" => long(1_073_741_824),
            "sun.big" => long(1 << 33 | 5),
            _ => None,
        }
    }
    fn properties(&self) -> Vec<(String, String)> {
        [
            ("java.vm.version", "17.0.15+6"),
            ("java.class.path", "app.jar"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .into()
    }
    fn environment(&self) -> Vec<(String, String)> {
        vec![("HOME".into(), "/root".into())]
    }
    fn cpu_time_ns(&self) -> Option<i64> {
        Some(1_500_000_000)
    }
    fn load_average(&self) -> Option<f64> {
        Some(0.5)
    }
}

/// Calls `name` against [`FakeJvm`]: its value and what it printed.
fn on_jvm(name: &str, args: Vec<Value>) -> (Value, String) {
    let (mut out, mut exit, mut level) = (String::new(), None, 0);
    let mut speculations = Speculations::default();
    let mut cx = Context {
        probe: None,
        out: &mut out,
        exit: &mut exit,
        args: &[],
        level: &mut level,
        speculations: &mut speculations,
        facts: Some(&FakeJvm),
        events: &[],
        committed: None,
    };
    let value = call(name, args, &mut cx).unwrap_or_else(|e| panic!("{name}: {e}"));
    (value, out)
}

#[test]
fn the_vm_is_read_from_its_properties_and_perf_counters() {
    let value = |name: &str, args| on_jvm(name, args).0.to_string();
    assert_eq!(value("vmVersion", vec![]), "17.0.15+6");
    assert_eq!(value("classPath", vec![]), "app.jar");
    assert_eq!(value("isBootClassPathSupported", vec![]), "false");
    assert_eq!(value("vmArguments", vec![]), "[-Xmx64m, -Dx=1]");
    assert_eq!(on_jvm("printVmArguments", vec![]).1, "[-Xmx64m, -Dx=1]\n");
    assert_eq!(value("threadCount", vec![]), "7");
    assert_eq!(value("daemonThreadCount", vec![]), "6");
    assert_eq!(
        value("perfLong", vec![s("sun.big")]),
        (1i64 << 33 | 5).to_string()
    );
    assert_eq!(value("perfInt", vec![s("sun.big")]), "5");
    assert_eq!(
        value("perfString", vec![s("sun.gc.policy.name")]),
        "GarbageFirst"
    );
    assert_eq!(value("getTotalGcTime", vec![]), "69");
    assert_eq!(value("processCPUTime", vec![]), "1500000000");
    assert_eq!(value("systemLoadAverage", vec![]), "0.5");
    assert_eq!(
        on_jvm("printProperties", vec![]).1,
        "java.vm.version = 17.0.15+6\njava.class.path = app.jar\n"
    );
    assert_eq!(on_jvm("printEnv", vec![]).1, "HOME = /root\n");
    assert_eq!(value("getenv", vec![]), "{HOME=/root}");
    assert_eq!(
        on_jvm("jstackAllStr", vec![]).0.to_string(),
        "Full thread dump\n\n\"main\" #1\n"
    );
}

#[test]
fn memory_pools_are_the_jvms_pools() {
    let (usage, _) = on_jvm("nonHeapUsage", vec![]);
    let used = 324 * 1024 + 1136 * 1024 + 8_243_784 + 964_656;
    let committed = 0x270000 + 0x270000 + 8_454_144 + 1_048_576;
    let init = 0x270000 + 0x270000;
    assert_eq!(
        usage.to_string(),
        format!(
            "init = {init}({}K) used = {used}({}K) committed = {committed}({}K) max = -1(-1K)",
            init >> 10,
            used >> 10,
            committed >> 10
        )
    );
    assert_eq!(int(on_jvm("used", vec![usage.clone()]).0), used);
    assert_eq!(int(on_jvm("max", vec![usage]).0), -1);
    let (pools, _) = on_jvm("getMemoryPoolUsage", vec![Value::Null]);
    assert_eq!(
        pools.to_string(),
        "G1 Eden Space;-1;4096;8192;1024\n\
CodeHeap 'non-profiled nmethods';122916864;331776;2555904;2555904\n\
CodeHeap 'non-nmethods';5828608;1163264;2555904;2555904\n\
Metaspace;-1;8243784;8454144;0\n\
Compressed Class Space;1073741824;964656;1048576;0\n"
    );
    let (named, _) = on_jvm("getMemoryPoolUsage", vec![s("%1$-14s|%3$d%n")]);
    assert!(
        named.to_string().starts_with("G1 Eden Space |4096\n\n"),
        "{named}"
    );
}

#[test]
fn handlers_run_at_the_levels_they_are_enabled_at() {
    use crate::machine::Machine;
    let source = r#"import org.openjdk.btrace.core.annotations.*;
import static org.openjdk.btrace.core.BTraceUtils.*;
@BTrace public class S {
    @OnMethod(clazz = "a.B", method = "c", enableAt = @Level("=0"))
    public static void zero() { println("zero"); setInstrumentationLevel(1); }
    @OnMethod(clazz = "a.B", method = "c", enableAt = @Level(">=1"))
    public static void one() { println("one"); }
}"#;
    let script = crate::compile(source, "S.java").unwrap_or_else(|e| panic!("{e}"));
    let mut machine = Machine::new(&script, "S.java", Vec::new(), None);
    let probe = crate::Fired::default();
    for handler in [1, 0, 0, 1] {
        machine.fire(handler, &probe);
    }
    assert_eq!(machine.take_output(), "zero\none\n");
    let bad = crate::compile(&source.replace("=0", "~0"), "S.java").unwrap_err();
    assert!(
        bad.to_string().starts_with("S.java:4:55: @Level takes"),
        "{bad}"
    );
}

#[test]
fn low_memory_handlers_run_once_per_crossing_of_their_threshold() {
    use crate::machine::Machine;
    let source = r#"import org.openjdk.btrace.core.annotations.*;
import java.lang.management.MemoryUsage;
import static org.openjdk.btrace.core.BTraceUtils.*;
@BTrace public class S {
    @OnLowMemory(pool = "G1 Eden Space", threshold = 4000)
    public static void low(MemoryUsage mu) { println(Sys.Memory.used(mu)); }
    @OnLowMemory(pool = "G1 Eden Space", threshold = 5_000L)
    public static void high(MemoryUsage mu) { println("high"); }
}"#;
    let script = crate::compile(source, "S.java").unwrap_or_else(|e| panic!("{e}"));
    assert!(script.notes.is_empty(), "{:?}", script.notes);
    let mut machine = Machine::new(&script, "S.java", Vec::new(), Some(Box::new(FakeJvm)));
    for _ in 0..3 {
        machine.run(0);
        machine.run(1);
    }
    assert_eq!(machine.take_output(), "4096\n");
    let bad = crate::compile(&source.replace(", threshold = 4000", ""), "S.java").unwrap_err();
    assert!(
        bad.to_string()
            .contains("@OnLowMemory needs pool and threshold"),
        "{bad}"
    );
}

#[test]
fn speculative_output_appears_only_when_committed() {
    use crate::machine::Machine;
    let source = r#"import org.openjdk.btrace.core.annotations.*;
import static org.openjdk.btrace.core.BTraceUtils.*;
@BTrace public class S {
    @TLS private static int id = -1;
    @OnMethod(clazz = "a.B", method = "open")
    public static void open() { id = speculation(); speculate(id); println("opened " + id); }
    @OnMethod(clazz = "a.B", method = "keep")
    public static void keep() { commit(id); println("kept " + id); }
    @OnMethod(clazz = "a.B", method = "drop")
    public static void drop() { discard(id); }
    @OnMethod(clazz = "a.B", method = "bad")
    public static void bad() { speculate(99); }
}"#;
    let script = crate::compile(source, "S.java").unwrap_or_else(|e| panic!("{e}"));
    let mut machine = Machine::new(&script, "S.java", Vec::new(), None);
    let on = |tid| crate::Fired {
        tid,
        ..crate::Fired::default()
    };
    machine.fire(0, &on(1));
    machine.fire(0, &on(2));
    assert_eq!(machine.take_output(), "", "held until committed");
    machine.fire(2, &on(2));
    machine.fire(1, &on(1));
    assert_eq!(machine.take_output(), "opened 0\nkept 0\n");
    machine.fire(3, &on(1));
    let errors = machine.take_errors();
    assert!(
        errors[0].contains("invalid speculative buffer id: 99"),
        "{errors:?}"
    );
}

#[test]
fn exported_fields_are_btraces_perf_counters() {
    use crate::machine::Machine;
    let source = r#"package org.example;
import org.openjdk.btrace.core.annotations.*;
import static org.openjdk.btrace.core.BTraceUtils.*;
@BTrace public class Counted {
    @Export private static long count = 41;
    @OnTimer(10)
    public static void t() {
        count++;
        println(Counters.perfLong("btrace.org.example.Counted.count") + " " + perfString("btrace.Counted.count"));
    }
}"#;
    let script = crate::compile(source, "Counted.java").unwrap_or_else(|e| panic!("{e}"));
    let mut machine = Machine::new(&script, "Counted.java", Vec::new(), None);
    machine.run(0);
    assert_eq!(machine.take_output(), "42 42\n");
}

#[test]
fn arguments_are_read_by_position_and_by_name() {
    let words = ["m=paint".to_string(), "100".to_string()];
    let (mut out, mut exit, mut level) = (String::new(), None, 0);
    let mut speculations = Speculations::default();
    let mut cx = Context {
        probe: None,
        out: &mut out,
        exit: &mut exit,
        args: &words,
        level: &mut level,
        speculations: &mut speculations,
        facts: None,
        events: &[],
        committed: None,
    };
    let mut call = |name: &str, args: Vec<Value>| call(name, args, &mut cx).unwrap().to_string();
    assert_eq!(call("$", vec![Value::Int(0)]), "m=paint");
    assert_eq!(call("$", vec![s("m")]), "paint");
    assert_eq!(call("$", vec![s("100")]), "");
    assert_eq!(call("$", vec![s("x")]), "null");
    assert_eq!(call("$length", vec![]), "2");
}
