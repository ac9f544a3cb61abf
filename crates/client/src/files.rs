//! Files this client creates in a target's `/tmp` (channel sockets, copies of the agent
//! library): random names, the target's owner, and a register of them, so that Ctrl-C
//! removes them too.

use std::fs::{self, File};
use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use jtap_attach::process::Process;

/// Sockets and library copies created in a target's `/tmp`, removed on Ctrl-C as well.
static PENDING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

pub(crate) fn register_pending(path: &Path) {
    PENDING
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(path.to_path_buf());
}

pub(crate) fn unregister_pending(path: &Path) {
    PENDING
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|p| p != path);
    let _ = fs::remove_file(path);
}

/// Removes every socket or library copy this process left in a target's `/tmp` (for Ctrl-C).
pub(crate) fn remove_pending_files() {
    if let Ok(pending) = PENDING.try_lock() {
        for path in pending.iter() {
            let _ = fs::remove_file(path);
        }
    }
}

pub(crate) fn chown_to_target(path: &Path, process: &Process) -> io::Result<()> {
    let meta = fs::metadata(path)?;
    if meta.uid() == process.uid && meta.gid() == process.gid {
        return Ok(());
    }
    std::os::unix::fs::chown(path, Some(process.uid), Some(process.gid))
}

/// `n` random bytes from the kernel, in hex.
pub(crate) fn random_hex(n: usize) -> String {
    let mut bytes = vec![0u8; n];
    let filled = File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .is_ok();
    assert!(filled, "/dev/urandom is unreadable");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
