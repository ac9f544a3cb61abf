//! `-o profile.otlp` and `--push otlp://` (issue #38, ready for a fleet): the OpenTelemetry
//! profiles signal, decoded by the official generated modules of opentelemetry-proto (PyPI,
//! installed by scripts/setup-otlp.sh) in scripts/check-otlp.py, which also checks the
//! dictionary's rules. Without them the tests are skipped with a printed reason, or fail
//! under CI.

mod common;

use std::io::{Read, Write};
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{agent_library, jtap};
use jtap_testkit::{jdks, repo_root, JavaProcess};

/// True under CI: `CI` set to anything but empty, `0` or `false` (as jtap_testkit reads it).
fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false"))
}

/// `jtap: cpu: 263 samples (...)` lines: the samples of an event.
fn samples_of(stderr: &str, event: &str) -> u64 {
    stderr
        .lines()
        .find_map(|l| {
            l.strip_prefix(&format!("jtap: {event}: "))?
                .split(' ')
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no {event} line in {stderr}"))
}

/// Whether scripts/check-otlp.py can run; prints why not (and fails under CI).
fn checker_installed() -> bool {
    if repo_root().join(".cache/otlp-python/.version").exists() {
        return true;
    }
    let reason = "opentelemetry-proto is not installed (run scripts/setup-otlp.sh)";
    assert!(
        !under_ci(),
        "{reason} [CI is set: this test may not be skipped]"
    );
    eprintln!("skipped: {reason}");
    false
}

/// scripts/check-otlp.py's report of a file; panics when a check fails.
fn checked(file: &Path) -> serde_json::Value {
    let checked = Command::new("python3")
        .arg(repo_root().join("scripts/check-otlp.py"))
        .arg(file)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&checked.stdout);
    assert!(
        checked.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&checked.stderr)
    );
    serde_json::from_str(&stdout).unwrap()
}

#[test]
fn an_otlp_profile_decodes_with_the_official_definitions() {
    if !checker_installed() {
        return;
    }
    agent_library();
    let dir = tempfile::tempdir().unwrap();
    let jdk = jdks()
        .iter()
        .find(|j| j.version == 17)
        .unwrap_or(&jdks()[0]);
    let mut jvm = JavaProcess::start(jdk, "workloads.Mixed");
    let pid = jvm.pid().to_string();
    let out = dir.path().join("profile.otlp");
    let run = jtap([
        "profile",
        &pid,
        "-e",
        "cpu,alloc",
        "-d",
        "3s",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    let report = checked(&out);
    eprintln!("{report}");
    let profiles = report["profiles"].as_array().unwrap();
    let kinds: Vec<(&str, &str)> = profiles
        .iter()
        .map(|p| (p["type"].as_str().unwrap(), p["unit"].as_str().unwrap()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("samples", "count"),
            ("cpu", "nanoseconds"),
            ("alloc_objects", "count"),
            ("alloc_space", "bytes")
        ]
    );
    // The samples jtap reported, all there; cpu time is samples × the 10 ms interval.
    let cpu_samples = samples_of(&run.stderr, "cpu");
    assert_eq!(profiles[0]["total"].as_u64(), Some(cpu_samples));
    assert_eq!(
        profiles[1]["total"].as_u64(),
        Some(cpu_samples * 10_000_000)
    );
    assert!(profiles[3]["total"].as_u64() > Some(0));
    // Mixed burns CPU in workloads.Burn and allocates arrays.
    let top_cpu = profiles[1]["top_leaf"].as_str().unwrap();
    assert!(top_cpu.starts_with("workloads."), "{top_cpu}");
    let top_alloc = profiles[3]["top_leaf"].as_str().unwrap();
    assert!(top_alloc.ends_with("[]"), "{top_alloc}");
    assert!(jvm.is_running());
}

/// The head and body of each request a receiver got.
type Received = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// An OTLP/HTTP receiver on a free local port: answers 200 to each POST and keeps its head
/// and body.
fn receiver() -> (u16, Received) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let received = Arc::new(Mutex::new(Vec::new()));
    let store = received.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request = Vec::new();
            let mut buffer = [0u8; 65536];
            let mut wanted = usize::MAX;
            let mut head_end = 0;
            while request.len() < wanted {
                let n = stream.read(&mut buffer).unwrap_or(0);
                if n == 0 {
                    break;
                }
                request.extend_from_slice(&buffer[..n]);
                if let Some(end) = request.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&request[..end]).to_lowercase();
                    let length: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length: "))
                        .and_then(|n| n.trim().parse().ok())
                        .unwrap_or(0);
                    (head_end, wanted) = (end + 4, end + 4 + length);
                }
            }
            let head = String::from_utf8_lossy(&request[..head_end]).to_string();
            store
                .lock()
                .unwrap()
                .push((head, request[head_end..].to_vec()));
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
        }
    });
    (port, received)
}

#[test]
fn periods_pushed_as_otlp_decode_with_the_official_definitions() {
    if !checker_installed() {
        return;
    }
    agent_library();
    let (port, received) = receiver();
    let dir = tempfile::tempdir().unwrap();
    let jdk = jdks()
        .iter()
        .find(|j| j.version == 17)
        .unwrap_or(&jdks()[0]);
    let mut jvm = JavaProcess::start(jdk, "workloads.Mixed");
    let pid = jvm.pid().to_string();
    let start = jtap([
        "profile",
        "start",
        &pid,
        "-e",
        "cpu",
        "--loop",
        "1s",
        "--push",
        &format!("otlp://127.0.0.1:{port}"),
        "--app",
        "shop",
        "--label",
        "env=test",
    ]);
    assert_eq!(start.code, 0, "{start:?}");
    let deadline = Instant::now() + Duration::from_secs(60);
    while received.lock().unwrap().len() < 3 {
        assert!(Instant::now() < deadline, "no 3 periods pushed");
        std::thread::sleep(Duration::from_millis(200));
    }
    let stop = jtap(["profile", "stop", &pid, "--format", "summary"]);
    assert_eq!(stop.code, 0, "{stop:?}");
    let received = received.lock().unwrap();
    for (i, (head, body)) in received.iter().take(3).enumerate() {
        assert!(
            head.starts_with("POST /v1development/profiles HTTP/1.1\r\n"),
            "{head}"
        );
        assert!(
            head.contains("Content-Type: application/x-protobuf\r\n"),
            "{head}"
        );
        let file = dir.path().join(format!("period-{i}.otlp"));
        std::fs::write(&file, body).unwrap();
        let report = checked(&file);
        let resource = &report["resources"][0];
        assert_eq!(resource["service.name"], "shop", "{report}");
        assert_eq!(resource["env"], "test", "{report}");
        let profiles = report["profiles"].as_array().unwrap();
        assert_eq!(profiles[1]["type"], "cpu", "{report}");
        assert!(
            profiles[0]["total"].as_u64() > Some(0),
            "period {i}: {report}"
        );
    }
    assert!(jvm.is_running());
}
