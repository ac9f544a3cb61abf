//! `jtap mcp` with real MCP clients, installed under `.cache/` by
//! `scripts/setup-mcp-clients.sh` (which these tests run; `scripts/test.sh` runs it too):
//! - the Python `mcp` SDK's client, on every JDK of the matrix: the tools are listed with
//!   their schemas, each read-only tool answers on a running JVM, and the tools that would
//!   change the JVM are refused unless the server runs with `--allow-changes`;
//! - the MCP Inspector's CLI (npm; skipped, saying so, where the machine has no node): lists
//!   the tools, calls `threads` and sees a refusal.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use common::{agent_library, jtap_bin, run};
use jtap_testkit::{jdks, repo_root, JavaProcess};
use serde_json::{json, Value};

/// Installs the MCP clients once per test binary.
fn setup_clients() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let script = repo_root().join("scripts/setup-mcp-clients.sh");
        let setup = run(&mut Command::new(script));
        assert_eq!(
            setup.code, 0,
            "scripts/setup-mcp-clients.sh failed: {setup:?}"
        );
    });
}

/// The Python with the `mcp` SDK.
fn python() -> PathBuf {
    setup_clients();
    repo_root().join(".cache/python/bin/python")
}

/// One session: lists the tools, makes the calls, returns what session.py printed. The
/// server's files (profiles) go to a temporary directory.
fn session(calls: &Value, server_args: &[&str]) -> (Value, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    let mut command = Command::new(python());
    command
        .env("TMPDIR", tmp.path())
        .arg(repo_root().join("tests/mcp/session.py"))
        .arg(jtap_bin())
        .arg(calls.to_string())
        .args(server_args);
    let out = run(&mut command);
    assert_eq!(out.code, 0, "MCP session failed: {out:?}");
    let report = serde_json::from_str(&out.stdout).expect("session.py prints JSON");
    (report, tmp)
}

/// The answer to call `index`: (is_error, text).
fn answer(report: &Value, index: usize) -> (bool, String) {
    let result = &report["results"][index];
    (
        result["is_error"].as_bool().unwrap_or(true),
        result["text"].as_str().unwrap_or("").to_string(),
    )
}

const BTRACE_SCRIPT: &str = r#"import com.sun.btrace.annotations.*;
import static com.sun.btrace.BTraceUtils.*;

@BTrace
public class Spins {
    @OnMethod(clazz = "workloads.OnCall", method = "spin", location = @Location(Kind.RETURN))
    public static void spun(@Duration long duration) {
        println(duration);
    }
}
"#;

#[test]
fn an_mcp_client_lists_and_calls_the_tools_and_sees_refusals() {
    agent_library();
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("Spins.java");
    std::fs::write(&script, BTRACE_SCRIPT).unwrap();
    let script = script.display().to_string();
    let stacks = dir.path().join("before.collapsed");
    std::fs::write(&stacks, "main;work;spin 30\nmain;work;idle 10\n").unwrap();
    let stacks = stacks.display().to_string();
    let flame = dir.path().join("before.html").display().to_string();
    for jdk in jdks() {
        let mut jvm = JavaProcess::start(jdk, "workloads.OnCall");
        let pid = jvm.pid();
        let spin = "workloads.OnCall::spin";
        let calls = json!([
            ["list_jvms", {}],
            ["vm_info", {"pid": pid}],
            ["threads", {"pid": pid, "top": 3, "duration_ms": 2000}],
            ["heap_histogram", {"pid": pid, "top": 10}],
            ["classes", {"pid": pid, "pattern": "OnCall", "methods": true, "fields": true}],
            ["jcmd", {"pid": pid, "command": "VM.version"}],
            ["profile", {"pid": pid, "duration_s": 2, "lines": 40}],
            ["trace", {"pid": pid, "pattern": spin, "count": 3, "duration_s": 20}],
            ["monitor", {"pid": pid, "pattern": spin, "duration_s": 2, "interval_s": 1}],
            ["btrace_check", {"script": script}],
            ["sites", {"pid": pid, "duration_s": 1, "top": 5}],
            ["convert", {"input": stacks, "output": flame}],
            ["diff", {"base": stacks, "new": stacks}],
            ["top", {"pid": pid, "threads": 3}],
            // Refused: each would change the JVM.
            ["heap_dump", {"pid": pid, "path": "/tmp/never.hprof"}],
            ["jcmd", {"pid": pid, "command": "GC.run"}],
            ["btrace_run", {"pid": pid, "script": script, "duration_s": 1}],
            ["heap_histogram", {"pid": pid, "live": true}],
            // Bad input: an error answer, and the server goes on.
            ["threads", {"pid": 999_999_999}],
            ["classes", {"pid": pid, "pattern": "/(/"}],
            // A heap walk pauses the JVM as a histogram does, and changes nothing.
            ["inspect", {"pid": pid, "class": "workloads.OnCall"}],
            // A read-only command may not carry another on a second line.
            ["jcmd", {"pid": pid, "command": "VM.uptime\nGC.run"}],
            ["inspect", {"pid": pid, "class": "workloads.OnCall", "static_field": "requestsServed"}],
            ["threads", {"pid": pid, "top": 3, "duration_ms": 1000, "sampled": true}],
            ["threads", {"pid": pid, "sampled": true, "blocked": true}],
        ]);
        let (report, tmp) = session(&calls, &[]);
        let v = jdk.version;
        assert_eq!(report["server"], "jtap");
        let tools = report["tools"].as_object().expect("tools");
        for tool in [
            "list_jvms",
            "vm_info",
            "threads",
            "heap_histogram",
            "classes",
            "jcmd",
            "profile",
            "trace",
            "monitor",
            "btrace_check",
            "sites",
            "convert",
            "diff",
            "top",
            "inspect",
            "heap_dump",
            "btrace_run",
        ] {
            assert!(tools.contains_key(tool), "no tool {tool}: {tools:?}");
        }
        assert_eq!(
            tools["threads"]["required"],
            json!(["pid"]),
            "{}",
            tools["threads"]
        );

        let expect_ok = |index: usize, needles: &[&str]| {
            let (is_error, text) = answer(&report, index);
            assert!(!is_error, "JDK {v}: call {index} failed: {text}");
            for needle in needles {
                assert!(
                    text.contains(needle),
                    "JDK {v}: call {index} lacks {needle:?}: {text}"
                );
            }
            text
        };
        expect_ok(0, &[&format!("\"pid\": {pid}"), "workloads.OnCall"]);
        expect_ok(1, &["== VM.version", "== VM.flags", "workloads.OnCall"]);
        let threads = expect_ok(2, &["hot-worker", "held by \"monitor-holder\""]);
        let first_row = threads.lines().nth(3).unwrap_or("");
        assert!(first_row.ends_with("hot-worker"), "JDK {v}: {threads}");
        expect_ok(3, &["INSTANCES", "total"]);
        expect_ok(4, &["static long spin(long)", "static int requestsServed"]);
        expect_ok(5, &[&format!("JDK {v}")]);
        let profile = expect_ok(6, &["workloads.OnCall.spin", "flame graph: "]);
        let html = profile
            .lines()
            .find_map(|l| l.strip_prefix("flame graph: "))
            .unwrap();
        assert!(
            html.starts_with(&tmp.path().display().to_string())
                && std::path::Path::new(html).exists(),
            "JDK {v}: {profile}"
        );
        let trace = expect_ok(7, &["[hot-worker] workloads.OnCall.spin"]);
        assert_eq!(
            trace.lines().filter(|l| l.contains("OnCall.spin")).count(),
            3
        );
        expect_ok(8, &["workloads.OnCall.spin", "CALLS"]);
        expect_ok(9, &["Spins.java: ok: 1 probe handlers"]);
        expect_ok(10, &["SITES BEGIN", "SITES END"]);
        expect_ok(11, &["spin"]);
        assert!(std::path::Path::new(&flame).exists(), "JDK {v}: no {flame}");
        expect_ok(12, &["spin"]);
        expect_ok(13, &["heap ", "safepoints", "hot-worker"]);
        for index in 14..=17 {
            let (is_error, text) = answer(&report, index);
            assert!(
                is_error && text.starts_with("refused: ") && text.contains("--allow-changes"),
                "JDK {v}: call {index} not refused: {text}"
            );
        }
        let (is_error, text) = answer(&report, 18);
        assert!(is_error && text.contains("no process"), "JDK {v}: {text}");
        let (is_error, text) = answer(&report, 19);
        assert!(
            is_error && text.contains("bad class pattern"),
            "JDK {v}: {text}"
        );
        expect_ok(20, &["owner = \"main\""]);
        let (is_error, text) = answer(&report, 21);
        assert!(
            is_error && text.contains("one jcmd command at a time"),
            "JDK {v}: {text}"
        );
        expect_ok(22, &["requestsServed = 42"]);
        let sampled = expect_ok(23, &["hot-worker", "running", "workloads.OnCall.spin ("]);
        assert!(!sampled.contains("Blocked"), "JDK {v}: {sampled}");
        let (is_error, text) = answer(&report, 24);
        assert!(
            is_error && text.contains("no Java states"),
            "JDK {v}: {text}"
        );
        assert!(jvm.is_running(), "JDK {v}");
    }
}

#[test]
fn with_allow_changes_the_changing_tools_run() {
    let jdk = &jdks()[0];
    let mut jvm = JavaProcess::start(jdk, "workloads.OnCall");
    let pid = jvm.pid();
    let calls = json!([
        ["jcmd", {"pid": pid, "command": "GC.run"}],
        ["heap_histogram", {"pid": pid, "live": true, "top": 5}],
    ]);
    let (report, _tmp) = session(&calls, &["--allow-changes"]);
    let (is_error, text) = answer(&report, 0);
    assert!(!is_error, "JDK {}: {text}", jdk.version);
    let (is_error, text) = answer(&report, 1);
    assert!(!is_error && text.contains("INSTANCES"), "{text}");
}

/// `mcp-inspector --cli <jtap> mcp <inspector args...>`: (exit code, stdout).
fn inspector(
    inspector: &std::path::Path,
    catalog: &std::path::Path,
    args: &[&str],
) -> (i32, String) {
    let mut command = Command::new(inspector);
    command
        .env("MCP_CATALOG_PATH", catalog)
        .arg("--cli")
        .arg(jtap_bin())
        .arg("mcp")
        .args(args);
    let out = run(&mut command);
    (out.code, out.stdout)
}

#[test]
fn the_mcp_inspector_cli_lists_tools_calls_one_and_sees_a_refusal() {
    setup_clients();
    let binary = repo_root().join(".cache/mcp-inspector/node_modules/.bin/mcp-inspector");
    if !binary.exists() {
        eprintln!("SKIPPING the MCP Inspector test: no node/npm to install it with");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let catalog = dir.path().join("catalog.json");
    let jdk = &jdks()[0];
    let mut jvm = JavaProcess::start(jdk, "workloads.OnCall");
    let pid = format!("pid={}", jvm.pid());

    let (code, listed) = inspector(&binary, &catalog, &["--method", "tools/list"]);
    assert_eq!(code, 0, "{listed}");
    let tools: Value = serde_json::from_str(&listed).expect("tools/list prints JSON");
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        names.contains(&"threads") && names.contains(&"heap_dump"),
        "{names:?}"
    );

    let call = ["--method", "tools/call", "--tool-name"];
    let (code, answer) = inspector(
        &binary,
        &catalog,
        &[&call[..], &["threads", "--tool-arg", &pid, "top=2"]].concat(),
    );
    assert_eq!(code, 0, "{answer}");
    let answer: Value = serde_json::from_str(&answer).expect("tools/call prints JSON");
    assert_eq!(answer["isError"], false, "{answer}");
    assert!(
        answer["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .contains("hot-worker"),
        "{answer}"
    );

    let (_, refused) = inspector(
        &binary,
        &catalog,
        &[
            &call[..],
            &["heap_dump", "--tool-arg", &pid, "path=/tmp/never.hprof"],
        ]
        .concat(),
    );
    let first = refused
        .find("\n}\n")
        .map_or(refused.as_str(), |end| &refused[..end + 2]);
    let refusal: Value = serde_json::from_str(first).expect("the refusal is JSON");
    assert_eq!(refusal["isError"], true, "{refused}");
    assert!(
        refusal["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .starts_with("refused: "),
        "{refused}"
    );
    assert!(!std::path::Path::new("/tmp/never.hprof").exists());
}
