//! Helpers shared by the CLI integration tests.
#![allow(dead_code)] // each test binary uses its own subset

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;
use std::time::{Duration, Instant};

use jtap_testkit::{compiled_real_programs, debian_jar, repo_root, JavaProcess, Jdk};

/// What a `jtap` run printed and how it exited.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Path of the `jtap` binary under test.
pub fn jtap_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_jtap"))
}

/// Runs `jtap args...` to completion.
pub fn jtap<I, S>(args: I) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    run(Command::new(jtap_bin()).args(args))
}

/// Runs a prepared command to completion, capturing its output.
/// A test never hangs: a command still running after this long is killed and the test fails.
pub const COMMAND_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(180);

/// Runs a prepared command to completion (at most [`COMMAND_TIMEOUT`]), capturing its output.
pub fn run(command: &mut Command) -> Run {
    use std::io::Read;
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run command");
    let drain = |mut stream: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = stream.read_to_end(&mut bytes);
            String::from_utf8_lossy(&bytes).into_owned()
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("stdout")));
    let stderr = drain(Box::new(child.stderr.take().expect("stderr")));
    let deadline = std::time::Instant::now() + COMMAND_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for command") {
            break status;
        }
        if std::time::Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("command did not finish within {COMMAND_TIMEOUT:?}: {command:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    Run {
        code: status.code().unwrap_or(-1),
        stdout: stdout.join().expect("stdout reader"),
        stderr: stderr.join().expect("stderr reader"),
    }
}

impl Run {
    /// Asserts success and returns stdout.
    pub fn ok(self) -> String {
        assert_eq!(self.code, 0, "jtap failed: {self:?}");
        self.stdout
    }

    /// Asserts a failure with this exit code, a single-line message containing `needle`,
    /// and no panic or backtrace.
    pub fn fails_with(&self, code: i32, needle: &str) {
        assert_eq!(self.code, code, "unexpected exit code: {self:?}");
        let message = self.stderr.trim_end();
        assert!(message.starts_with("jtap: "), "no error line: {self:?}");
        assert_eq!(
            message.lines().count(),
            1,
            "error is not one line: {self:?}"
        );
        assert!(message.contains(needle), "error lacks {needle:?}: {self:?}");
        assert!(!message.contains("panicked"), "panic: {self:?}");
    }
}

/// Lines of an agent log (agent option `log=`) saying that a stop found signal handlers or
/// event callbacks still running: a thread of the JVM stuck in one.
pub fn agent_stalls(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("still running") || l.contains("keeping"))
        .map(String::from)
        .collect()
}

/// Whether we run as root (container and other-user tests need it).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Trigger files left behind anywhere we could have created them for this pid.
pub fn leftover_triggers(pid: u32, ns_pid: u32) -> Vec<String> {
    [
        format!("/proc/{pid}/root/tmp/.attach_pid{ns_pid}"),
        format!("/proc/{pid}/cwd/.attach_pid{ns_pid}"),
    ]
    .into_iter()
    .filter(|p| Path::new(p).exists())
    .collect()
}

/// `target/debug/libjtap_agent.so`, next to the jtap binary under test, built with
/// `cargo build -p jtap-agent` when missing or older than its sources.
pub fn agent_library() -> &'static Path {
    static LIBRARY: OnceLock<PathBuf> = OnceLock::new();
    LIBRARY.get_or_init(|| {
        let library = jtap_bin().with_file_name("libjtap_agent.so");
        let built = std::fs::metadata(&library).and_then(|m| m.modified()).ok();
        // The agent and every crate it is built from.
        let sources = [
            "crates/agent",
            "crates/classfile",
            "crates/jvmti",
            "crates/profile",
            "crates/protocol",
        ]
        .map(|d| repo_root().join(d));
        let newest = sources.iter().filter_map(|d| newest_mtime(d)).max();
        if built.is_none() || newest > built {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let status = Command::new(cargo)
                .args(["build", "-p", "jtap-agent"])
                .current_dir(repo_root())
                .status()
                .expect("running cargo build -p jtap-agent");
            assert!(status.success(), "cargo build -p jtap-agent failed");
        }
        assert!(
            library.exists(),
            "{} missing after the build",
            library.display()
        );
        library
    })
}

fn newest_mtime(dir: &Path) -> Option<SystemTime> {
    let mut newest = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        let time = if path.is_dir() {
            newest_mtime(&path)
        } else {
            entry.metadata().ok()?.modified().ok()
        };
        newest = newest.max(time);
    }
    newest
}

/// Collapsed stacks (`frame;frame;frame count` per line) as (frames, root first; count).
pub fn collapsed(text: &str) -> Vec<(Vec<String>, u64)> {
    text.lines()
        .filter_map(|line| {
            let (stack, count) = line.rsplit_once(' ')?;
            Some((
                stack.split(';').map(String::from).collect(),
                count.parse().ok()?,
            ))
        })
        .collect()
}

/// A collapsed-stacks file, parsed by [`collapsed`].
pub fn collapsed_file(path: &Path) -> Vec<(Vec<String>, u64)> {
    collapsed(&std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

/// How long a tracing session may take to put its probes in.
pub const PROBES_IN: Duration = Duration::from_secs(30);

/// What a session printed and how it exited: (code, stdout, stderr).
pub type Ended = (i32, String, String);

/// Runs `during` while the tracing session `jtap args...` runs (started in `cwd`, its
/// probes in), then waits up to `finish_within` for the session's end. Returns what `during`
/// returned and how the session ended.
pub fn traced_while<T>(
    args: &[&str],
    cwd: &Path,
    finish_within: Duration,
    during: impl FnOnce() -> T,
) -> (T, Ended) {
    let session = Background::tracing(args, cwd);
    let result = during();
    (result, session.finish(finish_within))
}

/// A `jtap` run in the background whose stderr is collected as it comes.
pub struct Background {
    pub child: Child,
    pub stdout: Arc<Mutex<String>>,
    pub stderr: Arc<Mutex<String>>,
}

impl Background {
    pub fn start(args: &[&str], cwd: &Path) -> Background {
        let mut child = Command::new(jtap_bin())
            .args(args)
            .current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start jtap");
        let collect = |stream: Box<dyn std::io::Read + Send>| {
            let text = Arc::new(Mutex::new(String::new()));
            let sink = text.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    let mut t = sink.lock().unwrap();
                    t.push_str(&line);
                    t.push('\n');
                }
            });
            text
        };
        let stdout = collect(Box::new(child.stdout.take().unwrap()));
        let stderr = collect(Box::new(child.stderr.take().unwrap()));
        Background {
            child,
            stdout,
            stderr,
        }
    }

    /// Starts `jtap args...` in `cwd` (a `trace`, `calltree`, `monitor` or `btrace` session)
    /// and waits, up to [`PROBES_IN`], until it says its probes are in (`jtap: tracing:`).
    pub fn tracing(args: &[&str], cwd: &Path) -> Background {
        let mut session = Background::start(args, cwd);
        session.wait_stderr("jtap: tracing:", PROBES_IN);
        session
    }

    /// Waits until stderr contains `needle`; panics (with what was printed) after `timeout`.
    pub fn wait_stderr(&mut self, needle: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while !self.stderr.lock().unwrap().contains(needle) {
            if let Ok(Some(status)) = self.child.try_wait() {
                std::thread::sleep(Duration::from_millis(100));
                panic!(
                    "jtap exited ({status}) before printing {needle:?}: {}",
                    self.stderr.lock().unwrap()
                );
            }
            assert!(
                Instant::now() < deadline,
                "no {needle:?} after {timeout:?}: {}",
                self.stderr.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends SIGINT, as Ctrl-C does.
    pub fn interrupt(&self) {
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
    }

    /// Waits for the exit; returns (code, stdout, stderr).
    pub fn finish(mut self, timeout: Duration) -> Ended {
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                panic!(
                    "jtap did not finish within {timeout:?}: {}",
                    self.stderr.lock().unwrap()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        std::thread::sleep(Duration::from_millis(100)); // let the readers drain
        let out = self.stdout.lock().unwrap().clone();
        let err = self.stderr.lock().unwrap().clone();
        (status.code().unwrap_or(-1), out, err)
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The counts of an engine's `stacks:` line in the agent's log.
#[derive(Debug, Clone, Copy)]
pub struct WalkerCounts {
    /// Stacks jtap's walker gave.
    pub walked: u64,
    /// Stacks the VM's walker (JVMTI, AsyncGetCallTrace) gave where jtap's stopped.
    pub fell_back: u64,
    /// Stacks taken both ways, those that differed, and of them those that differed only in
    /// the scopes of the interrupted compiled frame, only in those of a compiled frame at a
    /// pc descriptor (a call's return address, or a signal's pc where a run of one scope's
    /// instructions ends: `AsyncGetCallTrace` takes the next descriptor), those where jtap's walker went on below the other's last frame, and those
    /// where it read a virtual thread's frames frozen in its stack chunks.
    pub compared: u64,
    pub differed: u64,
    pub differed_at_top: u64,
    pub differed_at_descriptor: u64,
    pub went_further: u64,
    pub read_frozen: u64,
    /// Stacks whose walk stopped at a reference the collector had not healed yet (a stack
    /// chunk's link under generational ZGC), given by the VM's walker instead.
    pub unhealed: u64,
}

/// The counts of `engine`'s `stacks:` line in the agent's log, if there is one.
pub fn walker_counts(log: &str, engine: &str) -> Option<WalkerCounts> {
    let line = log
        .lines()
        .find(|l| l.contains(&format!("] {engine}: stacks: ")))?;
    walker_line(line)
}

/// The counts of all the `stacks:` lines of an engine (one per profile it ran), summed.
pub fn walker_counts_summed(log: &str, engine: &str) -> Option<WalkerCounts> {
    let marker = format!("] {engine}: stacks: ");
    let lines = log.lines().filter(|l| l.contains(&marker));
    lines
        .map(walker_line)
        .try_fold(None, |sum: Option<WalkerCounts>, counts| {
            let counts = counts?;
            Some(Some(match sum {
                None => counts,
                Some(sum) => WalkerCounts {
                    walked: sum.walked + counts.walked,
                    fell_back: sum.fell_back + counts.fell_back,
                    compared: sum.compared + counts.compared,
                    differed: sum.differed + counts.differed,
                    differed_at_top: sum.differed_at_top + counts.differed_at_top,
                    differed_at_descriptor: sum.differed_at_descriptor
                        + counts.differed_at_descriptor,
                    went_further: sum.went_further + counts.went_further,
                    read_frozen: sum.read_frozen + counts.read_frozen,
                    unhealed: sum.unhealed + counts.unhealed,
                },
            }))
        })?
}

/// The reason the agent's log gives for walks stopped at a reference not healed yet.
const UNHEALED: &str = "reference not healed by the collector yet";

/// The counts of one `stacks:` line.
fn walker_line(line: &str) -> Option<WalkerCounts> {
    let number_before = |word: &str| -> Option<u64> {
        let before = &line[..line.find(word)?];
        before.split_whitespace().last()?.parse().ok()
    };
    // The digits that start the word after `word` (`58` of `58);`).
    let number_after = |word: &str| -> Option<u64> {
        let next = line[line.find(word)? + word.len()..]
            .split_whitespace()
            .next()?;
        let digits = next
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(next.len());
        next[..digits].parse().ok()
    };
    Some(WalkerCounts {
        walked: number_before(" by jtap's walker")?,
        fell_back: number_after("by jtap's walker, ")?,
        compared: number_before(" compared with ")?,
        differed: number_before(" differed")?,
        differed_at_top: number_after(" differed (")?,
        differed_at_descriptor: number_before(" only in those of a frame at a pc descriptor")?,
        went_further: number_before(" where jtap's went further")?,
        read_frozen: number_before(" where it read frames frozen")?,
        // Listed among the reasons, as `… yet 58)`, only when some walk stopped so.
        unhealed: number_after(UNHEALED).unwrap_or(0),
    })
}

/// The Debian jars of an embedded Jetty 9.4.
pub const JETTY_JARS: [&str; 5] = [
    "jetty9-server",
    "jetty9-http",
    "jetty9-io",
    "jetty9-util",
    "servlet-api",
];

/// A real program of `tests/java/real/` (its driver `main`, with `args`, the Debian `jars` and
/// `-Xmx256m`) started, and ready: it printed READY.
pub fn real_program(jdk: &Jdk, main: &str, args: &[&str], jars: &[&str]) -> JavaProcess {
    real_program_with(jdk, main, args, jars, &["-Xmx256m"])
}

/// Units of work a real program reported so far (its last `PROGRESS n` line).
pub fn progress(jvm: &JavaProcess) -> u64 {
    jvm.stdout
        .text()
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("PROGRESS ")?.parse().ok())
        .unwrap_or(0)
}

/// [`real_program`] with these JVM options instead of `-Xmx256m`.
pub fn real_program_with(
    jdk: &Jdk,
    main: &str,
    args: &[&str],
    jars: &[&str],
    jvm_args: &[&str],
) -> JavaProcess {
    let mut builder = JavaProcess::builder(jdk, main)
        .classpath(compiled_real_programs())
        .ready_line(None);
    for option in jvm_args {
        builder = builder.jvm_arg(*option);
    }
    for arg in args {
        builder = builder.arg(*arg);
    }
    for jar in jars {
        builder = builder.classpath(debian_jar(jar));
    }
    let jvm = builder.start();
    assert!(
        jvm.stdout.wait_for_line("READY", Duration::from_secs(150)),
        "{main} on JDK {} never printed READY",
        jdk.version
    );
    jvm
}
