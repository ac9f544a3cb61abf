//! Heap and lock tools on every JDK of the matrix:
//! - `jtap heap`: the class histogram agrees with `jcmd GC.class_histogram`, names classes the
//!   Java way, and leaves nothing behind in the JVM (no tags, no capabilities, nothing on its
//!   stdout);
//! - `jtap profile -e alloc`: bytes split by allocation site as the workload allocates them,
//!   `--live` and `jtap sites` rank the retaining site first, a second agent holding the
//!   sampling capability gives a clear error, memory stays bounded through many GCs;
//! - start-up `-agentpath:…=start,event=alloc,file=sites.txt`: the report at the JVM's exit;
//! - `jtap sites --exact`: exact object counts per site, VM-made objects (`clone`,
//!   `Array.newInstance`) included; under a GC storm it ends and restores;
//! - `jtap profile -e lock`: the one contended monitor comes out on top;
//! - `--walker check`: jtap's own stack walker gives the alloc and lock engines the stacks
//!   JVMTI gives, frame for frame, under every shape of stack the `StackShapes` workload has.

mod common;

use std::thread;
use std::time::Duration;

use common::{agent_library, collapsed, jtap, walker_counts, Background};
use jtap_testkit::{jdks, JavaProcess};
use serde_json::Value;

/// `jcmd GC.class_histogram` rows as (Java name, instances): `[I` → `int[]`,
/// `[Ljava.lang.String;` → `java.lang.String[]`, module suffixes dropped.
fn jcmd_histogram(text: &str) -> Vec<(String, u64)> {
    text.lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let rank = words.next()?;
            if !rank.ends_with(':') {
                return None;
            }
            let instances = words.next()?.parse().ok()?;
            let _bytes = words.next()?;
            Some((java_name(words.next()?), instances))
        })
        .collect()
}

fn java_name(jcmd_name: &str) -> String {
    let dims = jcmd_name.bytes().take_while(|&b| b == b'[').count();
    if dims == 0 {
        return jcmd_name.to_string();
    }
    let element = &jcmd_name[dims..];
    let base = match element {
        "Z" => "boolean",
        "B" => "byte",
        "C" => "char",
        "S" => "short",
        "I" => "int",
        "J" => "long",
        "F" => "float",
        "D" => "double",
        _ => element.trim_start_matches('L').trim_end_matches(';'),
    };
    format!("{base}{}", "[]".repeat(dims))
}

fn histogram_json(pid: &str, extra: &[&str]) -> Value {
    let mut args = vec!["heap", pid, "--json"];
    args.extend_from_slice(extra);
    serde_json::from_str(&jtap(args).ok()).expect("jtap heap --json prints JSON")
}

fn instances_of(histogram: &Value, class: &str) -> Option<u64> {
    histogram["classes"]
        .as_array()?
        .iter()
        .find(|c| c["name"] == class)
        .and_then(|c| c["instances"].as_u64())
}

#[test]
fn live_histogram_agrees_with_jcmd_and_names_classes_the_java_way() {
    agent_library();
    for jdk in jdks() {
        let mut jvm = JavaProcess::start(jdk, "workloads.HeapShapes");
        let pid = jvm.pid().to_string();
        let theirs = jcmd_histogram(&jtap(["jcmd", &pid, "GC.class_histogram"]).ok());
        // The JVM's own heap inspection (the default), then jtap's agent's JVMTI walk.
        for walk in [false, true] {
            let mut args = vec!["--live", "-n", "0"];
            if walk {
                args.push("--walk");
            }
            let ours = histogram_json(&pid, &args);
            assert!(
                theirs.len() >= 10,
                "JDK {}: jcmd histogram too short: {theirs:?}",
                jdk.version
            );
            for (name, expected) in &theirs[..10] {
                let got = instances_of(&ours, name).unwrap_or_else(|| {
                    panic!("JDK {}: {name} missing from jtap heap", jdk.version)
                });
                let off = (got as f64 - *expected as f64).abs() / *expected as f64;
                assert!(
                    off <= 0.05,
                    "JDK {}: {name}: jtap {got} vs jcmd {expected} instances",
                    jdk.version
                );
            }
            // The workload's own classes, by their Java names and exact counts.
            assert_eq!(
                instances_of(&ours, "workloads.HeapShapes$Inner"),
                Some(20_000),
                "JDK {}",
                jdk.version
            );
            assert_eq!(
                instances_of(&ours, "int[][]"),
                Some(3_000),
                "JDK {}",
                jdk.version
            );
            assert!(
                instances_of(&ours, "java.lang.String[]").unwrap_or(0) >= 5_000,
                "JDK {}",
                jdk.version
            );
            // The agent tells the GC's pause from the walk's; the JVM's inspection is one pause.
            assert_eq!(
                ours["gc_ms"].as_f64().is_some(),
                walk,
                "JDK {}: {ours}",
                jdk.version
            );
            assert!(
                ours["walk_ms"].as_f64().is_some(),
                "JDK {}: {ours}",
                jdk.version
            );
            let classes = ours["classes"].as_array().unwrap();
            assert!(
                classes
                    .windows(2)
                    .all(|w| w[0]["bytes"].as_u64() >= w[1]["bytes"].as_u64()),
                "JDK {}: not sorted by bytes",
                jdk.version
            );
            let total: u64 = classes.iter().map(|c| c["bytes"].as_u64().unwrap()).sum();
            assert_eq!(
                ours["total_bytes"].as_u64(),
                Some(total),
                "JDK {}: -n 0 shows every class",
                jdk.version
            );
        }

        // A second histogram (no GC first) sees the same retained objects: the first one's
        // tags are gone and its capability was given back.
        let again = histogram_json(&pid, &["--walk"]);
        assert_eq!(
            again["classes"].as_array().map(Vec::len),
            Some(30),
            "JDK {}: -n defaults to 30",
            jdk.version
        );
        assert_eq!(
            again["gc_ms"],
            Value::Null,
            "JDK {}: no GC without --live",
            jdk.version
        );
        let all = histogram_json(&pid, &["-n", "0", "--walk"]);
        assert_eq!(
            instances_of(&all, "workloads.HeapShapes$Inner"),
            Some(20_000),
            "JDK {}",
            jdk.version
        );
        let status = jtap(["status", &pid]).ok();
        assert!(
            status.contains("capabilities held: none") && status.contains("recordings: none"),
            "JDK {}: {status}",
            jdk.version
        );

        let table = jtap(["heap", &pid, "-n", "5"]).ok();
        // Header, five classes, the total and the footer.
        assert_eq!(table.lines().count(), 8, "JDK {}: {table}", jdk.version);
        assert!(
            table.contains("INSTANCES") && table.contains("total ("),
            "JDK {}: {table}",
            jdk.version
        );
        assert_eq!(
            jvm.stdout.text(),
            "READY\n",
            "JDK {}: the workload's stdout changed",
            jdk.version
        );
    }
}

#[test]
fn heap_of_a_missing_process_fails_cleanly() {
    jtap(["heap", "999999999"]).fails_with(10, "999999999");
}

/// Sum of the counts of stacks whose frame below the leaf is `method` (the allocating
/// method, e.g. `AllocSites.intSite`), and that sum per leaf class.
fn site(stacks: &[(Vec<String>, u64)], method: &str) -> (u64, Vec<(String, u64)>) {
    let mut total = 0;
    let mut leaves: Vec<(String, u64)> = Vec::new();
    for (frames, count) in stacks {
        let [.., caller, leaf] = frames.as_slice() else {
            continue;
        };
        if !caller.contains(method) {
            continue;
        }
        total += count;
        match leaves.iter_mut().find(|(l, _)| l == leaf) {
            Some((_, sum)) => *sum += count,
            None => leaves.push((leaf.clone(), *count)),
        }
    }
    (total, leaves)
}

#[test]
fn alloc_profile_splits_bytes_by_site_with_class_leaves() {
    agent_library();
    for jdk in jdks() {
        let mut jvm = JavaProcess::start(jdk, "workloads.AllocSites");
        let pid = jvm.pid().to_string();
        let out = jtap([
            "profile",
            &pid,
            "-e",
            "alloc",
            "-d",
            "4",
            "--alloc-interval",
            "32k",
            "--format",
            "collapsed",
        ])
        .ok();
        let stacks = collapsed(&out);
        // Every object of the three sites has the same size (1040 bytes), so the estimated
        // object counts are in the same ratio as the bytes: 1:2:4.
        let sites = [
            ("AllocSites.intSite", "int[]", 1.0),
            ("AllocSites.longSite", "long[]", 2.0),
            ("AllocSites.byteSite", "byte[]", 4.0),
        ];
        let counts: Vec<(u64, Vec<(String, u64)>)> = sites
            .iter()
            .map(|(method, _, _)| site(&stacks, method))
            .collect();
        let total: u64 = counts.iter().map(|(c, _)| c).sum();
        assert!(
            total > 0,
            "JDK {}: no samples at the three sites: {out}",
            jdk.version
        );
        for ((method, class, parts), (count, leaves)) in sites.iter().zip(&counts) {
            let share = *count as f64 / total as f64;
            let expected = parts / 7.0;
            eprintln!(
                "JDK {}: {method}: {:.1}% of the three sites' bytes (expected {:.1}%)",
                jdk.version,
                share * 100.0,
                expected * 100.0
            );
            assert!(
                (share - expected).abs() <= 0.05,
                "JDK {}: {method} has {share:.3} of the bytes, expected {expected:.3}",
                jdk.version
            );
            assert_eq!(
                leaves.iter().map(|(l, _)| l.as_str()).collect::<Vec<_>>(),
                [*class],
                "JDK {}: {method}'s leaf frame is its class",
                jdk.version
            );
        }
        let status = jtap(["status", &pid]).ok();
        assert!(
            status.contains("recordings: none") && status.contains("capabilities held: none"),
            "JDK {}: {status}",
            jdk.version
        );
        assert_eq!(jvm.stdout.text(), "READY\n", "JDK {}", jdk.version);
    }
}

/// One row of a SITES report.
struct SiteRow {
    class: String,
    /// The `at` lines, top first.
    frames: Vec<String>,
    live_bytes: f64,
    live_objects: f64,
    allocated_bytes: f64,
    allocated_objects: f64,
}

impl SiteRow {
    fn top(&self) -> &str {
        self.frames.first().map_or("", String::as_str)
    }
}

fn sites_rows(report: &str) -> Vec<SiteRow> {
    let lines: Vec<&str> = report.lines().collect();
    let mut rows = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.len() == 8 && words[0].parse::<u32>().is_ok() {
            let frames = lines[i + 1..]
                .iter()
                .map_while(|l| l.trim().strip_prefix("at "))
                .map(str::to_string)
                .collect();
            rows.push(SiteRow {
                class: words[7].to_string(),
                frames,
                live_bytes: words[3].parse().unwrap(),
                live_objects: words[4].parse().unwrap(),
                allocated_bytes: words[5].parse().unwrap(),
                allocated_objects: words[6].parse().unwrap(),
            });
        }
    }
    rows
}

#[test]
fn live_profile_and_sites_rank_the_retaining_site_first() {
    agent_library();
    for jdk in jdks() {
        let mut jvm = JavaProcess::builder(jdk, "workloads.AllocSites")
            .arg("retain")
            .jvm_arg("-Xmx512m")
            .start();
        let pid = jvm.pid().to_string();
        let report = jtap([
            "sites",
            &pid,
            "-d",
            "4",
            "--depth",
            "2",
            "--alloc-interval",
            "32k",
            "--gc",
            "-n",
            "10",
        ])
        .ok();
        let rows = sites_rows(&report);
        assert!(
            report.starts_with("SITES BEGIN") && rows.len() >= 3,
            "JDK {}: {report}",
            jdk.version
        );
        let (class, top, live) = (&rows[0].class, rows[0].top(), rows[0].live_bytes);
        assert!(
            class == "int[]" && top.starts_with("workloads.AllocSites.intSite"),
            "JDK {}: first site is not the retaining one: {report}",
            jdk.version
        );
        assert!(
            live > 10e6,
            "JDK {}: the retaining site keeps ~40 MB, the report says {live}: {report}",
            jdk.version
        );
        for row in rows
            .iter()
            .filter(|r| r.top().contains("longSite") || r.top().contains("byteSite"))
        {
            assert!(
                row.live_bytes <= 0.05 * row.allocated_bytes,
                "JDK {}: dropped site {} at {} still has {} of {} bytes live: {report}",
                jdk.version,
                row.class,
                row.top(),
                row.live_bytes,
                row.allocated_bytes
            );
        }
        // The same report as data: --json.
        let json = jtap([
            "sites",
            &pid,
            "-d",
            "2",
            "--alloc-interval",
            "32k",
            "--gc",
            "-n",
            "1",
            "--json",
        ])
        .ok();
        let sites: serde_json::Value = serde_json::from_str(&json)
            .unwrap_or_else(|e| panic!("JDK {}: {e}: {json}", jdk.version));
        let first = &sites["sites"][0];
        assert!(
            sites["sites"].as_array().map(Vec::len) == Some(1)
                && first["class"] == "int[]"
                && first["live"]["bytes"].as_f64() > Some(10e6)
                && sites["site_count"].as_u64() >= Some(3),
            "JDK {}: {json}",
            jdk.version
        );

        // --live profile: a GC shortly before the end frees the dropped sites' objects.
        let gc_pid = pid.clone();
        let gc = thread::spawn(move || {
            thread::sleep(Duration::from_millis(2500));
            jtap(["jcmd", &gc_pid, "GC.run"]).ok();
        });
        let out = jtap([
            "profile",
            &pid,
            "-e",
            "alloc",
            "--live",
            "-d",
            "3",
            "--alloc-interval",
            "32k",
            "--format",
            "collapsed",
        ])
        .ok();
        gc.join().unwrap();
        // Garbage made after that GC still counts as live, so only the ranking is checked.
        let heaviest = collapsed(&out)
            .into_iter()
            .max_by_key(|(_, count)| *count)
            .map(|(frames, _)| frames.join(";"));
        assert!(
            heaviest
                .as_deref()
                .is_some_and(|s| s.ends_with("AllocSites.intSite;int[]")),
            "JDK {}: {out}",
            jdk.version
        );
    }
}

/// Ctrl-C in the middle of `jtap sites -d 60s`: the report of what was recorded so far, at
/// once, as `jtap profile` writes what it collected.
#[test]
fn interrupted_sites_report_what_was_recorded() {
    agent_library();
    for jdk in jdks() {
        let dir = tempfile::tempdir().unwrap();
        let mut jvm = JavaProcess::builder(jdk, "workloads.AllocSites")
            .arg("retain")
            .jvm_arg("-Xmx512m")
            .start();
        let pid = jvm.pid().to_string();
        let run = Background::start(
            &[
                "sites",
                &pid,
                "-d",
                "60s",
                "--alloc-interval",
                "32k",
                "-n",
                "5",
            ],
            dir.path(),
        );
        thread::sleep(Duration::from_secs(4));
        run.interrupt();
        let (code, report, stderr) = run.finish(Duration::from_secs(20));
        let context = format!("JDK {}: {stderr}{report}", jdk.version);
        assert_eq!(code, 0, "{context}");
        assert!(stderr.contains("jtap: interrupted after"), "{context}");
        let rows = sites_rows(&report);
        assert!(
            rows.iter()
                .any(|r| r.class == "int[]" && r.top().starts_with("workloads.AllocSites.intSite")),
            "{context}"
        );
        assert!(jvm.is_running(), "{context}: the JVM died");
    }
}

#[test]
fn exact_sites_count_every_allocation_including_the_vms_own() {
    agent_library();
    let dir = tempfile::tempdir().unwrap();
    for jdk in jdks() {
        let trigger = dir.path().join(format!("go-{}", jdk.version));
        let mut jvm = JavaProcess::builder(jdk, "workloads.ExactAlloc")
            .arg(trigger.as_os_str())
            .start();
        let pid = jvm.pid().to_string();
        let sites_pid = pid.clone();
        let sites = thread::spawn(move || {
            jtap([
                "sites", &sites_pid, "--exact", "-d", "6", "--depth", "3", "--gc", "-n", "200",
            ])
            .ok()
        });
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !jtap(["status", &pid]).ok().contains(": alloc running") {
            assert!(
                std::time::Instant::now() < deadline,
                "JDK {}: the alloc engine never started",
                jdk.version
            );
            thread::sleep(Duration::from_millis(100));
        }
        std::fs::write(&trigger, b"").unwrap();
        assert!(
            jvm.stdout.wait_for_line("DONE", Duration::from_secs(30)),
            "JDK {}: {}",
            jdk.version,
            jvm.stderr.text()
        );
        let report = sites.join().unwrap();
        assert!(
            report.contains("every allocation recorded") && report.contains("exact"),
            "JDK {}: {report}",
            jdk.version
        );
        // Every rewritten class got its original bytes back.
        let restored = report
            .lines()
            .find_map(|l| l.strip_prefix("restored "))
            .unwrap_or_else(|| panic!("JDK {}: no restore line: {report}", jdk.version));
        let classes = restored.split_whitespace().next().unwrap();
        assert!(
            classes.parse::<u32>().unwrap() > 0
                && restored.contains(&format!("identical to before for {classes}/{classes},")),
            "JDK {}: {restored}",
            jdk.version
        );
        let rows = sites_rows(&report);
        // (objects allocated, objects live, bytes allocated) over the rows of `class` whose
        // stack passes through `method`.
        let site = |class: &str, method: &str| {
            rows.iter()
                .filter(|r| r.class == class && r.frames.iter().any(|f| f.contains(method)))
                .fold((0.0, 0.0, 0.0), |(a, l, b), r| {
                    (
                        a + r.allocated_objects,
                        l + r.live_objects,
                        b + r.allocated_bytes,
                    )
                })
        };
        let widget = "workloads.ExactAlloc$Widget";
        let cases = [
            (widget, "ExactAlloc.widgetSite", 1000.0, 1000.0),
            // The last one is still referenced from a static field.
            ("int[]", "ExactAlloc.arraySite", 3000.0, 1.0),
            (widget, "ExactAlloc.cloneSite", 500.0, 500.0),
            (
                "workloads.ExactAlloc$Gadget[]",
                "ExactAlloc.reflectSite",
                250.0,
                250.0,
            ),
        ];
        for (class, method, allocated, live) in cases {
            let (got_allocated, got_live, bytes) = site(class, method);
            assert_eq!(
                (got_allocated, got_live),
                (allocated, live),
                "JDK {}: {class} at {method}: (allocated, live) objects: {report}",
                jdk.version
            );
            let each = bytes / allocated;
            assert!(
                each.fract() == 0.0 && (16.0..=64.0).contains(&each),
                "JDK {}: {class} at {method}: {bytes} bytes for {allocated} objects: {report}",
                jdk.version
            );
        }
        assert!(jtap(["status", &pid]).ok().contains("recordings: none"));
    }
}

/// Exact recording on two threads allocating as fast as they can (a GC every few
/// milliseconds, a sweep of weak references after each) ends, reports and restores: turning
/// JVMTI's ObjectFree off at the stop used to hang HotSpot 17+ here (see `heap::live`).
#[test]
fn exact_sites_under_a_gc_storm_finish_and_restore() {
    agent_library();
    for jdk in jdks() {
        let mut jvm = JavaProcess::builder(jdk, "workloads.AllocThroughput")
            .jvm_arg("-Xmx256m")
            .start();
        let pid = jvm.pid().to_string();
        for _ in 0..2 {
            let report = jtap(["sites", &pid, "--exact", "-d", "3", "--gc", "-n", "50"]).ok();
            let rows = sites_rows(&report);
            assert!(
                rows.iter().any(|r| r.class == "long[]"
                    && r.top().starts_with("workloads.AllocThroughput.words")
                    && r.allocated_objects > 1000.0),
                "JDK {}: {report}",
                jdk.version
            );
            assert!(
                report.lines().any(|l| l.starts_with("restored ")),
                "JDK {}: {report}",
                jdk.version
            );
        }
        assert!(jvm.is_running(), "JDK {}", jdk.version);
    }
}

#[test]
fn sites_at_start_up_are_written_when_the_jvm_exits() {
    let library = agent_library();
    let dir = tempfile::tempdir().unwrap();
    for jdk in jdks() {
        for (mode, options) in [("exact", "exact"), ("sampled", "alloc=1k")] {
            let report_path = dir.path().join(format!("{}-{mode}.txt", jdk.version));
            let mut jvm = JavaProcess::builder(jdk, "workloads.ExactAlloc")
                .jvm_arg(format!(
                    "-agentpath:{}=start,event=alloc,{options},file={}",
                    library.display(),
                    report_path.display()
                ))
                .arg("-")
                .arg("100")
                .start();
            assert_eq!(
                jvm.wait(Duration::from_secs(60)),
                Some(Some(0)),
                "JDK {} {mode}: {}",
                jdk.version,
                jvm.stderr.text()
            );
            let report = std::fs::read_to_string(&report_path)
                .unwrap_or_else(|e| panic!("JDK {} {mode}: no report: {e}", jdk.version));
            let rows = sites_rows(&report);
            let widgets: f64 = rows
                .iter()
                .filter(|r| r.top().starts_with("workloads.ExactAlloc.widgetSite"))
                .map(|r| r.allocated_objects)
                .sum();
            assert!(
                report.starts_with("SITES BEGIN") && report.contains("SITES END"),
                "JDK {} {mode}: {report}",
                jdk.version
            );
            if mode == "exact" {
                assert_eq!(widgets, 100_000.0, "JDK {}: {report}", jdk.version);
            } else {
                // 100 000 objects of 24 bytes sampled every 1 KiB on average: an estimate
                // (HotSpot 17+ leaves each thread's first sample where the default interval put
                // it, up to a few hundred KiB in).
                assert!(
                    (50_000.0..=150_000.0).contains(&widgets),
                    "JDK {} {mode}: {widgets} widgets estimated: {report}",
                    jdk.version
                );
            }
        }
    }
}

#[test]
fn lock_profile_puts_the_contended_monitor_on_top() {
    agent_library();
    for jdk in jdks() {
        let mut jvm = JavaProcess::start(jdk, "workloads.LockContention");
        let pid = jvm.pid().to_string();
        let out = jtap([
            "profile",
            &pid,
            "-e",
            "lock",
            "-d",
            "2",
            "--format",
            "collapsed",
        ])
        .ok();
        let stacks = collapsed(&out);
        let total: u64 = stacks.iter().map(|(_, c)| c).sum();
        let hot: u64 = stacks
            .iter()
            .filter(|(f, _)| {
                f.last()
                    .is_some_and(|l| l == "workloads.LockContention$Hot")
            })
            .map(|(_, c)| c)
            .sum();
        assert!(
            total > 0 && hot as f64 >= 0.9 * total as f64,
            "JDK {}: {hot} of {total} contentions on the hot monitor: {out}",
            jdk.version
        );
        assert!(
            stacks.iter().any(|(f, _)| f
                .iter()
                .any(|x| x.starts_with("workloads.LockContention.hot"))),
            "JDK {}: {out}",
            jdk.version
        );
        assert!(
            !out.contains("LockContention$Cold"),
            "JDK {}: the uncontended monitors appear: {out}",
            jdk.version
        );
    }
}

#[test]
fn alloc_sampling_held_by_another_agent_is_a_clear_error() {
    let library = agent_library();
    let dir = tempfile::tempdir().unwrap();
    // A second copy of the agent under another name is a separate agent to the JVM; started
    // with event=alloc it holds can_generate_sampled_object_alloc_events from the start.
    let other = dir.path().join("libother_agent.so");
    std::fs::copy(library, &other).unwrap();
    for jdk in jdks() {
        let mut jvm = JavaProcess::builder(jdk, "workloads.Sleeper")
            .jvm_arg(format!("-agentpath:{}=start,event=alloc", other.display()))
            .start();
        let pid = jvm.pid().to_string();
        let run = jtap(["profile", &pid, "-e", "alloc", "-d", "1"]);
        run.fails_with(23, "another agent");
        assert!(
            run.stderr
                .contains("can_generate_sampled_object_alloc_events"),
            "JDK {}: {run:?}",
            jdk.version
        );
        // The lock engine and exact allocation recording need no single-holder capability
        // and still work.
        jtap([
            "profile", &pid, "-e", "lock", "-d", "1", "--format", "summary",
        ])
        .ok();
        jtap([
            "profile", &pid, "-e", "alloc", "--exact", "-d", "1", "--format", "summary",
        ])
        .ok();
    }
}

#[test]
fn alloc_profiling_through_a_1g_heap_with_many_gcs_stays_bounded() {
    agent_library();
    for jdk in jdks() {
        let mut jvm = JavaProcess::builder(jdk, "workloads.AllocSites")
            .arg("retain")
            .jvm_arg("-Xms1g")
            .jvm_arg("-Xmx1g")
            .jvm_arg("-Xmn64m")
            .jvm_arg("-XX:+AlwaysPreTouch")
            .start();
        let pid = jvm.pid().to_string();
        jtap(["status", &pid]).ok(); // agent loaded before the baseline
        let before = jvm.rss_kib();
        let out = jtap([
            "profile",
            &pid,
            "-e",
            "alloc",
            "--live",
            "-d",
            "6",
            "--alloc-interval",
            "8k",
            "--format",
            "summary",
        ])
        .ok();
        let after = jvm.rss_kib();
        assert!(jvm.is_running(), "JDK {}: the JVM died", jdk.version);
        assert!(
            out.contains("Event") && out.contains("live"),
            "JDK {}: {out}",
            jdk.version
        );
        let grown_mib = after.saturating_sub(before) / 1024;
        eprintln!(
            "JDK {}: RSS {} -> {} MiB during 6 s of --live alloc profiling at 8 KiB",
            jdk.version,
            before / 1024,
            after / 1024
        );
        assert!(
            grown_mib < 128,
            "JDK {}: RSS grew {grown_mib} MiB",
            jdk.version
        );
        let status = jtap(["status", &pid]).ok();
        assert!(
            status.contains("recordings: none"),
            "JDK {}: {status}",
            jdk.version
        );
    }
}

#[test]
fn the_stack_walker_agrees_with_jvmti_frame_for_frame() {
    agent_library();
    for jdk in jdks() {
        let mut jvm = JavaProcess::builder(jdk, "workloads.StackShapes")
            .jvm_arg("-XX:CompileCommand=quiet")
            .jvm_arg("-XX:CompileCommand=exclude,workloads.StackShapes::interpreted")
            .start();
        let pid = jvm.pid().to_string();
        let log = tempfile::NamedTempFile::new().unwrap();
        jtap(["load", &pid, &format!("log={}", log.path().display())]).ok();
        // Interpreted at first, compiled (and inlined) later: both are compared.
        let out = jtap([
            "profile",
            &pid,
            "-e",
            "alloc,lock",
            "--alloc-interval",
            "16k",
            "--lock-threshold",
            "1us",
            "--walker",
            "check",
            "-d",
            "6",
            "--format",
            "collapsed",
        ])
        .ok();
        let stacks = collapsed(&out);
        for method in [
            "StackShapes.plain",
            "StackShapes.interpreted",
            "StackShapes.deep",
            "StackShapes.reflected",
            "StackShapes.locked",
        ] {
            assert!(
                stacks
                    .iter()
                    .any(|(f, _)| f.iter().any(|x| x.contains(method))),
                "JDK {}: no stack through {method}: {out}",
                jdk.version
            );
        }
        let text = std::fs::read_to_string(log.path()).unwrap();
        for (engine, least) in [("alloc", 500), ("lock", 10)] {
            let counts = walker_counts(&text, engine)
                .unwrap_or_else(|| panic!("JDK {}: no {engine} stacks line: {text}", jdk.version));
            let (walked, fell_back, compared, differed) = (
                counts.walked,
                counts.fell_back,
                counts.compared,
                counts.differed,
            );
            eprintln!(
                "JDK {}: {engine}: {walked} walked, {fell_back} by JVMTI, {compared} compared, {differed} differed",
                jdk.version
            );
            // The jmethodIDs of the loaded classes exist from the start: the walker takes
            // nearly every stack itself (JVMTI only a class's first ones).
            assert!(
                fell_back * 20 <= walked,
                "JDK {}: {engine}: JVMTI took {fell_back} stacks, the walker {walked}: {text}",
                jdk.version
            );
            assert_eq!(differed, 0, "JDK {}: {engine}: {text}", jdk.version);
            assert!(
                compared >= least && walked == compared,
                "JDK {}: {engine}: only {walked} of {compared} stacks walked: {text}",
                jdk.version
            );
        }
        assert_eq!(jvm.stdout.text(), "READY\n", "JDK {}", jdk.version);
    }
}
