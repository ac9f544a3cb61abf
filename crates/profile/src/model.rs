//! The profile model: interned frames, stacks and their counts, and what was measured.

use std::collections::{BTreeMap, HashMap};

/// What kind of code a frame stands for; exporters colour and annotate by it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum FrameKind {
    /// Java method running in the interpreter.
    Interpreted,
    /// JIT-compiled Java method.
    Compiled,
    /// Java method inlined into its caller.
    Inlined,
    /// Native (JNI) method or native library code.
    Native,
    /// C++ code of the JVM itself (libjvm).
    Cpp,
    /// Kernel code.
    Kernel,
    /// A thread name used as the root frame (`--threads`).
    Thread,
    /// The class of an allocated object or of a contended lock (leaf frame).
    Class,
    /// A pseudo-frame standing for a failed stack walk (e.g. `[gc_active]`).
    Error,
}

impl FrameKind {
    /// async-profiler's collapsed-output suffix for this kind, when annotations are on.
    pub fn annotation(self) -> &'static str {
        match self {
            FrameKind::Interpreted => "_[0]",
            FrameKind::Compiled => "_[j]",
            FrameKind::Inlined => "_[i]",
            FrameKind::Kernel => "_[k]",
            FrameKind::Class => "_[k]",
            FrameKind::Native | FrameKind::Cpp | FrameKind::Thread | FrameKind::Error => "",
        }
    }

    /// Whether the frame is Java code.
    pub fn is_java(self) -> bool {
        matches!(
            self,
            FrameKind::Interpreted | FrameKind::Compiled | FrameKind::Inlined
        )
    }
}

/// One frame: a display name (e.g. `com.example.Foo.bar:42`) and its kind.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct Frame {
    pub name: String,
    pub kind: FrameKind,
}

impl Frame {
    pub fn new(name: impl Into<String>, kind: FrameKind) -> Frame {
        Frame {
            name: name.into(),
            kind,
        }
    }
}

/// Index of an interned frame in its [`Profile`].
pub type FrameId = u32;

/// Samples and summed weight of one stack.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StackCounts {
    pub samples: u64,
    pub weight: u64,
}

/// What was measured and how the collection went.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Metadata {
    /// The event asked for: `cpu`, `wall`, `itimer`, `ctimer`, `alloc`, `lock`, …
    pub event: String,
    /// The engine that actually ran (differs from `event` after a fallback).
    pub engine: String,
    /// Sampling interval in the weight's unit (nanoseconds for time, bytes for alloc).
    pub interval: u64,
    /// Unit of the stack weights: `nanoseconds`, `bytes`, …
    pub weight_unit: String,
    /// Wall-clock duration of the collection, in nanoseconds.
    pub duration_ns: u64,
    /// Start of the collection, nanoseconds since the Unix epoch.
    pub start_time_ns: u64,
    /// Failed stack walks by reason (e.g. `gc_active` → 12); they are also in the stacks as
    /// error pseudo-frames.
    pub errors: BTreeMap<String, u64>,
    /// Samples lost because the sample buffer was full.
    pub dropped: u64,
}

/// Distinct stacks with their counts, over interned frames.
#[derive(Debug, Clone, Default)]
pub struct Profile {
    pub metadata: Metadata,
    frames: Vec<Frame>,
    frame_ids: HashMap<Frame, FrameId>,
    stacks: HashMap<Vec<FrameId>, StackCounts>,
}

impl Profile {
    pub fn new(metadata: Metadata) -> Profile {
        Profile {
            metadata,
            ..Profile::default()
        }
    }

    /// Interns a frame, returning its id.
    pub fn intern(&mut self, frame: Frame) -> FrameId {
        if let Some(&id) = self.frame_ids.get(&frame) {
            return id;
        }
        let id = self.frames.len() as FrameId;
        self.frames.push(frame.clone());
        self.frame_ids.insert(frame, id);
        id
    }

    /// Adds `samples` samples of total `weight` to a stack given root first.
    pub fn add(&mut self, stack_root_first: &[FrameId], samples: u64, weight: u64) {
        let counts = self.stacks.entry(stack_root_first.to_vec()).or_default();
        counts.samples += samples;
        counts.weight += weight;
    }

    /// Adds a stack given as frames, root first.
    pub fn add_frames(&mut self, stack_root_first: &[Frame], samples: u64, weight: u64) {
        let ids: Vec<FrameId> = stack_root_first
            .iter()
            .map(|f| self.intern(f.clone()))
            .collect();
        self.add(&ids, samples, weight);
    }

    /// The frame with this id.
    pub fn frame(&self, id: FrameId) -> &Frame {
        &self.frames[id as usize]
    }

    /// All interned frames, indexed by id.
    pub fn frames(&self) -> &[Frame] {
        &self.frames
    }

    /// Distinct stacks (root first) with their counts, heaviest first, ties by stack.
    pub fn stacks(&self) -> Vec<(&[FrameId], StackCounts)> {
        let mut stacks: Vec<_> = self
            .stacks
            .iter()
            .map(|(s, c)| (s.as_slice(), *c))
            .collect();
        stacks.sort_by(|a, b| {
            b.1.weight
                .cmp(&a.1.weight)
                .then(b.1.samples.cmp(&a.1.samples))
                .then(a.0.cmp(b.0))
        });
        stacks
    }

    /// Number of distinct stacks.
    pub fn stack_count(&self) -> usize {
        self.stacks.len()
    }

    /// Total samples over all stacks.
    pub fn total_samples(&self) -> u64 {
        self.stacks.values().map(|c| c.samples).sum()
    }

    /// Total weight over all stacks.
    pub fn total_weight(&self) -> u64 {
        self.stacks.values().map(|c| c.weight).sum()
    }

    /// Merges another profile's stacks into this one.
    pub fn merge(&mut self, other: &Profile) {
        for (stack, counts) in &other.stacks {
            let frames: Vec<Frame> = stack.iter().map(|&id| other.frame(id).clone()).collect();
            self.add_frames(&frames, counts.samples, counts.weight);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interns_and_sums() {
        let mut p = Profile::default();
        let main = Frame::new("Main.main", FrameKind::Interpreted);
        let work = Frame::new("Main.work", FrameKind::Compiled);
        p.add_frames(&[main.clone(), work.clone()], 1, 10);
        p.add_frames(&[main.clone(), work], 2, 20);
        p.add_frames(&[main], 1, 10);
        assert_eq!(p.frames().len(), 2);
        assert_eq!(p.stack_count(), 2);
        assert_eq!(p.total_samples(), 4);
        assert_eq!(p.total_weight(), 40);
        assert_eq!(
            p.stacks()[0].1,
            StackCounts {
                samples: 3,
                weight: 30
            }
        );
    }
}
