//! `Jfr.*`: the JFR events a script declares, prepared, filled and committed in the client.
//! An event's times are the probe's (when the handler handles one) or the client's clock:
//! `begin` and `end` mark its start and end, `commit` without them gives it no duration.
//! Committed events go to the session's recording when it has one, else one line each to
//! the script's output. `shouldCommit` is always true: every committed event is kept.

use std::cell::RefCell;
use std::rc::Rc;

use super::{now_ns, Call, Context};
use crate::ast::EventType;
use crate::value::Value;

/// An event being filled (`JfrEvent`).
#[derive(Debug)]
pub struct JfrEvent {
    event_type: usize,
    values: Vec<Value>,
    begin_ns: Option<u64>,
    end_ns: Option<u64>,
}

/// A committed event.
#[derive(Debug, Clone)]
pub struct Committed {
    /// Its type, an index into the script's [`crate::Script::events`].
    pub event_type: usize,
    /// When it began, nanoseconds since the Unix epoch.
    pub start_ns: u64,
    /// How long it lasted, in nanoseconds.
    pub duration_ns: u64,
    /// The probed thread (kernel id, name) of the handler that committed it, if any.
    pub thread: Option<(u32, String)>,
    /// Its fields' values, in the type's order: integers (`char` as its code), floats,
    /// booleans, strings or null.
    pub values: Vec<Value>,
}

/// A new event of type `event_type` of `events`, its fields zero, false or null.
pub fn new_event(events: &[EventType], event_type: usize) -> Value {
    let values = events[event_type]
        .fields
        .iter()
        .map(|f| match f.java_type {
            "boolean" => Value::Bool(false),
            "float" | "double" => Value::Float(0.0),
            "java.lang.String" => Value::Null,
            _ => Value::Int(0),
        })
        .collect();
    Value::Event(Rc::new(RefCell::new(JfrEvent {
        event_type,
        values,
        begin_ns: None,
        end_ns: None,
    })))
}

/// `prepareEvent`, `setEventField`, `shouldCommit`, `begin`, `end` and `commit` of an event
/// (`commit` of a number is `Speculation`'s).
pub(super) fn jfr(c: &Call, cx: &mut Context) -> Result<Option<Value>, String> {
    let event = match c.args.first() {
        Some(Value::Event(event)) => event.clone(),
        Some(Value::EventFactory(i)) if (c.name, c.args.len()) == ("prepareEvent", 1) => {
            return Ok(Some(new_event(cx.events, *i)))
        }
        Some(Value::EventFactory(_)) if c.name == "commit" => {
            return Err("commit: argument 1 is not a JFR event (prepareEvent makes one)".into())
        }
        _ if matches!(
            c.name,
            "prepareEvent" | "setEventField" | "shouldCommit" | "begin" | "end"
        ) =>
        {
            return Err(format!(
                "{}: argument 1 is not a JFR event (an @Event field, or prepareEvent's)",
                c.name
            ))
        }
        _ => return Ok(None),
    };
    let now = cx
        .probe
        .map_or(now_ns() as u64, |p| p.start_ns + p.duration_ns);
    let mut event = event.borrow_mut();
    match (c.name, c.args.len()) {
        ("setEventField", 3) => set(&mut event, cx.events, &c.text(1), c.arg(2))?,
        ("shouldCommit", 1) => return Ok(Some(Value::Bool(true))),
        ("begin", 1) => event.begin_ns = Some(now),
        ("end", 1) => event.end_ns = Some(now),
        ("commit", 1) => {
            let start_ns = event.begin_ns.unwrap_or(now);
            let end_ns = event.end_ns.unwrap_or(now).max(start_ns);
            let committed = Committed {
                event_type: event.event_type,
                start_ns,
                duration_ns: end_ns - start_ns,
                thread: cx.probe.map(|p| (p.tid, p.thread.clone())),
                values: event.values.clone(),
            };
            match cx.committed.as_deref_mut() {
                Some(recorded) => recorded.push(committed),
                None => {
                    cx.out
                        .push_str(&line(&cx.events[event.event_type], &committed));
                    cx.out.push('\n');
                }
            }
        }
        _ => return Ok(None),
    }
    Ok(Some(Value::Null))
}

/// `setEventField(event, name, value)`: the value as the field's type holds it.
fn set(event: &mut JfrEvent, events: &[EventType], name: &str, value: Value) -> Result<(), String> {
    let ty = &events[event.event_type];
    let Some(index) = ty.fields.iter().position(|f| f.name == name) else {
        return Err(format!("event {} has no field {name}", ty.name));
    };
    let java_type = ty.fields[index].java_type;
    let wrong = || {
        format!(
            "field {name} of event {} is a {java_type}, not {value}",
            ty.name
        )
    };
    let single_char = match &value {
        Value::Str(s) if s.chars().count() == 1 => s.chars().next().map(|c| c as i64),
        _ => None,
    };
    event.values[index] = match (java_type, &value) {
        ("java.lang.String", Value::Str(_) | Value::Null) => value.clone(),
        ("boolean", Value::Bool(_)) => value.clone(),
        ("float" | "double", Value::Int(_) | Value::Float(_)) => {
            Value::Float(value.as_float().ok_or_else(wrong)?)
        }
        ("char", _) if single_char.is_some() => Value::Int(single_char.unwrap_or(0)),
        (width, Value::Int(n)) => Value::Int(match width {
            "byte" => *n as i8 as i64,
            "short" => *n as i16 as i64,
            "char" => *n as u16 as i64,
            "int" => *n as i32 as i64,
            "long" => *n,
            _ => return Err(wrong()),
        }),
        _ => return Err(wrong()),
    };
    Ok(())
}

/// A committed event as one line: `name {startTime = …, duration = … ns, eventThread = …,
/// field = value, …}`.
fn line(ty: &EventType, event: &Committed) -> String {
    let ms = (event.start_ns / 1_000_000) as i64;
    let start = crate::time::format("yyyy-MM-dd'T'HH:mm:ss.SSS'Z'", ms, 0).unwrap_or_default();
    let mut text = format!(
        "{} {{startTime = {start}, duration = {} ns",
        ty.name, event.duration_ns
    );
    if let Some((_, thread)) = &event.thread {
        text.push_str(&format!(", eventThread = {}", quoted(thread)));
    }
    for (field, value) in ty.fields.iter().zip(&event.values) {
        let shown = match (field.java_type, value) {
            ("char", Value::Int(n)) => {
                char::from_u32(*n as u32).map_or(n.to_string(), |c| c.to_string())
            }
            (_, Value::Str(s)) => quoted(s),
            _ => value.to_string(),
        };
        text.push_str(&format!(", {} = {shown}", field.name));
    }
    text.push('}');
    text
}

/// A string in double quotes, its quotes and backslashes escaped.
fn quoted(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

#[cfg(test)]
mod tests {
    use crate::ast::{Period, Trigger};
    use crate::{compile, Fired, Machine, Script};

    const HEAD: &str = "import org.openjdk.btrace.core.annotations.*;\nimport org.openjdk.btrace.core.jfr.JfrEvent;\nimport static org.openjdk.btrace.core.BTraceUtils.*;\nimport static org.openjdk.btrace.core.BTraceUtils.Jfr.*;\n@BTrace public class S {\n";

    fn script(body: &str) -> Result<Script, String> {
        compile(&format!("{HEAD}{body}\n}}\n"), "S.java").map_err(|e| e.to_string())
    }

    const OPENED: &str = r#"@Event(name = "opened", label = "Opened", category = {"a", "b"}, fields = {
        @Event.Field(type = Event.FieldType.STRING, name = "path"),
        @Event.Field(type = Event.FieldType.INT, name = "n", kind = @Event.Field.Kind(name = Event.FieldKind.DATAAMOUNT)),
        @Event.Field(type = Event.FieldType.CHAR, name = "c"),
        @Event.Field(type = Event.FieldType.DOUBLE, name = "x")
    })
    static JfrEvent.Factory opened;
    @TLS static JfrEvent open;
    @OnMethod(clazz = "a.B", method = "run")
    static void entry(String path) { open = prepareEvent(opened); begin(open); setEventField(open, "path", path); }
    @OnMethod(clazz = "a.B", method = "run", location = @Location(Kind.RETURN))
    static void exit() { end(open); setEventField(open, "n", 70000L); setEventField(open, "c", 'z'); setEventField(open, "x", 2); if (shouldCommit(open)) { commit(open); } }
    @PeriodicEvent(name = "tick", fields = @Event.Field(type = Event.FieldType.LONG, name = "count"), period = "2 s")
    static void tick(JfrEvent e) { setEventField(e, "count", 5); commit(e); }
    @PeriodicEvent(name = "last", fields = @Event.Field(type = Event.FieldType.BOOLEAN, name = "done"), period = "endChunk")
    static void last(JfrEvent e) { setEventField(e, "done", true); commit(e); }"#;

    fn fired(start_ns: u64, duration_ns: u64, path: &str) -> Fired {
        Fired {
            start_ns,
            duration_ns,
            values: vec!["null".into(), format!("\"{path}\"")],
            thread: "main".into(),
            tid: 7,
            ..Fired::default()
        }
    }

    #[test]
    fn declared_events_are_types_with_fields_and_periodic_handlers() {
        let s = script(OPENED).unwrap();
        let names: Vec<&str> = s.events.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["opened", "tick", "last"]);
        let opened = &s.events[0];
        assert_eq!(
            (opened.label.as_str(), opened.category.len()),
            ("Opened", 2)
        );
        let types: Vec<&str> = opened.fields.iter().map(|f| f.java_type).collect();
        assert_eq!(types, ["java.lang.String", "int", "char", "double"]);
        assert_eq!(
            opened.fields[1].content,
            Some(("jdk.jfr.DataAmount".into(), Some("BYTES".into())))
        );
        assert_eq!(s.fields[0].event, Some(0));
        let periods: Vec<&Trigger> = s.handlers[2..].iter().map(|h| &h.trigger).collect();
        assert_eq!(
            periods,
            [
                &Trigger::Periodic {
                    event: 1,
                    period: Period::Every(2000)
                },
                &Trigger::Periodic {
                    event: 2,
                    period: Period::Chunk {
                        begin: false,
                        end: true
                    }
                }
            ]
        );
    }

    #[test]
    fn events_take_the_probes_times_and_thread_and_print_as_one_line() {
        let s = script(OPENED).unwrap();
        let mut recorded = Machine::new(&s, "S.java", Vec::new(), None);
        recorded.record_events();
        recorded.fire(0, &fired(1_000, 0, "/tmp/a"));
        recorded.fire(1, &fired(1_000, 500, "/tmp/a"));
        recorded.chunk_events(true);
        recorded.chunk_events(false);
        assert_eq!(recorded.take_errors(), Vec::<String>::new());
        let events = recorded.take_events();
        assert_eq!(
            events.len(),
            2,
            "the call's, and the end chunk's: {events:?}"
        );
        let call = &events[0];
        assert_eq!((call.start_ns, call.duration_ns), (1_000, 500));
        assert_eq!(call.thread, Some((7, "main".to_string())));
        let values: Vec<String> = call.values.iter().map(|v| v.to_string()).collect();
        assert_eq!(values, ["/tmp/a", "70000", "122", "2.0"]);
        assert_eq!(
            (
                events[1].event_type,
                events[1].values[0].to_string().as_str()
            ),
            (2, "true")
        );
        assert!(recorded.take_output().is_empty());
        // Without a recording, each event is a line of output.
        let mut printed = Machine::new(&s, "S.java", Vec::new(), None);
        printed.run(2);
        let out = printed.take_output();
        assert!(
            out.starts_with("tick {startTime = ")
                && out.ends_with(", duration = 0 ns, count = 5}\n"),
            "{out}"
        );
    }

    #[test]
    fn a_field_the_event_lacks_or_a_value_of_another_type_fails_the_handler() {
        let body = |statement: &str| {
            format!("@Event(name = \"e\", fields = @Event.Field(type = Event.FieldType.INT, name = \"n\")) static JfrEvent.Factory f;\n@OnTimer(10) static void t() {{ JfrEvent e = prepareEvent(f); {statement} }}")
        };
        for (statement, error) in [
            ("setEventField(e, \"m\", 1);", "event e has no field m"),
            (
                "setEventField(e, \"n\", \"one\");",
                "field n of event e is a int, not one",
            ),
            ("commit(f);", "commit: argument 1 is not a JFR event"),
        ] {
            let s = script(&body(statement)).unwrap();
            let mut machine = Machine::new(&s, "S.java", Vec::new(), None);
            machine.run(0);
            let errors = machine.take_errors();
            assert!(errors.len() == 1 && errors[0].contains(error), "{errors:?}");
        }
    }

    #[test]
    fn event_declarations_btrace_could_not_run_are_refused() {
        for (declaration, error) in [
            ("@Event(name = \"e\", fields = @Event.Field(type = Event.FieldType.CLASS, name = \"c\")) static JfrEvent.Factory f;", "S.java:6:49: Event.FieldType.CLASS fields are refused"),
            ("@Event(fields = @Event.Field(type = Event.FieldType.INT, name = \"c\")) static JfrEvent.Factory f;", "@Event needs a name"),
            ("@Event(name = \"e\", fields = {}) static String f;", "an @Event field is a JfrEvent.Factory"),
            ("@Event(name = \"e\", fields = {}) static JfrEvent.Factory f;\n@Event(name = \"e\", fields = {}) static JfrEvent.Factory g;", "event e is declared twice"),
            ("@PeriodicEvent(name = \"p\", fields = {}, period = \"soon\") static void p(JfrEvent e) {}", "period \"soon\" is neither"),
            ("@PeriodicEvent(name = \"p\", fields = {}) static void p() {}", "takes one parameter"),
        ] {
            let message = script(declaration).unwrap_err();
            assert!(message.contains(error), "{message}");
        }
    }
}
