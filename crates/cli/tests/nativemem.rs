//! `jtap profile -e nativemem` on every JDK of the matrix, against a JNI library that leaks
//! (tests/native/native_leak.c, driven by `workloads.NativeLeak`):
//! - all bytes: the churning site (16 times the bytes, all freed) outweighs the leaking one,
//!   each with its native function and the Java method that called it; the same for
//!   anonymous mappings (`mmap`, `munmap`);
//! - `--live`: the leaking stack comes first, and the churning sites all but disappear;
//! - the hooks are removed at the end (a second profile installs them afresh), and the
//!   program's output is untouched.

mod common;

use common::{agent_library, collapsed, jtap};
use jtap_testkit::{compiled_native_library, jdks, JavaProcess};

/// Bytes of the stacks through `function` (a native frame) and `caller` (a Java frame).
fn bytes_through(stacks: &[(Vec<String>, u64)], function: &str, caller: &str) -> u64 {
    stacks
        .iter()
        .filter(|(frames, _)| {
            frames.iter().any(|f| f.contains(function)) && frames.iter().any(|f| f.contains(caller))
        })
        .map(|(_, bytes)| bytes)
        .sum()
}

#[test]
fn the_leaking_native_stack_comes_first_among_live_blocks() {
    agent_library();
    let library = compiled_native_library("native_leak");
    for jdk in jdks() {
        let mut jvm = JavaProcess::builder(jdk, "workloads.NativeLeak")
            .arg(&library)
            .start();
        let pid = jvm.pid().to_string();
        let profile = |live: bool| {
            let mut args = vec![
                "profile",
                &pid,
                "-e",
                "nativemem",
                "--nativemem-interval",
                "16k",
                "-d",
                "3",
                "--format",
                "collapsed",
            ];
            if live {
                args.push("--live");
            }
            collapsed(&jtap(args).ok())
        };
        let all = profile(false);
        let leaked = bytes_through(
            &all,
            "libnative_leak.so!Java_workloads_NativeLeak_leak",
            "workloads.NativeLeak.leakSite",
        );
        let churned = bytes_through(
            &all,
            "libnative_leak.so!Java_workloads_NativeLeak_churn",
            "workloads.NativeLeak.churnSite",
        );
        eprintln!(
            "JDK {}: all: leak {leaked} bytes, churn {churned} bytes",
            jdk.version
        );
        assert!(
            leaked > 0 && churned > 4 * leaked,
            "JDK {}: leak {leaked}, churn {churned}: {all:?}",
            jdk.version
        );
        let mapped = bytes_through(
            &all,
            "libnative_leak.so!Java_workloads_NativeLeak_mapLeak",
            "workloads.NativeLeak.mapLeakSite",
        );
        let map_churned = bytes_through(
            &all,
            "libnative_leak.so!Java_workloads_NativeLeak_mapChurn",
            "workloads.NativeLeak.mapChurnSite",
        );
        assert!(
            mapped > 0 && map_churned > 4 * mapped,
            "JDK {}: mappings: leak {mapped}, churn {map_churned}: {all:?}",
            jdk.version
        );
        assert!(
            all.iter()
                .filter(|(frames, _)| frames.iter().any(|f| f.contains("NativeLeak_map")))
                .all(|(frames, _)| frames.last().is_some_and(|leaf| leaf == "mmap")),
            "JDK {}: mappings end in mmap: {all:?}",
            jdk.version
        );
        let live = profile(true);
        let mut by_bytes = live.clone();
        by_bytes.sort_by_key(|(_, bytes)| std::cmp::Reverse(*bytes));
        let top = &by_bytes.first().expect("live blocks").0;
        let live_leaked = bytes_through(
            &live,
            "Java_workloads_NativeLeak_leak",
            "workloads.NativeLeak.leakSite",
        );
        let live_churned = bytes_through(
            &live,
            "Java_workloads_NativeLeak_churn",
            "workloads.NativeLeak.churnSite",
        );
        eprintln!(
            "JDK {}: live: leak {live_leaked} bytes, churn {live_churned} bytes; top {top:?}",
            jdk.version
        );
        assert!(
            top.iter()
                .any(|f| f.contains("Java_workloads_NativeLeak_leak"))
                && top.iter().any(|f| f == "workloads.NativeLeak.leakSite")
                && top.last().is_some_and(|leaf| leaf == "malloc"),
            "JDK {}: the top live stack is not the leak: {by_bytes:?}",
            jdk.version
        );
        assert!(
            live_churned * 10 < live_leaked,
            "JDK {}: freed blocks stay live: leak {live_leaked}, churn {live_churned}",
            jdk.version
        );
        let live_mapped = bytes_through(&live, "NativeLeak_mapLeak", "mapLeakSite");
        let live_map_churned = bytes_through(&live, "NativeLeak_mapChurn", "mapChurnSite");
        assert!(
            live_mapped > 0 && live_map_churned * 10 < live_mapped,
            "JDK {}: unmapped mappings stay live: leak {live_mapped}, churn {live_map_churned}",
            jdk.version
        );
        let status = jtap(["status", &pid]).ok();
        assert!(
            status.contains("recordings: none"),
            "JDK {}: {status}",
            jdk.version
        );
        assert_eq!(jvm.stdout.text(), "READY\n", "JDK {}", jdk.version);
    }
}
