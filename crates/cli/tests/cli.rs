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
            "exact only applies to event=alloc",
        ),
        (
            &["profile", "1", "-e", "wall", "--alloc-interval", "1k"][..],
            "alloc only applies to event=alloc",
        ),
        (
            &["profile", "1", "-e", "alloc", "--lock-threshold", "1ms"][..],
            "lock only applies to event=lock",
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
