//! Bounds on what a script holds: its handlers run in the client for as long as the script
//! does, so nothing a handler builds may grow without end.

/// Longest string a script builds (bytes): a handler growing one without end fails instead
/// of filling the client's memory.
pub const MAX_TEXT: usize = 1 << 20;

/// Most entries of a map, a deque or a profiler, or rows of an aggregation.
pub const MAX_ENTRIES: usize = 1_000_000;
