//! `jtap profile -e nativelock` on every JDK of the matrix, against a JNI library whose
//! threads contend on one pthread mutex (tests/native/native_lock.c, driven by
//! `workloads.NativeLock`):
//! - the waits for the shared mutex are a stack ending in `pthread_mutex_lock`, through the
//!   JNI function and the Java method that called it, weighing about the time the waiting
//!   threads spent (a thread coming back from the JNI call may also wait at a safepoint, in
//!   `pthread_cond_wait` under HotSpot's frames);
//! - the uncontended mutex (taken a million times a second) never shows: a lock the try
//!   finds free is not a wait;
//! - the hooks are removed at the end, and the program's output is untouched;
//! - a bad `--nativelock` is refused before attaching.

mod common;

use common::{agent_library, collapsed, jtap};
use jtap_testkit::{compiled_native_library, jdks, JavaProcess};

/// Nanoseconds of the stacks through `function` (a native frame) and `caller` (a Java frame).
fn waited_through(stacks: &[(Vec<String>, u64)], function: &str, caller: &str) -> u64 {
    stacks
        .iter()
        .filter(|(frames, _)| {
            frames.iter().any(|f| f.contains(function)) && frames.iter().any(|f| f.contains(caller))
        })
        .map(|(_, nanos)| nanos)
        .sum()
}

#[test]
fn waits_for_a_contended_pthread_mutex_name_their_callers() {
    agent_library();
    let library = compiled_native_library("native_lock");
    for jdk in jdks() {
        let mut jvm = JavaProcess::builder(jdk, "workloads.NativeLock")
            .arg(&library)
            .start();
        let pid = jvm.pid().to_string();
        let stacks = collapsed(
            &jtap([
                "profile",
                &pid,
                "-e",
                "nativelock",
                "-d",
                "3",
                "--format",
                "collapsed",
            ])
            .ok(),
        );
        let contended: Vec<&(Vec<String>, u64)> = stacks
            .iter()
            .filter(|(frames, _)| {
                frames
                    .iter()
                    .any(|f| f.contains("Java_workloads_NativeLock_contend"))
            })
            .collect();
        let waited = waited_through(
            &stacks,
            "libnative_lock.so!Java_workloads_NativeLock_contend",
            "workloads.NativeLock.contendSite",
        );
        eprintln!(
            "JDK {}: waited {waited} ns for the shared mutex",
            jdk.version
        );
        // Four threads take turns holding it for 1 ms: about three wait at any time.
        assert!(
            waited > 1_000_000_000,
            "JDK {}: waited {waited} ns: {stacks:?}",
            jdk.version
        );
        assert!(
            contended.iter().all(|(frames, _)| frames
                .last()
                .is_some_and(|leaf| leaf == "pthread_mutex_lock")),
            "JDK {}: the waits end in pthread_mutex_lock: {contended:?}",
            jdk.version
        );
        assert!(
            !stacks
                .iter()
                .any(|(frames, _)| frames.iter().any(|f| f.contains("NativeLock.aloneSite"))),
            "JDK {}: an uncontended lock was recorded: {stacks:?}",
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

#[test]
fn a_bad_threshold_is_refused_before_attaching() {
    let run = jtap(["profile", "1", "--nativelock", "10"]);
    assert_eq!(run.code, 2, "{run:?}");
    let first = run.stderr.lines().next().unwrap_or_default();
    assert!(first.contains("'10' needs a unit"), "{run:?}");
    assert!(!run.stderr.contains("panicked"), "{run:?}");
}
