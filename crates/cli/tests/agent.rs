//! jtap's agent on every JDK of the matrix: start-up and dynamic loading, repeated attaches
//! reaching the same agent, memory over 200 attach cycles, refusals naming their flag,
//! malformed options, a client killed mid-session, launch mode, a containerised JVM.
//!
//! The agent library is built with `cargo build -p jtap-agent` first if it is missing or older
//! than its sources.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use common::{agent_library, is_root, jtap, jtap_bin, run, Run};
use jtap_testkit::{compiled_workloads, container_wrapper, jdks, JavaProcess};

fn pid_arg(jvm: &mut JavaProcess) -> String {
    jvm.pid().to_string()
}

/// The workload printed only its own lines: nothing of the agent's reached its stdout.
fn assert_clean_stdout(jvm: &JavaProcess) {
    assert_eq!(
        jvm.stdout.text(),
        "READY\n",
        "JDK {}: the workload's stdout changed",
        jvm.jdk.version
    );
}

/// Distinct paths of jtap agent libraries mapped into `pid`.
fn mapped_agents(pid: u32) -> Vec<String> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    let mut paths: Vec<String> = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter(|p| p.contains("libjtap_agent") || p.contains("jtap-agent-"))
        .map(String::from)
        .collect();
    paths.dedup();
    paths
}

#[test]
fn startup_load_with_options_reports_status_and_obeys_stop() {
    let library = agent_library();
    for jdk in jdks() {
        let mut jvm = JavaProcess::builder(jdk, "workloads.Sleeper")
            .jvm_arg(format!("-agentpath:{}=start,event=gc", library.display()))
            .start();
        let pid = pid_arg(&mut jvm);
        let status = jtap(["status", &pid]).ok();
        assert!(
            status.contains("loaded: at start-up"),
            "JDK {}: {status}",
            jdk.version
        );
        assert!(
            status.contains(&format!("(JVMTI {}.", jdk.version)),
            "JDK {}: {status}",
            jdk.version
        );
        assert!(
            status.contains(": gc running"),
            "JDK {}: {status}",
            jdk.version
        );
        assert!(status.contains("detached"), "JDK {}: {status}", jdk.version);
        jtap(["jcmd", &pid, "GC.run"]).ok();
        let stopped = jtap(["load", &pid, "stop"]).ok();
        assert!(
            stopped.starts_with("gc: ") && !stopped.starts_with("gc: 0 "),
            "JDK {}: {stopped}",
            jdk.version
        );
        let status = jtap(["status", &pid]).ok();
        assert!(
            status.contains("recordings: none") && status.contains("commands served: 4"),
            "JDK {}: {status}",
            jdk.version
        );
        // Stopped means back to the JVM's pre-agent behaviour: no events, no capabilities but
        // the one kept from start-up, so that a later trace does not discard all compiled code.
        assert!(
            status.contains("capabilities held: none")
                && status.contains("capabilities kept from start-up: can_retransform_classes"),
            "JDK {}: {status}",
            jdk.version
        );
        assert_eq!(
            mapped_agents(jvm.pid()).len(),
            1,
            "JDK {}: a second agent copy was loaded",
            jdk.version
        );
        assert_clean_stdout(&jvm);
    }
}

#[test]
fn dynamic_load_and_later_attaches_reach_the_same_agent() {
    agent_library();
    for jdk in jdks() {
        let mut jvm = JavaProcess::start(jdk, "workloads.Sleeper");
        let pid = pid_arg(&mut jvm);
        let first = jtap(["status", &pid]).ok();
        assert!(
            first.contains("loaded: by attach") && first.contains("commands served: 1"),
            "JDK {}: {first}",
            jdk.version
        );
        let second = jtap(["load", &pid, "status"]).ok();
        assert!(
            second.contains("commands served: 2"),
            "JDK {}: second attach: {second}",
            jdk.version
        );
        let third = jtap(["load", &pid]).ok();
        assert!(
            third.contains("commands served: 3") && third.contains("by attach"),
            "JDK {}: {third}",
            jdk.version
        );
        let version = jtap(["load", &pid, "version"]).ok();
        assert!(
            version.starts_with(&format!("jtap agent {}", env!("CARGO_PKG_VERSION"))),
            "{version}"
        );
        assert_eq!(
            mapped_agents(jvm.pid()).len(),
            1,
            "JDK {}: {:?}",
            jdk.version,
            mapped_agents(jvm.pid())
        );
        // A client of another release is refused by the agent (return code 105).
        let library = mapped_agents(jvm.pid()).remove(0);
        let other = jtap([
            "attach",
            &pid,
            "load",
            &library,
            "true",
            "status,client=0.0.0-other",
        ]);
        assert_eq!(other.code, 105, "JDK {}: {other:?}", jdk.version);
        assert_clean_stdout(&jvm);
    }
}

/// HotSpot answers an attach from the moment its signal dispatcher runs, a little before
/// JVMTI's live phase, when it has no JVMTI environment to give an agent: an attach then
/// (a third of attaches 0–25 ms after `java` starts on JDK 17) waits for that phase instead of
/// failing.
#[test]
fn an_attach_in_a_jvms_first_moments_waits_for_it_to_start() {
    agent_library();
    for jdk in jdks() {
        for attempt in 0..6u64 {
            let mut jvm = JavaProcess::builder(jdk, "workloads.Sleeper")
                .ready_line(None)
                .start();
            let pid = pid_arg(&mut jvm);
            thread::sleep(Duration::from_millis(5 * attempt));
            let status = jtap(["status", &pid]);
            assert!(
                status.code == 0 && status.stdout.contains("loaded: by attach"),
                "JDK {}, attach {} ms after the start: {status:?}",
                jdk.version,
                5 * attempt
            );
        }
    }
}

#[test]
fn two_hundred_attach_cycles_keep_memory_flat() {
    agent_library();
    for jdk in jdks() {
        let mut jvm = JavaProcess::start(jdk, "workloads.Sleeper");
        let pid = pid_arg(&mut jvm);
        for _ in 0..10 {
            jtap(["status", &pid]).ok();
        }
        let before = jvm.rss_kib();
        let started = Instant::now();
        for cycle in 0..200 {
            let out = jtap(["status", &pid]);
            assert_eq!(out.code, 0, "JDK {}: cycle {cycle}: {out:?}", jdk.version);
        }
        let after = jvm.rss_kib();
        let growth = after as i64 - before as i64;
        eprintln!(
            "JDK {}: 200 attach+status cycles in {:.1} s, RSS {before} KiB -> {after} KiB (growth {growth} KiB)",
            jdk.version,
            started.elapsed().as_secs_f64()
        );
        assert!(
            growth < 5 * 1024,
            "JDK {}: RSS grew by {growth} KiB over 200 cycles",
            jdk.version
        );
        let status = jtap(["status", &pid]).ok();
        assert!(
            status.contains("commands served: 211"),
            "JDK {}: {status}",
            jdk.version
        );
        assert!(jvm.is_running());
        assert_clean_stdout(&jvm);
    }
}

#[test]
fn refusals_name_the_flag() {
    agent_library();
    for jdk in jdks() {
        let mut jvm = JavaProcess::builder(jdk, "workloads.Sleeper")
            .jvm_arg("-XX:+DisableAttachMechanism")
            .start();
        let pid = pid_arg(&mut jvm);
        let out = jtap(["status", &pid, "--timeout", "1s"]);
        assert_ne!(out.code, 0);
        assert!(
            out.stderr.contains("DisableAttachMechanism"),
            "JDK {}: {out:?}",
            jdk.version
        );
        if jdk.version >= 21 {
            let mut jvm = JavaProcess::builder(jdk, "workloads.Sleeper")
                .jvm_arg("-XX:-EnableDynamicAgentLoading")
                .start();
            let pid = pid_arg(&mut jvm);
            jtap(["status", &pid]).fails_with(22, "-XX:-EnableDynamicAgentLoading");
            assert!(jvm.is_running());
            assert_clean_stdout(&jvm);
        }
    }
}

#[test]
fn malformed_options_are_refused_and_the_jvm_keeps_running() {
    let library = agent_library();
    let malformed = [
        "bogus",
        "start,event=nope",
        "start,event=gc,interval=fast",
        "status,,debug",
        "start,stop",
        "status,event=gc",
        "dump,file=",
        "file=x\\",
    ];
    for jdk in jdks() {
        let mut jvm = JavaProcess::start(jdk, "workloads.Sleeper");
        let pid = pid_arg(&mut jvm);
        for options in malformed {
            jtap(["load", &pid, options]).fails_with(2, "bad agent options");
        }
        // The same strings sent raw reach the agent, which refuses them with return code 101.
        for options in malformed {
            let out = jtap([
                "attach",
                &pid,
                "load",
                &library.display().to_string(),
                "true",
                options,
            ]);
            assert_eq!(out.code, 101, "JDK {}: {options:?}: {out:?}", jdk.version);
        }
        // Valid syntax, failing command: a clear message and exit code 23.
        jtap(["load", &pid, "start,event=gc,interval=10ms"]).fails_with(
            2,
            "interval= only applies to event=cpu, itimer, ctimer, wall or perf",
        );
        jtap(["load", &pid, "start"]).fails_with(23, "start needs event=");
        jtap(["load", &pid, "stop"]).fails_with(23, "nothing to stop");
        assert!(jvm.is_running(), "JDK {}: the JVM died", jdk.version);
        let status = jtap(["status", &pid]).ok();
        assert!(status.contains("recordings: none"), "{status}");
        assert_clean_stdout(&jvm);
    }
}

#[test]
fn a_killed_client_has_its_engine_stopped() {
    agent_library();
    for jdk in jdks() {
        let mut jvm = JavaProcess::start(jdk, "workloads.Sleeper");
        let pid = pid_arg(&mut jvm);
        let mut client = Command::new(jtap_bin())
            .args(["load", &pid, "start,event=gc"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Wait for the client's first line rather than attaching concurrently: two clients
        // starting the attach listener at the same moment can make the JVM print a thread dump.
        let mut first_line = String::new();
        BufReader::new(client.stdout.take().unwrap())
            .read_line(&mut first_line)
            .unwrap();
        assert!(
            first_line.starts_with("started the gc engine"),
            "JDK {}: {first_line:?}",
            jdk.version
        );
        let status = jtap(["status", &pid]).ok();
        assert!(
            status.contains("owned by the client of session 1"),
            "JDK {}: {status}",
            jdk.version
        );
        assert!(
            status.contains("capabilities held: can_generate_garbage_collection_events"),
            "JDK {}: {status}",
            jdk.version
        );
        let threads = jtap(["jcmd", &pid, "Thread.print"]).ok();
        assert!(
            threads.contains("\"jtap-session-1\""),
            "JDK {}: no session thread in the dump",
            jdk.version
        );
        client.kill().unwrap(); // SIGKILL
        client.wait().unwrap();
        let killed = Instant::now();
        loop {
            let status = jtap(["status", &pid]).ok();
            if status.contains("recordings: none") {
                break;
            }
            assert!(
                killed.elapsed() < Duration::from_secs(3),
                "JDK {}: engine outlived its client: {status}",
                jdk.version
            );
            thread::sleep(Duration::from_millis(20));
        }
        eprintln!(
            "JDK {}: engine stopped {} ms after its client was killed",
            jdk.version,
            killed.elapsed().as_millis()
        );
        let threads = jtap(["jcmd", &pid, "Thread.print"]).ok();
        assert!(
            !threads.contains("\"jtap-session-1\""),
            "JDK {}: session thread still alive",
            jdk.version
        );
        assert_clean_stdout(&jvm);
    }
}

#[test]
fn launch_mode_runs_java_with_the_agent_and_reports_at_exit() {
    agent_library();
    for jdk in jdks() {
        let classes = compiled_workloads().display().to_string();
        let java = jdk.java().display().to_string();
        let out: Run = run(Command::new(jtap_bin()).args([
            "load",
            "start,event=gc",
            "--",
            &java,
            "-cp",
            &classes,
            "workloads.GcBurst",
            "3",
        ]));
        assert_eq!(out.code, 0, "JDK {}: {out:?}", jdk.version);
        assert!(
            out.stdout.contains("READY\n") && out.stdout.contains("DONE\n"),
            "{out:?}"
        );
        let report = out
            .stdout
            .lines()
            .find(|l| l.starts_with("gc: "))
            .unwrap_or_else(|| panic!("no report: {out:?}"));
        let collections: u32 = report[4..]
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!(collections >= 3, "JDK {}: {report}", jdk.version);
        // `debug` logs to the JVM's stderr, never its stdout.
        let debug = run(Command::new(jtap_bin()).args([
            "load",
            "start,event=gc,debug",
            "--",
            &java,
            "-cp",
            &classes,
            "workloads.GcBurst",
            "0",
        ]));
        assert_eq!(debug.code, 0, "JDK {}: {debug:?}", jdk.version);
        assert!(
            debug.stderr.contains("[jtap-agent") && !debug.stdout.contains("[jtap-agent"),
            "{debug:?}"
        );
        // A mistyped option is refused before the JVM starts.
        let typo = run(Command::new(jtap_bin()).args(["load", "strat", "--", &java, "-version"]));
        typo.fails_with(2, "unknown option \"strat\"");
    }
}

#[test]
fn jvm_in_a_container_gets_a_private_copy_of_the_agent() {
    if !is_root() {
        eprintln!("SKIPPED: creating mount namespaces needs root");
        return;
    }
    agent_library();
    for jdk in jdks() {
        let mut jvm = JavaProcess::builder(jdk, "workloads.Sleeper")
            .wrapper(container_wrapper())
            .start();
        let pid = pid_arg(&mut jvm);
        let status = jtap(["status", &pid]).ok();
        assert!(
            status.contains("loaded: by attach"),
            "JDK {}: {status}",
            jdk.version
        );
        let again = jtap(["load", &pid, "status"]).ok();
        assert!(
            again.contains("commands served: 2"),
            "JDK {}: {again}",
            jdk.version
        );
        let mapped = mapped_agents(jvm.pid());
        assert_eq!(mapped.len(), 1, "JDK {}: {mapped:?}", jdk.version);
        assert!(
            mapped[0].starts_with("/tmp/jtap-agent-"),
            "JDK {}: {mapped:?}",
            jdk.version
        );
        let left: Vec<_> = std::fs::read_dir(format!("/proc/{pid}/root/tmp"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("jtap-"))
            .collect();
        assert!(
            left.is_empty(),
            "JDK {}: left in the container's /tmp: {left:?}",
            jdk.version
        );
        assert_clean_stdout(&jvm);
    }
}

/// Issue #12: a client killed before its agent connected leaves its channel socket in the
/// target's /tmp; the next client removes such leftovers (old enough, refusing connections,
/// named like jtap's), and only those.
#[test]
fn leftover_channel_sockets_are_swept() {
    agent_library();
    let jdk = &jdks()[0];
    let mut jvm = JavaProcess::start(jdk, "workloads.Sleeper");
    let pid = pid_arg(&mut jvm);
    let leftover = |age: &str| {
        let hex: String = (0..32)
            .map(|i| char::from_digit((i * 7 + age.len() as u32) % 16, 16).unwrap())
            .collect();
        let path = std::path::PathBuf::from(format!("/tmp/jtap-{hex}.sock"));
        let _ = std::fs::remove_file(&path);
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        let touched = Command::new("touch")
            .args(["-d", age])
            .arg(&path)
            .status()
            .unwrap();
        assert!(touched.success());
        path
    };
    let old = leftover("2 minutes ago");
    let young = leftover("now");
    let status = jtap(["status", &pid]).ok();
    assert!(status.contains("jtap agent"), "{status}");
    assert!(!old.exists(), "an old leftover socket was not swept");
    assert!(
        young.exists(),
        "a socket younger than a minute may be a live client's"
    );
    std::fs::remove_file(&young).unwrap();
}
