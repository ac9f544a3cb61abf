//! The agent library: where this jtap finds it, and how a target JVM gets to open it (the
//! copy it already has mapped, this jtap's own file, or a private copy in the target's
//! `/tmp`).

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use jtap_attach::process::Process;
use jtap_protocol::VERSION;

use crate::files::{chown_to_target, random_hex, register_pending, unregister_pending};
use crate::{AgentError, LIBRARY_NAME};

/// The agent library next to this executable, in `../lib`, or from `$JTAP_AGENT`.
pub fn locate_library() -> Result<PathBuf, AgentError> {
    let mut candidates = Vec::new();
    if let Some(path) = std::env::var_os("JTAP_AGENT") {
        candidates.push(PathBuf::from(path));
    }
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.canonicalize().ok()?.parent().map(Path::to_path_buf))
    {
        candidates.push(dir.join(LIBRARY_NAME));
        candidates.push(dir.join("../lib").join(LIBRARY_NAME));
    }
    match candidates.iter().find(|p| p.is_file()) {
        Some(found) => Ok(found.canonicalize().unwrap_or_else(|_| found.clone())),
        None => Err(AgentError::LibraryNotFound(
            candidates
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        )),
    }
}

/// The agent library as the target JVM sees it.
pub(crate) struct PlacedLibrary {
    /// Path inside the target's mount namespace.
    pub(crate) guest_path: String,
    /// A copy we made in the target's `/tmp`, removed once loaded (the mapping stays).
    copy: Option<PathBuf>,
}

impl Drop for PlacedLibrary {
    fn drop(&mut self) {
        if let Some(copy) = &self.copy {
            unregister_pending(copy);
        }
    }
}

/// The path of a jtap agent the JVM already has mapped: loading it again by that exact path
/// reaches the same library (and agent) instead of a second copy.
fn mapped_agent(process: &Process) -> Option<String> {
    let maps = fs::read_to_string(format!("/proc/{}/maps", process.pid)).ok()?;
    maps.lines().find_map(|line| {
        let path = line.split_whitespace().nth(5)?;
        let name = Path::new(path).file_name()?.to_str()?;
        (name == LIBRARY_NAME || (name.starts_with("jtap-agent-") && name.ends_with(".so")))
            .then(|| path.to_string())
    })
}

fn same_mount_namespace(process: &Process) -> bool {
    let ns = |pid: &str| fs::read_link(format!("/proc/{pid}/ns/mnt")).ok();
    ns("self").is_some() && ns("self") == ns(&process.pid.to_string())
}

/// Makes the library loadable by the target: the mapped agent if there is one, our own
/// file when the target shares our filesystem and user, else a private copy in its `/tmp`.
pub(crate) fn place_library(process: &Process) -> Result<PlacedLibrary, AgentError> {
    if let Some(path) = mapped_agent(process) {
        return Ok(PlacedLibrary {
            guest_path: path,
            copy: None,
        });
    }
    let library = locate_library()?;
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    if same_mount_namespace(process) && process.uid == euid {
        return Ok(PlacedLibrary {
            guest_path: library.display().to_string(),
            copy: None,
        });
    }
    let bytes = fs::read(&library)
        .map_err(|e| load_failed(process, format!("reading {}: {e}", library.display())))?;
    let name = format!("jtap-agent-{VERSION}-{}.so", random_hex(8));
    let host_path = process.tmp_dir().join(&name);
    register_pending(&host_path);
    let placed = PlacedLibrary {
        guest_path: format!("/tmp/{name}"),
        copy: Some(host_path.clone()),
    };
    let mut file: File = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&host_path)
        .map_err(|e| {
            load_failed(
                process,
                format!("copying the agent to {}: {e}", host_path.display()),
            )
        })?;
    file.write_all(&bytes)
        .map_err(|e| load_failed(process, format!("writing {}: {e}", host_path.display())))?;
    chown_to_target(&host_path, process)
        .map_err(|e| load_failed(process, format!("chown {}: {e}", host_path.display())))?;
    Ok(placed)
}

pub(crate) fn load_failed(process: &Process, reason: String) -> AgentError {
    AgentError::LoadFailed {
        pid: process.pid,
        reason,
    }
}
