//! `jtap top` on every JDK of the matrix, its output not a terminal (blocks of lines): each
//! refresh names the workload's hot thread first, with heap and GC lines from hsperfdata;
//! `--iterations` ends it; an unknown pid gets a one-line error.

mod common;

use common::jtap;
use jtap_testkit::{jdks, JavaProcess};

#[test]
fn each_refresh_names_the_hot_thread_first() {
    for jdk in jdks() {
        let mut jvm = JavaProcess::start(jdk, "workloads.OnCall");
        let pid = jvm.pid().to_string();
        let text = jtap(["top", &pid, "-n", "3", "-i", "1s", "--iterations", "2"]).ok();
        let v = jdk.version;
        let blocks: Vec<&str> = text.split(&format!(" JVM {pid}: CPU ")).skip(1).collect();
        assert_eq!(blocks.len(), 2, "JDK {v}: {text}");
        for block in blocks {
            let lines: Vec<&str> = block.lines().collect();
            assert!(lines[1].starts_with("heap "), "JDK {v}: {block}");
            assert!(
                lines[2].starts_with("gc ") && lines[2].contains("safepoints"),
                "JDK {v}: {block}"
            );
            let header = lines
                .iter()
                .position(|l| l.contains("TOP FRAME"))
                .expect("header");
            let busiest = lines[header + 1];
            assert!(
                busiest.contains("RUNNABLE") && busiest.contains("hot-worker"),
                "JDK {v}: {block}"
            );
            assert!(busiest.contains("workloads.OnCall."), "JDK {v}: {block}");
            let rows = lines[header + 1..].iter().filter(|l| l.contains('%'));
            assert_eq!(rows.count(), 3, "JDK {v}: {block}");
        }
    }
}

#[test]
fn an_unknown_pid_gets_a_one_line_error() {
    jtap(["top", "999999999"]).fails_with(10, "no process");
}
