//! Draws the live view: a header with the JVM's counters, the hottest methods of the rolling
//! profile, the threads by CPU, a status line with the keys, and a thread's stack over it
//! all when one is open.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Row, Table, TableState};
use ratatui::Frame;

use super::clock_time;
use super::collect::{mib, Snapshot, ThreadRow, VmStats};
use super::keys::{MethodSort, ViewState, HELP};
use super::rolling::Hot;

/// Everything one drawing shows.
pub struct Model<'a> {
    /// The JVM.
    pub pid: u32,
    /// The last refresh, None before the first.
    pub snapshot: Option<&'a Snapshot>,
    /// Its threads in the view's order.
    pub threads: &'a [ThreadRow],
    /// Sort orders, pause, selection, open stack.
    pub state: &'a ViewState,
    /// The rolling profile's methods over the window, None before its first second.
    pub hot: Option<Hot>,
    /// The profile's title: event, engine, or how it is going.
    pub profile: String,
    /// Seconds of the window the methods cover.
    pub seconds: usize,
    /// What the last key did (a file written, a failure).
    pub message: &'a str,
}

/// Draws the view on the whole frame.
pub fn draw(frame: &mut Frame, model: &Model) {
    let [header, methods, threads, status, help] = Layout::vertical([
        Constraint::Length(4),
        Constraint::Percentage(45),
        Constraint::Fill(1),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    frame.render_widget(Paragraph::new(header_lines(model)), header);
    draw_methods(frame, methods, model);
    draw_threads(frame, threads, model);
    frame.render_widget(Paragraph::new(model.message), status);
    frame.render_widget(
        Paragraph::new(HELP).style(Style::new().add_modifier(Modifier::REVERSED)),
        help,
    );
    if let Some((title, frames)) = &model.state.stack {
        draw_stack(frame, title, frames);
    }
}

fn header_lines(model: &Model) -> Vec<Line<'static>> {
    let paused = if model.state.paused { "  PAUSED" } else { "" };
    let Some(snapshot) = model.snapshot else {
        return vec![Line::from(format!(
            "{} JVM {}: reading ...{paused}",
            clock_time(),
            model.pid
        ))];
    };
    let mut lines = vec![Line::from(format!(
        "{} JVM {}: CPU {:.0}% of a core, {} threads{paused}",
        clock_time(),
        model.pid,
        snapshot.total_cpu,
        snapshot.threads.len()
    ))];
    match &snapshot.vm {
        Some(vm) => lines.extend(vm_lines(vm)),
        None => lines.push(Line::from(
            "no hsperfdata: heap and GC unknown (-XX:-UsePerfData?)",
        )),
    }
    lines
}

fn vm_lines(vm: &VmStats) -> [Line<'static>; 3] {
    let [used, committed, max] = vm.heap;
    let gc: Vec<String> = vm
        .collectors
        .iter()
        .map(|(name, count, new, ms)| format!("{name} {count} (+{new}) {ms:.0} ms"))
        .collect();
    let pools: Vec<String> = vm
        .pools
        .iter()
        .map(|(name, used, capacity, _)| format!("{name} {}/{}", size(*used), size(*capacity)))
        .collect();
    let (safepoints, new_safepoints, safepoint_ms) = vm.safepoints;
    let compilations = vm
        .compilations
        .map_or("?".into(), |(c, new)| format!("{c} (+{new})"));
    [
        Line::from(format!(
            "heap {} used / {} committed / {} max   pools (used/committed) {}",
            mib(used),
            mib(committed),
            mib(max),
            pools.join(", ")
        )),
        Line::from(format!(
            "gc {}",
            if gc.is_empty() { "?".into() } else { gc.join(", ") }
        )),
        Line::from(format!(
            "safepoints {safepoints} (+{new_safepoints}) {safepoint_ms:.0} ms   compilations {compilations}"
        )),
    ]
}

fn draw_methods(frame: &mut Frame, area: Rect, model: &Model) {
    let sort = model.state.method_sort;
    let Some(hot) = &model.hot else {
        let block = Block::new()
            .borders(Borders::TOP)
            .title(model.profile.clone());
        frame.render_widget(
            Paragraph::new("waiting for the profile ...").block(block),
            area,
        );
        return;
    };
    let title = format!(
        "{}: hottest methods of the last {} s ({}), by {}",
        model.profile,
        model.seconds,
        match hot.unit.as_str() {
            "samples" => format!("{} samples", hot.total),
            unit => amount(hot.total, unit),
        },
        sort.name()
    );
    let mut methods: Vec<_> = hot.methods.iter().collect();
    methods.sort_by(|a, b| {
        let key = |m: &super::rolling::MethodRow| match sort {
            MethodSort::SelfWeight => (m.self_weight, m.total_weight),
            MethodSort::Total => (m.total_weight, m.self_weight),
        };
        key(b).cmp(&key(a)).then_with(|| a.name.cmp(&b.name))
    });
    let percent = |v: u64| format!("{:.1}%", 100.0 * v as f64 / hot.total.max(1) as f64);
    let rows = methods.into_iter().map(|m| {
        Row::new([
            percent(m.self_weight),
            amount(m.self_weight, &hot.unit),
            percent(m.total_weight),
            amount(m.total_weight, &hot.unit),
            m.name.clone(),
        ])
    });
    let table = Table::new(
        rows,
        [
            Constraint::Length(7),
            Constraint::Length(10),
            Constraint::Length(7),
            Constraint::Length(10),
            Constraint::Fill(1),
        ],
    )
    .header(Row::new(["SELF%", "SELF", "TOTAL%", "TOTAL", "METHOD"]).style(bold()))
    .block(Block::new().borders(Borders::TOP).title(title));
    frame.render_widget(table, area);
}

fn draw_threads(frame: &mut Frame, area: Rect, model: &Model) {
    let rows = model.threads.iter().map(|t| {
        Row::new([
            t.tid.to_string(),
            format!("{:.1}%", t.cpu),
            format!("{:.2}s", t.cpu_seconds),
            t.state.clone(),
            t.name.clone(),
            t.top_frame.clone().unwrap_or_default(),
        ])
    });
    let table = Table::new(
        rows,
        [
            Constraint::Length(8),
            Constraint::Length(7),
            Constraint::Length(10),
            Constraint::Length(14),
            Constraint::Length(30),
            Constraint::Fill(1),
        ],
    )
    .header(Row::new(["TID", "CPU%", "CPU TIME", "STATE", "NAME", "TOP FRAME"]).style(bold()))
    .block(
        Block::new()
            .borders(Borders::TOP)
            .title(format!("threads by {}", model.state.thread_sort.name())),
    )
    .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED))
    .highlight_symbol("> ");
    let mut selection = TableState::new().with_selected(Some(model.state.selected));
    frame.render_stateful_widget(table, area, &mut selection);
}

fn draw_stack(frame: &mut Frame, title: &str, frames: &[String]) {
    let area = frame.area();
    let popup = Rect {
        x: area.width / 10,
        y: area.height / 8,
        width: area.width * 8 / 10,
        height: area.height * 3 / 4,
    };
    let room = usize::from(popup.height.saturating_sub(3));
    let mut lines: Vec<Line> = frames
        .iter()
        .take(if frames.len() > room + 1 {
            room
        } else {
            room + 1
        })
        .map(|f| Line::from(format!("at {f}")))
        .collect();
    if frames.len() > lines.len() {
        lines.push(Line::from(format!(
            "... {} more",
            frames.len() - lines.len()
        )));
    }
    if lines.is_empty() {
        lines.push(Line::from("(no Java frames)"));
    }
    let block = Block::bordered().title(format!("{title} (esc closes)"));
    frame.render_widget(Clear, popup);
    frame.render_widget(Paragraph::new(lines).block(block), popup);
}

/// Bytes in K, M or G, rounded.
fn size(bytes: i64) -> String {
    match bytes {
        b if b >= 10 << 30 => format!("{}G", b >> 30),
        b if b >= 10 << 20 => format!("{}M", b >> 20),
        b => format!("{}K", b >> 10),
    }
}

fn bold() -> Style {
    Style::new().add_modifier(Modifier::BOLD)
}

/// A weight in its unit: bytes and nanoseconds scaled, samples as counted.
fn amount(value: u64, unit: &str) -> String {
    let v = value as f64;
    match unit {
        "bytes" if v >= 1e9 => format!("{:.1} GB", v / 1e9),
        "bytes" if v >= 1e6 => format!("{:.1} MB", v / 1e6),
        "bytes" => format!("{:.0} kB", v / 1e3),
        "nanoseconds" if v >= 1e9 => format!("{:.1} s", v / 1e9),
        "nanoseconds" => format!("{:.1} ms", v / 1e6),
        _ => value.to_string(),
    }
}
