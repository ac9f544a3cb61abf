//! What method tracing reports: one [`Call`] per traced call (`jtap trace`), one [`CallTree`]
//! per entry call (`jtap calltree`), one [`MonitorInterval`] per interval (`jtap monitor`).
//! Times are nanoseconds; wall-clock times are since the Unix epoch. The text forms are
//! Arthas's: `HH:MM:SS.mmm [thread] Class.method 1.25ms args -> value`, trees drawn with
//! `+---`, a table per interval.

use std::fmt::Write;

use serde::{Deserialize, Serialize};
use serde_json::json;

/// One traced call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Call {
    /// When it started (wall clock).
    pub time_ns: u64,
    /// The thread's name.
    pub thread: String,
    /// The thread's kernel id (to find its samples in a profile).
    #[serde(default)]
    pub tid: u32,
    /// `pkg.Class`.
    pub class: String,
    /// The method's name.
    pub method: String,
    /// The method's descriptor.
    pub descriptor: String,
    /// How long it took.
    pub duration_ns: u64,
    /// The duration is good to a millisecond or worse (the coarse clock, or a field clock
    /// advancing every millisecond or more): shown in whole milliseconds.
    pub coarse: bool,
    /// `this` and the arguments, described (with `--args`).
    pub args: Option<String>,
    /// `this` (`null` when static) and each argument, described one by one (plans with
    /// `values`: scripts).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
    /// The shallow size in bytes of each of `values` (0 for `null`; plans with `sizes`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sizes: Vec<u64>,
    /// The shallow size in bytes of the value returned (plans with `sizes` and `return`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub return_size: Option<u64>,
    /// How it ended.
    pub outcome: Outcome,
    /// Its Java stack, `Class.method(File.java:line)` from the caller down (with `--stack`).
    pub stack: Vec<String>,
    /// For a call traced where it is made (a plan's call sites): the method called, while
    /// `class`, `method` and `descriptor` name the caller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callee: Option<Callee>,
    /// The request label its thread worked for (`by=`), when it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

/// A method as a call site names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Callee {
    /// `pkg.Class` (empty for `invokedynamic`, which names no class).
    pub class: String,
    /// The method's name.
    pub method: String,
    /// The method's descriptor.
    pub descriptor: String,
    /// How it is called: `virtual`, `interface`, `special`, `static` or `dynamic`.
    pub invoke: String,
}

/// A point a traced method reached (a plan's `line:`, `new:` and `sync:` points).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reached {
    /// When (wall clock).
    pub time_ns: u64,
    /// The thread's name.
    pub thread: String,
    /// The thread's kernel id.
    pub tid: u32,
    /// `pkg.Class` of the method.
    pub class: String,
    /// The method's name.
    pub method: String,
    /// The method's descriptor.
    pub descriptor: String,
    /// What it reached.
    pub point: Point,
    /// The method's `this` (`null` when static), then at its entry each argument, described
    /// one by one (plans with `values`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
    /// The shallow size in bytes of each of `values` (plans with `sizes`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sizes: Vec<u64>,
    /// At a [`Point::New`] or [`Point::NewArray`] of a plan with `values`: the object or
    /// array allocated, described.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocated: Option<String>,
    /// Its Java stack, `Class.method(File.java:line)` from the method down (with `stack`).
    pub stack: Vec<String>,
}

/// What a [`Reached`] reached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Point {
    /// The method's entry.
    Entry,
    /// A source line.
    Line(u32),
    /// An object of this class (`pkg.Class`) allocated and constructed.
    New(String),
    /// An array allocated: its element type (`int`, `pkg.Class`) and dimensions.
    NewArray {
        /// The innermost element type.
        element: String,
        /// How many dimensions (`int[][]`: 2).
        dimensions: u32,
    },
    /// A monitor entered, described.
    SyncEnter(String),
    /// A monitor left, described.
    SyncExit(String),
    /// A field read, with the value read.
    FieldGet(FieldAccess),
    /// A field about to be written, with the value written.
    FieldSet(FieldAccess),
    /// An array access, throw, catch or type check (see [`InsnReached`]).
    Insn(InsnReached),
}

/// An instruction reached at a [`Point::Insn`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InsnReached {
    /// The kind, as the plan's text names it (`aget`, `aset`, `throw`, `catch`, `checkcast`,
    /// `instanceof`).
    pub kind: String,
    /// The type involved: the element type of an array access (`int`, `java.lang.Object` for
    /// any reference), the type caught, cast to or tested; empty for a throw.
    pub detail: String,
    /// The array, the exception or the object checked, described.
    pub target: String,
    /// An array access's index and the element read or written, described.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

/// A field access at a [`Point`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldAccess {
    /// `pkg.Class.field`, the class as the code names it.
    pub field: String,
    /// The object whose field it is, described (`null` for a static field).
    pub target: String,
    /// The value read or written, described.
    pub value: String,
}

impl Reached {
    /// `13:05:07.042 [main] app.Cache.get line 42` (or `entered`, `new app.Entry`, `new int[]`,
    /// `enters app.Lock@1f`, `exits app.Lock@1f`), then `    at frame` lines.
    pub fn to_text(&self) -> String {
        let point = match &self.point {
            Point::Entry => "entered".to_string(),
            Point::Line(line) => format!("line {line}"),
            Point::New(class) => format!("new {class}"),
            Point::NewArray {
                element,
                dimensions,
            } => format!("new {element}{}", "[]".repeat(*dimensions as usize)),
            Point::SyncEnter(lock) => format!("enters {lock}"),
            Point::SyncExit(lock) => format!("exits {lock}"),
            Point::FieldGet(access) => format!("reads {} = {}", access.field, access.value),
            Point::FieldSet(access) => format!("writes {} = {}", access.field, access.value),
            Point::Insn(insn) => [&insn.kind, &insn.detail, &insn.target]
                .into_iter()
                .chain(&insn.values)
                .filter(|part| !part.is_empty())
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join(" "),
        };
        let mut line = format!(
            "{} [{}] {}.{} {point}",
            time_of_day(self.time_ns),
            escape_controls(&self.thread),
            self.class,
            self.method
        );
        for frame in &self.stack {
            let _ = write!(line, "\n    at {frame}");
        }
        line
    }
}

/// How a call ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// It returned; the value, described, when asked for (`--return`).
    Returned(Option<String>),
    /// It threw; the exception, described, when asked for (`--exceptions`).
    Threw(Option<String>),
}

/// One entry call's tree, repeated calls of a method under one parent merged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallTree {
    /// When the entry call started (wall clock).
    pub time_ns: u64,
    /// The thread's name.
    pub thread: String,
    /// Calls the tree had no room for.
    pub truncated: u64,
    /// The session ended (`-d`, Ctrl-C) inside the entry call: the tree holds what was
    /// recorded until then.
    #[serde(default)]
    pub unfinished: bool,
    /// The request label of the entry call's thread (`by=`), when it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The entry call.
    pub root: TreeNode,
}

/// A node of a [`CallTree`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TreeNode {
    /// `Class.method`, with parameter types where overloads meet.
    pub name: String,
    /// Calls merged into this node.
    pub count: u64,
    /// Start of its first call after the entry call's start.
    pub offset_ns: u64,
    /// Time of all its calls.
    pub total_ns: u64,
    /// The calls it made.
    pub children: Vec<TreeNode>,
    /// In a slow path (`calltree --auto`), its time per entry call that reached it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_entry_call: Option<Quantiles>,
}

/// The median and 99th percentile of a set of times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Quantiles {
    /// Median.
    pub p50_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
}

/// Per-method statistics of one interval of `jtap monitor`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MonitorInterval {
    /// When the interval ended (wall clock).
    pub time_ns: u64,
    /// How long it was.
    pub interval_ns: u64,
    /// One row per method, by name.
    pub rows: Vec<MethodStats>,
}

/// One method's calls in an interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MethodStats {
    /// `Class.method`, with parameter types where overloads meet.
    pub method: String,
    /// The request label the calls' threads worked for (`by=`): a method's calls under each
    /// label make a row of their own, those outside every labelled call one without.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Its numbers.
    #[serde(flatten)]
    pub stats: CallStats,
}

/// Calls of one method over an interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallStats {
    /// Calls that ended in the interval.
    pub calls: u64,
    /// Of those, calls that threw.
    pub errors: u64,
    /// Mean duration.
    pub mean_ns: u64,
    /// Median duration.
    pub p50_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// Longest.
    pub max_ns: u64,
    /// Calls by duration: `buckets[i]` took more than `LATENCY_BOUNDS_NS[i - 1]` and at most
    /// [`LATENCY_BOUNDS_NS`]`[i]`; those beyond the last bound are `calls` minus their sum.
    /// All zero from agents before it.
    #[serde(default)]
    pub buckets: [u64; LATENCY_BOUNDS_NS.len()],
}

/// The upper bounds of [`CallStats::buckets`], in nanoseconds: 1, 2.5 and 5 per decade from
/// 1 µs to 10 s (the `le` of `jtap monitor --serve`'s histograms).
pub const LATENCY_BOUNDS_NS: [u64; 22] = [
    1_000,
    2_500,
    5_000,
    10_000,
    25_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    5_000_000_000,
    10_000_000_000,
];

impl Call {
    /// `13:05:07.042 [main] app.Cache.get 1.25ms args -> value`, then `    at frame` lines.
    pub fn to_text(&self) -> String {
        let duration = match self.coarse {
            true => format_coarse(self.duration_ns),
            false => format_duration(self.duration_ns),
        };
        let callee = self
            .callee
            .as_ref()
            .map(|c| format!(" calls {}.{}", c.class, c.method))
            .unwrap_or_default();
        let mut line = format!(
            "{} [{}]{} {}.{}{callee} {duration}",
            time_of_day(self.time_ns),
            escape_controls(&self.thread),
            label_tag(self.label.as_deref()),
            self.class,
            self.method
        );
        if let Some(args) = &self.args {
            let _ = write!(line, " {args}");
        }
        match &self.outcome {
            Outcome::Returned(Some(value)) => {
                let _ = write!(line, " -> {value}");
            }
            Outcome::Returned(None) => {}
            Outcome::Threw(Some(thrown)) => {
                let _ = write!(line, " threw {thrown}");
            }
            Outcome::Threw(None) => line.push_str(" threw"),
        }
        for frame in &self.stack {
            let _ = write!(line, "\n    at {frame}");
        }
        line
    }

    /// One JSON object.
    pub fn to_json(&self) -> serde_json::Value {
        let (value, thrown, threw) = match &self.outcome {
            Outcome::Returned(value) => (value.clone(), None, false),
            Outcome::Threw(thrown) => (None, thrown.clone(), true),
        };
        json!({
            "time": time_of_day(self.time_ns), "time_ns": self.time_ns, "thread": self.thread,
            "tid": self.tid, "class": self.class, "method": self.method, "descriptor": self.descriptor,
            "duration_ns": self.duration_ns, "args": self.args, "return": value,
            "threw": threw, "thrown": thrown, "stack": self.stack, "callee": self.callee,
            "label": self.label,
        })
    }
}

impl CallTree {
    /// `13:05:07.042 [main] app.Api.handle`, then the tree:
    /// `+---0 [1.999ms, 20%, 20%] - app.Db.query`.
    pub fn to_text(&self) -> String {
        let mut text = format!(
            "{} [{}]{} {}",
            time_of_day(self.time_ns),
            escape_controls(&self.thread),
            label_tag(self.label.as_deref()),
            self.root.name
        );
        if self.truncated > 0 {
            let _ = write!(text, " ({} calls not recorded: tree full)", self.truncated);
        }
        if self.unfinished {
            text.push_str(" (unfinished: the session ended inside this call)");
        }
        text.push('\n');
        self.root
            .draw(self.root.total_ns, None, "", None, &mut text);
        text.trim_end().to_string()
    }

    /// One JSON object.
    pub fn to_json(&self) -> serde_json::Value {
        json!({
            "time": time_of_day(self.time_ns), "time_ns": self.time_ns, "thread": self.thread,
            "truncated": self.truncated, "unfinished": self.unfinished, "label": self.label,
            "tree": self.root.to_json(),
        })
    }
}

impl TreeNode {
    /// Its time outside the calls it made.
    pub fn self_ns(&self) -> u64 {
        self.total_ns
            .saturating_sub(self.children.iter().map(|c| c.total_ns).sum())
    }

    /// Draws this node and its children, e.g. `+---0 [1.999ms, 20%, 20%] - b`.
    fn draw(
        &self,
        root_total: u64,
        parent_total: Option<u64>,
        prefix: &str,
        last: Option<bool>,
        out: &mut String,
    ) {
        let connector = match last {
            None => "",
            Some(false) => "+---",
            Some(true) => "`---",
        };
        let offset = match self.offset_ns {
            0 => "0".to_string(),
            ns => format_duration(ns),
        };
        let percent = |part: u64, whole: u64| match whole {
            0 => 100,
            _ => (part as f64 * 100.0 / whole as f64).round() as u64,
        };
        let mut times = format_duration(self.total_ns);
        if !self.children.is_empty() {
            let _ = write!(times, " ({})", format_duration(self.self_ns()));
        }
        let _ = write!(out, "{prefix}{connector}{offset} [{times}, ");
        match parent_total {
            None => out.push_str("100%]"),
            Some(parent) => {
                let _ = write!(
                    out,
                    "{}%, {}%]",
                    percent(self.total_ns, parent),
                    percent(self.total_ns, root_total)
                );
            }
        }
        let _ = write!(out, " - {}", self.name);
        if let Some(q) = self.per_entry_call {
            let (p50, p99) = (format_duration(q.p50_ns), format_duration(q.p99_ns));
            let _ = write!(out, " [p50 {p50}, p99 {p99}]");
        }
        if self.count > 1 {
            let _ = write!(out, " ({} calls)", self.count);
        }
        out.push('\n');
        let child_prefix = match last {
            None => prefix.to_string(),
            Some(false) => format!("{prefix}|   "),
            Some(true) => format!("{prefix}    "),
        };
        for (i, child) in self.children.iter().enumerate() {
            child.draw(
                root_total,
                Some(self.total_ns),
                &child_prefix,
                Some(i + 1 == self.children.len()),
                out,
            );
        }
    }

    fn to_json(&self) -> serde_json::Value {
        let mut node = json!({
            "method": self.name, "count": self.count, "offset_ns": self.offset_ns,
            "total_ns": self.total_ns, "self_ns": self.self_ns(),
            "children": self.children.iter().map(TreeNode::to_json).collect::<Vec<_>>(),
        });
        if let Some(q) = self.per_entry_call {
            node["p50_ns"] = q.p50_ns.into();
            node["p99_ns"] = q.p99_ns.into();
        }
        node
    }
}

impl MonitorInterval {
    /// `13:05:07.042 monitor, last 5.0 s`, then a table: method (and with request labels,
    /// label), calls, errors, mean, p50, p99, max.
    pub fn to_text(&self) -> String {
        let width = |of: fn(&MethodStats) -> usize, title: &str| {
            self.rows.iter().map(of).max().unwrap_or(0).max(title.len())
        };
        let method_width = width(|r| r.method.len(), "METHOD");
        let labelled = self.rows.iter().any(|r| r.label.is_some());
        let label_width = width(|r| r.label.as_deref().map_or(1, str::len), "LABEL");
        let label_cell = |label: &str| match labelled {
            true => format!(" {label:<label_width$}"),
            false => String::new(),
        };
        let mut text = format!(
            "{} monitor, last {:.1} s\n",
            time_of_day(self.time_ns),
            self.interval_ns as f64 / 1e9
        );
        let _ = write!(
            text,
            "{:<method_width$}{} {:>9} {:>7} {:>10} {:>10} {:>10} {:>10}",
            "METHOD",
            label_cell("LABEL"),
            "CALLS",
            "ERRORS",
            "MEAN",
            "P50",
            "P99",
            "MAX"
        );
        for row in &self.rows {
            let s = &row.stats;
            let _ = write!(
                text,
                "\n{:<method_width$}{} {:>9} {:>7} {:>10} {:>10} {:>10} {:>10}",
                row.method,
                label_cell(&escape_controls(row.label.as_deref().unwrap_or("-"))),
                s.calls,
                s.errors,
                format_duration(s.mean_ns),
                format_duration(s.p50_ns),
                format_duration(s.p99_ns),
                format_duration(s.max_ns)
            );
        }
        if self.rows.is_empty() {
            text.push_str("\n(no calls yet)");
        }
        text
    }

    /// One JSON object per row.
    pub fn to_json(&self) -> Vec<serde_json::Value> {
        self.rows
            .iter()
            .map(|row| {
                let s = &row.stats;
                json!({
                    "time": time_of_day(self.time_ns), "time_ns": self.time_ns,
                    "interval_ns": self.interval_ns, "method": row.method, "label": row.label,
                    "calls": s.calls, "errors": s.errors, "mean_ns": s.mean_ns,
                    "p50_ns": s.p50_ns, "p99_ns": s.p99_ns, "max_ns": s.max_ns,
                })
            })
            .collect()
    }
}

/// ` [label=VALUE]` after a record's thread when its thread worked for a request label.
fn label_tag(label: Option<&str>) -> String {
    label.map_or_else(String::new, |l| format!(" [label={}]", escape_controls(l)))
}

/// A duration with a unit that suits it, the same in trace lines, trees and tables: `850ns`,
/// `37.2µs`, `4.56ms`, `12.3ms`, `1.234s`.
pub fn format_duration(ns: u64) -> String {
    match ns {
        0..=999 => format!("{ns}ns"),
        1_000..=999_949 => format!("{:.1}µs", ns as f64 / 1e3),
        999_950..=9_994_999 => format!("{:.2}ms", ns as f64 / 1e6),
        9_995_000..=999_949_999 => format!("{:.1}ms", ns as f64 / 1e6),
        _ => format!("{:.3}s", ns as f64 / 1e9),
    }
}

/// A duration measured with the coarse clock, in whole milliseconds (`1,204ms`): its
/// resolution is a few milliseconds.
fn format_coarse(ns: u64) -> String {
    let digits = ((ns + 500_000) / 1_000_000).to_string();
    let mut grouped = String::new();
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(d);
    }
    grouped + "ms"
}

/// `HH:MM:SS.mmm` (UTC) of a wall-clock time in ns since the epoch.
fn time_of_day(wall_ns: u64) -> String {
    let ms = wall_ns / 1_000_000;
    let s = ms / 1000;
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        (s / 3600) % 24,
        (s / 60) % 60,
        s % 60,
        ms % 1000
    )
}

/// `text` with control characters escaped (`\n`, `\t`, `\r`, `\u0001`), to keep a record on
/// its line.
fn escape_controls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() || c == '\u{2028}' || c == '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn call() -> Call {
        Call {
            time_ns: ((13 * 3600 + 5 * 60 + 7) * 1000 + 42) * 1_000_000,
            thread: "main\n".into(),
            tid: 7,
            class: "app.Cache".into(),
            method: "get".into(),
            descriptor: "(I)J".into(),
            duration_ns: 1_250_000,
            coarse: false,
            args: Some("[42]".into()),
            values: Vec::new(),
            sizes: Vec::new(),
            return_size: None,
            outcome: Outcome::Returned(Some("7".into())),
            stack: vec!["app.Main.main(Main.java:3)".into()],
            callee: None,
            label: None,
        }
    }

    #[test]
    fn reached_points_read_as_one_line() {
        let reached = Reached {
            time_ns: 0,
            thread: "main".into(),
            tid: 1,
            class: "app.Cache".into(),
            method: "get".into(),
            descriptor: "()V".into(),
            point: Point::SyncEnter("app.Lock@1f".into()),
            values: Vec::new(),
            sizes: Vec::new(),
            allocated: None,
            stack: vec!["app.Cache.get(Cache.java:9)".into()],
        };
        assert_eq!(
            reached.to_text(),
            "00:00:00.000 [main] app.Cache.get enters app.Lock@1f\n    at app.Cache.get(Cache.java:9)"
        );
    }

    pub(crate) fn tree() -> CallTree {
        let node = |name: &str, count, offset_ms: u64, total_ms: u64, children| TreeNode {
            name: name.into(),
            count,
            offset_ns: offset_ms * 1_000_000,
            total_ns: total_ms * 1_000_000,
            children,
            per_entry_call: None,
        };
        CallTree {
            time_ns: 0,
            thread: "main".into(),
            truncated: 0,
            unfinished: false,
            label: None,
            root: node(
                "a",
                1,
                0,
                10_000,
                vec![
                    node("b", 1, 0, 2_000, vec![]),
                    node(
                        "c",
                        1,
                        2_000,
                        7_000,
                        vec![
                            node("d", 1, 2_000, 4_000, vec![]),
                            node("e", 2, 6_000, 1_000, vec![]),
                        ],
                    ),
                ],
            ),
        }
    }

    #[test]
    fn a_slow_path_level_shows_its_time_per_entry_call_beside_its_name() {
        let mut tree = tree();
        tree.root.children[1].per_entry_call = Some(Quantiles {
            p50_ns: 1_500_000,
            p99_ns: 40_000_000,
        });
        let text = tree.to_text();
        assert!(text.contains("- c [p50 1.50ms, p99 40.0ms]\n"), "{text}");
        let json = tree.to_json();
        let c = &json["tree"]["children"][1];
        assert_eq!(c["method"], "c");
        assert_eq!(
            (c["p50_ns"].as_u64(), c["p99_ns"].as_u64()),
            (Some(1_500_000), Some(40_000_000))
        );
        assert!(json["tree"].get("p50_ns").is_none());
    }

    #[test]
    fn calls_read_as_one_line_and_their_stack() {
        assert_eq!(
            call().to_text(),
            "13:05:07.042 [main\\n] app.Cache.get 1.25ms [42] -> 7\n    at app.Main.main(Main.java:3)"
        );
        let json = call().to_json();
        assert_eq!(
            (json["thread"].as_str(), json["threw"].as_bool()),
            (Some("main\n"), Some(false))
        );
        let at_call_site = Call {
            callee: Some(Callee {
                class: "app.Db".into(),
                method: "query".into(),
                descriptor: "()V".into(),
                invoke: "virtual".into(),
            }),
            args: None,
            stack: Vec::new(),
            ..call()
        };
        assert_eq!(
            at_call_site.to_text(),
            "13:05:07.042 [main\\n] app.Cache.get calls app.Db.query 1.25ms -> 7"
        );
        assert_eq!(at_call_site.to_json()["callee"]["invoke"], "virtual");
    }

    #[test]
    fn trees_draw_their_branches() {
        let expected = "00:00:00.000 [main] a\n\
                        0 [10.000s (1.000s), 100%] - a\n\
                        +---0 [2.000s, 20%, 20%] - b\n\
                        `---2.000s [7.000s (2.000s), 70%, 70%] - c\n    \
                        +---2.000s [4.000s, 57%, 40%] - d\n    \
                        `---6.000s [1.000s, 14%, 10%] - e (2 calls)";
        assert_eq!(tree().to_text(), expected);
        assert_eq!(tree().to_json()["tree"]["self_ns"], 1_000_000_000u64);
    }

    #[test]
    fn request_labels_follow_the_thread_and_make_monitor_rows_of_their_own() {
        let labelled = Call {
            label: Some("/pool".into()),
            stack: Vec::new(),
            ..call()
        };
        assert_eq!(
            labelled.to_text(),
            "13:05:07.042 [main\\n] [label=/pool] app.Cache.get 1.25ms [42] -> 7"
        );
        assert_eq!(labelled.to_json()["label"], "/pool");
        let tree = CallTree {
            label: Some("/compute".into()),
            ..tree()
        };
        assert!(tree
            .to_text()
            .starts_with("00:00:00.000 [main] [label=/compute] a\n"));
        let row = |label: Option<&str>, calls| MethodStats {
            method: "app.Api.handle".into(),
            label: label.map(Into::into),
            stats: CallStats {
                calls,
                ..CallStats::default()
            },
        };
        let interval = MonitorInterval {
            time_ns: 0,
            interval_ns: 5_000_000_000,
            rows: vec![row(Some("/compute"), 3), row(None, 1)],
        };
        let text = interval.to_text();
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[1].starts_with("METHOD         LABEL        CALLS"),
            "{text}"
        );
        assert!(
            lines[2].starts_with("app.Api.handle /compute         3"),
            "{text}"
        );
        assert!(
            lines[3].starts_with("app.Api.handle -                1"),
            "{text}"
        );
        assert_eq!(interval.to_json()[0]["label"], "/compute");
    }

    #[test]
    fn numbers_read_well() {
        assert_eq!(format_duration(850), "850ns");
        assert_eq!(format_duration(12_345), "12.3µs");
        assert_eq!(format_duration(37_249), "37.2µs");
        assert_eq!(format_duration(999_960), "1.00ms");
        assert_eq!(format_duration(1_250_000), "1.25ms");
        assert_eq!(format_duration(12_340_000), "12.3ms");
        assert_eq!(format_duration(1_234_000_000), "1.234s");
        assert_eq!(format_coarse(104_000_000), "104ms");
        assert_eq!(format_coarse(1_203_600_000), "1,204ms");
        assert_eq!(
            time_of_day(((13 * 3600 + 5 * 60 + 7) * 1000 + 42) * 1_000_000),
            "13:05:07.042"
        );
    }
}
