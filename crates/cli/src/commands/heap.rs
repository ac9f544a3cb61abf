//! `jtap heap <pid> [--live] [-n 30] [--json]`: the class histogram — instances and bytes per
//! class, largest first — computed by jtap's agent with a JVMTI heap walk (see the agent's
//! `heap::histogram`), printed as a table or JSON.

use std::io::{self, Write};
use std::time::Duration;

use anyhow::Context;
use comfy_table::{presets::NOTHING, CellAlignment, Table};
use jtap_protocol::{Action, Options};

use crate::agent_client;

/// One class of the histogram.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
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

/// The agent's histogram reply, parsed.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Histogram {
    /// The `top` classes by bytes.
    pub classes: Vec<ClassRow>,
    /// Instances over all classes (not only those shown).
    pub total_instances: u64,
    /// Bytes over all classes.
    pub total_bytes: u64,
    /// Classes with at least one instance.
    pub class_count: u64,
    /// How long the heap walk stopped the JVM.
    pub walk_ms: f64,
    /// With `--live`: how long the full GC before it took.
    pub gc_ms: Option<f64>,
}

/// Runs the histogram in JVM `pid` and prints it.
pub fn run(pid: u32, live: bool, top: u32, json: bool, timeout: Duration) -> anyhow::Result<i32> {
    let mut options = Options::default().with_action(Action::Histogram);
    options.live = live;
    options.top = (top > 0).then_some(top);
    let mut reply = Vec::new();
    agent_client::run(pid, &options, timeout, &mut reply)?;
    let histogram =
        parse(&String::from_utf8_lossy(&reply)).context("reading the agent's histogram")?;
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

/// Parses the agent's reply: ` rank: instances bytes name` rows, `Total instances bytes`, and
/// `classes: N, heap walk: X ms[, full GC first: Y ms]`.
pub fn parse(text: &str) -> anyhow::Result<Histogram> {
    let mut histogram = Histogram {
        classes: Vec::new(),
        total_instances: 0,
        total_bytes: 0,
        class_count: 0,
        walk_ms: 0.0,
        gc_ms: None,
    };
    let mut saw_total = false;
    for line in text.lines() {
        let mut words = line.split_whitespace();
        match words.next() {
            Some("Total") => {
                histogram.total_instances = number(words.next(), line)?;
                histogram.total_bytes = number(words.next(), line)?;
                saw_total = true;
            }
            Some("classes:") => {
                for part in line.split(", ") {
                    let (key, value) = part
                        .split_once(": ")
                        .with_context(|| format!("unexpected line {line:?}"))?;
                    let ms = || {
                        value
                            .trim_end_matches(" ms")
                            .parse::<f64>()
                            .with_context(|| format!("bad time in {line:?}"))
                    };
                    match key {
                        "classes" => histogram.class_count = number(Some(value), line)?,
                        "heap walk" => histogram.walk_ms = ms()?,
                        "full GC first" => histogram.gc_ms = Some(ms()?),
                        _ => {}
                    }
                }
            }
            Some(rank)
                if rank.ends_with(':')
                    && rank[..rank.len() - 1].bytes().all(|b| b.is_ascii_digit()) =>
            {
                let rank = number(Some(&rank[..rank.len() - 1]), line)? as u32;
                let instances = number(words.next(), line)?;
                let bytes = number(words.next(), line)?;
                let name = words.collect::<Vec<_>>().join(" ");
                anyhow::ensure!(!name.is_empty(), "no class name in {line:?}");
                histogram.classes.push(ClassRow {
                    rank,
                    name,
                    instances,
                    bytes,
                });
            }
            _ => {}
        }
    }
    anyhow::ensure!(saw_total, "no Total line in the agent's reply: {text:?}");
    Ok(histogram)
}

fn number(word: Option<&str>, line: &str) -> anyhow::Result<u64> {
    word.and_then(|w| w.parse().ok())
        .with_context(|| format!("malformed histogram line {line:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPLY: &str = " num     #instances         #bytes  class name\n   \
                         1:            120          48000  byte[]\n   \
                         2:             30            720  java.lang.String[]\n\
                         Total            150          48720\n\
                         classes: 7, heap walk: 2.5 ms, full GC first: 10.0 ms";

    #[test]
    fn parses_the_agent_reply() {
        let h = parse(REPLY).unwrap();
        assert_eq!(h.classes.len(), 2);
        assert_eq!(
            h.classes[1],
            ClassRow {
                rank: 2,
                name: "java.lang.String[]".into(),
                instances: 30,
                bytes: 720
            }
        );
        assert_eq!(
            (h.total_instances, h.total_bytes, h.class_count),
            (150, 48720, 7)
        );
        assert_eq!((h.walk_ms, h.gc_ms), (2.5, Some(10.0)));
        let without_gc = parse(&REPLY.replace(", full GC first: 10.0 ms", "")).unwrap();
        assert_eq!(without_gc.gc_ms, None);
        assert!(parse("garbage").is_err());
    }

    #[test]
    fn tables_show_shares_and_totals() {
        let mut out = Vec::new();
        write_table(&parse(REPLY).unwrap(), true, &mut out).unwrap();
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
