//! `cargo bench -p jtap-classfile`: parse+write and full instrumentation of every class of
//! JDK 17's java.base, on one core. Prints a table; target: instrumentation under 1 s.

#[path = "../tests/common/mod.rs"]
mod common;

use std::fs;
use std::time::{Duration, Instant};

use jtap_classfile::inject::instrument_class;
use jtap_classfile::plan::{Point, Registry};
use jtap_classfile::{ClassFile, InjectionPlan};

/// CPU time of this thread (from /proc/thread-self/schedstat), so that other processes on a
/// shared machine do not inflate the figures; wall time where unavailable.
fn cpu_time() -> Option<Duration> {
    let s = fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    Some(Duration::from_nanos(
        s.split_whitespace().next()?.parse().ok()?,
    ))
}

fn best_of(runs: usize, mut f: impl FnMut()) -> Duration {
    (0..runs)
        .map(|_| {
            let (t, c) = (Instant::now(), cpu_time());
            f();
            match (c, cpu_time()) {
                (Some(a), Some(b)) => b - a,
                _ => t.elapsed(),
            }
        })
        .min()
        .unwrap_or_default()
}

fn main() {
    let Some(dir) = common::jdk_modules(common::JDK17, "jdk17") else {
        return;
    };
    let classes: Vec<Vec<u8>> = common::class_files(&dir.join("java.base"))
        .iter()
        .map(|p| fs::read(p).unwrap())
        .collect();
    let bytes: usize = classes.iter().map(Vec::len).sum();
    let plan = InjectionPlan::everything("jtap/runtime/Probes");

    let round_trip = best_of(5, || {
        for c in &classes {
            let cf = ClassFile::parse(c).unwrap();
            std::hint::black_box(cf.write());
        }
    });
    // Entry, return, exception exit and calls (before and after, with the call's exceptions):
    // the "full instrumentation" of the verification tests, minus lines, fields, allocations
    // and monitors.
    let mut full = plan.clone();
    full.probes.retain(|p| {
        matches!(
            p.point,
            Point::Entry
                | Point::Return
                | Point::ExceptionExit
                | Point::BeforeCall(_)
                | Point::AfterCall(_)
        )
    });
    let run = |plan: &InjectionPlan, stats: &mut (usize, usize, usize)| {
        let mut registry = Registry::default();
        *stats = (0, 0, 0);
        for c in &classes {
            let out = instrument_class(c, plan, &mut registry).unwrap();
            stats.0 += out.methods_instrumented;
            stats.1 += out.bytes.len();
            std::hint::black_box(out.bytes);
        }
        stats.2 = registry.sites.len();
    };
    let (mut s_full, mut s_all) = ((0, 0, 0), (0, 0, 0));
    let t_full = best_of(3, || run(&full, &mut s_full));
    let t_all = best_of(3, || run(&plan, &mut s_all));
    println!(
        "java.base (JDK 17): {} classes, {:.1} MiB, one core (thread CPU time, best run)",
        classes.len(),
        bytes as f64 / 1048576.0
    );
    println!(
        "{:<44} {:>8} {:>15} {:>9} {:>9} {:>9}",
        "operation", "time", "classes/s/core", "methods", "sites", "out MiB"
    );
    let rows = [
        ("parse + write", round_trip, (0, bytes, 0)),
        ("entry+return+exception+call probes", t_full, s_full),
        (
            "every probe kind (+lines,fields,allocs,locks)",
            t_all,
            s_all,
        ),
    ];
    for (name, d, (m, out, sites)) in rows {
        println!(
            "{:<44} {:>6.0}ms {:>15.0} {:>9} {:>9} {:>9.1}",
            name,
            d.as_secs_f64() * 1000.0,
            classes.len() as f64 / d.as_secs_f64(),
            m,
            sites,
            out as f64 / 1048576.0
        );
    }
}
