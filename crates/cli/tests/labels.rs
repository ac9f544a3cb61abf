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
//! - H2 labelled by SQL text (`this.command.sql`): each statement's share of the labelled
//!   wall samples is its share of the time the workload measured in its calls, and a
//!   statement that clearly did the most work leads the cpu profile too;
//! - `monitor`, `trace` and `calltree --by` report per endpoint: every labelled call of a
//!   work method (and of `handle` itself) carries its own endpoint's label;
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

/// Every session restored every class it touched exactly (the labels' and, beside a trace,
/// the trace's: each finds the class as it was at its start).
fn assert_restored(stderr: &str, jdk: u32) {
    assert!(
        stderr.contains("labels: restored")
            && stderr.contains("identical to before")
            && !stderr.contains("differ"),
        "JDK {jdk}: {stderr}"
    );
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
    assert_restored(&stderr, jdk);
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

/// The endpoint whose work `method` is (`handle` has none of its own).
fn endpoint_of(method: &str) -> Option<&'static str> {
    WORK.iter().find(|(m, _)| *m == method).map(|(_, e)| *e)
}

/// The JSON lines of a run's stdout.
fn json_lines(stdout: &str) -> Vec<serde_json::Value> {
    stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

/// `monitor --by`: a row per method and endpoint; `handle`'s own calls under each endpoint
/// (its label's probes wrap the trace's), every work method's under its own only.
fn check_monitor(pid: &str, by: &str, jdk: u32) {
    let run = jtap([
        "monitor",
        pid,
        "workloads.Requests::/handle|computeInPlace|poolWork|asyncSupply|asyncStage|threadWork/",
        "--by",
        by,
        "-i",
        "6s",
        "-n",
        "1",
        "--json",
    ]);
    let stderr = run.stderr.clone();
    let rows = json_lines(&run.ok());
    assert_restored(&stderr, jdk);
    let mut handled = Vec::new();
    for row in &rows {
        let method = row["method"].as_str().unwrap().rsplit('.').next().unwrap();
        let (label, calls) = (row["label"].as_str(), row["calls"].as_u64().unwrap());
        if calls == 0 {
            continue;
        }
        match (method, label) {
            ("handle", Some(label)) => handled.push(label.to_string()),
            (method, Some(label)) => assert_eq!(
                endpoint_of(method),
                Some(label),
                "JDK {jdk}: {calls} calls of {method} labelled {label}: {rows:?}"
            ),
            _ => {}
        }
    }
    handled.sort();
    assert_eq!(
        handled,
        ["/compute", "/pool", "/thread"],
        "JDK {jdk}: {rows:?}"
    );
    for (method, endpoint) in WORK {
        assert!(
            rows.iter()
                .any(|r| r["method"].as_str().unwrap().ends_with(method)
                    && r["label"] == endpoint
                    && r["calls"].as_u64() > Some(0)),
            "JDK {jdk}: no labelled calls of {method}: {rows:?}"
        );
    }
}

/// The JSON lines `jtap COMMAND PID ARGS... --by BY -d 4s --json` prints, once its labels'
/// and its own classes were restored exactly.
fn by_json(command: &str, pid: &str, args: &[&str], by: &str, jdk: u32) -> Vec<serde_json::Value> {
    let mut all = vec![command, pid];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--by", by, "-d", "4s", "--json"]);
    let run = jtap(all);
    assert_restored(&run.stderr, jdk);
    json_lines(&run.ok())
}

/// `trace --by`: each labelled call of a work method carries its endpoint.
fn check_trace(pid: &str, by: &str, jdk: u32) {
    let methods =
        ["computeInPlace", "threadWork", "asyncStage"].map(|m| format!("workloads.Requests::{m}"));
    let calls = by_json(
        "trace",
        pid,
        &methods.each_ref().map(String::as_str),
        by,
        jdk,
    );
    let labelled: Vec<_> = calls.iter().filter(|c| !c["label"].is_null()).collect();
    assert!(labelled.len() >= 3, "JDK {jdk}: {calls:?}");
    for call in labelled {
        let method = call["method"].as_str().unwrap();
        assert_eq!(
            endpoint_of(method),
            call["label"].as_str(),
            "JDK {jdk}: {call}"
        );
    }
}

/// `calltree --by`: each labelled tree of `handle` carries the endpoint its calls show.
fn check_calltree(pid: &str, by: &str, jdk: u32) {
    let trees = by_json("calltree", pid, &["workloads.Requests::handle"], by, jdk);
    let mut seen = Vec::new();
    for tree in trees.iter().filter(|t| !t["label"].is_null()) {
        let text = tree["tree"].to_string();
        let label = tree["label"].as_str().unwrap();
        let expected = match () {
            _ if text.contains("computeInPlace") => "/compute",
            _ if text.contains(".submit") => "/pool",
            _ => "/thread",
        };
        assert_eq!(label, expected, "JDK {jdk}: {tree}");
        seen.push(label.to_string());
    }
    seen.sort();
    seen.dedup();
    assert_eq!(
        seen,
        ["/compute", "/pool", "/thread"],
        "JDK {jdk}: {trees:?}"
    );
}

#[test]
fn traces_monitors_and_call_trees_report_per_endpoint() {
    agent_library();
    for jdk in jdks() {
        let mut jvm = JavaProcess::builder(jdk, "workloads.Requests").start();
        let pid = jvm.pid().to_string();
        let by = "workloads.Requests::handle=arg1";
        check_monitor(&pid, by, jdk.version);
        check_trace(&pid, by, jdk.version);
        check_calltree(&pid, by, jdk.version);
    }
}

/// The nanoseconds `real.H2Statements` spent in each statement so far (its last `SPENT`
/// lines), by statement index.
fn spent(stdout: &str) -> [u64; 4] {
    let mut spent = [0; 4];
    for line in stdout.lines() {
        let mut words = line.split(' ');
        if let (Some("SPENT"), Some(i), Some(ns)) = (words.next(), words.next(), words.next()) {
            if let (Ok(i), Ok(ns)) = (i.parse::<usize>(), ns.parse()) {
                spent[i] = ns;
            }
        }
    }
    spent
}

/// Each statement's share of the samples (weights) labelled by one of `sql`, in percent.
fn label_shares(stacks: &[(Vec<String>, u64)], sql: &[&str]) -> Vec<f64> {
    let mut weights = vec![0u64; sql.len()];
    for (frames, weight) in stacks {
        let label = frames
            .first()
            .and_then(|f| f.strip_prefix("[label=")?.strip_suffix(']'));
        if let Some(i) = label.and_then(|l| sql.iter().position(|s| *s == l)) {
            weights[i] += weight;
        }
    }
    let total = weights.iter().sum::<u64>().max(1) as f64;
    weights.iter().map(|&w| w as f64 * 100.0 / total).collect()
}

/// The index of the largest value.
fn leader(values: &[f64]) -> usize {
    (0..values.len())
        .max_by(|&a, &b| values[a].total_cmp(&values[b]))
        .unwrap_or(0)
}

/// Most a statement's share of the labelled wall samples may differ from its share of the
/// measured time, in points. The ~3,000 labelled samples put a share within about a point
/// (one standard deviation); the rest is systematic: the label's own probe runs inside the
/// measured call before the label is set — in the debug agent the tests load, 8–9 % of the
/// time in `execute` calls, nearly all in the point reads, the shortest calls (measured: 19 %
/// of the time, 13 % of the labelled samples on JDK 25) — and the measured window also holds
/// the attach.
const SHARE_TOLERANCE: f64 = 8.0;

#[test]
fn h2_statements_are_profiled_apart_by_their_sql() {
    agent_library();
    let sql = [
        "SELECT COUNT(*) FROM item WHERE payload LIKE ?",
        "SELECT SUM(qty), COUNT(*) FROM item WHERE qty BETWEEN ? AND ?",
        "SELECT name, qty FROM item WHERE id = ?",
        "UPDATE item SET qty = ? WHERE id = ?",
    ];
    for jdk in jdks() {
        let mut jvm = real_program(jdk, "real.H2Statements", &["2"], &["h2"]);
        let pid = jvm.pid().to_string();
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("p.collapsed");
        let before = spent(&jvm.stdout.text());
        let run = jtap([
            "profile",
            &pid,
            "-e",
            "cpu",
            "--wall",
            "5ms",
            "-d",
            "10",
            "--by",
            "org.h2.jdbc.JdbcPreparedStatement::/execute.*/=this.command.sql",
            "-o",
            out.to_str().unwrap(),
        ]);
        assert_restored(&run.stderr, jdk.version);
        run.ok();
        std::thread::sleep(std::time::Duration::from_millis(300));
        let after = spent(&jvm.stdout.text());
        let measured: Vec<u64> = (0..4).map(|i| after[i] - before[i]).collect();
        let total = measured.iter().sum::<u64>().max(1) as f64;
        let truth: Vec<f64> = measured
            .iter()
            .map(|&ns| ns as f64 * 100.0 / total)
            .collect();
        let wall = label_shares(&collapsed_file(&dir.path().join("p.wall.collapsed")), &sql);
        let cpu = label_shares(&collapsed_file(&dir.path().join("p.cpu.collapsed")), &sql);
        let context = format!(
            "JDK {}: measured {truth:.1?}, wall {wall:.1?}, cpu {cpu:.1?}",
            jdk.version
        );
        eprintln!("{context}");
        for i in 0..sql.len() {
            assert!(
                (wall[i] - truth[i]).abs() <= SHARE_TOLERANCE,
                "{}: {context}",
                sql[i]
            );
        }
        // The cpu profile counts time on CPU only, which the measured (wall) times do not
        // separate, so its shares are not held to the tolerance (its heaviest statement runs
        // 3-10 points above its measured share). But a statement that clearly did the most
        // work, ahead by more than the tolerance, leads it; where two are closer (JDK 21
        // once measured 32 and 28 %), their order is noise.
        let mut order: Vec<usize> = (0..sql.len()).collect();
        order.sort_by(|&a, &b| truth[b].total_cmp(&truth[a]));
        if truth[order[0]] - truth[order[1]] > SHARE_TOLERANCE {
            assert_eq!(leader(&cpu), order[0], "{context}");
        }
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
        jtap(["monitor", "1", "a.B::c", "--by", by]).fails_with(2, says);
    }
    jtap([
        "trace", "a.B::c", "--by", "a.B::c", "--", "java", "-version",
    ])
    .fails_with(2, "needs a running JVM");
}
