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
