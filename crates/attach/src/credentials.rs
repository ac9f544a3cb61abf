//! Acting as the target JVM's user while attaching, as jattach does when run as root.
//!
//! HotSpot accepts attach peers whose effective uid/gid match its own (JDK 11+ also root),
//! and creates its socket owned by itself. Switching our *effective* ids to the target's
//! makes the trigger file, the socket ownership check and the peer credentials agree on
//! every JDK, also when the JVM's user namespace does not map our root.

use std::io;

use crate::error::{AttachError, Result};

/// While alive, the process's effective uid/gid are the target's; dropping restores them.
pub struct ActingAs {
    saved: Option<(libc::uid_t, libc::gid_t)>,
}

impl ActingAs {
    /// Switches effective ids to `uid`/`gid` when we are root and they differ from ours;
    /// otherwise does nothing.
    pub fn target(uid: u32, gid: u32) -> Result<ActingAs> {
        // SAFETY: geteuid/getegid have no preconditions.
        let (euid, egid) = unsafe { (libc::geteuid(), libc::getegid()) };
        if euid != 0 || (uid == euid && gid == egid) {
            return Ok(ActingAs { saved: None });
        }
        // SAFETY: plain syscalls; the gid goes first because it needs privileges we lose with the uid.
        let switched = unsafe { libc::setegid(gid) == 0 && libc::seteuid(uid) == 0 };
        if !switched {
            let err = io::Error::last_os_error();
            // SAFETY: restoring root ids that we held a moment ago.
            unsafe {
                libc::seteuid(euid);
                libc::setegid(egid);
            }
            return Err(AttachError::io(format!("switching to uid {uid} gid {gid}"), err));
        }
        Ok(ActingAs { saved: Some((euid, egid)) })
    }

    /// The effective uid in force while this guard lives.
    pub fn effective_uid() -> u32 {
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() }
    }
}

impl Drop for ActingAs {
    fn drop(&mut self) {
        if let Some((uid, gid)) = self.saved {
            // SAFETY: we were root when the guard was made, so restoring succeeds (uid first).
            unsafe {
                libc::seteuid(uid);
                libc::setegid(gid);
            }
        }
    }
}
