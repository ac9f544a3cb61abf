//! The `wall` engine: wall-clock sampling. A `jtap-wall` thread wakes every interval (default
//! 50 ms) and sends SIGVTALRM with `tgkill` to up to [`THREADS_PER_TICK`] threads, taking the
//! process's Java threads (with `allthreads`, all its threads: GC, compiler, VM and native
//! threads too) in turn, whatever they are doing. Each sample is labelled with what the
//! thread was doing when signalled (`[running]`, or `[sleeping]`: blocked in a system call —
//! sleep, wait, park, monitor, I/O) and weighs its share of wall time. A thread that has not
//! run since a sample found it asleep is not signalled again: its next samples repeat that
//! one (see `sampling::idle`). A thread waiting for a CPU when its next tick comes has its
//! last signal still pending, and the kernel merges the two: its next sample stands for
//! every tick signalled since its last (see `sampling::owed`). Ticks come at random
//! intervals averaging the interval (uniform between half and one and a half of it): at a
//! fixed period, a workload with a period of its own (threads taking turns every few
//! milliseconds) was sampled in phase with it, and the shares of its methods were off by up to
//! 9 points.

#![deny(unsafe_code)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use jtap_jvmti::Capabilities;
use jtap_protocol::{Event, Options};

use super::{Context, Engine, Report};
use crate::sampling::signal::{Source, WALL_SIGNAL};
use crate::sampling::threads::{self, OWN_THREAD_PREFIX};
use crate::sampling::{self, timers, Sampler, Settings};

/// Default wall-clock interval.
const WALL_INTERVAL: Duration = Duration::from_millis(50);
/// Most threads signalled per tick.
pub const THREADS_PER_TICK: usize = 16;
/// How often the thread list is read again.
const REFRESH_THREADS: Duration = Duration::from_millis(20);

/// The engine.
#[derive(Default)]
pub struct WallEngine {
    sampler: Option<Arc<Sampler>>,
    stop: Arc<AtomicBool>,
    ticker: Option<JoinHandle<()>>,
}

impl Engine for WallEngine {
    fn name(&self) -> &'static str {
        "wall"
    }

    fn capabilities(&self) -> Capabilities {
        sampling::capabilities()
    }

    fn start(&mut self, context: &Context, options: &Options) -> Result<(), String> {
        let period = options.interval_of(Event::Wall).unwrap_or(WALL_INTERVAL);
        let settings = Settings::from_options(options, "wall", "wall", period, Source::Tgkill)?;
        let sampler = Arc::new(Sampler::start(context.env, context.vm, settings)?);
        self.stop.store(false, Ordering::SeqCst);
        let (stop, ticking) = (self.stop.clone(), sampler.clone());
        let all_threads = options.allthreads;
        let spawned = std::thread::Builder::new()
            .name("jtap-wall".into())
            .spawn(move || {
                crate::thread::mark_own_thread();
                tick(&ticking, &stop, period, all_threads)
            });
        match spawned {
            Ok(handle) => self.ticker = Some(handle),
            Err(e) => {
                if let Ok(sampler) = Arc::try_unwrap(sampler) {
                    sampler.stop();
                }
                return Err(format!("cannot start the jtap-wall thread: {e}"));
            }
        }
        self.sampler = Some(sampler);
        Ok(())
    }

    fn dump(&self) -> Report {
        Report::so_far(self.sampler.as_deref())
    }

    fn progress(&self) -> Option<(u64, u64)> {
        self.sampler.as_ref().map(|s| s.progress())
    }

    fn stop(&mut self, _context: &Context) -> Report {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(ticker) = self.ticker.take() {
            let _ = ticker.join();
        }
        let profile = self
            .sampler
            .take()
            .and_then(|s| Arc::try_unwrap(s).ok())
            .map(Sampler::stop);
        Report::Profile(Box::new(profile.unwrap_or_default()))
    }
}

/// The `jtap-wall` thread: signal the next threads (Java threads only unless `all_threads`)
/// in turn every `period`.
fn tick(sampler: &Sampler, stop: &AtomicBool, period: Duration, all_threads: bool) {
    let mut own: HashMap<i32, bool> = HashMap::new();
    let mut tids: Vec<i32> = Vec::new();
    let mut refreshed: Option<Instant> = None;
    let mut cursor = 0usize;
    let mut rng = fastrand::Rng::new();
    let mut jittered = || period.mul_f64(0.5 + rng.f64());
    let mut next = Instant::now() + jittered();
    while !stop.load(Ordering::SeqCst) {
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        }
        next = (next + jittered()).max(Instant::now());
        if refreshed.is_none_or(|at| at.elapsed() >= REFRESH_THREADS) {
            let listed = threads::tasks();
            own.retain(|tid, _| listed.contains(tid));
            tids = listed
                .into_iter()
                .filter(|&tid| {
                    !*own.entry(tid).or_insert_with(|| {
                        threads::kernel_name(tid).is_some_and(|n| n.starts_with(OWN_THREAD_PREFIX))
                    }) && (all_threads || sampler.is_java_thread(tid))
                })
                .collect();
            tids.sort_unstable();
            sampler.forget_ended_threads(|tid| tids.binary_search(&tid).is_ok());
            refreshed = Some(Instant::now());
        }
        if tids.is_empty() {
            continue;
        }
        let per_tick = tids.len().min(THREADS_PER_TICK);
        // Each thread is signalled once every tids/per_tick ticks: that much wall time per sample.
        sampler.set_sample_weight(
            (period.as_nanos() as u64).saturating_mul(tids.len() as u64) / per_tick as u64,
        );
        for i in 0..per_tick {
            let tid = tids[(cursor + i) % tids.len()];
            if sampler.counted_asleep(tid) {
                continue;
            }
            sampler.owe_tick(tid);
            timers::signal_thread(tid, WALL_SIGNAL);
        }
        cursor = (cursor + per_tick) % tids.len();
    }
}
