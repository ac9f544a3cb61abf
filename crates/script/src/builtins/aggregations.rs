//! `Aggregations` and `Profiling`, and the grids BTrace prints them as.

use std::cell::RefCell;
use std::rc::Rc;

use super::{now_ns, Call, Context};
use crate::limits::MAX_ENTRIES;
use crate::profiler::Profiler;
use crate::value::{self, Aggregation, Tally, Value};

/// `Profiling`: profilers recording the time of blocks, their snapshots.
pub(super) fn profiling(c: &Call, cx: &mut Context) -> Result<Option<Value>, String> {
    let name = c.name;
    Ok(Some(match (name, c.args.len()) {
        ("newProfiler", 0 | 1) => Value::Profiler(Rc::default()),
        // The call's start is known when it ends: recordExit does the work.
        ("recordEntry", 2) => profiler(&c.arg(0), name).map(|_| Value::Null)?,
        ("recordExit", 3) => {
            let profiler = profiler(&c.arg(0), name)?;
            let duration = u64::try_from(c.int(2)?).unwrap_or(0);
            let (tid, start) = match cx.probe {
                Some(probe) => (probe.tid, probe.start_ns),
                None => (0, (now_ns() as u64).saturating_sub(duration)),
            };
            if !profiler
                .borrow_mut()
                .record(&c.text(1), tid, start, duration)
            {
                return Err(format!(
                    "recordExit: a profiler holds at most {MAX_ENTRIES} blocks"
                ));
            }
            Value::Null
        }
        ("snapshot", 1) => Value::Profiler(Rc::new(RefCell::new(
            profiler(&c.arg(0), name)?.borrow().clone(),
        ))),
        ("snapshotAndReset", 1) => {
            let profiler = profiler(&c.arg(0), name)?;
            let snapshot = std::mem::take(&mut *profiler.borrow_mut());
            Value::Profiler(Rc::new(RefCell::new(snapshot)))
        }
        ("reset", 1) => {
            profiler(&c.arg(0), name)?.borrow_mut().reset();
            Value::Null
        }
        ("printSnapshot", 2) => {
            let grid = profiler(&c.arg(1), name)?.borrow().grid();
            cx.out.push_str(&c.text(0));
            cx.out.push('\n');
            print_grid(&grid, cx.out);
            Value::Null
        }
        _ => return Ok(None),
    }))
}

/// `Aggregations`.
pub(super) fn aggregations(c: &Call, _: &mut Context) -> Result<Option<Value>, String> {
    Ok(Some(match (c.name, c.args.len()) {
        ("newAggregation", 1) => match c.arg(0) {
            Value::Constant(f) if matches!(&*f, "COUNT" | "SUM" | "MINIMUM" | "MAXIMUM" | "AVERAGE" | "QUANTIZE") => {
                Value::Aggregation(Rc::new(RefCell::new(Aggregation::new(&f))))
            }
            other => return Err(format!("newAggregation: {other} is not an aggregation function jtap has (COUNT, SUM, MINIMUM, MAXIMUM, AVERAGE, QUANTIZE)")),
        },
        ("newAggregationKey", _) => Value::Key(c.args.as_slice().into()),
        ("addToAggregation", 2 | 3) => {
            let (key, value) = match c.args.len() {
                3 => (match c.arg(1) {
                    Value::Key(k) => k.to_vec(),
                    other => vec![other],
                }, c.int(2)?),
                _ => (Vec::new(), c.int(1)?),
            };
            match c.arg(0) {
                Value::Aggregation(agg) => {
                    if !agg.borrow_mut().add(key, value) {
                        return Err(format!("addToAggregation: aggregations are capped at {MAX_ENTRIES} keys"));
                    }
                }
                other => return Err(format!("addToAggregation: {other} is not an aggregation")),
            }
            Value::Null
        }
        // BTrace's `truncate`: the `count` largest rows kept, or the `-count` smallest.
        ("truncateAggregation", 2) => {
            let count = c.int(1)?;
            if let Value::Aggregation(agg) = c.arg(0) {
                let mut agg = agg.borrow_mut();
                let mut rows = std::mem::take(&mut agg.rows);
                rows.sort_by_key(|(_, tally)| agg.result(tally));
                let keep = usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX);
                let drop = rows.len().saturating_sub(keep);
                match count {
                    0 => rows.clear(),
                    1.. => {
                        rows.drain(..drop);
                    }
                    _ => rows.truncate(rows.len() - drop),
                }
                agg.rows = rows;
            }
            Value::Null
        }
        ("clearAggregation", 1) => {
            if let Value::Aggregation(agg) = c.arg(0) {
                agg.borrow_mut().rows.clear();
            }
            Value::Null
        }
        _ => return Ok(None),
    }))
}

/// A profiler argument, or an error naming the function.
fn profiler(value: &Value, function: &str) -> Result<Rc<RefCell<Profiler>>, String> {
    match value {
        Value::Profiler(p) => Ok(p.clone()),
        other => Err(format!("{function}: {other} is not a profiler")),
    }
}

/// An aggregation as BTrace prints it (its grid): a row per key in ascending order of value,
/// each cell after two spaces, strings left- and numbers right-aligned to their column's
/// widest value.
pub(super) fn print_aggregation(agg: &Aggregation, out: &mut String) {
    let mut rows: Vec<&(Vec<Value>, Tally)> = agg.rows.iter().collect();
    rows.sort_by_key(|(_, tally)| agg.result(tally));
    let cells: Vec<Vec<(String, bool)>> = rows
        .into_iter()
        .map(|(key, tally)| {
            let value = match agg.function.as_str() {
                // BTrace's grid shows a multi-line cell on lines of its own, each after a tab.
                "QUANTIZE" => {
                    let mut text = String::from("\n");
                    for line in histogram(&tally.buckets).lines() {
                        text.push('\t');
                        text.push_str(line);
                        text.push('\n');
                    }
                    (text, false)
                }
                _ => (agg.result(tally).to_string(), true),
            };
            key.iter()
                .map(|k| (k.to_string(), matches!(k, Value::Int(_) | Value::Float(_))))
                .chain([value])
                .collect()
        })
        .collect();
    print_grid(&cells, out);
}

/// A `QUANTIZE` row's distribution as BTrace prints it: each bucket from the one below the
/// lowest used to the one above the highest, its label, a bar of 40 and the count.
fn histogram(buckets: &[u64]) -> String {
    let used: Vec<usize> = (0..buckets.len()).filter(|&i| buckets[i] > 0).collect();
    let (Some(&low), Some(&high)) = (used.first(), used.last()) else {
        return String::new();
    };
    let (low, high) = (low.saturating_sub(1), (high + 1).min(buckets.len() - 1));
    let total: u64 = buckets.iter().sum();
    let mut out = String::from("          value  ------------- Distribution ------------- count\n");
    for (i, &count) in buckets.iter().enumerate().take(high + 1).skip(low) {
        let bar = (40 * count / total.max(1)) as usize;
        out.push_str(&format!(
            "{:>15} |{}{} {count}\n",
            value::bucket_label(i),
            "@".repeat(bar),
            " ".repeat(40 - bar)
        ));
    }
    out
}

/// Rows of cells as BTrace prints a grid: each cell after two spaces, numbers right-aligned
/// and text left-aligned to the column's widest cell.
fn print_grid(cells: &[Vec<(String, bool)>], out: &mut String) {
    let columns = cells.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            cells
                .iter()
                .filter_map(|row| row.get(c))
                .map(|(text, _)| text.chars().count())
                .max()
                .unwrap_or(0)
                .max(1)
        })
        .collect();
    for row in cells {
        for (c, (text, number)) in row.iter().enumerate() {
            let width = widths[c];
            match number {
                true => out.push_str(&format!("  {text:>width$}")),
                // A multi-line cell (a distribution) is as wide as it is.
                false if text.contains('\n') => out.push_str(&format!("  {text}")),
                false => out.push_str(&format!("  {text:<width$}")),
            }
        }
        out.push('\n');
    }
}
