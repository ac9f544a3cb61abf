//! The search's result: the path as a call tree (text or JSON lines, with why it ends) and
//! as a flame graph.

use std::fmt::Write as _;
use std::io::{self, Write};
use std::time::Duration;

use jtap_client::interrupt;
use jtap_profile::{Frame, FrameKind, Metadata, Profile, StackCounts};
use jtap_protocol::records::{CallTree, Quantiles, Record, TreeNode};

use super::path::{self, End, Method};
use super::{Auto, Search};

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
pub(super) fn report(
    auto: &Auto,
    search: &Search,
    wall_start: u64,
    took: Duration,
) -> anyhow::Result<i32> {
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
        crate::commands::profile::write_profiles(auto.output, &[flame(tree, search)])?;
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
