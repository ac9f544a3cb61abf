//! Acting as the target JVM's user while attaching, as jattach does when run as root.
//!
//! HotSpot accepts attach peers whose effective uid/gid match its own (JDK 11+ also root),
//! and creates its socket owned by itself. Switching our *effective* ids to the target's
//! makes the trigger file, the socket ownership check and the peer credentials agree on
//! every JDK, also when the JVM's user namespace does not map our root.

use nix::unistd::{getegid, geteuid, setegid, seteuid, Gid, Uid};

use crate::error::{AttachError, Result};

/// While alive, the process's effective uid/gid are the target's; dropping restores them.
pub struct ActingAs {
    saved: Option<(Uid, Gid)>,
}

impl ActingAs {
    /// Switches effective ids to `uid`/`gid` when we are root and they differ from ours;
    /// otherwise does nothing.
    pub fn target(uid: u32, gid: u32) -> Result<ActingAs> {
        let (euid, egid) = (geteuid(), getegid());
        if !euid.is_root() || (uid == euid.as_raw() && gid == egid.as_raw()) {
            return Ok(ActingAs { saved: None });
        }
        // The gid goes first: changing it needs the privileges we give up with the uid.
        let switched = setegid(Gid::from_raw(gid)).and_then(|_| seteuid(Uid::from_raw(uid)));
        if let Err(errno) = switched {
            let _ = seteuid(euid);
            let _ = setegid(egid);
            return Err(AttachError::io(
                format!("switching to uid {uid} gid {gid}"),
                errno.into(),
            ));
        }
        Ok(ActingAs {
            saved: Some((euid, egid)),
        })
    }

    /// The effective uid in force while this guard lives.
    pub fn effective_uid() -> u32 {
        geteuid().as_raw()
    }
}

impl Drop for ActingAs {
    fn drop(&mut self) {
        if let Some((uid, gid)) = self.saved {
            // We were root when the guard was made, so restoring succeeds (uid first).
            let _ = seteuid(uid);
            let _ = setegid(gid);
        }
    }
}
