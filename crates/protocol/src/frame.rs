//! Control-channel framing: what the agent sends back to the client over the UNIX socket.
//!
//! Every frame is `length: u32 (big-endian)`, then `length` bytes: a kind byte and its body.
//! The agent opens with [`Frame::Hello`], streams [`Frame::Out`] text, and ends a command with
//! [`Frame::Done`]. Sampling engines also send [`Frame::Progress`] while they run and their
//! result as a [`Frame::Profile`] (a profile serialised by [`crate::wire`]). The client sends nothing; closing its end (or dying) is how it says
//! "stop what I started".

use std::io::{self, Read, Write};

/// Largest frame accepted (kind byte included). Large enough for the profiles of long
/// sessions; it bounds what a malformed length prefix can make the reader allocate.
pub const MAX_FRAME: usize = 256 << 20;

const HELLO: u8 = 1;
const OUT: u8 = 2;
const DONE: u8 = 3;
const PROFILE: u8 = 4;
const PROGRESS: u8 = 5;

/// One message from the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// First frame of every connection: who answers.
    Hello {
        /// The agent's version ([`crate::VERSION`] of its build).
        version: String,
        /// The JVM's pid inside its own pid namespace.
        pid: u32,
    },
    /// Text for the client to print on its stdout.
    Out(String),
    /// The command finished; `code` 0 is success, otherwise `message` says why not.
    Done {
        /// An `AGENT_RETURN_*` code.
        code: i32,
        /// Empty on success.
        message: String,
    },
    /// A sampling engine's profile, serialised with [`crate::wire::encode_profile`].
    Profile(Vec<u8>),
    /// How far a running sampling engine is.
    Progress {
        /// Samples recorded so far.
        samples: u64,
        /// Samples lost so far (buffer full).
        dropped: u64,
    },
}

/// A frame that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The socket failed or closed in the middle of a frame.
    #[error("control channel: {0}")]
    Io(#[from] io::Error),
    /// The bytes are not a frame of this protocol.
    #[error("control channel: malformed frame: {0}")]
    Malformed(String),
}

impl Frame {
    /// The frame's bytes, length prefix included. Text is cut to fit [`MAX_FRAME`] (a profile
    /// that large would be cut too, and then fail to decode).
    pub fn encode(&self) -> Vec<u8> {
        let (kind, mut body) = match self {
            Frame::Hello { version, pid } => {
                let mut body = pid.to_be_bytes().to_vec();
                body.extend_from_slice(version.as_bytes());
                (HELLO, body)
            }
            Frame::Out(text) => (OUT, text.as_bytes().to_vec()),
            Frame::Done { code, message } => {
                let mut body = code.to_be_bytes().to_vec();
                body.extend_from_slice(message.as_bytes());
                (DONE, body)
            }
            Frame::Profile(bytes) => (PROFILE, bytes.clone()),
            Frame::Progress { samples, dropped } => {
                let mut body = samples.to_be_bytes().to_vec();
                body.extend_from_slice(&dropped.to_be_bytes());
                (PROGRESS, body)
            }
        };
        body.truncate(MAX_FRAME - 1);
        let mut bytes = Vec::with_capacity(body.len() + 5);
        bytes.extend_from_slice(&((body.len() + 1) as u32).to_be_bytes());
        bytes.push(kind);
        bytes.append(&mut body);
        bytes
    }

    /// Writes the frame in one call.
    pub fn write_to(&self, out: &mut impl Write) -> io::Result<()> {
        out.write_all(&self.encode())
    }
}

/// Reads one frame; `Ok(None)` when the peer closed the channel between frames.
pub fn read_frame(input: &mut impl Read) -> Result<Option<Frame>, FrameError> {
    let mut len = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match input.read(&mut len[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    let len = u32::from_be_bytes(len) as usize;
    if len == 0 || len > MAX_FRAME {
        return Err(FrameError::Malformed(format!("length {len}")));
    }
    let mut bytes = vec![0u8; len];
    input.read_exact(&mut bytes)?;
    let body = &bytes[1..];
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let head = |b: &[u8]| -> Result<[u8; 4], FrameError> {
        b.get(..4)
            .and_then(|h| h.try_into().ok())
            .ok_or_else(|| FrameError::Malformed("short body".into()))
    };
    match bytes[0] {
        HELLO => Ok(Some(Frame::Hello {
            pid: u32::from_be_bytes(head(body)?),
            version: text(&body[4..]),
        })),
        OUT => Ok(Some(Frame::Out(text(body)))),
        DONE => Ok(Some(Frame::Done {
            code: i32::from_be_bytes(head(body)?),
            message: text(&body[4..]),
        })),
        PROFILE => Ok(Some(Frame::Profile(body.to_vec()))),
        PROGRESS => {
            let number = |range: std::ops::Range<usize>| -> Result<u64, FrameError> {
                let bytes = body.get(range).and_then(|b| b.try_into().ok());
                bytes
                    .map(u64::from_be_bytes)
                    .ok_or_else(|| FrameError::Malformed("short progress frame".into()))
            };
            Ok(Some(Frame::Progress {
                samples: number(0..8)?,
                dropped: number(8..16)?,
            }))
        }
        kind => Err(FrameError::Malformed(format!("unknown kind {kind}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn frame() -> impl Strategy<Value = Frame> {
        prop_oneof![
            ("\\PC{0,20}", any::<u32>()).prop_map(|(version, pid)| Frame::Hello { version, pid }),
            "\\PC{0,200}".prop_map(Frame::Out),
            (any::<i32>(), "\\PC{0,50}").prop_map(|(code, message)| Frame::Done { code, message }),
            proptest::collection::vec(any::<u8>(), 0..100).prop_map(Frame::Profile),
            (any::<u64>(), any::<u64>())
                .prop_map(|(samples, dropped)| Frame::Progress { samples, dropped }),
        ]
    }

    proptest! {
        #[test]
        fn frames_round_trip_in_a_stream(frames in proptest::collection::vec(frame(), 0..8)) {
            let bytes: Vec<u8> = frames.iter().flat_map(Frame::encode).collect();
            let mut input = &bytes[..];
            let mut back = Vec::new();
            while let Some(f) = read_frame(&mut input).unwrap() {
                back.push(f);
            }
            prop_assert_eq!(back, frames);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut input = &bytes[..];
            while let Ok(Some(_)) = read_frame(&mut input) {}
        }
    }

    #[test]
    fn truncated_frames_are_errors() {
        let bytes = Frame::Out("hello".into()).encode();
        assert!(read_frame(&mut &bytes[..bytes.len() - 1]).is_err());
        assert!(read_frame(&mut &bytes[..2]).is_err());
        assert!(matches!(
            read_frame(&mut &[0u8, 0, 0, 0][..]),
            Err(FrameError::Malformed(_))
        ));
    }
}
