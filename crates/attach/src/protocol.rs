//! Encoding attach requests (protocol 1 and 2) and reading the reply's status line.

use std::io::{self, Read};

use crate::error::{AttachError, Result};

/// Protocol 1 limits (HotSpot `AttachOperation`): name ≤ 16 bytes, exactly 3 args ≤ 1024 bytes.
/// This one is the longest operation name, in bytes.
pub const V1_NAME_MAX: usize = 16;
/// Protocol 1's longest argument, in bytes.
pub const V1_ARG_MAX: usize = 1024;
/// Protocol 1's number of arguments: every request carries exactly this many (missing ones empty).
pub const V1_ARG_COUNT: usize = 3;
/// Protocol 2 caps a request's data at 256 KiB.
pub const V2_DATA_MAX: usize = 256 * 1024;

/// One attach operation with its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The operation's name as the JVM knows it, e.g. `load`, `jcmd`, `properties`.
    pub operation: String,
    /// Its arguments, in order; protocol 1 carries at most [`V1_ARG_COUNT`].
    pub args: Vec<String>,
}

impl Request {
    /// A request for `operation` with these arguments (not checked against either protocol's
    /// limits until it is encoded).
    pub fn new(
        operation: impl Into<String>,
        args: impl IntoIterator<Item = impl Into<String>>,
    ) -> Request {
        Request {
            operation: operation.into(),
            args: args.into_iter().map(Into::into).collect(),
        }
    }

    /// Why the request cannot travel over protocol 1, if it cannot.
    pub fn v1_obstacle(&self) -> Option<String> {
        if self.operation.len() > V1_NAME_MAX {
            return Some(format!(
                "operation name '{}' is longer than {V1_NAME_MAX} bytes",
                self.operation
            ));
        }
        if self.args.len() > V1_ARG_COUNT {
            return Some(format!(
                "{} arguments given, protocol 1 carries at most {V1_ARG_COUNT}",
                self.args.len()
            ));
        }
        self.args.iter().find(|a| a.len() > V1_ARG_MAX).map(|a| {
            format!(
                "an argument of {} bytes is longer than the {V1_ARG_MAX} bytes protocol 1 allows",
                a.len()
            )
        })
    }

    /// Protocol 1 bytes: `1\0op\0a1\0a2\0a3\0`, missing args sent empty.
    pub fn encode_v1(&self) -> Vec<u8> {
        let mut out = b"1\0".to_vec();
        push_c_string(&mut out, &self.operation);
        for i in 0..V1_ARG_COUNT {
            push_c_string(&mut out, self.args.get(i).map_or("", String::as_str));
        }
        out
    }

    /// Protocol 2 bytes: `2\0<size>\0op\0(arg\0)*`, size counting the bytes after it.
    pub fn encode_v2(&self) -> Result<Vec<u8>> {
        let mut data = Vec::new();
        push_c_string(&mut data, &self.operation);
        for arg in &self.args {
            push_c_string(&mut data, arg);
        }
        if data.len() > V2_DATA_MAX {
            return Err(AttachError::Unsupported(format!(
                "request of {} bytes exceeds the {V2_DATA_MAX} bytes protocol 2 allows",
                data.len()
            )));
        }
        let mut out = format!("2\0{}\0", data.len()).into_bytes();
        out.extend(data);
        Ok(out)
    }
}

fn push_c_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(s.as_bytes());
    out.push(0);
}

/// Reads the reply's first line, the operation's status code (0 = success).
pub fn read_status(stream: &mut impl Read) -> Result<i32> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        match stream.read(&mut byte) {
            Ok(0) => break,
            Ok(_) if byte[0] == b'\n' => break,
            Ok(_) => line.push(byte[0]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(AttachError::io("reading the JVM's reply", e)),
        }
        if line.len() > 32 {
            break;
        }
    }
    let text = String::from_utf8_lossy(&line);
    text.trim().parse().map_err(|_| {
        if line.is_empty() {
            AttachError::Protocol(
                "the JVM closed the connection without a reply (request rejected)".into(),
            )
        } else {
            AttachError::Protocol(format!("unexpected reply status line '{text}'"))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_v1_with_three_args() {
        let r = Request::new("jcmd", ["VM.version"]);
        assert_eq!(r.encode_v1(), b"1\0jcmd\0VM.version\0\0\0");
        assert_eq!(r.v1_obstacle(), None);
    }

    #[test]
    fn encodes_v2_with_size() {
        let r = Request::new("jcmd", ["a", "bc"]);
        assert_eq!(r.encode_v2().unwrap(), b"2\x0010\0jcmd\0a\0bc\0");
    }

    #[test]
    fn long_arguments_need_v2() {
        let r = Request::new("jcmd", ["x".repeat(1025)]);
        assert!(r.v1_obstacle().unwrap().contains("1025 bytes"));
        assert!(Request::new("x".repeat(17), Vec::<String>::new())
            .v1_obstacle()
            .is_some());
        let huge = Request::new("jcmd", ["x".repeat(V2_DATA_MAX)]);
        assert!(huge.encode_v2().is_err());
    }

    #[test]
    fn reads_status_lines() {
        assert_eq!(read_status(&mut &b"0\nhello"[..]).unwrap(), 0);
        assert_eq!(read_status(&mut &b"-1\n"[..]).unwrap(), -1);
        assert!(read_status(&mut &b""[..]).is_err());
        assert!(read_status(&mut &b"garbage\n"[..]).is_err());
    }
}
