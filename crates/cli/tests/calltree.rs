//! `jtap calltree` stays bounded on entry calls that make more calls than a tree holds
//! (`workloads.TreeFlood`), on every JDK of the matrix: with `-n 1` the session ends as the
//! first entry call ends, its tree truncated and saying so; a session ending inside an entry
//! call (`-d`) prints what that call's tree holds, marked unfinished. A plan longer than the
//! attach argument reaches the agent. Also `trace --return` shows `-> null` for a method
//! that returned null.

mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{agent_library, Background};
use jtap_testkit::{jdks, JavaProcess, Jdk};

/// The most a session may keep its probes after its bound was reached (issue 39).
const AFTER_BOUND: Duration = Duration::from_secs(2);

fn flood(jdk: &Jdk, mode: &str) -> (JavaProcess, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let jvm = JavaProcess::builder(jdk, "workloads.TreeFlood")
        .arg(mode)
        .cwd(dir.path())
        .start();
    (jvm, dir)
}

fn json_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn now_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        * 1e3
}

/// The names of a tree node's children.
fn children(node: &serde_json::Value) -> Vec<String> {
    node["children"]
        .as_array()
        .map(|c| {
            c.iter()
                .map(|n| n["method"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn assert_restored(stderr: &str, context: &str) {
    let line = stderr
        .lines()
        .find(|l| l.contains("restored "))
        .unwrap_or_else(|| panic!("{context}: no restore report: {stderr}"));
    assert!(
        line.contains("identical to before for 1/1"),
        "{context}: {line}"
    );
}

#[test]
fn calltree_n_1_ends_when_the_first_entry_call_ends_even_with_a_full_tree() {
    agent_library();
    for jdk in jdks() {
        let v = jdk.version;
        let (mut jvm, dir) = flood(jdk, "wide");
        let pid = jvm.pid().to_string();
        let args = [
            "calltree",
            &pid,
            "workloads.TreeFlood::wide",
            "--json",
            "-n",
            "1",
        ];
        let mut tree = Background::start(&[&args[..], &["-d", "120s"]].concat(), dir.path());
        tree.wait_stderr("jtap: tracing:", Duration::from_secs(30));
        tree.wait_stderr("jtap: restored ", Duration::from_secs(60));
        let restored = now_ms();
        let (code, out, err) = tree.finish(Duration::from_secs(30));
        assert_eq!(code, 0, "JDK {v}: {err}");
        let trees = json_lines(&out);
        assert_eq!(trees.len(), 1, "JDK {v}: {out}");
        let t = &trees[0];
        assert!(
            t["truncated"].as_u64().unwrap() > 0,
            "JDK {v}: not full: {t}"
        );
        assert_eq!(t["unfinished"], false, "JDK {v}");
        let ended =
            (t["time_ns"].as_u64().unwrap() + t["tree"]["total_ns"].as_u64().unwrap()) as f64 / 1e6;
        let after = Duration::from_secs_f64((restored - ended).max(0.0) / 1e3);
        eprintln!("JDK {v}: classes restored {after:?} after the entry call ended");
        assert!(
            after <= AFTER_BOUND,
            "JDK {v}: classes restored {after:?} after the entry call ended: {err}"
        );
        let names = children(&t["tree"]);
        assert!(
            names.iter().any(|n| n == "workloads.TreeFlood.leaf"),
            "JDK {v}: {names:?}"
        );
        // The string concatenation's invokedynamic, named by its bootstrap method's class.
        assert!(
            names
                .iter()
                .any(|n| n == "java.lang.invoke.StringConcatFactory.makeConcatWithConstants"),
            "JDK {v}: {names:?}"
        );
        assert!(
            names.iter().all(|n| !n.starts_with('.')),
            "JDK {v}: a call site without its class: {names:?}"
        );
        assert_restored(&err, &format!("JDK {v}"));
    }
}

/// A plan longer than the attach `load` argument carries on JDKs before 24 (1 KiB): the
/// agent reads it over the channel, and times what it names.
#[test]
fn a_plan_longer_than_the_attach_argument_reaches_the_agent() {
    agent_library();
    let padding = (0..40).map(|i| format!("workloads.NoSuchClass{i:02}::noSuchMethod{i:02}"));
    let inner: Vec<String> = std::iter::once("workloads.TreeFlood::leaf".to_string())
        .chain(padding)
        .collect();
    let inner = inner.join(",");
    assert!(inner.len() > 1024);
    for jdk in jdks() {
        let v = jdk.version;
        let (mut jvm, _dir) = flood(jdk, "wide");
        let pid = jvm.pid().to_string();
        let args = [
            "calltree",
            &pid,
            "workloads.TreeFlood::wide",
            "--inner",
            &inner,
        ];
        let run = common::jtap([&args[..], &["--json", "-n", "1", "-d", "60s"]].concat());
        assert_eq!(run.code, 0, "JDK {v}: {}", run.stderr);
        let trees = json_lines(&run.stdout);
        assert_eq!(trees.len(), 1, "JDK {v}: {}", run.stdout);
        let names = children(&trees[0]["tree"]);
        assert_eq!(names, ["workloads.TreeFlood.leaf"], "JDK {v}");
        assert_restored(&run.stderr, &format!("JDK {v}"));
    }
}

#[test]
fn a_session_ending_inside_an_entry_call_prints_its_unfinished_tree() {
    agent_library();
    for jdk in jdks() {
        let v = jdk.version;
        let (mut jvm, dir) = flood(jdk, "long");
        let pid = jvm.pid().to_string();
        let args = [
            "calltree",
            &pid,
            "workloads.TreeFlood::wide",
            "--json",
            "-d",
            "3s",
        ];
        let mut tree = Background::start(&args, dir.path());
        tree.wait_stderr("jtap: tracing:", Duration::from_secs(30));
        let traced = now_ms();
        tree.wait_stderr("jtap: restored ", Duration::from_secs(60));
        let took = Duration::from_secs_f64((now_ms() - traced) / 1e3);
        let (code, out, err) = tree.finish(Duration::from_secs(30));
        assert_eq!(code, 0, "JDK {v}: {err}");
        assert!(
            took <= Duration::from_secs(3) + AFTER_BOUND,
            "JDK {v}: -d 3s took {took:?}: {err}"
        );
        let trees = json_lines(&out);
        let unfinished: Vec<_> = trees.iter().filter(|t| t["unfinished"] == true).collect();
        assert_eq!(unfinished.len(), 1, "JDK {v}: {out}");
        assert!(
            children(&unfinished[0]["tree"])
                .iter()
                .any(|n| n == "workloads.TreeFlood.leaf"),
            "JDK {v}: {out}"
        );
        assert_restored(&err, &format!("JDK {v}"));
    }
}

#[test]
fn trace_return_shows_null_returned() {
    agent_library();
    for jdk in jdks() {
        let v = jdk.version;
        let (mut jvm, dir) = flood(jdk, "wide");
        let pid = jvm.pid().to_string();
        let args = [
            "trace",
            &pid,
            "workloads.TreeFlood::maybe",
            "--return",
            "-n",
            "4",
        ];
        let mut trace = Background::start(&args, dir.path());
        trace.wait_stderr("jtap: tracing:", Duration::from_secs(30));
        let (code, out, err) = trace.finish(Duration::from_secs(60));
        assert_eq!(code, 0, "JDK {v}: {err}");
        let calls: Vec<&str> = out
            .lines()
            .filter(|l| l.contains("TreeFlood.maybe"))
            .collect();
        assert_eq!(calls.len(), 4, "JDK {v}: {out}");
        assert!(
            calls.iter().all(|l| l.contains("-> ")),
            "JDK {v}: a call without its value: {out}"
        );
        assert_eq!(
            calls.iter().filter(|l| l.ends_with("-> null")).count(),
            2,
            "JDK {v}: {out}"
        );
    }
}
