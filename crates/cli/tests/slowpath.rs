//! `jtap calltree --auto` finds the slow path of `workloads.SlowPath` on every JDK of the
//! matrix: a method five interface calls (a lambda and a virtual call among them) below the
//! entry, reached only through callees the JVM resolves at run time, where the bytecode's
//! call sites name interfaces. Every round's classes are restored to identical bytes; Ctrl-C
//! in the middle ends the search with the path so far, restored too. On real programs (H2's
//! queries, Jetty's requests) the path ends where a profile of the same calls puts the most
//! time.

mod common;

use std::time::Duration;

use common::{
    agent_library, collapsed, collapsed_file, jtap, real_program, Background, JETTY_JARS,
};
use jtap_testkit::{jdks, JavaProcess};

const ENTRY: &str = "workloads.SlowPath::handle";

/// The levels the JVM runs from the entry to the slow method.
const PATH: [&str; 7] = [
    "workloads.SlowPath.handle",
    "workloads.SlowPath$Router.process",
    "workloads.SlowPath$Router.lambda$new$",
    "workloads.SlowPath$OrderService.serve",
    "workloads.SlowPath$AbstractRepository.load",
    "workloads.SlowPath$CachedRepository.fetch",
    "workloads.SlowPath$SlowCodec.decode",
];

/// The chain of methods of a `--json` tree, from the entry down.
fn chain(tree: &serde_json::Value) -> Vec<(String, f64)> {
    let mut levels = Vec::new();
    let mut node = &tree["tree"];
    let entry = node["total_ns"].as_f64().unwrap_or(0.0);
    while let Some(method) = node["method"].as_str() {
        let total = node["total_ns"].as_f64().unwrap_or(0.0);
        levels.push((method.to_string(), total / entry.max(1.0)));
        match node["children"].get(0) {
            Some(child) => node = child,
            None => break,
        }
    }
    levels
}

/// A `calltree --auto --json` search from `entry` in JVM `pid` within `budget`, which must
/// restore every class: its end line.
fn search(pid: &str, entry: &str, budget: &str) -> serde_json::Value {
    let run = jtap(["calltree", pid, entry, "--auto", "--json", "-d", budget]);
    let context = format!("{run:?}");
    assert_eq!(run.code, 0, "{context}");
    assert_all_restored(&run.stderr, &context);
    run.stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v.get("end").is_some())
        .unwrap_or_else(|| panic!("{context}: no end"))
}

/// The methods of the path a `--json` end line gives, the entry first.
fn path_of(end: &serde_json::Value) -> Vec<String> {
    let levels = end["path"].as_array().cloned().unwrap_or_default();
    levels
        .iter()
        .filter_map(|level| Some(level["method"].as_str()?.to_string()))
        .collect()
}

/// Every round's restore report says the classes came back identical.
fn assert_all_restored(stderr: &str, context: &str) {
    let reports: Vec<&str> = stderr.lines().filter(|l| l.contains("restored ")).collect();
    assert!(
        !reports.is_empty(),
        "{context}: no restore report: {stderr}"
    );
    for line in reports {
        let counts = line
            .split("identical to before for ")
            .nth(1)
            .and_then(|rest| rest.split([',', ' ', ':']).next())
            .and_then(|n| n.split_once('/'));
        assert!(
            counts.is_some_and(|(same, all)| same == all),
            "{context}: {line}"
        );
    }
}

#[test]
fn auto_calltree_ends_at_the_slow_call_five_interface_calls_deep() {
    agent_library();
    for jdk in jdks() {
        let v = jdk.version;
        let dir = tempfile::tempdir().unwrap();
        let mut jvm = JavaProcess::builder(jdk, "workloads.SlowPath")
            .cwd(dir.path())
            .start();
        let pid = jvm.pid().to_string();
        let flame = dir.path().join("path.collapsed");
        let run = jtap([
            "calltree",
            &pid,
            ENTRY,
            "--auto",
            "--json",
            "-d",
            "60s",
            "-o",
            flame.to_str().unwrap(),
        ]);
        let context = format!("JDK {v}: {run:?}");
        assert_eq!(run.code, 0, "{context}");
        let tree: serde_json::Value = run
            .stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|v| v.get("tree").is_some())
            .unwrap_or_else(|| panic!("{context}: no tree"));
        let levels = chain(&tree);
        let names: Vec<&str> = levels.iter().map(|(m, _)| m.as_str()).collect();
        assert_eq!(names.len(), PATH.len(), "{context}: {names:#?}");
        for (name, expected) in names.iter().zip(PATH) {
            assert!(name.starts_with(expected), "{context}: {names:#?}");
        }
        // The slow method's own loop is a thousand times its siblings' work: it holds most of
        // the entry's time (a level's share is exact, from its probes).
        let (_, share) = levels.last().unwrap();
        assert!(*share > 0.5, "{context}: {levels:?}");
        assert!(
            run.stdout
                .contains("own code of workloads.SlowPath$SlowCodec.decode"),
            "{context}"
        );
        assert_all_restored(&run.stderr, &context);
        let stacks = collapsed_file(&flame);
        assert!(
            stacks.iter().any(|(frames, _)| frames
                .last()
                .is_some_and(|f| f.starts_with("workloads.SlowPath$SlowCodec.decode"))),
            "{context}: {stacks:?}"
        );
        assert!(jvm.is_running(), "{context}: the JVM died");
    }
}

#[test]
fn ctrl_c_ends_the_search_with_the_path_so_far_and_every_class_restored() {
    agent_library();
    let Some(jdk) = jdks().first() else { return };
    let dir = tempfile::tempdir().unwrap();
    let mut jvm = JavaProcess::builder(jdk, "workloads.SlowPath")
        .cwd(dir.path())
        .start();
    let pid = jvm.pid().to_string();
    let mut search = Background::start(&["calltree", &pid, ENTRY, "--auto"], dir.path());
    search.wait_stderr("jtap: round 1:", Duration::from_secs(60));
    // Inside the second round's session: its probes are in.
    search.wait_stderr("jtap: tracing:", Duration::from_secs(30));
    search.interrupt();
    let (code, stdout, stderr) = search.finish(Duration::from_secs(30));
    let context = format!("JDK {}: {stdout}\n{stderr}", jdk.version);
    assert_eq!(code, 0, "{context}");
    assert!(stdout.contains("workloads.SlowPath.handle"), "{context}");
    assert_all_restored(&stderr, &context);
    assert!(jvm.is_running(), "{context}: the JVM died");
}

/// A real program, the entry its path starts from, and where it runs.
struct RealEntry {
    main_class: &'static str,
    args: &'static [&'static str],
    jars: &'static [&'static str],
    entry: &'static str,
}

/// javac is not among them: one compilation outlasts a search's round (more so once the first
/// retransformation made HotSpot discard its compiled code), so most searches give up for
/// lack of entry calls, and its profile is flat (the heaviest method, `HashMap.getNode`, has
/// 5 % of the samples, called from everywhere), so no one path leads to it (README: status).
/// The recursion folding its attribution needs is unit-tested in `slowpath/path.rs`.
const REAL_ENTRIES: [RealEntry; 2] = [
    RealEntry {
        main_class: "real.H2Load",
        args: &["2"],
        jars: &["h2"],
        entry: "org.h2.jdbc.JdbcPreparedStatement::executeQuery",
    },
    RealEntry {
        main_class: "real.JettyLoad",
        args: &["2"],
        jars: &JETTY_JARS,
        entry: "org.eclipse.jetty.server.Server::handle",
    },
];

/// How many of a profile's heaviest methods (by own time, in the entry's calls) are checked:
/// on these programs the first few are within a few points of each other, closer than a
/// profile's sampling error (about 1/sqrt(n) of a share over n samples), so which of them
/// leads differs from profile to profile.
const TOP_METHODS: usize = 3;

/// How long after a search its JVM is left to compile again what the restore discarded.
const RECOMPILED_IN: Duration = Duration::from_secs(3);

/// Collapsed stacks: frames root first, and their samples.
type Stacks = Vec<(Vec<String>, u64)>;

/// A wall profile of `pid`'s calls of `entry` (`Class.method`): its stacks from the entry
/// down, and the methods it puts on top (own time), heaviest first. At 5 ms, a few hundred
/// samples in the entry's calls.
fn profile_inside(pid: &str, entry: &str) -> (Stacks, Vec<(String, u64)>) {
    let stacks: Stacks = collapsed(
        &jtap([
            "profile",
            pid,
            "-e",
            "wall",
            "-i",
            "5ms",
            "-d",
            "5",
            "--format",
            "collapsed",
        ])
        .ok(),
    )
    .into_iter()
    .filter_map(|(frames, count)| {
        let from = frames.iter().position(|f| f == entry)?;
        // Down to the last frame that is code (a JIT stub such as `[sha256_implCompress]`
        // is), not the thread's state.
        let state = |f: &String| f == "[running]" || f == "[sleeping]";
        let to = frames.iter().rposition(|f| !state(f))?;
        Some((frames[from..=to].to_vec(), count))
    })
    .collect();
    let mut own: Vec<(String, u64)> = Vec::new();
    for (frames, count) in &stacks {
        let top = frames.last().unwrap();
        match own.iter_mut().find(|(name, _)| name == top) {
            Some((_, n)) => *n += count,
            None => own.push((top.clone(), *count)),
        }
    }
    own.sort_by_key(|&(_, n)| std::cmp::Reverse(n));
    (stacks, own)
}

/// Whether the path ending at `at`, through the methods `path` above it, leads to the
/// profile's top method `top`: `at` is `top`, or most of `top`'s samples run inside a call of
/// `at` (the path ends at the last call jtap may instrument above it, or in the method that
/// called it inline).
///
/// A stub's samples (`[sha256_implCompress]`) called straight from a method of the path
/// count as inside: HotSpot records no debug information at a compiled method's call into a
/// stub, and what it records for the code around it may name the compiled method alone, not
/// the methods it inlined. After a restore, Jetty's `WorkHandler.digest` compiled with the
/// whole `MessageDigest` chain inlined, and every walker (jtap's, `AsyncGetCallTrace`,
/// async-profiler's) put SHA-256's stub right below it.
fn leads_to(stacks: &Stacks, path: &[String], at: &str, top: &str) -> bool {
    let of_top = stacks
        .iter()
        .filter(|(frames, _)| frames.last().is_some_and(|f| f == top));
    let is_stub = top.starts_with('[');
    let (all, inside) = of_top.fold((0, 0), |(all, inside), (frames, n)| {
        let caller = frames.len().checked_sub(2).map(|i| &frames[i]);
        let through =
            frames.iter().any(|f| f == at) || (is_stub && caller.is_some_and(|c| path.contains(c)));
        (all + n, inside + if through { *n } else { 0 })
    });
    at == top || (all > 0 && inside * 2 > all)
}

#[test]
fn on_real_programs_the_path_ends_where_a_profile_of_its_calls_puts_the_time() {
    agent_library();
    for jdk in jdks() {
        let v = jdk.version;
        for program in &REAL_ENTRIES {
            let mut jvm = real_program(jdk, program.main_class, program.args, program.jars);
            let pid = jvm.pid().to_string();
            // Where two callees hold nearly the same time, the samples guiding the search
            // may pick either, and only one leads to the profile's top: a second search
            // gets a second draw.
            let mut misses = Vec::new();
            for _ in 0..2 {
                match search_ends_on_top(&pid, program.entry) {
                    Ok(()) => break,
                    Err(miss) => misses.push(miss),
                }
            }
            let context = format!("{} on JDK {v}", program.main_class);
            assert!(misses.len() < 2, "{context}: {misses:#?}");
            assert!(jvm.is_running(), "{context}: the JVM died");
        }
    }
}

/// One search from `entry` in JVM `pid`, with every class restored; Err says where it ended
/// when that leads to none of the methods a profile of the same calls puts on top, or that
/// it ended before the path did.
fn search_ends_on_top(pid: &str, entry: &str) -> Result<(), String> {
    let end = search(pid, entry, "40s");
    // A search that gave up (too few samples below a deep path) missed as one that ended
    // elsewhere did.
    let Some(at) = end["at"].as_str() else {
        return Err(format!("the path did not end: {}", end["end"]));
    };
    let path = path_of(&end);
    // The restore discarded the compiled code of the methods that had inlined the levels; a
    // profile taken while HotSpot compiles them again shows the interpreter's costs (two
    // profiles right after two searches of one H2 ranked Cursor.hasNext at 62 and then 151
    // samples).
    std::thread::sleep(RECOMPILED_IN);
    let (stacks, tops) = profile_inside(pid, &entry.replace("::", "."));
    if tops
        .iter()
        .take(TOP_METHODS)
        .any(|(top, _)| leads_to(&stacks, &path, at, top))
    {
        return Ok(());
    }
    Err(format!(
        "the path ends in {at}, a profile of the same calls puts on top {:?}; {}",
        &tops[..tops.len().min(8)],
        end["end"]
    ))
}
