//! `jtap threads --sampled`: each thread's stack from jtap's wall-clock sampler over the
//! interval instead of from thread dumps. The sampler signals each Java thread and walks its
//! stack in the signal handler, so the JVM reaches no safepoint: a JVM whose safepoints take
//! long (a huge heap, a thread in a long counted loop) is looked at without being paused.
//!
//! A busy thread's stacks differ from sample to sample at their leaves, so a thread is shown
//! by its heaviest path: from its root, the frame most of its samples went through at each
//! depth, each with the share of the thread's samples below it. Its state is what the
//! sampler saw most: `running` (on CPU or runnable) or `sleeping` (in a system call: sleep,
//! wait, park, monitor, I/O).

use std::collections::HashMap;
use std::io;
use std::time::Duration;

use jtap_profile::{FrameId, FrameKind, Profile};
use jtap_protocol::{wire, Action, Event, Frame as Message, Options};

/// What the samples say about one thread.
pub struct SampledThread {
    /// The thread's samples.
    pub samples: u64,
    /// Samples that found it running.
    pub running: u64,
    /// Its heaviest path, root first: each frame with its samples.
    pub path: Vec<(String, u64)>,
    /// The Java name the agent saw.
    pub name: Option<String>,
}

impl SampledThread {
    /// `running NN%` or `sleeping NN%`: what most samples found.
    pub fn state(&self) -> String {
        let total = self.samples.max(1) as f64;
        if self.running * 2 >= self.samples {
            format!("running {:.0}%", 100.0 * self.running as f64 / total)
        } else {
            let sleeping = self.samples - self.running;
            format!("sleeping {:.0}%", 100.0 * sleeping as f64 / total)
        }
    }

    /// The path's frames innermost first, each with its share of the thread's samples.
    pub fn frames(&self) -> Vec<String> {
        let total = self.samples.max(1) as f64;
        (self.path.iter().rev())
            .map(|(frame, samples)| format!("{frame} ({:.0}%)", 100.0 * *samples as f64 / total))
            .collect()
    }
}

/// Records a wall-clock profile of JVM `pid` for `length`, keeping each sample's thread.
pub fn record(pid: u32, length: Duration, timeout: Duration) -> anyhow::Result<Profile> {
    let options = Options {
        event: Some(Event::Wall),
        interval: Some(sampling_interval(length)),
        duration: Some(length),
        timeline: true,
        ..Options::default().with_action(Action::Start)
    };
    let mut received: Vec<Vec<u8>> = Vec::new();
    jtap_client::run_with(
        pid,
        &options,
        timeout,
        &mut io::sink(),
        Some(&mut |frame| {
            if let Message::Profile(bytes) = frame {
                received.push(bytes);
            }
            Ok(())
        }),
    )?;
    let mut merged: Option<Profile> = None;
    for bytes in &received {
        let profile = wire::decode_profile(bytes).map_err(anyhow::Error::msg)?;
        match &mut merged {
            Some(all) => all.merge(&profile),
            None => merged = Some(profile),
        }
    }
    merged.ok_or_else(|| anyhow::anyhow!("the agent sent no wall-clock profile"))
}

/// About 200 samples per thread over the interval, between 1 and 50 ms apart.
fn sampling_interval(length: Duration) -> Duration {
    (length / 200).clamp(Duration::from_millis(1), Duration::from_millis(50))
}

/// The samples of each thread of `profile` (by the thread id the JVM sees).
pub fn by_thread(profile: &Profile) -> HashMap<u32, SampledThread> {
    let mut stacks: HashMap<u32, HashMap<u32, u64>> = HashMap::new();
    for sample in profile.logged() {
        *stacks
            .entry(sample.tid)
            .or_default()
            .entry(sample.stack)
            .or_default() += sample.counts.samples.max(1);
    }
    stacks
        .into_iter()
        .map(|(tid, counts)| {
            let mut thread = summarize(profile, &counts);
            thread.name = profile.thread_names().get(&tid).cloned();
            (tid, thread)
        })
        .collect()
}

/// One thread's state counts and heaviest path from its stacks and their samples.
fn summarize(profile: &Profile, counts: &HashMap<u32, u64>) -> SampledThread {
    let mut samples = 0;
    let mut running = 0;
    let mut stacks: Vec<(Vec<FrameId>, u64)> = Vec::new();
    for (&stack, &n) in counts {
        let frames = profile.stack(stack);
        samples += n;
        let state = frames.iter().map(|&id| profile.frame(id)).find(|f| {
            f.kind == FrameKind::Thread && (f.name == "[running]" || f.name == "[sleeping]")
        });
        if state.is_none_or(|f| f.name == "[running]") {
            running += n;
        }
        let code = frames.iter().copied();
        stacks.push((
            code.filter(|&id| profile.frame(id).kind != FrameKind::Thread)
                .collect(),
            n,
        ));
    }
    let path = heaviest_path(&stacks)
        .into_iter()
        .map(|(id, n)| (profile.frame(id).label(false).into_owned(), n))
        .collect();
    SampledThread {
        samples,
        running,
        path,
        name: None,
    }
}

/// From the root down, the frame most of the stacks below the path so far go through, with
/// their weight; ends where no stack goes deeper.
fn heaviest_path(stacks: &[(Vec<FrameId>, u64)]) -> Vec<(FrameId, u64)> {
    let mut below: Vec<&(Vec<FrameId>, u64)> = stacks.iter().collect();
    let mut path = Vec::new();
    for depth in 0.. {
        let mut weights: HashMap<FrameId, u64> = HashMap::new();
        for (frames, n) in &below {
            if let Some(&id) = frames.get(depth) {
                *weights.entry(id).or_default() += n;
            }
        }
        let Some((&id, &n)) = weights
            .iter()
            .max_by_key(|&(&id, &n)| (n, std::cmp::Reverse(id)))
        else {
            break;
        };
        path.push((id, n));
        below.retain(|(frames, _)| frames.get(depth) == Some(&id));
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_heaviest_path_follows_the_most_samples_at_each_depth() {
        let stacks = vec![
            (vec![1, 2, 3], 5),
            (vec![1, 2, 4], 4),
            (vec![1, 5], 6),
            (vec![6], 1),
        ];
        // At depth 1, frame 2 has 9 samples against frame 5's 6; below it, 3 has 5 of them.
        assert_eq!(heaviest_path(&stacks), vec![(1, 15), (2, 9), (3, 5)]);
    }

    #[test]
    fn frames_are_innermost_first_with_their_share() {
        let thread = SampledThread {
            samples: 200,
            running: 150,
            path: vec![("a.Main.run".into(), 200), ("a.Main.hot".into(), 120)],
            name: None,
        };
        assert_eq!(thread.frames(), ["a.Main.hot (60%)", "a.Main.run (100%)"]);
        assert_eq!(thread.state(), "running 75%");
    }
}
