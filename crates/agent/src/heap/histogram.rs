//! The class histogram: how many instances of each class the heap holds, and how many bytes.
//!
//! The "tag only the class objects" method: every loaded class's `java.lang.Class` object gets
//! its index + 1 as tag, then one `IterateThroughHeap` with `JVMTI_HEAP_FILTER_CLASS_UNTAGGED`
//! visits each object whose class is tagged and adds its size to the counters at its class's
//! tag. No object other than the class objects is ever tagged, so the VM's tag map stays
//! as small as the number of classes.
//!
//! It runs in a JVMTI environment of its own ([`OwnEnv`]), created for one histogram and
//! disposed of after it, so it never disturbs the tags, capabilities or callbacks of a running
//! engine. The classes are untagged before the environment (and with it `can_tag_objects`)
//! goes. With
//! `live`, a full collection (`ForceGarbageCollection`) runs first, as `jcmd
//! GC.class_histogram` does; without it, unreachable objects not yet collected are counted too.
//!
//! The heap walk happens at a safepoint: the JVM's threads stand still for its duration
//! (the record gives it, as `walk_ms`).

use std::ffi::c_void;
use std::time::Instant;

use jtap_jvmti::{sys, Env};
use jtap_protocol::records::{ClassRow, Histogram};
use jtap_protocol::Options;

use crate::heap::env::OwnEnv;
use crate::thread::Vm;
use jtap_classfile::descriptor::java_name;

/// Instances and bytes of one class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Counts {
    instances: u64,
    bytes: u64,
}

/// One class's line of the histogram.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Row {
    name: String,
    counts: Counts,
}

/// Timings of the two pauses a histogram causes, in milliseconds.
struct Timings {
    gc_ms: Option<f64>,
    walk_ms: f64,
}

/// Computes the histogram `options` asks for (`live`, `top`): classes largest by bytes
/// first, totals over all classes, and the pauses it took.
pub fn run(vm: Vm, options: &Options) -> Result<Histogram, String> {
    let own = OwnEnv::new(vm, &["can_tag_objects"])?;
    if own.env().phase() != Ok(sys::JVMTI_PHASE_LIVE) {
        return Err("a histogram needs a running JVM (not at start-up or shutdown)".into());
    }
    let (rows, timings) = histogram(vm, own.env(), options.live)?;
    Ok(to_record(&rows, options.top.map(|n| n as usize), &timings))
}

fn histogram(vm: Vm, env: &Env, live: bool) -> Result<(Vec<Row>, Timings), String> {
    let gc_ms = if live {
        let started = Instant::now();
        env.force_garbage_collection().map_err(|e| e.to_string())?;
        Some(started.elapsed().as_secs_f64() * 1e3)
    } else {
        None
    };
    let _frame = vm
        .local_frame(64)
        .ok_or("this thread is not attached to the VM")?;
    let classes = env.loaded_classes().map_err(|e| e.to_string())?;
    let tagged = tag_classes(env, &classes);
    let counted = tagged.and_then(|()| walk_heap(env, classes.len()));
    untag_classes(env, &classes);
    let (counts, walk_ms) = counted?;
    let mut rows = Vec::new();
    for (class, counts) in classes.iter().zip(&counts[1..]) {
        if counts.instances == 0 {
            continue;
        }
        // SAFETY: `class` is one of the local references GetLoadedClasses made in our frame.
        let name = match unsafe { env.class_signature(*class) } {
            Ok(signature) => java_name(&signature),
            Err(e) => format!("<unknown class: {e}>"),
        };
        rows.push(Row {
            name,
            counts: *counts,
        });
    }
    rows.sort_by(|a, b| {
        b.counts
            .bytes
            .cmp(&a.counts.bytes)
            .then(b.counts.instances.cmp(&a.counts.instances))
            .then(a.name.cmp(&b.name))
    });
    Ok((rows, Timings { gc_ms, walk_ms }))
}

fn tag_classes(env: &Env, classes: &[sys::jclass]) -> Result<(), String> {
    for (index, class) in classes.iter().enumerate() {
        // SAFETY: a local reference GetLoadedClasses made in our frame.
        unsafe { env.set_tag(*class, index as i64 + 1) }.map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn untag_classes(env: &Env, classes: &[sys::jclass]) {
    for class in classes {
        // SAFETY: a local reference GetLoadedClasses made in our frame.
        if let Err(e) = unsafe { env.set_tag(*class, 0) } {
            log!("histogram: untagging: {e}");
            return;
        }
    }
}

/// Counts per class tag (index 0 unused); and the walk's duration in ms.
fn walk_heap(env: &Env, classes: usize) -> Result<(Vec<Counts>, f64), String> {
    let mut counts = vec![Counts::default(); classes + 1];
    let callbacks = sys::jvmtiHeapCallbacks {
        heap_iteration_callback: Some(count_object),
        ..Default::default()
    };
    let started = Instant::now();
    // SAFETY: null class (all classes); the callback only touches `counts` through user_data,
    // which outlives the call and is used by the one thread running the callbacks.
    unsafe {
        env.iterate_through_heap(
            sys::JVMTI_HEAP_FILTER_CLASS_UNTAGGED as sys::jint,
            std::ptr::null_mut(),
            &callbacks,
            (&mut counts as *mut Vec<Counts>).cast::<c_void>(),
        )
    }
    .map_err(|e| e.to_string())?;
    Ok((counts, started.elapsed().as_secs_f64() * 1e3))
}

/// Heap iteration callback: adds one object to its class's counters. Runs at a safepoint in
/// the VM's thread; must not panic (it cannot unwind into the VM), hence no indexing.
unsafe extern "C" fn count_object(
    class_tag: sys::jlong,
    size: sys::jlong,
    _tag: *mut sys::jlong,
    _length: sys::jint,
    user_data: *mut c_void,
) -> sys::jint {
    // SAFETY: user_data is the `&mut Vec<Counts>` walk_heap passed, alive and not otherwise
    // borrowed while IterateThroughHeap runs.
    let counts = unsafe { &mut *user_data.cast::<Vec<Counts>>() };
    if let Some(slot) = usize::try_from(class_tag)
        .ok()
        .and_then(|i| counts.get_mut(i))
    {
        slot.instances += 1;
        slot.bytes += size.max(0) as u64;
    }
    sys::JVMTI_VISIT_OBJECTS as sys::jint
}

/// The record of the `top` largest rows, with totals over all of them.
fn to_record(rows: &[Row], top: Option<usize>, timings: &Timings) -> Histogram {
    Histogram {
        classes: rows
            .iter()
            .take(top.unwrap_or(usize::MAX))
            .enumerate()
            .map(|(rank, row)| ClassRow {
                rank: rank as u32 + 1,
                name: row.name.clone(),
                instances: row.counts.instances,
                bytes: row.counts.bytes,
            })
            .collect(),
        total_instances: rows.iter().map(|r| r.counts.instances).sum(),
        total_bytes: rows.iter().map(|r| r.counts.bytes).sum(),
        class_count: rows.len() as u64,
        walk_ms: timings.walk_ms,
        gc_ms: timings.gc_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_the_top_rows_and_totals_all_of_them() {
        let row = |name: &str, instances, bytes| Row {
            name: name.into(),
            counts: Counts { instances, bytes },
        };
        let rows = [
            row("byte[]", 10, 1000),
            row("java.lang.String", 20, 480),
            row("workloads.A$B", 1, 16),
        ];
        let timings = Timings {
            gc_ms: Some(3.26),
            walk_ms: 1.5,
        };
        let record = to_record(&rows, Some(2), &timings);
        let shown: Vec<(u32, &str)> = record
            .classes
            .iter()
            .map(|c| (c.rank, c.name.as_str()))
            .collect();
        assert_eq!(shown, [(1, "byte[]"), (2, "java.lang.String")]);
        assert_eq!(
            (
                record.total_instances,
                record.total_bytes,
                record.class_count
            ),
            (31, 1496, 3)
        );
        assert_eq!((record.walk_ms, record.gc_ms), (1.5, Some(3.26)));
    }
}
