//! The keys of the option grammar, one row each: its name, what it takes, the command it
//! goes with, its help line, and how it parses into [`Options`] and shows back out of them.
//! The parser, the canonical printer, the agent's `help`, the CLI's flag help and the
//! manual's option list all read [`KEYS`]; a key is added by adding its row.

use jtap_profile::event;

use super::values::{bytes, count, duration, format_bytes, format_duration, path, pattern};
use super::{Event, JavaStacks, NativeStacks, Options, MAX_INSPECT, MAX_JSTACKDEPTH, MAX_PATH};

/// What a key of the grammar takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Takes {
    /// Nothing: the key is a flag (`threads`).
    Nothing,
    /// Nothing, or `=<value>` (`alloc`, `alloc=512k`); the value's name for help.
    Maybe(&'static str),
    /// `=<value>`; the value's name for help.
    Value(&'static str),
}

/// The command a key goes with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GoesWith {
    /// Any command.
    Any,
    /// `start`.
    Start,
    /// `start`, or `stop` and `dump` to choose recordings (`event`).
    StartStopDump,
    /// `histogram` (`top`).
    Histogram,
    /// `histogram`, or `start` with allocations (`live`).
    HistogramOrStart,
    /// `inspect` (`class`, `limit`, `path`, `static`).
    Inspect,
}

/// How a set key shows in the canonical option string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shown {
    /// Bare: `threads`, `alloc`.
    Bare,
    /// `key=value` (the value unescaped).
    Value(String),
}

/// Stores a key's value (None: given bare) into the options; Err says what the key takes.
pub type Parse = fn(&mut Options, Option<&str>) -> Result<(), String>;
/// The key as the options hold it; None when not set.
pub type Show = fn(&Options) -> Option<Shown>;

/// One key of the grammar.
#[derive(Debug, Clone, Copy)]
pub struct Key {
    /// The key as written.
    pub name: &'static str,
    /// What it takes.
    pub takes: Takes,
    /// The command it goes with.
    pub goes_with: GoesWith,
    /// One line on what it does.
    pub help: &'static str,
    /// How it parses.
    pub parse: Parse,
    /// How it shows.
    pub show: Show,
}

impl Key {
    /// Whether `options` hold this key.
    pub fn is_set(&self, options: &Options) -> bool {
        (self.show)(options).is_some()
    }
}

/// `Shown` for a value that is there.
fn shown<T>(value: Option<T>, text: impl Fn(T) -> String) -> Option<Shown> {
    value.map(|v| Shown::Value(text(v)))
}

/// `Shown` for a flag.
fn bare(set: bool) -> Option<Shown> {
    set.then_some(Shown::Bare)
}

/// `Shown` for a key with an optional value (`alloc`, `alloc=512k`).
fn maybe<T>(value: Option<Option<T>>, text: impl Fn(T) -> String) -> Option<Shown> {
    value.map(|v| v.map_or(Shown::Bare, |v| Shown::Value(text(v))))
}

/// Stores a parsed value.
fn set<T>(slot: &mut Option<T>, value: T) -> Result<(), String> {
    *slot = Some(value);
    Ok(())
}

/// Sets a flag.
fn flag(slot: &mut bool) -> Result<(), String> {
    *slot = true;
    Ok(())
}

/// The value of a key that takes one (the parser passes one).
fn given(value: Option<&str>) -> &str {
    value.unwrap_or_default()
}

/// A threshold: a duration, or 0 for none (`io`, `nativelock`).
fn threshold(text: &str) -> Result<std::time::Duration, String> {
    match text {
        "0" => Ok(std::time::Duration::ZERO),
        text => duration(text).map_err(|_| "0 (every call) or a duration like 1ms".to_string()),
    }
}

/// A threshold as [`threshold`] reads it.
fn format_threshold(threshold: std::time::Duration) -> String {
    if threshold.is_zero() {
        "0".into()
    } else {
        format_duration(threshold)
    }
}

/// Every key, in the order help and the canonical string list them.
pub const KEYS: &[Key] = &[
    Key {
        name: "event",
        takes: Takes::Value("cpu|itimer|ctimer|wall|alloc|lock|gc|trace|nativemem|io|nativelock|perf"),
        goes_with: GoesWith::StartStopDump,
        help: "what start records (alloc, lock, wall, nativemem, io and nativelock add theirs); stop and dump: that event's recording",
        parse: |o, v| {
            let known = || format!("one of {}", Event::ALL.map(Event::name).join(", "));
            o.event = Some(Event::from_name(given(v)).ok_or_else(known)?);
            Ok(())
        },
        show: |o| shown(o.event, |e| e.name().to_string()),
    },
    Key {
        name: "interval",
        takes: Takes::Value("duration"),
        goes_with: GoesWith::Start,
        help: "sampling interval of the CPU event, or of wall alone (default 10ms; wall: 50ms)",
        parse: |o, v| set(&mut o.interval, duration(given(v))?),
        show: |o| shown(o.interval, format_duration),
    },
    Key {
        name: event::ALLOC.name,
        takes: Takes::Maybe("bytes"),
        goes_with: GoesWith::Start,
        help: "record allocations too, one sample every this many bytes on average (default 512k; suffixes k, m, g)",
        parse: |o, v| set(&mut o.alloc, v.map(bytes).transpose()?),
        show: |o| maybe(o.alloc, format_bytes),
    },
    Key {
        name: event::NATIVEMEM.name,
        takes: Takes::Maybe("bytes"),
        goes_with: GoesWith::Start,
        help: "record native memory allocations too (malloc & co. of the JVM's libraries and JNI code), one sample every this many bytes on average (default 512k; 0: every one)",
        parse: |o, v| {
            let every = |text: &str| match text {
                "0" => Ok(0),
                text => bytes(text)
                    .map_err(|_| "0 (every allocation) or a number of bytes like 512k".to_string()),
            };
            set(&mut o.nativemem, v.map(every).transpose()?)
        },
        show: |o| maybe(o.nativemem, format_bytes),
    },
    Key {
        name: event::IO.name,
        takes: Takes::Maybe("duration"),
        goes_with: GoesWith::Start,
        help: "record file and socket calls too (read, write, send, recv, connect, accept, poll, epoll_wait, select of the JVM's libraries and JNI code), those taking at least this long, weighted by time (default 1ms; 0: every one)",
        parse: |o, v| set(&mut o.io, v.map(threshold).transpose()?),
        show: |o| maybe(o.io, format_threshold),
    },
    Key {
        name: event::NATIVELOCK.name,
        takes: Takes::Maybe("duration"),
        goes_with: GoesWith::Start,
        help: "record waits on pthread locks too (pthread_mutex_lock, pthread_rwlock_rdlock/wrlock, pthread_cond_wait/timedwait of the JVM's libraries and JNI code), those taking at least this long, weighted by time (default 10us; 0: every contended one)",
        parse: |o, v| set(&mut o.nativelock, v.map(threshold).transpose()?),
        show: |o| maybe(o.nativelock, format_threshold),
    },
    Key {
        name: event::LOCK.name,
        takes: Takes::Maybe("duration"),
        goes_with: GoesWith::Start,
        help: "record contended locks too, waits of at least this long (default 10us)",
        parse: |o, v| set(&mut o.lock, v.map(duration).transpose()?),
        show: |o| maybe(o.lock, format_duration),
    },
    Key {
        name: event::WALL.name,
        takes: Takes::Maybe("duration"),
        goes_with: GoesWith::Start,
        help: "sample wall-clock time too, at this interval (default 50ms)",
        parse: |o, v| set(&mut o.wall, v.map(duration).transpose()?),
        show: |o| maybe(o.wall, format_duration),
    },
    Key {
        name: "loop",
        takes: Takes::Value("duration"),
        goes_with: GoesWith::Start,
        help: "continuous profiling: every this long, write the results to a new file= (%t time, %p pid, %n sequence) and start afresh",
        parse: |o, v| set(&mut o.rotate, duration(given(v))?),
        show: |o| shown(o.rotate, format_duration),
    },
    Key {
        name: "keep",
        takes: Takes::Value("count"),
        goes_with: GoesWith::Start,
        help: "with loop=: keep the newest this many files, delete older ones",
        parse: |o, v| set(&mut o.keep, count(given(v), "a count of files, at least 1")?),
        show: |o| shown(o.keep, |n| n.to_string()),
    },
    Key {
        name: "push",
        takes: Takes::Value("url"),
        goes_with: GoesWith::Start,
        help: "with loop=: send each period as JFR to this Grafana Pyroscope-compatible ingest endpoint (http[s]://[user:password@]host[:port][/path]), or as OTLP to an OTLP/HTTP receiver (otlp[s]://host[:port][/path])",
        parse: |o, v| set(&mut o.push, path(given(v))?),
        show: |o| shown(o.push.clone(), |s| s),
    },
    Key {
        name: "app",
        takes: Takes::Value("name"),
        goes_with: GoesWith::Start,
        help: "with push=: the application's name (default jtap)",
        parse: |o, v| set(&mut o.app, path(given(v))?),
        show: |o| shown(o.app.clone(), |s| s),
    },
    Key {
        name: "labels",
        takes: Takes::Value("k=v;k=v"),
        goes_with: GoesWith::Start,
        help: "with push=: labels of the pushed profiles",
        parse: |o, v| {
            let text = given(v);
            Options::label_pairs_of(text).ok_or("expected k=v;k=v")?;
            set(&mut o.labels, text.to_string())
        },
        show: |o| shown(o.labels.clone(), |s| s),
    },
    Key {
        name: "push-ca",
        takes: Takes::Value("file"),
        goes_with: GoesWith::Start,
        help: "with push=https://: also trust the CA certificates of this PEM file (a path in the JVM's filesystem)",
        parse: |o, v| set(&mut o.push_ca, path(given(v))?),
        show: |o| shown(o.push_ca.clone(), |s| s),
    },
    Key {
        name: "push-user",
        takes: Takes::Value("name"),
        goes_with: GoesWith::Start,
        help: "with push=: the user of HTTP basic auth; its password is push-token-file='s",
        parse: |o, v| set(&mut o.push_user, path(given(v))?),
        show: |o| shown(o.push_user.clone(), |s| s),
    },
    Key {
        name: "push-token-file",
        takes: Takes::Value("file"),
        goes_with: GoesWith::Start,
        help: "with push=: a file holding a bearer token (with push-user=: the basic auth password), read at each push",
        parse: |o, v| set(&mut o.push_token_file, path(given(v))?),
        show: |o| shown(o.push_token_file.clone(), |s| s),
    },
    Key {
        name: "push-spool",
        takes: Takes::Value("dir"),
        goes_with: GoesWith::Start,
        help: "with push=: periods the server did not take wait in this directory until it is back",
        parse: |o, v| set(&mut o.push_spool, path(given(v))?),
        show: |o| shown(o.push_spool.clone(), |s| s),
    },
    Key {
        name: "push-spool-max",
        takes: Takes::Value("size"),
        goes_with: GoesWith::Start,
        help: "with push-spool=: at most this many bytes wait (default 256m); beyond, the oldest periods are dropped",
        parse: |o, v| set(&mut o.push_spool_max, bytes(given(v))?),
        show: |o| shown(o.push_spool_max, format_bytes),
    },
    Key {
        name: "duration",
        takes: Takes::Value("duration"),
        goes_with: GoesWith::Start,
        help: "the agent ends the recording after this long and sends its results",
        parse: |o, v| set(&mut o.duration, duration(given(v))?),
        show: |o| shown(o.duration, format_duration),
    },
    Key {
        name: "threads",
        takes: Takes::Nothing,
        goes_with: GoesWith::Start,
        help: "each stack's root frame is its thread's name",
        parse: |o, _| flag(&mut o.threads),
        show: |o| bare(o.threads),
    },
    Key {
        name: "allthreads",
        takes: Takes::Nothing,
        goes_with: GoesWith::Start,
        help: "wall: sample every thread (GC, compiler, VM and native threads too), not only Java threads",
        parse: |o, _| flag(&mut o.allthreads),
        show: |o| bare(o.allthreads),
    },
    Key {
        name: "include",
        takes: Takes::Value("regex"),
        goes_with: GoesWith::Start,
        help: "keep only stacks with a frame matching this regular expression",
        parse: |o, v| set(&mut o.include, pattern(given(v))?),
        show: |o| shown(o.include.clone(), |s| s),
    },
    Key {
        name: "exclude",
        takes: Takes::Value("regex"),
        goes_with: GoesWith::Start,
        help: "drop stacks with a frame matching this regular expression",
        parse: |o, v| set(&mut o.exclude, pattern(given(v))?),
        show: |o| shown(o.exclude.clone(), |s| s),
    },
    Key {
        name: "jstackdepth",
        takes: Takes::Value("frames"),
        goes_with: GoesWith::Start,
        help: "deepest Java stack recorded (default 2048; alloc and lock: 64)",
        parse: |o, v| {
            let depth = given(v)
                .parse::<u32>()
                .ok()
                .filter(|d| (1..=MAX_JSTACKDEPTH).contains(d))
                .ok_or_else(|| format!("a number of frames from 1 to {MAX_JSTACKDEPTH}"))?;
            set(&mut o.jstackdepth, depth)
        },
        show: |o| shown(o.jstackdepth, |n| n.to_string()),
    },
    Key {
        name: "timeline",
        takes: Takes::Nothing,
        goes_with: GoesWith::Start,
        help: "keep each sample's time and thread, as JFR output needs (implied by file=*.jfr)",
        parse: |o, _| flag(&mut o.timeline),
        show: |o| bare(o.timeline),
    },
    Key {
        name: "by",
        takes: Takes::Value("ENTRY[=KEY] ..."),
        goes_with: GoesWith::Start,
        help: "label each sample with the request it works for: the entry method's call it is in, or a key read from its receiver or arguments (arg1, this.sql); entries separated by spaces",
        parse: |o, v| {
            o.by = crate::label::LabelBy::parse_list(given(v))?;
            Ok(())
        },
        show: |o| (!o.by.is_empty()).then(|| Shown::Value(crate::label::list_text(&o.by))),
    },
    Key {
        name: "byinner",
        takes: Takes::Nothing,
        goes_with: GoesWith::Start,
        help: "with by=: label calls nested in an entry by the inner entry, not the outermost",
        parse: |o, _| flag(&mut o.byinner),
        show: |o| bare(o.byinner),
    },
    Key {
        name: "alluser",
        takes: Takes::Nothing,
        goes_with: GoesWith::Start,
        help: "cpu: user-mode CPU time only, so stacks have no kernel frames (also where perf_event_paranoid forbids sampling the kernel)",
        parse: |o, _| flag(&mut o.alluser),
        show: |o| bare(o.alluser),
    },
    Key {
        name: "walker",
        takes: Takes::Value("vm|jvmti|asgct|check"),
        goes_with: GoesWith::Start,
        help: "Java stacks by jtap's own walk of HotSpot's frames (default), the JVM's own (GetStackTrace in alloc and lock, AsyncGetCallTrace in the sampling engines; jvmti and asgct are one choice), or both compared (differences in the agent's log)",
        parse: |o, v| {
            let choice = JavaStacks::named(given(v)).ok_or("vm, jvmti, asgct or check")?;
            set(&mut o.walker, choice)
        },
        show: |o| shown(o.walker, |w| w.name().to_string()),
    },
    Key {
        name: "cstack",
        takes: Takes::Value("dwarf|fp|no"),
        goes_with: GoesWith::Start,
        help: "native frames by DWARF unwinding of a copy of the stack (default), frame pointers only (cpu), or none",
        parse: |o, v| {
            let choice = NativeStacks::ALL
                .into_iter()
                .find(|c| c.name() == given(v))
                .ok_or("dwarf, fp or no")?;
            set(&mut o.cstack, choice)
        },
        show: |o| shown(o.cstack, |c| c.name().to_string()),
    },
    Key {
        name: "live",
        takes: Takes::Nothing,
        goes_with: GoesWith::HistogramOrStart,
        help: "histogram: only live objects (a full GC first); alloc: only sampled objects still alive at the end; nativemem: only blocks not freed",
        parse: |o, _| flag(&mut o.live),
        show: |o| bare(o.live),
    },
    Key {
        name: "sites",
        takes: Takes::Nothing,
        goes_with: GoesWith::Start,
        help: "alloc, alone: a SITES report (live and allocated bytes per allocation site)",
        parse: |o, _| flag(&mut o.sites),
        show: |o| bare(o.sites),
    },
    Key {
        name: "leaks",
        takes: Takes::Maybe("collections"),
        goes_with: GoesWith::Start,
        help: "alloc, with sites: rank sites by the sampled objects still alive that survived at least this many collections (default 2), with their ages",
        parse: |o, v| {
            let age = |text: &str| count(text, "a number of collections, at least 1");
            set(&mut o.leaks, v.map(age).transpose()?)
        },
        show: |o| maybe(o.leaks, |n| n.to_string()),
    },
    Key {
        name: "exact",
        takes: Takes::Nothing,
        goes_with: GoesWith::Start,
        help: "alloc: record every allocation instead of sampling (exact counts; slow)",
        parse: |o, _| flag(&mut o.exact),
        show: |o| bare(o.exact),
    },
    Key {
        name: "detach",
        takes: Takes::Nothing,
        goes_with: GoesWith::Start,
        help: "the recording belongs to no client and runs until stop or the JVM's exit",
        parse: |o, _| flag(&mut o.detach),
        show: |o| bare(o.detach),
    },
    Key {
        name: "trace",
        takes: Takes::Value("plan"),
        goes_with: GoesWith::Start,
        help: "event=trace: methods, captures and mode (see jtap_protocol::trace)",
        parse: |o, v| set(&mut o.trace, crate::trace::Plan::parse(given(v))?),
        show: |o| shown(o.trace.as_ref(), |plan| plan.to_string()),
    },
    Key {
        name: "perf",
        takes: Takes::Value("event"),
        goes_with: GoesWith::Start,
        help: "event=perf: the perf event counted: a software event (page-faults, context-switches, cpu-migrations, ...), a hardware counter (cycles, instructions, cache-misses, branch-misses, ...) or a tracepoint (sched:sched_switch); interval= is its period in events",
        parse: |o, v| {
            let name = given(v);
            let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ':');
            if name.is_empty() || !name.chars().all(plain) {
                return Err("a perf event name like page-faults or sched:sched_switch".into());
            }
            set(&mut o.perf, name.to_string())
        },
        show: |o| shown(o.perf.clone(), |s| s),
    },
    Key {
        name: "top",
        takes: Takes::Value("n"),
        goes_with: GoesWith::Histogram,
        help: "only the n largest classes by bytes",
        parse: |o, v| set(&mut o.top, count(given(v), "a positive number of classes")?),
        show: |o| shown(o.top, |n| n.to_string()),
    },
    Key {
        name: "class",
        takes: Takes::Value("name"),
        goes_with: GoesWith::Inspect,
        help: "inspect: the class, by its Java name (com.acme.Outer$Inner)",
        parse: |o, v| {
            let name = given(v);
            let part = |p: &str| !p.is_empty() && !p.contains(['/', ';', '[']);
            if !name.split('.').all(part) {
                return Err("a Java class name like com.acme.Outer$Inner".into());
            }
            set(&mut o.class, name.to_string())
        },
        show: |o| shown(o.class.clone(), |s| s),
    },
    Key {
        name: "limit",
        takes: Takes::Value("n"),
        goes_with: GoesWith::Inspect,
        help: "inspect: show at most n instances (default 5, at most 1000); all are counted",
        parse: |o, v| {
            let what = "a number of instances from 1 to 1000";
            let n = count(given(v), what)?;
            if n > MAX_INSPECT {
                return Err(format!("expected {what}"));
            }
            set(&mut o.limit, n)
        },
        show: |o| shown(o.limit, |n| n.to_string()),
    },
    Key {
        name: "path",
        takes: Takes::Value("a.b.c"),
        goes_with: GoesWith::Inspect,
        help: "inspect: only the value at this path of fields of each instance (at most 16 fields)",
        parse: |o, v| {
            let path = given(v);
            let steps: Vec<&str> = path.split('.').collect();
            if steps.len() > MAX_PATH || steps.iter().any(|s| s.is_empty()) {
                return Err("field names joined by dots, at most 16 (owner.name)".into());
            }
            set(&mut o.path, path.to_string())
        },
        show: |o| shown(o.path.clone(), |s| s),
    },
    Key {
        name: "static",
        takes: Takes::Value("name"),
        goes_with: GoesWith::Inspect,
        help: "inspect: this static field of the class instead of instances",
        parse: |o, v| {
            let name = given(v);
            if name.is_empty() || name.contains(['.', ';', '[', '/']) {
                return Err("a field name".into());
            }
            set(&mut o.static_field, name.to_string())
        },
        show: |o| shown(o.static_field.clone(), |s| s),
    },
    Key {
        name: "file",
        takes: Takes::Value("path"),
        goes_with: GoesWith::Any,
        help: "write the results to this file, inside the JVM's filesystem (format by extension)",
        parse: |o, v| set(&mut o.file, path(given(v))?),
        show: |o| shown(o.file.clone(), |s| s),
    },
    Key {
        name: "channel",
        takes: Takes::Value("path"),
        goes_with: GoesWith::Any,
        help: "control socket of the asking jtap client",
        parse: |o, v| {
            let socket = given(v);
            if !socket.starts_with('/') {
                return Err("an absolute path of a UNIX socket".into());
            }
            set(&mut o.channel, socket.to_string())
        },
        show: |o| shown(o.channel.clone(), |s| s),
    },
    Key {
        name: "log",
        takes: Takes::Value("path"),
        goes_with: GoesWith::Any,
        help: "append the agent's log to this file",
        parse: |o, v| set(&mut o.log, path(given(v))?),
        show: |o| shown(o.log.clone(), |s| s),
    },
    Key {
        name: "linger",
        takes: Takes::Value("duration"),
        goes_with: GoesWith::Any,
        help: "how long the sampling engines' code map, with its events and capabilities, outlives the last recording (default 60s)",
        parse: |o, v| set(&mut o.linger, duration(given(v))?),
        show: |o| shown(o.linger, format_duration),
    },
    Key {
        name: "client",
        takes: Takes::Value("version"),
        goes_with: GoesWith::Any,
        help: "the asking jtap's version",
        parse: |o, v| {
            let version = given(v);
            let ok = !version.is_empty()
                && version
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+' | '_'));
            if !ok {
                return Err("a version like 0.1.0".into());
            }
            set(&mut o.client, version.to_string())
        },
        show: |o| shown(o.client.clone(), |s| s),
    },
    Key {
        name: "rest",
        takes: Takes::Nothing,
        goes_with: GoesWith::Any,
        help: "the other options follow over the channel (longer than the attach argument)",
        parse: |o, _| flag(&mut o.rest),
        show: |o| bare(o.rest),
    },
    Key {
        name: "debug",
        takes: Takes::Nothing,
        goes_with: GoesWith::Any,
        help: "log to the JVM's stderr",
        parse: |o, _| flag(&mut o.debug),
        show: |o| bare(o.debug),
    },
];

/// The key called `name`.
pub fn key(name: &str) -> Option<&'static Key> {
    KEYS.iter().find(|k| k.name == name)
}

/// The help line of key `name` (for the CLI flags that set it); empty for an unknown key.
pub fn help_of(name: &str) -> &'static str {
    key(name).map_or("", |k| k.help)
}

/// Every action and key, for the message about an unknown one.
pub(super) fn known() -> String {
    let keys = KEYS.iter().map(|k| match k.takes {
        Takes::Nothing => k.name.to_string(),
        Takes::Maybe(_) => format!("{}[=]", k.name),
        Takes::Value(_) => format!("{}=", k.name),
    });
    super::Action::ALL
        .iter()
        .map(|a| a.name().to_string())
        .chain(keys)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The help text the `help` action returns, listing every action and key of [`KEYS`].
pub fn help_text() -> String {
    let mut text = String::from(
        "jtap agent options: comma-separated, e.g. start,event=cpu,alloc,lock=10us,file=/tmp/out.html\n\
         actions: start, stop, status, dump, version, help, histogram, inspect\n",
    );
    for key in KEYS {
        let item = match key.takes {
            Takes::Nothing => key.name.to_string(),
            Takes::Maybe(value) => format!("{}[=<{value}>]", key.name),
            Takes::Value(value) => format!("{}=<{value}>", key.name),
        };
        text.push_str(&format!("{item:<24} {}\n", key.help));
    }
    text.push_str(
        "durations: a number with ns, us, ms or s (no unit: ns); \
         write \\, for a comma and \\\\ for a backslash inside values",
    );
    text
}
