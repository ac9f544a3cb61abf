//! Launch mode: `jtap <command> [options] -- java ...` runs the JVM with jtap's agent given on
//! its command line (`-agentpath:<lib>=<options>`), so the agent is there from the start, and
//! prints what the agent reports over the control channel while the JVM runs.

use std::ffi::OsString;
use std::io::Write;
use std::process::Command;
use std::time::Duration;

use jtap_protocol::{Options, VERSION};

use crate::{locate_library, ChannelListener, Conversation, FrameSink};

/// How long the JVM gets to reach `Agent_OnLoad`.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The JVM command line with the agent inserted right after the launcher.
pub fn agent_command_line(java: &[String], library: &str, options: &Options) -> Vec<OsString> {
    let mut argv: Vec<OsString> = Vec::with_capacity(java.len() + 1);
    argv.push(java[0].clone().into());
    argv.push(format!("-agentpath:{library}={options}").into());
    argv.extend(java[1..].iter().map(OsString::from));
    argv
}

/// Runs `java` (launcher and arguments) with the agent doing `options`; the JVM's own stdout
/// and stderr pass through untouched. Returns the JVM's exit code.
///
/// The agent ends an engine at its `duration=` (or the tracer's count) by itself, and Ctrl-C
/// reaches the JVM too (it is in our process group): its exit delivers the results.
pub fn run(options: &Options, java: &[String], out: &mut dyn Write) -> anyhow::Result<i32> {
    run_with(options, java, out, None)
}

/// [`run`], handing profile and progress frames to `frames`.
pub fn run_with(
    options: &Options,
    java: &[String],
    out: &mut dyn Write,
    frames: FrameSink<'_>,
) -> anyhow::Result<i32> {
    anyhow::ensure!(!java.is_empty(), "nothing to launch after --");
    let library = locate_library()?;
    let listener = ChannelListener::bind(None)?;
    let mut options = options.clone();
    options.channel = Some(listener.guest_path().to_string());
    options.client = Some(VERSION.to_string());
    let argv = agent_command_line(java, &library.display().to_string(), &options);
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot run {}: {e}", java[0]))?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let child_pid = child.id();
    let stream = listener.accept(START_TIMEOUT, |_, uid| uid == me, || has_exited(child_pid))?;
    let outcome = match stream {
        Some(stream) => Conversation::from_stream(stream)
            .finish(out, frames)
            .map(drop),
        None => Ok(()),
    };
    let status = child.wait()?;
    outcome?;
    Ok(status.code().unwrap_or(1))
}

/// True once `pid` is gone or a zombie (exited, not yet reaped).
fn has_exited(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rfind(')').and_then(|i| stat[i + 2..].chars().next()) == Some('Z'),
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inserts_the_agent_after_the_launcher() {
        let options = Options::parse("start,event=gc").unwrap();
        let java: Vec<String> = ["java", "-cp", "x", "Main"].map(String::from).to_vec();
        let argv = agent_command_line(&java, "/lib/libjtap_agent.so", &options);
        assert_eq!(
            argv,
            [
                "java",
                "-agentpath:/lib/libjtap_agent.so=start,event=gc",
                "-cp",
                "x",
                "Main"
            ]
        );
    }
}
