//! Starting a JVM's attach listener: the `.attach_pid<pid>` trigger file plus SIGQUIT, then
//! polling (with back-off) until `/tmp/.java_pid<pid>` appears, signalling once more halfway
//! to the deadline.
//!
//! Polling starts at a quarter of a millisecond because the listener is up ~1.6 ms after the
//! signal on these machines; fixed sleeps of tens of milliseconds (as in jattach) are what
//! make a first attach slow.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use crate::discovery::{read_perf_data, CommandLine};
use crate::error::{AttachError, Result};
use crate::process::{self, Process};

/// Trigger files created and not yet removed, for [`remove_pending_trigger_files`].
static PENDING_TRIGGERS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Removes every trigger file this process created and still holds. For interrupt handlers
/// that run on an ordinary thread (such as the `ctrlc` crate's), not inside signal handlers.
pub fn remove_pending_trigger_files() {
    let paths = std::mem::take(&mut *PENDING_TRIGGERS.lock().unwrap_or_else(|e| e.into_inner()));
    for path in paths {
        let _ = fs::remove_file(path);
    }
}

/// A `.attach_pid<pid>` file, exclusively locked (flock) by us; removed on drop.
///
/// The lock serialises concurrent jtap clients: without it, one client could remove the
/// trigger after its own attach while the JVM has yet to handle another client's SIGQUIT,
/// and a JVM that gets SIGQUIT without a trigger file prints a thread dump on its stdout.
struct TriggerFile {
    path: PathBuf,
    _lock: Flock<File>,
}

/// What locking the trigger file found.
enum Locked {
    /// We hold the trigger file; signal the JVM.
    Trigger(TriggerFile),
    /// The file we locked was removed by a client that finished meanwhile: look again.
    Retry,
}

impl TriggerFile {
    /// Creates (or opens) and locks the trigger in the first of `dirs` that accepts it,
    /// waiting for another client's lock at most until `deadline`.
    fn lock(dirs: &[PathBuf], ns_pid: u32, pid: u32, deadline: Instant) -> Result<Locked> {
        let mut last_err = None;
        for dir in dirs {
            let path = dir.join(format!(".attach_pid{ns_pid}"));
            // Register before creating so an interrupt between the two cannot leak the file.
            PENDING_TRIGGERS
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(path.clone());
            let file = match OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .open(&path)
            {
                Ok(file) => file,
                Err(e) => {
                    forget_trigger(&path);
                    last_err = Some((path, e));
                    continue;
                }
            };
            let lock = wait_for_lock(file, deadline).map_err(|_| {
                forget_trigger(&path);
                AttachError::ListenerTimeout { pid, timeout_ms: 0 }
            })?;
            // A client that held the lock before us may have removed the file we opened.
            let same_file = match (fs::metadata(&path), lock.metadata()) {
                (Ok(on_disk), Ok(ours)) => {
                    on_disk.ino() == ours.ino() && on_disk.dev() == ours.dev()
                }
                _ => false,
            };
            if !same_file {
                forget_trigger(&path);
                return Ok(Locked::Retry);
            }
            return Ok(Locked::Trigger(TriggerFile { path, _lock: lock }));
        }
        let (path, err) = last_err.expect("at least one trigger directory");
        Err(match err.kind() {
            io::ErrorKind::PermissionDenied => AttachError::PermissionDenied(format!(
                "cannot create {}: permission denied",
                path.display()
            )),
            _ => AttachError::io(format!("creating {}", path.display()), err),
        })
    }
}

fn wait_for_lock(mut file: File, deadline: Instant) -> std::result::Result<Flock<File>, ()> {
    loop {
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => return Ok(lock),
            Err((returned, _)) => file = returned,
        }
        if Instant::now() >= deadline {
            return Err(());
        }
        thread::sleep(Duration::from_micros(500));
    }
}

impl Drop for TriggerFile {
    fn drop(&mut self) {
        // Removed while still locked, so a waiting client notices the file is gone.
        let _ = fs::remove_file(&self.path);
        forget_trigger(&self.path);
    }
}

fn forget_trigger(path: &Path) {
    PENDING_TRIGGERS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|p| p != path);
}

/// Where the JVM's attach socket lives, as reachable from here.
pub fn socket_path(process: &Process) -> PathBuf {
    process
        .tmp_dir()
        .join(format!(".java_pid{}", process.ns_pid))
}

/// Checks the socket file as the JDK's own client does: a socket, owned by the user we act
/// as, with no permissions for group or others.
pub fn check_socket_file(path: &Path, expected_uid: u32) -> Result<()> {
    let meta = fs::metadata(path)
        .map_err(|e| AttachError::io(format!("checking {}", path.display()), e))?;
    let insecure = |reason: String| AttachError::InsecureSocket {
        path: path.display().to_string(),
        reason,
    };
    if !meta.file_type().is_socket() {
        return Err(insecure("not a socket".into()));
    }
    if meta.uid() != expected_uid {
        return Err(insecure(format!(
            "owned by {} instead of {}",
            process::user_name(meta.uid()),
            process::user_name(expected_uid)
        )));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(insecure(format!(
            "mode {:o} lets group or others connect",
            meta.mode() & 0o777
        )));
    }
    Ok(())
}

/// Makes sure the JVM's attach listener is running, starting it if needed, and returns the
/// socket path. Refuses, without signalling, JVMs that would not survive or answer SIGQUIT.
pub fn ensure_listener(process: &Process, timeout: Duration) -> Result<PathBuf> {
    let socket = socket_path(process);
    if socket.exists() {
        return Ok(socket);
    }
    refuse_if_attach_disabled(process)?;
    let deadline = Instant::now() + timeout;
    wait_for_sigquit_handler(process, deadline)?;
    let timed_out = || AttachError::ListenerTimeout {
        pid: process.pid,
        timeout_ms: timeout.as_millis() as u64,
    };

    let _trigger = loop {
        let locked = TriggerFile::lock(
            &[process.tmp_dir(), process.cwd()],
            process.ns_pid,
            process.pid,
            deadline,
        )
        .map_err(|e| {
            if let AttachError::ListenerTimeout { .. } = e {
                timed_out()
            } else {
                e
            }
        })?;
        // Another client may have started the listener while we waited for the lock.
        if socket.exists() {
            return Ok(socket);
        }
        if let Locked::Trigger(trigger) = locked {
            break trigger;
        }
    };
    send_sigquit(process)?;

    // A JVM in its first moments can take the signal and still not start its listener (it
    // failed to create the listener's thread, or handled the signal before it could): like
    // the JDK's own Attach API, signal once more halfway to the deadline. A listener already
    // starting ignores the second signal (an older HotSpot may start a second listener thread
    // instead, as it does for the JDK's own client).
    let mut signal_again_at = Some(Instant::now() + timeout / 2);
    let mut pause = Duration::from_micros(250);
    loop {
        if socket.exists() {
            return Ok(socket);
        }
        if !process.is_alive() {
            return Err(AttachError::NoSuchProcess(process.pid));
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(timed_out());
        }
        if signal_again_at.is_some_and(|at| now >= at) {
            signal_again_at = None;
            send_sigquit(process)?;
        }
        thread::sleep(pause.min(deadline - now));
        pause = (pause * 3 / 2).min(Duration::from_millis(10));
    }
}

/// Fails early when the JVM's options say attach cannot work, naming the option.
fn refuse_if_attach_disabled(process: &Process) -> Result<()> {
    let command_line = CommandLine::parse(&process.cmdline);
    let perf_args = read_perf_data(process)
        .map(|p| {
            ["java.rt.vmArgs", "sun.rt.jvmFlags"]
                .iter()
                .filter_map(|k| p.text(k).map(str::to_string))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default();
    let tool_options = process::read_proc(process.pid, "environ")
        .map(|env| {
            env.split('\0')
                .filter(|kv| {
                    kv.starts_with("JAVA_TOOL_OPTIONS=") || kv.starts_with("JDK_JAVA_OPTIONS=")
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default();
    let has = |flag: &str| {
        command_line.has_option(flag)
            || perf_args.split_whitespace().any(|a| a == flag)
            || tool_options
                .split(|c: char| c.is_whitespace() || c == '=')
                .any(|a| a == flag)
    };
    let disabled = |reason: &str| AttachError::AttachDisabled {
        pid: process.pid,
        reason: reason.to_string(),
    };
    if has("-XX:+DisableAttachMechanism") {
        return Err(disabled("it was started with -XX:+DisableAttachMechanism"));
    }
    if has("-Xrs") || has("-XX:+ReduceSignalUsage") {
        return Err(disabled(
            "it was started with -Xrs (reduced signal usage): its attach listener is not running and SIGQUIT would terminate it",
        ));
    }
    Ok(())
}

/// Waits until the process has a SIGQUIT handler installed: a JVM still starting up (or not a
/// JVM at all) would be killed by the signal.
fn wait_for_sigquit_handler(process: &Process, deadline: Instant) -> Result<()> {
    loop {
        if catches_sigquit(process.pid)? {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(AttachError::AttachDisabled {
                pid: process.pid,
                reason: "it does not handle SIGQUIT (still starting up, or signals reduced), so it cannot be signalled safely"
                    .into(),
            });
        }
        thread::sleep(Duration::from_millis(5));
    }
}

fn catches_sigquit(pid: u32) -> Result<bool> {
    let status = process::read_proc(pid, "status")?;
    let caught = status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or(0);
    Ok(caught & (1 << (Signal::SIGQUIT as i32 - 1)) != 0)
}

fn send_sigquit(process: &Process) -> Result<()> {
    kill(Pid::from_raw(process.pid as i32), Signal::SIGQUIT).map_err(|errno| match errno {
        Errno::ESRCH => AttachError::NoSuchProcess(process.pid),
        Errno::EPERM => process::permission_denied(process.pid),
        _ => AttachError::io(format!("signalling {}", process.pid), errno.into()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in for a JVM whose first SIGQUIT does not start its listener (as when HotSpot
    /// fails to create the listener's thread in its first moments): Perl (Debian's essential
    /// `perl-base`), which makes the socket path only at the second signal. Not a shell: one
    /// started in the background of a script (as CI runs the tests) inherits SIGQUIT
    /// ignored and may not trap it.
    #[test]
    fn a_listener_that_ignores_the_first_signal_is_signalled_again() {
        let mut stand_in = std::process::Command::new("perl")
            .args([
                "-e",
                "my $n = 0; \
                 $SIG{QUIT} = sub { open(my $f, '>', \"/tmp/.java_pid$$\") if ++$n >= 2 }; \
                 sleep 1 while 1;",
            ])
            .spawn()
            .unwrap();
        let process = Process::open(stand_in.id()).unwrap();
        let started = Instant::now();
        let found = ensure_listener(&process, Duration::from_secs(4));
        let _ = stand_in.kill();
        let _ = stand_in.wait();
        let _ = fs::remove_file(socket_path(&process));
        assert_eq!(found.unwrap(), socket_path(&process));
        // The second signal goes halfway to the deadline.
        assert!(started.elapsed() >= Duration::from_secs(2));
    }
}
