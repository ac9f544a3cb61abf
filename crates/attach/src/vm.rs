//! A HotSpot JVM we can send attach operations to.

use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use crate::credentials::ActingAs;
use crate::discovery::read_perf_data;
use crate::error::{AttachError, Result};
use crate::listener::{check_socket_file, ensure_listener};
use crate::process::Process;
use crate::protocol::{read_status, Request};

/// How to attach.
#[derive(Debug, Clone)]
pub struct AttachOptions {
    /// How long to wait for the attach listener to come up after SIGQUIT.
    pub timeout: Duration,
}

impl Default for AttachOptions {
    fn default() -> Self {
        AttachOptions {
            timeout: Duration::from_secs(5),
        }
    }
}

/// A JVM whose attach listener is running.
#[derive(Debug)]
pub struct VirtualMachine {
    process: Process,
    socket: PathBuf,
    protocol: Option<u32>,
}

impl VirtualMachine {
    /// Checks that `pid` is a HotSpot JVM we may attach to and starts its attach listener if
    /// needed. Never signals a process before it is known to be a JVM that handles SIGQUIT.
    pub fn attach(pid: u32, options: &AttachOptions) -> Result<VirtualMachine> {
        let process = Process::open(pid).map_err(|e| explain_missing(pid, e))?;
        if read_perf_data(&process).is_none() && !process.maps_libjvm()? {
            return Err(AttachError::NotAJvm {
                pid,
                name: process.name.clone(),
            });
        }
        let socket = {
            let _acting = ActingAs::target(process.uid, process.gid)?;
            let socket = ensure_listener(&process, options.timeout)?;
            check_socket_file(&socket, ActingAs::effective_uid())?;
            socket
        };
        Ok(VirtualMachine {
            process,
            socket,
            protocol: None,
        })
    }

    /// The attached process.
    pub fn process(&self) -> &Process {
        &self.process
    }

    /// Sends one operation and returns the reply, whose output can be streamed. Picks protocol
    /// 1 when the request fits it, else protocol 2 if the JVM speaks it (JDK 24+).
    pub fn execute(&mut self, request: &Request) -> Result<Reply> {
        let bytes = match request.v1_obstacle() {
            None => request.encode_v1(),
            Some(obstacle) => {
                if self.protocol_version()? < 2 {
                    return Err(AttachError::Unsupported(format!(
                        "{obstacle}, and JVM {} speaks only attach protocol 1 (protocol 2 needs JDK 24+)",
                        self.process.pid
                    )));
                }
                request.encode_v2()?
            }
        };
        let mut stream = self.connect()?;
        stream
            .write_all(&bytes)
            .map_err(|e| AttachError::io("sending the request", e))?;
        let status = read_status(&mut stream)?;
        Ok(Reply { status, stream })
    }

    /// The highest attach protocol the JVM speaks (1 unless `getversion` says otherwise).
    pub fn protocol_version(&mut self) -> Result<u32> {
        if let Some(v) = self.protocol {
            return Ok(v);
        }
        let mut reply = self.execute(&Request::new("getversion", Vec::<String>::new()))?;
        let text = reply.output_to_string()?;
        let version = if reply.status == 0 {
            text.split_whitespace()
                .next()
                .and_then(|v| v.parse().ok())
                .unwrap_or(1)
        } else {
            1
        };
        self.protocol = Some(version);
        Ok(version)
    }

    fn connect(&self) -> Result<UnixStream> {
        let _acting = ActingAs::target(self.process.uid, self.process.gid)?;
        UnixStream::connect(&self.socket).map_err(|e| match e.kind() {
            io::ErrorKind::ConnectionRefused => AttachError::StaleSocket {
                path: self.socket.display().to_string(),
            },
            io::ErrorKind::PermissionDenied => AttachError::PermissionDenied(format!(
                "cannot connect to {}",
                self.socket.display()
            )),
            _ => AttachError::io(format!("connecting to {}", self.socket.display()), e),
        })
    }
}

/// Adds a hint to "no such process" when a dead JVM left its socket behind.
fn explain_missing(pid: u32, err: AttachError) -> AttachError {
    if let AttachError::NoSuchProcess(_) = err {
        let stale = PathBuf::from(format!("/tmp/.java_pid{pid}"));
        if fs::symlink_metadata(&stale).is_ok() {
            return AttachError::StaleSocket {
                path: stale.display().to_string(),
            };
        }
    }
    err
}

/// The JVM's answer: a status code and a stream of output.
#[derive(Debug)]
pub struct Reply {
    /// The operation's status: 0 for success; otherwise the output says why.
    pub status: i32,
    stream: UnixStream,
}

impl Reply {
    /// Reads the whole remaining output.
    pub fn output_to_string(&mut self) -> Result<String> {
        let mut out = Vec::new();
        self.stream
            .read_to_end(&mut out)
            .map_err(|e| AttachError::io("reading the JVM's reply", e))?;
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    /// Copies output to `sink` as it arrives, ending it with a newline if the JVM did not.
    /// Returns the bytes copied.
    pub fn stream_to(&mut self, sink: &mut impl Write) -> Result<u64> {
        let mut buf = [0u8; 16 * 1024];
        let mut total = 0;
        let mut last = b'\n';
        loop {
            let n = match self.stream.read(&mut buf) {
                Ok(0) => {
                    if last != b'\n' {
                        sink.write_all(b"\n")
                            .map_err(|e| AttachError::io("writing output", e))?;
                    }
                    return Ok(total);
                }
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(AttachError::io("reading the JVM's reply", e)),
            };
            sink.write_all(&buf[..n])
                .and_then(|_| sink.flush())
                .map_err(|e| AttachError::io("writing output", e))?;
            total += n as u64;
            last = buf[n - 1];
        }
    }
}

/// The agent's return code from a `load` reply (`return code: N` on JDK 9+), if present.
pub fn load_return_code(output: &str) -> Option<i32> {
    output
        .lines()
        .find_map(|l| l.trim().strip_prefix("return code:"))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_load_return_codes() {
        assert_eq!(load_return_code("return code: 0\n"), Some(0));
        assert_eq!(load_return_code("return code: -1\n"), Some(-1));
        assert_eq!(load_return_code("Agent_OnAttach failed\n"), None);
    }
}
