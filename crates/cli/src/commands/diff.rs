//! `jtap diff BASE NEW [-e EVENT] [-o diff.html]`: what changed between two profiles of any
//! format `jtap convert` reads — a differential flame graph, or on stdout the frames whose
//! share changed most.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use jtap_profile::export::diff;
use jtap_profile::{write_atomically, Counter, ExportOptions, Profile};

use crate::exit;

/// What `jtap diff` takes.
#[derive(clap::Args)]
pub struct DiffArgs {
    /// The profile to compare with (.jfr, collapsed)
    base: PathBuf,
    /// The newer profile
    new: PathBuf,
    /// The event to compare (default: the first both hold)
    #[arg(short, long)]
    event: Option<String>,
    /// Differential flame graph (.html); without it, a table on stdout
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// What stacks are counted by: samples, total or objects
    #[arg(long, value_parser = super::profile::parse_counter)]
    counter: Option<Counter>,
    /// Frames per source line, not per method
    #[arg(long)]
    lines: bool,
    /// Rows of the table
    #[arg(short = 'n', long = "top", default_value_t = 20)]
    top: usize,
}

/// Reads both, picks the event, writes the comparison.
pub fn run(args: &DiffArgs) -> anyhow::Result<i32> {
    if let Some(path) = &args.output {
        if !path.to_string_lossy().ends_with(".html") {
            return Err(exit::usage(format!(
                "{}: a differential flame graph is HTML; name the file .html",
                path.display()
            )));
        }
    }
    let read = |path: &PathBuf| -> anyhow::Result<Vec<Profile>> {
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        jtap_profile::import::read(&bytes, path, &Default::default())
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
    };
    let (base, new) = (read(&args.base)?, read(&args.new)?);
    let events = |profiles: &[Profile]| -> Vec<String> {
        profiles.iter().map(|p| p.metadata.event.clone()).collect()
    };
    let event = match &args.event {
        Some(event) => event.clone(),
        None => events(&new)
            .into_iter()
            .find(|e| events(&base).contains(e))
            .ok_or_else(|| {
                exit::usage(format!(
                    "the two hold no event in common ({}: {}; {}: {})",
                    args.base.display(),
                    events(&base).join(", "),
                    args.new.display(),
                    events(&new).join(", ")
                ))
            })?,
    };
    let pick = |profiles: &[Profile], path: &PathBuf| -> anyhow::Result<Profile> {
        profiles
            .iter()
            .find(|p| p.metadata.event == event)
            .cloned()
            .ok_or_else(|| exit::usage(format!("{} holds no {event} samples", path.display())))
    };
    let (base, new) = (pick(&base, &args.base)?, pick(&new, &args.new)?);
    let options = ExportOptions {
        counter: args.counter,
        lines: args.lines,
        top: args.top,
        ..ExportOptions::default()
    };
    match &args.output {
        Some(path) => {
            write_atomically(path, &diff::render_html(&base, &new, &options))
                .with_context(|| format!("writing {}", path.display()))?;
            println!("{}", path.display());
        }
        None => {
            std::io::stdout()
                .lock()
                .write_all(diff::render_table(&base, &new, &options).as_bytes())?;
        }
    }
    Ok(0)
}
