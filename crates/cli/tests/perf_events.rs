//! `jtap profile -e <perf event>` on every JDK of the matrix, against `workloads.PerfEvents`
//! (one thread touching fresh pages, one sleeping a millisecond at a time, one computing):
//! `page-faults` puts the toucher's method first, `context-switches` and the tracepoint
//! `sched:sched_switch` the sleeper's well before the spinner's; a hardware counter works or is refused in one line
//! naming the missing counters (these VMs have none); an unknown event is refused by name.

mod common;

use std::path::Path;

use common::{agent_library, collapsed, jtap};
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

/// Of the events in the workload's methods, the share of `method`.
fn share(counts: [u64; 3], method: usize) -> f64 {
    counts[method] as f64 / counts.iter().sum::<u64>().max(1) as f64
}

/// Whether the sleeper leads the switches: it switches out ~500 times a second of its own
/// accord, the spinner only when preempted. The toucher is left out: it waits for the
/// collections that free direct memory (`Bits.reserveMemory`), so it switches out often too,
/// as much as the sleeper on a loaded machine.
fn sleeper_leads(counts: [u64; 3]) -> bool {
    counts[1] > counts[2]
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
        let mut jvm = JavaProcess::builder(jdk, "workloads.PerfEvents")
            .jvm_arg("-XX:MaxDirectMemorySize=64m")
            .start();
        let pid = jvm.pid().to_string();
        let profile = |event: &str| {
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
            by_method(&collapsed(&jtap(args).ok()))
        };
        let faults = profile("page-faults");
        assert!(share(faults, 0) > 0.8, "JDK {v}: page-faults {faults:?}");
        let switches = profile("context-switches");
        assert!(
            sleeper_leads(switches),
            "JDK {v}: context-switches {switches:?}"
        );
        if tracepoints {
            let switched = profile("sched:sched_switch");
            assert!(
                sleeper_leads(switched),
                "JDK {v}: sched:sched_switch {switched:?}"
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
