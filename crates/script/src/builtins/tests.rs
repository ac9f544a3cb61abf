//! The functions of BTraceUtils jtap runs, called as a handler calls them.

use super::*;
use crate::value::Value;

/// Calls `name` with no probe and no JVM: its value and what it printed.
fn run(name: &str, args: Vec<Value>) -> Result<(Value, String), String> {
    let (mut out, mut exit, mut level) = (String::new(), None, 0);
    let mut cx = Context {
        probe: None,
        out: &mut out,
        exit: &mut exit,
        args: &[],
        level: &mut level,
        facts: None,
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
