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
//! internals), named. Each round's samples also check the levels found so far: one that a
//! sibling now clearly outweighs ([`path::outweighed`]: the JVM ran colder, or in another
//! phase, when it was proposed) is dropped with the levels below it.
//!
//! [`mod@round`] runs one round, [`mod@report`] prints the path and writes its flame graph.

use std::collections::HashSet;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use jtap_client::interrupt;
use jtap_profile::Profile;
use jtap_protocol::records::trace::format_duration;
use jtap_protocol::records::CallTree;
use jtap_protocol::trace::MethodPattern;

mod path;
mod report;
mod round;

use path::{End, Level, Method, Timed};
use round::{call_site_plan, round, timing_plan};

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
            true => call_site_plan(search.path.last().unwrap_or(&search.path[0]))?,
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
    report::report(auto, &search, wall_start, started.elapsed())
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
