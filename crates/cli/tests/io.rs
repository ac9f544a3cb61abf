//! `jtap profile -e io` on every JDK of the matrix:
//! - `workloads.IoWork`: with `--io 0` (every call) the socket reads (each waiting about 5 ms
//!   for data) and the file writes are stacks ending in `read(socket)`/`recv(socket)` and
//!   `write(file)` under the Java methods that made them; with the default threshold (1ms)
//!   the waiting reads stay and the fast file writes all but go;
//! - real programs: Jetty's socket reads name Jetty's `ChannelEndPoint.fill`, and H2's file
//!   writes (a database in a file) name H2's MVStore;
//! - the hooks are removed at the end, and the program's output is untouched;
//! - a bad `--io` is refused before attaching.

mod common;

use common::{agent_library, collapsed, jtap};
use jtap_testkit::{compiled_real_programs, debian_jar, jdks, JavaProcess};

type Stacks = Vec<(Vec<String>, u64)>;

/// Nanoseconds of the stacks whose leaf starts with one of `leaves` and that pass through a
/// frame containing `caller`.
fn time_in(stacks: &Stacks, leaves: &[&str], caller: &str) -> u64 {
    stacks
        .iter()
        .filter(|(frames, _)| {
            frames
                .last()
                .is_some_and(|leaf| leaves.iter().any(|l| leaf.starts_with(l)))
                && frames.iter().any(|f| f.contains(caller))
        })
        .map(|(_, nanos)| nanos)
        .sum()
}

fn profile_io(pid: &str, threshold: Option<&str>, seconds: &str) -> Stacks {
    let mut args = vec![
        "profile",
        pid,
        "-e",
        "io",
        "-d",
        seconds,
        "--format",
        "collapsed",
    ];
    if let Some(threshold) = threshold {
        args.extend(["--io", threshold]);
    }
    collapsed(&jtap(args).ok())
}

/// How a blocking socket read waits, by JDK: in `read` (JDK 13+ without a timeout), `recv`
/// (JDK 11's `PlainSocketImpl`) or `poll` (a read with a timeout).
const SOCKET_READS: [&str; 4] = ["read(socket)", "recv(socket)", "recvfrom(socket)", "poll"];

#[test]
fn socket_reads_and_file_writes_name_their_java_callers() {
    agent_library();
    for jdk in jdks() {
        let mut jvm = JavaProcess::builder(jdk, "workloads.IoWork").start();
        let pid = jvm.pid().to_string();
        let every = profile_io(&pid, Some("0"), "3");
        let reads = time_in(&every, &SOCKET_READS, "workloads.IoWork.socketReadSite");
        let writes = time_in(&every, &["write(file)"], "workloads.IoWork.fileWriteSite");
        eprintln!(
            "JDK {}: every call: socket reads {reads} ns, file writes {writes} ns",
            jdk.version
        );
        assert!(
            reads > 1_000_000_000,
            "JDK {}: the reader waits most of the 3 s: {reads} ns: {every:?}",
            jdk.version
        );
        assert!(writes > 0, "JDK {}: no file writes: {every:?}", jdk.version);
        assert!(
            time_in(
                &every,
                &["write(socket)", "send(socket)"],
                "workloads.IoWork.socketWriteSite"
            ) > 0,
            "JDK {}: no socket writes: {every:?}",
            jdk.version
        );
        let slow = profile_io(&pid, None, "2");
        let slow_reads = time_in(&slow, &SOCKET_READS, "workloads.IoWork.socketReadSite");
        let slow_writes = time_in(&slow, &["write"], "workloads.IoWork.fileWriteSite");
        eprintln!(
            "JDK {}: at 1ms: socket reads {slow_reads} ns, file writes {slow_writes} ns",
            jdk.version
        );
        assert!(
            slow_reads > 500_000_000 && slow_writes * 10 < slow_reads,
            "JDK {}: at 1ms, reads {slow_reads}, writes {slow_writes}: {slow:?}",
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

/// Starts a real-program driver of tests/java/real with its Debian jars and waits for READY.
fn real_program(jdk: &jtap_testkit::Jdk, main: &str, jars: &[&str]) -> JavaProcess {
    let mut builder = JavaProcess::builder(jdk, main)
        .jvm_arg("-Xmx256m")
        .classpath(compiled_real_programs());
    for jar in jars {
        builder = builder.classpath(debian_jar(jar));
    }
    builder.arg("2").start()
}

#[test]
fn jetty_socket_reads_and_h2_file_writes_name_their_java_callers() {
    agent_library();
    for jdk in jdks() {
        let mut jetty = real_program(
            jdk,
            "real.JettyLoad",
            &[
                "jetty9-server",
                "jetty9-http",
                "jetty9-io",
                "jetty9-util",
                "servlet-api",
            ],
        );
        let stacks = profile_io(&jetty.pid().to_string(), Some("0"), "3");
        let reads = time_in(
            &stacks,
            &["read(socket)", "recv(socket)", "readv(socket)"],
            "org.eclipse.jetty.io.ChannelEndPoint.fill",
        );
        eprintln!("JDK {}: Jetty's socket reads: {reads} ns", jdk.version);
        assert!(
            reads > 0,
            "JDK {}: no Jetty socket reads: {stacks:?}",
            jdk.version
        );
        drop(jetty);

        let mut h2 = real_program(jdk, "real.H2FileLoad", &["h2"]);
        let stacks = profile_io(&h2.pid().to_string(), Some("0"), "3");
        let writes = time_in(&stacks, &["pwrite(file)", "write(file)"], "org.h2.mvstore.");
        eprintln!("JDK {}: H2's file writes: {writes} ns", jdk.version);
        assert!(
            writes > 0,
            "JDK {}: no H2 file writes: {stacks:?}",
            jdk.version
        );
    }
}

#[test]
fn a_bad_threshold_is_refused_before_attaching() {
    let run = jtap(["profile", "1", "--io", "abc"]);
    assert_eq!(run.code, 2, "{run:?}");
    let first = run.stderr.lines().next().unwrap_or_default();
    assert!(first.contains("'abc' is not a duration"), "{run:?}");
    assert!(!run.stderr.contains("panicked"), "{run:?}");
}
