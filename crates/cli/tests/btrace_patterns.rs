//! How BTrace scripts name what they probe, on every JDK of the matrix, against
//! `workloads.Annotated`: `${name}` in annotation values stands for the script's `name=value`
//! arguments (a script in the shape of BTrace's `AllMethods` sample); `@Annotation` patterns select the
//! classes and methods annotated, whether they load during the session or were loaded
//! before; `+Supertype` callees at `Kind.CALL` take the calls whose owner class extends or
//! implements it, when it was loaded before its caller was instrumented.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{agent_library, jtap, Background};
use jtap_testkit::{jdks, JavaProcess};

/// A script in the shape of BTrace's `AllMethods` sample (jtap's own text).
const ALL_METHODS: &str = r#"import org.openjdk.btrace.core.annotations.*;
import org.openjdk.btrace.services.impl.Printer;

// Written for jtap in the shape of BTrace's AllMethods sample: a class regex, a method
// given as a script argument, an injected printer.
@BTrace
public class AllMethods {
    @Injected(ServiceType.RUNTIME)
    private static Printer out;

    @OnMethod(clazz = "/javax\\.swing\\..*/", method = "${m}")
    public static void m(@Self Object self, @ProbeClassName String klass, @ProbeMethodName String method) {
        out.println("this = " + self);
        out.print("entered " + klass);
        out.println("." + method);
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

/// A script in the shape of BTrace's `WebServiceTracker` sample (jtap's own text).
const WEB_SERVICE_TRACKER: &str = r#"import org.openjdk.btrace.core.annotations.*;
import static org.openjdk.btrace.core.BTraceUtils.*;

// Written for jtap in the shape of BTrace's WebServiceTracker sample: classes and methods
// selected by their annotations, at entry and at return.
@BTrace
public class WebServiceTracker {
    @OnMethod(clazz = "@javax.jws.WebService", method = "@javax.jws.WebMethod")
    public static void entered(@ProbeClassName String klass, @ProbeMethodName String method) {
        println(Strings.strcat("in ", Strings.strcat(klass, Strings.strcat(".", method))));
    }

    @OnMethod(clazz = "@javax.jws.WebService", method = "@javax.jws.WebMethod", location = @Location(Kind.RETURN))
    public static void left(@ProbeClassName String klass, @ProbeMethodName String method, @Duration long d) {
        println(Strings.strcat("out ", Strings.strcat(klass, Strings.strcat(" after ", Strings.str(d / 1000)))));
    }
}
"#;

/// The workload's endpoint handlers by class and method annotation, and its handlers
/// (`Handler`, not the class-retained `Internal`) by a method annotation alone.
const ENDPOINTS: &str = r#"import org.openjdk.btrace.core.annotations.*;
import static org.openjdk.btrace.core.BTraceUtils.*;
@BTrace public class Endpoints {
    @OnMethod(clazz = "@workloads.Annotated$Endpoint", method = "@workloads.Annotated$Handler", location = @Location(Kind.RETURN))
    public static void handled(@ProbeClassName String c, @ProbeMethodName String m, @Return int r) {
        println(c + "." + m + " = " + r);
    }

    @OnMethod(clazz = "/workloads\\.Annotated.*/", method = "@/.*\\$(Handler|Internal)/")
    public static void entered(@ProbeClassName String c, @ProbeMethodName String m) {
        println("entered " + c + "." + m);
    }
}
"#;

/// Every put into a map that `fill` methods make.
const PUTS: &str = r#"import org.openjdk.btrace.core.annotations.*;
import static org.openjdk.btrace.core.BTraceUtils.*;
@BTrace public class Puts {
    @OnMethod(clazz = "/workloads\\.Annotated(\\$Again)?/", method = "fill", location = @Location(value = Kind.CALL, clazz = "+java.util.Map", method = "put", where = Where.AFTER))
    public static void put(@TargetMethodOrField(fqn = true) String m, String key) {
        println(key + " by " + m);
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
        bare.stderr.contains("line 11: no script argument m is given (NAME=VALUE after the script) for ${m}: this handler probes nothing, as in BTrace"),
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

#[test]
fn classes_and_methods_are_selected_by_their_annotations() {
    agent_library();
    let dir = tempfile::tempdir().unwrap();
    let sample = write(dir.path(), "WebServiceTracker.java", WEB_SERVICE_TRACKER);
    let checked = jtap(["btrace", "--check", &sample]);
    assert_eq!(checked.code, 0, "{}", checked.stderr);
    assert!(
        checked.stdout.contains("ok: 2 probe handlers"),
        "{}",
        checked.stdout
    );
    let script = write(dir.path(), "Endpoints.java", ENDPOINTS);
    let expected = [
        "entered workloads.Annotated$Orders.cancel",
        "entered workloads.Annotated$Orders.place",
        "entered workloads.Annotated$Plain.place",
        "workloads.Annotated$Orders.cancel = 4",
        "workloads.Annotated$Orders.place = 10",
    ];
    for jdk in jdks() {
        let rounds = tempfile::tempdir().unwrap();
        let mut jvm = JavaProcess::builder(jdk, "workloads.Annotated")
            .cwd(rounds.path())
            .start();
        // Round 1 loads the classes (the hook reads them), round 2 finds them loaded.
        for n in 1..=2 {
            let (out, err) = over_round(&mut jvm, rounds.path(), n, &script, &[]);
            let mut lines: Vec<&str> = out.lines().collect();
            lines.sort_unstable();
            assert_eq!(lines, expected, "JDK {} round {n}: {err}", jdk.version);
            assert!(
                err.contains("class bytes identical to before for 2/2"),
                "JDK {} round {n}: {err}",
                jdk.version
            );
        }
        assert!(jvm.is_running(), "JDK {}", jdk.version);
    }
}

#[test]
fn plus_callees_take_the_calls_of_loaded_subtypes() {
    agent_library();
    let dir = tempfile::tempdir().unwrap();
    let script = write(dir.path(), "Puts.java", PUTS);
    for jdk in jdks() {
        let rounds = tempfile::tempdir().unwrap();
        let mut jvm = JavaProcess::builder(jdk, "workloads.Annotated")
            .cwd(rounds.path())
            .start();
        // Round 1: `fill` was instrumented before LateMap loaded, `Again.fill` after (the hook
        // saw LateMap extend TreeMap); round 2 finds all of them loaded. Registry is no map.
        for n in 1..=2 {
            let (out, err) = over_round(&mut jvm, rounds.path(), n, &script, &[]);
            let put = "#put(java.lang.Object, java.lang.Object)";
            let by = |owner: &str| format!("virtual java.lang.Object {owner}{put}");
            let late = format!("late by {}\n", by("workloads.Annotated$LateMap"));
            let expected = format!(
                "map by interface java.lang.Object java.util.Map{put}\nhash by {}\nledger by {}\ntree by {}\n{}again by {}\n",
                by("java.util.HashMap"),
                by("workloads.Annotated$Ledger"),
                by("java.util.TreeMap"),
                if n == 1 { "" } else { late.as_str() },
                by("workloads.Annotated$LateMap"),
            );
            assert_eq!(out, expected, "JDK {} round {n}: {err}", jdk.version);
        }
        assert!(jvm.is_running(), "JDK {}", jdk.version);
    }
}
