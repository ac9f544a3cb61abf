//! What the gc engine (`start,event=gc`) counted.

use serde::{Deserialize, Serialize};

/// Garbage collections and their pauses since the engine started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GcPauses {
    /// Collections that finished.
    pub collections: u64,
    /// Their pauses together, in milliseconds.
    pub total_pause_ms: f64,
    /// The longest pause, in milliseconds.
    pub longest_pause_ms: f64,
}

impl GcPauses {
    /// One line.
    pub fn to_text(&self) -> String {
        format!(
            "gc: {} collections, total pause {:.3} ms, longest {:.3} ms",
            self.collections, self.total_pause_ms, self.longest_pause_ms
        )
    }
}
