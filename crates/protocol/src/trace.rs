//! The tracing plan: which methods to instrument, what to capture at each call, which calls
//! to keep and what to do with them. `jtap trace`, `jtap calltree` and `jtap monitor` are
//! front-ends that build a [`Plan`]; a tracing script language would compile to one too. The
//! agent turns it into class-file probes.
//!
//! A plan travels as the value of the `trace=` option, in a canonical text form of
//! space-separated tokens that [`Plan::parse`] reads and [`Display`](fmt::Display) prints:
//!
//! ```text
//! plan    := token (" " token)*
//! token   := "mode:" ("trace" | "calltree" | "monitor")
//!          | "p:" pattern          a method to trace (calltree: the entry method)
//!          | "if:" guard           trace, monitor: the last p:'s calls (entry:'s entries)
//!                                  are reported (counted) only when this holds of their
//!                                  arguments (see [`crate::guard`])
//!          | "i:" pattern          calltree: a method to time inside the entry
//!          | "c:" pattern "to:" pattern
//!                                  trace: calls the first methods make to the second,
//!                                  each timed and reported as a call of its own
//!          | ("fget:" | "fset:") pattern "of:" pattern
//!                                  trace: reads (writes) of the second pattern's fields
//!                                  (`Class::field`) in the first's methods, each reported
//!                                  with the object and the value read (written)
//!          | ("entry:" | "line:" | "new:" | "sync:") pattern
//!                                  trace: report each entry, line, object allocation
//!                                  or monitor enter and exit these methods reach
//!          | ("aget:" | "aset:" | "throw:" | "catch:" | "checkcast:" | "instanceof:")
//!            pattern               trace: likewise each array read and write, throw,
//!                                  catch and type check, with the values it takes
//!          | "lines:" n ("," n)*   the only lines "line:" reports
//!          | "depth:" n            calltree: levels of call sites below the entry; trace:
//!                                  frames of each stack (at most 64)
//!          | "threshold:" duration keep only calls (trees) lasting at least this long
//!          | "count:" n            stop after n calls (trees)
//!          | "interval:" duration  monitor: how often to report
//!          | "args" | "values" | "callee-values" | "sizes" | "return" | "exceptions"
//!          | "stack" | "to-string" | "exact" | "batches"
//! ```
//!
//! Method patterns (see [`MethodPattern`]) never contain spaces.

use std::fmt;
use std::time::Duration;

use jtap_classfile::guard::Guard;

/// What a [`Plan::guards`] entry applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Guarded {
    /// The calls of the methods of target `n`.
    Target(usize),
    /// The entries of the methods of point `n` (an [`PointKind::Entry`] point).
    Point(usize),
}

/// A name pattern over dotted Java names (`com.example.Foo$Inner`, `handle`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NamePattern {
    /// `*` matches any run of characters, `?` one character; everything else literally.
    Glob(String),
    /// `/regex/`: a regular expression that must match the whole name.
    Regex(String),
}

impl NamePattern {
    fn parse(text: &str, what: &str) -> Result<NamePattern, String> {
        if let Some(inner) = text.strip_prefix('/') {
            let body = inner
                .strip_suffix('/')
                .ok_or_else(|| format!("{what} regex {text:?} lacks its closing /"))?;
            if body.is_empty() {
                return Err(format!("empty {what} regex"));
            }
            regex::Regex::new(&format!("^(?:{body})$"))
                .map_err(|e| format!("bad {what} regex /{body}/: {}", one_line(&e.to_string())))?;
            return Ok(NamePattern::Regex(body.to_string()));
        }
        if text.is_empty() {
            return Err(format!("empty {what} name"));
        }
        let ok = text.chars().all(|c| {
            c.is_alphanumeric() || matches!(c, '.' | '$' | '_' | '*' | '?' | '<' | '>' | '-')
        });
        if !ok {
            return Err(format!(
                "{what} {text:?} is neither a name, a glob (* and ?) nor a /regex/"
            ));
        }
        Ok(NamePattern::Glob(text.to_string()))
    }

    /// The pattern as a regular expression matching whole names.
    pub fn to_regex(&self) -> String {
        match self {
            NamePattern::Regex(body) => format!("^(?:{body})$"),
            NamePattern::Glob(glob) => {
                let mut re = String::from("^");
                for c in glob.chars() {
                    match c {
                        '*' => re.push_str(".*"),
                        '?' => re.push('.'),
                        c => re.push_str(&regex::escape(&c.to_string())),
                    }
                }
                re.push('$');
                re
            }
        }
    }

    /// The exact name, when the pattern is a glob without wildcards.
    pub fn literal(&self) -> Option<&str> {
        match self {
            NamePattern::Glob(g) if !g.contains(['*', '?']) => Some(g),
            _ => None,
        }
    }
}

impl fmt::Display for NamePattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NamePattern::Glob(g) => f.write_str(g),
            NamePattern::Regex(r) => write!(f, "/{r}/"),
        }
    }
}

/// How the agent's note begins when a session's class changes made HotSpot discard all of the
/// JVM's compiled code (the first class change in a JVM whose agents all came by attach): the
/// JVM then runs slower for seconds while the JIT compiles again.
pub const DISCARDED_ALL_COMPILED_CODE: &str =
    "HotSpot discards all of this JVM's compiled code at its first class retransformation";

/// Selects methods: `[+|@]Class[::[@]method[descriptor]]`.
///
/// - `Class` is a dotted class name (`com.example.Foo`, nested classes with `$`), a glob
///   (`com.example.*Service`) or a `/regex/` as BTrace writes them; a leading `+` selects the
///   named class or interface and every class extending or implementing it, a leading `@`
///   the classes annotated (run-time visibly) with the annotation types it names.
/// - `method` (default: every method, constructors `<init>` and static initialisers
///   `<clinit>` included) is a name, glob or `/regex/` (after `@`: of the method's annotation
///   types), optionally followed by a JVM descriptor such as `(Ljava/lang/String;I)V`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MethodPattern {
    /// The class (or supertype, with [`MethodPattern::subtypes`]) pattern.
    pub class: NamePattern,
    /// Also every subclass and implementation of the classes `class` names.
    pub subtypes: bool,
    /// `class` names annotation types: the classes annotated with one of them.
    pub annotated: bool,
    /// The method name pattern; `None` for every method.
    pub method: Option<NamePattern>,
    /// `method` names annotation types: the methods annotated with one of them.
    pub method_annotated: bool,
    /// The exact JVM method descriptor, when given.
    pub descriptor: Option<String>,
}

impl MethodPattern {
    /// Parses one pattern; the error is one line saying what is wrong.
    pub fn parse(text: &str) -> Result<MethodPattern, String> {
        let fail = |reason: String| format!("bad method pattern {text:?}: {reason}");
        if text.contains(char::is_whitespace) {
            return Err(fail("patterns contain no spaces".into()));
        }
        let (subtypes, rest) = match text.strip_prefix('+') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (annotated, rest) =
            match rest.strip_prefix('@') {
                Some(_) if subtypes => return Err(fail(
                    "a class is selected by its supertype (+) or by an annotation (@), not both"
                        .into(),
                )),
                Some(rest) => (true, rest),
                None => (false, rest),
            };
        let (class_text, method_text) = split_class(rest).map_err(fail)?;
        let class = NamePattern::parse(class_text, "class").map_err(fail)?;
        let (method_annotated, method_text) = match method_text.map(|m| m.strip_prefix('@')) {
            Some(Some(m)) => (true, Some(m)),
            _ => (false, method_text),
        };
        let (method, descriptor) = match method_text {
            None => (None, None),
            Some(m) => {
                let (name, descriptor) = split_descriptor(m).map_err(fail)?;
                (
                    Some(NamePattern::parse(name, "method").map_err(fail)?),
                    descriptor,
                )
            }
        };
        if let Some(d) = &descriptor {
            if !valid_descriptor(d) {
                return Err(fail(format!(
                    "{d:?} is not a JVM method descriptor like (Ljava/lang/String;I)V"
                )));
            }
        }
        Ok(MethodPattern {
            class,
            subtypes,
            annotated,
            method,
            method_annotated,
            descriptor,
        })
    }
}

/// `Class` and the text after `::`, honouring `/regex/` delimiters.
fn split_class(text: &str) -> Result<(&str, Option<&str>), String> {
    let end = if let Some(body) = text.strip_prefix('/') {
        body.find('/').ok_or("class regex lacks its closing /")? + 2
    } else {
        text.find("::").unwrap_or(text.len())
    };
    let (class, rest) = text.split_at(end);
    match rest {
        "" => Ok((class, None)),
        _ => match rest.strip_prefix("::") {
            Some(method) => Ok((class, Some(method))),
            None => Err(format!("expected :: after the class, found {rest:?}")),
        },
    }
}

/// A method name and its optional descriptor.
fn split_descriptor(text: &str) -> Result<(&str, Option<String>), String> {
    let name_end = if let Some(body) = text.strip_prefix('/') {
        body.find('/').ok_or("method regex lacks its closing /")? + 2
    } else {
        text.find('(').unwrap_or(text.len())
    };
    let (name, descriptor) = text.split_at(name_end);
    Ok((
        name,
        (!descriptor.is_empty()).then(|| descriptor.to_string()),
    ))
}

fn valid_descriptor(d: &str) -> bool {
    fn field(s: &[u8], mut i: usize) -> Option<usize> {
        while s.get(i) == Some(&b'[') {
            i += 1;
        }
        match s.get(i)? {
            b'B' | b'C' | b'D' | b'F' | b'I' | b'J' | b'S' | b'Z' => Some(i + 1),
            b'L' => {
                let end = s[i..].iter().position(|&c| c == b';')? + i;
                (end > i + 1).then_some(end + 1)
            }
            _ => None,
        }
    }
    let s = d.as_bytes();
    if s.first() != Some(&b'(') {
        return false;
    }
    let mut i = 1;
    while s.get(i) != Some(&b')') {
        match field(s, i) {
            Some(next) => i = next,
            None => return false,
        }
    }
    i += 1;
    if s.get(i) == Some(&b'V') {
        return i + 1 == s.len();
    }
    field(s, i) == Some(s.len())
}

impl fmt::Display for MethodPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.subtypes {
            f.write_str("+")?;
        }
        if self.annotated {
            f.write_str("@")?;
        }
        write!(f, "{}", self.class)?;
        if let Some(method) = &self.method {
            let at = if self.method_annotated { "@" } else { "" };
            write!(f, "::{at}{method}")?;
        }
        if let Some(d) = &self.descriptor {
            f.write_str(d)?;
        }
        Ok(())
    }
}

/// What the agent does with the calls it keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// One line per call (`jtap trace`).
    #[default]
    Trace,
    /// A tree of the calls inside each call of the entry method (`jtap calltree`).
    Calltree,
    /// Per-method statistics every interval (`jtap monitor`).
    Monitor,
}

impl Mode {
    /// The mode's name.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Trace => "trace",
            Mode::Calltree => "calltree",
            Mode::Monitor => "monitor",
        }
    }
}

/// Calls made from some methods to others, traced at the call site (BTrace's `Kind.CALL`):
/// each call from a `host` method to a `callee` is timed and reported, with the callee,
/// whether or not the callee itself can be instrumented.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallSites {
    /// The methods whose calls are traced.
    pub host: MethodPattern,
    /// The called methods, as the call site names them: its owner class (`+Supertype`: the
    /// type or one extending or implementing it), name and descriptor.
    pub callee: MethodPattern,
}

/// Field accesses in some methods, traced where they are made (BTrace's `Kind.FIELD_GET` and
/// `FIELD_SET`): each read (or write) of a matching field by a `host` method is reported, with
/// the object whose field it is and the value read (or written).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldSites {
    /// The methods whose accesses are traced.
    pub host: MethodPattern,
    /// The fields, as `Class::field` (the class as the code names it: the one declaring the
    /// field or a subclass; `+Super` is not accepted).
    pub field: MethodPattern,
    /// Writes rather than reads.
    pub write: bool,
}

/// A point inside a method that a plan can report each time a thread reaches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PointKind {
    /// The method's entry (with `this` and the arguments, for plans with `values`).
    Entry,
    /// The first instruction of a source line.
    Line,
    /// An object allocated with `new` (constructed).
    New,
    /// A `synchronized` block entered or left.
    Sync,
    /// An array element read (reported once read, with the array, index and element).
    ArrayGet,
    /// An array element about to be written (with the array, index and value).
    ArraySet,
    /// An exception about to be thrown by `throw`.
    Throw,
    /// An exception caught by a typed `catch` (`finally` is not one).
    Catch,
    /// An object about to be cast (with the type cast to).
    CheckCast,
    /// An object about to be tested by `instanceof` (with the type tested).
    InstanceOf,
}

impl PointKind {
    /// Every kind, as the plan's text names them.
    pub const ALL: [PointKind; 10] = [
        PointKind::Entry,
        PointKind::Line,
        PointKind::New,
        PointKind::Sync,
        PointKind::ArrayGet,
        PointKind::ArraySet,
        PointKind::Throw,
        PointKind::Catch,
        PointKind::CheckCast,
        PointKind::InstanceOf,
    ];

    /// Its token in the plan's text.
    pub fn name(self) -> &'static str {
        match self {
            PointKind::Entry => "entry",
            PointKind::Line => "line",
            PointKind::New => "new",
            PointKind::Sync => "sync",
            PointKind::ArrayGet => "aget",
            PointKind::ArraySet => "aset",
            PointKind::Throw => "throw",
            PointKind::Catch => "catch",
            PointKind::CheckCast => "checkcast",
            PointKind::InstanceOf => "instanceof",
        }
    }
}

/// Everything a tracing session does.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    /// What happens with the calls.
    pub mode: Mode,
    /// Methods to trace (calltree: the entry methods).
    pub targets: Vec<MethodPattern>,
    /// Trace and monitor: conditions on the arguments of the methods of some targets and
    /// entry points: a call they reject is not reported or counted (see
    /// [`jtap_classfile::guard`]).
    pub guards: Vec<(Guarded, Guard)>,
    /// Calltree: methods timed inside an entry call.
    pub inner: Vec<MethodPattern>,
    /// Trace: calls traced where they are made.
    pub call_sites: Vec<CallSites>,
    /// Trace: points reported inside methods.
    pub points: Vec<(PointKind, MethodPattern)>,
    /// Trace: field accesses reported where they are made.
    pub field_sites: Vec<FieldSites>,
    /// The only source lines [`PointKind::Line`] points report (all when empty).
    pub lines: Vec<u32>,
    /// How deep: calltree, levels of call sites timed below the entry (1: the entry's own
    /// calls); trace, frames of each stack.
    pub depth: Option<u32>,
    /// Keep only calls (trees) lasting at least this long.
    pub threshold: Option<Duration>,
    /// Stop reporting after this many calls (trees).
    pub count: Option<u64>,
    /// Monitor: the reporting interval.
    pub interval: Option<Duration>,
    /// Capture the arguments (and `this`).
    pub args: bool,
    /// Capture `this` and the arguments as separate values (for scripts), not as one text.
    pub values: bool,
    /// At call sites, capture the called method's receiver and arguments (after `this`, as
    /// the call's values: scripts' `@TargetInstance` and arguments at `Kind.CALL`).
    pub callee_values: bool,
    /// Measure each captured value (with `values`) and the value returned (with `return`):
    /// their shallow sizes, as `Instrumentation.getObjectSize` gives them (scripts' `sizeof`).
    pub sizes: bool,
    /// Capture the return value.
    pub returns: bool,
    /// Report calls that end by throwing, with the exception.
    pub exceptions: bool,
    /// Capture the Java stack of each reported call.
    pub stack: bool,
    /// Describe application objects by calling their `toString()` (runs application code;
    /// by default they are shown as `Class@hash{fields}`).
    pub to_string: bool,
    /// Time every call from its exact start, as a slow-call profile needs to match samples to
    /// calls (without it, a threshold of 1 ms or more leaves the start to the field clock,
    /// up to one of its periods early).
    pub exact: bool,
    /// Trace: send the calls that carry nothing described (no values, return value,
    /// exception or stack) in batches, each method and thread named once (scripts: a hot
    /// method's every call reaches the handlers; see [`crate::records::CallBatch`]), and
    /// at the end how many calls of each method the probes reported
    /// ([`crate::records::batch::Reported`]).
    pub batches: bool,
}

impl Plan {
    /// Parses the canonical text form.
    pub fn parse(text: &str) -> Result<Plan, String> {
        let mut plan = Plan::default();
        let mut mode = None;
        let mut host = None;
        let mut field_host = None;
        // What an `if:` applies to: the `p:` or `entry:` just before it.
        let mut last = None;
        for token in text.split(' ').filter(|t| !t.is_empty()) {
            let (key, value) = token.split_once(':').unwrap_or((token, ""));
            let number = |v: &str| {
                v.parse::<u64>()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| format!("bad {key}: {v:?}"))
            };
            match key {
                "mode" => {
                    let m = [Mode::Trace, Mode::Calltree, Mode::Monitor]
                        .into_iter()
                        .find(|m| m.name() == value);
                    mode = Some(m.ok_or_else(|| format!("unknown trace mode {value:?}"))?);
                }
                "p" => {
                    plan.targets.push(MethodPattern::parse(value)?);
                    last = Some(Guarded::Target(plan.targets.len() - 1));
                    continue;
                }
                "if" => {
                    let guarded = last.ok_or("if: not after a p: or entry:")?;
                    plan.guards.push((guarded, crate::guard::parse(value)?));
                    continue;
                }
                "i" => plan.inner.push(MethodPattern::parse(value)?),
                key if PointKind::ALL.iter().any(|k| k.name() == key) => {
                    let kind = PointKind::ALL
                        .into_iter()
                        .find(|k| k.name() == key)
                        .expect("a point kind");
                    plan.points.push((kind, MethodPattern::parse(value)?));
                    last =
                        (kind == PointKind::Entry).then_some(Guarded::Point(plan.points.len() - 1));
                    continue;
                }
                "lines" => {
                    for n in value.split(',') {
                        plan.lines.push(
                            u32::try_from(number(n)?).map_err(|_| format!("bad line {n:?}"))?,
                        );
                    }
                }
                "c" => host = Some(MethodPattern::parse(value)?),
                "to" => {
                    let callee = MethodPattern::parse(value)?;
                    if callee.annotated || callee.method_annotated {
                        return Err(format!(
                            "to:{value}: a call site names the called method, not its annotations"
                        ));
                    }
                    plan.call_sites.push(CallSites {
                        host: host.take().ok_or("to: without the c: before it")?,
                        callee,
                    });
                }
                "fget" | "fset" => field_host = Some((key == "fset", MethodPattern::parse(value)?)),
                "of" => {
                    let field = MethodPattern::parse(value)?;
                    if field.subtypes
                        || field.annotated
                        || field.method_annotated
                        || field.method.is_none()
                    {
                        return Err(format!("of:{value}: fields are named Class::field"));
                    }
                    let (write, host) = field_host
                        .take()
                        .ok_or("of: without the fget: or fset: before it")?;
                    plan.field_sites.push(FieldSites { host, field, write });
                }
                "depth" => {
                    plan.depth = Some(
                        u32::try_from(number(value)?)
                            .map_err(|_| format!("bad depth {value:?}"))?,
                    )
                }
                "count" => plan.count = Some(number(value)?),
                "threshold" => {
                    plan.threshold = Some(Duration::from_nanos(
                        value
                            .parse()
                            .map_err(|_| format!("bad threshold {value:?}"))?,
                    ))
                }
                "interval" => plan.interval = Some(Duration::from_nanos(number(value)?)),
                "args" => plan.args = true,
                "values" => plan.values = true,
                "callee-values" => plan.callee_values = true,
                "sizes" => plan.sizes = true,
                "return" => plan.returns = true,
                "exceptions" => plan.exceptions = true,
                "stack" => plan.stack = true,
                "to-string" => plan.to_string = true,
                "exact" => plan.exact = true,
                "batches" => plan.batches = true,
                _ => return Err(format!("unknown trace plan item {token:?}")),
            }
            last = None;
        }
        plan.mode = mode.ok_or("the trace plan names no mode")?;
        if host.is_some() {
            return Err("c: without the to: after it".into());
        }
        if field_host.is_some() {
            return Err("fget: or fset: without the of: after it".into());
        }
        let inside =
            plan.call_sites.is_empty() && plan.points.is_empty() && plan.field_sites.is_empty();
        if plan.targets.is_empty() && inside {
            return Err("no method pattern given".into());
        }
        if plan.mode != Mode::Trace && !inside {
            return Err("only trace mode traces call sites, field accesses and points".into());
        }
        if plan.mode == Mode::Calltree && plan.targets.len() != 1 {
            return Err("calltree takes exactly one entry pattern".into());
        }
        Ok(plan)
    }
}

impl fmt::Display for Plan {
    /// The canonical form (durations in nanoseconds), which [`Plan::parse`] reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut tokens = vec![format!("mode:{}", self.mode.name())];
        let guards = |tokens: &mut Vec<String>, guarded: Guarded| {
            for (_, guard) in self.guards.iter().filter(|(g, _)| *g == guarded) {
                tokens.push(format!("if:{}", crate::guard::to_text(guard)));
            }
        };
        for (index, target) in self.targets.iter().enumerate() {
            tokens.push(format!("p:{target}"));
            guards(&mut tokens, Guarded::Target(index));
        }
        tokens.extend(self.inner.iter().map(|p| format!("i:{p}")));
        for sites in &self.call_sites {
            tokens.push(format!("c:{}", sites.host));
            tokens.push(format!("to:{}", sites.callee));
        }
        for sites in &self.field_sites {
            let access = if sites.write { "fset" } else { "fget" };
            tokens.push(format!("{access}:{}", sites.host));
            tokens.push(format!("of:{}", sites.field));
        }
        for (index, (kind, pattern)) in self.points.iter().enumerate() {
            tokens.push(format!("{}:{pattern}", kind.name()));
            guards(&mut tokens, Guarded::Point(index));
        }
        if !self.lines.is_empty() {
            let lines: Vec<String> = self.lines.iter().map(u32::to_string).collect();
            tokens.push(format!("lines:{}", lines.join(",")));
        }
        if let Some(d) = self.depth {
            tokens.push(format!("depth:{d}"));
        }
        if let Some(t) = self.threshold {
            tokens.push(format!("threshold:{}", t.as_nanos()));
        }
        if let Some(c) = self.count {
            tokens.push(format!("count:{c}"));
        }
        if let Some(i) = self.interval {
            tokens.push(format!("interval:{}", i.as_nanos()));
        }
        for (on, word) in [
            (self.args, "args"),
            (self.values, "values"),
            (self.callee_values, "callee-values"),
            (self.sizes, "sizes"),
            (self.returns, "return"),
            (self.exceptions, "exceptions"),
            (self.stack, "stack"),
            (self.to_string, "to-string"),
            (self.exact, "exact"),
            (self.batches, "batches"),
        ] {
            if on {
                tokens.push(word.into());
            }
        }
        f.write_str(&tokens.join(" "))
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_parse_and_print_back() {
        for text in [
            "com.example.Foo::bar",
            "com.example.Foo",
            "com.example.*Service::handle*",
            "/com\\.example\\..*/::/get.*/",
            "+java.lang.Runnable::run",
            "a.B::m(Ljava/lang/String;[I)V",
            "a.B::/m.*/(I)J",
            "a.B$Inner::<init>",
            "@javax.jws.WebService::@javax.jws.WebMethod",
            "@/a\\..*/::@/.*Handler/(I)V",
            "a.B::@a.Handler",
        ] {
            let p = MethodPattern::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(p.to_string(), text);
        }
        let p = MethodPattern::parse("+a.I::run()V").unwrap();
        assert!(p.subtypes);
        assert_eq!(p.descriptor.as_deref(), Some("()V"));
        assert_eq!(p.class.literal(), Some("a.I"));
        let p = MethodPattern::parse("@a.Endpoint::@a.Handler").unwrap();
        assert!(p.annotated && p.method_annotated && !p.subtypes);
        assert_eq!(p.method.unwrap().literal(), Some("a.Handler"));
    }

    #[test]
    fn globs_become_anchored_regexes() {
        let p = MethodPattern::parse("com.example.*Service::handle?").unwrap();
        let class = regex::Regex::new(&p.class.to_regex()).unwrap();
        assert!(class.is_match("com.example.OrderService"));
        assert!(!class.is_match("com.exampleXOrderServiceX"));
        let method = regex::Regex::new(&p.method.unwrap().to_regex()).unwrap();
        assert!(method.is_match("handle1") && !method.is_match("handle12"));
    }

    #[test]
    fn bad_patterns_say_why_on_one_line() {
        for (text, needle) in [
            ("", "empty class"),
            ("a.B::", "empty method"),
            ("/a(/", "bad class regex"),
            ("/abc", "closing /"),
            ("a.B::m(X)V", "not a JVM method descriptor"),
            ("a.B::m(I", "not a JVM method descriptor"),
            ("a.B:m", "neither a name"),
            ("a b", "no spaces"),
            ("+@a.B", "not both"),
            ("@", "empty class"),
            ("a.B::@", "empty method"),
        ] {
            let e = MethodPattern::parse(text).unwrap_err();
            assert!(e.contains(needle), "{text:?}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn plans_round_trip() {
        let plan = Plan {
            mode: Mode::Calltree,
            targets: vec![MethodPattern::parse("a.B::run").unwrap()],
            guards: Vec::new(),
            inner: vec![
                MethodPattern::parse("a.*::x").unwrap(),
                MethodPattern::parse("/q/").unwrap(),
            ],
            call_sites: Vec::new(),
            points: Vec::new(),
            field_sites: Vec::new(),
            lines: Vec::new(),
            depth: Some(2),
            threshold: Some(Duration::from_millis(100)),
            count: Some(3),
            interval: None,
            args: true,
            values: true,
            callee_values: true,
            sizes: true,
            returns: true,
            exceptions: false,
            stack: true,
            to_string: true,
            exact: true,
            batches: true,
        };
        assert_eq!(Plan::parse(&plan.to_string()), Ok(plan));
        assert!(Plan::parse("p:a.B").unwrap_err().contains("no mode"));
        assert!(Plan::parse("mode:trace")
            .unwrap_err()
            .contains("no method pattern"));
        assert!(Plan::parse("mode:trace p:a.B bogus")
            .unwrap_err()
            .contains("bogus"));
    }

    #[test]
    fn guards_follow_their_target() {
        let plan = Plan::parse(
            "mode:trace p:a.B::run if:gt(a0,100) p:a.C if:null(a1) entry:a.D if:eq(a0,1) values",
        )
        .unwrap();
        assert_eq!(plan.guards.len(), 3);
        assert_eq!(plan.guards[1].0, Guarded::Target(1));
        assert_eq!(plan.guards[2].0, Guarded::Point(0));
        assert_eq!(Plan::parse(&plan.to_string()), Ok(plan));
        assert!(Plan::parse("mode:trace if:gt(a0,1) p:a.B")
            .unwrap_err()
            .contains("not after a p: or entry:"));
        assert!(Plan::parse("mode:trace line:a.B if:gt(a0,1)").is_err());
        assert!(Plan::parse("mode:trace p:a.B if:gt(a0)")
            .unwrap_err()
            .contains("bad guard"));
    }

    #[test]
    fn call_sites_pair_a_host_with_a_callee() {
        let plan = Plan::parse(
            "mode:trace c:a.B::run to:/java\\.io\\..*/::write c:a.B to:+java.util.Map::put",
        )
        .unwrap();
        assert!(plan.targets.is_empty());
        assert_eq!(plan.call_sites.len(), 2);
        assert!(plan.call_sites[1].callee.subtypes);
        assert_eq!(plan.call_sites[0].host.to_string(), "a.B::run");
        assert_eq!(Plan::parse(&plan.to_string()), Ok(plan));
        let fields =
            Plan::parse("mode:trace fget:a.B::run of:a.C::count fset:/a\\..*/ of:/a\\..*/::/n.*/")
                .unwrap();
        assert_eq!(fields.field_sites.len(), 2);
        assert!(!fields.field_sites[0].write && fields.field_sites[1].write);
        assert_eq!(fields.field_sites[0].field.to_string(), "a.C::count");
        assert_eq!(Plan::parse(&fields.to_string()), Ok(fields));
        let points =
            Plan::parse("mode:trace line:a.B::run new:a.B sync:/a\\..*/ lines:12,40").unwrap();
        assert_eq!(points.points.len(), 3);
        assert_eq!(points.lines, [12, 40]);
        assert_eq!(Plan::parse(&points.to_string()), Ok(points));
        for (text, needle) in [
            ("mode:trace c:a.B", "c: without the to:"),
            ("mode:trace fget:a.B", "without the of:"),
            ("mode:trace of:a.B::x", "of: without the fget:"),
            (
                "mode:trace fset:a.B of:a.C",
                "fields are named Class::field",
            ),
            ("mode:trace to:a.B", "to: without the c:"),
            ("mode:trace c:a.B to:@a.I", "not its annotations"),
            (
                "mode:trace fget:a.B of:@a.C::x",
                "fields are named Class::field",
            ),
            ("mode:calltree p:a.B c:a.B to:a.C", "only trace mode"),
            ("mode:monitor line:a.B", "only trace mode"),
            ("mode:trace line:a.B lines:3,x", "bad lines"),
        ] {
            let e = Plan::parse(text).unwrap_err();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }
}
