//! `jtap top` when stdout is not a terminal: each refresh printed as a block of lines (the
//! header, heap, GC, then the busiest threads), without the agent.

use std::io::{self, Write};

use super::collect::{mib, Sampler, Snapshot};
use super::{clock_time, TopArgs};

/// Prints a block every `--interval` until `--iterations`, Ctrl-C or the JVM's exit.
pub fn run(args: &TopArgs, sampler: &mut Sampler) -> anyhow::Result<i32> {
    let mut refreshes = 0;
    while args.iterations.is_none_or(|n| refreshes < n) {
        sampler.dump_if_due()?;
        std::thread::sleep(args.interval);
        if !sampler.alive() {
            eprintln!("jtap: JVM {} exited", args.pid);
            return Ok(0);
        }
        let snapshot = sampler.sample()?;
        let mut out = io::stdout().lock();
        write_block(&mut out, args, &snapshot)?;
        out.flush()?;
        refreshes += 1;
    }
    Ok(0)
}

/// `hh:mm:ss JVM <pid>: CPU 103% of a core, 27 threads`, heap and GC lines, then the
/// `-n` busiest threads.
fn write_block(out: &mut impl Write, args: &TopArgs, snapshot: &Snapshot) -> io::Result<()> {
    writeln!(
        out,
        "{} JVM {}: CPU {:.0}% of a core, {} threads",
        clock_time(),
        args.pid,
        snapshot.total_cpu,
        snapshot.threads.len()
    )?;
    match &snapshot.vm {
        None => writeln!(
            out,
            "(no hsperfdata: heap and GC unknown; -XX:-UsePerfData?)\n"
        )?,
        Some(vm) => {
            let [used, committed, max] = vm.heap;
            writeln!(
                out,
                "heap {} used / {} committed / {} max",
                mib(used),
                mib(committed),
                mib(max)
            )?;
            let gc: Vec<String> = vm
                .collectors
                .iter()
                .map(|(name, count, new, ms)| format!("{name} {count} (+{new}) {ms:.0} ms"))
                .collect();
            let (safepoints, new_safepoints, safepoint_ms) = vm.safepoints;
            writeln!(
                out,
                "gc {}; safepoints {safepoints} (+{new_safepoints}) {safepoint_ms:.0} ms; compilations {}\n",
                if gc.is_empty() { "?".into() } else { gc.join(", ") },
                vm.compilations.map_or("?".into(), |(c, _)| c.to_string()),
            )?;
        }
    }
    writeln!(
        out,
        "{:>8}  {:>6}  {:<14} {:<32} TOP FRAME",
        "TID", "CPU%", "STATE", "NAME"
    )?;
    for thread in snapshot.threads.iter().take(args.threads) {
        let line = format!(
            "{:>8}  {:>5.1}%  {:<14} {:<32} {}",
            thread.tid,
            thread.cpu,
            thread.state,
            thread.name,
            thread.top_frame.as_deref().unwrap_or("")
        );
        writeln!(out, "{}", line.trim_end())?;
    }
    writeln!(out)
}
