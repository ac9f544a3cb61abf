//! `jtap threads <pid> [-n 5] [--blocked] [--state S] [-d 1s]`: the busiest threads over an
//! interval, with their Java names, states and stacks; the threads blocked on a lock and the
//! thread holding it; the deadlocks the JVM found.
//!
//! CPU time comes from `/proc/<pid>/task/<tid>/stat` (utime + stime, read twice, without
//! touching the JVM); names, states, stacks and locks from a thread dump (the attach
//! operation `threaddump -l -e`, as `jstack -l -e`), joined on the native thread id (`nid`);
//! allocation rates from the bytes each thread allocated, which that dump and one taken at
//! the start of the interval print (two dumps: two short safepoints). With `--sampled`,
//! stacks come from jtap's wall-clock sampler instead, without a safepoint ([`sampled`]).

use std::collections::HashMap;
use std::fs;
use std::io::{self, Write};
use std::thread;
use std::time::Duration;

use anyhow::Context;
use jtap_attach::process::Process;
use jtap_attach::{AttachOptions, Request, VirtualMachine};
use serde::Serialize;

use super::thread_dump::{DumpedThread, ThreadDump};
use crate::units;

mod sampled;

/// The command line of `jtap threads`.
#[derive(clap::Args, Debug, Clone)]
pub struct ThreadsArgs {
    /// Pid of the target JVM
    pub pid: u32,
    /// Show the N busiest threads (0: all)
    #[arg(short = 'n', long = "top", default_value_t = 5)]
    pub top: usize,
    /// Show only threads blocked on a lock held by another thread
    #[arg(long)]
    pub blocked: bool,
    /// Show only threads in this Java state (RUNNABLE, BLOCKED, WAITING, TIMED_WAITING)
    #[arg(long, value_parser = parse_state)]
    pub state: Option<String>,
    /// How long to measure CPU use (e.g. 1s, 500ms)
    #[arg(short = 'd', long = "duration", default_value = "1s", value_parser = units::parse_duration)]
    pub interval: Duration,
    /// Frames to print per thread (0: none)
    #[arg(long, default_value_t = 8)]
    pub frames: usize,
    /// Print JSON instead of text
    #[arg(long)]
    pub json: bool,
    /// Stacks from jtap's wall-clock sampler over the interval, without the safepoint of a
    /// thread dump: each thread's heaviest path, with the share of its samples per frame (no
    /// Java states, locks or allocation rates: those come from the dump)
    #[arg(long, conflicts_with_all = ["blocked", "state"])]
    pub sampled: bool,
}

/// What `jtap threads` found.
#[derive(Debug, Serialize)]
pub struct ThreadsReport {
    /// The JVM's pid.
    pub pid: u32,
    /// How long CPU use was measured, in milliseconds.
    pub interval_ms: u64,
    /// How many threads the process has.
    pub thread_count: usize,
    /// The threads selected, busiest first.
    pub threads: Vec<ThreadRow>,
    /// Every thread waiting for a lock another thread holds (whatever the selection).
    pub blocked: Vec<BlockedRow>,
    /// The deadlocks the JVM reported, as the names of the threads in each cycle.
    pub deadlocks: Vec<Vec<String>>,
}

/// One thread: its CPU use and what the thread dump says about it.
#[derive(Debug, Serialize)]
pub struct ThreadRow {
    /// The native thread id (as seen from here).
    pub tid: u32,
    /// The Java name, else the kernel's name of the thread.
    pub name: String,
    /// Java state (`RUNNABLE`), empty for threads the dump does not show as Java threads.
    pub state: String,
    /// CPU use over the interval, in % of one core.
    pub cpu_percent: f64,
    /// CPU time since the thread started, in milliseconds.
    pub cpu_total_ms: u64,
    /// Bytes allocated on the Java heap per second over the interval (Java threads seen in
    /// both dumps).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alloc_bytes_per_second: Option<f64>,
    /// Wall-clock samples of the thread over the interval (`--sampled`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub samples: Option<u64>,
    /// Frames, innermost first (at most `--frames`); with `--sampled`, the thread's heaviest
    /// path, each frame with its share of the thread's samples.
    pub frames: Vec<String>,
    /// Frames left out.
    pub more_frames: usize,
}

/// A thread waiting for a lock, and who holds it.
#[derive(Debug, Serialize)]
pub struct BlockedRow {
    /// The waiting thread.
    pub thread: String,
    /// Its Java state.
    pub state: String,
    /// The lock's address and class, as the dump prints them.
    pub lock: String,
    /// The thread holding the lock, if the dump names it.
    pub holder: Option<String>,
    /// The waiting thread's innermost frame.
    pub at: Option<String>,
}

/// Measures and prints the busiest threads of JVM `args.pid`.
pub fn run(args: &ThreadsArgs, timeout: Duration) -> anyhow::Result<i32> {
    super::print_report(&collect(args, timeout)?, args.json, |r, out| {
        write_text(r, out)
    })
}

/// Samples CPU time over the interval, takes a thread dump (or, `--sampled`, a wall-clock
/// profile) and joins them.
pub fn collect(args: &ThreadsArgs, timeout: Duration) -> anyhow::Result<ThreadsReport> {
    if args.sampled {
        return collect_sampled(args, timeout);
    }
    let mut vm = VirtualMachine::attach(args.pid, &AttachOptions { timeout })?;
    let process = vm.process().clone();
    let allocated_before: HashMap<u32, u64> = (thread_dump(&mut vm)?.threads.iter())
        .filter_map(|t| Some((t.nid, t.allocated?)))
        .collect();
    let before = cpu_times(&process)?;
    thread::sleep(args.interval);
    let after = cpu_times(&process)?;
    let dump = thread_dump(&mut vm)?;
    let blocked = blocked_threads(&dump);
    let by_nid: HashMap<u32, &DumpedThread> = dump.threads.iter().map(|t| (t.nid, t)).collect();
    let cpu = CpuUse::new(args.interval.as_secs_f64());
    let threads: Vec<ThreadRow> = after
        .values()
        .map(|sample| {
            let dumped = by_nid.get(&sample.ns_tid).copied();
            let allocated = dumped
                .and_then(|t| Some(t.allocated?.saturating_sub(*allocated_before.get(&t.nid)?)));
            let frames = dumped.map_or(&[][..], |t| &t.frames[..]);
            let mut row = cpu.row(sample, before.get(&sample.tid), frames, args);
            if let Some(dumped) = dumped {
                row.name = dumped.name.clone();
                row.state = dumped.state.clone();
            }
            row.alloc_bytes_per_second =
                allocated.map(|bytes| bytes as f64 / args.interval.as_secs_f64());
            row
        })
        .filter(|row| selected(row, args, &blocked))
        .collect();
    Ok(ThreadsReport {
        pid: args.pid,
        interval_ms: args.interval.as_millis() as u64,
        thread_count: after.len(),
        threads: busiest(threads, args.top),
        blocked,
        deadlocks: dump.deadlocks,
    })
}

/// [`collect`] with `--sampled`: CPU time around a wall-clock profile of the interval.
fn collect_sampled(args: &ThreadsArgs, timeout: Duration) -> anyhow::Result<ThreadsReport> {
    let process = Process::open(args.pid)?;
    let before = cpu_times(&process)?;
    let started = std::time::Instant::now();
    let profile = sampled::record(args.pid, args.interval, timeout)?;
    let after = cpu_times(&process)?;
    let cpu = CpuUse::new(started.elapsed().as_secs_f64());
    let by_tid = sampled::by_thread(&profile);
    let threads = after
        .values()
        .map(|sample| {
            let seen = by_tid.get(&sample.ns_tid);
            let frames = seen.map(|t| t.frames()).unwrap_or_default();
            let mut row = cpu.row(sample, before.get(&sample.tid), &frames, args);
            if let Some(seen) = seen {
                row.name = seen.name.clone().unwrap_or(row.name);
                row.state = seen.state();
                row.samples = Some(seen.samples);
            }
            row
        })
        .collect();
    Ok(ThreadsReport {
        pid: args.pid,
        interval_ms: (cpu.seconds * 1e3) as u64,
        thread_count: after.len(),
        threads: busiest(threads, args.top),
        blocked: Vec::new(),
        deadlocks: Vec::new(),
    })
}

/// The `top` busiest threads (all for 0), busiest first.
fn busiest(mut threads: Vec<ThreadRow>, top: usize) -> Vec<ThreadRow> {
    threads.sort_by(|a, b| {
        b.cpu_percent
            .total_cmp(&a.cpu_percent)
            .then(b.cpu_total_ms.cmp(&a.cpu_total_ms))
    });
    if top > 0 {
        threads.truncate(top);
    }
    threads
}

/// One thread dump with locks and bytes allocated (`threaddump -l -e`, as `jstack -l -e`),
/// parsed.
pub fn thread_dump(vm: &mut VirtualMachine) -> anyhow::Result<ThreadDump> {
    // HotSpot reads the letters of the first argument.
    let mut reply = vm.execute(&Request::new("threaddump", ["-le".to_string()]))?;
    let text = reply.output_to_string()?;
    if reply.status != 0 {
        anyhow::bail!(
            "the JVM refused its thread dump: {}",
            text.lines().next().unwrap_or("no reason given")
        );
    }
    Ok(ThreadDump::parse(&text))
}

/// CPU use over an interval of `seconds`, in clock ticks of the kernel.
struct CpuUse {
    seconds: f64,
    ticks_per_second: f64,
}

impl CpuUse {
    fn new(seconds: f64) -> CpuUse {
        CpuUse {
            seconds,
            ticks_per_second: clock_ticks_per_second(),
        }
    }

    /// A thread's row: its kernel name, its CPU use since `before`, its first `--frames`
    /// frames.
    fn row(
        &self,
        sample: &CpuSample,
        before: Option<&CpuSample>,
        frames: &[String],
        args: &ThreadsArgs,
    ) -> ThreadRow {
        let seconds = |ticks: u64| ticks as f64 / self.ticks_per_second;
        let used = sample.ticks.saturating_sub(before.map_or(0, |b| b.ticks));
        let shown = frames.len().min(args.frames);
        ThreadRow {
            tid: sample.tid,
            name: sample.name.clone(),
            state: String::new(),
            cpu_percent: 100.0 * seconds(used) / self.seconds,
            cpu_total_ms: (seconds(sample.ticks) * 1e3) as u64,
            alloc_bytes_per_second: None,
            samples: None,
            frames: frames[..shown].to_vec(),
            more_frames: frames.len() - shown,
        }
    }
}

fn selected(row: &ThreadRow, args: &ThreadsArgs, blocked: &[BlockedRow]) -> bool {
    if args.state.as_ref().is_some_and(|state| &row.state != state) {
        return false;
    }
    !args.blocked || blocked.iter().any(|b| b.thread == row.name)
}

/// Threads waiting to enter a monitor or to acquire a synchronizer, with the holder.
fn blocked_threads(dump: &ThreadDump) -> Vec<BlockedRow> {
    dump.threads
        .iter()
        .filter_map(|thread| {
            let lock = thread.waiting_for.as_ref()?;
            let holder = dump.holder_of(&lock.address);
            if thread.state != "BLOCKED" && holder.is_none() {
                // Parked on a condition or a free synchronizer: waiting, not blocked.
                return None;
            }
            Some(BlockedRow {
                thread: thread.name.clone(),
                state: thread.state.clone(),
                lock: format!("<{}> (a {})", lock.address, lock.class),
                holder: holder.map(|h| h.name.clone()),
                at: thread.frames.first().cloned(),
            })
        })
        .collect()
}

/// CPU time of one thread so far.
pub struct CpuSample {
    /// The thread id, as seen from here.
    pub tid: u32,
    /// The id the JVM's pid namespace gives the thread (the dump's `nid`).
    pub ns_tid: u32,
    /// The kernel's name of the thread (`comm`).
    pub name: String,
    /// utime + stime, in clock ticks.
    pub ticks: u64,
}

/// Every thread's CPU time so far, keyed by tid (threads that ended meanwhile are skipped).
pub fn cpu_times(process: &Process) -> anyhow::Result<HashMap<u32, CpuSample>> {
    let task_dir = format!("/proc/{}/task", process.pid);
    let entries = fs::read_dir(&task_dir).with_context(|| format!("reading {task_dir}"))?;
    let in_container = process.ns_pid != process.pid;
    let mut samples = HashMap::new();
    for entry in entries.flatten() {
        let Some(tid) = entry.file_name().to_str().and_then(|t| t.parse().ok()) else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some((name, ticks)) = parse_stat(&stat) else {
            continue;
        };
        let ns_tid = if in_container {
            namespace_tid(&entry.path()).unwrap_or(tid)
        } else {
            tid
        };
        samples.insert(
            tid,
            CpuSample {
                tid,
                ns_tid,
                name,
                ticks,
            },
        );
    }
    Ok(samples)
}

/// `(comm, utime + stime)` from a `stat` line: `tid (comm) S ppid ...`, utime and stime
/// being fields 14 and 15; comm may hold spaces and parentheses.
fn parse_stat(stat: &str) -> Option<(String, u64)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let name = stat.get(open + 1..close)?.to_string();
    let fields: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
    // fields[0] is field 3 (state), so field N is fields[N - 3].
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((name, utime + stime))
}

/// The innermost id of `NSpid:` in a task's `status`.
fn namespace_tid(task: &std::path::Path) -> Option<u32> {
    let status = fs::read_to_string(task.join("status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("NSpid:"))?;
    line.split_whitespace().last()?.parse().ok()
}

/// The kernel's clock ticks per second, the unit of [`CpuSample::ticks`].
pub fn clock_ticks_per_second() -> f64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .filter(|&t| t > 0)
        .unwrap_or(100) as f64
}

/// `--state`: a `java.lang.Thread.State`, in any case, `-` or `_` between words.
pub fn parse_state(text: &str) -> Result<String, String> {
    const STATES: [&str; 6] = [
        "NEW",
        "RUNNABLE",
        "BLOCKED",
        "WAITING",
        "TIMED_WAITING",
        "TERMINATED",
    ];
    let state = text.trim().to_ascii_uppercase().replace('-', "_");
    if STATES.contains(&state.as_str()) {
        Ok(state)
    } else {
        Err(format!("not a thread state; one of {}", STATES.join(", ")))
    }
}

/// The report as text: busiest threads with stacks, then blocked threads, then deadlocks.
pub fn write_text(report: &ThreadsReport, out: &mut impl Write) -> io::Result<()> {
    writeln!(
        out,
        "JVM {}: {} threads; CPU over {} ms, busiest first",
        report.pid, report.thread_count, report.interval_ms
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "{:>8}  {:>7}  {:>10}  {:>10}  {:<14} NAME",
        "TID", "CPU%", "CPU TOTAL", "ALLOC/s", "STATE"
    )?;
    for thread in &report.threads {
        let state = if thread.state.is_empty() {
            "-"
        } else {
            &thread.state
        };
        writeln!(
            out,
            "{:>8}  {:>6.1}%  {:>10}  {:>10}  {:<14} {}",
            thread.tid,
            thread.cpu_percent,
            format!("{:.2}s", thread.cpu_total_ms as f64 / 1e3),
            thread
                .alloc_bytes_per_second
                .map_or_else(|| "-".into(), |rate| units::bytes(rate as u64)),
            state,
            thread.name
        )?;
        for frame in &thread.frames {
            writeln!(out, "{:>12}at {frame}", "")?;
        }
        if thread.more_frames > 0 && !thread.frames.is_empty() {
            writeln!(out, "{:>12}... {} more", "", thread.more_frames)?;
        }
    }
    if report.threads.is_empty() {
        writeln!(out, "(no thread matches)")?;
    }
    write_locks(report, out)
}

fn write_locks(report: &ThreadsReport, out: &mut impl Write) -> io::Result<()> {
    if !report.blocked.is_empty() {
        writeln!(out, "\nBlocked ({}):", report.blocked.len())?;
        for row in &report.blocked {
            let holder = row
                .holder
                .as_ref()
                .map_or("an unknown thread".to_string(), |h| format!("\"{h}\""));
            writeln!(
                out,
                "  \"{}\" ({}) waits for {} held by {holder}",
                row.thread, row.state, row.lock
            )?;
            if let Some(at) = &row.at {
                writeln!(out, "      at {at}")?;
            }
        }
    }
    for cycle in &report.deadlocks {
        let mut names: Vec<String> = cycle.iter().map(|n| format!("\"{n}\"")).collect();
        names.extend(names.first().cloned());
        writeln!(out, "\nDEADLOCK: {}", names.join(" -> "))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_cpu_ticks_of_names_with_spaces_and_parentheses() {
        let stat = "2260 (C2 (Compiler) 1) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 1 0 100";
        assert_eq!(parse_stat(stat), Some(("C2 (Compiler) 1".to_string(), 300)));
    }

    #[test]
    fn states_in_any_spelling() {
        assert_eq!(parse_state("timed-waiting").unwrap(), "TIMED_WAITING");
        assert!(parse_state("sleepy").unwrap_err().contains("RUNNABLE"));
    }
}
