//! Several engines and clients at once, on every JDK of the matrix: cpu, alloc, lock and wall
//! in one session on the 1:2:4 workload, a trace beside two running profiles, clients that
//! each stop only what they started, a refused second engine of one kind, and 200 start/stop
//! cycles of all four engines on one JVM (reusing the sampling engines' code map, which ends
//! with its linger).

mod common;

use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use common::{agent_library, agent_stalls, jtap, Background};
use jtap_testkit::{jdks, JavaProcess};

/// The tests here keep two cores busy, and wall-clock shares measure time the threads spent,
/// which a concurrent test's threads stretch unevenly: they run one at a time.
fn one_at_a_time() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Sum of the counts of the stacks of a collapsed file containing each of `names`.
fn counts_with(path: &Path, names: &[&str]) -> Vec<u64> {
    let stacks = common::collapsed_file(path);
    names
        .iter()
        .map(|name| {
            stacks
                .iter()
                .filter(|(frames, _)| frames.iter().any(|f| f.contains(name)))
                .map(|(_, n)| n)
                .sum()
        })
        .collect()
}

/// The newest `SPENT one two four` line `workloads.Mixed` has printed: the wall-clock
/// nanoseconds its burn threads have spent in each burn method so far.
fn spent_in_burn_methods(jvm: &JavaProcess) -> Vec<u64> {
    last_numbers(jvm, "SPENT ")
}

/// The nanoseconds Mixed's holder kept each monitor so far.
fn held_monitors(jvm: &JavaProcess) -> Vec<u64> {
    last_numbers(jvm, "HELD ")
}

/// The numbers on the workload's last line that starts with `prefix`.
fn last_numbers(jvm: &JavaProcess, prefix: &str) -> Vec<u64> {
    let text = jvm.stdout.text();
    let line = text
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no {prefix}line in {text:?}"));
    line.split(' ').map(|n| n.parse().unwrap()).collect()
}

fn shares(counts: &[u64]) -> Vec<f64> {
    let total = counts.iter().sum::<u64>().max(1) as f64;
    counts.iter().map(|&c| c as f64 * 100.0 / total).collect()
}

/// The recordings `jtap status` lists, as `recording N: <engines> running` (without how
/// long for and whose).
fn recordings(pid: &str) -> Vec<String> {
    jtap(["status", pid])
        .ok()
        .lines()
        .filter(|l| l.starts_with("recording "))
        .map(|l| l.split(" for ").next().unwrap_or(l).to_string())
        .collect()
}

/// Whether `status` shows the agent holding nothing for a recording: no capability, or only
/// the two of the sampling engines' code map while it outlives the last recording (and
/// says so).
fn holds_nothing_but_the_code_map(status: &str) -> bool {
    status.contains("capabilities held: none\n")
        || (status.contains("code map kept for the next recording: ")
            && status.contains(
                "capabilities held: can_get_line_numbers, can_generate_compiled_method_load_events\n",
            ))
}

/// Waits until `jtap status` lists `count` recordings.
fn wait_for_recordings(pid: &str, count: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let listed = recordings(pid);
        if listed.len() == count {
            return listed;
        }
        assert!(Instant::now() < deadline, "recordings: {listed:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn cpu_alloc_lock_and_wall_in_one_session_each_keep_the_one_two_four_ratio() {
    let _serial = one_at_a_time();
    agent_library();
    let nominal = [100.0 / 7.0, 200.0 / 7.0, 400.0 / 7.0];
    let by_event = [
        ("cpu", ["Burn.burnOne", "Burn.burnTwo", "Burn.burnFour"]),
        ("wall", ["Burn.burnOne", "Burn.burnTwo", "Burn.burnFour"]),
        (
            "alloc",
            [
                "AllocSites.intSite",
                "AllocSites.longSite",
                "AllocSites.byteSite",
            ],
        ),
        ("lock", ["Mixed.waitOne", "Mixed.waitTwo", "Mixed.waitFour"]),
    ];
    let dir = tempfile::tempdir().unwrap();
    for jdk in jdks() {
        let mut jvm = JavaProcess::start(jdk, "workloads.Mixed");
        let pid = jvm.pid().to_string();
        std::thread::sleep(Duration::from_millis(1500)); // let the JIT settle
        let spent_before = spent_in_burn_methods(&jvm);
        let held_before = held_monitors(&jvm);
        let out = dir.path().join(format!("{}.collapsed", jdk.version));
        let page = dir.path().join(format!("{}.html", jdk.version));
        let pprof = dir.path().join(format!("{}.pb.gz", jdk.version));
        let run = jtap([
            "profile",
            &pid,
            "-e",
            "cpu,alloc,lock",
            // About 3,000 cpu and wall samples in 6 s, as many as the allocation samples
            // below: a share's standard error under 1 point (at 10 ms, 600 samples put it at
            // 2 points, and ±5 failed now and then).
            "-i",
            "2ms",
            "--wall",
            "2ms",
            // About 2,400 allocation samples in 6 s: a share's standard error under 1 point.
            "--alloc",
            "128k",
            "-d",
            "6s",
            "--timeout",
            "30s",
            "-o",
            out.to_str().unwrap(),
            "-o",
            page.to_str().unwrap(),
            "-o",
            pprof.to_str().unwrap(),
        ]);
        assert_eq!(run.code, 0, "JDK {}: {run:?}", jdk.version);
        // Wall-clock time follows the work 1:2:4 only on an idle machine: a busy scheduler
        // stretches the 24-ms turns of burnFour more than the 6-ms turns of burnOne. The
        // wall-clock and lock shares are checked against the times the workload measured.
        std::thread::sleep(Duration::from_millis(250));
        let spent: Vec<u64> = spent_in_burn_methods(&jvm)
            .iter()
            .zip(&spent_before)
            .map(|(after, before)| after - before)
            .collect();
        let spent = shares(&spent);
        // Likewise the monitors' hold times: a late wake-up of the holder adds the same delay
        // to each hold, which bends 1:2:4 (1 ms more makes it 2:3:5).
        let held: Vec<u64> = held_monitors(&jvm)
            .iter()
            .zip(&held_before)
            .map(|(after, before)| after - before)
            .collect();
        let held = shares(&held);
        // One page and one pprof file hold all four events.
        let html = std::fs::read_to_string(&page).unwrap();
        for event in ["cpu", "alloc", "lock", "wall"] {
            assert!(
                html.contains(&format!("\"event\":\"{event}\"")),
                "JDK {}",
                jdk.version
            );
        }
        let types = jtap_profile::decode_pprof(&std::fs::read(&pprof).unwrap())
            .unwrap()
            .sample_types;
        assert_eq!(types.len(), 8, "JDK {}: {types:?}", jdk.version);
        for (event, methods) in by_event {
            let file = dir
                .path()
                .join(format!("{}.{event}.collapsed", jdk.version));
            assert!(
                run.stdout.contains(file.to_str().unwrap()),
                "JDK {}: {event} file not listed: {run:?}",
                jdk.version
            );
            // One frame per method, as async-profiler draws them by default (`--lines` adds
            // the lines).
            let with_line = common::collapsed_file(&file)
                .into_iter()
                .flat_map(|(frames, _)| frames)
                .find(|f| {
                    f.rsplit_once(':')
                        .is_some_and(|(_, n)| n.parse::<u32>().is_ok())
                });
            assert_eq!(with_line, None, "JDK {} {event}", jdk.version);
            let counts = counts_with(&file, &methods);
            let measured = shares(&counts);
            let expected = match event {
                "wall" => &spent[..],
                "lock" => &held[..],
                _ => &nominal[..],
            };
            eprintln!(
                "JDK {} {event:5}: {counts:?} = {:.1}/{:.1}/{:.1}% (expected {:.1}/{:.1}/{:.1}%)",
                jdk.version,
                measured[0],
                measured[1],
                measured[2],
                expected[0],
                expected[1],
                expected[2]
            );
            assert!(
                counts.iter().all(|&c| c > 0),
                "JDK {} {event}: {counts:?}",
                jdk.version
            );
            for i in 0..3 {
                assert!(
                    (measured[i] - expected[i]).abs() <= 5.0,
                    "JDK {} {event}: {} has {:.1}%, expected {:.1}% ± 5",
                    jdk.version,
                    methods[i],
                    measured[i],
                    expected[i]
                );
            }
        }
        assert!(jvm.is_running());
    }
}

#[test]
fn a_trace_beside_two_profiles_and_each_client_stops_only_its_own() {
    let _serial = one_at_a_time();
    agent_library();
    let dir = tempfile::tempdir().unwrap();
    for jdk in jdks() {
        let mut jvm = JavaProcess::start(jdk, "workloads.Mixed");
        let pid = jvm.pid().to_string();
        let file = |name: &str| dir.path().join(format!("{}-{name}", jdk.version));
        let cpu_out = file("cpu.collapsed");
        let alloc_out = file("alloc.collapsed");
        let cpu = Background::start(
            &[
                "profile",
                &pid,
                "-e",
                "cpu",
                "-d",
                "120s",
                "-o",
                cpu_out.to_str().unwrap(),
            ],
            dir.path(),
        );
        wait_for_recordings(&pid, 1);
        let alloc = Background::start(
            &[
                "profile",
                &pid,
                "-e",
                "alloc",
                "-d",
                "120s",
                "-o",
                alloc_out.to_str().unwrap(),
            ],
            dir.path(),
        );
        let both = wait_for_recordings(&pid, 2);
        assert!(
            both[0].contains(": cpu running") && both[1].contains(": alloc running"),
            "JDK {}: {both:?}",
            jdk.version
        );
        // A second engine of a kind already running is refused, naming the first.
        jtap(["profile", &pid, "-e", "cpu", "-d", "1s"])
            .fails_with(23, "cannot start cpu: the cpu engine is already running");
        // A trace, from a third client, runs and ends while both profiles go on.
        let trace = jtap(["trace", &pid, "workloads.Mixed::waitOne", "-n", "3"]);
        assert_eq!(trace.code, 0, "JDK {}: {trace:?}", jdk.version);
        assert_eq!(
            trace
                .stdout
                .lines()
                .filter(|l| l.contains("waitOne"))
                .count(),
            3,
            "JDK {}: {trace:?}",
            jdk.version
        );
        assert_eq!(wait_for_recordings(&pid, 2), both, "JDK {}", jdk.version);
        // Ctrl-C on the cpu client ends the cpu recording only.
        cpu.interrupt();
        let (code, _, stderr) = cpu.finish(Duration::from_secs(60));
        assert_eq!(code, 0, "JDK {}: {stderr}", jdk.version);
        assert!(
            counts_with(&cpu_out, &["Burn.burnFour"])[0] > 0,
            "JDK {}: {stderr}",
            jdk.version
        );
        let left = wait_for_recordings(&pid, 1);
        assert!(
            left[0].contains(": alloc running"),
            "JDK {}: {left:?}",
            jdk.version
        );
        alloc.interrupt();
        let (code, _, stderr) = alloc.finish(Duration::from_secs(60));
        assert_eq!(code, 0, "JDK {}: {stderr}", jdk.version);
        assert!(
            counts_with(&alloc_out, &["AllocSites.byteSite"])[0] > 0,
            "JDK {}: {stderr}",
            jdk.version
        );
        let status = jtap(["status", &pid]).ok();
        assert!(
            status.contains("recordings: none") && holds_nothing_but_the_code_map(&status),
            "JDK {}: {status}",
            jdk.version
        );
        assert!(jvm.is_running());
    }
}

#[test]
fn two_hundred_start_stop_cycles_of_four_engines_keep_memory_flat() {
    let _serial = one_at_a_time();
    agent_library();
    for jdk in jdks() {
        // A heap of fixed size, touched at start: the workload allocates, and a growing heap
        // would hide what the agent keeps.
        let mut jvm = JavaProcess::builder(jdk, "workloads.Mixed")
            .jvm_arg("-Xms128m")
            .jvm_arg("-Xmx128m")
            .jvm_arg("-XX:+AlwaysPreTouch")
            .start();
        let pid = jvm.pid().to_string();
        // The agent's log: no stop may find a signal handler or callback still running. The
        // code map outlives a recording by 2 s here: back-to-back cycles reuse it, and it
        // must end once they stop.
        let log = tempfile::NamedTempFile::new().unwrap();
        jtap([
            "load",
            &pid,
            &format!("log={},linger=2s", log.path().display()),
        ])
        .ok();
        let cpu_engines = ["cpu", "itimer", "ctimer"];
        let cycle = |i: usize| {
            let events = format!("{},alloc,lock,wall", cpu_engines[i % 3]);
            jtap(["profile", "start", &pid, "-e", &events, "-i", "1ms"]).ok();
            let summary = jtap(["profile", "stop", &pid, "--format", "summary"]).ok();
            assert_eq!(
                summary.matches("Total samples").count(),
                4,
                "JDK {}: cycle {i}: {summary}",
                jdk.version
            );
        };
        // Warm-up: thread arenas, JIT code for the agent's callers.
        for i in 0..20 {
            cycle(i);
        }
        let before = jvm.rss_kib();
        let started = Instant::now();
        for i in 0..100 {
            cycle(i);
        }
        let middle = jvm.rss_kib();
        for i in 100..200 {
            cycle(i);
        }
        let after = jvm.rss_kib();
        let growth = after as i64 - before as i64;
        eprintln!(
            "JDK {}: 200 start/stop cycles of 4 engines in {:.1} s, RSS {before} KiB -> {middle} KiB -> {after} KiB (growth {growth} KiB)",
            jdk.version,
            started.elapsed().as_secs_f64()
        );
        let stalls = agent_stalls(log.path());
        assert!(stalls.is_empty(), "JDK {}: {stalls:?}", jdk.version);
        assert!(
            growth < 5 * 1024,
            "JDK {}: RSS grew by {growth} KiB",
            jdk.version
        );
        assert!(jvm.is_running());
        let log_text = std::fs::read_to_string(log.path()).unwrap();
        let (built, kept) = (
            log_text.matches("sampler: code map of ").count(),
            log_text
                .matches("sampler: code map kept from the last recording")
                .count(),
        );
        assert!(
            kept >= 150 && built + kept == 220,
            "JDK {}: code map built {built} times, kept {kept} times in 220 cycles",
            jdk.version
        );
        // Once the linger has passed: no events, no capabilities.
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            let status = jtap(["status", &pid]).ok();
            if status.contains("capabilities held: none\n") || Instant::now() > deadline {
                break status;
            }
            std::thread::sleep(Duration::from_millis(500));
        };
        assert!(
            status.contains("recordings: none")
                && status.contains("capabilities held: none\n")
                && !status.contains("code map kept"),
            "JDK {}: {status}",
            jdk.version
        );
    }
}
