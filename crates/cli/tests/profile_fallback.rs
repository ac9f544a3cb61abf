//! `-e cpu` where perf_events are forbidden (a seccomp filter failing `perf_event_open` with
//! EPERM, as Docker's default profile does), on every JDK of the matrix: jtap says so, falls
//! back to the `ctimer` engine, names it, and the profile still splits the CPU 1:2:4.

mod common;

use std::time::Duration;

use common::{agent_library, collapsed_file, jtap};
use jtap_testkit::{jdks, JavaProcess};

#[test]
fn cpu_falls_back_to_ctimer_where_perf_events_are_forbidden() {
    agent_library();
    let dir = tempfile::tempdir().unwrap();
    for jdk in jdks() {
        let mut jvm = JavaProcess::builder(jdk, "workloads.Burn")
            .deny_perf_events()
            .start();
        let pid = jvm.pid().to_string();
        std::thread::sleep(Duration::from_millis(500)); // let the JIT settle
        let out = dir.path().join(format!("{}.collapsed", jdk.version));
        let run = jtap([
            "profile",
            &pid,
            "-e",
            "cpu",
            "-d",
            "4s",
            "-i",
            "4ms",
            "--annotate",
            "-o",
            out.to_str().unwrap(),
        ]);
        assert_eq!(run.code, 0, "JDK {}: {run:?}", jdk.version);
        assert!(
            run.stderr.contains("(ctimer engine")
                && run.stderr.contains("perf_event_open is not allowed")
                && run.stderr.contains("fell back to ctimer"),
            "JDK {}: {}",
            jdk.version,
            run.stderr
        );
        let stacks = collapsed_file(&out);
        let samples_in = |method: &str| -> f64 {
            stacks
                .iter()
                .filter(|(frames, _)| frames.iter().any(|f| f.contains(method)))
                .map(|(_, count)| *count as f64)
                .sum()
        };
        let counts = ["Burn.burnOne", "Burn.burnTwo", "Burn.burnFour"].map(samples_in);
        let total: f64 = counts.iter().sum();
        assert!(total >= 150.0, "JDK {}: {counts:?}", jdk.version);
        for (count, nominal) in counts.iter().zip([100.0 / 7.0, 200.0 / 7.0, 400.0 / 7.0]) {
            assert!(
                (100.0 * count / total - nominal).abs() <= 5.0,
                "JDK {}: shares {counts:?}, expected 1:2:4",
                jdk.version
            );
        }
        let frames = || stacks.iter().flat_map(|(frames, _)| frames);
        assert!(
            frames().any(|f| f.ends_with("_[j]")) && !frames().any(|f| f.ends_with("_[k]")),
            "JDK {}: Java frames, and no kernel frames without perf_events: {stacks:?}",
            jdk.version
        );
        assert!(jvm.is_running());
    }
}
