//! The probes' clock: the CPU's invariant time-stamp counter where the kernel says it is one
//! (`constant_tsc` and `nonstop_tsc`), a few nanoseconds per read against ~27 ns for
//! `System.nanoTime()`; otherwise the monotonic clock. Ticks are converted to nanoseconds
//! only off the hot path, with a rate measured against `CLOCK_MONOTONIC` once per process.
//!
//! For long thresholds the probes can read [`coarse_ticks`] instead: the kernel's coarse
//! monotonic clock (the last timer tick, ~10 ns to read against ~25 ns for the TSC on these
//! VMs), expressed in ticks of the same scale.

use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Tick rate and origin.
pub struct Clock {
    /// Read the TSC (else the monotonic clock, in ns since `origin`).
    tsc: bool,
    /// Nanoseconds per tick.
    ns_per_tick: f64,
    /// Ticks at `origin`.
    origin_ticks: u64,
    origin: Instant,
    /// `CLOCK_MONOTONIC_COARSE` at `origin`, in ns.
    origin_coarse_ns: u64,
}

static CLOCK: OnceLock<Clock> = OnceLock::new();

/// The process's clock, calibrated on first use (takes ~20 ms then).
pub fn clock() -> &'static Clock {
    CLOCK.get_or_init(Clock::calibrate)
}

/// The current tick count: a raw TSC read, or monotonic nanoseconds.
#[inline(always)]
pub fn ticks() -> u64 {
    // The clock is calibrated before any probe can run (the engine starts it first).
    CLOCK.get().map_or(0, Clock::read)
}

/// The coarse clock (resolution 1/HZ) in ticks of [`ticks`]'s scale.
#[inline(always)]
pub fn coarse_ticks() -> u64 {
    match CLOCK.get() {
        Some(c) => {
            let since = super::ffi::monotonic_coarse_ns() as i64 - c.origin_coarse_ns as i64;
            (c.origin_ticks as i64 + (since as f64 / c.ns_per_tick) as i64).max(0) as u64
        }
        None => 0,
    }
}

fn invariant_tsc() -> bool {
    if !cfg!(target_arch = "x86_64") {
        return false;
    }
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let flags = info.lines().find(|l| l.starts_with("flags")).unwrap_or("");
    let has = |f: &str| flags.split_whitespace().any(|w| w == f);
    has("constant_tsc") && has("nonstop_tsc")
}

impl Clock {
    fn calibrate() -> Clock {
        Clock::new(invariant_tsc())
    }

    /// A clock reading the TSC (`tsc`, rate measured over 20 ms) or the monotonic clock.
    fn new(tsc: bool) -> Clock {
        let origin = Instant::now();
        let mut clock = Clock {
            tsc,
            ns_per_tick: 1.0,
            origin_ticks: 0,
            origin,
            origin_coarse_ns: super::ffi::monotonic_coarse_ns(),
        };
        clock.origin_ticks = clock.read();
        if tsc {
            let (t0, i0) = clock.paired_reading();
            std::thread::sleep(Duration::from_millis(20));
            let (t1, i1) = clock.paired_reading();
            let ticks = t1.saturating_sub(t0).max(1) as f64;
            clock.ns_per_tick = (i1 - i0).as_nanos() as f64 / ticks;
        }
        clock
    }

    /// A tick count and the monotonic clock read together: of a few tries, the one whose
    /// ticks bracket the monotonic read most tightly (a thread preempted between the two
    /// reads would otherwise skew the rate by the time it waited).
    fn paired_reading(&self) -> (u64, Instant) {
        (0..5)
            .map(|_| {
                let before = self.read();
                let instant = Instant::now();
                let after = self.read();
                (
                    after.saturating_sub(before),
                    before + (after - before) / 2,
                    instant,
                )
            })
            .min_by_key(|&(width, _, _)| width)
            .map(|(_, ticks, instant)| (ticks, instant))
            .expect("five tries")
    }

    /// The current tick count of this clock.
    #[inline(always)]
    fn read(&self) -> u64 {
        #[cfg(target_arch = "x86_64")]
        if self.tsc {
            return super::ffi::rdtsc();
        }
        self.origin.elapsed().as_nanos() as u64
    }

    /// Ticks as nanoseconds, rounded to the nearest.
    pub fn ns(&self, ticks: u64) -> u64 {
        (ticks as f64 * self.ns_per_tick).round() as u64
    }

    /// Nanoseconds as ticks, rounded to the nearest (for thresholds compared on the hot
    /// path).
    pub fn ticks_for(&self, ns: u64) -> u64 {
        (ns as f64 / self.ns_per_tick).round() as u64
    }

    /// Wall-clock time of a recent tick reading, in ns since the Unix epoch: counted back
    /// from now, so that the measured rate's error scales the reading's age (milliseconds
    /// on the report thread) rather than the time since calibration (the JVM's uptime),
    /// and the times line up with the profilers' samples.
    pub fn wall_ns(&self, ticks: u64) -> u64 {
        let now_ticks = self.read();
        let now_wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i128);
        let age = now_ticks as i128 - ticks as i128;
        (now_wall - (age as f64 * self.ns_per_tick) as i128).max(0) as u64
    }

    /// Which clock the probes read.
    pub fn name(&self) -> &'static str {
        if self.tsc {
            "tsc"
        } else {
            "monotonic"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A clock of a given rate, as a machine with that TSC frequency would calibrate it.
    fn clock_at(ns_per_tick: f64) -> Clock {
        Clock {
            ns_per_tick,
            ..Clock::new(false)
        }
    }

    #[test]
    fn conversions_round_trip_within_a_tick_and_a_nanosecond_at_any_rate() {
        // 0.2 ns/tick is a 5 GHz TSC, 0.385 the 2.6 GHz machine of issue #18, 1.0 the
        // monotonic clock, 3.7 a slow 270 MHz counter.
        for ns_per_tick in [0.2, 0.3333, 0.385, 0.41, 1.0, 3.7] {
            let c = clock_at(ns_per_tick);
            // ns() rounds: an error of at most half a nanosecond, which ticks_for() turns
            // into 0.5 / ns_per_tick ticks, plus its own half-tick rounding.
            let bound = (0.5 / ns_per_tick + 0.5).ceil() as u64;
            assert!(bound <= 1 + (1.0 / ns_per_tick).ceil() as u64);
            for ticks in [
                0,
                1,
                2,
                3,
                999,
                1_000_000,
                2_600_000_017,
                u32::MAX as u64 * 7,
            ] {
                let back = c.ticks_for(c.ns(ticks));
                assert!(
                    back.abs_diff(ticks) <= bound,
                    "{ticks} ticks -> {} ns -> {back} ticks at {ns_per_tick} ns/tick",
                    c.ns(ticks)
                );
            }
            for ns in [0, 1, 10, 1_000_000, 3_000_000_000] {
                let back = c.ns(c.ticks_for(ns));
                let bound = (ns_per_tick / 2.0 + 0.5).ceil() as u64;
                assert!(back.abs_diff(ns) <= bound, "{ns} ns -> {back} ns");
            }
        }
    }

    #[test]
    fn tick_readings_map_to_the_wall_clock_time_they_were_taken() {
        let c = clock();
        let wall = || {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        };
        let (before, ticks, after) = (wall(), c.read(), wall());
        std::thread::sleep(Duration::from_millis(30));
        let at = c.wall_ns(ticks);
        // Read 30 ms ago: within a millisecond of when (the rate's error over 30 ms).
        assert!(
            (before - 1_000_000..=after + 1_000_000).contains(&at),
            "{at} not in {before}..{after}"
        );
    }

    #[test]
    fn the_monotonic_clock_measures_elapsed_time() {
        let c = Clock::new(false);
        assert_eq!(c.name(), "monotonic");
        let t0 = c.read();
        std::thread::sleep(Duration::from_millis(20));
        let ns = c.ns(c.read() - t0);
        // A sleep lasts at least as asked; the upper bound only catches a unit error.
        assert!(
            (20_000_000..2_000_000_000).contains(&ns),
            "{ns} ns for 20 ms"
        );
    }

    /// Needs an invariant TSC (`constant_tsc` and `nonstop_tsc` in /proc/cpuinfo); says so
    /// and checks the monotonic fallback instead where there is none.
    #[test]
    fn the_process_clock_measures_elapsed_time() {
        let c = clock();
        if !c.tsc {
            eprintln!("no invariant TSC here: the probes use the monotonic clock");
        }
        let t0 = ticks();
        std::thread::sleep(Duration::from_millis(50));
        let ms = c.ns(ticks() - t0) as f64 / 1e6;
        assert!(
            (45.0..2000.0).contains(&ms),
            "{ms} ms for a 50 ms sleep ({})",
            c.name()
        );
        let coarse = coarse_ticks();
        let diff_ms = c.ns((coarse as i128 - ticks() as i128).unsigned_abs() as u64) as f64 / 1e6;
        assert!(diff_ms < 20.0, "coarse clock {diff_ms} ms off");
    }
}
