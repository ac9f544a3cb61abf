//! The agent's log: off by default; `debug` sends it to the JVM's stderr, `log=<file>` appends
//! it to a file. Never the JVM's stdout, which belongs to the workload.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::sync::Mutex;

use jtap_protocol::Options;

enum Sink {
    Stderr,
    File(File),
}

static SINK: Mutex<Option<Sink>> = Mutex::new(None);

/// Points the log where `options` say; options without `debug` or `log=` leave it as it is.
pub fn configure(options: &Options) {
    let sink = if let Some(path) = &options.log {
        match OpenOptions::new().create(true).append(true).open(path) {
            Ok(file) => Sink::File(file),
            Err(_) => return,
        }
    } else if options.debug {
        Sink::Stderr
    } else {
        return;
    };
    *SINK.lock().unwrap_or_else(|e| e.into_inner()) = Some(sink);
}

/// Writes one line to the log, if there is one, with the process and the time of day (UTC,
/// to the millisecond: how long things took shows between lines).
pub fn write(args: fmt::Arguments<'_>) {
    let mut sink = SINK.lock().unwrap_or_else(|e| e.into_inner());
    if sink.is_none() {
        return;
    }
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() % 86_400_000);
    let line = format!(
        "[jtap-agent {} {:02}:{:02}:{:02}.{:03}] {args}\n",
        std::process::id(),
        ms / 3_600_000,
        ms / 60_000 % 60,
        ms / 1000 % 60,
        ms % 1000
    );
    let _ = match sink.as_mut() {
        Some(Sink::Stderr) => std::io::stderr().write_all(line.as_bytes()),
        Some(Sink::File(file)) => file.write_all(line.as_bytes()),
        None => Ok(()),
    };
}

/// Logs a formatted line (see [`write`]).
macro_rules! log {
    ($($arg:tt)*) => { $crate::log::write(format_args!($($arg)*)) };
}

/// Routes panic messages of this library to the log instead of the JVM's stderr.
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        write(format_args!("internal error (caught): {info}"))
    }));
}
