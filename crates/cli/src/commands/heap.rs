//! `jtap heap <pid> [--live] [-n 30] [--json]`: the class histogram — instances and bytes per
//! class, largest first — computed by jtap's agent with a JVMTI heap walk (see the agent's
//! `heap::histogram`), printed as a table or JSON.

use std::io::{self, Write};
use std::time::Duration;

use anyhow::Context;
use comfy_table::{presets::NOTHING, CellAlignment, Table};
use jtap_protocol::records::{Histogram, Record};
use jtap_protocol::{Action, Frame, Options};

use crate::agent_client::{self, AgentError};

/// Runs the histogram in JVM `pid` and prints it.
pub fn run(pid: u32, live: bool, top: u32, json: bool, timeout: Duration) -> anyhow::Result<i32> {
    let mut options = Options::default().with_action(Action::Histogram);
    options.live = live;
    options.top = (top > 0).then_some(top);
    let mut histogram = None;
    let mut take = |frame| {
        if let Frame::Record(bytes) = frame {
            if let Record::Histogram(h) = Record::decode(&bytes).map_err(AgentError::Channel)? {
                histogram = Some(h);
            }
        }
        Ok(())
    };
    agent_client::run_with(pid, &options, timeout, &mut io::sink(), Some(&mut take))?;
    let histogram = histogram.context("the agent sent no histogram")?;
    let mut out = io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&histogram)?)?;
    } else {
        write_table(&histogram, live, &mut out)?;
    }
    Ok(0)
}

fn write_table(histogram: &Histogram, live: bool, out: &mut impl Write) -> io::Result<()> {
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
            human_bytes(row.bytes),
            format!("{:.1}%", share(row.bytes)),
            row.name.clone(),
        ]);
    }
    table.add_row([
        "".into(),
        histogram.total_instances.to_string(),
        human_bytes(histogram.total_bytes),
        "100%".into(),
        format!("total ({} classes)", histogram.class_count),
    ]);
    for column in 0..4 {
        if let Some(column) = table.column_mut(column) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    writeln!(out, "{table}")?;
    let mut footer = format!(
        "{} objects; heap walk paused the JVM {:.1} ms",
        if live {
            "live"
        } else {
            "all (reachable or not yet collected)"
        },
        histogram.walk_ms
    );
    if let Some(gc_ms) = histogram.gc_ms {
        footer.push_str(&format!(" after a {gc_ms:.1} ms full GC"));
    }
    writeln!(out, "{footer}")
}

fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;
    use jtap_protocol::records::ClassRow;

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
        write_table(&histogram, true, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("46.9 KiB")
                && text.contains("98.5%")
                && text.contains("total (7 classes)"),
            "{text}"
        );
        assert!(text.contains("after a 10.0 ms full GC"), "{text}");
    }
}
