//! `jtap inspect` on every JDK of the matrix: a workload's live instance with its fields
//! (a string by its contents), its statics (a primitive, a reference), a JDK class's
//! instances, and one-line errors for an unknown class or static.

mod common;

use common::jtap;
use jtap_testkit::{jdks, JavaProcess};

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
fn an_unknown_pid_gets_a_one_line_error() {
    jtap(["inspect", "999999999", "Foo"]).fails_with(10, "no process");
}
