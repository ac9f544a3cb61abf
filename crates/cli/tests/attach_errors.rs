//! Bad input: every failure gets one clear line, a distinct exit code, and harms nothing.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use common::{is_root, jtap, jtap_bin, leftover_triggers, run};
use jtap_testkit::{jdks, JavaProcess};

#[test]
fn unknown_pid() {
    jtap(["attach", "4194000", "properties"]).fails_with(10, "no process with pid 4194000");
    jtap(["jcmd", "4194000", "VM.version"]).fails_with(10, "no process");
}

#[test]
fn non_jvm_process_is_never_signalled() {
    let mut sleeper = Command::new("sleep").arg("300").spawn().unwrap();
    let pid = sleeper.id().to_string();
    jtap(["attach", &pid, "properties"]).fails_with(11, "is not a HotSpot JVM");
    jtap(["jcmd", &pid, "VM.version"]).fails_with(11, "(sleep)");
    thread::sleep(Duration::from_millis(100));
    assert!(
        sleeper.try_wait().unwrap().is_none(),
        "the non-JVM process died"
    );
    assert!(leftover_triggers(sleeper.id(), sleeper.id()).is_empty());
    sleeper.kill().unwrap();
    let _ = sleeper.wait();
}

#[test]
fn bad_command_lines_are_usage_errors() {
    for args in [
        vec!["attach", "notapid", "properties"],
        vec!["attach", "123"],
        vec!["frobnicate"],
    ] {
        let run = jtap(&args);
        assert_eq!(run.code, 2, "{args:?}: {run:?}");
        assert!(!run.stderr.contains("panicked"));
    }
    jtap(["attach", "1", "properties", "--timeout", "5parsecs"])
        .code
        .eq(&2)
        .then_some(())
        .expect("bad timeout");
}

#[test]
fn attach_disabled_by_flag_is_named() {
    for jdk in jdks() {
        let mut jvm = JavaProcess::builder(jdk, "workloads.Sleeper")
            .jvm_arg("-XX:+DisableAttachMechanism")
            .start();
        let pid = jvm.pid();
        jtap(["attach", &pid.to_string(), "properties"])
            .fails_with(13, "-XX:+DisableAttachMechanism");
        assert!(leftover_triggers(pid, pid).is_empty());
        assert!(jvm.is_running());
    }
}

#[test]
fn reduced_signal_usage_jvm_is_not_killed() {
    // With -Xrs, HotSpot starts its attach listener at start-up (SIGQUIT would kill it):
    // attach must work through the existing socket, and never signal.
    let jdk = &jdks()[0];
    let mut jvm = JavaProcess::builder(jdk, "workloads.Sleeper")
        .jvm_arg("-Xrs")
        .start();
    let pid = jvm.pid();
    assert!(jtap(["attach", &pid.to_string(), "properties"])
        .ok()
        .contains("java.version="));
    // Without its socket, jtap must refuse rather than send the fatal SIGQUIT.
    std::fs::remove_file(format!("/tmp/.java_pid{pid}")).unwrap();
    jtap(["attach", &pid.to_string(), "properties"]).fails_with(13, "-Xrs");
    thread::sleep(Duration::from_millis(200));
    assert!(jvm.is_running(), "the -Xrs JVM was killed");
}

/// A JVM whose attach listener never starts, although nothing on its command line says so.
fn silent_jvm(jdk: &jtap_testkit::Jdk, dir: &Path) -> JavaProcess {
    let flags = dir.join("flags");
    std::fs::write(&flags, "+DisableAttachMechanism\n").unwrap();
    JavaProcess::builder(jdk, "workloads.Sleeper")
        .jvm_arg(format!("-XX:Flags={}", flags.display()))
        .start()
}

#[test]
fn listener_timeout_is_reported_and_trigger_removed() {
    let dir = tempfile::tempdir().unwrap();
    let mut jvm = silent_jvm(&jdks()[0], dir.path());
    let pid = jvm.pid();
    let started = Instant::now();
    jtap([
        "attach",
        &pid.to_string(),
        "properties",
        "--timeout",
        "300ms",
    ])
    .fails_with(14, "within 300 ms");
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(leftover_triggers(pid, pid).is_empty());
    assert!(jvm.is_running());
}

#[test]
fn ctrl_c_removes_the_trigger_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut jvm = silent_jvm(&jdks()[0], dir.path());
    let pid = jvm.pid();
    let mut client = Command::new(jtap_bin())
        .args(["attach", &pid.to_string(), "properties", "--timeout", "30s"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while leftover_triggers(pid, pid).is_empty() {
        assert!(Instant::now() < deadline, "trigger file never appeared");
        thread::sleep(Duration::from_millis(5));
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(client.id() as i32, libc::SIGINT) };
    let status = client.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert!(
        leftover_triggers(pid, pid).is_empty(),
        "trigger left behind after Ctrl-C"
    );
    assert!(jvm.is_running());
}

#[test]
fn stale_socket_of_a_dead_jvm() {
    let jdk = &jdks()[0];
    let mut jvm = JavaProcess::start(jdk, "workloads.Sleeper");
    let pid = jvm.pid();
    jtap(["attach", &pid.to_string(), "properties"]).ok();
    let socket = format!("/tmp/.java_pid{pid}");
    assert!(Path::new(&socket).exists());
    // SAFETY: killing the test's own JVM; the socket file stays behind.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    let deadline = Instant::now() + Duration::from_secs(5);
    while jvm.is_running() && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
    assert!(Path::new(&socket).exists());
    jtap(["attach", &pid.to_string(), "properties"]).fails_with(15, "stale attach socket");
    drop(jvm);
    assert!(
        !Path::new(&socket).exists(),
        "the harness removes what a killed JVM leaves"
    );
}

#[test]
fn insecure_socket_files_are_refused() {
    let jdk = &jdks()[0];
    let mut jvm = JavaProcess::start(jdk, "workloads.Sleeper");
    let pid = jvm.pid();
    let path = format!("/tmp/.java_pid{pid}");
    let _listener = UnixListener::bind(&path).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
    jtap(["attach", &pid.to_string(), "properties"]).fails_with(16, "lets group or others connect");
    if is_root() {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::os::unix::fs::chown(&path, Some(65534), Some(65534)).unwrap();
        jtap(["attach", &pid.to_string(), "properties"]).fails_with(16, "owned by");
    }
    std::fs::remove_file(&path).unwrap();
    assert!(jvm.is_running());
}

#[test]
fn other_users_jvm_without_root_is_permission_denied() {
    if !is_root() {
        eprintln!("SKIPPED: needs root to run jtap as an unprivileged user");
        return;
    }
    let jdk = &jdks()[0];
    let mut jvm = JavaProcess::start(jdk, "workloads.Sleeper");
    let pid = jvm.pid();
    let run = run(Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(jtap_bin())
        .args(["attach", &pid.to_string(), "properties"]));
    run.fails_with(12, "permission denied");
    assert!(leftover_triggers(pid, pid).is_empty());
}
