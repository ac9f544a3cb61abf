//! What `calltree --auto` reasons with: the stacks sampled inside entry calls, reduced to the
//! levels jtap could instrument, which propose the heaviest path; and the call trees of a
//! round, which time the path's levels exactly.
//!
//! A sampled stack names the methods as the JVM resolved them (an interface call's
//! implementation, a lambda's body, the target of a reflective or method-handle call), which
//! the call sites of the bytecode cannot. The levels of the path are those methods; the
//! frames of the JVM's dispatch machinery in between (hidden lambda and method-handle
//! classes, `java.lang.invoke`, reflection) are passed through, since jtap cannot
//! instrument them and the time goes on below them.
//!
//! Recursion is folded: a method met again below itself (a tree visitor, a parser, javac's
//! attribution) continues the stack at its first call, as if the calls in between had
//! returned. The heaviest path then follows the work summed over every depth of the
//! recursion, instead of splitting it depth by depth until too few samples are left; the
//! trees are followed the same way when they time the levels.

use std::collections::HashSet;

use jtap_profile::{Frame, FrameKind, Profile};
use jtap_protocol::records::{CallTree, TreeNode};

/// A Java method as samples name it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Method {
    /// `pkg.Class`.
    pub class: String,
    /// The method's name.
    pub name: String,
    /// Its descriptor, when the sample had it.
    pub descriptor: Option<String>,
    /// Whether the level stands for every implementation of this method: a call site's
    /// declared method, until a round's trees name the one the JVM called.
    pub subtypes: bool,
}

impl Method {
    fn of(frame: &Frame) -> Option<Method> {
        Some(Method {
            class: frame.class()?.to_string(),
            name: frame.method()?.to_string(),
            descriptor: frame.signature.clone(),
            subtypes: false,
        })
    }

    /// The method a tree node or a frame names, `pkg.Class.method`.
    pub fn named(dotted: &str) -> Method {
        let (class, name) = dotted.rsplit_once('.').unwrap_or(("", dotted));
        Method {
            class: class.into(),
            name: name.into(),
            descriptor: None,
            subtypes: false,
        }
    }

    /// Whether a tree node named `dotted` (`pkg.Class.method`) is a call of this level: of
    /// this method, or of any implementation of it for a `subtypes` level.
    fn calls(&self, dotted: &str) -> bool {
        match self.subtypes {
            true => dotted
                .rsplit_once('.')
                .is_some_and(|(_, name)| name == self.name),
            false => {
                let method = dotted.strip_prefix(self.class.as_str());
                method.and_then(|m| m.strip_prefix('.')) == Some(self.name.as_str())
            }
        }
    }

    /// `pkg.Class.method`, as trees and flame graphs show it.
    pub fn dotted(&self) -> String {
        format!("{}.{}", self.class, self.name)
    }

    /// The method pattern selecting this method and its overloads (a level's time is that of
    /// the outermost calls of any of them under the level above).
    pub fn pattern(&self) -> String {
        let subtypes = if self.subtypes { "+" } else { "" };
        format!("{subtypes}{}::{}", self.class, self.name)
    }
}

/// One level below the entry in a reduced stack.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Level {
    /// A method jtap may instrument.
    Call(Method),
    /// Where a path must end: code jtap does not instrument, and why.
    Terminal(String, &'static str),
}

/// Why a path ends.
#[derive(Debug, Clone, PartialEq)]
pub enum End {
    /// In its last level's own code.
    SelfTime,
    /// In a call jtap does not instrument.
    Terminal(String, &'static str),
    /// Too few samples reached its last level to say.
    TooFewSamples,
    /// At a level whose heaviest callee holds less than [`MIN_SHARE`] of the entry's time.
    Spread,
}

/// The least share of the entry's time a level holds to be on the path: below it the time is
/// spread too thin for one callee to matter.
pub const MIN_SHARE: f64 = 0.01;

/// Samples below a level before the path may go deeper.
pub const MIN_SAMPLES: u64 = 4;

/// Java frames of the JVM's dispatch machinery, passed through on the way to the method
/// called: hidden classes (lambdas, method-handle forms), method handles and reflection.
fn dispatch(frame: &Frame) -> bool {
    let name = &frame.name;
    name.contains("$$Lambda")
        || name.contains("/0x")
        || name.contains(".0x")
        || name.contains("LambdaForm$")
        || [
            "java.lang.invoke.",
            "java.lang.reflect.",
            "jdk.internal.reflect.",
            "sun.reflect.",
            "com.sun.proxy.",
            "jdk.proxy",
        ]
        .iter()
        .any(|p| name.starts_with(p))
        || name.contains(".$Proxy")
}

/// Whether a frame is jtap's own: the probes the search put in (their runtime class, the
/// agent's library). Samples taken there measure jtap, not the program.
fn own_probe(frame: &Frame) -> bool {
    frame.name.starts_with("jtap.runtime.") || frame.name.starts_with("libjtap_agent.so")
}

/// The levels of one stack (root first) below its outermost `entry` frame, recursion folded,
/// or None when the stack holds no entry frame, or was taken inside jtap's own probes. Native
/// code and methods in `refused` (jtap did not instrument them when asked) end it as a
/// terminal level; the dispatch machinery ends it so only when no Java method follows; the
/// JVM's own code ends it without a level.
pub fn reduce(frames: &[&Frame], entry: &str, refused: &HashSet<Method>) -> Option<Vec<Level>> {
    let start = frames
        .iter()
        .position(|f| f.kind.is_java() && f.name == entry)?;
    if frames[start..].iter().any(|f| own_probe(f)) {
        return None;
    }
    let mut levels = Vec::new();
    let mut dispatching: Option<&Frame> = None;
    for frame in &frames[start + 1..] {
        // The JVM's own code below a Java method (a safepoint, an allocation's slow path, a
        // lock's wait) works for that method: its own time.
        if frame.kind == FrameKind::Cpp {
            break;
        }
        if matches!(frame.kind, FrameKind::Native | FrameKind::Kernel) {
            levels.push(Level::Terminal(frame.name.clone(), "native code"));
            return Some(levels);
        }
        // Pseudo-frames: a thread's state (`[running]`), an allocated class.
        if !frame.kind.is_java() {
            continue;
        }
        if dispatch(frame) {
            dispatching.get_or_insert(frame);
            continue;
        }
        dispatching = None;
        if frame.name == entry {
            levels.clear();
            continue;
        }
        let Some(method) = Method::of(frame) else {
            continue;
        };
        let again = |level: &Level| matches!(level, Level::Call(m) if *m == method);
        if let Some(first) = levels.iter().position(again) {
            levels.truncate(first + 1);
            continue;
        }
        if refused.contains(&method) {
            levels.push(Level::Terminal(
                method.dotted(),
                "not instrumented (native, or a class jtap refuses)",
            ));
            return Some(levels);
        }
        levels.push(Level::Call(method));
    }
    if let Some(frame) = dispatching {
        levels.push(Level::Terminal(
            frame.name.clone(),
            "JDK internals jtap does not instrument",
        ));
    }
    Some(levels)
}

/// The reduced stacks of a profile's samples inside entry calls, with their sample counts.
pub fn reduced_stacks(
    profile: &Profile,
    entry: &str,
    refused: &HashSet<Method>,
) -> Vec<(Vec<Level>, u64)> {
    profile
        .stacks()
        .into_iter()
        .filter_map(|(ids, counts)| {
            let frames: Vec<&Frame> = ids.iter().map(|&id| profile.frame(id)).collect();
            reduce(&frames, entry, refused).map(|levels| (levels, counts.samples))
        })
        .collect()
}

/// The frame the samples ending in `levels` (a path and the terminal level it ends in) were
/// taken in most (their top frame), with its share of them: what a profile of the same calls
/// puts on top, inside the call jtap does not instrument.
pub fn top_inside(
    profile: &Profile,
    entry: &str,
    refused: &HashSet<Method>,
    levels: &[Level],
) -> Option<(String, f64)> {
    let mut tops: Vec<(&str, u64)> = Vec::new();
    let mut all = 0;
    for (ids, counts) in profile.stacks() {
        let frames: Vec<&Frame> = ids.iter().map(|&id| profile.frame(id)).collect();
        if reduce(&frames, entry, refused).as_deref() != Some(levels) {
            continue;
        }
        let Some(top) = frames.iter().rev().find(|f| {
            f.kind.is_java()
                || matches!(
                    f.kind,
                    FrameKind::Native | FrameKind::Cpp | FrameKind::Kernel
                )
        }) else {
            continue;
        };
        all += counts.samples;
        match tops.iter_mut().find(|(name, _)| *name == top.name) {
            Some((_, n)) => *n += counts.samples,
            None => tops.push((&top.name, counts.samples)),
        }
    }
    let (name, n) = tops.into_iter().max_by_key(|&(_, n)| n)?;
    Some((name.to_string(), n as f64 / all.max(1) as f64))
}

/// The heaviest path below `prefix`: from the samples whose reduced stacks begin with it, level
/// by level the heaviest next level, until the samples ending at a level (its own code)
/// outweigh its heaviest callee, or a terminal level. Returns the levels after `prefix`, why
/// the path ends, and the samples under `prefix`.
pub fn propose(stacks: &[(Vec<Level>, u64)], prefix: &[Level]) -> (Vec<Level>, End, u64) {
    let mut path: Vec<Level> = prefix.to_vec();
    let mut under: Vec<&(Vec<Level>, u64)> = stacks
        .iter()
        .filter(|(levels, _)| levels.starts_with(prefix))
        .collect();
    let total = under.iter().map(|(_, n)| n).sum();
    loop {
        let depth = path.len();
        let here: u64 = under.iter().map(|(_, n)| n).sum();
        if here < MIN_SAMPLES {
            return (path.split_off(prefix.len()), End::TooFewSamples, total);
        }
        let own: u64 = under
            .iter()
            .filter(|(levels, _)| levels.len() == depth)
            .map(|(_, n)| n)
            .sum();
        let mut next: Vec<(&Level, u64)> = Vec::new();
        for (levels, n) in under.iter().filter(|(l, _)| l.len() > depth) {
            match next.iter_mut().find(|(level, _)| *level == &levels[depth]) {
                Some((_, sum)) => *sum += n,
                None => next.push((&levels[depth], *n)),
            }
        }
        let Some((heaviest, weight)) = next.into_iter().max_by_key(|&(_, n)| n) else {
            return (path.split_off(prefix.len()), End::SelfTime, total);
        };
        if own >= weight {
            return (path.split_off(prefix.len()), End::SelfTime, total);
        }
        let heaviest = heaviest.clone();
        if let Level::Terminal(name, why) = &heaviest {
            let end = End::Terminal(name.clone(), why);
            return (path.split_off(prefix.len()), end, total);
        }
        under.retain(|(levels, _)| levels.len() > depth && levels[depth] == heaviest);
        path.push(heaviest);
    }
}

/// The first level of `path` (a prefix of reduced stacks) that a sibling outweighs in
/// `stacks`: among the samples through the levels above it, another next level (another
/// callee, or native code) has more than twice its samples, by three standard deviations of
/// their difference or more. Samples taken while the JVM ran colder (or ran another phase)
/// proposed it; these say the time is elsewhere now. Probes only slow the levels they time,
/// so they never make a sibling outweigh the path.
pub fn outweighed(stacks: &[(Vec<Level>, u64)], path: &[Level]) -> Option<usize> {
    (0..path.len()).find(|&depth| {
        let mut next: Vec<(&Level, u64)> = Vec::new();
        for (levels, n) in stacks
            .iter()
            .filter(|(l, _)| l.len() > depth && l.starts_with(&path[..depth]))
        {
            match next.iter_mut().find(|(level, _)| *level == &levels[depth]) {
                Some((_, sum)) => *sum += n,
                None => next.push((&levels[depth], *n)),
            }
        }
        let on_path = next
            .iter()
            .find(|(level, _)| *level == &path[depth])
            .map_or(0, |&(_, n)| n);
        let heaviest = next.iter().map(|&(_, n)| n).max().unwrap_or(0);
        let (a, b) = (on_path as f64, heaviest as f64);
        b > 2.0 * a && b - a >= 3.0 * (a + b).sqrt()
    })
}

/// One level's time in a round's entry calls, as the probes measured it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Timed {
    /// Its time in each entry call that reached it.
    pub per_call: Vec<u64>,
    /// Calls of the method at this level, all entry calls together.
    pub calls: u64,
    /// Its time over all the round's entry calls.
    pub total_ns: u64,
    /// The entry calls' time in the round.
    pub entry_ns: u64,
    /// Entry calls in the round.
    pub entry_calls: u64,
    /// For a `subtypes` level, the implementation (`pkg.Class.method`) the calls went to most:
    /// the one timed.
    pub implementation: Option<String>,
}

impl Timed {
    /// Its share of the entry's time.
    pub fn share(&self) -> f64 {
        match self.entry_ns {
            0 => 0.0,
            all => self.total_ns as f64 / all as f64,
        }
    }

    /// The `q` quantile (0..=1) of its time per entry call that reached it.
    pub fn quantile(&self, q: f64) -> u64 {
        let mut sorted = self.per_call.clone();
        sorted.sort_unstable();
        match sorted.len() {
            0 => 0,
            n => sorted[((n - 1) as f64 * q).round() as usize],
        }
    }
}

/// A tree node's method, `Class.method` (overloads show their parameter types after it).
fn base_name(node: &TreeNode) -> &str {
    node.name.split('(').next().unwrap_or(&node.name)
}

/// Times the levels of `path` whose methods were instrumented (`instrumented`, by
/// `Class.method`) in a round's trees: each tree is followed down those levels, through every
/// node of the level's method under the level above (overloads and several call chains
/// together); a level a tree does not reach has no time in that entry call. A `subtypes`
/// level is timed in the implementation its calls went to most, all trees together. Returns
/// one [`Timed`] per level of `path` (the entry first), default for levels not instrumented.
pub fn time_levels(
    trees: &[CallTree],
    path: &[Method],
    instrumented: &HashSet<String>,
) -> Vec<Timed> {
    let mut timed = vec![Timed::default(); path.len()];
    let levels: Vec<Method> = path
        .iter()
        .enumerate()
        .map(|(index, method)| match method.subtypes {
            true => {
                let called = implementation(trees, &path[..=index], instrumented);
                timed[index].implementation = called.clone();
                called
                    .as_deref()
                    .map_or_else(|| method.clone(), Method::named)
            }
            false => method.clone(),
        })
        .collect();
    let entry_ns: u64 = trees.iter().map(|t| t.root.total_ns).sum();
    for tree in trees {
        timed[0].per_call.push(tree.root.total_ns);
        timed[0].calls += tree.root.count;
        let mut frontier = vec![&tree.root];
        for (index, (method, level)) in path.iter().zip(&levels).enumerate().skip(1) {
            if !instrumented.contains(&method.dotted()) {
                continue;
            }
            let next = calls_below(&frontier, level);
            if next.is_empty() {
                break;
            }
            let total: u64 = next.iter().map(|n| n.total_ns).sum();
            timed[index].per_call.push(total);
            timed[index].calls += next.iter().map(|n| n.count).sum::<u64>();
            timed[index].total_ns += total;
            frontier = next;
        }
    }
    timed[0].total_ns = entry_ns;
    for t in &mut timed {
        t.entry_ns = entry_ns;
        t.entry_calls = trees.len() as u64;
    }
    timed
}

/// The nodes of calls of `level` below `frontier`, recursion folded as in [`reduce`]: those
/// whose caller is a frontier node or, deeper in its subtree, a call of the frontier's method
/// again (the calls in between fold away). The outermost only, so no time counts twice.
fn calls_below<'a>(frontier: &[&'a TreeNode], level: &Method) -> Vec<&'a TreeNode> {
    fn collect<'a>(node: &'a TreeNode, caller: &str, level: &Method, out: &mut Vec<&'a TreeNode>) {
        let from_caller = base_name(node) == caller;
        for child in &node.children {
            if from_caller && level.calls(base_name(child)) {
                out.push(child);
            } else {
                collect(child, caller, level, out);
            }
        }
    }
    let mut calls = Vec::new();
    for node in frontier {
        collect(node, base_name(node), level, &mut calls);
    }
    calls
}

/// The implementation (`pkg.Class.method`) of the last level of `path`, a `subtypes` one, that
/// the trees' calls of it spent the most time in.
fn implementation(
    trees: &[CallTree],
    path: &[Method],
    instrumented: &HashSet<String>,
) -> Option<String> {
    let (level, above) = path.split_last()?;
    let mut called: Vec<(&str, u64)> = Vec::new();
    for tree in trees {
        let mut frontier = vec![&tree.root];
        for method in above.iter().skip(1) {
            if instrumented.contains(&method.dotted()) {
                frontier = calls_below(&frontier, method);
            }
        }
        for node in calls_below(&frontier, level) {
            match called.iter_mut().find(|(name, _)| *name == base_name(node)) {
                Some((_, total)) => *total += node.total_ns,
                None => called.push((base_name(node), node.total_ns)),
            }
        }
    }
    let (name, _) = called.into_iter().max_by_key(|&(_, total)| total)?;
    Some(name.to_string())
}

/// What timing one call site costs the call it times (its two probes), at most: a site's
/// time beyond this per call is the callee's.
const SITE_PROBES_NS: u64 = 250;

/// The method whose call sites the trees of `level`'s calls (a calltree session with `level` as
/// its target) show taking more time than `level`'s own code: the declared method of its
/// heaviest call site (an interface's, for an interface call), its time counted without what
/// its probes cost (a cheap callee called a hundred times a call would otherwise look heavy).
/// None when its own code outweighs every call site, or no call of it finished.
pub fn heavier_call_site(trees: &[CallTree]) -> Option<Method> {
    let own: u64 = trees.iter().map(|t| t.root.self_ns()).sum();
    let mut sites: Vec<(&str, u64)> = Vec::new();
    for node in trees.iter().flat_map(|t| t.root.children.iter()) {
        let callee = node.total_ns.saturating_sub(node.count * SITE_PROBES_NS);
        match sites.iter_mut().find(|(name, _)| *name == base_name(node)) {
            Some((_, total)) => *total += callee,
            None => sites.push((base_name(node), callee)),
        }
    }
    let (name, total) = sites.into_iter().max_by_key(|&(_, total)| total)?;
    (total > own).then(|| Method {
        subtypes: true,
        ..Method::named(name)
    })
}

/// Whether any node of the trees is a call of `method`.
pub fn appears(trees: &[CallTree], method: &Method) -> bool {
    fn inside(node: &TreeNode, method: &Method) -> bool {
        method.calls(base_name(node)) || node.children.iter().any(|c| inside(c, method))
    }
    trees.iter().any(|t| inside(&t.root, method))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn java(name: &str) -> Frame {
        Frame::java(name, FrameKind::Compiled, Some("()V".into()), None)
    }

    fn call(name: &str) -> Level {
        let (class, method) = name.rsplit_once('.').unwrap();
        Level::Call(Method {
            class: class.into(),
            name: method.into(),
            descriptor: Some("()V".into()),
            subtypes: false,
        })
    }

    #[test]
    fn a_stack_is_reduced_below_its_entry_through_the_dispatch_machinery() {
        let frames = [
            java("java.lang.Thread.run"),
            java("app.Api.handle"),
            java("app.Impl.work"),
            java("app.Api$$Lambda$14/0x0000000800c01200.apply"),
            java("java.lang.invoke.LambdaForm$MH/0x1.invoke"),
            java("app.Api.lambda$handle$0"),
            Frame::new("libc.so.6!nanosleep", FrameKind::Native),
            Frame::new("[sleeping]", FrameKind::Error),
            Frame::new("libjvm.so!SafepointSynchronize::block", FrameKind::Cpp),
            Frame::new("kernel!do_nanosleep", FrameKind::Kernel),
        ];
        let refs: Vec<&Frame> = frames.iter().collect();
        let levels = reduce(&refs, "app.Api.handle", &HashSet::new()).unwrap();
        let state = [
            java("app.Api.handle"),
            Frame::new("[running]", FrameKind::Error),
        ];
        let own: Vec<&Frame> = state.iter().collect();
        assert_eq!(
            reduce(&own, "app.Api.handle", &HashSet::new()),
            Some(vec![])
        );
        assert_eq!(
            levels,
            vec![
                call("app.Impl.work"),
                call("app.Api.lambda$handle$0"),
                Level::Terminal("libc.so.6!nanosleep".into(), "native code"),
            ]
        );
        assert!(reduce(&refs, "app.Other.run", &HashSet::new()).is_none());
        let refused = HashSet::from([Method::of(&frames[2]).unwrap()]);
        let cut = reduce(&refs, "app.Api.handle", &refused).unwrap();
        assert!(matches!(&cut[..], [Level::Terminal(name, _)] if name == "app.Impl.work"));
        let reflective = [
            java("app.Api.handle"),
            java("jdk.internal.reflect.NativeMethodAccessorImpl.invoke0"),
        ];
        let refs: Vec<&Frame> = reflective.iter().collect();
        let levels = reduce(&refs, "app.Api.handle", &HashSet::new()).unwrap();
        assert!(matches!(&levels[..], [Level::Terminal(_, why)] if why.contains("JDK internals")));
        // Inside jtap's own probes: the sample measures jtap.
        let probed = [
            java("app.Api.handle"),
            java("jtap.runtime.Probes.enter"),
            Frame::new("libjtap_agent.so!probe_enter", FrameKind::Native),
        ];
        let refs: Vec<&Frame> = probed.iter().collect();
        assert!(reduce(&refs, "app.Api.handle", &HashSet::new()).is_none());
    }

    #[test]
    fn recursion_folds_back_to_the_first_call_of_a_method() {
        // A visitor: attrib → accept → visit → attrib → accept → visit → resolve.
        let frames = [
            java("p.Main.run"),
            java("p.Attr.attrib"),
            java("p.Tree.accept"),
            java("p.Attr.visit"),
            java("p.Attr.attrib"),
            java("p.Tree.accept"),
            java("p.Main.run"),
            java("p.Attr.attrib"),
            java("p.Ops.resolve"),
        ];
        let refs: Vec<&Frame> = frames.iter().collect();
        assert_eq!(
            reduce(&refs, "p.Main.run", &HashSet::new()).unwrap(),
            vec![call("p.Attr.attrib"), call("p.Ops.resolve")]
        );
    }

    #[test]
    fn the_path_follows_the_heaviest_level_until_own_code_outweighs_it() {
        let (a, b, c, d) = (call("p.A.a"), call("p.B.b"), call("p.C.c"), call("p.D.d"));
        let stacks = vec![
            (vec![a.clone(), b.clone()], 30),
            (vec![a.clone(), c.clone()], 10),
            (vec![a.clone()], 5),
            (vec![a.clone(), b.clone(), d.clone()], 8),
            (vec![d.clone()], 20),
        ];
        let (path, end, total) = propose(&stacks, &[]);
        assert_eq!(path, vec![a.clone(), b.clone()]);
        assert_eq!(end, End::SelfTime);
        assert_eq!(total, 73);
        let (path, end, _) = propose(&stacks, &[a.clone(), c.clone()]);
        assert!(path.is_empty());
        assert_eq!(end, End::SelfTime);
        let native = Level::Terminal("libz.so!inflate".into(), "native code");
        let stacks = vec![(vec![a.clone(), native.clone()], 9), (vec![a.clone()], 1)];
        let (path, end, _) = propose(&stacks, &[]);
        assert_eq!(path, vec![a]);
        assert_eq!(end, End::Terminal("libz.so!inflate".into(), "native code"));
        let (_, end, _) = propose(&stacks[1..], &[]);
        assert_eq!(end, End::TooFewSamples);
    }

    #[test]
    fn a_level_is_outweighed_when_a_sibling_holds_over_twice_its_samples_beyond_noise() {
        let (a, b, c, d) = (call("p.A.a"), call("p.B.b"), call("p.C.c"), call("p.D.d"));
        let stacks = vec![
            (vec![a.clone(), b.clone()], 20),
            (vec![a.clone(), c.clone(), d.clone()], 60),
            (vec![d.clone()], 5),
        ];
        assert_eq!(outweighed(&stacks, &[a.clone(), b.clone()]), Some(1));
        assert_eq!(
            outweighed(&stacks, &[a.clone(), c.clone(), d.clone()]),
            None
        );
        assert_eq!(outweighed(&stacks, std::slice::from_ref(&d)), Some(0));
        // Twice as many, but within the noise of so few samples.
        let few = vec![
            (vec![a.clone(), b.clone()], 3),
            (vec![a.clone(), c.clone()], 7),
        ];
        assert_eq!(outweighed(&few, &[a.clone(), b.clone()]), None);
        // Close siblings never turn the path.
        let close = vec![(vec![a.clone(), b.clone()], 400), (vec![a.clone(), c], 700)];
        assert_eq!(outweighed(&close, &[a, b]), None);
    }

    /// A call tree of one entry call, `root`.
    fn tree(root: TreeNode) -> CallTree {
        CallTree {
            time_ns: 0,
            thread: "t".into(),
            truncated: 0,
            unfinished: false,
            label: None,
            root,
        }
    }

    fn node(name: &str, total_ns: u64, children: Vec<TreeNode>) -> TreeNode {
        TreeNode {
            name: name.into(),
            count: 1,
            offset_ns: 0,
            total_ns,
            children,
            per_entry_call: None,
        }
    }

    #[test]
    fn levels_are_timed_down_the_instrumented_ones() {
        let m = |name: &str| match call(name) {
            Level::Call(m) => m,
            Level::Terminal(..) => unreachable!(),
        };
        let path = [m("p.E.e"), m("p.A.a"), m("p.B.b"), m("p.C.c")];
        let trees = [
            tree(node("p.E.e", 100, vec![node("p.C.c", 60, vec![])])),
            tree(node("p.E.e", 300, vec![node("p.X.x", 10, vec![])])),
        ];
        let instrumented = HashSet::from([path[0].dotted(), path[3].dotted()]);
        let timed = time_levels(&trees, &path, &instrumented);
        assert_eq!(timed[0].total_ns, 400);
        assert_eq!(timed[0].per_call, vec![100, 300]);
        assert_eq!(timed[3].per_call, vec![60]);
        assert!((timed[3].share() - 0.15).abs() < 1e-9);
        assert_eq!(timed[3].quantile(0.99), 60);
        assert!(timed[1].per_call.is_empty());
        assert!(
            appears(&trees, &Method::named("p.X.x")) && !appears(&trees, &Method::named("p.B.b"))
        );
    }

    #[test]
    fn a_level_sums_the_calls_of_its_method_under_every_node_above() {
        let overloads = tree(node(
            "p.E.e",
            100,
            vec![
                node("p.A.a(int)", 30, vec![node("p.B.b", 20, vec![])]),
                node("p.A.a(long)", 50, vec![node("p.B.b", 40, vec![])]),
            ],
        ));
        let m = |name: &str| match call(name) {
            Level::Call(m) => m,
            Level::Terminal(..) => unreachable!(),
        };
        let path = [m("p.E.e"), m("p.A.a"), m("p.B.b")];
        let all = path.iter().map(Method::dotted).collect();
        let timed = time_levels(&[overloads], &path, &all);
        assert_eq!(timed[1].per_call, vec![80]);
        assert_eq!(timed[2].per_call, vec![60]);
        assert_eq!(timed[2].calls, 2);
    }

    #[test]
    fn a_level_below_a_recursion_is_timed_once_at_every_depth() {
        // e → a → x → a → b(20) → a → b(5), and e → a → x(30) → b(7): the b under a's
        // re-entries count, the one nested in another b and the one under x do not.
        let nested = node("p.B.b", 5, vec![]);
        let inner = node("p.B.b", 20, vec![node("p.A.a", 8, vec![nested])]);
        let recursion = node("p.A.a", 25, vec![inner]);
        let root = node(
            "p.E.e",
            100,
            vec![node(
                "p.A.a",
                90,
                vec![node("p.X.x", 60, vec![recursion, node("p.B.b", 7, vec![])])],
            )],
        );
        let path = [
            Method::named("p.E.e"),
            Method::named("p.A.a"),
            Method::named("p.B.b"),
        ];
        let all = path.iter().map(Method::dotted).collect();
        let timed = time_levels(&[tree(root)], &path, &all);
        assert_eq!(timed[1].per_call, vec![90]);
        assert_eq!(timed[2].per_call, vec![20]);
        assert_eq!(timed[2].calls, 1);
    }

    #[test]
    fn an_interface_level_is_timed_in_the_implementation_called_most() {
        let entry = |children| tree(node("p.E.e", 100, children));
        let trees = [
            entry(vec![
                node("p.Slow.decode", 90, vec![]),
                node("p.Fast.decode", 5, vec![]),
            ]),
            entry(vec![node("p.Fast.decode", 4, vec![])]),
        ];
        let codec = Method {
            subtypes: true,
            ..Method::named("p.Codec.decode")
        };
        assert_eq!(codec.pattern(), "+p.Codec::decode");
        let path = [Method::named("p.E.e"), codec];
        let all = path.iter().map(Method::dotted).collect();
        let timed = time_levels(&trees, &path, &all);
        assert_eq!(timed[1].implementation.as_deref(), Some("p.Slow.decode"));
        assert_eq!(timed[1].per_call, vec![90]);
    }

    #[test]
    fn a_call_site_heavier_than_the_own_code_names_its_declared_method() {
        let calls = |site: TreeNode| {
            tree(node(
                "p.R.fetch",
                100_000,
                vec![site, node("p.U.spin", 5_000, vec![])],
            ))
        };
        let site = heavier_call_site(&[calls(node("p.Codec.decode", 90_000, vec![]))]).unwrap();
        assert_eq!(
            (site.pattern(), site.subtypes),
            ("+p.Codec::decode".into(), true)
        );
        assert_eq!(
            heavier_call_site(&[calls(node("p.Codec.decode", 30_000, vec![]))]),
            None
        );
        // A cheap callee called 300 times: its time is mostly its probes'.
        let cheap = TreeNode {
            count: 350,
            ..node("p.V.type", 90_000, vec![])
        };
        assert_eq!(heavier_call_site(&[calls(cheap)]), None);
        assert_eq!(heavier_call_site(&[]), None);
    }
}
