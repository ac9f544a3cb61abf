//! The command line itself: help, version, completions.

mod common;

use common::jtap;

#[test]
fn version_and_help() {
    let version = jtap(["--version"]).ok();
    assert_eq!(
        version.trim(),
        format!("jtap {}", env!("CARGO_PKG_VERSION"))
    );
    let help = jtap(["--help"]).ok();
    for command in ["ps", "attach", "jcmd", "completions"] {
        assert!(help.contains(command), "--help lacks {command}: {help}");
    }
    assert!(help.contains("Exit codes"));
    let attach_help = jtap(["attach", "--help"]).ok();
    assert!(attach_help.contains("threaddump") && attach_help.contains("--timeout"));
}

#[test]
fn completions_for_every_shell() {
    for shell in ["bash", "zsh", "fish"] {
        let script = jtap(["completions", shell]).ok();
        assert!(
            script.contains("jcmd") && script.contains("attach"),
            "{shell}: {script}"
        );
    }
    assert_eq!(jtap(["completions", "cmd.exe"]).code, 2);
}

#[test]
fn engine_settings_of_another_engine_are_refused_before_attaching() {
    // Pid 1 is never a JVM here: the refusal must come before jtap looks at it.
    for (args, message) in [
        (
            &["profile", "1", "-e", "cpu", "--exact"][..],
            "--exact only applies to -e alloc",
        ),
        (
            &["profile", "1", "-e", "cpu", "--live"][..],
            "--live only applies to -e alloc",
        ),
        (
            &["profile", "1", "-e", "cpu", "--all-threads"][..],
            "--all-threads only applies to -e wall",
        ),
        (
            &["profile", "1", "-e", "cpu,itimer"][..],
            "-e cpu and itimer both sample CPU time",
        ),
        (
            &["profile", "1", "-e", "alloc", "-i", "1ms"][..],
            "-i only applies to -e cpu, itimer, ctimer, wall or perf",
        ),
    ] {
        jtap(args).fails_with(2, message);
    }
    // Flags that exclude each other are clap's usage errors.
    let run = jtap(["sites", "1", "--exact", "--alloc-interval", "1k"]);
    assert!(
        run.code == 2 && run.stderr.contains("cannot be used with"),
        "{run:?}"
    );
}

/// Issue #12: bad values are the CLI's usage errors (exit 2, one line, no agent options or
/// socket paths), before anything is attached.
#[test]
fn bad_values_are_usage_errors_before_attaching() {
    for (args, message) in [
        (&["trace", "1", "X::y", "-n", "0"][..], "0 is not in 1.."),
        (&["calltree", "1", "X::y", "-n", "0"][..], "0 is not in 1.."),
        (
            &["monitor", "1", "X::y", "-i", "0s"][..],
            "must be more than zero",
        ),
        (&["profile", "1", "-i", "0ms"][..], "must be more than zero"),
        (
            &["profile", "1", "-i", "10"][..],
            "'10' needs a unit: 10ms?",
        ),
        (
            &["trace", "1", "X::y", "--threshold", "100"][..],
            "needs a unit",
        ),
        (&["profile", "1", "-d", "0s"][..], "must be more than zero"),
        (&["profile", "1", "-e", "gc"][..], "unknown event \"gc\""),
        (
            &["profile", "1", "-e", "trace"][..],
            "known: cpu, itimer, ctimer, wall, alloc, lock",
        ),
        (
            &["profile", "1", "--counter", "bytes"][..],
            "unknown counter",
        ),
        (
            &["profile", "1", "-o", "out.unknownext"][..],
            "cannot tell the format of out.unknownext",
        ),
        (&["profile", "x1"][..], "\"x1\" is not a pid"),
        (&["trace", "x1", "X::y"][..], "\"x1\" is not a pid"),
    ] {
        let run = jtap(args);
        assert_eq!(run.code, 2, "{args:?}: {run:?}");
        assert!(run.stderr.contains(message), "{args:?}: {run:?}");
        assert!(
            !run.stderr.contains("channel=") && !run.stderr.contains(".sock"),
            "{args:?} leaks internals: {run:?}"
        );
    }
    // A bare number is still seconds for -d, as async-profiler's -d takes it.
    let run = jtap(["profile", "1", "-d", "3", "-o", "x.html"]);
    assert_ne!(run.code, 2, "{run:?}");
}

/// `jtap ps | head -1` ends quietly: no panic on the closed pipe.
#[test]
fn a_closed_stdout_ends_jtap_quietly() {
    use std::process::{Command, Stdio};
    let mut ps = Command::new(common::jtap_bin())
        .args(["completions", "bash"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(ps.stdout.take()); // the reader is gone before jtap writes
    let out = ps.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_ne!(out.status.code(), Some(101), "{stderr}");
}

#[test]
fn diff_and_convert_read_files_without_a_jvm() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base.collapsed");
    let new = dir.path().join("new.collapsed");
    std::fs::write(&base, "Main.main;Main.a 50\nMain.main;Main.b 50\n").unwrap();
    std::fs::write(&new, "Main.main;Main.a 10\nMain.main;Main.b 90\n").unwrap();
    let table = jtap(["diff", base.to_str().unwrap(), new.to_str().unwrap()]).ok();
    let rows: Vec<&str> = table.lines().skip(1).collect();
    assert!(
        rows[0].contains("-40.00") && rows[0].ends_with("Main.a"),
        "{table}"
    );
    let page = dir.path().join("diff.html");
    let written = jtap([
        "diff",
        base.to_str().unwrap(),
        new.to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
    ]);
    assert_eq!(written.code, 0, "{written:?}");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("\"deltas\""), "a differential page");
    // Collapsed stacks to JFR and back.
    let recording = dir.path().join("new.jfr");
    let to_jfr = jtap([
        "convert",
        new.to_str().unwrap(),
        "-o",
        recording.to_str().unwrap(),
    ]);
    assert_eq!(to_jfr.code, 0, "{to_jfr:?}");
    let back = jtap([
        "convert",
        recording.to_str().unwrap(),
        "--format",
        "collapsed",
    ])
    .ok();
    let mut lines: Vec<&str> = back.lines().collect();
    lines.sort();
    assert_eq!(lines, ["Main.main;Main.a 10", "Main.main;Main.b 90"]);
    // Bad input: one line, exit 2 or 1, no panic.
    for (args, message) in [
        (
            vec![
                "diff",
                base.to_str().unwrap(),
                new.to_str().unwrap(),
                "-o",
                "x.png",
            ],
            "name the file .html",
        ),
        (
            vec!["convert", base.to_str().unwrap(), "--from", "1s"],
            "has no sample times",
        ),
        (
            vec!["convert", "/nonexistent.jfr"],
            "reading /nonexistent.jfr",
        ),
    ] {
        let run = jtap(&args);
        assert!(
            run.code != 0 && run.stderr.contains(message) && !run.stderr.contains("panicked"),
            "{args:?}: {run:?}"
        );
    }
}

/// Request labels (`profile --by`) survive a round trip through JFR, and `diff` compares two
/// labels of one recording.
#[test]
fn labels_go_through_jfr_and_diff_compares_two_of_them() {
    let dir = tempfile::tempdir().unwrap();
    let stacks = dir.path().join("by.collapsed");
    std::fs::write(
        &stacks,
        "[label=/a];Main.main;Main.x 50\n[label=/a];Main.main;Main.y 50\n\
         [label=/b];Main.main;Main.x 10\n[label=/b];Main.main;Main.y 90\nMain.idle 5\n",
    )
    .unwrap();
    let recording = dir.path().join("by.jfr");
    let to_jfr = jtap([
        "convert",
        stacks.to_str().unwrap(),
        "-o",
        recording.to_str().unwrap(),
    ]);
    assert_eq!(to_jfr.code, 0, "{to_jfr:?}");
    let one = jtap([
        "convert",
        recording.to_str().unwrap(),
        "--by",
        "/b",
        "--format",
        "collapsed",
    ])
    .ok();
    let mut lines: Vec<&str> = one.lines().collect();
    lines.sort();
    assert_eq!(lines, ["Main.main;Main.x 10", "Main.main;Main.y 90"]);
    let table = jtap([
        "diff",
        recording.to_str().unwrap(),
        "--base-by",
        "/a",
        "--by",
        "/b",
    ])
    .ok();
    let rows: Vec<&str> = table.lines().skip(1).collect();
    assert!(
        rows[0].contains("-40.00") && rows[0].ends_with("Main.x"),
        "{table}"
    );
    let missing = jtap(["diff", recording.to_str().unwrap(), "--by", "/c"]);
    assert!(
        missing.code == 2 && missing.stderr.contains("its labels: /a, /b"),
        "{missing:?}"
    );
}
