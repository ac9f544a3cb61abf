//! `jtap top` in both of its modes.
//!
//! Not a terminal (blocks of lines), on every JDK of the matrix: each refresh names the
//! workload's hot thread first, with heap and GC lines from hsperfdata; `--iterations` ends
//! it; an unknown pid gets a one-line error.
//!
//! In a terminal (a detached tmux session of 160x50, keys sent with `send-keys`, the screen
//! read with `capture-pane -p`): on every JDK the workload's hot method heads the rolling
//! cpu profile and its thread the threads; `s`, `t` and `e` re-sort and switch the event,
//! Enter opens the hot thread's stack, `w` writes a flame graph with the hot method, `q`
//! leaves with exit 0 and no recording left in the agent. On JDK 17, the same keys on H2 and
//! Jetty under load: their own methods and worker threads are drawn, and they keep working.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{agent_library, jtap, jtap_bin, real_program, JETTY_JARS};
use jtap_testkit::{jdks, JavaProcess};

#[test]
fn each_refresh_names_the_hot_thread_first() {
    for jdk in jdks() {
        let mut jvm = JavaProcess::start(jdk, "workloads.OnCall");
        let pid = jvm.pid().to_string();
        let text = jtap(["top", &pid, "-n", "3", "-i", "1s", "--iterations", "2"]).ok();
        let v = jdk.version;
        let blocks: Vec<&str> = text.split(&format!(" JVM {pid}: CPU ")).skip(1).collect();
        assert_eq!(blocks.len(), 2, "JDK {v}: {text}");
        for block in blocks {
            let lines: Vec<&str> = block.lines().collect();
            assert!(lines[1].starts_with("heap "), "JDK {v}: {block}");
            assert!(
                lines[2].starts_with("gc ") && lines[2].contains("safepoints"),
                "JDK {v}: {block}"
            );
            let header = lines
                .iter()
                .position(|l| l.contains("TOP FRAME"))
                .expect("header");
            let busiest = lines[header + 1];
            assert!(
                busiest.contains("RUNNABLE") && busiest.contains("hot-worker"),
                "JDK {v}: {block}"
            );
            assert!(busiest.contains("workloads.OnCall."), "JDK {v}: {block}");
            let rows = lines[header + 1..].iter().filter(|l| l.contains('%'));
            assert_eq!(rows.count(), 3, "JDK {v}: {block}");
        }
    }
}

#[test]
fn an_unknown_pid_gets_a_one_line_error() {
    jtap(["top", "999999999"]).fails_with(10, "no process");
    // Refused by the argument parser, as clap words it.
    let gc = jtap(["top", "1", "-e", "gc"]);
    assert_eq!(gc.code, 2, "{gc:?}");
    assert!(
        gc.stderr
            .contains("top profiles one of cpu, wall, alloc, lock"),
        "{gc:?}"
    );
}

#[test]
fn the_live_view_follows_its_keys_on_every_jdk() {
    for jdk in jdks() {
        let mut jvm = JavaProcess::start(jdk, "workloads.OnCall");
        let what = format!("OnCall on JDK {}", jdk.version);
        let keys = Keys {
            method: "workloads.OnCall.spin",
            threads: &["hot-worker"],
            frame: "workloads.OnCall.spin",
        };
        drive(&what, jvm.pid(), &keys);
        assert!(jvm.is_running(), "{what}: the JVM exited");
    }
}

#[test]
fn the_live_view_draws_h2_and_jetty_at_work() {
    let jdk = jdks()
        .iter()
        .find(|j| j.version == 17)
        .unwrap_or(&jdks()[0]);
    let h2 = Keys {
        method: "org.h2.",
        threads: &["h2-client-"],
        frame: "",
    };
    // The server's pool (qtp...) serves what the clients ask.
    let jetty = Keys {
        method: "org.eclipse.jetty.",
        threads: &["http-client-", "qtp"],
        frame: "",
    };
    for (main, arg, jars, keys) in [
        ("real.H2Load", "3", &["h2"][..], h2),
        ("real.JettyLoad", "2", &JETTY_JARS[..], jetty),
    ] {
        let mut jvm = real_program(jdk, main, &[arg], jars);
        let what = format!("{main} on JDK {}", jdk.version);
        let progress = |jvm: &JavaProcess| jvm.stdout.text().matches("PROGRESS").count();
        let before = progress(&jvm);
        drive(&what, jvm.pid(), &keys);
        wait_for(&what, Duration::from_secs(60), || progress(&jvm) > before);
        assert!(jvm.is_running(), "{what}: the JVM exited");
    }
}

/// What the view must show of a program: a method of its hot code (a prefix), the names (a
/// prefix each) of its busiest threads, and a frame of the first one's stack (its top
/// frames are shown; "" for any).
struct Keys {
    method: &'static str,
    threads: &'static [&'static str],
    frame: &'static str,
}

/// Runs `jtap top` on `pid` in tmux and goes through its keys, asserting on each screen.
fn drive(what: &str, pid: u32, keys: &Keys) {
    agent_library();
    let dir = tempfile::tempdir().expect("temporary directory");
    let tmux = Tmux::start(pid, dir.path());
    let busy = |s: &str| {
        threads(s)
            .iter()
            .take(5)
            .any(|row| keys.threads.iter().any(|name| row.contains(name)))
    };
    let screen = tmux.wait(what, "the busiest threads and the profile", |s| {
        busy(s) && s.contains("by self") && !methods(s).is_empty()
    });
    assert!(
        screen.contains("heap ") && screen.contains("gc "),
        "{what}:\n{screen}"
    );

    tmux.keys(&["s"]);
    tmux.wait(what, "the program's methods by total", |s| {
        s.contains("by total") && methods(s).iter().any(|l| l.contains(keys.method))
    });
    tmux.keys(&["t"]);
    tmux.wait(what, "threads by CPU time", |s| {
        s.contains("threads by CPU time")
    });
    tmux.keys(&["t"]);
    tmux.wait(what, "threads by name", |s| s.contains("threads by name"));
    select(&tmux, what, keys.threads[0]);
    tmux.keys(&["Enter"]);
    let stack = tmux.wait(what, "the stack of the selected thread", |s| {
        s.contains("(esc closes)") && s.contains(&format!("at {}", keys.frame))
    });
    assert!(stack.contains(keys.threads[0]), "{what}:\n{stack}");
    tmux.keys(&["Escape"]);
    tmux.wait(what, "the stack closed", |s| !s.contains("(esc closes)"));

    tmux.keys(&["w"]);
    let written = tmux.wait(what, "the flame graph written", |s| s.contains("wrote "));
    let path = flame_graph_path(&written);
    assert!(path.starts_with(dir.path()), "{what}: {}", path.display());
    let html = std::fs::read_to_string(&path).expect("the flame graph");
    assert!(
        html.contains(keys.method),
        "{what}: {} lacks it",
        path.display()
    );

    tmux.keys(&["e"]);
    tmux.wait(what, "the wall profile", |s| {
        s.contains("wall profile") && !methods(s).is_empty()
    });
    tmux.keys(&["q"]);
    let end = tmux.wait(what, "jtap's exit", |s| s.contains("EXIT="));
    assert!(end.contains("EXIT=0"), "{what}: {end}\n{}", tmux.stderr());
    assert!(
        !tmux.stderr().contains("panicked"),
        "{what}: {}",
        tmux.stderr()
    );
    let status = jtap(["status", &pid.to_string()]).ok();
    assert!(status.contains("recordings: none"), "{what}: {status}");
}

/// Moves the selection, a row at a time, to a thread named `name*` (rows sorted by name,
/// so that they stay in place; rows below the table's end scroll into view as it moves).
/// After each key, waits until the selection has moved, so that keys never run ahead of
/// the screen.
fn select(tmux: &Tmux, what: &str, name: &str) {
    let selected = |screen: &str| -> Option<String> {
        let row = threads(screen).into_iter().find(|r| r.starts_with("> "))?;
        Some(row.split_whitespace().nth(1)?.to_string())
    };
    for _ in 0..100 {
        let screen = tmux.wait(what, "a selected thread", |s| selected(s).is_some());
        let rows = threads(&screen);
        let at = rows.iter().position(|r| r.starts_with("> "));
        let wanted = rows.iter().position(|r| r.contains(name));
        let key = match (at, wanted) {
            (Some(at), Some(wanted)) if at == wanted => return,
            (Some(at), Some(wanted)) if wanted < at => "Up",
            _ => "Down",
        };
        let before = selected(&screen);
        tmux.keys(&[key]);
        tmux.wait(what, "the selection moved", |s| {
            selected(s).is_some() && selected(s) != before
        });
    }
    panic!(
        "{what}: could not select a {name} thread:\n{}",
        tmux.screen()
    );
}

/// The rows of the methods table (between its header and the threads' title).
fn methods(screen: &str) -> Vec<&str> {
    let lines: Vec<&str> = screen.lines().collect();
    let Some(header) = lines.iter().position(|l| l.starts_with("SELF%")) else {
        return Vec::new();
    };
    lines[header + 1..]
        .iter()
        .take_while(|l| !l.starts_with("threads by"))
        .copied()
        .filter(|l| l.contains('%'))
        .collect()
}

/// The rows of the threads table.
fn threads(screen: &str) -> Vec<&str> {
    let lines: Vec<&str> = screen.lines().collect();
    let Some(header) = lines.iter().position(|l| l.trim_start().starts_with("TID")) else {
        return Vec::new();
    };
    lines[header + 1..]
        .iter()
        .copied()
        .filter(|l| l.contains('%'))
        .collect()
}

/// The file of `wrote /path/jtap-top-....html (60 s, 1234 samples)`.
fn flame_graph_path(screen: &str) -> PathBuf {
    let line = screen
        .lines()
        .find(|l| l.starts_with("wrote "))
        .unwrap_or("");
    let path = line["wrote ".len()..].split(" (").next().unwrap_or("");
    PathBuf::from(path)
}

/// `jtap top` in a detached tmux session of its own server, killed when dropped.
struct Tmux {
    socket: String,
    stderr: PathBuf,
}

impl Tmux {
    fn start(pid: u32, dir: &Path) -> Tmux {
        static SESSIONS: AtomicUsize = AtomicUsize::new(0);
        let socket = format!(
            "jtap-top-test-{}-{}",
            std::process::id(),
            SESSIONS.fetch_add(1, Ordering::SeqCst)
        );
        let stderr = dir.join("stderr.txt");
        let command = format!(
            "'{}' top {pid} --dir '{}' 2>'{}'; echo EXIT=$?; sleep 600",
            jtap_bin().display(),
            dir.display(),
            stderr.display()
        );
        let tmux = Tmux { socket, stderr };
        tmux.run(&[
            "new-session",
            "-d",
            "-s",
            "top",
            "-x",
            "160",
            "-y",
            "50",
            &command,
        ]);
        tmux
    }

    fn run(&self, args: &[&str]) -> String {
        let output = Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .expect("running tmux (scripts/setup-system.sh installs it)");
        assert!(
            output.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "top"];
        args.extend_from_slice(keys);
        self.run(&args);
    }

    fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "top"])
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// The screen once `drawn` holds for it, read twice alike (not in the middle of a
    /// redraw); fails after 90 s (a loaded machine's first profile can take a while).
    fn wait(&self, what: &str, awaited: &str, drawn: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let screen = self.screen();
            if drawn(&screen) {
                std::thread::sleep(Duration::from_millis(100));
                if self.screen() == screen {
                    return screen;
                }
                continue;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: never drew {awaited}:\n{screen}\nstderr: {}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}

/// Waits until `done`, failing after `timeout`.
fn wait_for(what: &str, timeout: Duration, done: impl Fn() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "{what}: no progress in {timeout:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
