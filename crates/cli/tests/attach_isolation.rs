//! Attaching across isolation boundaries: a JVM in its own pid + mount namespace with a
//! private /tmp (a container), and, as root, a JVM owned by another user.

mod common;

use std::os::unix::fs::MetadataExt;
use std::process::Command;

use common::{is_root, jtap, leftover_triggers};
use jtap_testkit::{container_wrapper, jdks, JavaProcess};

const TEST_USER: &str = "jtaptest";

#[test]
fn jvm_in_a_container_is_listed_and_attachable() {
    if !is_root() {
        eprintln!("SKIPPED: creating pid/mount namespaces needs root");
        return;
    }
    for jdk in jdks() {
        let mut jvm = JavaProcess::builder(jdk, "workloads.Sleeper")
            .wrapper(container_wrapper())
            .start();
        let pid = jvm.pid();
        let listing: serde_json::Value =
            serde_json::from_str(&jtap(["ps", "--json"]).ok()).unwrap();
        let entry = listing
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["pid"] == pid)
            .unwrap_or_else(|| {
                panic!(
                    "JDK {}: containerised pid {pid} not listed: {listing:#}",
                    jdk.version
                )
            });
        let ns_pid = entry["ns_pid"]
            .as_u64()
            .expect("ns_pid shown for a containerised JVM") as u32;
        assert_ne!(ns_pid, pid);
        assert_eq!(
            entry["source"], "perfdata",
            "hsperfdata not found through /proc/{pid}/root/tmp"
        );
        assert_eq!(entry["main"], "workloads.Sleeper");

        let properties = jtap(["attach", &pid.to_string(), "properties"]).ok();
        assert!(
            properties.contains("java.version="),
            "JDK {}: {properties}",
            jdk.version
        );
        let threads = jtap(["jcmd", &pid.to_string(), "Thread.print"]).ok();
        assert!(threads.contains("jtap-test-worker"));
        // The socket lives in the container's private /tmp, not ours.
        assert!(
            !std::path::Path::new(&format!("/tmp/.java_pid{ns_pid}")).exists() || ns_pid == pid
        );
        assert!(leftover_triggers(pid, ns_pid).is_empty());
    }
}

/// Creates the unprivileged test user if missing; returns its uid.
fn test_user_uid() -> Option<u32> {
    let exists = Command::new("id").args(["-u", TEST_USER]).output().ok()?;
    if !exists.status.success() {
        let created = Command::new("useradd")
            .args([
                "--system",
                "--no-create-home",
                "--shell",
                "/bin/false",
                TEST_USER,
            ])
            .status();
        if !created.is_ok_and(|s| s.success()) {
            return None;
        }
    }
    let out = Command::new("id").args(["-u", TEST_USER]).output().ok()?;
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

#[test]
fn root_attaches_to_another_users_jvm() {
    if !is_root() {
        eprintln!("SKIPPED: attaching to another user's JVM needs root");
        return;
    }
    let Some(uid) = test_user_uid() else {
        eprintln!("SKIPPED: could not create the test user {TEST_USER}");
        return;
    };
    for jdk in jdks() {
        let mut jvm = JavaProcess::builder(jdk, "workloads.Sleeper")
            .wrapper([
                "setpriv",
                &format!("--reuid={uid}"),
                &format!("--regid={uid}"),
                "--clear-groups",
            ])
            .cwd("/tmp")
            .start();
        let pid = jvm.pid();
        let properties = jtap(["attach", &pid.to_string(), "properties"]).ok();
        assert!(
            properties.contains(&format!("user.name={TEST_USER}")),
            "JDK {}: {properties}",
            jdk.version
        );
        let socket = std::fs::metadata(format!("/tmp/.java_pid{pid}")).unwrap();
        assert_eq!(socket.uid(), uid, "socket should belong to the JVM's user");
        jtap(["jcmd", &pid.to_string(), "VM.version"]).ok();
        assert!(leftover_triggers(pid, pid).is_empty());
        let listing = jtap(["ps"]).ok();
        assert!(
            listing
                .lines()
                .any(|l| l.contains(&pid.to_string()) && l.contains(TEST_USER)),
            "{listing}"
        );
    }
}
