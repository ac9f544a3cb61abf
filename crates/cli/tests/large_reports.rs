//! Reports far larger than any socket buffer reach the CLI intact: a CPU profile whose
//! collapsed report is over 100 MB (`workloads.DeepStacks`: stacks 2,000 frames deep, nearly
//! all different) and a trace of one million calls (`workloads.TraceBench`'s tiny method), each
//! within a generous time bound, on JDK 17.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::{agent_library, jtap_bin};
use jtap_testkit::{jdk, JavaProcess};

/// The two tests run one after the other: each keeps both cores busy (a JVM at full speed and
/// the agent's processing of what it reports), and run together the deep-stack profile got
/// through only one buffer of 1,024 samples (at 1 ms, a debug build's agent drops about half
/// the samples of 2,000 frames: it resolves a few hundred of them a second).
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Levels of each DeepStacks path (two frames each: 2,000 frames, under the default
/// `--jstackdepth` of 2048).
const LEVELS: usize = 1000;

/// CPU time (ns) the JVM's thread named `name` used so far.
fn thread_cpu_ns(pid: u32, name: &str) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
        .filter(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == name))
        .filter_map(|t| {
            std::fs::read_to_string(t.path().join("schedstat"))
                .ok()?
                .split_whitespace()
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// `jtap profile -i 2ms -o deep.collapsed` on DeepStacks, interrupted once the sampled thread
/// has run 6 s of CPU (about 3,000 samples of 2,000 frames at 2 ms: some 160 MB of collapsed stacks,
/// whatever share of the CPU the machine leaves it). Every sample must arrive: the file's
/// counts add up to the summary's, each stack is whole and different from the others.
#[test]
fn a_profile_report_over_100_mb_arrives_whole() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    agent_library();
    let jdk = jdk(17).expect("JDK 17 (it also compiles the workloads)");
    let mut jvm = JavaProcess::builder(&jdk, "workloads.DeepStacks")
        .jvm_arg("-Xmx128m")
        .arg(LEVELS.to_string())
        .arg("1")
        .start();
    let pid = jvm.pid();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("deep.collapsed");
    let mut profile = Command::new(jtap_bin())
        // Per line, as the report was sized when written: per method it is a little smaller.
        .args([
            "profile",
            &pid.to_string(),
            "-i",
            "2ms",
            "-d",
            "120s",
            "--lines",
            "-o",
        ])
        .arg(&file)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let cpu_at_start = thread_cpu_ns(pid, "deep-0");
    let started = Instant::now();
    while thread_cpu_ns(pid, "deep-0") < cpu_at_start + 6_000_000_000 {
        assert!(
            started.elapsed() < Duration::from_secs(100),
            "DeepStacks got under 6 s of CPU in 100 s"
        );
        assert!(profile.try_wait().unwrap().is_none(), "jtap ended early");
        std::thread::sleep(Duration::from_millis(100));
    }
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(profile.id() as i32, libc::SIGINT) };
    let interrupted = Instant::now();
    let mut stderr = String::new();
    let reader = {
        let mut pipe = profile.stderr.take().unwrap();
        std::thread::spawn(move || {
            let _ = pipe.read_to_string(&mut stderr);
            stderr
        })
    };
    let status = loop {
        if let Some(status) = profile.try_wait().unwrap() {
            break status;
        }
        if interrupted.elapsed() > Duration::from_secs(120) {
            let _ = profile.kill();
            panic!("jtap did not write the profile within 120 s of Ctrl-C");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stderr = reader.join().unwrap();
    assert_eq!(status.code(), Some(0), "jtap failed: {stderr}");
    eprintln!(
        "{} bytes written {:.1} s after Ctrl-C; {stderr}",
        std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0),
        interrupted.elapsed().as_secs_f64()
    );
    // "jtap: <n> samples (cpu engine, <t> s)"
    let summary: u64 = stderr
        .lines()
        .find_map(|l| {
            l.strip_prefix("jtap: ")?
                .split_once(" samples")?
                .0
                .parse::<u64>()
                .ok()
        })
        .unwrap_or_else(|| panic!("no sample count: {stderr}"));
    let size = std::fs::metadata(&file).unwrap().len();
    assert!(size > 100 << 20, "the report is only {size} bytes");
    let mut samples = 0;
    let mut deep_stacks = std::collections::HashSet::new();
    for line in BufReader::new(std::fs::File::open(&file).unwrap()).lines() {
        let line = line.unwrap();
        let (stack, count) = line.rsplit_once(' ').expect("`stack count` line");
        samples += count.parse::<u64>().expect("a count");
        if stack.matches("DeepStacks.down").count() >= LEVELS {
            deep_stacks.insert(stack.to_string());
        }
    }
    assert_eq!(samples, summary, "samples in the file vs the summary");
    assert!(
        deep_stacks.len() as u64 * 2 > summary,
        "{} whole, distinct stacks of {LEVELS} levels for {summary} samples",
        deep_stacks.len()
    );
}

/// `jtap trace <tiny> -n 1000000`: exactly one million call lines, all well formed.
#[test]
fn a_million_line_trace_arrives_whole() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    agent_library();
    let jdk = jdk(17).expect("JDK 17 (it also compiles the workloads)");
    let mut jvm = JavaProcess::builder(&jdk, "workloads.TraceBench")
        .arg("calls")
        .start();
    let pid = jvm.pid().to_string();
    let mut trace = Command::new(jtap_bin())
        .args([
            "trace",
            &pid,
            "workloads.TraceBench::tiny",
            "-n",
            "1000000",
            "-d",
            "100s",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = trace.stdout.take().unwrap();
    let lines = std::thread::spawn(move || {
        let mut calls = 0u64;
        let mut malformed = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let line = line.unwrap();
            if line.contains(" workloads.TraceBench.tiny ") {
                calls += 1;
            } else if malformed.len() < 5 {
                malformed.push(line);
            }
        }
        (calls, malformed)
    });
    let mut stderr = String::new();
    let mut pipe = trace.stderr.take().unwrap();
    let errors = std::thread::spawn(move || {
        let _ = pipe.read_to_string(&mut stderr);
        stderr
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = trace.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(150) {
            let _ = trace.kill();
            panic!("jtap trace -n 1000000 did not return within 150 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (calls, malformed) = lines.join().unwrap();
    let stderr = errors.join().unwrap();
    eprintln!(
        "{calls} calls in {:.1} s; {stderr}",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(status.code(), Some(0), "jtap failed: {stderr}");
    assert!(
        malformed.is_empty(),
        "lines that are not calls: {malformed:?}"
    );
    assert_eq!(calls, 1_000_000, "{stderr}");
}
