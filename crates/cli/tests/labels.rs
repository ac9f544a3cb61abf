//! `jtap profile --by` on every JDK of the matrix, against `workloads.Requests`, a server of
//! three endpoints whose work is done in place, on a thread pool and a `CompletableFuture`
//! chain, and on a thread of its own (virtual on JDK 21+), each request through
//! `Requests.handle(uri, seed)`:
//! - labelled by the URI (`=arg1`), every work method's samples carry its own endpoint's label
//!   (≥ 95 %) and hardly another's (≤ 2 %), in cpu, wall and alloc profiles recorded at once;
//! - the collapsed output has the label as the root frame;
//! - the classes are restored exactly at the end;
//! - the same on an embedded Jetty serving three such endpoints (`real.JettyEndpoints`),
//!   labelled by the handler's `target`;
//! - a bad entry or key is refused with one line before attaching.

mod common;

use std::collections::HashMap;

use common::{agent_library, collapsed_file, jtap, real_program, JETTY_JARS};

use jtap_testkit::{jdks, JavaProcess};

/// Work methods and the endpoint that asks for them.
const WORK: [(&str, &str); 5] = [
    ("computeInPlace", "/compute"),
    ("poolWork", "/pool"),
    ("asyncSupply", "/pool"),
    ("asyncStage", "/pool"),
    ("threadWork", "/thread"),
];

/// Fewest samples of a work method for its shares to say something: one stray sample is then
/// at most a few percent (and one is always allowed).
const FEWEST: u64 = 25;
/// The alloc interval asked for: an alloc sample stands for about this many bytes.
const ALLOC_INTERVAL: u64 = 128 * 1024;

/// Samples (weights for alloc) of each work method of `class`, by the label at the root of
/// their stacks.
fn by_label(
    stacks: &[(Vec<String>, u64)],
    class: &str,
) -> HashMap<&'static str, HashMap<String, u64>> {
    let mut found: HashMap<&str, HashMap<String, u64>> = HashMap::new();
    for (frames, weight) in stacks {
        let label = frames
            .first()
            .and_then(|f| f.strip_prefix("[label=")?.strip_suffix(']'))
            .unwrap_or("-");
        for (method, _) in WORK {
            let name = format!("{class}.{method}");
            if frames.contains(&name) {
                *found
                    .entry(method)
                    .or_default()
                    .entry(label.into())
                    .or_default() += weight;
            }
        }
    }
    found
}

/// Profiles `pid` by cpu, wall and alloc at once, labelled by `entry`'s first argument (the
/// endpoint), and checks that each work method of `class` carries its endpoint's label.
fn check_labels(pid: u32, entry: &str, class: &str, jdk: u32) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.collapsed");
    let by = format!("{entry}=arg1");
    let pid = pid.to_string();
    let run = jtap([
        "profile",
        &pid,
        "-e",
        "cpu,alloc",
        "-i",
        "2ms",
        "--wall",
        "2ms",
        "--alloc",
        "128k",
        "-d",
        "10",
        "--by",
        &by,
        "-o",
        out.to_str().unwrap(),
    ]);
    let stderr = run.stderr.clone();
    run.ok();
    assert!(
        stderr.contains("labels: restored") && stderr.contains("identical to before"),
        "JDK {jdk}: {stderr}"
    );
    for event in ["cpu", "wall", "alloc"] {
        let stacks = collapsed_file(&dir.path().join(format!("p.{event}.collapsed")));
        let shares = by_label(&stacks, class);
        // Collapsed cpu and wall stacks count samples; alloc's weigh bytes.
        let per_sample = match event {
            "alloc" => ALLOC_INTERVAL,
            _ => 1,
        };
        for (method, endpoint) in WORK {
            let labels = shares.get(method).cloned().unwrap_or_default();
            let total: u64 = labels.values().sum();
            let counted = total / per_sample;
            eprintln!("JDK {jdk} {event} {method}: {counted} samples, {labels:?}");
            assert!(
                counted >= FEWEST,
                "JDK {jdk} {event}: {method} has {counted} samples"
            );
            let own = labels.get(endpoint).copied().unwrap_or(0);
            assert!(
                own * 100 >= total * 95,
                "JDK {jdk} {event}: {method} labelled {endpoint} for {own} of {total}: {labels:?}"
            );
            for (label, weight) in &labels {
                if label != endpoint && label != "-" {
                    assert!(
                        *weight <= (total * 2 / 100).max(per_sample),
                        "JDK {jdk} {event}: {method} labelled {label} for {weight} of {total}"
                    );
                }
            }
        }
    }
}

#[test]
fn each_endpoints_work_carries_its_label_across_pools_and_threads() {
    agent_library();
    for jdk in jdks() {
        let mut jvm = JavaProcess::builder(jdk, "workloads.Requests").start();
        let pid = jvm.pid();
        check_labels(
            pid,
            "workloads.Requests::handle",
            "workloads.Requests",
            jdk.version,
        );
    }
}

#[test]
fn jetty_endpoints_are_profiled_apart() {
    agent_library();
    for jdk in jdks() {
        let mut jvm = real_program(jdk, "real.JettyEndpoints", &["4"], &JETTY_JARS);
        let pid = jvm.pid();
        check_labels(
            pid,
            "real.JettyEndpoints$Endpoints::handle",
            "real.JettyEndpoints",
            jdk.version,
        );
    }
}

#[test]
fn bad_entries_and_keys_are_refused_in_one_line() {
    for (by, says) in [
        ("workloads.Requests", "name its method"),
        ("workloads.Requests::handle=arg0", "arg1 is the first"),
        (
            "workloads.Requests::handle=self.uri",
            "starts with this or argN",
        ),
    ] {
        jtap(["profile", "1", "--by", by]).fails_with(2, says);
    }
}
