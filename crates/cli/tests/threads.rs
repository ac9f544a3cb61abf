//! `jtap threads` on every JDK of the matrix: the hot thread of a workload with one hot and
//! several idle threads comes first, a thread allocating 1000 KiB/s is measured so, a thread
//! blocked on a monitor or a ReentrantLock names the holder, the JVM's deadlocks are
//! reported, and bad input gets a one-line error. With `--sampled` (stacks from jtap's
//! wall-clock sampler, no thread dump), the hot thread still comes first, running, with its
//! own method on top of its heaviest path, and the idle threads are found sleeping.

mod common;

use common::jtap;
use jtap_testkit::{jdks, JavaProcess};
use serde_json::Value;

fn threads_json(pid: &str, extra: &[&str]) -> Value {
    let mut args = vec!["threads", pid, "--json"];
    args.extend_from_slice(extra);
    serde_json::from_str(&jtap(args).ok()).expect("jtap threads --json prints JSON")
}

fn names(report: &Value) -> Vec<String> {
    report["threads"]
        .as_array()
        .expect("threads")
        .iter()
        .map(|t| t["name"].as_str().unwrap_or("").to_string())
        .collect()
}

fn holder_of(report: &Value, waiter: &str) -> Option<String> {
    report["blocked"]
        .as_array()?
        .iter()
        .find(|b| b["thread"] == waiter)?["holder"]
        .as_str()
        .map(String::from)
}

#[test]
fn the_hot_thread_comes_first_and_blocked_threads_name_their_holder() {
    for jdk in jdks() {
        let mut jvm = JavaProcess::start(jdk, "workloads.OnCall");
        let pid = jvm.pid().to_string();
        let report = threads_json(&pid, &["-n", "3", "-d", "2s"]);
        let busiest = names(&report);
        assert_eq!(busiest.len(), 3, "JDK {}: {report}", jdk.version);
        assert_eq!(busiest[0], "hot-worker", "JDK {}: {report}", jdk.version);
        let hot = &report["threads"][0];
        assert!(
            hot["cpu_percent"].as_f64().unwrap_or(0.0) > 30.0,
            "JDK {}: {hot}",
            jdk.version
        );
        assert_eq!(hot["state"], "RUNNABLE", "JDK {}", jdk.version);
        assert!(
            hot["frames"][0]
                .as_str()
                .is_some_and(|f| f.starts_with("workloads.OnCall.")),
            "JDK {}: {hot}",
            jdk.version
        );
        for (waiter, holder) in [
            ("monitor-waiter", "monitor-holder"),
            ("lock-waiter", "lock-holder"),
        ] {
            assert_eq!(
                holder_of(&report, waiter).as_deref(),
                Some(holder),
                "JDK {}: {report}",
                jdk.version
            );
        }

        // 1 KiB a millisecond, to the KiB the dump prints, over 2 s; the idle threads none.
        let all = threads_json(&pid, &["-n", "0", "-d", "2s"]);
        let rate = |name: &str| {
            let rows = all["threads"].as_array().unwrap();
            let row = rows.iter().find(|t| t["name"] == name);
            row.and_then(|t| t["alloc_bytes_per_second"].as_f64())
        };
        let allocator = rate("allocator").unwrap_or(0.0) / 1024.0;
        assert!(
            (900.0..1100.0).contains(&allocator),
            "JDK {}: {allocator} KiB/s: {all}",
            jdk.version
        );
        assert_eq!(rate("idle-0"), Some(0.0), "JDK {}: {all}", jdk.version);

        let blocked = threads_json(&pid, &["--blocked", "-n", "0", "-d", "100ms"]);
        let mut waiting = names(&blocked);
        waiting.sort();
        assert_eq!(
            waiting,
            ["lock-waiter", "monitor-waiter"],
            "JDK {}",
            jdk.version
        );

        let idle = threads_json(
            &pid,
            &["--state", "timed-waiting", "-n", "0", "-d", "100ms"],
        );
        let idle_names = names(&idle);
        for i in 0..4 {
            assert!(
                idle_names.contains(&format!("idle-{i}")),
                "JDK {}: {idle_names:?}",
                jdk.version
            );
        }
        assert!(!idle_names.contains(&"hot-worker".to_string()));

        let text = jtap(["threads", &pid, "-n", "1", "-d", "500ms"]).ok();
        assert!(text.contains("hot-worker"), "JDK {}: {text}", jdk.version);
        assert!(
            text.contains("\"monitor-waiter\" (BLOCKED) waits for <0x")
                && text.contains("held by \"monitor-holder\""),
            "JDK {}: {text}",
            jdk.version
        );
    }
}

#[test]
fn deadlocks_are_reported_with_their_cycle() {
    for jdk in jdks() {
        let mut jvm = JavaProcess::start(jdk, "workloads.Deadlock");
        let pid = jvm.pid().to_string();
        let report = threads_json(&pid, &["-d", "100ms"]);
        let mut cycle: Vec<String> = report["deadlocks"][0]
            .as_array()
            .unwrap_or_else(|| panic!("JDK {}: no deadlock in {report}", jdk.version))
            .iter()
            .map(|n| n.as_str().unwrap_or("").to_string())
            .collect();
        cycle.sort();
        assert_eq!(cycle, ["lock-ab", "lock-ba"], "JDK {}", jdk.version);
        assert_eq!(holder_of(&report, "lock-ab").as_deref(), Some("lock-ba"));
        let text = jtap(["threads", &pid, "-d", "100ms"]).ok();
        assert!(
            text.contains("DEADLOCK: \"lock-"),
            "JDK {}: {text}",
            jdk.version
        );
    }
}

#[test]
fn sampled_stacks_show_the_hot_thread_running_and_the_idle_ones_asleep() {
    for jdk in jdks() {
        let mut jvm = JavaProcess::start(jdk, "workloads.OnCall");
        let pid = jvm.pid().to_string();
        let report = threads_json(&pid, &["--sampled", "-n", "0", "-d", "2s"]);
        let context = format!("JDK {}: {report}", jdk.version);
        let rows = report["threads"].as_array().expect("threads");
        let row = |name: &str| rows.iter().find(|t| t["name"] == name);
        assert_eq!(names(&report)[0], "hot-worker", "{context}");
        let hot = row("hot-worker").unwrap();
        let running = hot["state"].as_str().unwrap_or("");
        let share: f64 = (running
            .strip_prefix("running ")
            .and_then(|r| r.strip_suffix('%')))
        .and_then(|r| r.parse().ok())
        .unwrap_or(0.0);
        // The hot thread spins: the few samples taken while it waited for a core are all
        // that may find it off CPU.
        assert!(share >= 80.0, "{context}");
        assert!(hot["samples"].as_u64().unwrap_or(0) >= 50, "{context}");
        let top = hot["frames"][0].as_str().unwrap_or("");
        assert!(top.starts_with("workloads.OnCall."), "{context}");
        assert!(top.ends_with("%)"), "{context}");
        for i in 0..4 {
            let idle = row(&format!("idle-{i}")).expect("an idle thread");
            let state = idle["state"].as_str().unwrap_or("");
            assert!(state.starts_with("sleeping"), "{context}");
        }
        let run = jtap(["threads", &pid, "--sampled", "--blocked"]);
        assert_eq!(run.code, 2, "{run:?}");
        assert!(run.stderr.contains("cannot be used with"), "{run:?}");
    }
}

#[test]
fn bad_input_gets_a_one_line_error() {
    jtap(["threads", "999999999"]).fails_with(10, "no process");
    let own = std::process::id().to_string();
    jtap(["threads", &own]).fails_with(11, "not a HotSpot JVM");
    let run = jtap(["threads", &own, "--state", "sleepy"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("not a thread state"), "{run:?}");
}
