//! `jtap calltree --auto` finds the slow path of `workloads.SlowPath` on every JDK of the
//! matrix: a method five interface calls (a lambda and a virtual call among them) below the
//! entry, reached only through callees the JVM resolves at run time, where the bytecode's
//! call sites name interfaces. Every round's classes are restored to identical bytes; Ctrl-C
//! in the middle ends the search with the path so far, restored too. On real programs (H2's
//! queries, Jetty's requests) the path ends where a profile of the same calls puts the most
//! time; on javac, whose attribution recurses and whose compilations take seconds each, the
//! search folds the recursion and ends within a minute on a path a profile follows too.

mod common;

use std::time::Duration;

use common::{
    agent_library, collapsed, collapsed_file, jtap, progress, real_program, Background, JETTY_JARS,
};
use jtap_testkit::{jdks, repo_root, JavaProcess};

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
    search_logged(pid, entry, budget).0
}

/// [`search`], and the search's rounds as it logged them.
fn search_logged(pid: &str, entry: &str, budget: &str) -> (serde_json::Value, String) {
    let run = jtap(["calltree", pid, entry, "--auto", "--json", "-d", budget]);
    let context = format!("{run:?}");
    assert_eq!(run.code, 0, "{context}");
    assert_all_restored(&run.stderr, &context);
    let end = run
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v.get("end").is_some())
        .unwrap_or_else(|| panic!("{context}: no end"));
    let rounds = run.stderr.lines().filter(|l| l.contains("round"));
    (end, rounds.collect::<Vec<_>>().join("\n"))
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

/// javac is not among them: its profile is flat (the heaviest method has 5–7 % of the
/// samples, called from everywhere), so no one path leads to it; see
/// [`on_javac_the_path_folds_its_recursion_and_a_profile_follows_it`].
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

/// Taken by the tests that bound a search's time on a real program, so that the JVMs of the
/// others do not share its two cores.
static ALONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

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
    let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
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

/// Compilations of the directory after which javac counts as warm again, and how long they
/// may take.
const WARM_JAVAC_ROUNDS: u64 = 10;
const WARM_JAVAC_WITHIN: Duration = Duration::from_secs(90);

/// The javac search's `-d`. The product's minute is measured where speed is, in a benchmark
/// (`scripts/bench-slowpath.sh`, release build); here the debug agent's probes cost about
/// six times the release build's, javac calls the methods on the path's deep end up to two
/// million times a compilation, so its compilations take up to twice as long in the rounds,
/// and a loaded 2-core CI machine took 60 s and more to reach the path's end on JDK 25.
const JAVAC_BUDGET: &str = "120s";

/// Levels of a path the profile check covers: those with this share of the entry's time or
/// more, where a 5 s profile has tens of samples or more.
const CHECKED_SHARE: f64 = 0.05;

/// javac attributes a tree by recursing through the same visitor methods (`attribTree`,
/// `accept`, `visitBinary`, `attribExpr`, …) at dozens of depths, and one compilation of the
/// directory takes one to several seconds. The search sizes its rounds to the compilations,
/// sets aside those while the JVM compiles again what the first class change discarded,
/// folds the recursion (`attribTree` once on the path) and ends within [`JAVAC_BUDGET`].
/// Its profile is flat, so its end is no profile's top method. Instead: a profile of the
/// same calls puts most time in the same compiler phase (the path's first level), and
/// follows the path through every level holding 5 % of the entry's time or more.
///
/// The levels' shares are not compared: those of the JDK's stream classes on the path come
/// out several times a profile's (48 % against 14 % in one run on a loaded machine). Their
/// probes make HotSpot discard the compiled code of every method that inlined stream code,
/// and javac's operator resolution runs its streams in the interpreter until the JIT has
/// compiled them again (README: status).
#[test]
fn on_javac_the_path_folds_its_recursion_and_a_profile_follows_it() {
    agent_library();
    let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
    let workloads = repo_root().join("tests/java/workloads");
    let workloads = workloads.display().to_string();
    for jdk in jdks().iter().filter(|j| [17, 25].contains(&j.version)) {
        let args = ["javac", workloads.as_str(), "2"];
        let mut jvm = real_program(jdk, "real.JavacLoop", &args, &["ecj"]);
        let pid = jvm.pid().to_string();
        let entry = "com.sun.tools.javac.main.JavaCompiler::compile";
        // javac warms up over its first compilations; then the search's first class change
        // makes HotSpot discard all compiled code (the JVM's agents all came by attach), and
        // the search sets its rounds aside until javac is fast again: otherwise it would find
        // the path of a cold compiler (reading the module path's classes in the
        // interpreter, half its time), which a profile a minute later does not follow.
        let warm = progress(&jvm) + WARM_JAVAC_ROUNDS;
        let deadline = std::time::Instant::now() + WARM_JAVAC_WITHIN;
        while progress(&jvm) < warm && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(250));
        }
        let (end, rounds) = search_logged(&pid, entry, JAVAC_BUDGET);
        let context = format!("JDK {}: {end}\n{rounds}\n", jdk.version);
        assert!(
            end["at"].as_str().is_some(),
            "{context}: the path did not end"
        );
        let path = path_of(&end);
        let attrib = "com.sun.tools.javac.comp.Attr.attribTree";
        assert_eq!(path.iter().filter(|m| *m == attrib).count(), 1, "{context}");
        std::thread::sleep(RECOMPILED_IN);
        let (stacks, _) = profile_inside(&pid, &entry.replace("::", "."));
        let all: u64 = stacks.iter().map(|(_, n)| n).sum();
        assert!(all > 0, "{context}: no sample in the entry's calls");
        let phase = heaviest_callee(&stacks, &path[0]);
        assert_eq!(
            phase.as_ref(),
            path.get(1),
            "{context}: the profile's heaviest phase"
        );
        let levels = end["path"].as_array().cloned().unwrap_or_default();
        for (depth, level) in levels.iter().enumerate() {
            if level["share"].as_f64().unwrap_or(0.0) < CHECKED_SHARE {
                break;
            }
            let through = samples_through(&stacks, &path[..=depth]);
            assert!(
                through > 0,
                "{context}: no sample of the profile passes through the path down to {}",
                path[depth]
            );
        }
        assert!(jvm.is_running(), "{context}: the JVM died");
    }
}

/// The samples of `stacks` whose frames pass through the methods of `path` in its order
/// (other frames between them: the recursion the path folds, the frames it does not time).
fn samples_through(stacks: &Stacks, path: &[String]) -> u64 {
    stacks
        .iter()
        .filter(|(frames, _)| {
            let mut levels = path.iter().peekable();
            for frame in frames {
                if levels.peek() == Some(&frame) {
                    levels.next();
                }
            }
            levels.peek().is_none()
        })
        .map(|(_, n)| n)
        .sum()
}

/// The method called straight from `caller` in most samples of `stacks`.
fn heaviest_callee(stacks: &Stacks, caller: &str) -> Option<String> {
    let mut callees: Vec<(&String, u64)> = Vec::new();
    for (frames, n) in stacks {
        let Some(at) = frames.iter().position(|f| f == caller) else {
            continue;
        };
        let Some(callee) = frames.get(at + 1) else {
            continue;
        };
        match callees.iter_mut().find(|(name, _)| *name == callee) {
            Some((_, count)) => *count += n,
            None => callees.push((callee, *n)),
        }
    }
    let heaviest = callees.into_iter().max_by_key(|&(_, n)| n)?;
    Some(heaviest.0.clone())
}
