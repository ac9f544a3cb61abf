//! How a user of the walker got its stacks: by the walker, by the VM's own walker where it
//! stopped (and why it stopped), and how often the two agreed when both were asked. Atomic
//! counters only, so signal handlers count too.

use std::sync::atomic::{AtomicU64, Ordering};

use super::Stop;

/// How two walks of one stack compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comparison {
    /// Frame for frame.
    Same,
    /// Only in the scopes of the interrupted compiled frame: its inlined methods or bytecode
    /// index (which the two walkers may take from different pc descriptors); the other may
    /// also have stopped early below it (see `WentFurther`).
    DifferedAtTop,
    /// Only in the scopes of a compiled frame whose pc is where a pc descriptor is recorded:
    /// a call's return address (the thread was in the VM, in native code or blocked, or in a
    /// stub the sampler walked from the caller), or a signal's pc at the end of a run of one
    /// scope's instructions. jtap's walker takes that descriptor; `AsyncGetCallTrace` looks
    /// past the pc (HotSpot's `is_decipherable_compiled_frame`, when the frame anchor holds
    /// no pc or the walk starts at a signal's registers) and names the code that runs next.
    DifferedAtDescriptor,
    /// jtap's walker went on below the other's last frame, which is its own: where the
    /// other stopped early (`AsyncGetCallTrace` at some Java calls from the VM, such as
    /// `Finalizer.register` called from `Object.<init>`).
    WentFurther,
    /// jtap's walker has frames between two the other has too: a virtual thread's, frozen
    /// in its continuation's stack chunks (`AsyncGetCallTrace` steps from the oldest frame
    /// thawed onto the stack to the continuation's entry).
    ReadFrozen,
    /// Anywhere else.
    Differed,
}

/// Counts of one engine's stacks.
pub struct Stats {
    /// Stacks the walker gave.
    walked: AtomicU64,
    /// Stacks the VM's walker gave because the walker stopped.
    fell_back: AtomicU64,
    /// Stacks taken both ways, and those that differed.
    compared: AtomicU64,
    differed: AtomicU64,
    /// Of those, the stacks that differed only in the scopes of the interrupted compiled
    /// frame (where a signal stopped it between two pcs with debug information), or of one
    /// at a pc descriptor, those where jtap's walker went further, and those where it read
    /// frozen frames.
    differed_at_top: AtomicU64,
    differed_at_descriptor: AtomicU64,
    went_further: AtomicU64,
    read_frozen: AtomicU64,
    /// Why walks stopped, by [`Stop`] (as `usize`).
    stops: [AtomicU64; Stop::COUNT],
}

impl Default for Stats {
    fn default() -> Self {
        Self::new()
    }
}

impl Stats {
    /// All zero.
    pub const fn new() -> Stats {
        Stats {
            walked: AtomicU64::new(0),
            fell_back: AtomicU64::new(0),
            compared: AtomicU64::new(0),
            differed: AtomicU64::new(0),
            differed_at_top: AtomicU64::new(0),
            differed_at_descriptor: AtomicU64::new(0),
            went_further: AtomicU64::new(0),
            read_frozen: AtomicU64::new(0),
            stops: [const { AtomicU64::new(0) }; Stop::COUNT],
        }
    }

    /// Back to zero.
    pub fn reset(&self) {
        for counter in [
            &self.walked,
            &self.fell_back,
            &self.compared,
            &self.differed,
            &self.differed_at_top,
            &self.differed_at_descriptor,
            &self.went_further,
            &self.read_frozen,
        ]
        .into_iter()
        .chain(self.stops.iter())
        {
            counter.store(0, Ordering::Relaxed);
        }
    }

    /// The walker gave a stack.
    pub fn walked(&self) {
        self.walked.fetch_add(1, Ordering::Relaxed);
    }

    /// The walker stopped; the VM's walker was asked.
    pub fn stopped(&self, stop: Stop) {
        self.stops[stop as usize].fetch_add(1, Ordering::Relaxed);
        self.fell_back.fetch_add(1, Ordering::Relaxed);
    }

    /// Both walked; how they compared. Returns how many differed before.
    pub fn compared(&self, comparison: Comparison) -> u64 {
        self.compared.fetch_add(1, Ordering::Relaxed);
        match comparison {
            Comparison::Same => {
                self.walked();
                self.differed.load(Ordering::Relaxed)
            }
            Comparison::DifferedAtTop => {
                self.differed_at_top.fetch_add(1, Ordering::Relaxed);
                self.differed.fetch_add(1, Ordering::Relaxed)
            }
            Comparison::DifferedAtDescriptor => {
                self.differed_at_descriptor.fetch_add(1, Ordering::Relaxed);
                self.differed.fetch_add(1, Ordering::Relaxed)
            }
            Comparison::WentFurther => {
                self.went_further.fetch_add(1, Ordering::Relaxed);
                self.differed.fetch_add(1, Ordering::Relaxed)
            }
            Comparison::ReadFrozen => {
                self.read_frozen.fetch_add(1, Ordering::Relaxed);
                self.differed.fetch_add(1, Ordering::Relaxed)
            }
            Comparison::Differed => self.differed.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// One line for the log; `other` names the VM's walker.
    pub fn summary(&self, other: &str) -> String {
        let stops: Vec<String> = Stop::ALL
            .iter()
            .zip(&self.stops)
            .filter_map(|(stop, n)| {
                let n = n.load(Ordering::Relaxed);
                (n > 0).then(|| format!("{} {n}", stop.name()))
            })
            .collect();
        format!(
            "stacks: {} by jtap's walker, {} by {other} where it stopped ({}); {} compared with {other}, {} differed ({} only in the interrupted frame's scopes, {} only in those of a frame at a pc descriptor, {} where jtap's went further, {} where it read frames frozen in stack chunks)",
            self.walked.load(Ordering::Relaxed),
            self.fell_back.load(Ordering::Relaxed),
            if stops.is_empty() { "never".to_string() } else { stops.join(", ") },
            self.compared.load(Ordering::Relaxed),
            self.differed.load(Ordering::Relaxed),
            self.differed_at_top.load(Ordering::Relaxed),
            self.differed_at_descriptor.load(Ordering::Relaxed),
            self.went_further.load(Ordering::Relaxed),
            self.read_frozen.load(Ordering::Relaxed),
        )
    }
}
