//! What `/proc` says about a process: identity, credentials, namespaces, and whether it is a JVM.

use std::fs;
use std::io;
use std::path::PathBuf;

use crate::error::{AttachError, Result};

/// A live process as seen through `/proc/<pid>`.
#[derive(Debug, Clone)]
pub struct Process {
    /// Pid in the caller's pid namespace.
    pub pid: u32,
    /// Pid inside the process's own (innermost) pid namespace; equals `pid` outside containers.
    pub ns_pid: u32,
    /// Effective uid of the process.
    pub uid: u32,
    /// Effective gid of the process.
    pub gid: u32,
    /// Short command name (`comm`).
    pub name: String,
    /// Command line arguments (`argv`).
    pub cmdline: Vec<String>,
    /// Start time in clock ticks after boot (field 22 of `stat`).
    pub start_ticks: u64,
}

impl Process {
    /// Reads the process's identity from `/proc`.
    pub fn open(pid: u32) -> Result<Process> {
        let status = read_proc(pid, "status")?;
        let mut ns_pid = pid;
        let (mut uid, mut gid) = (None, None);
        let mut name = String::new();
        for line in status.lines() {
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            let fields: Vec<&str> = value.split_whitespace().collect();
            match key {
                "Name" => name = value.trim().to_string(),
                // Uid: real effective saved fs
                "Uid" => uid = fields.get(1).and_then(|v| v.parse().ok()),
                "Gid" => gid = fields.get(1).and_then(|v| v.parse().ok()),
                "NSpid" => {
                    if let Some(last) = fields.last().and_then(|v| v.parse().ok()) {
                        ns_pid = last;
                    }
                }
                _ => {}
            }
        }
        let (Some(uid), Some(gid)) = (uid, gid) else {
            return Err(AttachError::Protocol(format!(
                "/proc/{pid}/status has no Uid/Gid"
            )));
        };
        let cmdline = read_proc(pid, "cmdline")
            .map(|raw| {
                raw.split('\0')
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default();
        let start_ticks = read_proc(pid, "stat")
            .ok()
            .and_then(|s| parse_start_ticks(&s))
            .unwrap_or(0);
        Ok(Process {
            pid,
            ns_pid,
            uid,
            gid,
            name,
            cmdline,
            start_ticks,
        })
    }

    /// The process's root directory as reachable from here (`/proc/<pid>/root`).
    pub fn root(&self) -> PathBuf {
        PathBuf::from(format!("/proc/{}/root", self.pid))
    }

    /// The process's `/tmp`, reached through its root so that containers work.
    pub fn tmp_dir(&self) -> PathBuf {
        self.root().join("tmp")
    }

    /// The process's working directory as reachable from here.
    pub fn cwd(&self) -> PathBuf {
        PathBuf::from(format!("/proc/{}/cwd", self.pid))
    }

    /// True when the process runs in another pid namespace than ours.
    pub fn in_container(&self) -> bool {
        self.ns_pid != self.pid
    }

    /// Whether `libjvm.so` is mapped into the process: the test for a HotSpot JVM that
    /// needs no cooperation from it. Fails with `PermissionDenied` when maps are unreadable.
    pub fn maps_libjvm(&self) -> Result<bool> {
        let maps = read_proc(self.pid, "maps")?;
        Ok(maps.lines().any(|l| l.ends_with("/libjvm.so")))
    }

    /// Seconds since the process started, from `/proc/uptime` and the start time.
    pub fn uptime_secs(&self) -> Option<f64> {
        let uptime: f64 = fs::read_to_string("/proc/uptime")
            .ok()?
            .split_whitespace()
            .next()?
            .parse()
            .ok()?;
        let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
            .ok()
            .flatten()?;
        if hz <= 0 || self.start_ticks == 0 {
            return None;
        }
        Some((uptime - self.start_ticks as f64 / hz as f64).max(0.0))
    }

    /// Whether the process is still alive (and is still the same process).
    pub fn is_alive(&self) -> bool {
        match read_proc(self.pid, "stat") {
            Ok(stat) => {
                parse_start_ticks(&stat) == Some(self.start_ticks) && !stat_is_zombie(&stat)
            }
            Err(_) => false,
        }
    }
}

/// Reads `/proc/<pid>/<file>`, mapping errors to the attach error vocabulary.
pub(crate) fn read_proc(pid: u32, file: &str) -> Result<String> {
    let path = format!("/proc/{pid}/{file}");
    match fs::read(&path) {
        Ok(bytes) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(AttachError::NoSuchProcess(pid)),
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => Err(permission_denied(pid)),
        // ESRCH: the process vanished while reading.
        Err(e) if e.raw_os_error() == Some(nix::errno::Errno::ESRCH as i32) => {
            Err(AttachError::NoSuchProcess(pid))
        }
        Err(e) => Err(AttachError::io(format!("reading {path}"), e)),
    }
}

/// The permission error for a process the caller may not inspect, naming its owner.
pub(crate) fn permission_denied(pid: u32) -> AttachError {
    if nix::unistd::geteuid().is_root() {
        return AttachError::PermissionDenied(format!(
            "process {pid} cannot be inspected even as root (ptrace restrictions, or a process outside our namespaces)"
        ));
    }
    let owner = owner_of(pid)
        .map(user_name)
        .unwrap_or_else(|| "another user".into());
    AttachError::PermissionDenied(format!(
        "process {pid} belongs to {owner}; run jtap as that user or as root"
    ))
}

/// The uid owning `/proc/<pid>` (readable even when the process's files are not).
fn owner_of(pid: u32) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    fs::metadata(format!("/proc/{pid}")).ok().map(|m| m.uid())
}

/// User name for a uid from `/etc/passwd`, or the number.
pub fn user_name(uid: u32) -> String {
    fs::read_to_string("/etc/passwd")
        .ok()
        .and_then(|passwd| {
            passwd.lines().find_map(|line| {
                let mut fields = line.split(':');
                let name = fields.next()?;
                let id: u32 = fields.nth(1)?.parse().ok()?;
                (id == uid).then(|| name.to_string())
            })
        })
        .unwrap_or_else(|| uid.to_string())
}

/// Field 22 (starttime) of `/proc/<pid>/stat`; the command name may contain spaces and parens.
fn parse_start_ticks(stat: &str) -> Option<u64> {
    let after_comm = &stat[stat.rfind(')')? + 2..];
    // after_comm starts at field 3 (state), so starttime (field 22) is index 19.
    after_comm.split_whitespace().nth(19)?.parse().ok()
}

fn stat_is_zombie(stat: &str) -> bool {
    stat.rfind(')').and_then(|i| stat[i + 2..].chars().next()) == Some('Z')
}

/// Every pid currently listed in `/proc`.
pub fn all_pids() -> Vec<u32> {
    let mut pids: Vec<u32> = fs::read_dir("/proc")
        .map(|dir| {
            dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    pids.sort_unstable();
    pids
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_ticks_survive_odd_command_names() {
        let stat = "42 (a) b (c)) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 123456 1000 10";
        assert_eq!(parse_start_ticks(stat), Some(123456));
    }

    #[test]
    fn reads_own_process() {
        let me = Process::open(std::process::id()).unwrap();
        assert_eq!(me.pid, std::process::id());
        assert!(me.is_alive());
        assert!(!me.maps_libjvm().unwrap());
    }

    #[test]
    fn missing_process_is_reported() {
        assert!(matches!(
            Process::open(u32::MAX - 1),
            Err(AttachError::NoSuchProcess(_))
        ));
    }
}
