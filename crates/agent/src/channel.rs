//! The agent's end of the control channel: a UNIX socket the asking `jtap` client listens on
//! (in this JVM's `/tmp`), over which replies and results stream back as frames, and the
//! client's options (when too long for the attach argument) and `Stop` come in.

use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use jtap_protocol::{read_frame, Frame, VERSION};

/// How long a write may block before the client counts as gone.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long reading the rest of a client's frame may take once its first byte arrived.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Where an engine streams what it finds while it runs (the trace engine's calls and trees):
/// the client session that started it.
pub trait ClientSink: Send + Sync {
    /// Sends one frame to the client (dropped when the client is gone).
    fn send_frame(&self, frame: Frame);
}

/// What the client did, as [`Channel::poll_client`] saw it.
#[derive(Debug, PartialEq, Eq)]
pub enum ClientSaid {
    /// Nothing yet.
    Nothing,
    /// Asked to stop what it started, and waits for the results.
    Stop,
    /// Closed its end, or died.
    Gone,
}

/// A connection to one client.
pub struct Channel {
    stream: UnixStream,
}

impl Channel {
    /// Connects to the client's socket at `path` and checks who listens there: root or this
    /// process's own user, nobody else.
    pub fn connect(path: &str) -> io::Result<Channel> {
        let stream = UnixStream::connect(path)?;
        stream.set_write_timeout(Some(WRITE_TIMEOUT))?;
        stream.set_read_timeout(Some(READ_TIMEOUT))?;
        let peer = peer_uid(&stream)?;
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        if peer != 0 && peer != me {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("{path} is served by uid {peer}, neither root nor the JVM's uid {me}"),
            ));
        }
        Ok(Channel { stream })
    }

    /// Sends one frame.
    pub fn send(&self, frame: &Frame) -> io::Result<()> {
        frame.write_to(&mut &self.stream)
    }

    /// Answers a command that cannot run: who answers, then why not.
    pub fn fail(&self, code: i32, message: &str) {
        let _ = self.send(&Frame::Hello {
            version: VERSION.into(),
            pid: std::process::id(),
        });
        let _ = self.send(&Frame::Done {
            code,
            message: message.to_string(),
        });
    }

    /// The whole option string, which the client sends first when the options of its `load`
    /// said `rest`.
    pub fn receive_options(&self) -> Result<String, String> {
        match read_frame(&mut &self.stream) {
            Ok(Some(Frame::Options(text))) => Ok(text),
            Ok(Some(_)) => {
                Err("the client sent another frame before the rest of its options".into())
            }
            Ok(None) => Err("the client left before sending the rest of its options".into()),
            Err(e) => Err(format!("reading the rest of the options: {e}")),
        }
    }

    /// Waits up to `wait` for the client to say something.
    pub fn poll_client(&self, wait: Duration) -> ClientSaid {
        let mut poll = libc::pollfd {
            fd: self.stream.as_raw_fd(),
            events: libc::POLLIN | libc::POLLRDHUP,
            revents: 0,
        };
        // SAFETY: one valid pollfd for a socket we own, for the duration of the call.
        let ready =
            unsafe { libc::poll(&mut poll, 1, wait.as_millis().min(i32::MAX as u128) as i32) };
        if ready <= 0 {
            return ClientSaid::Nothing;
        }
        if poll.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
            return ClientSaid::Gone;
        }
        // A frame, or the end of the stream (POLLRDHUP after a Stop still reads the Stop).
        match read_frame(&mut &self.stream) {
            Ok(Some(Frame::Stop)) => ClientSaid::Stop,
            Ok(Some(_)) => ClientSaid::Nothing,
            Ok(None) | Err(_) => ClientSaid::Gone,
        }
    }
}

fn peer_uid(stream: &UnixStream) -> io::Result<u32> {
    Ok(getsockopt(stream, PeerCredentials)?.uid())
}
