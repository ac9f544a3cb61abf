//! The processing thread's frames: each distinct frame of a session named once and known by
//! a small index from then on, and the profile's id for it looked up once.
//!
//! A deep-stack program sampled every millisecond repeats the same few thousand frames in
//! every sample (javac: 100+ frames a sample). Naming each frame of each sample (copying
//! its method's name and descriptor), then hashing those strings to find the profile's id,
//! was most of the processing thread's time; with this table a frame seen before costs one
//! lookup of a small key (method and bytecode index, or address) and a vector index.

use jtap_profile::{Frame, FrameId, FrameKind, Profile};
use regex::Regex;
// Keys are small (a method and a bytecode index, an address), looked up for every frame.
use rustc_hash::FxHashMap as HashMap;

use super::asgct::CallFrame;
use super::methods::Resolver;
use super::native::{self, Symbolizer};
use super::signal::ThreadState;

/// A frame's index in its [`FrameTable`].
pub type FrameRef = u32;

/// Most frames the table keeps in whole stacks (4 bytes each).
const MAX_STACKED_FRAMES: usize = 1 << 18;

/// Whether a frame's name matches a filter, once asked.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Match {
    Unknown,
    Yes,
    No,
}

/// The frames of one sampling session (see the module documentation).
#[derive(Default)]
pub struct FrameTable {
    frames: Vec<Frame>,
    by_content: HashMap<Frame, FrameRef>,
    /// Java frames by (jmethodID, bytecode index, kind).
    java: HashMap<(usize, i32, FrameKind), FrameRef>,
    /// Whole Java stacks by the hash the signal handler took of their frames: their
    /// references, root first. Programs repeat the same stacks sample after sample; a stack
    /// known by its hash is not read again (its frames, written by another CPU, would miss
    /// this one's caches), nor looked up frame by frame.
    java_stacks: HashMap<u64, Box<[FrameRef]>>,
    /// Frames in `java_stacks`, which is emptied when they pass [`MAX_STACKED_FRAMES`].
    stacked_frames: usize,
    /// Native user frames by looked-up address; None: in no mapped file.
    user: HashMap<u64, Option<FrameRef>>,
    kernel: HashMap<u64, FrameRef>,
    /// `[gc_active]`-style failure frames by `AsyncGetCallTrace` code.
    failures: HashMap<i32, FrameRef>,
    states: HashMap<u8, FrameRef>,
    /// The profile's id of each frame, once it was added.
    in_profile: Vec<Option<FrameId>>,
    /// Whether each frame matches the include and the exclude filter.
    matches: [Vec<Match>; 2],
}

/// Which of the two stack filters.
#[derive(Clone, Copy)]
pub enum Filter {
    Include = 0,
    Exclude = 1,
}

impl FrameTable {
    /// The frame behind a reference.
    pub fn frame(&self, frame: FrameRef) -> &Frame {
        &self.frames[frame as usize]
    }

    /// A frame by its content (pseudo-frames, thread names, places).
    pub fn intern(&mut self, frame: Frame) -> FrameRef {
        if let Some(&known) = self.by_content.get(&frame) {
            return known;
        }
        let index = self.frames.len() as FrameRef;
        self.frames.push(frame.clone());
        self.by_content.insert(frame, index);
        index
    }

    /// A sampled Java frame of the given kind, named by `resolver` the first time.
    fn java(&mut self, resolver: &mut Resolver, frame: &CallFrame, kind: FrameKind) -> FrameRef {
        let key = (frame.method as usize, frame.bci, kind);
        if let Some(&known) = self.java.get(&key) {
            return known;
        }
        let named = self.intern(resolver.frame_of_kind(frame, kind));
        self.java.insert(key, named);
        named
    }

    /// Whether the stack of hash `stack_hash` is known (0: no hash).
    pub fn knows_java_stack(&self, stack_hash: u64) -> bool {
        stack_hash != 0 && self.java_stacks.contains_key(&stack_hash)
    }

    /// Appends the references of a sample's Java frames (`frames`, top first, of the kinds in
    /// `kinds`) to `out`, root first. A stack of a known `stack_hash` is not read; one of an
    /// unknown hash (not 0) is remembered by it.
    pub fn java_stack(
        &mut self,
        resolver: &mut Resolver,
        frames: &[CallFrame],
        kinds: &[FrameKind],
        stack_hash: u64,
        out: &mut Vec<FrameRef>,
    ) {
        if let Some(known) = self.java_stacks.get(&stack_hash) {
            out.extend_from_slice(known);
            return;
        }
        let start = out.len();
        for (frame, &kind) in frames.iter().zip(kinds).rev() {
            out.push(self.java(resolver, frame, kind));
        }
        if stack_hash != 0 {
            if self.stacked_frames + frames.len() > MAX_STACKED_FRAMES {
                self.java_stacks.clear();
                self.stacked_frames = 0;
            }
            self.stacked_frames += frames.len();
            self.java_stacks.insert(stack_hash, out[start..].into());
        }
    }

    /// The pseudo-frame of a sample `AsyncGetCallTrace` could not walk.
    pub fn failure(&mut self, num_frames: i32) -> FrameRef {
        if let Some(&known) = self.failures.get(&num_frames) {
            return known;
        }
        let name = format!("[{}]", super::asgct::failure_name(num_frames));
        let frame = self.intern(Frame::new(name, FrameKind::Error));
        self.failures.insert(num_frames, frame);
        frame
    }

    /// The leaf pseudo-frame of a thread's state (`wall`).
    pub fn state(&mut self, state: ThreadState) -> FrameRef {
        if let Some(&known) = self.states.get(&(state as u8)) {
            return known;
        }
        let name = format!("[{}]", state.name());
        let frame = self.intern(Frame::new(name, FrameKind::Thread));
        self.states.insert(state as u8, frame);
        frame
    }

    /// The frames of a perf_event call chain, each part leaf first: user frames (down to the
    /// first address in no mapped file) into `user`, kernel frames into `kernel` unless
    /// `user_only`.
    pub fn native(
        &mut self,
        symbolizer: &mut Symbolizer,
        chain: &[u64],
        user_only: bool,
        user: &mut Vec<FrameRef>,
        kernel: &mut Vec<FrameRef>,
    ) {
        let mut user_done = false;
        for (context, address) in native::lookups(chain) {
            match context {
                native::Context::Kernel if !user_only => {
                    let frame = match self.kernel.get(&address) {
                        Some(&known) => known,
                        None => {
                            let frame = self.intern(symbolizer.kernel_frame(address));
                            self.kernel.insert(address, frame);
                            frame
                        }
                    };
                    kernel.push(frame);
                }
                native::Context::User if !user_done => {
                    let frame = match self.user.get(&address) {
                        Some(&known) => known,
                        None => {
                            let frame = symbolizer.user_frame(address).map(|f| self.intern(f));
                            self.user.insert(address, frame);
                            frame
                        }
                    };
                    match frame {
                        Some(frame) => user.push(frame),
                        None => user_done = true,
                    }
                }
                // The rest of the chain is the user part past the last library frame.
                native::Context::User => break,
                _ => {}
            }
        }
    }

    /// Whether any of `frames` has a name `filter` matches (each frame tested once).
    pub fn any_matches(&mut self, frames: &[FrameRef], which: Filter, filter: &Regex) -> bool {
        let matches = &mut self.matches[which as usize];
        matches.resize(self.frames.len(), Match::Unknown);
        frames.iter().any(|&frame| {
            let known = &mut matches[frame as usize];
            if *known == Match::Unknown {
                *known = if filter.is_match(&self.frames[frame as usize].name) {
                    Match::Yes
                } else {
                    Match::No
                };
            }
            *known == Match::Yes
        })
    }

    /// The profile's id of a frame, interned there the first time.
    pub fn profile_id(&mut self, profile: &mut Profile, frame: FrameRef) -> FrameId {
        self.in_profile.resize(self.frames.len(), None);
        *self.in_profile[frame as usize]
            .get_or_insert_with(|| profile.intern_ref(&self.frames[frame as usize]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chains_become_library_and_kernel_frames() {
        let mut symbolizer = native::symbolizer_with_kernel(b"ffffffff81000100 t do_read\nffffffff810000f0 t __pfx_do_read\nffffffff81000000 T _stext\n0000000000001000 D data\n");
        let getpid = libc::getpid as *const () as u64;
        let heap = Box::new(0u64);
        let chain = [
            native::CONTEXT_KERNEL,
            0xffffffff81000180,
            0xffffffff81000010,
            native::CONTEXT_USER,
            getpid,
            &*heap as *const u64 as u64,
            getpid,
        ];
        let frames = native_frames(&mut symbolizer, &chain, false);
        assert_eq!(
            frames.1,
            [
                Frame::new("do_read", FrameKind::Kernel),
                Frame::new("_stext", FrameKind::Kernel)
            ]
        );
        assert_eq!(
            frames.0.len(),
            1,
            "the user part ends at the heap address: {frames:?}"
        );
        assert!(
            frames.0[0].name.starts_with("libc.so.6!") && frames.0[0].name.contains("getpid"),
            "{frames:?}"
        );
        assert_eq!(frames.0[0].kind, FrameKind::Native);
        let user_only = native_frames(&mut symbolizer, &chain, true);
        assert!(user_only.1.is_empty() && user_only.0 == frames.0);
    }

    /// The user and kernel frames of a chain, each leaf first, as the processing thread
    /// finds them.
    fn native_frames(
        symbolizer: &mut Symbolizer,
        chain: &[u64],
        user_only: bool,
    ) -> (Vec<Frame>, Vec<Frame>) {
        let mut table = FrameTable::default();
        let (mut user, mut kernel) = (Vec::new(), Vec::new());
        table.native(symbolizer, chain, user_only, &mut user, &mut kernel);
        let frames = |refs: Vec<u32>| refs.into_iter().map(|r| table.frame(r).clone()).collect();
        (frames(user), frames(kernel))
    }

    #[test]
    fn kernel_without_addresses_gives_kernel_frames() {
        let mut symbolizer = native::symbolizer_with_kernel(b"0000000000000000 T _stext\n");
        let frames = native_frames(
            &mut symbolizer,
            &[native::CONTEXT_KERNEL, 0xffffffff81000180],
            false,
        );
        assert_eq!(frames.1, [Frame::new("[kernel]", FrameKind::Kernel)]);
    }

    #[test]
    fn each_frame_is_interned_once_and_reaches_the_profile_once() {
        let mut table = FrameTable::default();
        let a = table.intern(Frame::new("a", FrameKind::Native));
        let b = table.intern(Frame::new("b", FrameKind::Native));
        assert_eq!(table.intern(Frame::new("a", FrameKind::Native)), a);
        assert_ne!(a, b);
        let gc = table.failure(-2);
        assert_eq!(table.failure(-2), gc);
        assert_eq!(table.frame(gc).name, "[gc_active]");

        let mut profile = Profile::default();
        profile.intern(Frame::new("other", FrameKind::Native));
        let in_profile = table.profile_id(&mut profile, b);
        assert_eq!(profile.frame(in_profile).name, "b");
        assert_eq!(table.profile_id(&mut profile, b), in_profile);
        assert_eq!(profile.frames().len(), 2);

        let filter = Regex::new("^b$").unwrap();
        assert!(table.any_matches(&[a, b], Filter::Include, &filter));
        assert!(!table.any_matches(&[a], Filter::Include, &filter));
    }
}
