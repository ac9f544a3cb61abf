//! Choosing part of a profile: what to read of a file ([`Wanted`]: events, times), a time
//! range, stacks with (or without) a frame matching a pattern, and thread names as root
//! frames: what `jtap convert` filters by.

use regex::Regex;

use crate::model::{
    Counter, Frame, FrameId, FrameKind, Profile, TracedCall, LABEL_PREFIX, VIRTUAL_THREAD,
};

/// What to read of a file.
#[derive(Debug, Clone, Copy, Default)]
pub struct Wanted<'a> {
    /// Only these events (`cpu`, `alloc`, ...); all when empty. The others are skipped
    /// without decoding.
    pub events: &'a [String],
    /// Each sample's time and thread (the event log: time ranges, threads, JFR and heatmap
    /// output, slow calls). Without it, a recording reads as counts per stack, faster.
    pub times: bool,
}

/// Which samples to keep, and whether each stack gets its thread as root frame.
#[derive(Debug, Default, Clone)]
pub struct Selection {
    /// Keep samples taken at least this long after the profile's start (ns).
    pub from_ns: Option<u64>,
    /// Keep samples taken before this long after the profile's start (ns).
    pub to_ns: Option<u64>,
    /// Keep only stacks with a frame matching this.
    pub include: Option<Regex>,
    /// Drop stacks with a frame matching this.
    pub exclude: Option<Regex>,
    /// Put each sample's thread (`[name tid=N]`) at the root of its stack.
    pub threads: bool,
    /// Which request labels' samples to keep (`--by`).
    pub labels: Labels,
}

/// Which request labels' samples a [`Selection`] keeps.
#[derive(Debug, Default, Clone)]
pub enum Labels {
    /// Every sample, labels kept as root frames.
    #[default]
    All,
    /// The samples of this label, without the label's frame.
    Only(String),
    /// The samples of none of these labels (unlabelled ones too), labels kept.
    NoneOf(Vec<String>),
}

impl Selection {
    /// The samples of one request label, given as `VALUE` or `label=VALUE` (as `--by` takes
    /// it).
    pub fn of_label(by: &str) -> Selection {
        Selection {
            labels: Labels::Only(by.strip_prefix(LABEL_PREFIX).unwrap_or(by).to_string()),
            ..Selection::default()
        }
    }

    /// Whether it needs each sample's time and thread.
    fn needs_log(&self) -> bool {
        self.from_ns.is_some() || self.to_ns.is_some() || self.threads
    }

    fn keeps(&self, frames: &[&Frame]) -> bool {
        let any = |re: &Regex| frames.iter().any(|f| re.is_match(&f.name));
        let label = frames.first().and_then(|f| f.label_text());
        let labelled = match &self.labels {
            Labels::All => true,
            Labels::Only(only) => label == Some(only.as_str()),
            Labels::NoneOf(others) => label.is_none_or(|l| !others.iter().any(|o| o == l)),
        };
        labelled && self.include.as_ref().is_none_or(any) && !self.exclude.as_ref().is_some_and(any)
    }

    /// Frames kept at the root of a stack kept: all but a selected label's.
    fn skipped(&self) -> usize {
        usize::from(matches!(self.labels, Labels::Only(_)))
    }
}

impl Profile {
    /// The request labels of its samples (`--by`, each stack's root frame), with their
    /// totals by `counter`, heaviest first (by name among equals).
    pub fn labels(&self, counter: Counter) -> Vec<(&str, u64)> {
        let mut totals: Vec<(&str, u64)> = Vec::new();
        for (stack, counts) in self.stacks() {
            let root = stack.first().map(|&f| self.frame(f));
            if let Some(text) = root.and_then(Frame::label_text) {
                match totals.iter_mut().find(|(label, _)| *label == text) {
                    Some((_, total)) => *total += counts.get(counter),
                    None => totals.push((text, counts.get(counter))),
                }
            }
        }
        totals.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        totals
    }

    /// The part of the profile `selection` keeps. A time range or threads need the event
    /// log; a profile without one (read from collapsed stacks) cannot give them.
    pub fn select(&self, selection: &Selection) -> Result<Profile, String> {
        let frames_of =
            |stack: &[FrameId]| -> Vec<&Frame> { stack.iter().map(|&id| self.frame(id)).collect() };
        let mut selected = Profile::new(self.metadata.clone());
        if !selection.needs_log() {
            // By stack: every count kept, and the logged samples of the stacks kept.
            let mut kept = Vec::new();
            for (stack, counts) in self.stacks_by_id() {
                let frames = frames_of(stack);
                kept.push(selection.keeps(&frames).then(|| {
                    let frames: Vec<Frame> = frames
                        .into_iter()
                        .skip(selection.skipped())
                        .cloned()
                        .collect();
                    selected.add_frame_counts(&frames, counts)
                }));
            }
            for sample in self.logged() {
                if let Some(stack) = kept[sample.stack as usize] {
                    selected.append_logged(crate::LoggedSample { stack, ..*sample });
                }
            }
            for (&tid, name) in self.thread_names() {
                selected.name_thread(tid, name.clone());
            }
            for call in self.calls() {
                selected.add_call(call.clone());
            }
            return Ok(selected);
        }
        if self.logged().is_empty() {
            return Err(format!(
                "the {} profile has no sample times or threads (a JFR recording has them)",
                self.metadata.event
            ));
        }
        if self.metadata.unlogged > 0 {
            return Err(format!(
                "the {} profile keeps times for its first {} samples only, {} more would be missed",
                self.metadata.event,
                self.logged().len(),
                self.metadata.unlogged
            ));
        }
        let start = self.metadata.start_time_ns;
        let from = start.saturating_add(selection.from_ns.unwrap_or(0));
        let to = selection
            .to_ns
            .map_or(u64::MAX, |to| start.saturating_add(to));
        for sample in self.logged() {
            if sample.time_ns < from || sample.time_ns >= to {
                continue;
            }
            let frames = frames_of(self.stack(sample.stack));
            if !selection.keeps(&frames) {
                continue;
            }
            let mut stack: Vec<Frame> = Vec::with_capacity(frames.len() + 1);
            let name = self.thread_names().get(&sample.tid);
            if selection.threads {
                let label = match name {
                    Some(name) if sample.tid & VIRTUAL_THREAD != 0 => format!("[{name}]"),
                    None if sample.tid & VIRTUAL_THREAD != 0 => {
                        format!("[VirtualThread[#{}]]", sample.tid & !VIRTUAL_THREAD)
                    }
                    Some(name) if !name.is_empty() => format!("[{name} tid={}]", sample.tid),
                    _ => format!("[tid={}]", sample.tid),
                };
                stack.push(Frame::new(label, FrameKind::Thread));
            }
            stack.extend(frames.into_iter().skip(selection.skipped()).cloned());
            selected.log_frames(&stack, sample.counts, sample.time_ns, sample.tid);
            if let Some(name) = name {
                selected.name_thread(sample.tid, name.clone());
            }
        }
        for call in self.calls() {
            if call.time_ns < to && call.end_ns() >= from {
                selected.add_call(call.clone());
            }
        }
        if selection.from_ns.is_some() || selection.to_ns.is_some() {
            let end = start.saturating_add(self.metadata.duration_ns).min(to);
            selected.metadata.start_time_ns = from;
            selected.metadata.duration_ns = end.saturating_sub(from);
        }
        Ok(selected)
    }
}

impl Profile {
    /// The samples taken on a thread while it was inside one of `calls`: a profile of just
    /// those calls, which it keeps (JFR writes them as events). Needs the event log.
    pub fn during(&self, calls: &[TracedCall]) -> Result<Profile, String> {
        if self.logged().is_empty() && self.total_samples() > 0 {
            return Err(format!(
                "the {} profile has no sample times to match calls with",
                self.metadata.event
            ));
        }
        let mut by_thread: std::collections::HashMap<u32, Vec<(u64, u64)>> =
            std::collections::HashMap::new();
        for call in calls {
            by_thread
                .entry(call.tid)
                .or_default()
                .push((call.time_ns, call.end_ns()));
        }
        for spans in by_thread.values_mut() {
            spans.sort_unstable();
        }
        let inside = |tid: u32, time: u64| {
            by_thread.get(&tid).is_some_and(|spans| {
                // The last call starting at or before `time`, or an earlier one still open.
                let after = spans.partition_point(|&(start, _)| start <= time);
                spans[..after].iter().rev().any(|&(_, end)| time <= end)
            })
        };
        let mut selected = Profile::new(self.metadata.clone());
        selected.metadata.unlogged = 0;
        for sample in self.logged().iter().filter(|s| inside(s.tid, s.time_ns)) {
            let frames: Vec<Frame> = self
                .stack(sample.stack)
                .iter()
                .map(|&id| self.frame(id).clone())
                .collect();
            selected.log_frames(&frames, sample.counts, sample.time_ns, sample.tid);
            if let Some(name) = self.thread_names().get(&sample.tid) {
                selected.name_thread(sample.tid, name.clone());
            }
        }
        for call in calls {
            selected.add_call(call.clone());
        }
        Ok(selected)
    }

    /// The samples taken inside the profile's own traced calls of at least `threshold_ns`
    /// (a recording holding both samples and `jdk.MethodTrace` events): `convert --latency`.
    pub fn during_calls_over(&self, threshold_ns: u64) -> Result<Profile, String> {
        if self.calls().is_empty() {
            return Err(format!(
                "the {} profile has no traced calls (jdk.MethodTrace events) to pick samples by",
                self.metadata.event
            ));
        }
        let slow: Vec<TracedCall> = self
            .calls()
            .iter()
            .filter(|c| c.duration_ns >= threshold_ns)
            .cloned()
            .collect();
        self.during(&slow)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Metadata, StackCounts};

    #[test]
    fn selects_by_time_pattern_and_thread() {
        let mut p = Profile::new(Metadata {
            event: "cpu".into(),
            start_time_ns: 1_000,
            duration_ns: 100,
            ..Metadata::default()
        });
        let a = [p.intern(Frame::new("app.A.run", FrameKind::Compiled))];
        let b = [p.intern(Frame::new("app.B.run", FrameKind::Compiled))];
        p.log(&a, StackCounts::sampled(1, 1), 1_010, 1);
        p.log(&b, StackCounts::sampled(1, 1), 1_050, 2);
        p.log(&a, StackCounts::sampled(1, 1), 1_090, 1);
        p.name_thread(1, "main");
        let late = p
            .select(&Selection {
                from_ns: Some(40),
                ..Selection::default()
            })
            .unwrap();
        assert_eq!(late.total_samples(), 2);
        assert_eq!(
            (late.metadata.start_time_ns, late.metadata.duration_ns),
            (1_040, 60)
        );
        let only_a = p
            .select(&Selection {
                include: Some(Regex::new("A\\.run").unwrap()),
                threads: true,
                ..Selection::default()
            })
            .unwrap();
        assert_eq!(only_a.total_samples(), 2);
        assert_eq!(only_a.frame(only_a.stack(0)[0]).name, "[main tid=1]");
        // Only samples inside a call of their own thread.
        let call = |tid, time_ns, duration_ns| TracedCall {
            time_ns,
            duration_ns,
            tid,
            method: Frame::new("A.run", FrameKind::Compiled),
        };
        let calls = [call(1, 1_005, 15), call(2, 1_000, 40)];
        let inside = p.during(&calls).unwrap();
        assert_eq!(
            inside.total_samples(),
            1,
            "thread 2's sample came after its call"
        );
        assert_eq!(inside.calls(), calls);
        // --latency: the profile's own calls over a threshold.
        let mut traced = p.clone();
        calls.iter().for_each(|c| traced.add_call(c.clone()));
        assert_eq!(traced.during_calls_over(20).unwrap().total_samples(), 0);
        assert_eq!(traced.during_calls_over(10).unwrap().total_samples(), 1);
        assert!(p.during_calls_over(10).is_err(), "no calls to pick by");
        let mut counted = Profile::default();
        counted.add_frames(&[Frame::new("x", FrameKind::Native)], 3, 3);
        assert!(counted
            .select(&Selection {
                threads: true,
                ..Selection::default()
            })
            .is_err());
    }
}
