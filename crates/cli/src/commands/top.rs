//! `jtap top <pid>`: a refreshed view of a JVM. On a terminal, a live view ([`live`]): the
//! hottest methods of a rolling profile (its agent recording, [`rolling`]), threads by CPU
//! with their states, heap and pools, GC, safepoints and compilations, with keys to sort,
//! pause, switch the event, open a thread's stack and write a flame graph ([`keys`],
//! drawn by [`view`]). Otherwise each refresh is a block of lines without the agent
//! ([`plain`]). Both read threads and counters the same way ([`collect`]).

mod collect;
mod keys;
mod live;
mod plain;
mod rolling;
mod view;

use std::io::{self, IsTerminal};
use std::path::PathBuf;
use std::time::Duration;

use jtap_protocol::Event;

use crate::{exit, local_time, units};

/// The command line of `jtap top`.
#[derive(clap::Args, Debug, Clone)]
pub struct TopArgs {
    /// Pid of the target JVM
    pub pid: u32,
    /// Threads to show, busiest first (the live view shows as many as fit)
    #[arg(short = 'n', long = "threads", default_value_t = 10)]
    pub threads: usize,
    /// Time between refreshes (e.g. 1s, 500ms)
    #[arg(short = 'i', long = "interval", default_value = "1s", value_parser = units::parse_duration)]
    pub interval: Duration,
    /// Stop after this many refreshes (default: until q, Ctrl-C or the JVM's exit)
    #[arg(long)]
    pub iterations: Option<u64>,
    /// How often to take a thread dump for Java names and states (a brief safepoint each)
    #[arg(long, default_value = "10s", value_parser = units::parse_duration)]
    pub dump_every: Duration,
    /// Live view: the event profiled at the start (cpu, wall, alloc, lock; key e switches)
    #[arg(short = 'e', long = "event", default_value = "cpu", value_parser = parse_event)]
    pub event: Event,
    /// Live view: the hottest methods of this many last seconds (1 to 60)
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=60))]
    pub window: u64,
    /// Live view: where key w writes the last minute's flame graph
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
}

/// The events the live view profiles, in the order key e goes through them.
pub const EVENTS: [Event; 4] = [Event::Cpu, Event::Wall, Event::Alloc, Event::Lock];

fn parse_event(text: &str) -> Result<Event, String> {
    EVENTS
        .into_iter()
        .find(|e| e.name() == text)
        .ok_or_else(|| format!("top profiles one of cpu, wall, alloc, lock, not {text:?}"))
}

/// The live view on a terminal, lines otherwise; until `--iterations`, q, Ctrl-C or the
/// JVM's exit.
pub fn run(args: &TopArgs, timeout: Duration) -> anyhow::Result<i32> {
    if args.interval.is_zero() {
        return Err(exit::usage("-i must be longer than 0"));
    }
    let mut sampler = collect::Sampler::new(args.pid, args.dump_every, timeout)?;
    if io::stdout().is_terminal() {
        live::run(args, &mut sampler, timeout)
    } else {
        plain::run(args, &mut sampler)
    }
}

/// The local time of day, `hh:mm:ss`.
fn clock_time() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let local = (now + local_time::utc_offset_seconds(now)).rem_euclid(86_400);
    format!(
        "{:02}:{:02}:{:02}",
        local / 3600,
        local % 3600 / 60,
        local % 60
    )
}
