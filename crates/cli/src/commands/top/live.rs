//! The live view's loop: the terminal taken (raw mode, alternate screen) and given back on
//! every way out (q, Ctrl-C, an error, a panic), a refresh every `--interval`, keys acted on
//! between refreshes, and the rolling profile's recording ended before jtap exits.
//!
//! While the view is up, jtap's stderr (the agent's notes) goes to a temporary file and is
//! printed once the terminal is back, so nothing writes over the view.

use std::fs::File;
use std::io::{self, Read, Seek, Stdout};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use jtap_client::interrupt;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{self, Event as Input};
use ratatui::crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
};
use ratatui::crossterm::{cursor, execute};
use ratatui::Terminal;

use super::collect::{Sampler, Snapshot, ThreadRow};
use super::keys::{Action, ThreadSort, ViewState};
use super::rolling::Rolling;
use super::{clock_time, view, TopArgs, EVENTS};

/// The view's state between refreshes.
struct Live<'a> {
    args: &'a TopArgs,
    timeout: Duration,
    state: ViewState,
    snapshot: Option<Snapshot>,
    threads: Vec<ThreadRow>,
    rolling: Option<Rolling>,
    message: String,
    exited: bool,
}

/// Runs the view until q, Ctrl-C, `--iterations` or the JVM's exit.
pub fn run(args: &TopArgs, sampler: &mut Sampler, timeout: Duration) -> anyhow::Result<i32> {
    let ctrl_c = interrupt::session_takes();
    let captured = Captured::start()?;
    let mut live = Live {
        args,
        timeout,
        state: ViewState::new(),
        snapshot: None,
        threads: Vec::new(),
        rolling: Some(Rolling::start(args.pid, args.event, timeout, None)),
        message: String::new(),
        exited: false,
    };
    let result = Screen::enter().and_then(|mut screen| live.run(&mut screen.0, sampler));
    // The terminal is back (the screen dropped); now the agent's recording ends.
    if let Some(rolling) = live.rolling.take() {
        rolling.finish();
    }
    drop(captured);
    drop(ctrl_c);
    if live.exited {
        eprintln!("jtap: JVM {} exited", args.pid);
    }
    result.map(|()| 0)
}

impl Live<'_> {
    fn run(
        &mut self,
        terminal: &mut Terminal<CrosstermBackend<Stdout>>,
        sampler: &mut Sampler,
    ) -> anyhow::Result<()> {
        if let Err(e) = sampler.dump_if_due() {
            self.message = format!("thread dump: {e:#}");
        }
        let mut due = Instant::now() + self.args.interval;
        let mut refreshes = 0;
        loop {
            if interrupt::requested() {
                return Ok(());
            }
            if Instant::now() >= due {
                due = Instant::now() + self.args.interval;
                if !self.state.paused {
                    if !self.refresh(sampler)? {
                        return Ok(());
                    }
                    refreshes += 1;
                }
                if self.args.iterations.is_some_and(|n| refreshes >= n) {
                    return Ok(());
                }
            }
            terminal.draw(|frame| self.draw(frame))?;
            let wait = due
                .saturating_duration_since(Instant::now())
                .min(Duration::from_millis(250));
            if !event::poll(wait)? {
                continue;
            }
            let Input::Key(key) = event::read()? else {
                continue;
            };
            if let Some(action) = self.state.action(key) {
                if !self.act(action, sampler) {
                    return Ok(());
                }
            }
        }
    }

    /// Reads a refresh; false when the JVM is gone.
    fn refresh(&mut self, sampler: &mut Sampler) -> anyhow::Result<bool> {
        if !sampler.alive() {
            self.exited = true;
            return Ok(false);
        }
        if let Err(e) = sampler.dump_if_due() {
            self.message = format!("thread dump: {e:#}");
        }
        match sampler.sample() {
            Ok(snapshot) => {
                let selected = self.threads.get(self.state.selected).map(|t| t.tid);
                self.threads = snapshot.threads.clone();
                self.snapshot = Some(snapshot);
                self.sort_threads(selected);
                Ok(true)
            }
            Err(_) if !sampler.alive() => {
                self.exited = true;
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// Sorts the threads as asked, keeping thread `selected` (a tid) selected.
    fn sort_threads(&mut self, selected: Option<u32>) {
        match self.state.thread_sort {
            ThreadSort::Cpu => self.threads.sort_by(|a, b| {
                b.cpu
                    .total_cmp(&a.cpu)
                    .then(b.cpu_seconds.total_cmp(&a.cpu_seconds))
            }),
            ThreadSort::CpuTime => self
                .threads
                .sort_by(|a, b| b.cpu_seconds.total_cmp(&a.cpu_seconds)),
            ThreadSort::Name => self.threads.sort_by(|a, b| a.name.cmp(&b.name)),
        }
        if let Some(at) = self.threads.iter().position(|t| Some(t.tid) == selected) {
            self.state.selected = at;
        }
        self.state.selected = self
            .state
            .selected
            .min(self.threads.len().saturating_sub(1));
    }

    /// Acts on a key; false to leave.
    fn act(&mut self, action: Action, sampler: &mut Sampler) -> bool {
        match action {
            Action::Quit => return false,
            Action::NextEvent => {
                let current = self.rolling.as_ref().map_or(self.args.event, |r| r.event);
                let at = EVENTS.iter().position(|&e| e == current).unwrap_or(0);
                let next = EVENTS[(at + 1) % EVENTS.len()];
                let previous = self.rolling.take();
                self.rolling = Some(Rolling::start(self.args.pid, next, self.timeout, previous));
                self.message = format!("profiling {next} now");
            }
            Action::OpenStack => self.open_stack(sampler),
            Action::WriteFlameGraph => self.write_flame_graph(),
            _ => {
                self.state.apply(action, self.threads.len());
                if action == Action::SortThreads {
                    let selected = self.threads.get(self.state.selected).map(|t| t.tid);
                    self.sort_threads(selected);
                }
            }
        }
        true
    }

    /// Shows the selected thread's stack, from a fresh thread dump.
    fn open_stack(&mut self, sampler: &mut Sampler) {
        let Some(thread) = self.threads.get(self.state.selected) else {
            return;
        };
        let title = format!("{} (tid {})", thread.name, thread.tid);
        match sampler.stack_of(thread.ns_tid) {
            Ok(Some(dumped)) => {
                let state = if dumped.state.is_empty() {
                    "not a Java thread"
                } else {
                    &dumped.state
                };
                self.state.stack = Some((format!("{title} {state}"), dumped.frames));
            }
            Ok(None) => self.message = format!("{title}: not in the thread dump (ended?)"),
            Err(e) => self.message = format!("thread dump: {e:#}"),
        }
    }

    /// Writes the last minute of the rolling profile as an HTML flame graph in `--dir`.
    fn write_flame_graph(&mut self) {
        let Some(rolling) = &self.rolling else {
            return;
        };
        let name = format!(
            "jtap-top-{}-{}-{}.html",
            self.args.pid,
            rolling.event,
            clock_time().replace(':', "")
        );
        let path = self.args.dir.join(name);
        let path = std::path::absolute(&path).unwrap_or(path);
        let window = rolling.window();
        self.message = match window.write_flame_graph(&path) {
            Ok(samples) => format!(
                "wrote {} ({} s, {samples} samples)",
                path.display(),
                window.seconds()
            ),
            Err(e) => format!("flame graph not written: {e:#}"),
        };
    }

    fn draw(&self, frame: &mut ratatui::Frame) {
        let (hot, profile, seconds) = match &self.rolling {
            Some(rolling) => {
                let window = rolling.window();
                let seconds = window.seconds().min(self.args.window as usize);
                (window.hot(seconds), window.status.clone(), seconds)
            }
            None => (None, String::new(), 0),
        };
        let model = view::Model {
            pid: self.args.pid,
            snapshot: self.snapshot.as_ref(),
            threads: &self.threads,
            state: &self.state,
            hot,
            profile,
            seconds,
            message: &self.message,
        };
        view::draw(frame, &model);
    }
}

/// The terminal in raw mode on the alternate screen, given back when dropped.
struct Screen(Terminal<CrosstermBackend<Stdout>>, Restore);

impl Screen {
    fn enter() -> anyhow::Result<Screen> {
        enable_raw_mode()?;
        // From here on, dropping restores the terminal, also when what follows fails.
        let restore = Restore;
        execute!(io::stdout(), EnterAlternateScreen, cursor::Hide)?;
        let terminal = Terminal::new(CrosstermBackend::new(io::stdout()))?;
        Ok(Screen(terminal, restore))
    }
}

/// Leaves raw mode and the alternate screen when dropped.
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        let _ = execute!(io::stdout(), LeaveAlternateScreen, cursor::Show);
        let _ = disable_raw_mode();
    }
}

/// jtap's stderr sent to a temporary file, and printed when dropped.
struct Captured {
    saved: i32,
    file: File,
}

impl Captured {
    fn start() -> anyhow::Result<Captured> {
        let file = tempfile::tempfile()?;
        let saved = nix::unistd::dup(2)?;
        nix::unistd::dup2(file.as_raw_fd(), 2)?;
        Ok(Captured { saved, file })
    }
}

impl Drop for Captured {
    fn drop(&mut self) {
        let _ = nix::unistd::dup2(self.saved, 2);
        let _ = nix::unistd::close(self.saved);
        let mut text = String::new();
        if self.file.rewind().is_ok() && self.file.read_to_string(&mut text).is_ok() {
            eprint!("{text}");
        }
    }
}
