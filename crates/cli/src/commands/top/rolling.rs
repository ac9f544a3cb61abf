//! The rolling profile of `jtap top`: a recording of one event (cpu, wall, alloc, lock)
//! owned by this client, whose profile so far is fetched every second with `dump`; what each
//! second added is kept for a minute, for the hottest methods of the last seconds and the
//! flame graph of the last minute.
//!
//! The recording runs on a thread of its own, so that a slow agent (the first recording builds
//! its code map) never holds up the view. Ending it (`q`, another event) sends `Stop` on its
//! connection, as `jtap profile` does on Ctrl-C, and waits a bounded time for the agent's end.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use jtap_client::Conversation;
use jtap_profile::{
    write_atomically, ExportOptions, Format, Frame, Metadata, Profile, StackCounts,
};
use jtap_protocol::{wire, Action, Event, Frame as Message, Options};

/// Seconds kept: the flame graph's span.
pub const KEPT: usize = 60;
/// How long the agent gets to end the recording once asked.
const STOP_WAIT: Duration = Duration::from_secs(10);

/// A recording of one event and the profile it gave second by second.
pub struct Rolling {
    /// The event recorded.
    pub event: Event,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

struct Shared {
    stop: AtomicBool,
    window: Mutex<Window>,
}

/// What the recording gave so far: each second's stacks, over frames interned here.
#[derive(Default)]
pub struct Window {
    /// How the recording goes: starting, running, or why it ended.
    pub status: String,
    metadata: Option<Metadata>,
    frames: Vec<Frame>,
    ids: HashMap<Frame, u32>,
    seconds: VecDeque<HashMap<Vec<u32>, StackCounts>>,
    so_far: HashMap<Vec<u32>, StackCounts>,
}

/// A method's share of the last seconds.
pub struct MethodRow {
    /// The frame's name (`pkg.Class.method`, a native symbol).
    pub name: String,
    /// Weight with the method at the top of the stack.
    pub self_weight: u64,
    /// Weight with the method anywhere in the stack.
    pub total_weight: u64,
}

/// The hottest methods of a window and what they are measured in.
pub struct Hot {
    /// Every method seen, unsorted.
    pub methods: Vec<MethodRow>,
    /// The window's whole weight.
    pub total: u64,
    /// `samples`, `bytes`, `nanoseconds`.
    pub unit: String,
}

impl Rolling {
    /// Starts recording `event` in JVM `pid`, after `previous` (a recording being stopped)
    /// has ended.
    pub fn start(pid: u32, event: Event, timeout: Duration, previous: Option<Rolling>) -> Rolling {
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            window: Mutex::new(Window {
                status: format!("starting the {event} profile"),
                ..Window::default()
            }),
        });
        let previous = previous.and_then(Rolling::stop);
        let inner = shared.clone();
        let thread = std::thread::spawn(move || {
            if let Some(previous) = previous {
                let _ = previous.join();
            }
            let status = match record(pid, event, timeout, &inner) {
                Ok(status) => status,
                Err(e) => format!("{event} profile: {}", format!("{e:#}").replace('\n', " ")),
            };
            inner.window().status = status;
        });
        Rolling {
            event,
            shared,
            thread: Some(thread),
        }
    }

    /// The recording's window, locked.
    pub fn window(&self) -> MutexGuard<'_, Window> {
        self.shared.window()
    }

    /// Asks the recording to end; its thread, to join, if it is still running.
    pub fn stop(mut self) -> Option<JoinHandle<()>> {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.thread.take()
    }

    /// Ends the recording and waits (a bounded time) until the agent has ended it.
    pub fn finish(self) {
        if let Some(thread) = self.stop() {
            let deadline = Instant::now() + STOP_WAIT + Duration::from_secs(1);
            while !thread.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

impl Shared {
    fn window(&self) -> MutexGuard<'_, Window> {
        self.window.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Runs the recording until asked to stop; returns what the status line says then.
fn record(pid: u32, event: Event, timeout: Duration, shared: &Shared) -> anyhow::Result<String> {
    let options = Options {
        event: Some(event),
        ..Options::default().with_action(Action::Start)
    };
    let conversation = Conversation::open(pid, &options, timeout)?;
    let stopper = conversation.stopper()?;
    let started = conversation.engine_start();
    let reader = std::thread::spawn(move || {
        conversation.finish(&mut io::sink(), Some(&mut |_: Message| Ok(())))
    });
    let mut next = Instant::now() + Duration::from_secs(1);
    while !shared.stop.load(Ordering::SeqCst) && !reader.is_finished() {
        std::thread::sleep(Duration::from_millis(50));
        if Instant::now() < next || started.get().is_none() {
            continue;
        }
        next += Duration::from_secs(1);
        match dump(pid, event, timeout) {
            Ok(profile) => shared.window().add(profile, event),
            Err(e) => shared.window().status = format!("{event} profile: {e:#}"),
        }
    }
    if reader.is_finished() {
        return match reader.join() {
            Ok(Ok(ended)) => Ok(format!("the {event} profile ended: {ended}")),
            Ok(Err(e)) => Err(e),
            Err(_) => Ok(format!("the {event} profile's reader failed")),
        };
    }
    let _ = stopper.stop();
    let deadline = Instant::now() + STOP_WAIT;
    while !reader.is_finished() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(format!("the {event} profile stopped"))
}

/// The recording's profile so far, by method (lines merged).
fn dump(pid: u32, event: Event, timeout: Duration) -> anyhow::Result<Profile> {
    let options = Options {
        event: Some(event),
        ..Options::default().with_action(Action::Dump)
    };
    let mut received = None;
    let mut sink = |message: Message| {
        if let Message::Profile(bytes) = message {
            received = Some(bytes);
        }
        Ok(())
    };
    jtap_client::run_with(pid, &options, timeout, &mut io::sink(), Some(&mut sink))?;
    let bytes = received.ok_or_else(|| anyhow::anyhow!("the agent sent no profile"))?;
    let profile = wire::decode_profile(&bytes).map_err(anyhow::Error::msg)?;
    Ok(profile.labelled(false))
}

impl Window {
    /// Keeps what `profile` (the recording so far) added since the previous one.
    fn add(&mut self, profile: Profile, event: Event) {
        let mut second = HashMap::new();
        for (stack, counts) in profile.stacks() {
            let ids: Vec<u32> = stack
                .iter()
                .map(|&id| self.intern(profile.frame(id)))
                .collect();
            let before = self.so_far.insert(ids.clone(), counts).unwrap_or_default();
            let added = StackCounts {
                samples: counts.samples.saturating_sub(before.samples),
                weight: counts.weight.saturating_sub(before.weight),
                events: counts.events.saturating_sub(before.events),
            };
            if added != StackCounts::default() {
                second.insert(ids, added);
            }
        }
        if self.seconds.len() == KEPT {
            self.seconds.pop_front();
        }
        self.seconds.push_back(second);
        self.status = match profile.metadata.engine.as_str() {
            engine if engine == event.name() => format!("{event} profile"),
            engine => format!("{event} profile ({engine} engine)"),
        };
        self.metadata = Some(profile.metadata);
    }

    fn intern(&mut self, frame: &Frame) -> u32 {
        if let Some(&id) = self.ids.get(frame) {
            return id;
        }
        let id = self.frames.len() as u32;
        self.frames.push(frame.clone());
        self.ids.insert(frame.clone(), id);
        id
    }

    /// Seconds of profile kept so far.
    pub fn seconds(&self) -> usize {
        self.seconds.len()
    }

    /// Every method's self and total weight over the last `seconds` seconds.
    pub fn hot(&self, seconds: usize) -> Option<Hot> {
        let metadata = self.metadata.as_ref()?;
        let counter = metadata.default_counter();
        let mut by_frame: HashMap<u32, (u64, u64)> = HashMap::new();
        let mut total = 0;
        let mut seen = Vec::new();
        for second in self.seconds.iter().rev().take(seconds) {
            for (stack, counts) in second {
                let value = counts.get(counter);
                total += value;
                if let Some(&leaf) = stack.last() {
                    by_frame.entry(leaf).or_default().0 += value;
                }
                seen.clear();
                for &id in stack {
                    if !seen.contains(&id) {
                        seen.push(id);
                        by_frame.entry(id).or_default().1 += value;
                    }
                }
            }
        }
        let methods = by_frame
            .into_iter()
            .map(|(id, (self_weight, total_weight))| MethodRow {
                name: self.frames[id as usize].name.clone(),
                self_weight,
                total_weight,
            })
            .collect();
        Some(Hot {
            methods,
            total,
            unit: metadata.unit(counter).to_string(),
        })
    }

    /// Writes the kept seconds as an HTML flame graph; returns the samples it holds.
    pub fn write_flame_graph(&self, path: &Path) -> anyhow::Result<u64> {
        let Some(metadata) = &self.metadata else {
            anyhow::bail!("no profile yet");
        };
        let mut profile = Profile::new(Metadata {
            duration_ns: self.seconds.len() as u64 * 1_000_000_000,
            ..metadata.clone()
        });
        let mut frames = Vec::new();
        for second in &self.seconds {
            for (stack, &counts) in second {
                frames.clear();
                frames.extend(stack.iter().map(|&id| self.frames[id as usize].clone()));
                profile.add_frame_counts(&frames, counts);
            }
        }
        let bytes = Format::Html.render(&profile, &ExportOptions::default());
        write_atomically(path, &bytes)?;
        Ok(profile.total_samples())
    }
}
