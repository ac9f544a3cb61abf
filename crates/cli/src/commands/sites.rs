//! `jtap sites <pid> [-d 30s] [-n 20] [--depth 8] [--json]`: where the live heap was allocated — an
//! HPROF-style SITES report from jtap's allocation engine (`start,event=alloc,sites`): sites
//! ranked by live bytes, with live and allocated bytes and objects, `% self` (share of all
//! live bytes) and `% accum`, the class and the stack.
//!
//! The engine samples allocations for the duration (`--exact`: records every one), tracking
//! which sampled objects are still alive; the report is taken when it stops. Objects become "not alive" only when a
//! collection has freed them, so garbage made since the last collection still counts as
//! live — unless `--gc` runs a full collection (`jcmd GC.run`) just before the report.
//!
//! `--leaks` (`--min-age N`, default 2): the leak suspects instead — the sites whose sampled
//! objects are still alive after surviving N or more of the collections seen while recording,
//! ranked by those objects' bytes, with how fast they grew, between how many collections
//! they were born (a leak keeps some from every interval, a cache filled once from one) and
//! the oldest's age. Garbage never survives two collections, so sites whose objects are all
//! collected do not show, however much they allocate. For the first three suspects the report
//! gives the paths from a GC root to two of their oldest objects, field by field: a walk of
//! the heap's references at the end, which pauses the application as a heap dump does.
//!
//! `-o FILE` also writes the sites listed as a profile of live bytes by stack (the bytes of
//! the old survivors with `--leaks`), the class as the leaf frame, in any of `profile`'s
//! formats by the file's extension: a flame graph of where the live heap (or the leak) was
//! allocated.

use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use jtap_attach::{AttachOptions, Request, VirtualMachine};
use jtap_client::{interrupt, AgentError, Asked};
use jtap_profile::{
    Frame as StackFrame, FrameKind, Metadata, OldObject, PathStep, Profile, StackCounts, StackId,
};
use jtap_protocol::records::sites::{Amount, Recording, Survivors};
use jtap_protocol::records::{Record, Sites};
use jtap_protocol::{Action, Ended, Event, Frame, Options};

/// What `jtap sites` asks for.
#[derive(clap::Args)]
pub struct SitesArgs {
    /// How long to sample
    #[arg(short, long, default_value = "30s", value_parser = crate::units::parse_duration)]
    pub duration: Duration,
    /// Print the N sites with the most live bytes
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
    /// Print the leak suspects: sites whose sampled objects survived collections (--min-age)
    #[arg(long)]
    pub leaks: bool,
    /// With --leaks: collections an object must have survived to count (implies --leaks)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub min_age: Option<u32>,
    /// Print the report as JSON
    #[arg(long)]
    pub json: bool,
    /// Also write the sites listed as a profile of their live bytes (with --leaks, of their
    /// old survivors); the extension picks the format (.html .pb.gz .jfr .collapsed ...)
    #[arg(short, long)]
    pub output: Vec<PathBuf>,
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
        leaks,
        min_age,
        json,
        ref output,
    } = *args;
    let options = Options {
        action: Some(Action::Start),
        event: Some(Event::Alloc),
        sites: true,
        live: true,
        jstackdepth: Some(depth),
        alloc: alloc_interval.map(Some),
        exact,
        leaks: (leaks || min_age.is_some()).then_some(min_age),
        ..Options::default()
    };
    // This client owns the engine: if it dies, the agent stops the engine by itself. Without
    // --gc the agent ends the engine at the duration and sends the report; with it, this
    // client runs the collection first and then asks for the report.
    let options = Options {
        duration: (!gc).then_some(duration),
        ..options
    };
    let conversation = jtap_client::Conversation::open(pid, &options, timeout)?;
    // The duration counts from the engine's start (instrumenting classes for --exact takes
    // seconds on a busy JVM), as the agent counts its own.
    let engine_start = conversation.engine_start();
    let recorded = || engine_start.get().map(Instant::elapsed);
    let collected = AtomicBool::new(false);
    let gc_failed = std::sync::Mutex::new(None);
    let stop_now = || {
        if !gc
            || recorded().is_none_or(|recorded| recorded < duration)
            || collected.swap(true, Ordering::SeqCst)
        {
            return false;
        }
        if let Err(e) = full_gc(pid, timeout) {
            *gc_failed.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
        }
        true
    };
    let mut report = None;
    // Ctrl-C ends the collection early; the report of what was recorded is still printed.
    let ctrl_c = interrupt::session_takes();
    let outcome = jtap_client::supervise(
        conversation,
        Some(duration).filter(|_| !gc),
        &stop_now,
        &mut |_| {},
        |conversation| {
            conversation.finish(
                &mut io::stderr(),
                Some(&mut |frame| {
                    if let Frame::Record(bytes) = frame {
                        if let Record::Sites(sites) =
                            Record::decode(&bytes).map_err(AgentError::Channel)?
                        {
                            report = Some(sites);
                        }
                    }
                    Ok(())
                }),
            )
        },
    );
    drop(ctrl_c);
    let (why, asked) = outcome?;
    if asked == Asked::Interrupted {
        let seconds = recorded().unwrap_or_default().as_secs_f64();
        eprintln!("jtap: interrupted after {seconds:.1} s; reporting what was recorded");
    }
    if let Some(e) = gc_failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    if !matches!(why, Ended::DurationElapsed | Ended::Stopped) {
        anyhow::bail!("the allocation engine ended before the report was taken ({why})");
    }
    let mut report = report.context("the agent sent no SITES report")?;
    report.keep_first(top);
    // The files first: a report piped into `head` ends jtap at its next line.
    let profiles = match output.is_empty() {
        true => Vec::new(),
        false => vec![as_profile(&report)],
    };
    let files = super::profile::OutputArgs::files(output.clone());
    let written = super::profile::write_files(&files, &profiles)?;
    let mut out = io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        writeln!(out, "{}", report.to_text())?;
    }
    for file in &written {
        writeln!(out, "{}", file.display())?;
    }
    drop(out);
    if !written.is_empty() {
        super::profile::say_what_was_written(&profiles);
    }
    Ok(0)
}

/// The label of a leak profile's stacks of the old objects born in the earlier half of the
/// collection intervals they can have been born in.
const EARLIER_HALF: &str = "born in the earlier half";
/// The label of those born in the later half: a leak's, not a cache's filled once.
const LATER_HALF: &str = "born in the later half";

/// The sites of a report as a profile of their live bytes (of their old survivors in a leak
/// report, each stack under the label of the half of the window they were born in, with the
/// old objects whose paths from a GC root it found), each stack ending in the class
/// allocated.
fn as_profile(report: &Sites) -> Profile {
    let leaks = report.sites.iter().any(|s| s.survivors.is_some());
    let seconds = match report.recorded {
        Recording::Exact { seconds, .. } | Recording::Sampled { seconds, .. } => seconds,
    };
    let now_ns = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut profile = Profile::new(Metadata {
        event: "alloc".into(),
        engine: if leaks { "leaks" } else { "sites" }.into(),
        weight_unit: "bytes".into(),
        // No later than the first old object's allocation, which the agent timed.
        start_time_ns: (report.sites.iter().flat_map(|s| &s.paths))
            .map(|path| path.allocated_ns)
            .fold(now_ns.saturating_sub((seconds * 1e9) as u64), u64::min),
        duration_ns: (seconds * 1e9) as u64,
        ..Metadata::default()
    });
    for site in &report.sites {
        // `pkg.Class.method:line`, top first.
        let mut frames: Vec<StackFrame> = (site.frames.iter().rev())
            .map(|frame| {
                let (method, line) = match frame.rsplit_once(':') {
                    Some((method, line)) => (method, line.parse().ok()),
                    None => (frame.as_str(), None),
                };
                StackFrame::java(method, FrameKind::Compiled, None, line)
            })
            .collect();
        frames.push(StackFrame::new(site.class.clone(), FrameKind::Class));
        let stack = match &site.survivors {
            None => profile.add_frame_counts(&frames, counts(&site.live)),
            Some(survivors) => match add_by_half(&mut profile, &frames, survivors) {
                Some(stack) => stack,
                None => continue,
            },
        };
        for path in &site.paths {
            let steps = path.steps.iter().enumerate();
            profile.add_old_object(OldObject {
                stack,
                class: site.class.clone(),
                allocated_ns: path.allocated_ns,
                age_ns: path.age_ns,
                bytes: path.bytes,
                array_length: path.array_length,
                path: steps.map(|(i, s)| PathStep::parse(s, i == 0)).collect(),
            });
        }
    }
    profile
}

/// The counts of `amount`'s objects.
fn counts(amount: &Amount) -> StackCounts {
    StackCounts {
        samples: amount.objects.round() as u64,
        weight: amount.bytes.round() as u64,
        events: amount.objects.round() as u64,
    }
}

/// Adds a leak suspect's old objects to `profile` twice over, under the label of the half of
/// the window they were born in (the later half's graph shows what still grows). Returns the
/// stack its oldest objects stand on (the earlier half's when it has any); None when nothing
/// survived.
fn add_by_half(
    profile: &mut Profile,
    frames: &[StackFrame],
    survivors: &Survivors,
) -> Option<StackId> {
    let earlier = Amount {
        bytes: survivors.old.bytes - survivors.later.bytes,
        objects: survivors.old.objects - survivors.later.objects,
    };
    let mut stack = None;
    for (half, amount) in [(LATER_HALF, &survivors.later), (EARLIER_HALF, &earlier)] {
        if amount.bytes > 0.0 {
            let labelled: Vec<StackFrame> = std::iter::once(StackFrame::request_label(half))
                .chain(frames.iter().cloned())
                .collect();
            stack = Some(profile.add_frame_counts(&labelled, counts(amount)));
        }
    }
    stack
}

/// A full collection through the attach `jcmd GC.run`. The collection clears the weak
/// references of the objects it frees, and the engine's last sweep, at the stop, takes them
/// out of the live counts.
fn full_gc(pid: u32, timeout: Duration) -> anyhow::Result<()> {
    let mut vm = VirtualMachine::attach(pid, &AttachOptions { timeout })?;
    let mut reply = vm.execute(&Request::new("jcmd", ["GC.run".to_string()]))?;
    let text = reply.output_to_string()?;
    anyhow::ensure!(reply.status == 0, "GC.run failed: {}", text.trim());
    Ok(())
}
