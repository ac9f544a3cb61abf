//! `-o profile.otlp` (issue #38, ready for a fleet): the OpenTelemetry profiles signal,
//! decoded by the official generated modules of opentelemetry-proto (PyPI, installed by
//! scripts/setup-otlp.sh) in scripts/check-otlp.py, which also checks the dictionary's
//! rules. Without them the test is skipped with a printed reason, or fails under CI.

mod common;

use std::process::Command;

use common::{agent_library, jtap};
use jtap_testkit::{jdks, repo_root, JavaProcess};

/// True under CI: `CI` set to anything but empty, `0` or `false` (as jtap_testkit reads it).
fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false"))
}

/// `jtap: cpu: 263 samples (...)` lines: the samples of an event.
fn samples_of(stderr: &str, event: &str) -> u64 {
    stderr
        .lines()
        .find_map(|l| {
            l.strip_prefix(&format!("jtap: {event}: "))?
                .split(' ')
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no {event} line in {stderr}"))
}

#[test]
fn an_otlp_profile_decodes_with_the_official_definitions() {
    let modules = repo_root().join(".cache/otlp-python/.version");
    if !modules.exists() {
        let reason = "opentelemetry-proto is not installed (run scripts/setup-otlp.sh)";
        assert!(
            !under_ci(),
            "{reason} [CI is set: this test may not be skipped]"
        );
        eprintln!("skipped: {reason}");
        return;
    }
    agent_library();
    let dir = tempfile::tempdir().unwrap();
    let jdk = jdks()
        .iter()
        .find(|j| j.version == 17)
        .unwrap_or(&jdks()[0]);
    let mut jvm = JavaProcess::start(jdk, "workloads.Mixed");
    let pid = jvm.pid().to_string();
    let out = dir.path().join("profile.otlp");
    let run = jtap([
        "profile",
        &pid,
        "-e",
        "cpu,alloc",
        "-d",
        "3s",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    let checked = Command::new("python3")
        .arg(repo_root().join("scripts/check-otlp.py"))
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&checked.stdout);
    assert!(
        checked.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&checked.stderr)
    );
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    eprintln!("{report}");
    let profiles = report["profiles"].as_array().unwrap();
    let kinds: Vec<(&str, &str)> = profiles
        .iter()
        .map(|p| (p["type"].as_str().unwrap(), p["unit"].as_str().unwrap()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("samples", "count"),
            ("cpu", "nanoseconds"),
            ("alloc_objects", "count"),
            ("alloc_space", "bytes")
        ]
    );
    // The samples jtap reported, all there; cpu time is samples × the 10 ms interval.
    let cpu_samples = samples_of(&run.stderr, "cpu");
    assert_eq!(profiles[0]["total"].as_u64(), Some(cpu_samples));
    assert_eq!(
        profiles[1]["total"].as_u64(),
        Some(cpu_samples * 10_000_000)
    );
    assert!(profiles[3]["total"].as_u64() > Some(0));
    // Mixed burns CPU in workloads.Burn and allocates arrays.
    let top_cpu = profiles[1]["top_leaf"].as_str().unwrap();
    assert!(top_cpu.starts_with("workloads."), "{top_cpu}");
    let top_alloc = profiles[3]["top_leaf"].as_str().unwrap();
    assert!(top_alloc.ends_with("[]"), "{top_alloc}");
    assert!(jvm.is_running());
}
