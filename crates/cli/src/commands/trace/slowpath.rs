//! `jtap calltree <pid> ENTRY --auto`: the slow path below an entry method, found in rounds.
//!
//! Each round is a calltree session of its own (every class restored at its end, with the
//! agent's check) beside a wall-clock profile of the JVM. The session times the entry and a
//! window of the path's levels — at most [`MAX_METHODS`] methods, instrumented where the JVM
//! resolved them (the implementation an interface call reached, a lambda's body) — so each
//! level's time in the entry calls is exact. The samples taken inside entry calls show the
//! methods the JVM actually called below the path so far ([`path::propose`]): the next
//! round instruments the heaviest of them and restores the levels already timed. Where the
//! samples put the time in a level's own code, a round times that level's call sites
//! ([`path::heavier_call_site`]): the JIT's inlining makes a callee's code the caller's in
//! the samples of every profiler, so only the probes tell them apart. The path ends in a
//! level's own code, or in a call jtap does not instrument (native code, the JDK's
//! internals), named.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use jtap_client::{interrupt, Asked};
use jtap_profile::{Frame, FrameKind, Metadata, Profile, StackCounts};
use jtap_protocol::records::trace::format_duration;
use jtap_protocol::records::{CallTree, Quantiles, Record, TreeNode};
use jtap_protocol::trace::{MethodPattern, Mode, Plan, DISCARDED_ALL_COMPILED_CODE};
use jtap_protocol::{Action, Event, Options};

mod path;

use path::{End, Level, Method, Timed};

/// Most methods instrumented at once (the entry besides).
pub const MAX_METHODS: usize = 16;
/// How long each round's session runs at least.
const ROUND: Duration = Duration::from_secs(2);
/// How long a round may run at most, for entries whose calls take seconds each.
const LONGEST_ROUND: Duration = Duration::from_secs(16);
/// Fewest entry calls a round's level times are taken from (a round with fewer is run again,
/// longer).
const MIN_ENTRY_CALLS: usize = 3;
/// Most rounds set aside in a row while the JVM compiles again what HotSpot discarded.
const RECOMPILING_ROUNDS: u32 = 3;
/// Entry calls a round should see end after its warm-up.
const CALLS_PER_ROUND: u32 = 4;
/// The rounds' profile interval near the entry.
const SAMPLE_INTERVAL: Duration = Duration::from_millis(10);
/// The rounds' shortest profile interval, deep in the path.
const SHORTEST_INTERVAL: Duration = Duration::from_millis(1);
/// The whole search's time when `-d` does not say.
const BUDGET: Duration = Duration::from_secs(60);
/// Rounds in a row that may see no entry call, or too few samples, before the search gives up.
const IDLE_ROUNDS: u32 = 3;

/// What `--auto` was given.
pub struct Auto<'a> {
    /// The JVM.
    pub pid: u32,
    /// The entry pattern.
    pub entry: &'a str,
    /// The whole search's time (`-d`).
    pub budget: Option<Duration>,
    /// JSON lines instead of text.
    pub json: bool,
    /// Where the flame graph goes (`-o`), if anywhere.
    pub output: &'a crate::commands::profile::OutputArgs,
    /// Attach timeout.
    pub timeout: Duration,
}

/// The search's state: the path (the entry first), the levels timed so far and the methods
/// jtap did not instrument when asked.
struct Search {
    path: Vec<Method>,
    timed: Vec<Option<Timed>>,
    refused: HashSet<Method>,
    entry_name: Option<String>,
    end: Option<End>,
    /// Where the samples inside the call the path ends in were taken most, and their share.
    top: Option<(String, f64)>,
    rounds: u32,
    truncated: u64,
    /// Whether the next round times the call sites of the path's last level, whose samples
    /// were taken in its own code.
    check_call_sites: bool,
    /// The first level found through call-site timing, which samples did not see.
    first_unsampled: Option<usize>,
    /// The median time of the last round's entry calls.
    entry_median_ns: u64,
    /// Rounds in a row in which no call ended, set aside or not: the calls outlast them.
    unended: u32,
    /// While the JVM compiles again what HotSpot discarded: the rounds set aside so far and
    /// the entry's median time in the last of them.
    recompiling: Option<(u32, u64)>,
    /// The entry's times are those of a round set aside.
    entry_set_aside: bool,
    /// Most methods of the window: [`MAX_METHODS`], fewer once a round's trees filled up
    /// before reaching the path's next level.
    window_limit: usize,
}

impl Search {
    /// Levels below the entry with their times.
    fn measured(&self) -> usize {
        self.timed
            .iter()
            .skip(1)
            .take_while(|t| t.is_some())
            .count()
    }

    /// How long the next round runs: long enough for [`CALLS_PER_ROUND`] entry calls of the
    /// last round's median length after the warm-up, at least [`ROUND`]; twice as long for each
    /// of the last `idle` rounds, those that taught nothing or saw no call end (an entry call
    /// that outlasts a round never ends in it: the probes only see calls that start after the
    /// instrumentation), at most [`LONGEST_ROUND`].
    fn round_length(&self, idle: u32) -> Duration {
        let calls = Duration::from_nanos(self.entry_median_ns) * CALLS_PER_ROUND;
        let length = (WARM_UP + calls).max(ROUND) * 2u32.pow(idle.min(4));
        length.min(LONGEST_ROUND)
    }

    /// Whether this round's times and samples are set aside because the JVM is compiling
    /// again: its class changes made HotSpot discard all compiled code, or a round after
    /// that one saw the entry's median time still fall by a fifth or more (or saw no entry
    /// call end). At most [`RECOMPILING_ROUNDS`] rounds are set aside.
    fn set_aside_while_recompiling(&mut self, trees: &[CallTree], discarded: bool) -> bool {
        if discarded {
            self.recompiling = Some((0, u64::MAX));
        }
        let Some((set_aside, last_median)) = self.recompiling else {
            return false;
        };
        let entry = path::time_levels(trees, &self.path[..1], &HashSet::new()).swap_remove(0);
        let median = (!entry.per_call.is_empty()).then(|| entry.quantile(0.5));
        let faster = median.is_none_or(|m| m.saturating_mul(5) < last_median.saturating_mul(4));
        if set_aside >= RECOMPILING_ROUNDS || !(discarded || faster) {
            self.recompiling = None;
            return false;
        }
        if let Some(median) = median {
            self.entry_median_ns = median;
        }
        // The entry's times of the last round set aside stand until a round is not: a search
        // interrupted before then shows them.
        if self.measured() == 0 && median.is_some() {
            self.timed[0] = Some(entry);
            self.entry_set_aside = true;
        }
        self.recompiling = Some((set_aside + 1, median.unwrap_or(u64::MAX)));
        eprintln!(
            "jtap: round {}: set aside: the JVM compiles again what HotSpot discarded ({} entry calls, median {})",
            self.rounds,
            trees.len(),
            median.map_or("-".to_string(), format_duration)
        );
        true
    }

    /// The next round's profile interval: [`SAMPLE_INTERVAL`] while the path's last timed level
    /// holds a quarter of the entry's time or more, shorter in proportion below that, so the
    /// samples below a deep level stay as many as near the entry; [`SHORTEST_INTERVAL`] at
    /// least.
    fn sample_interval(&self) -> Duration {
        let share = self.timed[self.measured()]
            .as_ref()
            .filter(|_| self.measured() > 0)
            .map_or(1.0, Timed::share);
        SAMPLE_INTERVAL
            .mul_f64((share / 0.25).min(1.0))
            .max(SHORTEST_INTERVAL)
    }

    /// The methods of the levels not timed yet, in path order: at most `window_limit`.
    fn window(&self) -> Vec<Method> {
        let mut window: Vec<Method> = Vec::new();
        for method in &self.path[1 + self.measured()..] {
            if window.len() == self.window_limit {
                break;
            }
            if !window.contains(method) {
                window.push(method.clone());
            }
        }
        window
    }
}

/// Runs the search and prints the path (and writes its flame graph).
pub fn run(auto: &Auto) -> anyhow::Result<i32> {
    MethodPattern::parse(auto.entry).map_err(crate::exit::usage)?;
    auto.output.check()?;
    let _ctrl_c = interrupt::session_takes();
    let started = Instant::now();
    let budget = auto.budget.unwrap_or(BUDGET);
    let wall_start = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    // An entry named exactly is known before any of its calls ends.
    let exact_entry = entry_literal(auto.entry);
    let mut search = Search {
        path: vec![Method::named(exact_entry.as_deref().unwrap_or(""))],
        timed: vec![None],
        refused: HashSet::new(),
        entry_name: exact_entry,
        end: None,
        top: None,
        rounds: 0,
        truncated: 0,
        check_call_sites: false,
        first_unsampled: None,
        entry_median_ns: 0,
        unended: 0,
        recompiling: None,
        entry_set_aside: false,
        window_limit: MAX_METHODS,
    };
    let mut idle = 0;
    while search.end.is_none() && !interrupt::requested() && started.elapsed() < budget {
        let left = budget.saturating_sub(started.elapsed());
        let length = search.round_length(idle.max(search.unended));
        let length = length.min(left).max(MIN_ROUND);
        let check_call_sites = search.check_call_sites;
        let plan = match check_call_sites {
            true => call_site_plan(&search)?,
            false => timing_plan(auto.entry, &search.window())?,
        };
        let ended = round(auto, plan, length, search.sample_interval())?;
        search.rounds += 1;
        if interrupt::requested() {
            break;
        }
        let trees = settled(ended.trees);
        search.unended = match trees.is_empty() {
            true => search.unended + 1,
            false => 0,
        };
        if search.set_aside_while_recompiling(&trees, ended.discarded_compiled_code) {
            continue;
        }
        let profile = ended.profile;
        let before = (search.measured(), search.refused.len(), search.path.len());
        let learnt = match check_call_sites {
            true => learn_call_sites(&mut search, &trees),
            false => learn(&mut search, &trees, profile.as_ref()),
        };
        let progress = search.rounds == 1
            || search.end.is_some()
            || search.check_call_sites != check_call_sites
            || before != (search.measured(), search.refused.len(), search.path.len());
        if !(learnt && progress) {
            idle += 1;
            if idle >= IDLE_ROUNDS {
                break;
            }
        } else {
            idle = 0;
        }
    }
    report(auto, &search, wall_start, started.elapsed())
}

/// `pkg.Class.method` when `pattern` names one class and one method exactly.
fn entry_literal(pattern: &str) -> Option<String> {
    let pattern = MethodPattern::parse(pattern).ok()?;
    if pattern.subtypes || pattern.annotated || pattern.method_annotated {
        return None;
    }
    let class = pattern.class.literal()?;
    let method = pattern.method.as_ref()?.literal()?;
    Some(format!("{class}.{method}"))
}

/// Entry calls that started this long after a round's first are timed with the JIT's code
/// for the instrumented methods rather than the interpreter's (each retransformation throws
/// their compiled code away).
const WARM_UP: Duration = Duration::from_millis(500);

/// The trees of calls that started [`WARM_UP`] after the round's first, when there are ten
/// or more; all of them otherwise.
fn settled(trees: Vec<CallTree>) -> Vec<CallTree> {
    let Some(first) = trees.iter().map(|t| t.time_ns).min() else {
        return trees;
    };
    let from = first + WARM_UP.as_nanos() as u64;
    let late = trees.iter().filter(|t| t.time_ns >= from).count();
    match late >= 10 {
        true => trees.into_iter().filter(|t| t.time_ns >= from).collect(),
        false => trees,
    }
}

/// A round shorter than this could not instrument, sample and restore.
const MIN_ROUND: Duration = Duration::from_millis(500);

/// What a round's trees gave the search.
enum Times {
    /// Too few entry calls ended to time the levels by, or to follow the samples.
    TooFew,
    /// The levels' times, if any entry call ended: the samples say what comes next.
    Taken,
    /// The path ended where the time spreads thin.
    PathEnded,
}

/// Takes the times of the window's levels from a round's trees (and the entry's name, when
/// the pattern did not give it), forgets the path below the first level they did not reach,
/// and ends it where a level holds too little of the entry's time.
fn take_times(search: &mut Search, trees: &[CallTree]) -> Times {
    if (1..MIN_ENTRY_CALLS).contains(&trees.len()) {
        eprintln!(
            "jtap: round {}: {} entry calls ended: too few to time the levels by",
            search.rounds,
            trees.len()
        );
        return Times::TooFew;
    }
    let Some(first) = trees.first() else {
        eprintln!("jtap: no call of the entry method ended in this round");
        // The samples inside calls still running guide the next round, when they can be told
        // by the entry's name.
        return match search.entry_name.is_none() || search.path.len() > 1 {
            true => Times::TooFew,
            false => Times::Taken,
        };
    };
    if search.entry_name.is_none() {
        let entry_name = first.root.name.split('(').next().unwrap_or_default();
        search.path[0] = Method::named(entry_name);
        search.entry_name = Some(entry_name.to_string());
    }
    let truncated = trees.iter().map(|t| t.truncated).sum::<u64>();
    search.truncated += truncated;
    let measured = search.measured();
    time_window(search, trees);
    if truncated > 0 && search.measured() == measured {
        // The window's methods are called so often that the trees filled up before they
        // reached the path's next level: fewer at a time.
        search.window_limit = (search.window_limit / 4).max(1);
    }
    match end_where_spread(search) {
        true => Times::PathEnded,
        false => Times::Taken,
    }
}

/// What a round taught: the times of the window's levels, the methods not instrumented, and
/// the path below the levels timed. False when it taught nothing (no entry call, or too few
/// samples to go on).
fn learn(search: &mut Search, trees: &[CallTree], profile: Option<&Profile>) -> bool {
    match take_times(search, trees) {
        Times::TooFew => return false,
        Times::PathEnded => return true,
        Times::Taken => {}
    }
    let Some(profile) = profile else {
        return false;
    };
    let entry = search.entry_name.clone().unwrap_or_default();
    let stacks = path::reduced_stacks(profile, &entry, &search.refused);
    turn_where_outweighed(search, &stacks);
    let measured = search.measured();
    let prefix: Vec<Level> = search.path[1..].iter().cloned().map(Level::Call).collect();
    let (more, end, samples) = path::propose(&stacks, &prefix);
    let deeper = more.len();
    for level in more {
        if let Level::Call(method) = level {
            search.path.push(method);
            search.timed.push(None);
        }
    }
    eprintln!(
        "jtap: round {}: {} entry calls, {} samples inside them; {} levels timed, {} more to time",
        search.rounds,
        trees.len(),
        samples,
        measured,
        deeper
    );
    // A level the samples did not see, found through call-site timing: so are its callees.
    let unsampled = search
        .first_unsampled
        .is_some_and(|_| samples < path::MIN_SAMPLES);
    match end {
        _ if deeper > 0 => true,
        End::SelfTime => {
            search.check_call_sites = true;
            true
        }
        End::TooFewSamples if unsampled => {
            search.check_call_sites = true;
            true
        }
        End::TooFewSamples | End::Spread => false,
        End::Terminal(name, why) => {
            let mut levels = prefix;
            levels.push(Level::Terminal(name.clone(), why));
            search.top = path::top_inside(profile, &entry, &search.refused, &levels);
            search.end = Some(End::Terminal(name, why));
            true
        }
    }
}

/// Forgets the path from its first level that this round's samples put well below a sibling
/// (see [`path::outweighed`]): earlier samples proposed it while the JVM ran colder or in
/// another phase. Levels found by timing call sites, which samples do not see, stay.
fn turn_where_outweighed(search: &mut Search, stacks: &[(Vec<Level>, u64)]) {
    let sampled = search.first_unsampled.unwrap_or(search.path.len());
    let prefix: Vec<Level> = search.path[1..sampled]
        .iter()
        .cloned()
        .map(Level::Call)
        .collect();
    let Some(depth) = path::outweighed(stacks, &prefix) else {
        return;
    };
    let keep = depth + 1;
    eprintln!(
        "jtap: round {}: the samples now put {} well below another callee of {}: the path turns there",
        search.rounds,
        search.path[keep].dotted(),
        search.path[keep - 1].dotted()
    );
    search.path.truncate(keep);
    search.timed.truncate(keep);
    if search.first_unsampled.is_some_and(|first| first >= keep) {
        search.first_unsampled = None;
    }
}

/// Ends the path above its first level that holds less than [`path::MIN_SHARE`] of the
/// entry's time (the samples picked it as the heaviest callee of its caller); true if so.
fn end_where_spread(search: &mut Search) -> bool {
    let measured = search.measured();
    let thin = (1..=measured).find(|&index| {
        let share = search.timed[index].as_ref().map_or(0.0, Timed::share);
        share < path::MIN_SHARE
    });
    let Some(thin) = thin else {
        return false;
    };
    search.path.truncate(thin);
    search.timed.truncate(thin);
    search.end = Some(End::Spread);
    true
}

/// What a round timing the call sites of the path's last level taught: the method of a call
/// site that outweighs the level's own code becomes the next level (every implementation of
/// it, until a round names the one called), else the path ends in the level's own code.
fn learn_call_sites(search: &mut Search, trees: &[CallTree]) -> bool {
    if trees.is_empty() {
        eprintln!("jtap: no call of the path's last level in this round");
        return false;
    }
    search.check_call_sites = false;
    let last = search.path.last().cloned();
    match path::heavier_call_site(trees) {
        Some(site) if search.refused.contains(&site) => {
            let why = "not instrumented (native, or a class jtap refuses)";
            search.end = Some(End::Terminal(site.dotted(), why));
        }
        Some(site) if Some(site.name.as_str()) != last.as_ref().map(|m| m.name.as_str()) => {
            eprintln!(
                "jtap: round {}: the call sites of {} hold more time than its own code: {} next (the JIT's inlining hides it from samples)",
                search.rounds,
                last.as_ref().map(Method::dotted).unwrap_or_default(),
                site.dotted()
            );
            search.first_unsampled.get_or_insert(search.path.len());
            search.path.push(site);
            search.timed.push(None);
        }
        _ => search.end = Some(End::SelfTime),
    }
    true
}

/// Keeps the times of the window's levels the round's trees reached, and forgets the path
/// below the first level they did not: a level whose caller ran and which the trees never
/// show was not instrumented (native, or refused by the agent).
fn time_window(search: &mut Search, trees: &[CallTree]) {
    let measured = search.measured();
    let window: HashSet<String> = search.window().iter().map(Method::dotted).collect();
    let timed = path::time_levels(trees, &search.path, &window);
    if std::mem::take(&mut search.entry_set_aside) {
        search.timed[0] = None;
    }
    merge_entry(&mut search.timed[0], &timed[0]);
    search.entry_median_ns = timed[0].quantile(0.5);
    for index in measured + 1..search.path.len() {
        let name = search.path[index].dotted();
        if !window.contains(&name) {
            break;
        }
        if timed[index].per_call.is_empty() {
            let caller_ran = index == 1 || !timed[index - 1].per_call.is_empty();
            if caller_ran && !path::appears(trees, &search.path[index]) {
                search.refused.insert(search.path[index].clone());
            }
            break;
        }
        if let Some(called) = &timed[index].implementation {
            search.path[index] = Method::named(called);
        }
        search.timed[index] = Some(timed[index].clone());
    }
    let measured = search.measured();
    search.path.truncate(measured + 1);
    search.timed.truncate(measured + 1);
}

/// Adds a round's entry times to those of earlier rounds.
fn merge_entry(into: &mut Option<Timed>, round: &Timed) {
    let all = into.get_or_insert_with(Timed::default);
    all.per_call.extend(&round.per_call);
    all.calls += round.calls;
    all.total_ns += round.total_ns;
    all.entry_ns += round.entry_ns;
    all.entry_calls += round.entry_calls;
}

/// The calltree plan timing the entry and the levels of `window`.
fn timing_plan(entry: &str, window: &[Method]) -> anyhow::Result<Plan> {
    let mut inner = vec![MethodPattern::parse(entry).map_err(crate::exit::usage)?];
    for method in window {
        inner.push(MethodPattern::parse(&method.pattern()).map_err(crate::exit::usage)?);
    }
    Ok(Plan {
        mode: Mode::Calltree,
        targets: vec![MethodPattern::parse(entry).map_err(crate::exit::usage)?],
        // The entry among the inner methods makes a tree of inner methods only (no call
        // sites); as the target, it is timed as the entry.
        inner,
        ..Plan::default()
    })
}

/// The calltree plan timing the call sites of the path's last level: the level as the target,
/// no inner methods.
fn call_site_plan(search: &Search) -> anyhow::Result<Plan> {
    let last = search.path.last().map(Method::pattern).unwrap_or_default();
    Ok(Plan {
        mode: Mode::Calltree,
        targets: vec![MethodPattern::parse(&last).map_err(crate::exit::usage)?],
        ..Plan::default()
    })
}

/// One round: a calltree session of `plan` for `length`, beside a wall profile of the JVM at
/// `interval`.
fn round(auto: &Auto, plan: Plan, length: Duration, interval: Duration) -> anyhow::Result<Round> {
    let options = Options {
        action: Some(Action::Start),
        event: Some(Event::Trace),
        duration: Some(length),
        trace: Some(plan),
        ..Options::default()
    };
    let profile_options = Options {
        action: Some(Action::Start),
        event: Some(Event::Wall),
        interval: Some(interval),
        ..Options::default()
    };
    let profile = jtap_client::Conversation::open(auto.pid, &profile_options, auto.timeout)?;
    let stopper = profile.stopper()?;
    let received = Mutex::new(Vec::new());
    let trees = Mutex::new(Vec::new());
    let discarded = AtomicBool::new(false);
    std::thread::scope(|scope| -> anyhow::Result<_> {
        let reader = scope.spawn(|| {
            profile.finish(
                &mut io::sink(),
                Some(&mut |frame| {
                    if let jtap_protocol::Frame::Profile(bytes) = frame {
                        received
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .push(bytes);
                    }
                    Ok(())
                }),
            )
        });
        let traced = (|| -> anyhow::Result<()> {
            let conversation = jtap_client::Conversation::open(auto.pid, &options, auto.timeout)?;
            let (why, asked) = jtap_client::supervise(
                conversation,
                options.duration,
                &|| false,
                &mut |_| {},
                |conversation| {
                    conversation.finish(
                        &mut io::sink(),
                        Some(&mut |frame| {
                            match &frame {
                                jtap_protocol::Frame::Record(bytes) => {
                                    if let Ok(Record::Tree(tree)) = Record::decode(bytes) {
                                        trees.lock().unwrap_or_else(|e| e.into_inner()).push(tree);
                                    }
                                }
                                jtap_protocol::Frame::Note(text)
                                    if text.starts_with(DISCARDED_ALL_COMPILED_CODE) =>
                                {
                                    discarded.store(true, Ordering::Relaxed);
                                }
                                _ => {}
                            }
                            Ok(())
                        }),
                    )
                },
            )?;
            if asked == Asked::Nothing && !why.as_bounded() {
                eprintln!("jtap: the session ended: {why}");
            }
            Ok(())
        })();
        // The profile ends with the round, whatever ended it.
        let _ = stopper.stop();
        let ended = reader
            .join()
            .map_err(|_| anyhow::anyhow!("the profile's reader panicked"))?;
        traced?;
        ended?;
        Ok(())
    })?;
    let received = received.into_inner().unwrap_or_else(|e| e.into_inner());
    let mut merged: Option<Profile> = None;
    for bytes in &received {
        let profile = jtap_protocol::wire::decode_profile(bytes)
            .map_err(|e| anyhow::anyhow!("the round's profile: {e}"))?;
        match &mut merged {
            Some(all) => all.merge(&profile),
            None => merged = Some(profile),
        }
    }
    Ok(Round {
        trees: trees.into_inner().unwrap_or_else(|e| e.into_inner()),
        profile: merged,
        discarded_compiled_code: discarded.into_inner(),
    })
}

/// What one round brought back.
struct Round {
    /// The trees of the entry calls that ended in it.
    trees: Vec<CallTree>,
    /// The wall profile of the JVM beside it.
    profile: Option<Profile>,
    /// Its class changes made HotSpot discard all the JVM's compiled code.
    discarded_compiled_code: bool,
}

/// The path as one chain of tree nodes: each level's mean time per entry call (its share of
/// the entry's time in the round that timed it, times the entry's mean), with its p50/p99
/// per entry call that reached it.
fn chain(search: &Search) -> Option<TreeNode> {
    let entry = search.timed.first()?.as_ref()?;
    let entry_mean = entry.total_ns / entry.entry_calls.max(1);
    let mut nodes: Vec<TreeNode> = Vec::new();
    for (method, timed) in search.path.iter().zip(&search.timed) {
        let Some(timed) = timed else { break };
        // Levels timed in different rounds: none above its caller.
        let total_ns = match nodes.last() {
            None => entry_mean,
            Some(caller) => caller
                .total_ns
                .min((timed.share() * entry_mean as f64).round() as u64),
        };
        nodes.push(TreeNode {
            name: method.dotted(),
            count: timed.calls,
            offset_ns: 0,
            total_ns,
            children: Vec::new(),
            per_entry_call: Some(Quantiles {
                p50_ns: timed.quantile(0.5),
                p99_ns: timed.quantile(0.99),
            }),
        });
    }
    let mut node = nodes.pop()?;
    while let Some(mut parent) = nodes.pop() {
        parent.children.push(node);
        node = parent;
    }
    Some(node)
}

/// Why the path ends, one line.
fn ending(search: &Search, interrupted: bool) -> String {
    let mut line = path_end(search, interrupted);
    let unsampled = search
        .first_unsampled
        .filter(|&i| i > 0 && i < search.path.len());
    if let Some(first) = unsampled {
        let _ = write!(
            line,
            " (samples put {} and below in the own code of {}, which the JIT inlined them into; their call sites' times found them)",
            search.path[first].dotted(),
            search.path[first - 1].dotted()
        );
    }
    line
}

/// Where the path ends and why.
fn path_end(search: &Search, interrupted: bool) -> String {
    let last = search.path.last().map(Method::dotted).unwrap_or_default();
    match &search.end {
        Some(End::SelfTime) => format!("the slow path ends in the own code of {last}"),
        Some(End::Spread) => format!(
            "the slow path ends in {last}: below it the time spreads over callees none of which holds {:.0} % of the entry's time",
            path::MIN_SHARE * 100.0
        ),
        Some(End::Terminal(name, why)) => {
            let mut line = format!("the slow path ends in {name}, called from {last}: {why}");
            if let Some((top, share)) = search.top.as_ref().filter(|(top, _)| top != name) {
                let _ = write!(line, "; its samples' top frame: {top} ({:.0}%)", share * 100.0);
            }
            line
        }
        _ if interrupted => "interrupted: the slow path so far".to_string(),
        _ => "the search ended before the path did (too few entry calls or samples, or -d): the slow path so far".to_string(),
    }
}

/// The method the path ends in: its last level, or the call below it jtap does not
/// instrument (None before the path ended).
fn end_of(search: &Search) -> Option<String> {
    match &search.end {
        Some(End::SelfTime | End::Spread) => search.path.last().map(Method::dotted),
        Some(End::Terminal(name, _)) => Some(name.clone()),
        _ => None,
    }
}

/// Where the path's time is spent most: its last level's own code, or the frame the samples
/// inside the call it ends in were taken in most (None before the path ended).
fn top_of(search: &Search) -> Option<String> {
    match &search.end {
        Some(End::SelfTime | End::Spread) => search.path.last().map(Method::dotted),
        Some(End::Terminal(name, _)) => {
            Some(search.top.as_ref().map_or(name, |(top, _)| top).clone())
        }
        _ => None,
    }
}

/// The path's levels for `--json`, the entry first: each method with its calls, share of
/// the entry's time (levels timed in different rounds: none above its caller's) and p50/p99
/// per entry call that reached it.
fn levels_json(search: &Search) -> serde_json::Value {
    let levels = search.path.iter().zip(&search.timed);
    let timed = levels.map_while(|(method, timed)| Some((method, timed.as_ref()?)));
    let mut caller_share = 1.0f64;
    timed
        .map(|(method, timed)| {
            caller_share = caller_share.min(timed.share());
            serde_json::json!({
                "method": method.dotted(),
                "calls": timed.calls,
                "share": caller_share,
                "p50_ns": timed.quantile(0.5),
                "p99_ns": timed.quantile(0.99),
            })
        })
        .collect()
}

/// Prints the path and writes its flame graph.
fn report(auto: &Auto, search: &Search, wall_start: u64, took: Duration) -> anyhow::Result<i32> {
    let Some(root) = chain(search) else {
        eprintln!(
            "jtap: no call of {} finished in {:.1} s: no slow path to show",
            auto.entry,
            took.as_secs_f64()
        );
        return Ok(1);
    };
    let entry_calls = search.timed[0].as_ref().map_or(0, |t| t.entry_calls);
    let tree = CallTree {
        time_ns: wall_start,
        thread: format!(
            "slow path: {entry_calls} entry calls, {} rounds, {:.1} s",
            search.rounds,
            took.as_secs_f64()
        ),
        truncated: search.truncated,
        unfinished: false,
        label: None,
        root,
    };
    let ending = ending(search, interrupt::requested());
    let record = Record::Tree(tree);
    let text = match auto.json {
        true => format!(
            "{}\n{}",
            record.to_json_lines(),
            serde_json::json!({
                "end": ending,
                "levels": search.measured() + 1,
                "path": levels_json(search),
                "at": end_of(search),
                "top": top_of(search),
            })
        ),
        false => format!("{}\n{ending}", record.to_text()),
    };
    let mut out = io::stdout().lock();
    // A reader that went away (`| head`) ends the output, not jtap.
    if writeln!(out, "{text}").and_then(|_| out.flush()).is_err() {
        return Ok(0);
    }
    drop(out);
    if !auto.output.writes_nothing() {
        let Record::Tree(tree) = &record else {
            unreachable!()
        };
        super::super::profile::write_profiles(auto.output, &[flame(tree, search)])?;
    }
    Ok(0)
}

/// The path's levels as a profile of wall time per entry call (a "sample" a microsecond):
/// each level's own time at its stack, and the call it ends in above the last.
fn flame(tree: &CallTree, search: &Search) -> Profile {
    let mut profile = Profile::new(Metadata {
        event: "wall".into(),
        engine: "calltree".into(),
        interval: 1_000,
        weight_unit: "nanoseconds".into(),
        start_time_ns: tree.time_ns,
        ..Metadata::default()
    });
    let mut stack: Vec<Frame> = Vec::new();
    let mut node = Some(&tree.root);
    let mut levels = search.path.iter();
    while let (Some(n), Some(method)) = (node, levels.next()) {
        stack.push(Frame::java(
            method.dotted(),
            FrameKind::Compiled,
            method.descriptor.clone(),
            None,
        ));
        let own = n.self_ns();
        let last = n.children.is_empty();
        if let (true, Some(End::Terminal(name, why))) = (last, &search.end) {
            let kind = match *why == "native code" {
                true => FrameKind::Native,
                false => FrameKind::Interpreted,
            };
            let mut below = stack.clone();
            below.push(Frame::new(name.clone(), kind));
            profile.add_frame_counts(&below, StackCounts::sampled(own / 1_000, own));
        } else if own >= 1_000 {
            profile.add_frame_counts(&stack, StackCounts::sampled(own / 1_000, own));
        }
        node = n.children.first();
    }
    profile
}
