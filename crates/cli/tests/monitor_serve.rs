//! `jtap monitor <pid> PATTERN --serve HOST:PORT` (issue #38, ready for a fleet): a real
//! Prometheus (Debian's `prometheus`, installed by scripts/setup-system.sh) scrapes the
//! monitor every second, and its HTTP API gives back the calls the workload counted itself.
//! Without Prometheus the test is skipped with a printed reason, or fails under CI.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{agent_library, Background};
use jtap_testkit::{jdks, JavaProcess};

/// A Prometheus server of the test's own, killed when dropped.
struct Prometheus {
    child: Child,
    port: u16,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// True under CI: `CI` set to anything but empty, `0` or `false` (as jtap_testkit reads it).
fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false"))
}

/// The `prometheus` binary, if installed.
fn prometheus_binary() -> Option<String> {
    let found = Command::new("prometheus")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    found.then(|| "prometheus".to_string())
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// `GET path` on a local port: (status, body).
fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply).ok()?;
    let status = reply.split_whitespace().nth(1)?.parse().ok()?;
    let body = reply.split_once("\r\n\r\n")?.1.to_string();
    Some((status, body))
}

/// Starts Prometheus scraping `target` every second; waits until it is ready.
fn start_prometheus(binary: &str, dir: &Path, target: &str) -> Prometheus {
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: jtap\n    static_configs:\n      - targets: ['{target}']\n"
        ),
    )
    .unwrap();
    let port = free_port();
    let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
    let child = Command::new(binary)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("start prometheus");
    let prometheus = Prometheus { child, port };
    let deadline = Instant::now() + Duration::from_secs(60);
    while get(port, "/-/ready").map(|(s, _)| s) != Some(200) {
        assert!(
            Instant::now() < deadline,
            "Prometheus not ready: {}",
            std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    prometheus
}

/// The value of an instant query's single series, if it has one.
fn query(prometheus: &Prometheus, promql: &str) -> Option<f64> {
    let encoded: String = promql
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let (_, body) = get(prometheus.port, &format!("/api/v1/query?query={encoded}"))?;
    let reply: serde_json::Value = serde_json::from_str(&body).ok()?;
    let result = reply["data"]["result"].as_array()?;
    match result.as_slice() {
        [series] => series["value"][1].as_str()?.parse().ok(),
        _ => None,
    }
}

/// Starts round `n` of workloads.Traced (8 threads, 10 calls of sleepy each) and returns the
/// calls of `sleepy` it counted itself.
fn round(jvm: &JavaProcess, dir: &Path, n: u32) -> u64 {
    std::fs::write(dir.join(format!("go{n}")), b"").unwrap();
    let prefix = format!("DONE {n} ");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = jvm.stdout.text();
        if let Some(line) = text.lines().find(|l| l.starts_with(&prefix)) {
            return line.split_whitespace().nth(4).unwrap().parse().unwrap();
        }
        assert!(
            Instant::now() < deadline,
            "round {n} did not finish: {text}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn prometheus_scrapes_the_calls_the_workload_made() {
    let Some(binary) = prometheus_binary() else {
        let reason = "prometheus is not installed (scripts/setup-system.sh installs it)";
        assert!(
            !under_ci(),
            "{reason} [CI is set: this test may not be skipped]"
        );
        eprintln!("skipped: {reason}");
        return;
    };
    agent_library();
    let dir = tempfile::tempdir().unwrap();
    let jdk = jdks()
        .iter()
        .find(|j| j.version == 17)
        .unwrap_or(&jdks()[0]);
    let mut jvm = JavaProcess::builder(jdk, "workloads.Traced")
        .cwd(dir.path())
        .start();
    let pid = jvm.pid().to_string();
    let serve = format!("127.0.0.1:{}", free_port());
    let mut monitor = Background::tracing(
        &[
            "monitor",
            &pid,
            "workloads.Traced::sleepy",
            "-i",
            "1s",
            "--serve",
            &serve,
        ],
        dir.path(),
    );
    monitor.wait_stderr("serving Prometheus metrics at", Duration::from_secs(5));
    let prometheus = start_prometheus(&binary, dir.path(), &serve);
    let calls = round(&jvm, dir.path(), 1);
    // Reported at the next interval, scraped within a second after it.
    let count = r#"jtap_method_duration_seconds_count{method=~".*sleepy.*"}"#;
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = None;
    while seen != Some(calls as f64) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
        seen = query(&prometheus, count);
    }
    let bucket = |le: &str| {
        query(
            &prometheus,
            &format!(r#"jtap_method_duration_seconds_bucket{{method=~".*sleepy.*",le="{le}"}}"#),
        )
    };
    let errors = query(
        &prometheus,
        r#"jtap_method_errors_total{method=~".*sleepy.*"}"#,
    );
    let (fast, all) = (bucket("0.01"), bucket("+Inf"));
    monitor.interrupt();
    let ended = monitor.finish(Duration::from_secs(30));
    eprintln!("workload: {calls} calls; Prometheus: count {seen:?}, within 10 ms {fast:?}, all {all:?}, errors {errors:?}");
    assert_eq!(seen, Some(calls as f64), "{:?}", ended);
    assert_eq!(calls, 80);
    // sleepy sleeps 20 ms: none within 10 ms.
    assert_eq!((fast, all, errors), (Some(0.0), Some(80.0), Some(0.0)));
    assert!(jvm.is_running());
}
