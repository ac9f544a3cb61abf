//! One module per `jtap` subcommand.

pub mod agent;
pub mod attach;
pub mod btrace;
pub mod bytecode;
pub mod classes;
pub mod completions;
pub mod convert;
pub mod diff;
pub mod heap;
pub mod inspect;
pub mod jimage;
pub mod mcp;
pub mod profile;
pub mod ps;
pub mod sites;
pub mod thread_dump;
pub mod threads;
pub mod top;
pub mod trace;

/// Prints a command's report on stdout: as pretty JSON with `--json`, else as `text` writes it.
fn print_report<R: serde::Serialize>(
    report: &R,
    json: bool,
    text: impl FnOnce(&R, &mut std::io::StdoutLock<'static>) -> std::io::Result<()>,
) -> anyhow::Result<i32> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(report)?)?;
    } else {
        text(report, &mut out)?;
    }
    Ok(0)
}
