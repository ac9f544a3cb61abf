//! The class histogram of `histogram`.

use std::fmt::Write;

use serde::{Deserialize, Serialize};

/// Instances and bytes per class, largest first (`jcmd GC.class_histogram`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Histogram {
    /// The largest classes by bytes (`top=` of them, else all).
    pub classes: Vec<ClassRow>,
    /// Instances over all classes (not only those listed).
    pub total_instances: u64,
    /// Bytes over all classes.
    pub total_bytes: u64,
    /// Classes with at least one instance.
    pub class_count: u64,
    /// How long the heap walk stopped the JVM, in milliseconds.
    pub walk_ms: f64,
    /// With `live`: how long the full GC before it took, in milliseconds.
    pub gc_ms: Option<f64>,
}

/// One class of a [`Histogram`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassRow {
    /// Rank by bytes, from 1.
    pub rank: u32,
    /// Java name, e.g. `java.lang.String[]`.
    pub name: String,
    /// Number of instances.
    pub instances: u64,
    /// Bytes of all instances (shallow sizes).
    pub bytes: u64,
}

impl Histogram {
    /// jcmd-like columns.
    pub fn to_text(&self) -> String {
        let mut text = String::from(" num     #instances         #bytes  class name\n");
        for row in &self.classes {
            let _ = writeln!(
                text,
                "{:>4}: {:>14} {:>14}  {}",
                row.rank, row.instances, row.bytes, row.name
            );
        }
        let _ = writeln!(
            text,
            "Total {:>14} {:>14}",
            self.total_instances, self.total_bytes
        );
        let _ = write!(
            text,
            "classes: {}, heap walk: {:.1} ms",
            self.class_count, self.walk_ms
        );
        if let Some(gc_ms) = self.gc_ms {
            let _ = write!(text, ", full GC first: {gc_ms:.1} ms");
        }
        text
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn histogram() -> Histogram {
        let row = |rank, name: &str, instances, bytes| ClassRow {
            rank,
            name: name.into(),
            instances,
            bytes,
        };
        Histogram {
            classes: vec![
                row(1, "byte[]", 10, 1000),
                row(2, "java.lang.String", 20, 480),
            ],
            total_instances: 31,
            total_bytes: 1496,
            class_count: 3,
            walk_ms: 1.5,
            gc_ms: Some(3.26),
        }
    }

    #[test]
    fn histograms_read_as_jcmd_prints_them() {
        let text = histogram().to_text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[1].split_whitespace().collect::<Vec<_>>(),
            ["1:", "10", "1000", "byte[]"]
        );
        assert_eq!(
            lines[3].split_whitespace().collect::<Vec<_>>(),
            ["Total", "31", "1496"]
        );
        assert_eq!(
            lines[4],
            "classes: 3, heap walk: 1.5 ms, full GC first: 3.3 ms"
        );
    }
}
