//! `jtap sites <pid> [-d 30s] [-n 20] [--depth 8]`: where the live heap was allocated — an
//! HPROF-style SITES report from jtap's allocation engine (`start,event=alloc,sites`): sites
//! ranked by live bytes, with live and allocated bytes and objects, `% self` (share of all
//! live bytes) and `% accum`, the class and the stack.
//!
//! The engine samples allocations for the duration (`--exact`: records every one), tracking
//! which sampled objects are still alive; the report is taken when it stops. Objects become "not alive" only when a
//! collection has freed them, so garbage made since the last collection still counts as
//! live — unless `--gc` runs a full collection (`jcmd GC.run`) just before the report.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use jtap_attach::{AttachOptions, Request, VirtualMachine};
use jtap_protocol::{Action, Event, Options};

use crate::agent_client;

/// What `jtap sites` asks for.
#[derive(clap::Args)]
pub struct SitesArgs {
    /// How long to sample
    #[arg(short, long, default_value = "30s", value_parser = crate::units::parse_duration)]
    pub duration: Duration,
    /// Show the N sites with the most live bytes
    #[arg(short = 'n', long = "top", default_value_t = 20)]
    pub top: usize,
    /// Stack frames per site (sites differ by class and this many frames)
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=2048))]
    pub depth: u32,
    /// Mean bytes between allocation samples (default 512k; suffixes k, m, g)
    #[arg(long, value_name = "BYTES", value_parser = super::profile::parse_alloc_interval)]
    pub alloc_interval: Option<u64>,
    /// Record every allocation instead of sampling: exact counts (heapTracker-style), slower
    #[arg(long, conflicts_with = "alloc_interval")]
    pub exact: bool,
    /// Run a full GC (jcmd GC.run) just before the report, so that garbage does not count as live
    #[arg(long)]
    pub gc: bool,
}

/// Runs the allocation engine in JVM `pid` for the duration and prints the top sites.
pub fn run(pid: u32, args: &SitesArgs, timeout: Duration) -> anyhow::Result<i32> {
    let SitesArgs {
        duration,
        top,
        depth,
        alloc_interval,
        exact,
        gc,
    } = *args;
    let options = Options {
        action: Some(Action::Start),
        event: Some(Event::Alloc),
        sites: true,
        live: true,
        jstackdepth: Some(depth),
        alloc: alloc_interval.map(Some),
        exact,
        ..Options::default()
    };
    // This client owns the engine: if it dies, the agent stops the engine by itself. Without
    // --gc the agent ends the engine at the duration and sends the report; with it, this
    // client runs the collection first and then asks for the report.
    let options = Options {
        duration: (!gc).then_some(duration),
        ..options
    };
    let conversation = agent_client::Conversation::open(pid, &options, timeout)?;
    let started = Instant::now();
    let collected = AtomicBool::new(false);
    let gc_failed = std::sync::Mutex::new(None);
    let stop_now = || {
        if !gc || started.elapsed() < duration || collected.swap(true, Ordering::SeqCst) {
            return false;
        }
        if let Err(e) = full_gc(pid, timeout) {
            *gc_failed.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
        }
        true
    };
    let mut report = Vec::new();
    let (why, _) = agent_client::supervise(
        conversation,
        Some(duration).filter(|_| !gc),
        &NEVER,
        &stop_now,
        &mut |_| {},
        |conversation| conversation.finish(&mut report, None),
    )?;
    if let Some(e) = gc_failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    if !matches!(why.as_str(), "duration elapsed" | "stopped by its client") {
        anyhow::bail!("the allocation engine ended before the report was taken ({why})");
    }
    let text = String::from_utf8_lossy(&report);
    io::stdout()
        .lock()
        .write_all(first_sites(&text, top).as_bytes())?;
    Ok(0)
}

/// `jtap sites` takes no Ctrl-C of its own: the first one ends the process (and so the engine).
static NEVER: AtomicBool = AtomicBool::new(false);

/// A full collection through the attach `jcmd GC.run`. The objects it frees reach the engine
/// as ObjectFree events: during the collection on JDK 11–16; on 17+ a little later, from the
/// Service Thread, and the engine waits for them to stop arriving before its report.
fn full_gc(pid: u32, timeout: Duration) -> anyhow::Result<()> {
    let mut vm = VirtualMachine::attach(pid, &AttachOptions { timeout })?;
    let mut reply = vm.execute(&Request::new("jcmd", ["GC.run".to_string()]))?;
    let text = reply.output_to_string()?;
    anyhow::ensure!(reply.status == 0, "GC.run failed: {}", text.trim());
    Ok(())
}

/// The report with only its first `top` sites (each a ranked row and its `at` lines).
fn first_sites(report: &str, top: usize) -> String {
    let mut out = String::new();
    let mut keep = true;
    for line in report.lines() {
        let trimmed = line.trim_start();
        let rank = trimmed
            .split_whitespace()
            .next()
            .and_then(|w| w.parse::<usize>().ok());
        if let Some(rank) = rank {
            keep = rank <= top;
        } else if !trimmed.starts_with("at ") {
            keep = true;
        }
        if keep {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::first_sites;

    #[test]
    fn keeps_the_first_sites_with_their_stacks() {
        let report = "SITES BEGIN (ordered by live bytes) (x)\n            percent\n rank    self   accum\n    \
                      1  75.00%  75.00%  750 3 1000 5  A\n      at a.b:1\n    \
                      2  25.00% 100.00%  250 1 500 1  B\n      at c.d:2\nSITES END: 2 sites";
        let cut = first_sites(report, 1);
        assert!(
            cut.contains("at a.b:1") && !cut.contains("at c.d:2") && !cut.contains(" B\n"),
            "{cut}"
        );
        assert!(
            cut.starts_with("SITES BEGIN") && cut.ends_with("SITES END: 2 sites\n"),
            "{cut}"
        );
        assert_eq!(
            first_sites(report, 5).lines().count(),
            report.lines().count()
        );
    }
}
