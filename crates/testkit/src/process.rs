//! A Java workload process that is always killed, with its whole process group.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::jdk::Jdk;
use crate::workloads::{compiled_workloads, repo_root};

/// How to start a Java workload.
pub struct JavaProcessBuilder {
    jdk: Jdk,
    main_class: String,
    jvm_args: Vec<OsString>,
    app_args: Vec<OsString>,
    wrapper: Vec<OsString>,
    classpath: Vec<PathBuf>,
    ready_line: Option<String>,
    cwd: Option<PathBuf>,
    env: Vec<(OsString, OsString)>,
    deny_perf_events: bool,
}

impl JavaProcessBuilder {
    /// Adds a JVM option (before the main class).
    pub fn jvm_arg(mut self, arg: impl Into<OsString>) -> Self {
        self.jvm_args.push(arg.into());
        self
    }

    /// Adds an application argument (after the main class).
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.app_args.push(arg.into());
        self
    }

    /// Runs the JVM under a seccomp filter that fails `perf_event_open` with `EPERM`, as
    /// Docker's default profile does.
    pub fn deny_perf_events(mut self) -> Self {
        self.deny_perf_events = true;
        self
    }

    /// Runs the JVM through a wrapper command (e.g. `unshare ...` or `setpriv ...`).
    pub fn wrapper<I, S>(mut self, command: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.wrapper = command.into_iter().map(Into::into).collect();
        self
    }

    /// Adds a classpath entry after the compiled workloads.
    pub fn classpath(mut self, entry: impl Into<PathBuf>) -> Self {
        self.classpath.push(entry.into());
        self
    }

    /// Waits for this stdout line instead of `READY` (None: do not wait at all).
    pub fn ready_line(mut self, line: Option<&str>) -> Self {
        self.ready_line = line.map(str::to_string);
        self
    }

    /// Working directory of the JVM.
    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    /// Sets an environment variable for the JVM.
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Starts the JVM and waits (up to 60 s) for its ready line. Panics if it exits first.
    pub fn start(self) -> JavaProcess {
        let mut classpath = vec![compiled_workloads().to_path_buf()];
        classpath.extend(self.classpath.iter().cloned());
        let classpath = std::env::join_paths(classpath).expect("classpath");
        let mut argv: Vec<OsString> = self.wrapper.clone();
        argv.push(self.jdk.java().into());
        argv.extend(self.jvm_args.iter().cloned());
        argv.extend(["-cp".into(), classpath, self.main_class.clone().into()]);
        argv.extend(self.app_args.iter().cloned());

        let mut command = Command::new(&argv[0]);
        command
            .args(&argv[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // Own process group, so that drop kills wrappers and the JVM together.
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        if let Some(dir) = &self.cwd {
            command.current_dir(dir);
        }
        for (k, v) in &self.env {
            command.env(k, v);
        }
        if self.deny_perf_events {
            // SAFETY: the closure runs in the forked child before exec and only makes system
            // calls (no allocation, no locks).
            unsafe {
                std::os::unix::process::CommandExt::pre_exec(&mut command, || {
                    crate::seccomp::deny_perf_event_open()
                });
            }
        }
        let mut child = command
            .spawn()
            .unwrap_or_else(|e| panic!("starting {:?}: {e}", argv));
        let stdout = Output::collect(child.stdout.take().expect("stdout"));
        let stderr = Output::collect(child.stderr.take().expect("stderr"));
        let process = JavaProcess {
            child,
            stdout,
            stderr,
            jdk: self.jdk,
            jvm_pid: None,
        };
        if let Some(line) = &self.ready_line {
            if !process.stdout.wait_for_line(line, Duration::from_secs(60)) {
                panic!(
                    "{} on JDK {} never printed {line:?}; stdout: {:?}; stderr: {:?}",
                    self.main_class,
                    process.jdk.version,
                    process.stdout.text(),
                    process.stderr.text()
                );
            }
        }
        process
    }
}

/// A running Java workload; dropping it kills its process group.
pub struct JavaProcess {
    child: Child,
    /// Everything the workload printed on stdout so far.
    pub stdout: Output,
    /// Everything the workload printed on stderr so far.
    pub stderr: Output,
    /// The JDK it runs on.
    pub jdk: Jdk,
    jvm_pid: Option<u32>,
}

impl JavaProcess {
    /// Prepares a workload from `tests/java/` (e.g. `workloads.Sleeper`) on `jdk`.
    pub fn builder(jdk: &Jdk, main_class: &str) -> JavaProcessBuilder {
        JavaProcessBuilder {
            jdk: jdk.clone(),
            main_class: main_class.to_string(),
            jvm_args: Vec::new(),
            app_args: Vec::new(),
            wrapper: Vec::new(),
            classpath: Vec::new(),
            ready_line: Some("READY".into()),
            cwd: None,
            env: Vec::new(),
            deny_perf_events: false,
        }
    }

    /// Starts `main_class` on `jdk` with default settings and waits until it is ready.
    pub fn start(jdk: &Jdk, main_class: &str) -> JavaProcess {
        Self::builder(jdk, main_class).start()
    }

    /// Pid of the JVM itself (the wrapper's descendant when started through a wrapper).
    pub fn pid(&mut self) -> u32 {
        if let Some(pid) = self.jvm_pid {
            return pid;
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(pid) = find_java(self.child.id()) {
                self.jvm_pid = Some(pid);
                return pid;
            }
            assert!(
                Instant::now() < deadline,
                "no java process under pid {}",
                self.child.id()
            );
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for the process to exit by itself and returns its exit code (None if killed).
    pub fn wait(&mut self, timeout: Duration) -> Option<Option<i32>> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status.code());
            }
            if Instant::now() >= deadline {
                return None;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// True while the launched process has not exited.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Resident set size of the JVM in KiB, from `/proc/<pid>/status`.
    pub fn rss_kib(&mut self) -> u64 {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for JavaProcess {
    fn drop(&mut self) {
        let jvm_pid = self.jvm_pid.or_else(|| find_java(self.child.id()));
        // SAFETY: signalling our own child's process group.
        unsafe {
            libc::kill(-(self.child.id() as libc::pid_t), libc::SIGKILL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(pid) = jvm_pid {
            remove_leftovers(pid);
        }
    }
}

/// A SIGKILLed JVM leaves its attach socket and perf data file in /tmp. Left there, a later
/// JVM that reuses the pid under another user cannot replace them (sticky /tmp), which breaks
/// unrelated tests; so the harness removes them (JVMs in private /tmp mounts leave none here).
fn remove_leftovers(pid: u32) {
    let _ = std::fs::remove_file(format!("/tmp/.java_pid{pid}"));
    if let Ok(dirs) = std::fs::read_dir("/tmp") {
        for dir in dirs
            .flatten()
            .filter(|d| d.file_name().to_string_lossy().starts_with("hsperfdata_"))
        {
            let _ = std::fs::remove_file(dir.path().join(pid.to_string()));
        }
    }
}

/// Wrapper command that runs a JVM "in a container": its own pid and mount namespaces with a
/// private tmpfs on `/tmp`, so its attach socket and perf data are reachable only through
/// `/proc/<pid>/root`. Needs root. When the repository itself lives under `/tmp` (as CI
/// checkouts may), it is bind-mounted back into the private `/tmp`, reached through the
/// shell's working directory (not canonicalised), which still points at the directory the
/// tmpfs hides.
pub fn container_wrapper() -> Vec<String> {
    let repo = repo_root().display().to_string();
    let script = r#"cd "$JTAP_REPO" && mount -t tmpfs jtap-test-tmp /tmp && case "$JTAP_REPO" in /tmp/*) mkdir -p "$JTAP_REPO" && mount --no-canonicalize --bind . "$JTAP_REPO";; esac && cd / && exec "$0" "$@""#;
    [
        "env",
        &format!("JTAP_REPO={repo}"),
        "unshare",
        "--pid",
        "--fork",
        "--mount",
        "--mount-proc",
        "--kill-child",
        "sh",
        "-c",
        script,
    ]
    .into_iter()
    .map(String::from)
    .collect()
}

/// The first process named `java` at or below `root` in the process tree.
fn find_java(root: u32) -> Option<u32> {
    let mut frontier = vec![root];
    while let Some(pid) = frontier.pop() {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if comm.trim() == "java" {
            return Some(pid);
        }
        frontier.extend(children_of(pid));
    }
    None
}

fn children_of(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|child| {
            let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
            stat.rfind(')')
                .and_then(|i| stat[i + 2..].split_whitespace().nth(1)?.parse::<u32>().ok())
                == Some(pid)
        })
        .collect()
}

/// Lines a process printed, collected by a background thread.
#[derive(Clone, Default)]
pub struct Output {
    state: Arc<(Mutex<String>, Condvar)>,
}

impl Output {
    fn collect(stream: impl Read + Send + 'static) -> Output {
        let output = Output::default();
        let state = output.state.clone();
        thread::spawn(move || {
            for line in BufReader::new(stream).lines() {
                let Ok(line) = line else { break };
                let (text, changed) = &*state;
                let mut text = text.lock().unwrap();
                text.push_str(&line);
                text.push('\n');
                changed.notify_all();
            }
        });
        output
    }

    /// Everything printed so far.
    pub fn text(&self) -> String {
        self.state.0.lock().unwrap().clone()
    }

    /// Waits until a line equal to `line` has been printed.
    pub fn wait_for_line(&self, line: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let (text, changed) = &*self.state;
        let mut text = text.lock().unwrap();
        loop {
            if text.lines().any(|l| l == line) {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            text = changed.wait_timeout(text, deadline - now).unwrap().0;
        }
    }
}
