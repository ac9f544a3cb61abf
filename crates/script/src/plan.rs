//! The back end of a script: its `@OnMethod` handlers as one tracing plan for the agent
//! (which methods, call sites, points and fields to probe, what to capture, the guards and
//! thresholds the agent applies), and for each handler which traced calls it takes
//! (`Selector`s, which [`crate::firing`] applies to the records coming back).

use std::time::Duration;

use jtap_protocol::records::{Call, Callee, Outcome, Point, Reached};
use jtap_protocol::trace::{
    CallSites, FieldSites, Guarded, MethodPattern, Mode, NamePattern, Plan, PointKind,
};

use crate::ast::{Handler, Probe, Role, Trigger};
use crate::{CompileError, Location, Script};

/// The `@OnMethod` handlers: which calls each takes, and the one tracing plan that captures
/// what all of them need (the agent runs one tracing session per JVM).
pub struct Probes {
    /// Per handler (by index): its methods, location and threshold.
    pub(crate) handlers: Vec<(usize, Selector)>,
    /// What the agent traces and captures.
    pub plan: Plan,
}

impl Probes {
    /// The plan and selectors of `script`'s probe handlers; a probe jtap cannot trace is an
    /// error at its handler, in `file`.
    pub fn of(script: &Script, file: &str) -> Result<Probes, CompileError> {
        let mut probes = Probes {
            handlers: Vec::new(),
            plan: Plan {
                mode: Mode::Trace,
                // Every call of a hot method reaches the handlers (those carrying values one
                // by one), and the agent says how many it reported.
                batches: true,
                ..Plan::default()
            },
        };
        let mut thresholds = Vec::new();
        // The lines some handler takes; None: every line.
        let mut lines = Some(Vec::new());
        for (index, handler) in script.handlers.iter().enumerate() {
            let Trigger::Probe(probe) = &handler.trigger else {
                continue;
            };
            // A probe naming an argument not given probes nothing (the compiler noted it).
            if probe.unresolved().is_some() {
                continue;
            }
            let (pattern, target) = patterns(probe).map_err(|message| CompileError {
                file: file.to_string(),
                at: handler.method.at,
                message,
            })?;
            capture(&mut probes.plan, handler, probe);
            let threshold = threshold(handler);
            thresholds.push(threshold);
            let selector = Selector::new(&pattern, target.as_ref(), probe.location, threshold);
            probes.handlers.push((index, selector));
            place(
                &mut probes.plan,
                handler,
                probe.location,
                (pattern, target),
                &mut lines,
            );
        }
        // The agent reports the lines some handler takes, or all of them.
        if let Some(mut lines) = lines {
            lines.sort_unstable();
            lines.dedup();
            probes.plan.lines = lines;
        }
        // The agent keeps calls over the smallest threshold, when every handler has one.
        probes.plan.threshold = thresholds
            .iter()
            .copied()
            .collect::<Option<Vec<_>>>()
            .and_then(|t| t.into_iter().min());
        Ok(probes)
    }

    /// Whether the script has no probe handler (only timers, events, exit handlers).
    pub fn is_empty(&self) -> bool {
        self.handlers.is_empty()
    }
}

/// The probed methods of a handler, and the called methods (`Kind.CALL`), fields
/// (`Kind.FIELD_*`) or classes (`Kind.NEW`) its `@Location` names.
fn patterns(probe: &Probe) -> Result<(MethodPattern, Option<MethodPattern>), String> {
    let pattern = method_pattern(&probe.class, &probe.method, &probe.descriptor)?;
    let target = probe
        .target
        .as_ref()
        .map(|c| method_pattern(&c.class, &c.method, &c.descriptor))
        .transpose()?;
    if let Some(target) = target
        .as_ref()
        .filter(|t| t.annotated || t.method_annotated)
    {
        return Err(format!(
            "@Location(clazz = ..., method = ...) names the called methods, fields or classes themselves, not their annotations: {target}"
        ));
    }
    if let Some(target) = target.as_ref().filter(|t| t.subtypes) {
        if !matches!(probe.location, Location::Call { .. }) {
            return Err(format!(
                "clazz = \"+{}\" in a @Location names the callees of Kind.CALL only: fields and classes allocated are named as the code names them",
                target.class
            ));
        }
    }
    Ok((pattern, target))
}

/// Adds to the plan what the handler's parameters need captured.
fn capture(plan: &mut Plan, handler: &Handler, probe: &Probe) {
    let roles: Vec<&Role> = handler.method.params.iter().map(|p| &p.role).collect();
    // At allocations `@Return` is the object allocated, which the agent describes with
    // the values.
    let allocated = matches!(
        probe.location,
        Location::New { .. } | Location::NewArray { .. }
    ) && roles.contains(&&Role::Return);
    plan.values |= allocated
        || roles.iter().any(|r| {
            matches!(
                r,
                Role::Arg(_) | Role::AllArgs | Role::This | Role::TargetInstance
            )
        });
    // At calls the arguments are the called method's.
    plan.callee_values |= matches!(probe.location, Location::Call { .. })
        && roles
            .iter()
            .any(|r| matches!(r, Role::Arg(_) | Role::AllArgs | Role::TargetInstance));
    plan.returns |= !allocated && roles.contains(&&Role::Return);
    // Error and before-call handlers take calls that throw.
    plan.exceptions |= matches!(
        probe.location,
        Location::Error | Location::Call { after: false }
    );
    plan.stack |= handler.uses_stack;
    plan.sizes |= handler.uses_sizes;
}

/// The point kind of an instruction location (array accesses, throws, catches, type checks).
fn insn_kind(location: Location) -> Option<PointKind> {
    Some(match location {
        Location::Array { write: false, .. } => PointKind::ArrayGet,
        Location::Array { write: true, .. } => PointKind::ArraySet,
        Location::Throw => PointKind::Throw,
        Location::Catch => PointKind::Catch,
        Location::TypeCheck { instance_of: false } => PointKind::CheckCast,
        Location::TypeCheck { instance_of: true } => PointKind::InstanceOf,
        _ => return None,
    })
}

/// Adds the handler's probe to the plan where its location says: a call site, a point, a
/// field access or a traced method (with the guard the agent tests, if any); `lines`
/// collects the lines `Kind.LINE` handlers take.
fn place(
    plan: &mut Plan,
    handler: &Handler,
    location: Location,
    (pattern, target): (MethodPattern, Option<MethodPattern>),
    lines: &mut Option<Vec<u32>>,
) {
    match (location, target) {
        (Location::Call { .. }, Some(callee)) => plan.call_sites.push(CallSites {
            host: pattern,
            callee,
        }),
        (Location::Entry, _) => {
            plan.points.push((PointKind::Entry, pattern));
            if let Some(guard) = handler.argument_guard() {
                plan.guards
                    .push((Guarded::Point(plan.points.len() - 1), guard));
            }
        }
        (Location::Line(line), _) => {
            plan.points.push((PointKind::Line, pattern));
            match (line, lines.as_mut()) {
                (Some(line), Some(lines)) => lines.push(line),
                (Some(_), None) => {}
                (None, _) => *lines = None,
            }
        }
        (Location::New { .. } | Location::NewArray { .. }, _) => {
            plan.points.push((PointKind::New, pattern))
        }
        (Location::Sync { .. }, _) => plan.points.push((PointKind::Sync, pattern)),
        (location, _) if insn_kind(location).is_some() => plan
            .points
            .extend(insn_kind(location).map(|kind| (kind, pattern))),
        (Location::Field { write, .. }, Some(field)) => plan.field_sites.push(FieldSites {
            host: pattern,
            field,
            write,
        }),
        // RETURN and ERROR: the agent leaves out the calls the condition rejects.
        _ => {
            plan.targets.push(pattern);
            if let Some(guard) = handler.argument_guard() {
                plan.guards
                    .push((Guarded::Target(plan.targets.len() - 1), guard));
            }
        }
    }
}

/// Which traced calls a handler takes.
pub(crate) struct Selector {
    class: Option<regex::Regex>,
    method: Option<regex::Regex>,
    descriptor: Option<String>,
    location: Location,
    /// At `Kind.CALL`: the called methods; at `Kind.NEW`: the classes allocated.
    target: Option<TargetSelector>,
    pub(crate) threshold: Option<Duration>,
}

/// The called methods a `Kind.CALL` handler takes, or the classes a `Kind.NEW` one does.
struct TargetSelector {
    /// None for `+Super` callees, whose owner classes the agent only knows.
    class: Option<regex::Regex>,
    method: Option<regex::Regex>,
    descriptor: Option<String>,
}

impl Selector {
    /// The selector of a handler probing `pattern` at `location`, with the `@Location`'s
    /// `target`.
    fn new(
        pattern: &MethodPattern,
        target: Option<&MethodPattern>,
        location: Location,
        threshold: Option<Duration>,
    ) -> Selector {
        let regex = |p: &NamePattern| regex::Regex::new(&p.to_regex()).ok();
        Selector {
            // The classes of a `+Super` pattern and the annotated classes and methods of `@`
            // patterns are known to the agent only.
            class: (!pattern.subtypes && !pattern.annotated)
                .then(|| regex(&pattern.class))
                .flatten(),
            method: (!pattern.method_annotated)
                .then(|| pattern.method.as_ref().and_then(regex))
                .flatten(),
            descriptor: pattern.descriptor.clone(),
            location,
            target: target.map(|c| TargetSelector {
                class: (!c.subtypes).then(|| regex(&c.class)).flatten(),
                method: c.method.as_ref().and_then(regex),
                descriptor: c.descriptor.clone(),
            }),
            threshold,
        }
    }

    /// Whether a `Kind.RETURN`, `ERROR` or `CALL` handler takes a traced call.
    pub(crate) fn takes(&self, call: &Call) -> bool {
        let threw = matches!(call.outcome, Outcome::Threw(_));
        let location = match (self.location, &call.callee, &self.target) {
            (Location::Return, None, _) => !threw,
            (Location::Error, None, _) => threw,
            // Before a call: every call, but constructors (as BTrace, which cannot pass the
            // object before its constructor ran).
            (Location::Call { after: false }, Some(callee), Some(wanted)) => {
                callee.method != "<init>" && wanted.takes(callee)
            }
            (Location::Call { after: true }, Some(callee), Some(wanted)) => {
                !threw && wanted.takes(callee)
            }
            _ => false,
        };
        location
            && self.takes_method(&call.class, &call.method, &call.descriptor)
            && self
                .threshold
                .is_none_or(|t| call.duration_ns >= t.as_nanos() as u64)
    }

    /// Whether a handler at a point (`Kind.ENTRY`, `LINE`, `NEW`, `SYNC_*`, a field or
    /// array access, …) takes a point reached.
    pub(crate) fn takes_point(&self, reached: &Reached) -> bool {
        let location = match (self.location, &reached.point) {
            (Location::Entry, Point::Entry) => true,
            (Location::Line(None), Point::Line(_)) => true,
            (Location::Line(Some(wanted)), Point::Line(line)) => wanted == *line,
            (Location::New { .. }, Point::New(class))
            | (Location::NewArray { .. }, Point::NewArray { element: class, .. }) => {
                self.target.as_ref().is_none_or(|t| t.takes_class(class))
            }
            (Location::Sync { exit: false }, Point::SyncEnter(_)) => true,
            (Location::Sync { exit: true }, Point::SyncExit(_)) => true,
            (location, Point::Insn(insn)) => {
                insn_kind(location).is_some_and(|kind| kind.name() == insn.kind)
            }
            (Location::Field { write: false, .. }, Point::FieldGet(access))
            | (Location::Field { write: true, .. }, Point::FieldSet(access)) => self
                .target
                .as_ref()
                .is_none_or(|t| t.takes_field(&access.field)),
            _ => false,
        };
        location && self.takes_method(&reached.class, &reached.method, &reached.descriptor)
    }

    fn takes_method(&self, class: &str, method: &str, descriptor: &str) -> bool {
        self.class.as_ref().is_none_or(|re| re.is_match(class))
            && self.method.as_ref().is_none_or(|re| re.is_match(method))
            && self.descriptor.as_deref().is_none_or(|d| d == descriptor)
    }
}

impl TargetSelector {
    fn takes_class(&self, class: &str) -> bool {
        self.class.as_ref().is_none_or(|re| re.is_match(class))
    }

    /// Whether it selects `field`, `pkg.Class.field`.
    fn takes_field(&self, field: &str) -> bool {
        let (class, name) = field.rsplit_once('.').unwrap_or(("", field));
        self.takes_class(class) && self.method.as_ref().is_none_or(|re| re.is_match(name))
    }

    fn takes(&self, callee: &Callee) -> bool {
        self.takes_class(&callee.class)
            && self
                .method
                .as_ref()
                .is_none_or(|re| re.is_match(&callee.method))
            && self
                .descriptor
                .as_ref()
                .is_none_or(|d| d == &callee.descriptor)
    }
}

/// Methods as BTrace names them as a trace pattern: `clazz` (name, `/regex/`, `+Super`),
/// `method` and `type` (a JVM descriptor or Java's `void (java.lang.String, int)`).
fn method_pattern(class: &str, method: &str, descriptor: &str) -> Result<MethodPattern, String> {
    let descriptor = match descriptor.trim() {
        "" => String::new(),
        d if d.starts_with('(') => d.to_string(),
        java => jvm_descriptor(java).ok_or_else(|| format!("type {java:?} is neither a JVM descriptor nor like \"void (java.lang.String, int)\""))?,
    };
    MethodPattern::parse(&format!("{class}::{method}{descriptor}"))
}

/// `void (java.lang.String, int[])` → `(Ljava/lang/String;[I)V`.
fn jvm_descriptor(java: &str) -> Option<String> {
    let (ret, params) = java.split_once('(')?;
    let params = params.trim().strip_suffix(')')?;
    let one = |t: &str| -> Option<String> {
        let t = t.trim();
        let (mut base, mut dims) = (t, 0);
        while let Some(inner) = base.strip_suffix("[]") {
            base = inner.trim_end();
            dims += 1;
        }
        let code = match base {
            "void" => "V".to_string(),
            "boolean" => "Z".into(),
            "byte" => "B".into(),
            "char" => "C".into(),
            "short" => "S".into(),
            "int" => "I".into(),
            "long" => "J".into(),
            "float" => "F".into(),
            "double" => "D".into(),
            "" => return None,
            class => format!("L{};", class.replace('.', "/")),
        };
        Some(format!("{}{code}", "[".repeat(dims)))
    };
    let params: Option<Vec<String>> = params
        .split(',')
        .filter(|p| !p.trim().is_empty())
        .map(one)
        .collect();
    Some(format!("({}){}", params?.concat(), one(ret)?))
}

/// A threshold the agent can apply for the handler (see [`Handler::duration_floor`]).
fn threshold(handler: &Handler) -> Option<Duration> {
    handler.duration_floor().map(Duration::from_nanos)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile;
    use crate::firing::empty_call;

    #[test]
    fn java_types_become_jvm_descriptors() {
        assert_eq!(
            jvm_descriptor("void (java.lang.String, int[])").as_deref(),
            Some("(Ljava/lang/String;[I)V")
        );
        assert_eq!(jvm_descriptor("long ()").as_deref(), Some("()J"));
        assert_eq!(jvm_descriptor("nonsense"), None);
    }

    #[test]
    fn a_duration_guard_becomes_the_agents_threshold() {
        let source = "import com.sun.btrace.annotations.*;\nimport static com.sun.btrace.BTraceUtils.*;\n@BTrace public class S {\n@OnMethod(clazz=\"a.B\", method=\"run\", location=@Location(Kind.RETURN))\npublic static void h(@Duration long d) { if (d > 1000) { println(d); } }\n@OnMethod(clazz=\"a.B\", method=\"run\", location=@Location(Kind.RETURN))\npublic static void g(@Duration long d) { println(d); }\n}";
        let script = compile(source, "S.java").unwrap();
        assert_eq!(
            threshold(&script.handlers[0]),
            Some(Duration::from_nanos(1001))
        );
        assert_eq!(threshold(&script.handlers[1]), None);
        // g takes every call: the agent cannot drop the short ones.
        let probes = Probes::of(&script, "S.java").unwrap();
        assert_eq!(
            probes.plan.to_string(),
            "mode:trace p:a.B::run p:a.B::run batches"
        );
        let call = |duration_ns| Call {
            class: "a.B".into(),
            method: "run".into(),
            descriptor: "()V".into(),
            duration_ns,
            outcome: Outcome::Returned(None),
            ..empty_call()
        };
        let takers = |c: &Call| probes.handlers.iter().filter(|(_, s)| s.takes(c)).count();
        assert_eq!((takers(&call(500)), takers(&call(5000))), (1, 2));
    }

    #[test]
    fn call_handlers_trace_call_sites_and_take_only_their_calls() {
        let source = "import com.sun.btrace.annotations.*;\nimport static com.sun.btrace.BTraceUtils.*;\n@BTrace public class S {\n\
            @OnMethod(clazz=\"a.B\", method=\"run\", location=@Location(value=Kind.CALL, clazz=\"/java\\\\.io\\\\..*/\", method=\"write\", where=Where.AFTER))\n\
            public static void after(@TargetMethodOrField String m) { println(m); }\n\
            @OnMethod(clazz=\"a.B\", method=\"run\", location=@Location(value=Kind.CALL, clazz=\"a.C\", method=\"/.*/\"))\n\
            public static void before(@TargetMethodOrField String m) { println(m); }\n\
            @OnMethod(clazz=\"a.B\", method=\"run\")\n\
            public static void entry() { println(1); }\n}";
        let script = compile(source, "S.java").unwrap();
        let probes = Probes::of(&script, "S.java").unwrap();
        assert_eq!(
            probes.plan.to_string(),
            "mode:trace c:a.B::run to:/java\\.io\\..*/::write c:a.B::run to:a.C::/.*/ entry:a.B::run exceptions batches"
        );
        let at_site = |class: &str, method: &str, threw: bool| Call {
            class: "a.B".into(),
            method: "run".into(),
            descriptor: "()V".into(),
            outcome: match threw {
                true => Outcome::Threw(None),
                false => Outcome::Returned(None),
            },
            callee: Some(Callee {
                class: class.into(),
                method: method.into(),
                descriptor: "()V".into(),
                invoke: "virtual".into(),
            }),
            ..empty_call()
        };
        let takers = |c: &Call| -> Vec<usize> {
            probes
                .handlers
                .iter()
                .filter(|(_, s)| s.takes(c))
                .map(|(i, _)| *i)
                .collect()
        };
        assert_eq!(takers(&at_site("java.io.PrintStream", "write", false)), [0]);
        assert_eq!(
            takers(&at_site("java.io.PrintStream", "write", true)),
            [] as [usize; 0]
        );
        assert_eq!(takers(&at_site("a.C", "go", true)), [1]);
        assert_eq!(takers(&at_site("a.C", "<init>", false)), [] as [usize; 0]);
        let own = Call {
            class: "a.B".into(),
            method: "run".into(),
            ..empty_call()
        };
        assert_eq!(takers(&own), [] as [usize; 0]);
        let entered = Reached {
            time_ns: 0,
            thread: "main".into(),
            tid: 1,
            class: "a.B".into(),
            method: "run".into(),
            descriptor: "()V".into(),
            point: Point::Entry,
            values: Vec::new(),
            sizes: Vec::new(),
            allocated: None,
            stack: Vec::new(),
        };
        let entry_takers: Vec<usize> = probes
            .handlers
            .iter()
            .filter(|(_, s)| s.takes_point(&entered))
            .map(|(i, _)| *i)
            .collect();
        assert_eq!(entry_takers, [2]);
        // `+a.C`: the agent knows which owners extend or implement a.C.
        let subtypes = source.replace("clazz=\"a.C\"", "clazz=\"+a.C\"");
        let script = compile(&subtypes, "S.java").unwrap();
        let probes = Probes::of(&script, "S.java").unwrap();
        assert!(probes.plan.to_string().contains(" to:+a.C::/.*/ "));
        let takers = |c: &Call| probes.handlers.iter().filter(|(_, s)| s.takes(c)).count();
        assert_eq!(takers(&at_site("a.D", "go", true)), 1);
    }

    #[test]
    fn annotation_values_take_the_scripts_arguments() {
        let source = "import org.openjdk.btrace.core.annotations.*;\nimport static org.openjdk.btrace.core.BTraceUtils.*;\n@BTrace public class S {\n\
            @OnMethod(clazz=\"/javax\\\\.swing\\\\..*/\", method=\"${m}\")\n\
            public static void m(@Self Object o, @ProbeClassName String c) { println(c); }\n\
            @OnMethod(clazz=\"${c}\", method=\"run\", location=@Location(value=Kind.CALL, clazz=\"${callee}\", method=\"${m}\"))\n\
            public static void call() { println(Sys.$(\"m\")); }\n\
            @OnTimer(value=50, from=\"${t}\") public static void tick() {}\n}";
        let compiled = |words: &[&str]| {
            let words: Vec<String> = words.iter().map(|w| w.to_string()).collect();
            let descriptors: crate::Descriptors = &|_| Err(String::new());
            crate::compile_with(
                source,
                "S.java",
                descriptors,
                &crate::Arguments::new(&words),
            )
            .unwrap()
        };
        // As in BTrace, a name no argument gives stays: the handler probes nothing.
        let bare = compiled(&[]);
        assert_eq!(
            bare.notes,
            [
                "line 4: no script argument m is given (NAME=VALUE after the script) for ${m}: this handler probes nothing, as in BTrace",
                "line 6: no script argument c is given (NAME=VALUE after the script) for ${c}: this handler probes nothing, as in BTrace",
            ]
        );
        let probes = Probes::of(&bare, "S.java").unwrap();
        assert!(probes.is_empty());
        assert_eq!(bare.handlers[2].trigger, Trigger::Timer(50));
        let given = compiled(&["m=paint", "c=a.B", "callee=java.util.Map", "t=250"]);
        assert!(given.notes.is_empty(), "{:?}", given.notes);
        assert_eq!(
            Probes::of(&given, "S.java").unwrap().plan.to_string(),
            "mode:trace c:a.B::run to:java.util.Map::paint entry:/javax\\.swing\\..*/::paint values exceptions batches"
        );
        assert_eq!(given.handlers[2].trigger, Trigger::Timer(250));
    }
}
