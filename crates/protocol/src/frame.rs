//! Control-channel framing: the messages between the agent and the client that asked, over
//! the UNIX socket the client listens on.
//!
//! The agent opens with [`Frame::Hello`], says [`Frame::Started`] when `start` succeeded, streams [`Frame::Out`] (the client's stdout) and
//! [`Frame::Note`] (its stderr) text, and ends a command with [`Frame::Done`]. Sampling
//! engines also send [`Frame::Progress`] while they run and their result as a
//! [`Frame::Profile`] (a profile serialised by [`crate::wire`]); other results go as a
//! [`Frame::Record`] ([`crate::records`]). The client sends
//! [`Frame::Options`] first when the options of its `load` said `rest`, and
//! [`Frame::Stop`] to end what it started, with the results coming back on the same
//! connection; closing its end (or dying) means the same, without results.
//!
//! On the wire a message is one or more pieces, each `length: u32 (big-endian)`, then
//! `length` bytes: a kind byte and up to [`MAX_PIECE`] bytes of body. A kind byte with
//! [`MORE`] set says the body goes on in the next piece, so a message of any size up to
//! [`MAX_MESSAGE`] travels whole (never cut), and a reader never allocates more than one
//! piece ahead of the bytes that actually arrived.

use std::io::{self, Read, Write};

/// Largest body of one piece on the wire.
pub const MAX_PIECE: usize = 1 << 20;
/// Largest message (all its pieces' bodies) accepted: larger ones are refused whole, by
/// the writer and the reader alike.
pub const MAX_MESSAGE: usize = 1 << 30;
/// Set in a piece's kind byte when the message's body continues in the next piece.
pub const MORE: u8 = 0x80;

const HELLO: u8 = 1;
const OUT: u8 = 2;
const DONE: u8 = 3;
const PROFILE: u8 = 4;
const PROGRESS: u8 = 5;
const NOTE: u8 = 6;
const STOP: u8 = 7;
const STARTED: u8 = 8;
const RECORD: u8 = 9;
const OPTIONS: u8 = 10;

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
    /// A note for the client to print on its stderr (what happened, not the results).
    Note(String),
    /// From the client: stop what this connection started and send its results here.
    Stop,
    /// From the client, first on a connection whose `load` options said `rest`: the whole
    /// option string, too long for the attach argument.
    Options(String),
    /// `start` succeeded: this engine runs (after a fallback, the fallback's name) until its
    /// `duration=`, the client's `Stop`, or the client's end.
    Started(String),
    /// The command finished; `code` 0 is success, otherwise `message` says why not.
    Done {
        /// An `AGENT_RETURN_*` code.
        code: i32,
        /// Empty on success.
        message: String,
    },
    /// A sampling engine's profile, serialised with [`crate::wire::encode_profile`].
    Profile(Vec<u8>),
    /// A result as data ([`crate::records::Record`], serialised by its `encode`), for the
    /// client to render.
    Record(Vec<u8>),
    /// How far a running sampling engine is.
    Progress {
        /// Samples recorded so far.
        samples: u64,
        /// Samples lost so far (buffer full).
        dropped: u64,
    },
}

/// Why a recording ended, as the `Done` of its session says (the message of a `Done` with
/// code 0; a failure's message is the error itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// The client sent `Stop` (Ctrl-C, or the client's own end of the session).
    Stopped,
    /// The recording's `duration=` elapsed.
    DurationElapsed,
    /// The tracer reported the `-n` results it was asked for.
    CountReached,
    /// The client went away without `Stop`.
    ClientGone,
    /// Any other reason, as said (a command's end, an error).
    Other(String),
}

impl Ended {
    /// The `Done` message saying it.
    pub fn message(&self) -> &str {
        match self {
            Ended::Stopped => "stopped by its client",
            Ended::DurationElapsed => "duration elapsed",
            Ended::CountReached => "count reached",
            Ended::ClientGone => "client went away",
            Ended::Other(text) => text,
        }
    }

    /// The reason a `Done` message says.
    pub fn from_message(text: &str) -> Ended {
        [
            Ended::Stopped,
            Ended::DurationElapsed,
            Ended::CountReached,
            Ended::ClientGone,
        ]
        .into_iter()
        .find(|e| e.message() == text)
        .unwrap_or_else(|| Ended::Other(text.to_string()))
    }

    /// Whether the recording ended as its bounds (`-d`, `-n`) said it would.
    pub fn as_bounded(&self) -> bool {
        matches!(self, Ended::DurationElapsed | Ended::CountReached)
    }
}

impl std::fmt::Display for Ended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
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
    /// The frame's bytes on the wire: its pieces, length prefixes included. Fails only for a
    /// body larger than [`MAX_MESSAGE`].
    pub fn encode(&self) -> io::Result<Vec<u8>> {
        let (kind, body) = match self {
            Frame::Hello { version, pid } => {
                let mut body = pid.to_be_bytes().to_vec();
                body.extend_from_slice(version.as_bytes());
                (HELLO, body)
            }
            Frame::Out(text) => (OUT, text.as_bytes().to_vec()),
            Frame::Note(text) => (NOTE, text.as_bytes().to_vec()),
            Frame::Stop => (STOP, Vec::new()),
            Frame::Options(text) => (OPTIONS, text.as_bytes().to_vec()),
            Frame::Started(engine) => (STARTED, engine.as_bytes().to_vec()),
            Frame::Done { code, message } => {
                let mut body = code.to_be_bytes().to_vec();
                body.extend_from_slice(message.as_bytes());
                (DONE, body)
            }
            Frame::Profile(bytes) => (PROFILE, bytes.clone()),
            Frame::Record(bytes) => (RECORD, bytes.clone()),
            Frame::Progress { samples, dropped } => {
                let mut body = samples.to_be_bytes().to_vec();
                body.extend_from_slice(&dropped.to_be_bytes());
                (PROGRESS, body)
            }
        };
        if body.len() > MAX_MESSAGE {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "a {} MiB message is larger than the channel's {} MiB",
                    body.len() >> 20,
                    MAX_MESSAGE >> 20
                ),
            ));
        }
        let pieces = body.len().div_ceil(MAX_PIECE).max(1);
        let mut bytes = Vec::with_capacity(body.len() + 5 * pieces);
        let mut chunks = body.chunks(MAX_PIECE).peekable();
        if chunks.peek().is_none() {
            bytes.extend_from_slice(&1u32.to_be_bytes());
            bytes.push(kind);
        }
        while let Some(chunk) = chunks.next() {
            let more = if chunks.peek().is_some() { MORE } else { 0 };
            bytes.extend_from_slice(&((chunk.len() + 1) as u32).to_be_bytes());
            bytes.push(kind | more);
            bytes.extend_from_slice(chunk);
        }
        Ok(bytes)
    }

    /// Writes the frame (all its pieces).
    pub fn write_to(&self, out: &mut impl Write) -> io::Result<()> {
        out.write_all(&self.encode()?)
    }
}

/// Reads one piece: its kind byte and body; `Ok(None)` when the peer closed the channel
/// before its first byte.
fn read_piece(input: &mut impl Read) -> Result<Option<(u8, Vec<u8>)>, FrameError> {
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
    if len == 0 || len > MAX_PIECE + 1 {
        return Err(FrameError::Malformed(format!("piece length {len}")));
    }
    let mut bytes = vec![0u8; len];
    input.read_exact(&mut bytes)?;
    let kind = bytes.remove(0);
    Ok(Some((kind, bytes)))
}

/// Reads one frame (all its pieces); `Ok(None)` when the peer closed the channel between
/// frames.
pub fn read_frame(input: &mut impl Read) -> Result<Option<Frame>, FrameError> {
    let Some((mut kind, mut body)) = read_piece(input)? else {
        return Ok(None);
    };
    while kind & MORE != 0 {
        let (next, rest) =
            read_piece(input)?.ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
        if next & !MORE != kind & !MORE {
            return Err(FrameError::Malformed(format!(
                "a piece of kind {next} inside a message of kind {}",
                kind & !MORE
            )));
        }
        if body.len() + rest.len() > MAX_MESSAGE {
            return Err(FrameError::Malformed(format!(
                "a message over the channel's {} MiB",
                MAX_MESSAGE >> 20
            )));
        }
        body.extend_from_slice(&rest);
        kind = next;
    }
    decode(kind, body).map(Some)
}

fn decode(kind: u8, body: Vec<u8>) -> Result<Frame, FrameError> {
    let body = &body[..];
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let head = |b: &[u8]| -> Result<[u8; 4], FrameError> {
        b.get(..4)
            .and_then(|h| h.try_into().ok())
            .ok_or_else(|| FrameError::Malformed("short body".into()))
    };
    match kind {
        HELLO => Ok(Frame::Hello {
            pid: u32::from_be_bytes(head(body)?),
            version: text(&body[4..]),
        }),
        OUT => Ok(Frame::Out(text(body))),
        NOTE => Ok(Frame::Note(text(body))),
        STOP => Ok(Frame::Stop),
        OPTIONS => Ok(Frame::Options(text(body))),
        STARTED => Ok(Frame::Started(text(body))),
        DONE => Ok(Frame::Done {
            code: i32::from_be_bytes(head(body)?),
            message: text(&body[4..]),
        }),
        PROFILE => Ok(Frame::Profile(body.to_vec())),
        RECORD => Ok(Frame::Record(body.to_vec())),
        PROGRESS => {
            let number = |range: std::ops::Range<usize>| -> Result<u64, FrameError> {
                let bytes = body.get(range).and_then(|b| b.try_into().ok());
                bytes
                    .map(u64::from_be_bytes)
                    .ok_or_else(|| FrameError::Malformed("short progress frame".into()))
            };
            Ok(Frame::Progress {
                samples: number(0..8)?,
                dropped: number(8..16)?,
            })
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
            "\\PC{0,200}".prop_map(Frame::Note),
            Just(Frame::Stop),
            "\\PC{0,200}".prop_map(Frame::Options),
            "\\PC{0,20}".prop_map(Frame::Started),
            (any::<i32>(), "\\PC{0,50}").prop_map(|(code, message)| Frame::Done { code, message }),
            proptest::collection::vec(any::<u8>(), 0..100).prop_map(Frame::Profile),
            proptest::collection::vec(any::<u8>(), 0..100).prop_map(Frame::Record),
            (any::<u64>(), any::<u64>())
                .prop_map(|(samples, dropped)| Frame::Progress { samples, dropped }),
        ]
    }

    proptest! {
        #[test]
        fn frames_round_trip_in_a_stream(frames in proptest::collection::vec(frame(), 0..8)) {
            let bytes: Vec<u8> = frames.iter().flat_map(|f| f.encode().unwrap()).collect();
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
    fn large_messages_travel_whole_in_pieces() {
        let text: String = (0..3 * MAX_PIECE + 17)
            .map(|i| (b'a' + (i % 26) as u8) as char)
            .collect();
        let frames = [
            Frame::Out(text),
            Frame::Profile(vec![7; MAX_PIECE]),
            Frame::Stop,
        ];
        let bytes: Vec<u8> = frames.iter().flat_map(|f| f.encode().unwrap()).collect();
        let mut input = &bytes[..];
        for frame in &frames {
            assert_eq!(read_frame(&mut input).unwrap().as_ref(), Some(frame));
        }
        assert_eq!(read_frame(&mut input).unwrap(), None);
        // Cut anywhere inside the pieces, the message is an error, never a shorter message.
        let big = Frame::Out("x".repeat(2 * MAX_PIECE)).encode().unwrap();
        for cut in [4, MAX_PIECE, MAX_PIECE + 6, big.len() - 1] {
            assert!(read_frame(&mut &big[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn a_piece_of_another_kind_inside_a_message_is_malformed() {
        let mut bytes = Frame::Out("x".repeat(MAX_PIECE + 1)).encode().unwrap();
        let second = MAX_PIECE + 5;
        bytes[second + 4] = NOTE;
        assert!(matches!(
            read_frame(&mut &bytes[..]),
            Err(FrameError::Malformed(_))
        ));
    }

    #[test]
    fn truncated_frames_are_errors() {
        let bytes = Frame::Out("hello".into()).encode().unwrap();
        assert!(read_frame(&mut &bytes[..bytes.len() - 1]).is_err());
        assert!(read_frame(&mut &bytes[..2]).is_err());
        assert!(matches!(
            read_frame(&mut &[0u8, 0, 0, 0][..]),
            Err(FrameError::Malformed(_))
        ));
    }
}
