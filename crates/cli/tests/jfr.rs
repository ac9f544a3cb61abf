//! JFR in and out on every JDK of the matrix.
//! - Out: one session of cpu, alloc, lock and wall on the 1:2:4 workload written as JFR and
//!   as collapsed stacks; the JDK's own `jfr` tool reads as many events of each kind as jtap
//!   reported samples, and the same samples per method (cpu, wall), bytes per class (alloc)
//!   and time waited per method (lock) as the collapsed files of the same session.
//! - In: `jtap convert` of the JDK's own recording (`-XX:StartFlightRecording`) and of
//!   async-profiler's (and of its pprof) gives the samples per method and bytes per class that `jfr print` reads
//!   in them; filters by event and time range.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{agent_library, jtap};
use jtap_testkit::{jdks, JavaProcess, Jdk};

/// The events of `types` in `recording`, as `jfr print --json` of the JDK gives them.
fn jfr_events(jdk: &Jdk, recording: &Path, types: &str) -> Vec<serde_json::Value> {
    let output = Command::new(jdk.home.join("bin/jfr"))
        .args(["print", "--json", "--stack-depth", "64", "--events", types])
        .arg(recording)
        .output()
        .expect("run jfr");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "JDK {}: jfr print failed: {}",
        jdk.version,
        String::from_utf8_lossy(&output.stderr)
    );
    let json: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("JDK {}: {e}: {text}", jdk.version));
    json["recording"]["events"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// `pkg.Class.method` of each frame of an event's stack, top first.
fn methods(event: &serde_json::Value) -> Vec<String> {
    event["values"]["stackTrace"]["frames"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|frame| {
            let method = &frame["method"];
            let class = method["type"]["name"]
                .as_str()
                .unwrap_or("")
                .replace('/', ".");
            format!("{class}.{}", method["name"].as_str().unwrap_or(""))
        })
        .collect()
}

/// For each name, the sum of `value` over events whose stack has a frame containing it.
fn jfr_sums(
    events: &[serde_json::Value],
    names: &[&str],
    value: impl Fn(&serde_json::Value) -> u64,
) -> Vec<u64> {
    names
        .iter()
        .map(|name| {
            events
                .iter()
                .filter(|e| methods(e).iter().any(|m| m.contains(name)))
                .map(&value)
                .sum()
        })
        .collect()
}

/// For each name, the sum of the counts of collapsed stacks with a frame containing it.
fn collapsed_sums(path: &Path, names: &[&str]) -> Vec<u64> {
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

/// `jtap: cpu: 321 samples (...)` lines of a run's stderr, by event.
fn reported_samples(stderr: &str) -> BTreeMap<String, u64> {
    stderr
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("jtap: ")?;
            let (event, rest) = rest.split_once(": ")?;
            let samples = rest.strip_suffix(')')?.split(" samples").next()?;
            Some((event.to_string(), samples.parse().ok()?))
        })
        .collect()
}

/// Nanoseconds of an ISO-8601 duration as `jfr print --json` writes them (`PT0.001234S`).
fn duration_ns(value: &serde_json::Value) -> u64 {
    let text = value.as_str().unwrap_or("");
    let seconds: f64 = text
        .strip_prefix("PT")
        .and_then(|t| t.strip_suffix('S'))
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("not a PT…S duration: {text}"));
    (seconds * 1e9).round() as u64
}

#[test]
fn a_session_as_jfr_holds_what_its_collapsed_files_hold() {
    agent_library();
    let dir = tempfile::tempdir().unwrap();
    let burn = ["Burn.burnOne", "Burn.burnTwo", "Burn.burnFour"];
    let waits = ["Mixed.waitOne", "Mixed.waitTwo", "Mixed.waitFour"];
    for jdk in jdks() {
        let mut jvm = JavaProcess::start(jdk, "workloads.Mixed");
        let pid = jvm.pid().to_string();
        std::thread::sleep(Duration::from_millis(1000));
        let recording = dir.path().join(format!("{}.jfr", jdk.version));
        let collapsed = dir.path().join(format!("{}.collapsed", jdk.version));
        let run = jtap([
            "profile",
            &pid,
            "-e",
            "cpu,alloc,lock,nativemem",
            "--wall",
            "20ms",
            "-d",
            "3s",
            "--timeout",
            "30s",
            "-o",
            recording.to_str().unwrap(),
            "-o",
            collapsed.to_str().unwrap(),
        ]);
        assert_eq!(run.code, 0, "JDK {}: {run:?}", jdk.version);
        let reported = reported_samples(&run.stderr);
        let file = |event: &str| {
            dir.path()
                .join(format!("{}.{event}.collapsed", jdk.version))
        };

        let cpu = jfr_events(jdk, &recording, "jdk.ExecutionSample");
        assert_eq!(
            Some(&(cpu.len() as u64)),
            reported.get("cpu"),
            "JDK {}: {run:?}",
            jdk.version
        );
        assert_eq!(
            jfr_sums(&cpu, &burn, |_| 1),
            collapsed_sums(&file("cpu"), &burn),
            "JDK {}: cpu samples per method",
            jdk.version
        );
        assert!(
            cpu.iter()
                .all(|e| e["values"]["sampledThread"]["osThreadId"].as_u64() > Some(0)),
            "JDK {}: every sample has its thread",
            jdk.version
        );

        let wall = jfr_events(jdk, &recording, "profiler.WallClockSample");
        let wall_samples = |e: &serde_json::Value| e["values"]["samples"].as_u64().unwrap_or(0);
        assert_eq!(
            Some(&wall.iter().map(wall_samples).sum::<u64>()),
            reported.get("wall"),
            "JDK {}",
            jdk.version
        );
        assert_eq!(
            jfr_sums(&wall, &burn, wall_samples),
            collapsed_sums(&file("wall"), &burn),
            "JDK {}: wall samples per method",
            jdk.version
        );

        // Bytes per class: the class is the collapsed stacks' leaf and the event's objectClass.
        let alloc = jfr_events(jdk, &recording, "jdk.ObjectAllocationSample");
        assert_eq!(
            Some(&(alloc.len() as u64)),
            reported.get("alloc"),
            "JDK {}",
            jdk.version
        );
        let mut jfr_bytes = BTreeMap::<String, u64>::new();
        for event in &alloc {
            let class = event["values"]["objectClass"]["name"]
                .as_str()
                .unwrap_or("")
                .to_string();
            *jfr_bytes.entry(class).or_default() += event["values"]["weight"].as_u64().unwrap();
        }
        let mut collapsed_bytes = BTreeMap::<String, u64>::new();
        for (frames, bytes) in common::collapsed_file(&file("alloc")) {
            let class = frames.last().cloned().unwrap_or_default();
            *collapsed_bytes.entry(class).or_default() += bytes;
        }
        for (internal, java) in [("[I", "int[]"), ("[J", "long[]"), ("[B", "byte[]")] {
            let (from_jfr, from_collapsed) = (jfr_bytes.get(internal), collapsed_bytes.get(java));
            assert!(
                from_jfr.is_some() && from_jfr == from_collapsed,
                "JDK {}: {java}: {from_jfr:?} bytes in the JFR, {from_collapsed:?} collapsed",
                jdk.version
            );
        }

        let lock = jfr_events(jdk, &recording, "jdk.JavaMonitorEnter,jdk.ThreadPark");
        assert_eq!(
            Some(&(lock.len() as u64)),
            reported.get("lock"),
            "JDK {}",
            jdk.version
        );
        assert_eq!(
            jfr_sums(&lock, &waits, |e| duration_ns(&e["values"]["duration"])),
            collapsed_sums(&file("lock"), &waits),
            "JDK {}: time waited per method",
            jdk.version
        );

        // Native memory: one `profiler.Malloc` event per sample, as many bytes as collapsed.
        let malloc = jfr_events(jdk, &recording, "profiler.Malloc");
        assert_eq!(
            Some(&(malloc.len() as u64)),
            reported.get("nativemem"),
            "JDK {}",
            jdk.version
        );
        let malloc_bytes: u64 = malloc
            .iter()
            .map(|e| e["values"]["size"].as_u64().unwrap_or(0))
            .sum();
        let collapsed_bytes: u64 = common::collapsed_file(&file("nativemem"))
            .iter()
            .map(|(_, bytes)| bytes)
            .sum();
        assert!(
            !malloc.is_empty() && malloc_bytes == collapsed_bytes,
            "JDK {}: {} events, {malloc_bytes} bytes in the JFR, {collapsed_bytes} collapsed",
            jdk.version,
            malloc.len()
        );
        assert!(jvm.is_running(), "JDK {}", jdk.version);
    }
}

/// Checks that `jtap convert` of `recording` gives, for cpu and alloc, what the JDK's `jfr`
/// reads in it: samples per Burn method and bytes per array class.
fn convert_agrees_with_jfr_print(jdk: &Jdk, recording: &Path, dir: &Path, what: &str) {
    let burn = ["Burn.burnOne", "Burn.burnTwo", "Burn.burnFour"];
    let out = dir.join(format!("{what}.collapsed"));
    let run = jtap([
        "convert",
        recording.to_str().unwrap(),
        "-e",
        "cpu,alloc",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{what}: {run:?}");
    let cpu = jfr_events(jdk, recording, "jdk.ExecutionSample");
    let from_jfr = jfr_sums(&cpu, &burn, |_| 1);
    assert!(
        from_jfr[2] > 0,
        "{what}: no samples in burnFour: {from_jfr:?}"
    );
    assert_eq!(
        collapsed_sums(&dir.join(format!("{what}.cpu.collapsed")), &burn),
        from_jfr,
        "{what}: cpu samples per method"
    );
    // Samples where the recording has them; the TLAB events stand for the same allocations.
    let mut alloc = jfr_events(jdk, recording, "jdk.ObjectAllocationSample");
    if alloc.is_empty() {
        let tlab = "jdk.ObjectAllocationInNewTLAB,jdk.ObjectAllocationOutsideTLAB";
        alloc = jfr_events(jdk, recording, tlab);
    }
    let mut from_jfr = BTreeMap::<String, u64>::new();
    for event in &alloc {
        let values = &event["values"];
        let bytes = ["weight", "tlabSize", "allocationSize"]
            .iter()
            .find_map(|f| values[*f].as_u64())
            .unwrap_or(0);
        let class = values["objectClass"]["name"]
            .as_str()
            .unwrap_or("")
            .to_string();
        *from_jfr.entry(class).or_default() += bytes;
    }
    let mut converted = BTreeMap::<String, u64>::new();
    for (frames, bytes) in common::collapsed_file(&dir.join(format!("{what}.alloc.collapsed"))) {
        *converted
            .entry(frames.last().cloned().unwrap_or_default())
            .or_default() += bytes;
    }
    for (internal, java) in [("[I", "int[]"), ("[J", "long[]"), ("[B", "byte[]")] {
        assert!(
            from_jfr.contains_key(internal) && from_jfr.get(internal) == converted.get(java),
            "{what}: {java}: {:?} bytes by jfr print, {:?} converted",
            from_jfr.get(internal),
            converted.get(java)
        );
    }
    // A time range keeps fewer samples, an event choice only that event.
    let first_second = jtap([
        "convert",
        recording.to_str().unwrap(),
        "-e",
        "cpu",
        "--to",
        "1s",
        "--format",
        "collapsed",
    ]);
    let kept: u64 = common::collapsed(&first_second.stdout)
        .iter()
        .map(|(_, n)| n)
        .sum();
    assert!(
        first_second.code == 0 && kept > 0 && kept < cpu.len() as u64,
        "{what}: --to 1s kept {kept} of {}: {first_second:?}",
        cpu.len()
    );
}

#[test]
fn convert_reads_the_jdks_own_recordings() {
    let dir = tempfile::tempdir().unwrap();
    for jdk in jdks() {
        let recording = dir.path().join(format!("jdk{}.jfr", jdk.version));
        // JDK 25 also traces one method (JEP 520's jdk.MethodTrace), for --latency.
        let traced = if jdk.version >= 25 {
            ",+jdk.MethodTrace#enabled=true,+jdk.MethodTrace#filter=workloads.Burn::burnFour"
        } else {
            ""
        };
        let mut jvm = JavaProcess::builder(jdk, "workloads.Mixed")
            .jvm_arg(format!(
                "-XX:StartFlightRecording=duration=4s,settings=profile,filename={}{traced}",
                recording.display()
            ))
            .start();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        // The JVM writes the file when the recording ends; `jfr summary` reads it once whole.
        let readable = || {
            Command::new(jdk.home.join("bin/jfr"))
                .arg("summary")
                .arg(&recording)
                .output()
                .is_ok_and(|o| o.status.success())
        };
        while !recording.exists() || !readable() {
            assert!(
                std::time::Instant::now() < deadline,
                "JDK {}: no recording",
                jdk.version
            );
            std::thread::sleep(Duration::from_millis(500));
        }
        convert_agrees_with_jfr_print(jdk, &recording, dir.path(), &format!("jdk{}", jdk.version));
        if !traced.is_empty() {
            // Only cpu samples taken inside the traced calls: all in burnFour.
            let slow = jtap([
                "convert",
                recording.to_str().unwrap(),
                "-e",
                "cpu",
                "--latency",
                "1us",
                "--format",
                "collapsed",
            ]);
            let stacks = common::collapsed(&slow.stdout);
            assert!(!stacks.is_empty(), "JDK {}: {slow:?}", jdk.version);
            assert!(
                stacks
                    .iter()
                    .all(|(frames, _)| frames.iter().any(|f| f == "workloads.Burn.burnFour")),
                "JDK {}: samples outside the traced calls: {}",
                jdk.version,
                slow.stdout
            );
        }
        let missing = jtap(["convert", recording.to_str().unwrap(), "-e", "wall"]);
        assert!(
            missing.code == 2 && missing.stderr.contains("holds no wall samples"),
            "JDK {}: {missing:?}",
            jdk.version
        );
        assert!(jvm.is_running(), "JDK {}", jdk.version);
    }
}

/// async-profiler's asprof, from `ASPROF` or the anchor beside the repository.
fn asprof() -> Option<std::path::PathBuf> {
    let path = std::env::var_os("ASPROF")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            jtap_testkit::repo_root().join("../shared/anchors/async-profiler/bin/asprof")
        });
    path.exists().then_some(path)
}

#[test]
fn convert_reads_async_profilers_recordings() {
    let Some(asprof) = asprof() else {
        eprintln!("SKIPPED: no async-profiler (set ASPROF to its bin/asprof)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let jdk = jdks()
        .iter()
        .find(|j| j.version == 17)
        .unwrap_or(&jdks()[0]);
    let mut jvm = JavaProcess::start(jdk, "workloads.Mixed");
    std::thread::sleep(Duration::from_millis(1000));
    let recording = dir.path().join("async-profiler.jfr");
    let status = Command::new(&asprof)
        .args(["-e", "cpu,alloc,lock", "-d", "3", "-f"])
        .arg(&recording)
        .arg(jvm.pid().to_string())
        .output()
        .expect("run asprof");
    assert!(status.status.success(), "{status:?}");
    convert_agrees_with_jfr_print(jdk, &recording, dir.path(), "async-profiler");
    // Its pprof (jfrconv's, plain protobuf named .pb.gz) reads as the same samples per
    // method as the recording it came from.
    let pprof = dir.path().join("async-profiler.pb.gz");
    let converted = Command::new(asprof.with_file_name("jfrconv"))
        .args(["--cpu", "-o", "pprof"])
        .arg(&recording)
        .arg(&pprof)
        .output()
        .expect("run jfrconv");
    assert!(converted.status.success(), "{converted:?}");
    let by_method = |input: &Path| {
        let run = jtap([
            "convert",
            input.to_str().unwrap(),
            "-e",
            "cpu",
            "--format",
            "collapsed",
        ]);
        assert_eq!(run.code, 0, "{run:?}");
        let mut leaves = BTreeMap::new();
        for (frames, n) in common::collapsed(&run.stdout) {
            let leaf = frames.last().cloned().unwrap_or_default();
            // Java methods: pprof has no library for native frames, which JFR names
            // `libc.so.6.memcpy`.
            if ["workloads.", "java.", "jdk."]
                .iter()
                .any(|p| leaf.starts_with(p))
            {
                *leaves.entry(leaf).or_insert(0) += n;
            }
        }
        leaves
    };
    assert_eq!(by_method(&pprof), by_method(&recording));
    assert!(jvm.is_running());
}
