//! Each injection point on its own: a sample program keeps its exact output, verification
//! passes (HotSpot verifies classpath classes), and the probe is called as often as expected.

mod common;

use jtap_classfile::plan::{Clock, MemberFilter, Pattern, Point, Probe, Value};
use jtap_classfile::InjectionPlan;

fn probe(point: Point, method: &str, values: &[Value]) -> InjectionPlan {
    InjectionPlan {
        runtime_class: common::PROBES.into(),
        clock: None,
        guards: Vec::new(),
        probes: vec![Probe {
            methods: MemberFilter::any(),
            point,
            method: method.into(),
            values: values.to_vec(),
        }],
    }
}

/// Runs Sample instrumented with `plan`; returns the probe call count, the probe log (with
/// method ids replaced by `Class.name`) .
fn run_logged(plan: &InjectionPlan) -> (u64, Vec<String>) {
    let classes = common::sample_classes("11");
    let harness = common::harness();
    let (expected, _, _) = common::run_java(
        &format!("{}:{}", classes.display(), harness.display()),
        "Sample",
    );
    let tmp = tempfile::tempdir().unwrap();
    let registry = common::instrument_dir(&classes, tmp.path(), plan);
    let (actual, calls, log) = common::run_java(
        &format!("{}:{}", tmp.path().display(), harness.display()),
        "Sample",
    );
    assert_eq!(
        expected, actual,
        "output changed with {:?}",
        plan.probes[0].point
    );
    let log = log
        .lines()
        .filter_map(|l| l.strip_prefix("probe "))
        .map(|l| {
            let mut p = l.splitn(3, ' ');
            let (kind, id, rest) = (p.next().unwrap(), p.next().unwrap(), p.next().unwrap_or(""));
            let m = &registry.methods[id.parse::<usize>().unwrap()];
            format!("{kind} {}.{} {rest}", m.class, m.name)
        })
        .collect();
    (calls, log)
}

fn run(plan: &InjectionPlan) -> u64 {
    run_logged(plan).0
}

#[test]
fn values_reach_the_probes() {
    let (_, log) = run_logged(&probe(Point::Entry, "entry", &[MethodId, This, Args]));
    assert!(
        log.contains(&"entry Sample.greet null [bob, 42, 0.25] null".to_string()),
        "{log:?}"
    );
    assert!(
        log.contains(&"entry Sample.wideLocals null [5, 2.5, 2, 7] null".to_string()),
        "{log:?}"
    );
    assert!(
        log.contains(&"entry Sample.syncMethod Sample [4] null".to_string()),
        "{log:?}"
    );
    assert!(
        log.contains(&"entry Sample$Sub.<init> null [-2] null".to_string()),
        "{log:?}"
    );
    let (_, log) = run_logged(&probe(Point::Return, "exit", &[MethodId, ReturnValue]));
    for l in [
        "exit Sample.add 5 null null",
        "exit Sample.mul 42 null null",
        "exit Sample.upper Q null null",
        "exit Sample.odd true null null",
        "exit Sample.low 44 null null",
        "exit Sample.nothing null null null",
    ] {
        assert!(log.contains(&l.to_string()), "{l} not in {log:?}");
    }
    let (_, log) = run_logged(&probe(Point::ExceptionExit, "thrown", &[MethodId, Thrown]));
    assert_eq!(
        log.iter()
            .filter(|l| l.as_str()
                == "thrown Sample.thrower java.lang.IllegalStateException: deep null null")
            .count(),
        6,
        "{log:?}"
    );
    assert!(
        log.contains(
            &"thrown Sample$Sub.<init> java.lang.IllegalArgumentException: unlucky 13 null null"
                .to_string()
        ),
        "{log:?}"
    );
    let (_, log) = run_logged(&probe(
        Point::Allocation,
        "alloc",
        &[MethodId, SiteId, NewObject],
    ));
    assert!(
        log.iter()
            .any(|l| l.starts_with("alloc Sample.arrays ")
                && l.ends_with(" [[[I, [I], [[I, [I]] null")),
        "{log:?}"
    );
    assert!(
        log.iter()
            .any(|l| l.starts_with("alloc Sample.main ") && l.ends_with(" Sample$Sub null")),
        "{log:?}"
    );
}

use Value::*;

#[test]
fn entry() {
    assert!(run(&probe(Point::Entry, "entry", &[MethodId, This, Args])) > 40);
}

#[test]
fn returns() {
    assert!(run(&probe(Point::Return, "exit", &[MethodId, ReturnValue])) > 40);
}

#[test]
fn exception_exit() {
    // thrower(5..0) and the Sub(13) constructor: 7 frames left by an exception.
    assert_eq!(
        run(&probe(Point::ExceptionExit, "thrown", &[MethodId, Thrown])),
        7
    );
}

#[test]
fn before_call() {
    assert!(
        run(&probe(
            Point::BeforeCall(MemberFilter::any()),
            "beforeCall",
            &[MethodId, SiteId]
        )) > 50
    );
}

#[test]
fn after_call() {
    assert!(
        run(&probe(
            Point::AfterCall(MemberFilter::any()),
            "afterCall",
            &[MethodId, SiteId, ReturnValue, Thrown]
        )) > 50
    );
}

#[test]
fn the_called_methods_receiver_and_arguments_reach_call_probes() {
    let before = probe(
        Point::BeforeCall(MemberFilter::any()),
        "callee",
        &[MethodId, Target, CallArgs],
    );
    let (calls, log) = run_logged(&before);
    assert!(calls > 50);
    for line in [
        // Static calls: no receiver; wide and narrow arguments.
        "callee Sample.main null [bob, 42, 0.25] null",
        "callee Sample.main null [6, 7] null",
        "callee Sample.main null [5, 2.5, 2, 7] null",
        "callee Sample.main null [q] null",
        // Virtual calls on a receiver.
        "callee Sample.main Sample [4] null",
        "callee Sample.lambdas java.util.ArrayList [0] null",
        // A constructor's receiver is not initialized before it runs.
        "callee Sample.main null [-2] null",
    ] {
        assert!(log.contains(&line.to_string()), "{line} not in {log:?}");
    }
    let after = probe(
        Point::AfterCall(MemberFilter::any()),
        "calleeAfter",
        &[MethodId, Target, CallArgs, ReturnValue],
    );
    let (_, log) = run_logged(&after);
    for line in [
        "calleeAfter Sample.main null [2, 3] 5",
        "calleeAfter Sample.main Sample [5] 35",
    ] {
        assert!(log.contains(&line.to_string()), "{line} not in {log:?}");
    }
    // The caller's `this` at its calls: not before a constructor's super call.
    let (_, log) = run_logged(&probe(
        Point::BeforeCall(MemberFilter::any()),
        "callee",
        &[MethodId, This, CallArgs],
    ));
    for line in [
        "callee Sample$Sub.toString Sample$Sub [pos, 4] null",
        "callee Sample$Sub.<init> null [pos] null",
        "callee Sample$Sub.<init> Sample$Sub [13] null",
        "callee Sample.main null [6, 7] null",
    ] {
        assert!(log.contains(&line.to_string()), "{line} not in {log:?}");
    }
    // Both at once, with the caller's own values: one copy serves both.
    let mut both = before.clone();
    both.probes.extend(after.probes);
    both.probes.push(
        probe(Point::Entry, "entry", &[MethodId, This, Args])
            .probes
            .remove(0),
    );
    let (_, log) = run_logged(&both);
    assert!(log.contains(&"calleeAfter Sample.main null [6, 7] 42".to_string()));
}

#[test]
fn after_call_filtered() {
    // thrower is called 6 times (one call from main, five recursive); all six calls throw.
    let f = MemberFilter {
        owner: Pattern::Exact("Sample".into()),
        name: Pattern::Exact("thrower".into()),
        descriptor: Pattern::Any,
    };
    assert_eq!(
        run(&probe(
            Point::AfterCall(f),
            "afterCall",
            &[MethodId, SiteId, ReturnValue, Thrown]
        )),
        6
    );
}

#[test]
fn allocation() {
    assert!(
        run(&probe(
            Point::Allocation,
            "alloc",
            &[MethodId, SiteId, NewObject]
        )) > 10
    );
}

#[test]
fn monitors() {
    assert_eq!(
        run(&probe(
            Point::MonitorEnter,
            "monitor",
            &[MethodId, SiteId, Lock]
        )),
        2
    );
    assert_eq!(
        run(&probe(
            Point::MonitorExit,
            "monitor",
            &[MethodId, SiteId, Lock]
        )),
        2
    );
}

#[test]
fn fields() {
    assert!(
        run(&probe(
            Point::FieldRead(MemberFilter::any()),
            "field",
            &[MethodId, SiteId, FieldValue]
        )) > 5
    );
    assert!(
        run(&probe(
            Point::FieldWrite(MemberFilter::any()),
            "field",
            &[MethodId, SiteId, FieldValue]
        )) > 5
    );
}

#[test]
fn the_accessed_object_reaches_field_probes() {
    let (calls, log) = run_logged(&probe(
        Point::FieldWrite(MemberFilter::any()),
        "fieldTarget",
        &[MethodId, This, Target, FieldValue],
    ));
    assert!(calls > 5);
    for line in [
        // Instance fields: the caller's `this` and the object written, with the new value.
        "fieldTarget Sample$Sub.<init> Sample$Sub Sample$Sub 4",
        "fieldTarget Sample.<init> Sample Sample 1.5",
        // A static field has no object.
        "fieldTarget Sample.<clinit> null null 7",
    ] {
        assert!(log.contains(&line.to_string()), "{line} not in {log:?}");
    }
    let (_, log) = run_logged(&probe(
        Point::FieldRead(MemberFilter::any()),
        "fieldTarget",
        &[MethodId, This, Target, FieldValue],
    ));
    assert!(
        log.contains(&"fieldTarget Sample$Sub.toString Sample$Sub Sample$Sub pos".to_string()),
        "{log:?}"
    );
}

#[test]
fn lines() {
    assert!(
        run(&probe(
            Point::Line(Vec::new()),
            "line",
            &[MethodId, LineNumber]
        )) > 100
    );
}

#[test]
fn everything_at_once() {
    assert!(run(&InjectionPlan::everything(common::PROBES)) > 500);
}

#[test]
fn the_entry_mark_reaches_every_exit() {
    // Probes.clock counts probe calls, so the mark's age at an exit is the number of
    // instrumented calls that ended inside the method; entries read it as a field or call
    // Probes.clock().
    for clock in [Clock::Field("clock".into()), Clock::Method("clock".into())] {
        let plan = InjectionPlan {
            runtime_class: common::PROBES.into(),
            clock: Some(clock),
            guards: Vec::new(),
            probes: vec![
                Probe {
                    methods: MemberFilter::any(),
                    point: Point::Return,
                    method: "leave".into(),
                    values: vec![Mark, MethodId],
                },
                Probe {
                    methods: MemberFilter::any(),
                    point: Point::ExceptionExit,
                    method: "leaveThrown".into(),
                    values: vec![Mark, MethodId, Thrown],
                },
            ],
        };
        let (_, log) = run_logged(&plan);
        // fact(10): the outermost call saw the nine inner ones end.
        for inner in 0..10 {
            let line = format!("leave Sample.fact {inner} null null");
            assert_eq!(
                log.iter().filter(|l| **l == line).count(),
                1,
                "{line}: {log:?}"
            );
        }
        // thrower(5): six frames left by the exception, each after the ones it called.
        for inner in 0..6 {
            let line = format!(
                "leaveThrown Sample.thrower {inner} java.lang.IllegalStateException: deep null"
            );
            assert_eq!(
                log.iter().filter(|l| **l == line).count(),
                1,
                "{line}: {log:?}"
            );
        }
        // Wide parameters below the mark's slots, and a constructor that throws after super().
        assert!(
            log.contains(&"leave Sample.wideLocals 0 null null".to_string()),
            "{log:?}"
        );
        assert!(
            log.iter()
                .any(|l| l.starts_with("leaveThrown Sample$Sub.<init> ")
                    && l.ends_with(" java.lang.IllegalArgumentException: unlucky 13 null")),
            "{log:?}"
        );
    }
}

#[test]
fn a_guard_on_the_arguments_leaves_rejected_calls_unprobed() {
    use jtap_classfile::guard::{Comparison, Guard, Operand};
    let probes = |guards: Vec<(MemberFilter, Guard)>| InjectionPlan {
        runtime_class: common::PROBES.into(),
        clock: None,
        guards,
        probes: [
            (Point::Entry, "entry", vec![MethodId, This, Args]),
            (Point::Return, "exit", vec![MethodId, ReturnValue]),
            (Point::ExceptionExit, "thrown", vec![MethodId, Thrown]),
        ]
        .into_iter()
        .map(|(point, method, values)| Probe {
            methods: MemberFilter::any(),
            point,
            method: method.into(),
            values,
        })
        .collect(),
    };
    let only = |name: &str| MemberFilter {
        owner: Pattern::Exact("Sample".into()),
        name: Pattern::Exact(name.into()),
        descriptor: Pattern::Any,
    };
    // wideLocals(5L, 2.5, 2, 7L) and wideLocals(1L, 1.0, 0, 1L): a double, an int and longs.
    let second_is_over_two = Guard::Compare(
        Operand::Arg(1),
        Comparison::Gt,
        Operand::Real(2f64.to_bits()),
    );
    let first_is_one_and_third_zero = Guard::All(vec![
        Guard::Compare(Operand::Arg(0), Comparison::Eq, Operand::Integer(1)),
        Guard::Not(Box::new(Guard::Compare(
            Operand::Arg(2),
            Comparison::Ne,
            Operand::Integer(0),
        ))),
    ]);
    let counts = |log: &[String], method: &str| {
        ["entry", "exit"].map(|kind| {
            log.iter()
                .filter(|l| l.starts_with(&format!("{kind} Sample.{method} ")))
                .count()
        })
    };
    for (guard, kept) in [
        (second_is_over_two, "[5, 2.5, 2, 7]"),
        (first_is_one_and_third_zero, "[1, 1.0, 0, 1]"),
    ] {
        let (_, log) = run_logged(&probes(vec![(only("wideLocals"), guard.clone())]));
        assert_eq!(counts(&log, "wideLocals"), [1, 1], "{guard:?}: {log:?}");
        assert!(
            log.contains(&format!("entry Sample.wideLocals null {kept} null")),
            "{guard:?}: {log:?}"
        );
        // Methods the guard does not select keep every probe.
        assert_eq!(counts(&log, "add"), [1, 1], "{log:?}");
    }
    // With the entry's mark kept beside the verdict (two kept locals in every frame).
    let mut marked = probes(vec![(
        only("wideLocals"),
        Guard::Compare(Operand::Arg(3), Comparison::Ge, Operand::Integer(7)),
    )]);
    marked.clock = Some(Clock::Field("clock".into()));
    marked.probes.push(Probe {
        methods: MemberFilter::any(),
        point: Point::Return,
        method: "leave".into(),
        values: vec![Mark, MethodId],
    });
    let (_, log) = run_logged(&marked);
    assert_eq!(counts(&log, "wideLocals"), [1, 1], "{log:?}");
    assert_eq!(
        log.iter()
            .filter(|l| l.starts_with("leave Sample.wideLocals "))
            .count(),
        1,
        "{log:?}"
    );
    // A reference argument: greet("bob", 42L, 0.25) is never given a null name.
    let (_, log) = run_logged(&probes(vec![(only("greet"), Guard::Null(0, true))]));
    assert_eq!(counts(&log, "greet"), [0, 0], "{log:?}");
    let (_, log) = run_logged(&probes(vec![(
        only("greet"),
        Guard::Any(vec![
            Guard::Null(0, false),
            Guard::Compare(Operand::Arg(1), Comparison::Lt, Operand::Integer(0)),
        ]),
    )]));
    assert_eq!(counts(&log, "greet"), [1, 1], "{log:?}");
    // A guard that does not fit the method (a numeric test of a String) is left out: every
    // call is probed.
    let (_, log) = run_logged(&probes(vec![(
        only("greet"),
        Guard::Compare(Operand::Arg(0), Comparison::Gt, Operand::Integer(0)),
    )]));
    assert_eq!(counts(&log, "greet"), [1, 1], "{log:?}");
}
