//! `jtap attach` and `jtap jcmd`: one raw attach operation, output streamed as it arrives.

use std::io::{self, Write};
use std::time::Duration;

use jtap_attach::{load_return_code, AttachOptions, Request, VirtualMachine};

use crate::exit;

/// Sends `operation args...` to JVM `pid`, prints the reply and returns the exit code: the
/// JVM's status (for `load`, the agent's return code).
pub fn run(pid: u32, operation: &str, args: &[String], timeout: Duration) -> anyhow::Result<i32> {
    let mut vm = VirtualMachine::attach(pid, &AttachOptions { timeout })?;
    let request = Request::new(operation, args.iter().cloned());
    let mut reply = vm.execute(&request)?;
    let stdout = io::stdout();
    let mut out = stdout.lock();
    if operation == "load" {
        let text = reply.output_to_string()?;
        out.write_all(text.as_bytes())?;
        if reply.status == 0 {
            if let Some(code) = load_return_code(&text) {
                return Ok(exit::from_jvm_status(code));
            }
        }
    } else {
        reply.stream_to(&mut out)?;
    }
    Ok(exit::from_jvm_status(reply.status))
}

/// `jtap jcmd <pid> <text...>`: the words are joined into one jcmd command line.
pub fn jcmd(pid: u32, words: &[String], timeout: Duration) -> anyhow::Result<i32> {
    let command = if words.is_empty() {
        "help".to_string()
    } else {
        words.join(" ")
    };
    run(pid, "jcmd", &[command], timeout)
}
