//! `jtap load` and `jtap status`: commands for jtap's agent in a running JVM (loading it
//! first if needed), or in a JVM launched with it after `--`.

use std::io::{self, Write};

use jtap_profile::{ExportOptions, Format};
use std::time::Duration;

use jtap_client::{launch, AgentError};
use jtap_protocol::records::Record;
use jtap_protocol::{Action, Frame, Options};

use crate::exit;

/// `jtap load <pid> [options]` or `jtap load [options] -- java ...`.
pub fn load(args: &[String], java: &[String], timeout: Duration) -> anyhow::Result<i32> {
    let (pid, options) = match (java.is_empty(), args) {
        (false, []) => (None, ""),
        (false, [options]) => (None, options.as_str()),
        (false, _) => {
            return Err(exit::usage(
                "with `-- java ...` give only the agent options before `--`, no pid",
            ))
        }
        (true, [pid]) => (Some(parse_pid(pid)?), ""),
        (true, [pid, options]) => (Some(parse_pid(pid)?), options.as_str()),
        (true, _) => {
            return Err(exit::usage(
                "usage: jtap load <pid> [options]  or  jtap load [options] -- java ...",
            ))
        }
    };
    let options = Options::parse(options).map_err(AgentError::from)?;
    let mut out = io::stdout().lock();
    match pid {
        Some(pid) => {
            // The start is announced, a profile or record printed as text.
            let mut announce = |frame| {
                match frame {
                    Frame::Started(engines) => println!(
                        "started the {} {}; it runs until this client ends (Ctrl-C) or `jtap load {pid} stop`",
                        engines.replace(',', ", "),
                        if engines.contains(',') { "engines" } else { "engine" }
                    ),
                    Frame::Profile(bytes) => {
                        let profile = jtap_protocol::wire::decode_profile(&bytes)
                            .map_err(AgentError::Channel)?;
                        io::stdout().write_all(
                            &Format::Text.render(&profile, &ExportOptions::default()),
                        )?;
                    }
                    Frame::Record(bytes) => {
                        let record = Record::decode(&bytes).map_err(AgentError::Channel)?;
                        println!("{}", record.to_text());
                    }
                    _ => {}
                }
                Ok(())
            };
            jtap_client::run_with(pid, &options, timeout, &mut out, Some(&mut announce)).map(|_| 0)
        }
        None => launch::run(&options, java, &mut out),
    }
}

/// `jtap status <pid>`: the agent's state (loading it if it is not there yet).
pub fn status(pid: u32, timeout: Duration) -> anyhow::Result<i32> {
    let options = Options::default().with_action(Action::Status);
    let mut out = io::stdout().lock();
    jtap_client::run(pid, &options, timeout, &mut out)?;
    // BTrace scripts run in their clients: they answer for themselves.
    for status in super::btrace::script_statuses(pid) {
        write!(out, "btrace script: {status}")?;
    }
    Ok(0)
}

fn parse_pid(text: &str) -> anyhow::Result<u32> {
    text.parse().map_err(|_| {
        exit::usage(format!(
            "\"{text}\" is not a pid (to launch a JVM, put it after `--`)"
        ))
    })
}
