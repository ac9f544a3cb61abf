//! `jtap convert IN -o OUT [filters]`: a recording or profile file into any of jtap's
//! formats. Reads JFR (jtap's, the JDK's `JFR.start` / `-XX:StartFlightRecording`,
//! async-profiler's) and collapsed stacks; keeps the events, time range, threads, stacks
//! and (`--latency`) slow calls asked for.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use jtap_profile::import::Wanted;
use jtap_profile::{Profile, Selection};
use regex::Regex;

use super::profile::{write_profiles, OutputArgs};
use crate::exit;

/// What `jtap convert` takes.
#[derive(clap::Args)]
pub struct ConvertArgs {
    /// The file to read: .jfr, or collapsed stacks
    input: PathBuf,
    /// Keep only these events (cpu, wall, native, alloc, lock; comma-separated)
    #[arg(short, long, value_delimiter = ',')]
    event: Vec<String>,
    /// Keep samples from this long after the recording's start (e.g. 10s)
    #[arg(long, value_parser = crate::units::parse_duration)]
    from: Option<Duration>,
    /// Keep samples until this long after the recording's start
    #[arg(long, value_parser = crate::units::parse_duration)]
    to: Option<Duration>,
    /// Each stack's root frame is its thread
    #[arg(long)]
    threads: bool,
    /// Keep only the samples of one request label (recorded with `profile --by`), as
    /// `label=VALUE` or `VALUE`
    #[arg(long, value_name = "LABEL")]
    by: Option<String>,
    /// Keep only stacks with a frame matching this regular expression
    #[arg(short = 'I', long)]
    include: Option<String>,
    /// Drop stacks with a frame matching this regular expression
    #[arg(short = 'X', long)]
    exclude: Option<String>,
    /// Keep only the samples a thread took inside a traced call (jdk.MethodTrace: jtap's
    /// `trace --profile`, JDK 25's method tracing) of at least this long
    #[arg(long, value_parser = crate::units::parse_duration)]
    latency: Option<Duration>,
    #[command(flatten)]
    output: OutputArgs,
}

/// Reads, selects and writes.
pub fn run(args: &ConvertArgs) -> anyhow::Result<i32> {
    let pattern = |p: &Option<String>| -> anyhow::Result<Option<Regex>> {
        p.as_deref()
            .map(|p| {
                Regex::new(p).map_err(|e| exit::usage(format!("bad regular expression {p:?}: {e}")))
            })
            .transpose()
    };
    let selection = Selection {
        from_ns: args.from.map(|d| d.as_nanos() as u64),
        to_ns: args.to.map(|d| d.as_nanos() as u64),
        include: pattern(&args.include)?,
        exclude: pattern(&args.exclude)?,
        threads: args.threads,
        labels: args
            .by
            .as_deref()
            .map_or_else(Default::default, |by| Selection::of_label(by).labels),
    };
    args.output.check()?;
    let bytes =
        std::fs::read(&args.input).with_context(|| format!("reading {}", args.input.display()))?;
    // Sample times and threads only when something uses them: reading counts per stack
    // alone is faster.
    let times = args.from.is_some()
        || args.to.is_some()
        || args.threads
        || args.latency.is_some()
        || args.output.needs_timeline();
    let read = |events: &[String]| {
        jtap_profile::import::read(&bytes, &args.input, &Wanted { events, times })
            .map_err(|e| anyhow::anyhow!("{}: {e}", args.input.display()))
    };
    // Only the events asked for are decoded.
    let profiles = read(&args.event)?;
    let events_of = |profiles: &[Profile]| -> Vec<String> {
        profiles.iter().map(|p| p.metadata.event.clone()).collect()
    };
    if let Some(missing) = args
        .event
        .iter()
        .find(|e| !events_of(&profiles).contains(e))
    {
        let available = events_of(&read(&[])?);
        return Err(exit::usage(format!(
            "{} holds no {missing} samples (it holds: {})",
            args.input.display(),
            if available.is_empty() {
                "none".to_string()
            } else {
                available.join(", ")
            }
        )));
    }
    let profiles: Vec<Profile> = profiles
        .iter()
        .filter(|p| args.event.is_empty() || args.event.contains(&p.metadata.event))
        .map(|p| match args.latency {
            Some(threshold) => p
                .during_calls_over(threshold.as_nanos() as u64)
                .and_then(|slow| slow.select(&selection)),
            None => p.select(&selection),
        })
        .collect::<Result<_, _>>()
        .map_err(exit::usage)?;
    if profiles.is_empty() {
        anyhow::bail!("{} holds no samples jtap reads", args.input.display());
    }
    write_profiles(&args.output, &profiles)?;
    Ok(0)
}
