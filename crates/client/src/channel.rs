//! The listening end of a control channel: a UNIX socket in the target's `/tmp`, with an
//! unguessable name, mode 0600 and the target's owner, listening only once nobody else may
//! connect; the agent's connection is vetted by its peer credentials. Sockets left by killed
//! clients are swept.

use std::ffi::CString;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use jtap_attach::process::Process;
use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};

use crate::files::{chown_to_target, random_hex, register_pending, unregister_pending};
use crate::AgentError;

/// The listening end of a control channel.
pub struct ChannelListener {
    listener: UnixListener,
    host_path: PathBuf,
    guest_path: String,
}

impl ChannelListener {
    /// Listens on a fresh socket in the `/tmp` of `process` (None: our own `/tmp`), owned by
    /// the process's user (or ours), mode 0600.
    pub fn bind(process: Option<&Process>) -> Result<ChannelListener, AgentError> {
        let name = format!("jtap-{}.sock", random_hex(16));
        let dir = match process {
            Some(process) => process.tmp_dir(),
            None => std::env::temp_dir(),
        };
        // SAFETY: geteuid has no preconditions.
        sweep_stale_sockets(&dir, process.map_or(unsafe { libc::geteuid() }, |p| p.uid));
        let host_path = dir.join(&name);
        let guest_path = match process {
            Some(_) => format!("/tmp/{name}"),
            None => host_path.display().to_string(),
        };
        let fail = |what: &str, e: io::Error| {
            AgentError::Channel(format!("{what} {}: {e}", host_path.display()))
        };
        // SAFETY: plain socket creation; the fd is owned right away.
        let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(fail("creating a socket for", io::Error::last_os_error()));
        }
        // SAFETY: fd is a fresh socket nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let address = socket_address(&host_path).map_err(|e| fail("binding", e))?;
        // SAFETY: address is a sockaddr_un of the size we pass.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&address as *const libc::sockaddr_un).cast(),
                std::mem::size_of::<libc::sockaddr_un>() as u32,
            )
        };
        if rc != 0 {
            return Err(fail("binding", io::Error::last_os_error()));
        }
        register_pending(&host_path);
        let listener_path = host_path.clone();
        let cleanup = |e: AgentError| {
            unregister_pending(&listener_path);
            e
        };
        fs::set_permissions(&host_path, fs::Permissions::from_mode(0o600))
            .map_err(|e| cleanup(fail("chmod", e)))?;
        if let Some(process) = process {
            chown_to_target(&host_path, process).map_err(|e| cleanup(fail("chown", e)))?;
        }
        // Listening starts only now that nobody else may connect.
        // SAFETY: fd is our bound socket.
        if unsafe { libc::listen(fd.as_raw_fd(), 4) } != 0 {
            return Err(cleanup(fail("listening on", io::Error::last_os_error())));
        }
        Ok(ChannelListener {
            listener: UnixListener::from(fd),
            host_path,
            guest_path,
        })
    }

    /// The socket's path inside the target's mount namespace (for `channel=`).
    pub fn guest_path(&self) -> &str {
        &self.guest_path
    }

    /// Waits up to `timeout` for the agent to connect; `peer_ok` vets the peer's (pid, uid).
    /// Connections from anyone else are dropped. `give_up` ends the wait early (e.g. the
    /// launched JVM exited).
    pub fn accept(
        self,
        timeout: Duration,
        peer_ok: impl Fn(u32, u32) -> bool,
        give_up: impl Fn() -> bool,
    ) -> Result<Option<UnixStream>, AgentError> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || give_up() {
                return Ok(None);
            }
            let mut poll = libc::pollfd {
                fd: self.listener.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd for the duration of the call.
            let ready = unsafe { libc::poll(&mut poll, 1, left.as_millis().clamp(1, 100) as i32) };
            if ready <= 0 {
                continue;
            }
            let (stream, _) = self
                .listener
                .accept()
                .map_err(|e| AgentError::Channel(format!("accept: {e}")))?;
            let (pid, uid) = peer_credentials(&stream)
                .map_err(|e| AgentError::Channel(format!("SO_PEERCRED: {e}")))?;
            if peer_ok(pid, uid) {
                return Ok(Some(stream));
            }
        }
    }
}

impl Drop for ChannelListener {
    fn drop(&mut self) {
        unregister_pending(&self.host_path);
    }
}

/// How old a channel socket nobody listens on must be before [`sweep_stale_sockets`] takes it
/// for a leftover (a younger one may belong to a jtap that bound it and listens any moment).
const STALE_AFTER: Duration = Duration::from_secs(60);

/// Removes channel sockets left in `dir` by jtap clients that were killed before their agent
/// connected: `jtap-<32 hex digits>.sock` files owned by `uid`, older than [`STALE_AFTER`],
/// that refuse connections.
fn sweep_stale_sockets(dir: &Path, uid: u32) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(hex) = name
            .to_str()
            .and_then(|n| n.strip_prefix("jtap-"))
            .and_then(|n| n.strip_suffix(".sock"))
        else {
            continue;
        };
        if hex.len() != 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            continue;
        }
        let path = entry.path();
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        let old = meta
            .modified()
            .ok()
            .and_then(|m| m.elapsed().ok())
            .is_some_and(|age| age >= STALE_AFTER);
        use std::os::unix::fs::FileTypeExt;
        if meta.uid() != uid || !meta.file_type().is_socket() || !old {
            continue;
        }
        if matches!(UnixStream::connect(&path), Err(e) if e.kind() == io::ErrorKind::ConnectionRefused)
        {
            let _ = fs::remove_file(&path);
        }
    }
}

fn socket_address(path: &Path) -> io::Result<libc::sockaddr_un> {
    // SAFETY: sockaddr_un is plain data; all zeroes is a valid value.
    let mut address: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    address.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| io::ErrorKind::InvalidInput)?;
    let bytes = bytes.as_bytes_with_nul();
    if bytes.len() > address.sun_path.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "socket path too long",
        ));
    }
    for (dst, src) in address.sun_path.iter_mut().zip(bytes) {
        *dst = *src as libc::c_char;
    }
    Ok(address)
}

fn peer_credentials(stream: &UnixStream) -> io::Result<(u32, u32)> {
    let cred = getsockopt(stream, PeerCredentials)?;
    Ok((cred.pid() as u32, cred.uid()))
}
