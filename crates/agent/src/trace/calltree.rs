//! Call trees of calltree mode, as the probes grow them: each thread grows the tree of the
//! entry call it is inside ([`Growing`]), and hands it to the `jtap-trace` thread when that
//! call ends.
//!
//! A session is bounded however much the entry call does: a tree holds at most
//! [`MAX_NODES`] nodes (later calls are counted, not recorded), trees waiting for the
//! reporting thread hold at most [`MAX_QUEUED_NODES`] nodes together (later trees are
//! dropped and counted), and with `-n N` the probes switch themselves off as the N-th tree
//! leaves its thread, before the reporting thread has drawn it. When a session ends inside
//! entry calls (`-d`, Ctrl-C), [`flush_open_trees`] asks each thread to hand over the tree
//! it is growing, marked unfinished.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Most nodes of one call tree; later calls inside the same entry call are not recorded.
pub const MAX_NODES: usize = 100_000;
/// Most nodes of all trees handed over but not yet taken by the reporting thread (24 bytes
/// each: 48 MiB).
const MAX_QUEUED_NODES: i64 = 2_000_000;

/// Trees the session may still hand over (`-n`); `u64::MAX` for no limit.
static BUDGET: AtomicU64 = AtomicU64::new(u64::MAX);
/// Nodes of trees handed over and not yet taken, over all sessions.
static QUEUED_NODES: AtomicI64 = AtomicI64::new(0);
/// Trees being grown in the current session.
static OPEN: AtomicU32 = AtomicU32::new(0);
/// The generation of the session whose threads should hand over their unfinished trees.
static FLUSH: AtomicU32 = AtomicU32::new(0);
/// Entry calls start trees: the session's classes are all instrumented (a call that began
/// while deeper levels were still being instrumented would have a partial tree).
static ARMED: AtomicBool = AtomicBool::new(false);

/// One node of a call tree: a method (inner method or the entry) or a call site.
#[derive(Debug, Clone, Copy)]
pub struct Node {
    /// Method id, or site id for call sites.
    pub id: u32,
    /// A call site rather than a method.
    pub site: bool,
    /// Index of the parent node (the root is its own parent).
    pub parent: u32,
    /// Start in ticks.
    pub start: u64,
    /// End in ticks (0: never closed).
    pub end: u64,
}

/// A finished (or unfinished) tree, ready for the reporting thread.
#[derive(Debug)]
pub struct Tree {
    /// Nodes; the first is the entry call.
    pub nodes: Vec<Node>,
    /// Calls not recorded because the tree was full.
    pub truncated: u64,
    /// The session ended inside the entry call: open nodes end when it did.
    pub unfinished: bool,
}

/// What may be done with a tree about to be handed over.
#[derive(Debug, PartialEq, Eq)]
pub enum Admission {
    /// Hand it over.
    Send,
    /// Hand it over; it is the last the session asked for (switch the probes off).
    SendLast,
    /// Drop it: the session has all the trees it asked for, or the queue is full.
    Drop,
}

/// Starts a session that reports at most `count` trees.
pub fn reset(count: Option<u64>) {
    BUDGET.store(count.unwrap_or(u64::MAX), Relaxed);
    OPEN.store(0, Relaxed);
    ARMED.store(false, Relaxed);
}

/// The session's classes are instrumented: entry calls from now on start trees.
pub fn arm() {
    ARMED.store(true, Relaxed);
}

/// Whether a tree of `nodes` nodes may be handed over; counts it as queued if so.
pub fn admit(nodes: usize) -> Admission {
    if QUEUED_NODES.load(Relaxed) + nodes as i64 > MAX_QUEUED_NODES {
        return Admission::Drop;
    }
    let taken = BUDGET.fetch_update(Relaxed, Relaxed, |left| match left {
        0 => None,
        u64::MAX => Some(u64::MAX),
        left => Some(left - 1),
    });
    match taken {
        Err(_) => Admission::Drop,
        Ok(left) => {
            QUEUED_NODES.fetch_add(nodes as i64, Relaxed);
            if left == 1 {
                Admission::SendLast
            } else {
                Admission::Send
            }
        }
    }
}

/// The reporting thread took a tree of `nodes` nodes off the queue.
pub fn taken(nodes: usize) {
    QUEUED_NODES.fetch_sub(nodes as i64, Relaxed);
}

/// Asks the threads of session `generation` to hand over the trees they are growing, and
/// waits up to `wait` for them (a thread blocked inside its entry call does not answer).
pub fn flush_open_trees(generation: u32, wait: Duration) {
    FLUSH.store(generation, Relaxed);
    let deadline = Instant::now() + wait;
    while OPEN.load(Relaxed) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The tree a thread grows while inside an entry call.
pub struct Growing {
    nodes: Vec<Node>,
    truncated: u64,
    /// Index of the innermost open node.
    open: u32,
    /// Handed over unfinished: nothing more grows in this session.
    flushed: bool,
}

impl Growing {
    /// No tree.
    pub const fn new() -> Growing {
        Growing {
            nodes: Vec::new(),
            truncated: 0,
            open: 0,
            flushed: false,
        }
    }

    /// Forgets the tree of an older session.
    pub fn clear(&mut self) {
        self.nodes.clear();
        self.flushed = false;
    }

    /// Inside an entry call.
    pub fn is_growing(&self) -> bool {
        !self.nodes.is_empty()
    }

    /// The entry method `id` was entered: a new tree, or a node of the tree in progress (a
    /// recursive entry call). None once the tree was handed over unfinished.
    pub fn enter_root(&mut self, id: u32, now: u64) -> Option<u32> {
        if self.flushed {
            return None;
        }
        if self.nodes.is_empty() {
            if !ARMED.load(Relaxed) {
                return None;
            }
            OPEN.fetch_add(1, Relaxed);
            self.truncated = 0;
            self.open = 0;
            self.nodes.push(Node {
                id,
                site: false,
                parent: 0,
                start: now,
                end: 0,
            });
            return Some(0);
        }
        Some(self.open(id, false, now))
    }

    /// Opens a node under the innermost open one; `u32::MAX` when the tree is full.
    pub fn open(&mut self, id: u32, site: bool, now: u64) -> u32 {
        if self.nodes.len() >= MAX_NODES {
            self.truncated += 1;
            return u32::MAX;
        }
        let index = self.nodes.len() as u32;
        self.nodes.push(Node {
            id,
            site,
            parent: self.open,
            start: now,
            end: 0,
        });
        self.open = index;
        index
    }

    /// Closes node `index`.
    pub fn close(&mut self, index: u32, now: u64) {
        if let Some(node) = self.nodes.get_mut(index as usize) {
            node.end = now;
            self.open = node.parent;
        }
    }

    /// Closes the innermost open node if it is call site `site` (the call returned).
    pub fn close_site(&mut self, site: u32, now: u64) {
        let open = self.open;
        if open != 0
            && self
                .nodes
                .get(open as usize)
                .is_some_and(|n| n.site && n.id == site)
        {
            self.close(open, now);
        }
    }

    /// The finished tree (the entry call returned), leaving none.
    pub fn take(&mut self) -> Tree {
        OPEN.fetch_sub(1, Relaxed);
        Tree {
            nodes: std::mem::take(&mut self.nodes),
            truncated: self.truncated,
            unfinished: false,
        }
    }

    /// The unfinished tree when session `generation` asked for it, its open nodes ended
    /// `now`; nothing more grows in this session.
    pub fn take_if_flushing(&mut self, generation: u32, now: u64) -> Option<Tree> {
        if FLUSH.load(Relaxed) != generation || self.nodes.is_empty() {
            return None;
        }
        let mut open = self.open as usize;
        while let Some(node) = self.nodes.get_mut(open) {
            if node.end == 0 {
                node.end = now;
            }
            if open == 0 {
                break;
            }
            open = node.parent as usize;
        }
        self.flushed = true;
        let mut tree = self.take();
        tree.unfinished = true;
        Some(tree)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tests share the module's statics (the budget, the armed flag): one at a time.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

    #[test]
    fn an_unfinished_tree_ends_its_open_nodes_and_stops_growing() {
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        arm();
        let mut tree = Growing::new();
        assert_eq!(tree.enter_root(7, 10), Some(0));
        let inner = tree.open(8, false, 20);
        let leaf = tree.open(9, true, 30);
        tree.close(leaf, 40);
        assert!(tree.take_if_flushing(FLUSH.load(Relaxed) + 1, 50).is_none());
        FLUSH.store(3, Relaxed);
        let taken = tree.take_if_flushing(3, 50).expect("flushed");
        assert!(taken.unfinished);
        let ends: Vec<u64> = taken.nodes.iter().map(|n| n.end).collect();
        assert_eq!(ends, vec![50, 50, 40]);
        assert_eq!(taken.nodes[inner as usize].parent, 0);
        assert!(!tree.is_growing());
        assert_eq!(tree.enter_root(7, 60), None, "nothing grows after a flush");
        tree.clear();
        assert_eq!(tree.enter_root(7, 60), Some(0));
    }

    #[test]
    fn entry_calls_start_trees_only_once_armed() {
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        reset(None);
        let mut tree = Growing::new();
        assert_eq!(tree.enter_root(1, 0), None);
        arm();
        assert_eq!(tree.enter_root(1, 0), Some(0));
        tree.take();
    }

    #[test]
    fn a_full_tree_counts_what_it_cannot_record() {
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        arm();
        let mut tree = Growing::new();
        tree.enter_root(1, 0);
        for i in 0..MAX_NODES + 5 {
            let node = tree.open(2, false, i as u64);
            tree.close(node, i as u64 + 1);
        }
        let taken = tree.take();
        assert_eq!(taken.nodes.len(), MAX_NODES);
        assert_eq!(taken.truncated, 6);
    }

    #[test]
    fn the_budget_admits_the_trees_asked_for_and_marks_the_last() {
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        reset(Some(2));
        assert_eq!(admit(10), Admission::Send);
        assert_eq!(admit(10), Admission::SendLast);
        assert_eq!(admit(10), Admission::Drop);
        taken(20);
        reset(None);
        assert_eq!(admit(MAX_QUEUED_NODES as usize + 1), Admission::Drop);
        assert_eq!(admit(5), Admission::Send);
        taken(5);
    }
}
