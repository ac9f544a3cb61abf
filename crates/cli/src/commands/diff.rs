//! `jtap diff BASE NEW [-e EVENT] [-o diff.html]`: what changed between two profiles of any
//! format `jtap convert` reads — a differential flame graph, or on stdout the frames whose
//! share changed most. `--base-by A --by B` compares two request labels (`profile --by`), of
//! one recording when NEW is left out.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use jtap_profile::export::diff;
use jtap_profile::{write_atomically, Counter, ExportOptions, Profile, Selection, LABEL_PREFIX};

use crate::exit;

/// What `jtap diff` takes.
#[derive(clap::Args)]
pub struct DiffArgs {
    /// The profile to compare with (.jfr, collapsed)
    base: PathBuf,
    /// The newer profile (default: BASE, to compare two of its labels)
    new: Option<PathBuf>,
    /// Only NEW's samples of this request label (recorded with `profile --by`)
    #[arg(long, value_name = "LABEL")]
    by: Option<String>,
    /// Only BASE's samples of this request label
    #[arg(long = "base-by", value_name = "LABEL")]
    base_by: Option<String>,
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
    let new_path = match (&args.new, &args.by, &args.base_by) {
        (Some(new), _, _) => new,
        (None, Some(_), _) | (None, _, Some(_)) => &args.base,
        (None, None, None) => {
            return Err(exit::usage(
                "give NEW, or --base-by and --by to compare two request labels of BASE",
            ))
        }
    };
    let (base, new) = (read(&args.base)?, read(new_path)?);
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
                    new_path.display(),
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
    let base = labelled(
        pick(&base, &args.base)?,
        args.base_by.as_deref(),
        &args.base,
    )?;
    let new = labelled(pick(&new, new_path)?, args.by.as_deref(), new_path)?;
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

/// The samples of `profile` under request label `label` (all of them when None), without the
/// label's frame; an error naming the labels it has when it has none of that one.
fn labelled(profile: Profile, label: Option<&str>, path: &Path) -> anyhow::Result<Profile> {
    let Some(label) = label else {
        return Ok(profile);
    };
    let selection = Selection::of_label(label);
    let selected = profile.select(&selection).map_err(exit::usage)?;
    if selected.total_samples() > 0 {
        return Ok(selected);
    }
    let label = label.strip_prefix(LABEL_PREFIX).unwrap_or(label);
    let labels: Vec<&str> = (profile.labels(Counter::Samples).into_iter())
        .map(|(label, _)| label)
        .collect();
    Err(exit::usage(match labels.is_empty() {
        true => format!(
            "{}: no request labels (record with `jtap profile --by`)",
            path.display()
        ),
        false => format!(
            "{}: no {} samples labelled {label:?}; its labels: {}",
            path.display(),
            profile.metadata.event,
            labels.join(", ")
        ),
    }))
}
