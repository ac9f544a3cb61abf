//! `jtap inspect <pid> CLASS [-n 5] [--path a.b.c] [--static NAME] [--json]`: instances of a
//! class and their fields (or the value at a path of fields), or one of its static fields,
//! described without running any Java code: strings by their contents, boxed values, enums,
//! other objects as `Class@identityhash`, arrays by type and length.
//!
//! jtap's agent answers (the `inspect` action, see the agent's `heap::inspect`): one JVMTI
//! heap walk filtered to the class counts its instances and tags the first `-n`, and their
//! fields are read with JNI. No heap dump, no full GC, no file.

use std::io::{self, Write};
use std::time::Duration;

use anyhow::Context;
use jtap_client::AgentError;
use jtap_protocol::options::{MAX_INSPECT, MAX_PATH};
use jtap_protocol::records::{Inspection, Record};
use jtap_protocol::{Action, Frame, Options};

use crate::exit;

/// The command line of `jtap inspect`.
#[derive(clap::Args, Debug, Clone)]
pub struct InspectArgs {
    /// Pid of the target JVM
    pub pid: u32,
    /// The class, by its full Java name (com.acme.Cache, com.acme.Outer$Inner)
    pub class: String,
    /// Show at most N instances (at most 1000; all are counted)
    #[arg(short = 'n', long = "limit", default_value_t = 5)]
    pub limit: u32,
    /// Show this static field of the class instead of instances
    #[arg(long = "static", value_name = "NAME")]
    pub static_field: Option<String>,
    /// Show only the value at this path of fields of each instance (owner, cache.map.size)
    #[arg(long, conflicts_with = "static_field")]
    pub path: Option<String>,
    /// Print the result as JSON
    #[arg(long)]
    pub json: bool,
}

/// Asks the agent, prints the instances or the static.
pub fn run(args: &InspectArgs, timeout: Duration) -> anyhow::Result<i32> {
    if let Some(path) = &args.path {
        let steps = path.split('.');
        if steps.clone().any(str::is_empty) || steps.count() > MAX_PATH {
            return Err(exit::usage(format!(
                "bad field path {path:?}: field names joined by dots, at most {MAX_PATH}"
            )));
        }
    }
    if args.limit == 0 || args.limit > MAX_INSPECT {
        return Err(exit::usage(format!(
            "-n takes 1 to {MAX_INSPECT} instances"
        )));
    }
    let mut options = Options::default().with_action(Action::Inspect);
    options.class = Some(args.class.clone());
    options.limit = Some(args.limit);
    options.path = args.path.clone();
    options.static_field = args.static_field.clone();
    options
        .validate()
        .map_err(|e| exit::usage(format!("inspect: {e}")))?;
    let inspection = ask_agent(args.pid, &options, timeout)?;
    if let Some(problem) = inspection.problem() {
        return Err(exit::usage(match inspection.classes.is_empty() {
            true => problem.replacen(
                " is not loaded",
                &format!(" is not loaded in JVM {}", args.pid),
                1,
            ),
            false => problem,
        }));
    }
    let mut out = io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&inspection)?)?;
    } else {
        write!(out, "{}", inspection.to_text())?;
    }
    Ok(0)
}

/// The agent's answer to `options`.
fn ask_agent(pid: u32, options: &Options, timeout: Duration) -> anyhow::Result<Inspection> {
    let mut inspection = None;
    let mut take = |frame| {
        if let Frame::Record(bytes) = frame {
            if let Record::Inspection(i) = Record::decode(&bytes).map_err(AgentError::Channel)? {
                inspection = Some(i);
            }
        }
        Ok(())
    };
    jtap_client::run_with(pid, options, timeout, &mut io::sink(), Some(&mut take))?;
    inspection.context("the agent sent no inspection")
}
