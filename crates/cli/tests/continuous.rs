//! Continuous profiling (`loop=`): on every JDK of the matrix a detached recording rotates
//! its JFR file every period and keeps only the newest `--keep`, each file a whole period
//! of cpu and alloc samples; a recording started with `-agentpath` rotates with no CLI
//! present; a thousand rotations leave the JVM's memory flat.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{agent_library, jtap};
use jtap_testkit::{jdks, JavaProcess};

/// The files in `dir` named `<prefix><n>.jfr`, by n.
fn periods(dir: &Path, prefix: &str) -> Vec<(u64, PathBuf)> {
    let mut files: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            let name = path.file_name()?.to_str()?;
            let n = name
                .strip_prefix(prefix)?
                .strip_suffix(".jfr")?
                .parse()
                .ok()?;
            Some((n, path))
        })
        .collect();
    files.sort();
    files
}

/// `jtap: cpu: N samples (..., 1.0 s)` lines of `jtap convert` of a file: (event, samples,
/// seconds).
fn converted(file: &Path) -> Vec<(String, u64, f64)> {
    let summary = file.with_extension("txt");
    let run = jtap([
        "convert",
        file.to_str().unwrap(),
        "-o",
        summary.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{}: {run:?}", file.display());
    run.stderr
        .lines()
        .filter_map(|line| {
            let line = line.strip_prefix("jtap: ")?;
            // One profile's line has no event: `jtap: 102 samples (cpu engine, 1.0 s)`.
            let (event, rest) = match line.split_once(": ") {
                Some((event, rest)) => (event.to_string(), rest),
                None => (
                    line.split_once(" samples (")?
                        .1
                        .split(' ')
                        .next()?
                        .to_string(),
                    line,
                ),
            };
            let (samples, rest) = rest.split_once(" samples (")?;
            let seconds = rest.rsplit_once(", ")?.1.strip_suffix(" s)")?;
            Some((
                event.to_string(),
                samples.parse().ok()?,
                seconds.parse().ok()?,
            ))
        })
        .collect()
}

#[test]
fn a_looping_recording_rotates_its_file_and_keeps_the_newest() {
    agent_library();
    for jdk in jdks() {
        let dir = tempfile::tempdir().unwrap();
        let mut jvm = JavaProcess::start(jdk, "workloads.Mixed");
        let pid = jvm.pid().to_string();
        let pattern = dir.path().join("app-%n.jfr");
        let start = jtap([
            "profile",
            "start",
            &pid,
            "-e",
            "cpu,alloc",
            "--loop",
            "1s",
            "--keep",
            "2",
            "-o",
            pattern.to_str().unwrap(),
        ]);
        assert_eq!(start.code, 0, "JDK {}: {start:?}", jdk.version);
        std::thread::sleep(Duration::from_millis(3600));
        let stop = jtap([
            "profile",
            "stop",
            &pid,
            "-o",
            dir.path().join("last.txt").to_str().unwrap(),
        ]);
        assert_eq!(stop.code, 0, "JDK {}: {stop:?}", jdk.version);
        // Periods ended on the loop about every second, the last one on stop; the newest
        // two are kept.
        let files = periods(dir.path(), "app-");
        let numbers: Vec<u64> = files.iter().map(|(n, _)| *n).collect();
        assert!(
            numbers.len() == 2 && numbers[0] >= 2 && numbers[1] == numbers[0] + 1,
            "JDK {}: {files:?}",
            jdk.version
        );
        let (_, whole) = &files[0];
        let events = converted(whole);
        let names: Vec<&str> = events.iter().map(|(e, _, _)| e.as_str()).collect();
        assert_eq!(names, ["cpu", "alloc"], "JDK {}: {events:?}", jdk.version);
        for (event, samples, seconds) in &events {
            assert!(
                *samples > 10 && (0.8..=1.6).contains(seconds),
                "JDK {}: period 3's {event}: {samples} samples over {seconds} s",
                jdk.version
            );
        }
        assert!(jvm.is_running(), "JDK {}", jdk.version);
    }
}

#[test]
fn a_recording_started_with_the_jvm_rotates_without_a_client() {
    let library = agent_library();
    for jdk in jdks() {
        let dir = tempfile::tempdir().unwrap();
        let pattern = dir.path().join("boot-%n.jfr");
        let mut jvm = JavaProcess::builder(jdk, "workloads.Mixed")
            .jvm_arg(format!(
                "-agentpath:{}=start,event=cpu,loop=1s,file={}",
                library.display(),
                pattern.display()
            ))
            .start();
        let deadline = Instant::now() + Duration::from_secs(30);
        while periods(dir.path(), "boot-").len() < 2 {
            assert!(
                Instant::now() < deadline,
                "JDK {}: {}",
                jdk.version,
                jvm.stderr.text()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        let (_, first) = &periods(dir.path(), "boot-")[0];
        let events = converted(first);
        assert!(
            events
                .first()
                .is_some_and(|(e, samples, _)| e == "cpu" && *samples > 10),
            "JDK {}: {events:?}",
            jdk.version
        );
        assert!(jvm.is_running(), "JDK {}", jdk.version);
    }
}

#[test]
fn a_thousand_rotations_leave_memory_flat() {
    agent_library();
    let jdk = jdks()
        .iter()
        .find(|j| j.version == 17)
        .unwrap_or(&jdks()[0]);
    let dir = tempfile::tempdir().unwrap();
    // A heap of fixed size, touched at start: the workload allocates, and a growing heap
    // would hide what the agent keeps.
    let mut jvm = JavaProcess::builder(jdk, "workloads.Mixed")
        .jvm_arg("-Xms128m")
        .jvm_arg("-Xmx128m")
        .jvm_arg("-XX:+AlwaysPreTouch")
        .start();
    let pid = jvm.pid().to_string();
    let pattern = dir.path().join("r-%n.jfr");
    let start = jtap([
        "profile",
        "start",
        &pid,
        "-e",
        "cpu,alloc,lock",
        "--loop",
        "10ms",
        "--keep",
        "3",
        "-o",
        pattern.to_str().unwrap(),
    ]);
    assert_eq!(start.code, 0, "{start:?}");
    let reached = |n: u64| {
        let deadline = Instant::now() + Duration::from_secs(240);
        while periods(dir.path(), "r-").last().map_or(0, |(k, _)| *k) < n {
            assert!(Instant::now() < deadline, "{n} rotations not reached");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    reached(100);
    let before = jvm.rss_kib();
    reached(1000);
    let after = jvm.rss_kib();
    let stop = jtap([
        "profile",
        "stop",
        &pid,
        "-o",
        dir.path().join("last.txt").to_str().unwrap(),
    ]);
    assert_eq!(stop.code, 0, "{stop:?}");
    eprintln!("RSS after 100 rotations {before} KiB, after 1000 {after} KiB");
    assert!(
        after <= before + 5 * 1024,
        "RSS grew {} KiB over 900 rotations",
        after.saturating_sub(before)
    );
    assert!(
        periods(dir.path(), "r-").len() <= 4,
        "keep=3 (and the last)"
    );
    assert!(jvm.is_running());
}
