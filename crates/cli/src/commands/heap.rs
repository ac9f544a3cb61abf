//! `jtap heap <pid> [--live] [-n 30] [--json] [--walk]`: the class histogram — instances and
//! bytes per class, largest first — printed as a table or JSON. By default the JVM computes
//! it (the attach protocol's `inspectheap`, what `jcmd GC.class_histogram` runs: HotSpot's
//! own heap inspection, parallel where the JVM has cores for it), so the pause is jcmd's; with
//! `--walk` jtap's agent walks the heap through JVMTI (see the agent's `heap::histogram`),
//! which also tells the full GC's pause apart from the walk's.

use jtap_classfile::descriptor::java_name;
use std::io::{self, Write};
use std::time::{Duration, Instant};

use crate::units;
use anyhow::Context;
use comfy_table::{presets::NOTHING, CellAlignment, Table};
use jtap_attach::{AttachOptions, Request, VirtualMachine};
use jtap_client::AgentError;
use jtap_protocol::records::{ClassRow, Histogram, Record};
use jtap_protocol::{Action, Frame, Options};

/// Who computed a histogram.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    /// HotSpot's heap inspection (`inspectheap`).
    Jvm,
    /// jtap's agent's JVMTI heap walk.
    Agent,
}

/// Computes the histogram of JVM `pid` and prints it.
pub fn run(
    pid: u32,
    live: bool,
    top: u32,
    json: bool,
    walk: bool,
    timeout: Duration,
) -> anyhow::Result<i32> {
    let top = (top > 0).then_some(top);
    let (histogram, source) = if walk {
        (agent_histogram(pid, live, top, timeout)?, Source::Agent)
    } else {
        (jvm_histogram(pid, live, top, timeout)?, Source::Jvm)
    };
    let mut out = io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&histogram)?)?;
    } else {
        write_table(&histogram, live, source, &mut out)?;
    }
    Ok(0)
}

/// The histogram jtap's agent computes with a JVMTI heap walk.
fn agent_histogram(
    pid: u32,
    live: bool,
    top: Option<u32>,
    timeout: Duration,
) -> anyhow::Result<Histogram> {
    let mut options = Options::default().with_action(Action::Histogram);
    options.live = live;
    options.top = top;
    let mut histogram = None;
    let mut take = |frame| {
        if let Frame::Record(bytes) = frame {
            if let Record::Histogram(h) = Record::decode(&bytes).map_err(AgentError::Channel)? {
                histogram = Some(h);
            }
        }
        Ok(())
    };
    jtap_client::run_with(pid, &options, timeout, &mut io::sink(), Some(&mut take))?;
    histogram.context("the agent sent no histogram")
}

/// The histogram HotSpot computes for the attach protocol's `inspectheap` (with `live`, after
/// a full GC in the same pause). `walk_ms` is the whole request; `gc_ms` stays unknown.
fn jvm_histogram(
    pid: u32,
    live: bool,
    top: Option<u32>,
    timeout: Duration,
) -> anyhow::Result<Histogram> {
    let mut vm = VirtualMachine::attach(pid, &AttachOptions { timeout })?;
    let started = Instant::now();
    let request = Request::new(
        "inspectheap",
        [if live { "-live" } else { "-all" }.to_string()],
    );
    let mut reply = vm.execute(&request)?;
    let text = reply.output_to_string()?;
    let took = started.elapsed();
    if reply.status != 0 {
        anyhow::bail!(
            "the JVM refused its heap inspection: {}",
            text.lines().next().unwrap_or("no reason given")
        );
    }
    let mut histogram = parse_inspection(&text)
        .context("the JVM's heap inspection printed no histogram jtap can read")?;
    histogram.walk_ms = took.as_secs_f64() * 1e3;
    if let Some(top) = top {
        histogram.classes.truncate(top as usize);
    }
    Ok(histogram)
}

/// Reads HotSpot's histogram text: ` 1: <instances> <bytes> <class> (<module>)` rows, ranked
/// by bytes, and a `Total <instances> <bytes>` line.
fn parse_inspection(text: &str) -> Option<Histogram> {
    let mut classes = Vec::new();
    let mut totals = None;
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let Some(first) = words.next() else { continue };
        if first == "Total" {
            let instances = words.next()?.parse().ok()?;
            let bytes = words.next()?.parse().ok()?;
            totals = Some((instances, bytes));
            continue;
        }
        let Some(rank) = first.strip_suffix(':').and_then(|n| n.parse().ok()) else {
            continue;
        };
        let (Some(instances), Some(bytes), Some(name)) = (
            words.next().and_then(|n| n.parse().ok()),
            words.next().and_then(|n| n.parse().ok()),
            words.next(),
        ) else {
            continue;
        };
        classes.push(ClassRow {
            rank,
            name: java_name(name),
            instances,
            bytes,
        });
    }
    let (total_instances, total_bytes) = totals?;
    Some(Histogram {
        class_count: classes.len() as u64,
        classes,
        total_instances,
        total_bytes,
        walk_ms: 0.0,
        gc_ms: None,
    })
}

fn write_table(
    histogram: &Histogram,
    live: bool,
    source: Source,
    out: &mut impl Write,
) -> io::Result<()> {
    let mut table = Table::new();
    table
        .load_preset(NOTHING)
        .set_header(["#", "INSTANCES", "BYTES", "%BYTES", "CLASS"]);
    let share = |bytes: u64| {
        if histogram.total_bytes == 0 {
            0.0
        } else {
            100.0 * bytes as f64 / histogram.total_bytes as f64
        }
    };
    for row in &histogram.classes {
        table.add_row([
            row.rank.to_string(),
            row.instances.to_string(),
            units::bytes(row.bytes),
            format!("{:.1}%", share(row.bytes)),
            row.name.clone(),
        ]);
    }
    table.add_row([
        "".into(),
        histogram.total_instances.to_string(),
        units::bytes(histogram.total_bytes),
        "100%".into(),
        format!("total ({} classes)", histogram.class_count),
    ]);
    for column in 0..4 {
        if let Some(column) = table.column_mut(column) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    writeln!(out, "{table}")?;
    let objects = if live {
        "live"
    } else {
        "all (reachable or not yet collected)"
    };
    let footer = match (source, histogram.gc_ms) {
        (Source::Jvm, _) if live => format!(
            "{objects} objects; the JVM's heap inspection took {:.1} ms, a full GC included",
            histogram.walk_ms
        ),
        (Source::Jvm, _) => format!(
            "{objects} objects; the JVM's heap inspection took {:.1} ms",
            histogram.walk_ms
        ),
        (Source::Agent, Some(gc_ms)) => format!(
            "{objects} objects; heap walk paused the JVM {:.1} ms after a {gc_ms:.1} ms full GC",
            histogram.walk_ms
        ),
        (Source::Agent, None) => format!(
            "{objects} objects; heap walk paused the JVM {:.1} ms",
            histogram.walk_ms
        ),
    };
    writeln!(out, "{footer}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_show_shares_and_totals() {
        let row = |rank, name: &str, instances, bytes| ClassRow {
            rank,
            name: name.into(),
            instances,
            bytes,
        };
        let histogram = Histogram {
            classes: vec![
                row(1, "byte[]", 120, 48000),
                row(2, "java.lang.String[]", 30, 720),
            ],
            total_instances: 150,
            total_bytes: 48720,
            class_count: 7,
            walk_ms: 2.5,
            gc_ms: Some(10.0),
        };
        let mut out = Vec::new();
        write_table(&histogram, true, Source::Agent, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("46.9 KiB")
                && text.contains("98.5%")
                && text.contains("total (7 classes)"),
            "{text}"
        );
        assert!(text.contains("after a 10.0 ms full GC"), "{text}");
    }

    #[test]
    fn the_jvms_histogram_is_read_with_java_names() {
        let text = " num     #instances         #bytes  class name (module)
-------------------------------------------------------
   1:          5423         476144  [B (java.base@17.0.15)
   2:          4210         101040  java.lang.String (java.base@17.0.15)
   3:          3000          96000  [[I (java.base@17.0.15)
   4:            12            480  [Ljava.lang.Object; (java.base@17.0.15)
   5:             1             16  workloads.HeapShapes$Inner
Total         12646         673680
";
        let h = parse_inspection(text).unwrap();
        let names: Vec<&str> = h.classes.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "byte[]",
                "java.lang.String",
                "int[][]",
                "java.lang.Object[]",
                "workloads.HeapShapes$Inner"
            ]
        );
        assert_eq!(
            (
                h.classes[2].rank,
                h.classes[2].instances,
                h.classes[2].bytes
            ),
            (3, 3000, 96000)
        );
        assert_eq!(
            (h.total_instances, h.total_bytes, h.class_count),
            (12646, 673680, 5)
        );
        assert!(parse_inspection("Heap inspection is not supported\n").is_none());
    }
}
