//! Behaviour: a real program runs with all its classes instrumented (every probe kind) and
//! prints exactly what it printed before, while the probes are called.

mod common;

use std::fs;
use std::path::Path;
use std::process::Command;

use jtap_classfile::inject::instrument_class;
use jtap_classfile::plan::Registry;
use jtap_classfile::InjectionPlan;

const GROOVY: &str = "/usr/share/java/groovy-all.jar";

const SCRIPT: &str = r#"
def m = [:]
(1..25).each { m[it] = (1..it).inject(1G) { a, b -> a * b } }
println m.collect { k, v -> "$k!=$v" }.join("\n")
println([3, 1, 2, 9, -4].sort())
class P { String n; int a; String toString() { "P($n,$a)" } }
def ps = [new P(n: "x", a: 3), new P(n: "y", a: 1), new P(n: "z", a: 2)]
println ps.sort { it.a }*.n
println ps.groupBy { it.a % 2 }
try { throw new IllegalStateException("boom") } catch (e) { println "caught ${e.message}" }
def fib; fib = { n -> n < 2 ? n : fib(n - 1) + fib(n - 2) }
println((0..20).collect(fib))
println String.format("%.6f %d %s", Math.PI, Long.MAX_VALUE, 'abc'.reverse())
def sb = new StringBuilder(); synchronized (sb) { 10.times { sb << it } }; println sb
println new groovy.json.JsonBuilder([a: 1, b: [1, 2, 3], c: "d"]).toString()
println(("a".."e").collect { it.toUpperCase() }.join(","))
"#;

fn run(cp: &str, report: bool) -> (String, String) {
    let mut cmd = Command::new(format!("{}/bin/java", common::JDK17));
    if report {
        cmd.arg("-Djtap.probes.report=1");
    }
    let out = cmd
        .args([
            "-Xshare:off",
            "-cp",
            cp,
            "groovy.ui.GroovyMain",
            "-e",
            SCRIPT,
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "groovy failed:\n{stdout}\n{stderr}");
    (stdout, stderr)
}

#[test]
fn groovy_script_behaves_identically_when_instrumented() {
    if !Path::new(GROOVY).exists() {
        eprintln!("skipping: {GROOVY} not installed (package groovy)");
        return;
    }
    let harness = common::harness();
    let tmp = tempfile::tempdir().unwrap();
    let plan = InjectionPlan::everything(common::PROBES);
    let mut registry = Registry::default();
    let (mut classes, mut methods, mut refused) = (0, 0, 0);
    for (name, bytes) in common::jar_classes(Path::new(GROOVY)) {
        let out = instrument_class(&bytes, &plan, &mut registry).unwrap();
        classes += 1;
        methods += out.methods_instrumented;
        refused += out.refused.len();
        let p = tmp.path().join(&name);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, out.bytes).unwrap();
    }
    let original = run(&format!("{GROOVY}:{}", harness.display()), false);
    let instrumented = run(
        &format!("{}:{GROOVY}:{}", tmp.path().display(), harness.display()),
        true,
    );
    let calls: u64 = instrumented
        .1
        .lines()
        .find_map(|l| l.strip_prefix("jtap-probes: "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    println!("groovy-all: {classes} classes, {methods} methods instrumented, {refused} refused; probe calls: {calls}");
    assert_eq!(
        original.0, instrumented.0,
        "output changed under instrumentation"
    );
    assert!(calls > 100_000, "probes were not called ({calls})");
}
