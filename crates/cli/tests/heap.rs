//! `jtap heap` on every JDK of the matrix: the class histogram agrees with
//! `jcmd GC.class_histogram`, names classes the Java way, and leaves nothing behind in the JVM
//! (no tags, no capabilities, nothing on its stdout).

mod common;

use common::{agent_library, jtap};
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
    histogram["classes"].as_array()?.iter().find(|c| c["name"] == class).and_then(|c| c["instances"].as_u64())
}

#[test]
fn live_histogram_agrees_with_jcmd_and_names_classes_the_java_way() {
    agent_library();
    for jdk in jdks() {
        let mut jvm = JavaProcess::start(jdk, "workloads.HeapShapes");
        let pid = jvm.pid().to_string();
        let ours = histogram_json(&pid, &["--live", "-n", "0"]);
        let theirs = jcmd_histogram(&jtap(["jcmd", &pid, "GC.class_histogram"]).ok());
        assert!(theirs.len() >= 10, "JDK {}: jcmd histogram too short: {theirs:?}", jdk.version);
        for (name, expected) in &theirs[..10] {
            let got = instances_of(&ours, name).unwrap_or_else(|| panic!("JDK {}: {name} missing from jtap heap", jdk.version));
            let off = (got as f64 - *expected as f64).abs() / *expected as f64;
            assert!(off <= 0.05, "JDK {}: {name}: jtap {got} vs jcmd {expected} instances", jdk.version);
        }
        // The workload's own classes, by their Java names and exact counts.
        assert_eq!(instances_of(&ours, "workloads.HeapShapes$Inner"), Some(20_000), "JDK {}", jdk.version);
        assert_eq!(instances_of(&ours, "int[][]"), Some(3_000), "JDK {}", jdk.version);
        assert!(instances_of(&ours, "java.lang.String[]").unwrap_or(0) >= 5_000, "JDK {}", jdk.version);
        assert!(ours["gc_ms"].as_f64().is_some() && ours["walk_ms"].as_f64().is_some(), "JDK {}: {ours}", jdk.version);
        let classes = ours["classes"].as_array().unwrap();
        assert!(classes.windows(2).all(|w| w[0]["bytes"].as_u64() >= w[1]["bytes"].as_u64()), "JDK {}: not sorted by bytes", jdk.version);
        let total: u64 = classes.iter().map(|c| c["bytes"].as_u64().unwrap()).sum();
        assert_eq!(ours["total_bytes"].as_u64(), Some(total), "JDK {}: -n 0 shows every class", jdk.version);

        // A second histogram (no GC first) sees the same retained objects: the first one's
        // tags are gone and its capability was given back.
        let again = histogram_json(&pid, &[]);
        assert_eq!(again["classes"].as_array().map(Vec::len), Some(30), "JDK {}: -n defaults to 30", jdk.version);
        assert_eq!(again["gc_ms"], Value::Null, "JDK {}: no GC without --live", jdk.version);
        let all = histogram_json(&pid, &["-n", "0"]);
        assert_eq!(instances_of(&all, "workloads.HeapShapes$Inner"), Some(20_000), "JDK {}", jdk.version);
        let status = jtap(["status", &pid]).ok();
        assert!(status.contains("capabilities held: none") && status.contains("engine: none"), "JDK {}: {status}", jdk.version);

        let table = jtap(["heap", &pid, "-n", "5"]).ok();
        // Header, five classes, the total and the footer.
        assert_eq!(table.lines().count(), 8, "JDK {}: {table}", jdk.version);
        assert!(table.contains("INSTANCES") && table.contains("total ("), "JDK {}: {table}", jdk.version);
        assert_eq!(jvm.stdout.text(), "READY\n", "JDK {}: the workload's stdout changed", jdk.version);
    }
}

#[test]
fn heap_of_a_missing_process_fails_cleanly() {
    jtap(["heap", "999999999"]).fails_with(10, "999999999");
}
