//! How BTrace scripts name what they probe, on every JDK of the matrix, against
//! `workloads.Annotated`: `${name}` in annotation values stands for the script's `name=value`
//! arguments (BTrace's own `AllMethods` sample, unchanged).

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{agent_library, jtap, Background};
use jtap_testkit::{jdks, JavaProcess};

/// BTrace's sample `AllMethods.java` as it ships (its licence header left out).
const ALL_METHODS: &str = r#"package org.openjdk.btrace.samples;

import org.openjdk.btrace.core.annotations.BTrace;
import org.openjdk.btrace.core.annotations.Injected;
import org.openjdk.btrace.core.annotations.OnMethod;
import org.openjdk.btrace.core.annotations.ProbeClassName;
import org.openjdk.btrace.core.annotations.ProbeMethodName;
import org.openjdk.btrace.core.annotations.Self;
import org.openjdk.btrace.core.annotations.ServiceType;
import org.openjdk.btrace.services.impl.Printer;

/**
 * This script traces method entry into every method of
 * every class in javax.swing package! Think before using
 * this script -- this will slow down your app significantly!!
 */
@BTrace
public class AllMethods {
    @Injected(ServiceType.RUNTIME)
    private static Printer printer;

    @OnMethod(
            clazz = "/javax\\.swing\\..*/",
            method = "${m}"
    )
    public static void m(@Self Object o, @ProbeClassName String probeClass, @ProbeMethodName String probeMethod) {
        printer.println("this = " + o);
        printer.print("entered " + probeClass);
        printer.println("." + probeMethod);
    }
}
"#;

/// `${name}` in a class, a method and a `@Location`'s callee, and a timer's period.
const ARGUMENTS: &str = r#"import org.openjdk.btrace.core.annotations.*;
import static org.openjdk.btrace.core.BTraceUtils.*;
@BTrace public class Args {
    @OnMethod(clazz = "${c}", method = "${m}", location = @Location(Kind.RETURN))
    public static void returned(@ProbeMethodName String m, @Return int r) {
        println(m + " returned " + r + " for " + Sys.$("who"));
    }

    @OnMethod(clazz = "${c}", method = "requests", location = @Location(value = Kind.CALL, clazz = "${c}$Plain", method = "${m}"))
    public static void called(@TargetMethodOrField String m) {
        println("called Plain." + m);
    }
}
"#;

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

/// Runs `jtap btrace <pid> script args...` over round `n` of the workload, then Ctrl-C:
/// stdout and stderr, once it exited 0.
fn over_round(
    jvm: &mut JavaProcess,
    dir: &Path,
    n: u32,
    script: &str,
    args: &[&str],
) -> (String, String) {
    let pid = jvm.pid().to_string();
    let mut words = vec!["btrace", &pid, script, "-d", "60s"];
    words.extend(args);
    let run = Background::tracing(&words, dir);
    std::fs::write(dir.join(format!("go{n}")), b"").unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !jvm.stdout.text().contains(&format!("DONE {n} ")) {
        assert!(Instant::now() < deadline, "round {n} did not finish");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(300));
    run.interrupt();
    let (code, out, err) = run.finish(Duration::from_secs(60));
    assert_eq!(code, 0, "{err}");
    (out, err)
}

#[test]
fn annotation_values_take_the_scripts_arguments() {
    agent_library();
    let dir = tempfile::tempdir().unwrap();
    let sample = write(dir.path(), "AllMethods.java", ALL_METHODS);
    // As in BTrace, a script naming an argument not given compiles; that handler probes nothing.
    let bare = jtap(["btrace", "--check", &sample]);
    assert_eq!(bare.code, 0, "{}", bare.stderr);
    assert!(
        bare.stderr.contains("line 22: no script argument m is given (NAME=VALUE after the script) for ${m}: this handler probes nothing, as in BTrace"),
        "{}",
        bare.stderr
    );
    let given = jtap(["btrace", "--check", &sample, "m=getListenerCount"]);
    assert_eq!(given.code, 0, "{}", given.stderr);
    assert!(given.stderr.is_empty(), "{}", given.stderr);
    assert!(
        given.stdout.contains("ok: 1 probe handlers"),
        "{}",
        given.stdout
    );
    let args = write(dir.path(), "Args.java", ARGUMENTS);
    for jdk in jdks() {
        let rounds = tempfile::tempdir().unwrap();
        let mut jvm = JavaProcess::builder(jdk, "workloads.Annotated")
            .cwd(rounds.path())
            .start();
        let (out, _) = over_round(&mut jvm, rounds.path(), 1, &sample, &["m=getListenerCount"]);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 2, "JDK {}: {out}", jdk.version);
        assert!(
            lines[0].starts_with("this = javax.swing.event.EventListenerList@"),
            "JDK {}: {out}",
            jdk.version
        );
        assert_eq!(
            lines[1], "entered javax.swing.event.EventListenerList.getListenerCount",
            "JDK {}",
            jdk.version
        );
        let words = ["c=workloads.Annotated$Orders", "m=/place|cancel/", "who=me"];
        let (out, _) = over_round(&mut jvm, rounds.path(), 2, &args, &words);
        assert_eq!(
            out, "place returned 10 for me\ncancel returned 4 for me\n",
            "JDK {}",
            jdk.version
        );
        let words = ["c=workloads.Annotated", "m=place"];
        let (out, _) = over_round(&mut jvm, rounds.path(), 3, &args, &words);
        assert_eq!(out, "called Plain.place\n", "JDK {}", jdk.version);
        assert!(jvm.is_running(), "JDK {}", jdk.version);
    }
}
