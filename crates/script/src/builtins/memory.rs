//! `Sys.Memory`'s pools and garbage collections, from the JVM's perf counters and its
//! code cache's summary (`Compiler.codecache`): what `MemoryPoolMXBean`s and
//! `GarbageCollectorMXBean`s report, read without running code in the JVM.

use super::facts::{Counter, Facts, Heap};
use super::{facts, Call, Context};
use crate::value::Value;

/// BTrace's format for `getMemoryPoolUsage(null)`: name, max, used, committed, init.
const POOL_FORMAT: &str = "%1$s;%2$d;%3$d;%4$d;%5$d";

/// `Sys.Memory`: non-heap usage, memory pools, `MemoryUsage`'s parts, GC time.
pub(super) fn memory(c: &Call, cx: &mut Context) -> Result<Option<Value>, String> {
    let name = c.name;
    Ok(Some(match (name, c.args.len()) {
        ("nonHeapUsage", 0) => {
            let pools: Vec<Heap> = non_heap_pools(facts(cx, name)?)
                .map_err(|e| format!("{name}: {e}"))?
                .into_iter()
                .map(|p| p.1)
                .collect();
            let max = match pools.iter().any(|p| p.max < 0) {
                true => -1,
                false => pools.iter().map(|p| p.max).sum(),
            };
            let total = Heap {
                initial: pools.iter().map(|p| p.initial).sum(),
                used: pools.iter().map(|p| p.used).sum(),
                committed: pools.iter().map(|p| p.committed).sum(),
                max,
            };
            Value::Object(total.describe().into())
        }
        ("getMemoryPoolUsage", 1) => {
            let format = match c.arg(0) {
                Value::Null => POOL_FORMAT.to_string(),
                other => other.to_string(),
            };
            let facts = facts(cx, name)?;
            let mut pools = heap_pools(facts);
            pools.extend(non_heap_pools(facts).map_err(|e| format!("{name}: {e}"))?);
            let mut text = String::new();
            for (pool, usage) in pools {
                let args = [
                    Value::str(&pool),
                    Value::Int(usage.max),
                    Value::Int(usage.used),
                    Value::Int(usage.committed),
                    Value::Int(usage.initial),
                ];
                text.push_str(&java_format(&format, &args)?);
                text.push('\n');
            }
            Value::built(text)?
        }
        // A `MemoryUsage`'s part, read back from how it prints.
        ("init" | "used" | "committed" | "max", 1) => {
            let usage = c.text(0);
            let value = usage
                .split(&format!("{name} = "))
                .nth(1)
                .and_then(|rest| rest.split('(').next())
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| format!("{name}: {usage} is not a memory usage"))?;
            Value::Int(value)
        }
        ("getTotalGcTime", 0) => {
            let facts = facts(cx, name)?;
            let frequency = long(facts, "sun.os.hrt.frequency").unwrap_or(0);
            let mut ticks = 0;
            for collector in 0.. {
                let key = format!("sun.gc.collector.{collector}.time");
                match long(facts, &key) {
                    Some(time) => ticks = time.saturating_add(ticks),
                    None => break,
                }
            }
            Value::Int(if frequency > 0 {
                (i128::from(ticks) * 1000 / i128::from(frequency)) as i64
            } else {
                0
            })
        }
        _ => return Ok(None),
    }))
}

/// The heap's pools as the JVM's `MemoryPoolMXBean`s name them, from the generations' perf
/// counters (`sun.gc.generation.G.space.S.*`).
fn heap_pools(facts: &dyn Facts) -> Vec<(String, Heap)> {
    let policy = text(facts, "sun.gc.policy.name").unwrap_or_default();
    let mut pools = Vec::new();
    for generation in 0..4 {
        for space in 0..8 {
            let key = |part: &str| format!("sun.gc.generation.{generation}.space.{space}.{part}");
            let Some(name) = text(facts, &key("name")) else {
                break;
            };
            let Some(pool) = pool_name(&policy, &name) else {
                continue;
            };
            let part = |part: &str| long(facts, &key(part));
            // G1's young spaces have no maximum of their own.
            let bounded = !(policy == "GarbageFirst" && generation == 0);
            let usage = Heap {
                initial: part("initCapacity").unwrap_or(0),
                used: part("used").unwrap_or(0),
                committed: part("capacity").unwrap_or(0),
                max: part("maxCapacity").filter(|_| bounded).unwrap_or(-1),
            };
            pools.push((pool, usage));
        }
    }
    pools
}

/// A heap space's pool name under a GC policy (`sun.gc.policy.name`); none for the spaces
/// no pool shows (the second survivor space).
fn pool_name(policy: &str, space: &str) -> Option<String> {
    let prefix = match policy {
        "GarbageFirst" => "G1 ",
        "ParScav:MSC" => "PS ",
        _ => "",
    };
    let pool = match (space, prefix) {
        ("eden", _) => "Eden Space",
        ("s0", _) => "Survivor Space",
        ("s1", _) => return None,
        ("old" | "space", "") => "Tenured Gen",
        ("old" | "space", _) => "Old Gen",
        (other, _) => return Some(other.to_string()),
    };
    Some(format!("{prefix}{pool}"))
}

/// The pools outside the heap: the code cache's heaps (`Compiler.codecache`), `Metaspace`
/// and `Compressed Class Space`. Metaspace's maximum is unlimited (-1) as without
/// `-XX:MaxMetaspaceSize`; a code heap's initial size is taken to be its committed size.
fn non_heap_pools(facts: &dyn Facts) -> Result<Vec<(String, Heap)>, String> {
    let mut pools = code_heaps(&facts.jcmd(&["Compiler.codecache"])?);
    // The metaspace counters move only at collections; `GC.heap_info` (to JDK 21) and
    // `VM.metaspace basic` (JDK 25) print the current usage.
    let mut summary = facts.jcmd(&["GC.heap_info"]).unwrap_or_default();
    if !summary.contains("Metaspace ") {
        summary = facts.jcmd(&["VM.metaspace", "basic"]).unwrap_or_default();
    }
    for (pool, key, line, unlimited) in [
        ("Metaspace", "sun.gc.metaspace", "Metaspace ", true),
        (
            "Compressed Class Space",
            "sun.gc.compressedclassspace",
            "class space ",
            false,
        ),
    ] {
        let usage = summary
            .lines()
            .find(|l| l.trim_start().starts_with(line))
            .and_then(heap_info_usage)
            .or_else(|| {
                let part = |part: &str| long(facts, &format!("{key}.{part}"));
                Some(Heap {
                    initial: 0,
                    used: part("used")?,
                    committed: part("capacity").unwrap_or(0),
                    max: part("maxCapacity").unwrap_or(-1),
                })
            });
        if let Some(usage) = usage {
            let max = if unlimited { -1 } else { usage.max };
            pools.push((pool.to_string(), Heap { max, ..usage }));
        }
    }
    Ok(pools)
}

/// A metaspace line of `GC.heap_info` or `VM.metaspace basic`: `Metaspace used 3025K,
/// capacity 4486K, committed 4864K, reserved 1056768K` (the reserved size is the maximum).
fn heap_info_usage(line: &str) -> Option<Heap> {
    let kilobytes = |key: &str| {
        let after = line.split(&format!("{key} ")).nth(1)?;
        let number = after.split('K').next()?;
        number.trim().parse::<i64>().ok().map(|k| k * 1024)
    };
    Some(Heap {
        initial: 0,
        used: kilobytes("used")?,
        committed: kilobytes("committed")?,
        max: kilobytes("reserved").unwrap_or(-1),
    })
}

/// The usage of the memory pool named `pool` (as its `MemoryPoolMXBean` is), if the JVM has
/// one of that name.
pub fn pool_usage(facts: &dyn Facts, pool: &str) -> Option<Heap> {
    let find = |pools: Vec<(String, Heap)>| pools.into_iter().find(|(name, _)| name == pool);
    find(heap_pools(facts))
        .or_else(|| find(non_heap_pools(facts).ok()?))
        .map(|(_, usage)| usage)
}

/// The code heaps of `Compiler.codecache`'s summary: `CodeHeap 'name': size=…Kb used=…Kb`
/// (or `CodeCache: …`, the pool `Code Cache`) then ` bounds [low, committed top, high]`.
fn code_heaps(summary: &str) -> Vec<(String, Heap)> {
    let mut heaps = Vec::new();
    let mut lines = summary.lines();
    while let Some(line) = lines.next() {
        let Some((name, sizes)) = line.split_once(": size=") else {
            continue;
        };
        let name = if name == "CodeCache" {
            "Code Cache"
        } else {
            name
        };
        let kb = |key: &str| {
            sizes
                .split(&format!("{key}="))
                .nth(1)
                .and_then(|rest| rest.split("Kb").next())
                .and_then(|n| n.parse::<i64>().ok())
                .map_or(0, |n| n * 1024)
        };
        let bounds: Vec<i64> = lines
            .next()
            .and_then(|l| l.trim().strip_prefix("bounds ["))
            .map(|b| b.trim_end_matches(']').split(", "))
            .into_iter()
            .flatten()
            .filter_map(|a| i64::from_str_radix(a.trim_start_matches("0x"), 16).ok())
            .collect();
        let committed = match bounds.as_slice() {
            [low, top, ..] => top - low,
            _ => 0,
        };
        let max = sizes
            .split("Kb")
            .next()
            .and_then(|n| n.parse::<i64>().ok())
            .map_or(-1, |n| n * 1024);
        // A code heap commits its initial size at start-up and rarely grows.
        let usage = Heap {
            initial: committed,
            used: kb(" used"),
            committed,
            max,
        };
        heaps.push((name.to_string(), usage));
    }
    heaps
}

/// A perf data counter that holds text.
fn text(facts: &dyn Facts, key: &str) -> Option<String> {
    match facts.counter(key)? {
        Counter::Text(text) => Some(text),
        Counter::Long(_) => None,
    }
}

/// A perf data counter that holds a number.
fn long(facts: &dyn Facts, key: &str) -> Option<i64> {
    match facts.counter(key)? {
        Counter::Long(n) => Some(n),
        Counter::Text(_) => None,
    }
}

/// Java's `String.format` for what pool formats use: `%s`, `%d` (with an argument index
/// `%2$d`, a width, `-`), `%n` and `%%`.
fn java_format(format: &str, args: &[Value]) -> Result<String, String> {
    let spec = regex::Regex::new(r"%(?:(\d+)\$)?(-)?(\d+)?([sdn%])").expect("a valid pattern");
    let (mut out, mut last, mut next) = (String::new(), 0, 0);
    for found in spec.captures_iter(format) {
        let whole = found.get(0).expect("a match");
        out.push_str(&format[last..whole.start()]);
        last = whole.end();
        let text = match &found[4] {
            "n" => "\n".to_string(),
            "%" => "%".to_string(),
            _ => {
                let index = match found.get(1) {
                    Some(i) => i.as_str().parse::<usize>().unwrap_or(1).saturating_sub(1),
                    None => {
                        next += 1;
                        next - 1
                    }
                };
                let arg = args.get(index).ok_or_else(|| {
                    format!("format: no argument {} for {}", index + 1, whole.as_str())
                })?;
                arg.to_string()
            }
        };
        let width = found
            .get(3)
            .and_then(|w| w.as_str().parse().ok())
            .unwrap_or(0);
        match found.get(2) {
            Some(_) => out.push_str(&format!("{text:<width$}")),
            None => out.push_str(&format!("{text:>width$}")),
        }
    }
    out.push_str(&format[last..]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heap_infos_metaspace_lines_are_usages() {
        let jdk11 =
            " Metaspace       used 3025K, capacity 4486K, committed 4864K, reserved 1056768K";
        let jdk17 = "  class space    used 1062K, committed 1152K, reserved 1048576K";
        let usage = |used: i64, committed: i64, max: i64| Heap {
            initial: 0,
            used: used * 1024,
            committed: committed * 1024,
            max: max * 1024,
        };
        assert_eq!(heap_info_usage(jdk11), Some(usage(3025, 4864, 1_056_768)));
        assert_eq!(heap_info_usage(jdk17), Some(usage(1062, 1152, 1_048_576)));
        assert_eq!(
            heap_info_usage(" region size 1024K, 10 young (10240K)"),
            None
        );
    }
}
