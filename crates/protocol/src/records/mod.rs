//! Results the agent sends as data, in a [`crate::Frame::Record`], for the client to render
//! (a table, JSON lines, text): nothing the client shows is parsed back out of the agent's
//! text, and how a result looks is decided where it is shown.
//!
//! - [`batch`]: calls many to a record, and how many the probes reported (scripts).
//! - [`gc`]: collections and pauses counted by the gc engine.
//! - [`histogram`]: the class histogram.
//! - [`inspect`]: instances of a class with their fields, or a static field.
//! - [`sites`]: allocation sites ranked by live bytes.
//! - [`trace`]: what `jtap trace`, `calltree` and `monitor` report: calls, call trees and
//!   per-method statistics.

pub mod batch;
pub mod gc;
pub mod histogram;
pub mod inspect;
pub mod sites;
pub mod trace;

use serde::{Deserialize, Serialize};

pub use batch::{BatchCall, BatchProbe, BatchThread, CallBatch, MethodCalls, Reported};
pub use gc::GcPauses;
pub use histogram::{ClassRow, Histogram};
pub use inspect::{FieldValue, InspectedClass, Inspection, Instance};
pub use sites::Sites;
pub use trace::{
    Call, CallStats, CallTree, Callee, FieldAccess, InsnReached, MethodStats, MonitorInterval,
    Outcome, Point, Quantiles, Reached, TreeNode, LATENCY_BOUNDS_NS,
};

/// One result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Record {
    /// The class histogram of `histogram`.
    Histogram(Histogram),
    /// The allocation sites of `jtap sites`.
    Sites(Sites),
    /// What the gc engine counted.
    Gc(GcPauses),
    /// One traced call.
    Call(Call),
    /// A point inside a traced method reached.
    Reached(Reached),
    /// One entry call's tree.
    Tree(CallTree),
    /// One interval of per-method statistics.
    Monitor(MonitorInterval),
    /// Traced calls, many to a record.
    Calls(CallBatch),
    /// How many calls of each method the probes reported in the session.
    Reported(Reported),
    /// Instances of a class, or a static field, of `inspect`.
    Inspection(Inspection),
}

impl Record {
    /// The record as JSON, the body of its frame.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a record always serialises")
    }

    /// Reads back what [`Record::encode`] wrote.
    pub fn decode(bytes: &[u8]) -> Result<Record, String> {
        serde_json::from_slice(bytes).map_err(|e| format!("malformed record: {e}"))
    }

    /// How people read it (and how `file=` holds it).
    pub fn to_text(&self) -> String {
        match self {
            Record::Histogram(histogram) => histogram.to_text(),
            Record::Sites(sites) => sites.to_text(),
            Record::Gc(pauses) => pauses.to_text(),
            Record::Call(call) => call.to_text(),
            Record::Reached(reached) => reached.to_text(),
            Record::Tree(tree) => tree.to_text(),
            Record::Monitor(interval) => interval.to_text(),
            Record::Calls(batch) => batch.to_text(),
            Record::Reported(reported) => reported.to_text(),
            Record::Inspection(inspection) => inspection.to_text(),
        }
    }

    /// JSON lines, for `--json`: one per call, tree, histogram, or method of an interval.
    pub fn to_json_lines(&self) -> String {
        match self {
            Record::Histogram(histogram) => {
                serde_json::to_string(histogram).expect("a record always serialises")
            }
            Record::Sites(sites) => {
                serde_json::to_string(sites).expect("a record always serialises")
            }
            Record::Calls(batch) => {
                serde_json::to_string(batch).expect("a record always serialises")
            }
            Record::Reported(reported) => {
                serde_json::to_string(reported).expect("a record always serialises")
            }
            Record::Gc(pauses) => {
                serde_json::to_string(pauses).expect("a record always serialises")
            }
            Record::Inspection(inspection) => {
                serde_json::to_string(inspection).expect("a record always serialises")
            }
            Record::Call(call) => call.to_json().to_string(),
            Record::Reached(reached) => {
                serde_json::to_string(reached).expect("a record always serialises")
            }
            Record::Tree(tree) => tree.to_json().to_string(),
            Record::Monitor(interval) => interval
                .to_json()
                .iter()
                .map(|line| line.to_string())
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let records = [
            Record::Histogram(histogram::tests::histogram()),
            Record::Sites(sites::tests::sites()),
            Record::Call(trace::tests::call()),
            Record::Tree(trace::tests::tree()),
            Record::Calls(batch::tests::batch()),
            Record::Inspection(inspect::tests::inspection()),
        ];
        for record in records {
            assert_eq!(Record::decode(&record.encode()), Ok(record));
        }
        assert!(Record::decode(b"{\"nope\":1}").is_err());
    }
}
