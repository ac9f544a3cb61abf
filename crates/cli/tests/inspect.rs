//! `jtap inspect` on every JDK of the matrix: a workload's live instance with its fields
//! (a string by its contents), its statics (a primitive, a reference), a JDK class's
//! instances, an H2 setting's static (found by `jtap classes` in H2's jar first), and
//! one-line errors for an unknown class or static.

mod common;

use common::{jtap, real_program};

use jtap_testkit::{debian_jar, jdks, JavaProcess};

#[test]
fn shows_instances_and_statics_of_a_workload_class() {
    for jdk in jdks() {
        let mut jvm = JavaProcess::start(jdk, "workloads.OnCall");
        let pid = jvm.pid().to_string();
        let v = jdk.version;
        let text = jtap(["inspect", &pid, "workloads.OnCall"]).ok();
        assert!(
            text.starts_with("1 live instance of workloads.OnCall\n"),
            "JDK {v}: {text}"
        );
        assert!(text.contains("\n    owner = \"main\"\n"), "JDK {v}: {text}");

        let served = jtap([
            "inspect",
            &pid,
            "workloads.OnCall",
            "--static",
            "requestsServed",
        ])
        .ok();
        assert_eq!(served, "workloads.OnCall.requestsServed = 42\n", "JDK {v}");
        let current = jtap(["inspect", &pid, "workloads.OnCall", "--static", "current"]).ok();
        assert!(
            current.starts_with("workloads.OnCall.current = workloads.OnCall@0x"),
            "JDK {v}: {current}"
        );

        let owner = jtap(["inspect", &pid, "workloads.OnCall", "--path", "owner"]).ok();
        assert!(owner.contains(".owner = \"main\"\n"), "JDK {v}: {owner}");
        let groups = jtap([
            "inspect",
            &pid,
            "java.lang.Thread",
            "-n",
            "50",
            "--path",
            "name",
        ])
        .ok();
        assert!(
            groups.contains(".name = \"hot-worker\"\n"),
            "JDK {v}: {groups}"
        );
        jtap(["inspect", &pid, "java.lang.Thread", "--path", "a..b"])
            .fails_with(2, "bad field path");

        let threads = jtap(["inspect", &pid, "java.lang.Thread", "-n", "50"]).ok();
        assert!(
            threads.contains("name = \"hot-worker\""),
            "JDK {v}: {threads}"
        );

        jtap(["inspect", &pid, "workloads.OnCall", "--static", "nope"])
            .fails_with(2, "has no static field nope");
        jtap(["inspect", &pid, "no.such.Class"]).fails_with(2, "is not loaded");
    }
}

#[test]
fn finds_an_h2_settings_static() {
    for jdk in jdks() {
        let mut jvm = real_program(jdk, "real.H2Load", &["3"], &["h2"]);
        let pid = jvm.pid().to_string();
        let v = jdk.version;
        let class = "org.h2.engine.SysProperties";
        let fields = jtap(["classes", &pid, class, "--fields"]).ok();
        let jar = debian_jar("h2").display().to_string();
        assert!(
            fields.contains(&format!("from    {jar}")),
            "JDK {v}: {fields}"
        );
        assert!(
            fields.contains("public static final java.lang.String CLIENT_TRACE_DIRECTORY"),
            "JDK {v}: {fields}"
        );
        let value = jtap(["inspect", &pid, class, "--static", "CLIENT_TRACE_DIRECTORY"]).ok();
        assert_eq!(
            value,
            format!("{class}.CLIENT_TRACE_DIRECTORY = \"trace.db/\"\n"),
            "JDK {v}"
        );
    }
}

#[test]
fn an_unknown_pid_gets_a_one_line_error() {
    jtap(["inspect", "999999999", "Foo"]).fails_with(10, "no process");
}
