//! The live view's keys: what each one asks for, and the view's own state that the keys
//! change (sort orders, pause, the selected thread, the open stack).

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

/// What a key asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Leave: detach the agent and restore the terminal.
    Quit,
    /// Stop or resume refreshing.
    Pause,
    /// Sort the methods by the next column.
    SortMethods,
    /// Sort the threads by the next column.
    SortThreads,
    /// Profile the next event.
    NextEvent,
    /// Select the thread above or below.
    Select(isize),
    /// Show the selected thread's stack.
    OpenStack,
    /// Close the stack.
    Close,
    /// Write the last minute as a flame graph.
    WriteFlameGraph,
}

/// The one line of key help the status bar shows.
pub const HELP: &str =
    "q quit  p pause  s sort methods  t sort threads  e event  \u{2191}\u{2193} thread  enter stack  w flame graph";

/// What the methods are sorted by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MethodSort {
    /// Time (or bytes) spent in the method itself.
    SelfWeight,
    /// ... in it and what it calls.
    Total,
}

/// What the threads are sorted by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadSort {
    /// CPU over the last interval.
    Cpu,
    /// CPU since the thread started.
    CpuTime,
    /// Name.
    Name,
}

/// The view's state that keys change.
pub struct ViewState {
    /// No refresh while paused.
    pub paused: bool,
    /// The methods' order.
    pub method_sort: MethodSort,
    /// The threads' order.
    pub thread_sort: ThreadSort,
    /// The selected row of the threads.
    pub selected: usize,
    /// The stack shown over the view: its title and frames.
    pub stack: Option<(String, Vec<String>)>,
}

impl ViewState {
    /// Methods by self weight, threads by CPU, nothing paused or open.
    pub fn new() -> ViewState {
        ViewState {
            paused: false,
            method_sort: MethodSort::SelfWeight,
            thread_sort: ThreadSort::Cpu,
            selected: 0,
            stack: None,
        }
    }

    /// What `key` asks for: keys other than Esc, q and Ctrl-C close an open stack first.
    pub fn action(&self, key: KeyEvent) -> Option<Action> {
        if key.kind == KeyEventKind::Release {
            return None;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        Some(match key.code {
            KeyCode::Char('c') if ctrl => Action::Quit,
            KeyCode::Char('q') => Action::Quit,
            KeyCode::Esc | KeyCode::Enter if self.stack.is_some() => Action::Close,
            KeyCode::Esc => Action::Quit,
            KeyCode::Char('p') | KeyCode::Char(' ') => Action::Pause,
            KeyCode::Char('s') => Action::SortMethods,
            KeyCode::Char('t') => Action::SortThreads,
            KeyCode::Char('e') => Action::NextEvent,
            KeyCode::Up | KeyCode::Char('k') => Action::Select(-1),
            KeyCode::Down | KeyCode::Char('j') => Action::Select(1),
            KeyCode::Enter => Action::OpenStack,
            KeyCode::Char('w') => Action::WriteFlameGraph,
            _ => return None,
        })
    }

    /// Applies what only changes the view; the rest is the caller's.
    pub fn apply(&mut self, action: Action, threads: usize) {
        match action {
            Action::Pause => self.paused = !self.paused,
            Action::SortMethods => {
                self.method_sort = match self.method_sort {
                    MethodSort::SelfWeight => MethodSort::Total,
                    MethodSort::Total => MethodSort::SelfWeight,
                }
            }
            Action::SortThreads => {
                self.thread_sort = match self.thread_sort {
                    ThreadSort::Cpu => ThreadSort::CpuTime,
                    ThreadSort::CpuTime => ThreadSort::Name,
                    ThreadSort::Name => ThreadSort::Cpu,
                }
            }
            Action::Select(by) => {
                let last = threads.saturating_sub(1);
                self.selected = self.selected.saturating_add_signed(by).min(last);
            }
            Action::Close => self.stack = None,
            Action::Quit | Action::NextEvent | Action::OpenStack | Action::WriteFlameGraph => {}
        }
    }
}

impl MethodSort {
    /// The column's name, for the table's title.
    pub fn name(self) -> &'static str {
        match self {
            MethodSort::SelfWeight => "self",
            MethodSort::Total => "total",
        }
    }
}

impl ThreadSort {
    /// The column's name, for the table's title.
    pub fn name(self) -> &'static str {
        match self {
            ThreadSort::Cpu => "CPU",
            ThreadSort::CpuTime => "CPU time",
            ThreadSort::Name => "name",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    #[test]
    fn enter_opens_and_esc_closes_a_stack_then_quits() {
        let mut state = ViewState::new();
        assert_eq!(state.action(key(KeyCode::Enter)), Some(Action::OpenStack));
        state.stack = Some(("t".into(), vec![]));
        assert_eq!(state.action(key(KeyCode::Esc)), Some(Action::Close));
        state.apply(Action::Close, 3);
        assert_eq!(state.action(key(KeyCode::Esc)), Some(Action::Quit));
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(state.action(ctrl_c), Some(Action::Quit));
    }

    #[test]
    fn the_selection_stays_within_the_threads() {
        let mut state = ViewState::new();
        state.apply(Action::Select(-1), 3);
        assert_eq!(state.selected, 0);
        for _ in 0..5 {
            state.apply(Action::Select(1), 3);
        }
        assert_eq!(state.selected, 2);
        state.apply(Action::SortThreads, 3);
        assert_eq!(state.thread_sort, ThreadSort::CpuTime);
    }
}
