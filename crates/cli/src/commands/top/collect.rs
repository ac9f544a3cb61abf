//! What each refresh of `jtap top` reads without the agent: every thread's CPU time from
//! `/proc`, Java names and states from a thread dump taken every `--dump-every` (a brief
//! safepoint), and the VM's counters (heap, pools, GC, safepoints, compilations) from its
//! hsperfdata file.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use jtap_attach::discovery::read_perf_data;
use jtap_attach::perfdata::PerfData;
use jtap_attach::process::Process;
use jtap_attach::{AttachOptions, VirtualMachine};

use super::super::thread_dump::DumpedThread;
use super::super::threads::{clock_ticks_per_second, cpu_times, thread_dump, CpuSample};

/// Reads one refresh after another from a JVM.
pub struct Sampler {
    vm: VirtualMachine,
    process: Process,
    dump_every: Duration,
    ticks_per_second: f64,
    java: HashMap<u32, DumpedThread>,
    last_dump: Option<Instant>,
    before: HashMap<u32, CpuSample>,
    before_at: Instant,
    previous_perf: Option<PerfData>,
}

/// One refresh: the threads by CPU over the interval and the VM's counters.
pub struct Snapshot {
    /// CPU used by all threads over the interval, in % of one core.
    pub total_cpu: f64,
    /// Every thread, busiest first.
    pub threads: Vec<ThreadRow>,
    /// The hsperfdata counters; None when the JVM runs with `-XX:-UsePerfData`.
    pub vm: Option<VmStats>,
}

/// One thread of a refresh.
#[derive(Clone)]
pub struct ThreadRow {
    /// The kernel's thread id, as seen from here.
    pub tid: u32,
    /// The JVM's own id of it (the thread dump's `nid`).
    pub ns_tid: u32,
    /// CPU over the interval, in % of one core.
    pub cpu: f64,
    /// CPU used since the thread started, in seconds.
    pub cpu_seconds: f64,
    /// `java.lang.Thread.State` at the last thread dump, `-` if unknown.
    pub state: String,
    /// The Java name, or the kernel's for threads the last dump did not see.
    pub name: String,
    /// The innermost frame at the last thread dump.
    pub top_frame: Option<String>,
}

/// The VM's counters from hsperfdata, with what changed since the previous refresh.
pub struct VmStats {
    /// Heap used, committed and maximum, in bytes.
    pub heap: [Option<i64>; 3],
    /// Each heap space and the metaspace: name, used, capacity, maximum in bytes.
    pub pools: Vec<(String, i64, i64, i64)>,
    /// Each collector: name, collections, new ones, total time in ms.
    pub collectors: Vec<(String, i64, i64, f64)>,
    /// Safepoints so far, new ones, total time in ms.
    pub safepoints: (i64, i64, f64),
    /// JIT compilations so far, new ones.
    pub compilations: Option<(i64, i64)>,
}

impl Sampler {
    /// Attaches to JVM `pid` (for its thread dumps) and reads the first CPU times.
    pub fn new(pid: u32, dump_every: Duration, timeout: Duration) -> anyhow::Result<Sampler> {
        let vm = VirtualMachine::attach(pid, &AttachOptions { timeout })?;
        let process = vm.process().clone();
        let before = cpu_times(&process)?;
        let previous_perf = read_perf_data(&process);
        Ok(Sampler {
            vm,
            process,
            dump_every,
            ticks_per_second: clock_ticks_per_second(),
            java: HashMap::new(),
            last_dump: None,
            before,
            before_at: Instant::now(),
            previous_perf,
        })
    }

    /// Whether the JVM still runs.
    pub fn alive(&self) -> bool {
        self.process.is_alive()
    }

    /// Takes a thread dump if the last one is `--dump-every` old (or there is none).
    pub fn dump_if_due(&mut self) -> anyhow::Result<()> {
        if self
            .last_dump
            .is_none_or(|at| at.elapsed() >= self.dump_every)
        {
            self.dump_now()?;
        }
        Ok(())
    }

    /// Takes a thread dump now.
    fn dump_now(&mut self) -> anyhow::Result<()> {
        let dump = thread_dump(&mut self.vm)?;
        self.java = dump.threads.into_iter().map(|t| (t.nid, t)).collect();
        self.last_dump = Some(Instant::now());
        Ok(())
    }

    /// A fresh thread dump's view of one thread (by its JVM id), None if it has ended.
    pub fn stack_of(&mut self, ns_tid: u32) -> anyhow::Result<Option<DumpedThread>> {
        self.dump_now()?;
        Ok(self.java.get(&ns_tid).cloned())
    }

    /// The threads' CPU since the previous call, and the VM's counters now.
    pub fn sample(&mut self) -> anyhow::Result<Snapshot> {
        let after = cpu_times(&self.process)?;
        let seconds = self.before_at.elapsed().as_secs_f64().max(1e-3);
        let perf = read_perf_data(&self.process);
        let mut threads: Vec<ThreadRow> = after
            .values()
            .map(|s| {
                let used = s.ticks - self.before.get(&s.tid).map_or(0, |b| b.ticks.min(s.ticks));
                let java = self.java.get(&s.ns_tid);
                ThreadRow {
                    tid: s.tid,
                    ns_tid: s.ns_tid,
                    cpu: 100.0 * used as f64 / self.ticks_per_second / seconds,
                    cpu_seconds: s.ticks as f64 / self.ticks_per_second,
                    state: java
                        .map(|j| j.state.as_str())
                        .filter(|s| !s.is_empty())
                        .unwrap_or("-")
                        .to_string(),
                    name: java.map_or(&s.name, |j| &j.name).clone(),
                    top_frame: java.and_then(|j| j.frames.first().cloned()),
                }
            })
            .collect();
        threads.sort_by(|a, b| {
            b.cpu
                .total_cmp(&a.cpu)
                .then(b.cpu_seconds.total_cmp(&a.cpu_seconds))
        });
        let vm = perf
            .as_ref()
            .map(|p| VmStats::read(p, self.previous_perf.as_ref()));
        self.before = after;
        self.before_at = Instant::now();
        self.previous_perf = perf;
        Ok(Snapshot {
            total_cpu: threads.iter().map(|t| t.cpu).sum(),
            threads,
            vm,
        })
    }
}

impl VmStats {
    fn read(perf: &PerfData, previous: Option<&PerfData>) -> VmStats {
        let frequency = perf
            .long("sun.os.hrt.frequency")
            .unwrap_or(1_000_000_000)
            .max(1) as f64;
        let ms = |ticks: i64| ticks as f64 * 1e3 / frequency;
        let new = |name: &str, now: i64| {
            now - previous.and_then(|p| p.long(name)).unwrap_or(now).min(now)
        };
        let mut collectors = Vec::new();
        for collector in 0..4 {
            let key = |field: &str| format!("sun.gc.collector.{collector}.{field}");
            let Some(count) = perf.long(&key("invocations")) else {
                continue;
            };
            let name = perf.text(&key("name")).unwrap_or("gc").to_string();
            let time = perf.long(&key("time")).unwrap_or(0);
            collectors.push((name, count, new(&key("invocations"), count), ms(time)));
        }
        let safepoints = perf.long("sun.rt.safepoints").unwrap_or(0);
        VmStats {
            heap: [
                perf.sum_matching("sun.gc.generation.", 2, ".used"),
                perf.sum_matching("sun.gc.generation.", 0, ".capacity"),
                perf.heap_max(),
            ],
            pools: pools(perf),
            collectors,
            safepoints: (
                safepoints,
                new("sun.rt.safepoints", safepoints),
                ms(perf.long("sun.rt.safepointTime").unwrap_or(0)),
            ),
            compilations: perf
                .long("sun.ci.totalCompiles")
                .map(|c| (c, new("sun.ci.totalCompiles", c))),
        }
    }
}

/// The heap's spaces (eden, survivors, old) and the metaspace; a generation of one space
/// (G1's old, ZGC's) goes by the generation's name.
fn pools(perf: &PerfData) -> Vec<(String, i64, i64, i64)> {
    let mut pools = Vec::new();
    for generation in 0..3 {
        let spaces = perf
            .long(&format!("sun.gc.generation.{generation}.spaces"))
            .unwrap_or(0);
        for space in 0..spaces.clamp(0, 8) {
            let key = |field: &str| format!("sun.gc.generation.{generation}.space.{space}.{field}");
            let Some(used) = perf.long(&key("used")) else {
                continue;
            };
            let name = match spaces {
                1 => perf.text(&format!("sun.gc.generation.{generation}.name")),
                _ => perf.text(&key("name")),
            };
            pools.push((
                name.unwrap_or("space").to_string(),
                used,
                perf.long(&key("capacity")).unwrap_or(0),
                perf.long(&key("maxCapacity")).unwrap_or(0),
            ));
        }
    }
    if let Some(used) = perf.long("sun.gc.metaspace.used") {
        pools.push((
            "metaspace".into(),
            used,
            perf.long("sun.gc.metaspace.capacity").unwrap_or(0),
            perf.long("sun.gc.metaspace.maxCapacity").unwrap_or(0),
        ));
    }
    pools
}

/// Bytes as mebibytes, `?` when unknown.
pub fn mib(bytes: Option<i64>) -> String {
    bytes.map_or("?".into(), |b| format!("{}M", b / (1024 * 1024)))
}
