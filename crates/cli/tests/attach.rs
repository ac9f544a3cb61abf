//! `jtap ps`, `jtap attach` and `jtap jcmd` against real JVMs of every JDK in the matrix.

mod common;

use std::time::Instant;

use common::{jtap, leftover_triggers};
use jtap_testkit::{jdks, JavaProcess};

/// The `java.version` a JDK reports, from its `release` file.
fn java_version(jdk: &jtap_testkit::Jdk) -> String {
    let release = std::fs::read_to_string(jdk.home.join("release")).unwrap();
    release
        .lines()
        .find_map(|l| l.strip_prefix("JAVA_VERSION="))
        .unwrap()
        .trim_matches('"')
        .to_string()
}

#[test]
fn attach_operations_work_on_every_jdk() {
    for jdk in jdks() {
        let mut jvm = JavaProcess::start(jdk, "workloads.Sleeper");
        let pid = jvm.pid().to_string();
        let version = java_version(jdk);
        eprintln!("JDK {}: pid {pid}, java.version {version}", jdk.version);

        // First attach: the listener is not running yet.
        let properties = jtap(["attach", &pid, "properties"]).ok();
        assert!(
            properties.contains(&format!("java.version={version}")),
            "JDK {}: {properties}",
            jdk.version
        );

        let dump = jtap(["attach", &pid, "threaddump"]).ok();
        assert!(
            dump.contains("\"jtap-test-worker\""),
            "JDK {}: {dump}",
            jdk.version
        );

        let vm_version = jtap(["jcmd", &pid, "VM.version"]).ok();
        assert!(
            vm_version.contains(&format!("JDK {version}")),
            "JDK {}: {vm_version}",
            jdk.version
        );

        let histogram = jtap(["attach", &pid, "inspectheap"]).ok();
        assert!(
            histogram.contains("workloads.Sleeper$RetainedMarker"),
            "JDK {}: {histogram}",
            jdk.version
        );

        let flag = "HeapDumpOnOutOfMemoryError";
        assert!(jtap(["attach", &pid, "printflag", flag])
            .ok()
            .contains(&format!("-XX:-{flag}")));
        jtap(["attach", &pid, "setflag", flag, "1"]).ok();
        assert!(jtap(["attach", &pid, "printflag", flag])
            .ok()
            .contains(&format!("-XX:+{flag}")));
        jtap(["attach", &pid, "setflag", flag, "0"]).ok();
        assert!(jtap(["attach", &pid, "printflag", flag])
            .ok()
            .contains(&format!("-XX:-{flag}")));

        let help = jtap(["jcmd", &pid, "help"]).ok();
        assert!(
            help.contains("Thread.print") && help.contains("GC.class_histogram"),
            "{help}"
        );
        let thread_print = jtap(["jcmd", &pid, "Thread.print", "-l"]).ok();
        assert!(thread_print.contains("jtap-test-worker"));

        // Twenty back-to-back operations against one JVM.
        for i in 0..20 {
            let op = if i % 2 == 0 {
                "properties"
            } else {
                "threaddump"
            };
            assert!(!jtap(["attach", &pid, op]).ok().is_empty());
        }
        let ns_pid = jvm.pid();
        assert!(leftover_triggers(jvm.pid(), ns_pid).is_empty());
        assert!(
            jvm.stdout.text().lines().all(|l| l == "READY"),
            "workload stdout polluted: {}",
            jvm.stdout.text()
        );
    }
}

#[test]
fn operations_the_jvm_rejects_show_its_message() {
    let jdk = &jdks()[0];
    let mut jvm = JavaProcess::start(jdk, "workloads.Sleeper");
    let pid = jvm.pid().to_string();
    let run = jtap(["attach", &pid, "nosuchop"]);
    assert_ne!(run.code, 0);
    assert!(run.stdout.contains("nosuchop not recognized"), "{run:?}");
    let run = jtap(["attach", &pid, "setflag", "NoSuchFlagAtAll", "1"]);
    assert_ne!(run.code, 0);
    assert!(run.stdout.contains("NoSuchFlagAtAll"), "{run:?}");
    let run = jtap(["jcmd", &pid, "No.Such.Command"]);
    assert_ne!(run.code, 0);
    assert!(run.stdout.contains("Unknown diagnostic command"), "{run:?}");
}

#[test]
fn long_arguments_use_protocol_2_or_are_refused() {
    for jdk in jdks() {
        let mut jvm = JavaProcess::start(jdk, "workloads.Sleeper");
        let pid = jvm.pid().to_string();
        let long_arg = "x".repeat(2000);
        let run = jtap(["attach", &pid, "properties", &long_arg]);
        if jdk.version >= 24 {
            assert_eq!(run.code, 0, "JDK {}: {run:?}", jdk.version);
            assert!(run.stdout.contains("java.version="));
        } else {
            run.fails_with(17, "protocol 1");
        }
    }
}

#[test]
fn ps_lists_jvms_with_and_without_perf_data() {
    for jdk in jdks() {
        let mut with_perf = JavaProcess::start(jdk, "workloads.Sleeper");
        let mut without_perf = JavaProcess::builder(jdk, "workloads.Sleeper")
            .jvm_arg("-XX:-UsePerfData")
            .start();
        let listing: serde_json::Value =
            serde_json::from_str(&jtap(["ps", "--json"]).ok()).unwrap();
        let find = |pid: u32| {
            listing
                .as_array()
                .unwrap()
                .iter()
                .find(|j| j["pid"] == pid)
                .cloned()
                .unwrap_or_else(|| {
                    panic!("JDK {}: pid {pid} not listed in {listing:#}", jdk.version)
                })
        };
        let a = find(with_perf.pid());
        assert_eq!(a["main"], "workloads.Sleeper");
        assert_eq!(a["java_version"], java_version(jdk));
        assert_eq!(a["source"], "perfdata");
        assert!(a["heap_committed"].as_u64().unwrap() > 0);
        assert!(a["uptime_secs"].as_f64().unwrap() >= 0.0);
        let b = find(without_perf.pid());
        assert_eq!(b["main"], "workloads.Sleeper");
        assert_eq!(b["source"], "proc");
        assert_eq!(b["java_version"], java_version(jdk));

        let table = jtap(["ps"]).ok();
        assert!(
            table.contains(&with_perf.pid().to_string()) && table.contains("workloads.Sleeper")
        );
    }
}

#[test]
fn first_attach_is_fast() {
    // Not a benchmark (see scripts/bench-attach.sh); only guards against fixed sleeps creeping in.
    let jdk = &jdks()[0];
    let mut jvm = JavaProcess::start(jdk, "workloads.Sleeper");
    let pid = jvm.pid().to_string();
    let started = Instant::now();
    jtap(["attach", &pid, "properties"]).ok();
    assert!(started.elapsed().as_secs() < 5);
}

#[test]
fn concurrent_first_attaches_never_make_the_jvm_print_a_thread_dump() {
    for jdk in jdks() {
        for _round in 0..3 {
            let mut jvm = JavaProcess::start(jdk, "workloads.Sleeper");
            let pid = jvm.pid().to_string();
            let clients: Vec<_> = (0..8)
                .map(|_| {
                    let pid = pid.clone();
                    std::thread::spawn(move || jtap(["attach", &pid, "threaddump"]))
                })
                .collect();
            for client in clients {
                let run = client.join().unwrap();
                assert_eq!(run.code, 0, "JDK {}: {run:?}", jdk.version);
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
            let stdout = jvm.stdout.text();
            assert!(
                !stdout.contains("Full thread dump"),
                "JDK {}: JVM printed a thread dump: {stdout}",
                jdk.version
            );
            let ns_pid = jvm.pid();
            assert!(leftover_triggers(jvm.pid(), ns_pid).is_empty());
        }
    }
}
