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
    /// Wall-clock time at `origin`, in ns since the Unix epoch.
    origin_wall_ns: u64,
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
    match CLOCK.get() {
        #[cfg(target_arch = "x86_64")]
        Some(c) if c.tsc => super::ffi::rdtsc(),
        Some(c) => c.origin.elapsed().as_nanos() as u64,
        None => 0,
    }
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
        let origin = Instant::now();
        let origin_wall_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let tsc = invariant_tsc();
        let read = || -> u64 {
            #[cfg(target_arch = "x86_64")]
            if tsc {
                return super::ffi::rdtsc();
            }
            origin.elapsed().as_nanos() as u64
        };
        let origin_ticks = read();
        let origin_coarse_ns = super::ffi::monotonic_coarse_ns();
        let ns_per_tick = if tsc {
            let (t0, i0) = (read(), Instant::now());
            std::thread::sleep(Duration::from_millis(20));
            let (t1, i1) = (read(), Instant::now());
            let ticks = t1.saturating_sub(t0).max(1) as f64;
            (i1 - i0).as_nanos() as f64 / ticks
        } else {
            1.0
        };
        Clock {
            tsc,
            ns_per_tick,
            origin_ticks,
            origin,
            origin_wall_ns,
            origin_coarse_ns,
        }
    }

    /// Ticks as nanoseconds.
    pub fn ns(&self, ticks: u64) -> u64 {
        (ticks as f64 * self.ns_per_tick) as u64
    }

    /// Nanoseconds as ticks (for thresholds compared on the hot path).
    pub fn ticks_for(&self, ns: u64) -> u64 {
        (ns as f64 / self.ns_per_tick) as u64
    }

    /// Wall-clock time of a tick reading, in ns since the Unix epoch.
    pub fn wall_ns(&self, ticks: u64) -> u64 {
        let since = ticks as i128 - self.origin_ticks as i128;
        (self.origin_wall_ns as i128 + (since as f64 * self.ns_per_tick) as i128).max(0) as u64
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

    #[test]
    fn ticks_measure_elapsed_time() {
        let c = clock();
        let t0 = ticks();
        std::thread::sleep(Duration::from_millis(50));
        let ms = c.ns(ticks() - t0) as f64 / 1e6;
        assert!(
            (45.0..200.0).contains(&ms),
            "{ms} ms for a 50 ms sleep ({})",
            c.name()
        );
        assert!(c.ticks_for(c.ns(1_000_000)).abs_diff(1_000_000) <= 2);
        let coarse = coarse_ticks();
        let diff_ms = (coarse as f64 - ticks() as f64).abs() * c.ns(1_000_000) as f64 / 1e6 / 1e6;
        assert!(diff_ms < 20.0, "coarse clock {diff_ms} ms off");
    }
}
