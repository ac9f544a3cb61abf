//! `jtap profile -e <perf event>` on every JDK of the matrix, against `workloads.PerfEvents`
//! (one thread touching fresh pages, one sleeping a millisecond at a time, one computing):
//! `page-faults` puts the toucher's method first and walks the safepoint polls that trap from
//! the poll; `context-switches` and the tracepoint `sched:sched_switch` put the sleeper's
//! before the spinner's where the kernel's own counts of their switches do; a hardware
//! counter works or is refused in one line naming the missing counters (these VMs have none);
//! an unknown event is refused by name.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use common::{agent_library, collapsed, collapsed_file, jtap};
use jtap_testkit::{jdks, JavaProcess};

/// The workload's methods, one per thread.
const METHODS: [&str; 3] = [
    "workloads.PerfEvents.touch",
    "workloads.PerfEvents.nap",
    "workloads.PerfEvents.spin",
];

/// Events of the stacks through each of the workload's methods.
fn by_method(stacks: &[(Vec<String>, u64)]) -> [u64; 3] {
    METHODS.map(|method| {
        stacks
            .iter()
            .filter(|(frames, _)| frames.iter().any(|f| f.starts_with(method)))
            .map(|(_, count)| count)
            .sum()
    })
}

/// What a failed check saw: the samples, and the heaviest stacks' leaf frames.
fn heaviest(stacks: &[(Vec<String>, u64)]) -> String {
    let mut sorted: Vec<_> = stacks.iter().collect();
    sorted.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    let total: u64 = stacks.iter().map(|(_, n)| n).sum();
    let tops: Vec<String> = sorted
        .iter()
        .take(3)
        .map(|(frames, n)| format!("{n} in {}", frames.last().map_or("-", String::as_str)))
        .collect();
    format!("{total} samples in all, heaviest: {}", tops.join(", "))
}

/// Of the events in the workload's methods, the share of `method`.
fn share(counts: [u64; 3], method: usize) -> f64 {
    counts[method] as f64 / counts.iter().sum::<u64>().max(1) as f64
}

/// Context switches of the sleeper and the spinner threads so far, as the kernel counts them
/// (voluntary and not).
fn kernel_switches(pid: u32) -> [u64; 2] {
    let mut counts = [0; 2];
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return counts;
    };
    for task in tasks.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        let slot = match comm.trim() {
            "sleeper" => 0,
            "spinner" => 1,
            _ => continue,
        };
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        counts[slot] = status
            .lines()
            .filter(|l| l.contains("ctxt_switches"))
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum();
    }
    counts
}

/// Whether the switches jtap counted lead to the thread the kernel says switched most, of the
/// sleeper and the spinner. The sleeper switches out ~1000 times a second of its own accord
/// (more while a profiler's signals wake it), the spinner only when preempted or stopped at a
/// safepoint: far fewer on an idle machine, but on a loaded one it may be preempted as often,
/// so the kernel's counts of the same seconds decide. A near tie (less than twice) decides
/// nothing. The toucher is left out: it sleeps between its buffers, so it switches out often
/// too.
fn leads_like_the_kernel(counts: [u64; 3], kernel: [u64; 2]) -> bool {
    let [sleeper, spinner] = kernel;
    match () {
        _ if sleeper > 2 * spinner => counts[1] > counts[2],
        _ if spinner > 2 * sleeper => counts[2] > counts[1],
        _ => true,
    }
}

#[test]
fn each_perf_event_leads_to_the_thread_that_causes_it() {
    agent_library();
    let tracepoints = Path::new("/sys/kernel/tracing/events/sched/sched_switch/id").exists();
    if !tracepoints {
        eprintln!("SKIPPING sched:sched_switch: tracefs is not mounted (scripts/setup-system.sh mounts it as root)");
    }
    for jdk in jdks() {
        let v = jdk.version;
        // Each of the toucher's buffers mapped anew (see the workload).
        let mut jvm = JavaProcess::builder(jdk, "workloads.PerfEvents")
            .env("MALLOC_MMAP_THRESHOLD_", "65536")
            .start();
        let pid_number = jvm.pid();
        let pid = pid_number.to_string();
        let stacks = |event: &str| {
            let args = [
                "profile",
                &pid,
                "-e",
                event,
                "-d",
                "2",
                "--format",
                "collapsed",
            ];
            collapsed(&jtap(args).ok())
        };
        // The kernel's counts are read while the recording runs, between its start and its
        // stop: around a whole `profile -d` they would also hold the attach and the agent's
        // setup, seconds on a loaded machine, whose load preempts the spinner at its own rate.
        let dir = tempfile::tempdir().unwrap();
        let switches_of = |event: &str| {
            let out = dir
                .path()
                .join(format!("{}.collapsed", event.replace(':', "-")));
            jtap(["profile", "start", &pid, "-e", event]).ok();
            let before = kernel_switches(pid_number);
            std::thread::sleep(std::time::Duration::from_secs(2));
            let after = kernel_switches(pid_number);
            jtap(["profile", "stop", &pid, "-o", out.to_str().unwrap()]).ok();
            let kernel = [after[0] - before[0], after[1] - before[1]];
            (by_method(&collapsed_file(&out)), kernel)
        };
        // Safepoints all through the profile: each running thread's poll traps, a page fault
        // in the stub the VM sends it to.
        let profiled = AtomicBool::new(false);
        let fault_stacks = std::thread::scope(|scope| {
            scope.spawn(|| {
                while !profiled.load(Ordering::Relaxed) {
                    jtap(["jcmd", &pid, "Thread.print"]).ok();
                    std::thread::sleep(std::time::Duration::from_millis(200));
                }
            });
            let stacks = stacks("page-faults");
            profiled.store(true, Ordering::Relaxed);
            stacks
        });
        let leaf_count = |leaf: &str, through: &str| -> u64 {
            (fault_stacks.iter())
                .filter(|(frames, _)| frames.last().is_some_and(|f| f == leaf))
                .filter(|(frames, _)| frames.iter().any(|f| f.starts_with(through)))
                .map(|(_, count)| count)
                .sum()
        };
        let (walked, unwalked) = (
            leaf_count("[safepoint poll]", METHODS[2]),
            leaf_count("[in SafepointBlob]", ""),
        );
        assert!(
            walked > 0 && unwalked == 0,
            "JDK {v}: the spinner's trapped safepoint polls: {walked} walked from the poll, {unwalked} not walked"
        );
        let faults = by_method(&fault_stacks);
        assert!(
            share(faults, 0) > 0.8,
            "JDK {v}: page-faults {faults:?}; {}; the JVM {}",
            heaviest(&fault_stacks),
            if jvm.is_running() { "runs" } else { "died" }
        );
        let (switches, kernel) = switches_of("context-switches");
        assert!(
            leads_like_the_kernel(switches, kernel),
            "JDK {v}: context-switches {switches:?}, the kernel's [sleeper, spinner] {kernel:?}"
        );
        if tracepoints {
            let (switched, kernel) = switches_of("sched:sched_switch");
            assert!(
                leads_like_the_kernel(switched, kernel),
                "JDK {v}: sched:sched_switch {switched:?}, the kernel's [sleeper, spinner] {kernel:?}"
            );
        }
        let cycles = jtap([
            "profile",
            &pid,
            "-e",
            "cycles",
            "-d",
            "1",
            "--format",
            "collapsed",
        ]);
        if cycles.code != 0 {
            assert!(
                cycles.stderr.contains("no hardware counters")
                    && cycles.stderr.lines().count() == 1,
                "JDK {v}: {}",
                cycles.stderr
            );
        }
        jtap(["profile", &pid, "-e", "page-fault", "-d", "1"])
            .fails_with(23, "unknown perf event \"page-fault\"");
    }
}
