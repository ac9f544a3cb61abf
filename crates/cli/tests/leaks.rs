//! `jtap sites --leaks` on every JDK of the matrix: beside an equal rate of allocations that
//! are collected and a far larger rate of garbage, the site that keeps its objects comes
//! first, with objects born between most of the collections and their paths from a GC root
//! through the static list that keeps them, and the collected sites do not show. The same on
//! a real program: an embedded Jetty whose one endpoint keeps a record per request in a
//! session map and whose other makes an equal record and lets it go (`real.JettyLeak`);
//! there the JFR output's `jdk.OldObjectSample` events, as the JDK's `jfr` tool reads them,
//! hold the same objects and referrers.

mod common;

use std::path::Path;
use std::process::Command;

use common::{agent_library, jtap, real_program_with, JETTY_JARS};
use jtap_testkit::{jdks, JavaProcess};
use serde_json::Value;

/// The steps of a path from a GC root, root first.
fn steps(path: &Value) -> Vec<&str> {
    path["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect()
}

/// The `jdk.OldObjectSample` events of `recording`, as `jfr print --json` of the first JDK
/// that has the tool (17+) reads them.
fn old_object_samples(recording: &Path) -> Vec<Value> {
    let jdk = jdks().iter().find(|j| j.version >= 17).expect("a JDK 17+");
    let output = Command::new(jdk.home.join("bin/jfr"))
        .args(["print", "--json", "--events", "OldObjectSample"])
        .arg(recording)
        .output()
        .expect("run jfr");
    assert!(output.status.success(), "{output:?}");
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    json["recording"]["events"].as_array().unwrap().clone()
}

/// How an old object is held, as `jfr` reads the event: the field names and array indexes
/// from the object up to the root's object.
fn referrers(event: &Value) -> Vec<String> {
    let mut held = Vec::new();
    let mut object = &event["values"]["object"];
    while let Some(reference) = object.get("referrer").filter(|r| !r.is_null()) {
        held.push(match reference["field"]["name"].as_str() {
            Some(name) => name.to_string(),
            None => format!("[{}]", reference["array"]["index"]),
        });
        object = &reference["object"];
    }
    held
}

/// The first frame of a listed site.
fn top_frame(site: &Value) -> &str {
    site["frames"][0].as_str().unwrap_or("")
}

#[test]
fn the_leaking_site_leads_and_collected_sites_do_not_show() {
    agent_library();
    for jdk in jdks() {
        // A small young generation: the churn fills it several times a second.
        let mut jvm = JavaProcess::builder(jdk, "workloads.Leaky")
            .jvm_arg("-Xmx512m")
            .jvm_arg("-Xmn32m")
            .start();
        let pid = jvm.pid().to_string();
        let json = jtap([
            "sites",
            &pid,
            "--leaks",
            "-d",
            "6s",
            "--alloc-interval",
            "16k",
            "--depth",
            "2",
            "--json",
        ])
        .ok();
        let report: Value = serde_json::from_str(&json).unwrap();
        let collections = report["leaks"]["collections"].as_u64().unwrap();
        assert!(
            collections >= 4,
            "JDK {}: only {collections} collections in 6 s: {json}",
            jdk.version
        );
        let sites = report["sites"].as_array().unwrap();
        let first = &sites[0];
        assert!(
            first["class"] == "byte[]" && top_frame(first).starts_with("workloads.Leaky.remember"),
            "JDK {}: the leaking site is not first: {json}",
            jdk.version
        );
        // About 2 MiB/s kept: the objects old enough (two collections) are most of 12 MiB.
        let old = first["survivors"]["old"]["bytes"].as_f64().unwrap();
        assert!(
            old > 2e6,
            "JDK {}: {old} bytes survived: {json}",
            jdk.version
        );
        // Kept steadily: the later half of the intervals the old objects can have been born
        // in holds about four ninths of them (a cache filled once would hold none there).
        let later = first["survivors"]["later"]["bytes"].as_f64().unwrap();
        assert!(
            (old * 0.2..=old * 0.8).contains(&later),
            "JDK {}: {later} of {old} old bytes born in the later half: {json}",
            jdk.version
        );
        // Split into up to eight parts of those intervals, oldest first: all of the old bytes,
        // and born in every part but at most one (as `born_in` below, an interval can go
        // without).
        let parts = first["survivors"]["by_birth"].as_array().unwrap();
        let bytes: Vec<f64> = parts.iter().map(|p| p["bytes"].as_f64().unwrap()).collect();
        assert_eq!(
            parts.len() as u64,
            (collections - 1).min(8),
            "JDK {}: {json}",
            jdk.version
        );
        assert!(
            (bytes.iter().sum::<f64>() - old).abs() < 1.0,
            "JDK {}: parts {bytes:?} against {old} old bytes",
            jdk.version
        );
        assert!(
            bytes.iter().filter(|&&b| b > 0.0).count() + 1 >= bytes.len(),
            "JDK {}: parts {bytes:?}",
            jdk.version
        );
        // Old enough (two collections) when born in the first `collections - 1` intervals,
        // about 0.3 s each. A quiet machine had births in 21 of 21; a loaded test run in 18
        // of 21, where the keeping thread can miss an interval while the churning one fills
        // the young generation. A cache filled once is born in one.
        let born_in = first["survivors"]["born_in"].as_u64().unwrap();
        assert!(
            born_in * 3 >= (collections - 1) * 2,
            "JDK {}: survivors born between {born_in} of {collections} collections: {json}",
            jdk.version
        );
        // Its objects are held by the static list: each path from a GC root passes
        // through it and ends at the array's element.
        let paths = first["paths"].as_array().unwrap();
        assert!(!paths.is_empty(), "JDK {}: no path: {json}", jdk.version);
        for path in paths {
            // A 2 KiB array, older than the two collections it survived.
            assert!(
                path["array_length"] == 2048
                    && path["bytes"].as_u64().is_some_and(|b| b >= 2048)
                    && path["age_ns"].as_u64().is_some_and(|age| age > 0),
                "JDK {}: {path}",
                jdk.version
            );
            let steps = steps(path);
            let through = steps
                .iter()
                .position(|s| *s == "static CACHE: java.util.ArrayList");
            assert!(
                through.is_some_and(|i| steps[i + 1] == ".elementData: java.lang.Object[]")
                    && steps
                        .last()
                        .is_some_and(|s| s.starts_with('[') && s.ends_with("]: byte[]")),
                "JDK {}: {steps:?}",
                jdk.version
            );
        }
        // The paths meet in the list's element array, which holds every array the list
        // keeps: at least the survivors the samples estimate (those older than the window
        // too), about 2 KiB each.
        let holder = &first["holder"];
        let reaches = holder["reaches"]["bytes"].as_f64().unwrap_or(0.0);
        let objects = holder["reaches"]["objects"].as_f64().unwrap_or(0.0);
        assert!(
            holder["step"] == ".elementData: java.lang.Object[]"
                && reaches >= old / 2.0
                && (2000.0..2200.0).contains(&(reaches / objects)),
            "JDK {}: {holder}",
            jdk.version
        );
        for site in sites {
            let top = top_frame(site);
            assert!(
                !top.contains("Leaky.discard") && !top.contains("Leaky.churn"),
                "JDK {}: a collected site is listed: {json}",
                jdk.version
            );
        }
        // The same as people read it.
        let text = jtap(["leaks", &pid, "--min-age", "3", "-d", "3s", "-n", "3"]).ok();
        assert!(
            text.starts_with("LEAK SUSPECTS BEGIN (ordered by bytes alive after 3 or more of the")
                && text.contains("workloads.Leaky.remember"),
            "JDK {}: {text}",
            jdk.version
        );
        assert!(jvm.is_running());
    }
}

#[test]
fn a_jetty_session_cache_leads_the_suspects_with_its_path_from_a_root() {
    agent_library();
    for jdk in jdks() {
        let v = jdk.version;
        // A small young generation: Jetty's garbage fills it several times a second.
        let jvm_args = ["-Xmx512m", "-Xmn32m"];
        let mut jvm = real_program_with(jdk, "real.JettyLeak", &["2"], &JETTY_JARS, &jvm_args);
        let pid = jvm.pid().to_string();
        let dir = tempfile::tempdir().unwrap();
        let flame = dir.path().join("leak.collapsed");
        let page = dir.path().join("leak.html");
        let recording = dir.path().join("leak.jfr");
        let json = jtap([
            "sites",
            &pid,
            "--leaks",
            "-o",
            flame.to_str().unwrap(),
            "-o",
            page.to_str().unwrap(),
            "-o",
            recording.to_str().unwrap(),
            "-d",
            "8s",
            "--alloc-interval",
            "64k",
            "--depth",
            "2",
            "--json",
        ])
        .ok();
        // The report, then the files written.
        let report: Value = serde_json::Deserializer::from_str(&json)
            .into_iter::<Value>()
            .next()
            .unwrap()
            .unwrap();
        let sites = report["sites"].as_array().unwrap();
        let first = &sites[0];
        assert!(
            first["class"] == "byte[]" && top_frame(first).starts_with("real.JettyLeak.remember"),
            "JDK {v}: the leaking site is not first: {json}"
        );
        // The flame graph of the suspects' old bytes: the leak is its heaviest stack.
        let stacks = common::collapsed_file(&flame);
        let heaviest = stacks.iter().max_by_key(|(_, bytes)| *bytes).unwrap();
        assert!(
            heaviest
                .0
                .ends_with(&["real.JettyLeak.remember".into(), "byte[]".into()]),
            "JDK {v}: {stacks:?}"
        );
        // Its stacks stand under the half of the window their objects were born in; the
        // later half's hold the leak too: it still grows.
        assert!(
            stacks.iter().any(|(frames, _)| {
                frames
                    .first()
                    .is_some_and(|f| f == "[label=born in the later half]")
                    && frames.ends_with(&["real.JettyLeak.remember".into(), "byte[]".into()])
            }),
            "JDK {v}: {stacks:?}"
        );
        assert!(
            std::fs::metadata(&page).is_ok_and(|m| m.len() > 0),
            "JDK {v}"
        );
        // Every path from a GC root to its records passes through the session map.
        let paths = first["paths"].as_array().unwrap();
        assert!(!paths.is_empty(), "JDK {v}: no path: {json}");
        for path in paths {
            let steps = steps(path);
            assert!(
                steps.contains(&"static SESSIONS: java.util.concurrent.ConcurrentHashMap")
                    && steps.last().is_some_and(|s| s.ends_with(": byte[]")),
                "JDK {v}: {steps:?}"
            );
        }
        // The paths meet in the map or below it, which holds at least the old records.
        let holder = &first["holder"];
        let held = steps(&paths[0])
            .iter()
            .skip_while(|s| !s.starts_with("static SESSIONS"))
            .any(|s| holder["step"] == *s);
        let old = first["survivors"]["old"]["bytes"].as_f64().unwrap_or(0.0);
        let reaches = holder["reaches"]["bytes"].as_f64().unwrap_or(0.0);
        assert!(held && reaches >= old / 2.0, "JDK {v}: {holder}: {json}");
        // JFR has one old object sample per path of the suspects: the leaking site's are
        // records allocated in `remember`, held through the session map.
        let samples = old_object_samples(&recording);
        let all_paths: usize = sites
            .iter()
            .map(|s| s["paths"].as_array().map_or(0, Vec::len))
            .sum();
        assert_eq!(samples.len(), all_paths, "JDK {v}: {samples:?}");
        let remembered: Vec<&Value> = samples
            .iter()
            .filter(|s| s["values"]["stackTrace"]["frames"][0]["method"]["name"] == "remember")
            .collect();
        assert_eq!(remembered.len(), paths.len(), "JDK {v}: {samples:?}");
        for sample in remembered {
            assert!(
                sample["values"]["object"]["type"]["name"] == "[B"
                    && referrers(sample).iter().any(|r| r == "SESSIONS"),
                "JDK {v}: {sample}"
            );
        }
        // The records made at the same rate and let go are not suspects.
        for site in sites {
            assert!(
                !top_frame(site).contains("JettyLeak.forget"),
                "JDK {v}: the collected site is listed: {json}"
            );
        }
        assert!(jvm.is_running(), "JDK {v}: the JVM died");
    }
}
