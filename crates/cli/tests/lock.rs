//! `jtap profile -e lock` and `java.util.concurrent` locks, on every JDK of the matrix:
//! - the one contended `ReentrantLock` comes out on top, with its class as leaf, while waits
//!   that are not contention (a `Condition`, a `CountDownLatch`, idle pool workers in
//!   `LinkedBlockingQueue.take`) and uncontended locks are not reported; a second profile
//!   works the same (the hook is unbound and bound again), the workload keeps running and
//!   its stdout gets no VM warning about the rebinding;
//! - `synchronized` monitors and `ReentrantLock`s show up side by side, also when the engine
//!   is started with `-agentpath` (the binding then waits for VMInit).

mod common;

use std::time::{Duration, Instant};

use common::{agent_library, collapsed, jtap};
use jtap_testkit::{jdks, JavaProcess};

/// The leaf frame of a `ReentrantLock` waited for.
const REENTRANT_LOCK: &str = "java.util.concurrent.locks.ReentrantLock$NonfairSync";

/// `jtap profile <pid> -e lock -d <seconds> --format collapsed`, parsed.
fn lock_profile(pid: &str, seconds: &str) -> (String, Vec<(Vec<String>, u64)>) {
    let out = jtap([
        "profile",
        pid,
        "-e",
        "lock",
        "-d",
        seconds,
        "--format",
        "collapsed",
    ])
    .ok();
    let stacks = collapsed(&out);
    (out, stacks)
}

/// Sum of the counts of stacks with leaf `leaf` and a frame starting with `frame`.
fn count(stacks: &[(Vec<String>, u64)], leaf: &str, frame: &str) -> u64 {
    stacks
        .iter()
        .filter(|(f, _)| f.last().is_some_and(|l| l == leaf))
        .filter(|(f, _)| f.iter().any(|x| x.starts_with(frame)))
        .map(|(_, c)| c)
        .sum()
}

/// The workload's last "ops <millis> <count>" count.
fn last_ops(jvm: &JavaProcess) -> u64 {
    jvm.stdout
        .text()
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("ops ")?.split(' ').nth(1)?.parse().ok())
        .unwrap_or(0)
}

#[test]
fn lock_profile_puts_the_contended_reentrant_lock_on_top() {
    agent_library();
    for jdk in jdks() {
        let mut jvm = JavaProcess::start(jdk, "workloads.ParkContention");
        let pid = jvm.pid().to_string();
        for round in ["first", "second"] {
            let (out, stacks) = lock_profile(&pid, "3");
            let total: u64 = stacks.iter().map(|(_, c)| c).sum();
            let hot = count(&stacks, REENTRANT_LOCK, "workloads.ParkContention.hot");
            assert!(
                total > 0 && hot as f64 >= 0.9 * total as f64,
                "JDK {}, {round} profile: {hot} of {total} waits on the hot lock: {out}",
                jdk.version
            );
            // Only lock waits: no Condition, latch or pool-queue wait as such (the pool's
            // queue lock itself may be contended now and then: that is a ReentrantLock too).
            assert!(
                stacks
                    .iter()
                    .all(|(f, _)| f.last().is_some_and(|l| l == REENTRANT_LOCK)),
                "JDK {}, {round} profile: a leaf that is not a ReentrantLock: {out}",
                jdk.version
            );
            for idle in ["ParkContention.cold", "awaitNanos", "CountDownLatch"] {
                assert!(
                    !out.contains(idle),
                    "JDK {}, {round} profile: {idle} is reported: {out}",
                    jdk.version
                );
            }
        }
        // --threads: each wait under its thread, the four lockers apart.
        let out = jtap([
            "profile",
            &pid,
            "-e",
            "lock",
            "-d",
            "3",
            "--threads",
            "--format",
            "collapsed",
        ])
        .ok();
        let roots: std::collections::BTreeSet<&str> =
            out.lines().filter_map(|l| l.split(';').next()).collect();
        assert!(
            roots
                .iter()
                .all(|r| r.starts_with('[') && r.contains("tid="))
                && roots.iter().filter(|r| r.starts_with("[locker-")).count() >= 2,
            "JDK {}: thread roots {roots:?}: {out}",
            jdk.version
        );
        // After the stops the workload goes on, and nothing was printed on its stdout but its
        // own lines (HotSpot warns there about rebinding a platform native the wrong way).
        let before = last_ops(&jvm);
        let deadline = Instant::now() + Duration::from_secs(10);
        while last_ops(&jvm) <= before + 100 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(
            jvm.is_running() && last_ops(&jvm) > before + 100,
            "JDK {}: the workload stalled after profiling: {}",
            jdk.version,
            jvm.stderr.text()
        );
        let stdout = jvm.stdout.text();
        assert!(
            stdout
                .lines()
                .all(|l| l == "READY" || l.starts_with("ops ")),
            "JDK {}: unexpected output on the JVM's stdout: {stdout}",
            jdk.version
        );
    }
}

/// Asserts that `workloads.ParkContention mixed` showed both its ReentrantLock and its
/// monitor waits (`out` is the profile, for the failure message).
fn assert_monitor_and_lock_waits(version: u32, stacks: &[(Vec<String>, u64)], out: &str) {
    let lock = count(stacks, REENTRANT_LOCK, "workloads.ParkContention.hot");
    let monitor = count(
        stacks,
        "workloads.ParkContention$Monitor",
        "workloads.ParkContention.monitor",
    );
    assert!(
        lock > 0 && monitor > 0,
        "JDK {version}: {lock} ReentrantLock and {monitor} monitor waits: {out}"
    );
}

#[test]
fn lock_profile_shows_monitors_and_reentrant_locks_together() {
    agent_library();
    for jdk in jdks() {
        let mut jvm = JavaProcess::builder(jdk, "workloads.ParkContention")
            .arg("mixed")
            .start();
        let pid = jvm.pid().to_string();
        let (out, stacks) = lock_profile(&pid, "3");
        assert_monitor_and_lock_waits(jdk.version, &stacks, &out);
    }
}

#[test]
fn lock_profile_from_start_up_includes_reentrant_locks() {
    let library = agent_library();
    let dir = tempfile::tempdir().unwrap();
    for jdk in jdks() {
        let path = dir.path().join(format!("{}.collapsed", jdk.version));
        let mut jvm = JavaProcess::builder(jdk, "workloads.ParkContention")
            .jvm_arg(format!(
                "-agentpath:{}=start,event=lock,file={}",
                library.display(),
                path.display()
            ))
            .arg("mixed")
            .arg("3")
            .start();
        assert_eq!(
            jvm.wait(Duration::from_secs(60)),
            Some(Some(0)),
            "JDK {}: {}",
            jdk.version,
            jvm.stderr.text()
        );
        let out = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("JDK {}: no profile: {e}", jdk.version));
        let stacks = collapsed(&out);
        assert_monitor_and_lock_waits(jdk.version, &stacks, &out);
    }
}
