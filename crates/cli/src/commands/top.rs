//! `jtap top <pid> [-n 10] [-i 1s] [--iterations N] [--dump-every 10s]`: a refreshed view of
//! a JVM — heap, GC, safepoints and compilations from its hsperfdata, and its threads by CPU
//! with their Java names and states.
//!
//! Each refresh reads `/proc` and the hsperfdata file only (no pause). Java names and states
//! come from a thread dump (a brief safepoint) taken at the start and then every
//! `--dump-every`; threads started since the last dump show their kernel name. On a
//! terminal each refresh redraws the screen; otherwise each is printed as a block of lines.

use std::collections::HashMap;
use std::io::{self, IsTerminal, Write};
use std::time::{Duration, Instant};

use jtap_attach::discovery::read_perf_data;
use jtap_attach::perfdata::PerfData;
use jtap_attach::{AttachOptions, VirtualMachine};

use super::thread_dump::DumpedThread;
use super::threads::{clock_ticks_per_second, cpu_times, thread_dump, CpuSample};
use crate::{local_time, units};

/// The command line of `jtap top`.
#[derive(clap::Args, Debug, Clone)]
pub struct TopArgs {
    /// Pid of the target JVM
    pub pid: u32,
    /// Threads to show, busiest first
    #[arg(short = 'n', long = "threads", default_value_t = 10)]
    pub threads: usize,
    /// Time between refreshes (e.g. 1s, 500ms)
    #[arg(short = 'i', long = "interval", default_value = "1s", value_parser = units::parse_duration)]
    pub interval: Duration,
    /// Stop after this many refreshes (default: until Ctrl-C or the JVM's exit)
    #[arg(long)]
    pub iterations: Option<u64>,
    /// How often to take a thread dump for Java names and states (a brief safepoint each)
    #[arg(long, default_value = "10s", value_parser = units::parse_duration)]
    pub dump_every: Duration,
}

/// What a thread dump said about a thread, by native id.
struct JavaThread {
    name: String,
    state: String,
    top_frame: Option<String>,
}

/// Refreshes the view until `--iterations`, Ctrl-C (which ends jtap) or the JVM's exit.
pub fn run(args: &TopArgs, timeout: Duration) -> anyhow::Result<i32> {
    let mut vm = VirtualMachine::attach(args.pid, &AttachOptions { timeout })?;
    let process = vm.process().clone();
    let redraw = io::stdout().is_terminal();
    let ticks_per_second = clock_ticks_per_second();
    let mut java_threads = HashMap::new();
    let mut last_dump: Option<Instant> = None;
    let mut before = cpu_times(&process)?;
    let mut previous_perf = read_perf_data(&process);
    let mut refreshes = 0;
    while args.iterations.is_none_or(|n| refreshes < n) {
        if last_dump.is_none_or(|at| at.elapsed() >= args.dump_every) {
            java_threads = by_native_id(&thread_dump(&mut vm)?.threads);
            last_dump = Some(Instant::now());
        }
        let started = Instant::now();
        std::thread::sleep(args.interval);
        if !process.is_alive() {
            eprintln!("jtap: JVM {} exited", args.pid);
            return Ok(0);
        }
        let after = cpu_times(&process)?;
        let perf = read_perf_data(&process);
        let seconds = started.elapsed().as_secs_f64();
        let mut out = io::stdout().lock();
        if redraw {
            write!(out, "\x1b[H\x1b[2J")?;
        }
        let cpu = |s: &CpuSample| {
            let used = s.ticks - before.get(&s.tid).map_or(0, |b| b.ticks.min(s.ticks));
            100.0 * used as f64 / ticks_per_second / seconds
        };
        let total_cpu: f64 = after.values().map(cpu).sum();
        write_header(
            &mut out,
            args.pid,
            total_cpu,
            after.len(),
            perf.as_ref(),
            previous_perf.as_ref(),
        )?;
        let mut rows: Vec<(&CpuSample, f64)> = after.values().map(|s| (s, cpu(s))).collect();
        rows.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.ticks.cmp(&a.0.ticks)));
        writeln!(
            out,
            "{:>8}  {:>6}  {:<14} {:<32} TOP FRAME",
            "TID", "CPU%", "STATE", "NAME"
        )?;
        for (sample, percent) in rows.into_iter().take(args.threads) {
            let java = java_threads.get(&sample.ns_tid);
            let line = format!(
                "{:>8}  {:>5.1}%  {:<14} {:<32} {}",
                sample.tid,
                percent,
                java.map_or("-", |j| j.state.as_str()),
                java.map_or(sample.name.as_str(), |j| j.name.as_str()),
                java.and_then(|j| j.top_frame.as_deref()).unwrap_or("")
            );
            writeln!(out, "{}", line.trim_end())?;
        }
        writeln!(out)?;
        out.flush()?;
        before = after;
        previous_perf = perf;
        refreshes += 1;
    }
    Ok(0)
}

/// The local time of day, `hh:mm:ss`.
fn clock_time() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let local = (now + local_time::utc_offset_seconds(now)).rem_euclid(86_400);
    format!(
        "{:02}:{:02}:{:02}",
        local / 3600,
        local % 3600 / 60,
        local % 60
    )
}

fn by_native_id(threads: &[DumpedThread]) -> HashMap<u32, JavaThread> {
    threads
        .iter()
        .map(|t| {
            let java = JavaThread {
                name: t.name.clone(),
                state: if t.state.is_empty() {
                    "-".into()
                } else {
                    t.state.clone()
                },
                top_frame: t.frames.first().cloned(),
            };
            (t.nid, java)
        })
        .collect()
}

/// `hh:mm:ss JVM <pid>: CPU 103% of a core, 27 threads`, then heap, GC, safepoints and
/// compilations from hsperfdata, with what changed since the previous refresh.
fn write_header(
    out: &mut impl Write,
    pid: u32,
    total_cpu: f64,
    thread_count: usize,
    perf: Option<&PerfData>,
    previous: Option<&PerfData>,
) -> io::Result<()> {
    writeln!(
        out,
        "{} JVM {pid}: CPU {total_cpu:.0}% of a core, {thread_count} threads",
        clock_time()
    )?;
    let Some(perf) = perf else {
        return writeln!(
            out,
            "(no hsperfdata: heap and GC unknown; -XX:-UsePerfData?)\n"
        );
    };
    let mib = |v: Option<i64>| v.map_or("?".into(), |b| format!("{}M", b / (1024 * 1024)));
    writeln!(
        out,
        "heap {} used / {} committed / {} max",
        mib(perf.sum_matching("sun.gc.generation.", 2, ".used")),
        mib(perf.sum_matching("sun.gc.generation.", 0, ".capacity")),
        mib(perf.heap_max()),
    )?;
    let frequency = perf
        .long("sun.os.hrt.frequency")
        .unwrap_or(1_000_000_000)
        .max(1) as f64;
    let ms = |ticks: i64| ticks as f64 * 1e3 / frequency;
    let counter = |data: Option<&PerfData>, name: &str| data.and_then(|d| d.long(name));
    let mut gc = Vec::new();
    for collector in 0..4 {
        let key = |field: &str| format!("sun.gc.collector.{collector}.{field}");
        let Some(count) = perf.long(&key("invocations")) else {
            continue;
        };
        let name = perf.text(&key("name")).unwrap_or("gc").to_string();
        let time = perf.long(&key("time")).unwrap_or(0);
        let new = count - counter(previous, &key("invocations")).unwrap_or(count);
        gc.push(format!("{name} {count} (+{new}) {:.0} ms", ms(time)));
    }
    let safepoints = perf.long("sun.rt.safepoints").unwrap_or(0);
    let new_safepoints = safepoints - counter(previous, "sun.rt.safepoints").unwrap_or(safepoints);
    let safepoint_ms = ms(perf.long("sun.rt.safepointTime").unwrap_or(0));
    writeln!(
        out,
        "gc {}; safepoints {safepoints} (+{new_safepoints}) {safepoint_ms:.0} ms; compilations {}\n",
        if gc.is_empty() { "?".into() } else { gc.join(", ") },
        perf.long("sun.ci.totalCompiles").map_or("?".into(), |c| c.to_string()),
    )
}
