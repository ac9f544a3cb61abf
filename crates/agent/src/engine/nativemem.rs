//! The nativemem engine: native memory allocated by the JVM's libraries and JNI code
//! (`malloc`, `calloc`, `realloc`, `posix_memalign`, `aligned_alloc`), sampled by bytes through
//! the allocator hooks of [`crate::hooks::malloc`], with native and Java stacks.
//!
//! Each sample is recorded at its site ([`crate::hooks::site`]): the allocating function as the
//! leaf, then the native frames, then the Java frames. Like `-e alloc`, a
//! sample stands for about one interval of bytes (a larger block for itself). With `live`, a
//! sampled block is tracked until it is freed: the profile then holds only what is still
//! allocated at the end, the leaks.
//!
//! Cost: one thread-local counter update per allocation, and per
//! sample about a microsecond for the stacks; with `live`, a table lookup per `free`.

#![deny(unsafe_code)]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use jtap_jvmti::Capabilities;
use jtap_profile::Metadata;
use jtap_protocol::Options;

use super::{Context, Engine, Report};
use crate::heap::sites::Part;
use crate::hooks::malloc::{self, Allocation};
use crate::hooks::site::{Recording, Sites};

/// Default mean bytes between samples.
pub const DEFAULT_INTERVAL: u64 = 512 * 1024;

static SITES: Sites = Sites::new();
static INTERVAL: AtomicU64 = AtomicU64::new(DEFAULT_INTERVAL);
static TRACK_LIVE: AtomicBool = AtomicBool::new(false);

/// The engine.
#[derive(Default)]
pub struct NativeMemEngine {
    run: Option<Run>,
}

struct Run {
    recording: Recording,
    interval: u64,
    live: bool,
}

impl Engine for NativeMemEngine {
    fn name(&self) -> &'static str {
        "nativemem"
    }

    /// None on the agent's environment: the hook engines' own resolves methods.
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }

    fn start(&mut self, context: &Context, options: &Options) -> Result<(), String> {
        let interval = options.nativemem.flatten().unwrap_or(DEFAULT_INTERVAL);
        let recording = SITES.start("nativemem", context.vm, options)?;
        INTERVAL.store(interval, Ordering::SeqCst);
        TRACK_LIVE.store(options.live, Ordering::SeqCst);
        let on_free: Option<malloc::OnFree> = options.live.then_some(on_free as malloc::OnFree);
        if let Err(e) = malloc::install(interval, on_allocation, on_free) {
            SITES.stop(recording);
            return Err(format!("nativemem: {e}"));
        }
        self.run = Some(Run {
            recording,
            interval,
            live: options.live,
        });
        Ok(())
    }

    fn dump(&self) -> Report {
        match &self.run {
            Some(run) => run.report(),
            None => Report::Text("nativemem: not running".into()),
        }
    }

    fn stop(&mut self, _context: &Context) -> Report {
        let Some(run) = self.run.take() else {
            return Report::Text("nativemem: not running".into());
        };
        malloc::uninstall();
        let report = run.report();
        SITES.stop(run.recording);
        report
    }
}

impl Run {
    fn report(&self) -> Report {
        let metadata = Metadata {
            event: if self.live {
                "nativemem-live"
            } else {
                "nativemem"
            }
            .into(),
            engine: "nativemem".into(),
            interval: self.interval,
            weight_unit: "bytes".into(),
            ..Metadata::default()
        };
        let part = if self.live { Part::Live } else { Part::Total };
        Report::Profile(Box::new(SITES.profile(&self.recording, part, metadata)))
    }
}

/// A sampled allocation, on the allocating thread: its stacks, recorded at its site.
fn on_allocation(allocation: &Allocation) {
    let interval = INTERVAL.load(Ordering::Relaxed) as f64;
    let (count, weight) = super::alloc::estimate(allocation.size as f64, interval);
    let tag = TRACK_LIVE
        .load(Ordering::Relaxed)
        .then_some(allocation.address as i64);
    SITES.record(
        &allocation.caller,
        allocation.function.name(),
        count,
        weight,
        tag,
    );
}

/// A freed block (`live`): no longer tracked.
fn on_free(address: usize) {
    // No gate: the table lives for the process, and a free is far too frequent for a shared
    // counter.
    let table = SITES.table();
    if table.live_objects() > 0 {
        table.freed(address as i64);
    }
}
