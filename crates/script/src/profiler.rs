//! `Profiling.*`: BTrace's profiler, which counts the calls of named blocks and sums their
//! wall time and self time (wall time minus that of the blocks recorded inside them on the
//! same thread). BTrace times a block from `recordEntry` to `recordExit` as they run; jtap's
//! handlers run once a call has ended, knowing its start and duration, so `recordExit` puts
//! the call on its thread's timeline and finds the blocks inside it by their times: they
//! ended first, so they were recorded before it.

use std::collections::{HashMap, VecDeque};

use crate::limits::MAX_ENTRIES;

/// Calls kept per thread that no later call has been found to contain (yet): a call
/// containing older ones counts their time as its children's only while they are kept.
const KEPT_PER_THREAD: usize = 4096;
/// Slack when comparing times: starts and durations are each rounded from the agent's
/// clock, so a call inside another may seem to end a few nanoseconds after it.
const SLACK_NS: u64 = 8;

/// A profiler: per block, calls and times in nanoseconds.
#[derive(Debug, Clone, Default)]
pub struct Profiler {
    blocks: Vec<Block>,
    /// Per thread (kernel id): calls as (start, end), oldest first.
    outer: HashMap<u32, VecDeque<(u64, u64)>>,
}

#[derive(Debug, Clone)]
struct Block {
    name: String,
    invocations: u64,
    self_time: Times,
    wall_time: Times,
}

/// Total, least and most of some durations.
#[derive(Debug, Clone, Copy)]
struct Times {
    total: u64,
    min: u64,
    max: u64,
}

impl Times {
    const NONE: Times = Times {
        total: 0,
        min: u64::MAX,
        max: 0,
    };

    fn add(&mut self, ns: u64) {
        self.total += ns;
        self.min = self.min.min(ns);
        self.max = self.max.max(ns);
    }
}

impl Profiler {
    /// Records a call of block `name` on thread `tid` that started at `start_ns` and took
    /// `duration_ns`. False when the block is new and the profiler holds [`MAX_ENTRIES`]
    /// blocks already.
    pub fn record(&mut self, name: &str, tid: u32, start_ns: u64, duration_ns: u64) -> bool {
        let index = match self.blocks.iter().position(|b| b.name == name) {
            Some(i) => i,
            None if self.blocks.len() >= MAX_ENTRIES => return false,
            None => {
                self.blocks.push(Block {
                    name: name.to_string(),
                    invocations: 0,
                    self_time: Times::NONE,
                    wall_time: Times::NONE,
                });
                self.blocks.len() - 1
            }
        };
        let end = start_ns.saturating_add(duration_ns);
        let calls = self.outer.entry(tid).or_default();
        let mut inside = 0;
        calls.retain(|&(s, e)| {
            let contained = s + SLACK_NS >= start_ns && e <= end + SLACK_NS;
            if contained {
                inside += e - s;
            }
            !contained
        });
        if calls.len() >= KEPT_PER_THREAD {
            calls.pop_front();
        }
        calls.push_back((start_ns, end));
        let block = &mut self.blocks[index];
        block.invocations += 1;
        block.wall_time.add(duration_ns);
        block.self_time.add(duration_ns.saturating_sub(inside));
        true
    }

    /// Forgets every call.
    pub fn reset(&mut self) {
        *self = Profiler::default();
    }

    /// The rows BTrace prints for a snapshot: a title row, then one per block in the order
    /// they were first recorded; each cell as text and whether it is a number.
    pub fn grid(&self) -> Vec<Vec<(String, bool)>> {
        let title = [
            "Block",
            "Invocations",
            "SelfTime.Total",
            "SelfTime.Avg",
            "SelfTime.Min",
            "SelfTime.Max",
            "WallTime.Total",
            "WallTime.Avg",
            "WallTime.Min",
            "WallTime.Max",
        ];
        let mut rows = vec![title.iter().map(|t| (t.to_string(), false)).collect()];
        for b in &self.blocks {
            let number = |n: u64| (n.to_string(), true);
            let bound = |n: u64, known: bool| match known {
                true => number(n),
                false => ("N/A".to_string(), false),
            };
            let calls = b.invocations.max(1);
            rows.push(vec![
                (b.name.clone(), false),
                number(b.invocations),
                number(b.self_time.total),
                number(b.self_time.total / calls),
                bound(b.self_time.min, b.self_time.min != u64::MAX),
                bound(b.self_time.max, b.self_time.max > 0),
                number(b.wall_time.total),
                number(b.wall_time.total / calls),
                bound(b.wall_time.min, b.wall_time.min != u64::MAX),
                bound(b.wall_time.max, b.wall_time.max > 0),
            ]);
        }
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_time_leaves_out_the_blocks_inside_on_the_same_thread() {
        let mut p = Profiler::default();
        // Thread 1: outer (0..100) holds inner (10..30) and inner (40..70); the inner calls
        // end first and are recorded first. Thread 2's call overlaps in time, not in thread.
        assert!(p.record("inner", 1, 10, 20));
        assert!(p.record("inner", 1, 40, 30));
        assert!(p.record("other", 2, 20, 10));
        assert!(p.record("outer", 1, 0, 100));
        let row = |name: &str| row_of(&p, name);
        assert_eq!(p.grid()[0][0].0, "Block");
        assert_eq!(
            row("inner"),
            ["inner", "2", "50", "25", "20", "30", "50", "25", "20", "30"]
        );
        assert_eq!(row("outer")[..4], ["outer", "1", "50", "50"]);
        assert_eq!(row("other")[2], "10");
        // A later outer call does not count the inner calls twice.
        assert!(p.record("outermost", 1, 0, 200));
        assert_eq!(row_of(&p, "outermost")[2], "100");
    }

    fn row_of(p: &Profiler, name: &str) -> Vec<String> {
        p.grid()
            .into_iter()
            .find(|r| r[0].0 == name)
            .unwrap()
            .into_iter()
            .map(|(t, _)| t)
            .collect()
    }
}
