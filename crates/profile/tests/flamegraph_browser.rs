//! The HTML flame graph in a real browser (headless Chromium): it renders, search highlights
//! and reports the matched share, and a profile with 100k distinct stacks opens quickly.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use jtap_profile::{ExportOptions, Format, Frame, FrameKind, Metadata, Profile, StackCounts};

const CHROMIUM: &str = "/usr/bin/chromium";

/// Runs headless Chromium on `url`, returning the DOM after scripts ran.
fn dump_dom(url: &str, profile_dir: &Path) -> String {
    let out = Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--user-data-dir={}", profile_dir.display()))
        .args(["--dump-dom", url])
        .output()
        .expect("run chromium");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn attribute<'a>(dom: &'a str, element_id: &str, attribute: &str) -> Option<&'a str> {
    let start = dom.find(&format!("id=\"{element_id}\""))?;
    let tag_start = dom[..start].rfind('<')?;
    let tag = &dom[tag_start..tag_start + dom[tag_start..].find('>')?];
    let at = tag.find(&format!("{attribute}=\""))? + attribute.len() + 2;
    Some(&tag[at..at + tag[at..].find('"')?])
}

/// main → {Burn.a ×1, Burn.b ×2, Burn.c ×4} plus `extra` distinct filler stacks of weight 1.
fn profile(extra: usize) -> Profile {
    let mut p = Profile::new(Metadata {
        event: "cpu".into(),
        engine: "cpu".into(),
        ..Metadata::default()
    });
    let main = Frame::new("Main.main", FrameKind::Interpreted);
    for (name, n) in [("Burn.a", 100), ("Burn.b", 200), ("Burn.c", 400)] {
        p.add_frames(&[main.clone(), Frame::new(name, FrameKind::Compiled)], n, n);
    }
    for i in 0..extra {
        let stack: Vec<Frame> = (0..12)
            .map(|d| {
                Frame::new(
                    format!("pkg{}.Cls{}.m{}", d, (i >> d) % 7, i % (d + 3)),
                    FrameKind::Compiled,
                )
            })
            .chain([Frame::new(format!("leaf.L.f{i}"), FrameKind::Inlined)])
            .collect();
        p.add_frames(&stack, 1, 1);
    }
    p
}

#[test]
fn a_deep_flame_graph_opens_with_its_root_in_view() {
    if !Path::new(CHROMIUM).exists() {
        eprintln!("SKIPPED: {CHROMIUM} not installed (scripts/setup-system.sh installs it)");
        return;
    }
    let mut p = Profile::new(Metadata {
        event: "cpu".into(),
        engine: "cpu".into(),
        ..Metadata::default()
    });
    // 150 levels: far taller than the browser's window.
    let deep: Vec<Frame> = (0..150)
        .map(|d| Frame::new(format!("Deep.level{d}"), FrameKind::Compiled))
        .collect();
    p.add_frames(&deep, 10, 10);
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("deep.html");
    std::fs::write(&page, Format::Html.render(&p, &ExportOptions::default())).unwrap();
    let dom = dump_dom(
        &format!("file://{}", page.display()),
        &dir.path().join("chromium"),
    );
    assert_eq!(
        attribute(&dom, "canvas", "data-root-in-view"),
        Some("true"),
        "the root row is out of view when the page opens"
    );
}

#[test]
fn search_highlights_and_reports_the_matched_share() {
    if !Path::new(CHROMIUM).exists() {
        eprintln!("SKIPPED: {CHROMIUM} not installed (scripts/setup-system.sh installs it)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("flame.html");
    std::fs::write(
        &page,
        Format::Html.render(&profile(0), &ExportOptions::default()),
    )
    .unwrap();
    let dom = dump_dom(
        &format!("file://{}#search=Burn%5C.c", page.display()),
        &dir.path().join("chrome"),
    );
    let highlighted: u32 = attribute(&dom, "canvas", "data-highlighted")
        .expect("canvas drawn")
        .parse()
        .unwrap();
    assert_eq!(highlighted, 1, "{dom}");
    // Burn.c is 400 of 700 samples.
    assert!(dom.contains("Matched: 57.14%"), "{dom}");

    let dom = dump_dom(
        &format!("file://{}#search=Burn", page.display()),
        &dir.path().join("chrome"),
    );
    assert!(dom.contains("Matched: 100.00%"));
    assert_eq!(attribute(&dom, "canvas", "data-highlighted"), Some("3"));

    // A screenshot of the highlighted graph (kept where JTAP_SCREENSHOT_DIR points, if set).
    let png = dir.path().join("flame.png");
    let status = Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
        ])
        .args([
            "--disable-component-update",
            "--disable-sync",
            "--window-size=1000,300",
            "--virtual-time-budget=3000",
        ])
        .arg(format!(
            "--user-data-dir={}",
            dir.path().join("chrome").display()
        ))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}#search=Burn%5C.c", page.display()))
        .output()
        .expect("run chromium");
    assert!(status.status.success());
    let bytes = std::fs::read(&png).expect("screenshot written");
    assert!(bytes.starts_with(b"\x89PNG") && bytes.len() > 5_000);
    if let Some(keep) = std::env::var_os("JTAP_SCREENSHOT_DIR") {
        std::fs::copy(&png, Path::new(&keep).join("flamegraph.png")).unwrap();
    }
}

#[test]
fn a_hundred_thousand_stacks_open_quickly() {
    if !Path::new(CHROMIUM).exists() {
        eprintln!("SKIPPED: {CHROMIUM} not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("big.html");
    let big = profile(100_000);
    assert!(big.stack_count() >= 100_000);
    let rendered = Instant::now();
    let html = Format::Html.render(&big, &ExportOptions::default());
    let render_time = rendered.elapsed();
    std::fs::write(&page, &html).unwrap();
    let opened = Instant::now();
    let dom = dump_dom(
        &format!("file://{}#search=leaf", page.display()),
        &dir.path().join("chrome"),
    );
    let open_time = opened.elapsed();
    eprintln!(
        "100k stacks: {} MiB page, rendered in {:?}, loaded+searched in Chromium in {:?}",
        html.len() >> 20,
        render_time,
        open_time
    );
    assert!(
        attribute(&dom, "canvas", "data-highlighted").is_some(),
        "page did not draw"
    );
    // 100,000 of 100,700 samples end in a leaf.L frame (each too thin to draw on its own).
    assert!(dom.contains("Matched: 99.30%"), "search did not run");
    assert!(open_time < Duration::from_secs(60));
}

#[test]
fn a_session_of_several_events_switches_between_them() {
    if !Path::new(CHROMIUM).exists() {
        eprintln!("SKIPPED: {CHROMIUM} not installed");
        return;
    }
    let cpu = profile(0);
    let mut alloc = Profile::new(Metadata {
        event: "alloc".into(),
        engine: "alloc".into(),
        weight_unit: "bytes".into(),
        ..Metadata::default()
    });
    let main = Frame::new("Main.main", FrameKind::Interpreted);
    for (site, bytes) in [("Alloc.small", 1024), ("Alloc.large", 3072)] {
        let stack = [main.clone(), Frame::new(site, FrameKind::Compiled)];
        alloc.add_frames(&stack, 1, bytes);
    }
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("session.html");
    let rendered = jtap_profile::render_set(
        Format::Html,
        &[cpu, alloc],
        &ExportOptions::default(),
        Some(&page),
    );
    assert_eq!(rendered.len(), 1, "one page for both events");
    std::fs::write(&page, &rendered[0].1).unwrap();
    let url = format!("file://{}", page.display());
    // Opens on the first event, with the selector shown.
    let dom = dump_dom(&url, &dir.path().join("chrome"));
    assert_eq!(attribute(&dom, "event", "hidden"), None, "{dom}");
    assert!(dom.contains("data-event=\"cpu\""), "{dom}");
    assert!(dom.contains("700 samples"), "{dom}");
    // #event=alloc shows the allocations, in bytes, and search works there.
    let dom = dump_dom(
        &format!("{url}#event=alloc&search=Alloc%5C.large"),
        &dir.path().join("chrome"),
    );
    assert!(dom.contains("data-event=\"alloc\""), "{dom}");
    assert!(dom.contains("4,096 bytes"), "{dom}");
    assert!(dom.contains("Matched: 75.00%"), "{dom}");
}

#[test]
fn a_heatmap_range_draws_the_flame_graph_of_that_time_alone() {
    if !Path::new(CHROMIUM).exists() {
        eprintln!("SKIPPED: {CHROMIUM} not installed");
        return;
    }
    // Three seconds: Burn.a in the first (10 samples), Burn.b in the second (20), Burn.c in
    // the third (40).
    let mut p = Profile::new(Metadata {
        event: "cpu".into(),
        engine: "cpu".into(),
        start_time_ns: 1_000_000_000_000,
        duration_ns: 3_000_000_000,
        ..Metadata::default()
    });
    let main = Frame::new("Main.main", FrameKind::Interpreted);
    for (second, (name, n)) in [("Burn.a", 10u64), ("Burn.b", 20), ("Burn.c", 40)]
        .into_iter()
        .enumerate()
    {
        let stack = [main.clone(), Frame::new(name, FrameKind::Compiled)];
        for i in 0..n {
            let at = 1_000_000_000_000 + second as u64 * 1_000_000_000 + i * 1_000_000_000 / n;
            p.log_frames(&stack, StackCounts::sampled(1, 10_000_000), at, 1);
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("heat.html");
    std::fs::write(&page, Format::Heatmap.render(&p, &ExportOptions::default())).unwrap();
    let url = format!("file://{}", page.display());

    let dom = dump_dom(&url, &dir.path().join("chrome"));
    assert_eq!(
        attribute(&dom, "heatmap", "hidden"),
        None,
        "heatmap shown: {dom}"
    );
    assert!(dom.contains("70 samples"), "{dom}");
    assert!(dom.contains("3 s, one column per second"), "{dom}");

    let dom = dump_dom(
        &format!("{url}#range=1000-2000&search=Burn%5C.b"),
        &dir.path().join("chrome"),
    );
    assert!(dom.contains("20 samples"), "only the second second: {dom}");
    assert!(dom.contains("Matched: 100.00%"), "{dom}");

    // A plain profile has no heatmap.
    std::fs::write(
        &page,
        Format::Heatmap.render(&profile(0), &ExportOptions::default()),
    )
    .unwrap();
    let dom = dump_dom(&url, &dir.path().join("chrome"));
    assert!(attribute(&dom, "heatmap", "hidden").is_some(), "{dom}");
}
