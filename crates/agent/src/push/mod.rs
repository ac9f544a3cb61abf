//! `push=`: each period of a looping recording goes, as JFR, to a Grafana Pyroscope-compatible
//! ingest endpoint (`POST /ingest?name=app{labels}&from=&until=&format=jfr`, the recording as
//! the `jfr` part of a multipart form; with request labels (`--by`), one POST per label of the
//! [`MOST_SERIES`] with the most samples, tagged `label=VALUE`, and one of the rest), or (`otlp[s]://`) as an OTLP profiles message to an
//! OTLP/HTTP receiver (`POST /v1development/profiles`, `service.name` the app, the labels
//! resource attributes), over `http://` or `https://` (rustls), with basic auth
//! (the URL's `user:password@`, or `push-user=` and `push-token-file=`) or a bearer token
//! (`push-token-file=`, read at each push so that it may rotate).
//!
//! A thread of its own renders and sends, TLS included: application threads and the agent's
//! own do not wait for a server. A period the server does not take waits in a backlog: a few periods in
//! memory, or with `push-spool=DIR` up to `push-spool-max=` bytes on disk (where they outlive
//! the JVM). While periods wait, the server is retried with growing pauses (0.5 s to 30 s,
//! jittered); when it takes one, the backlog goes oldest first. Past its bound the oldest
//! periods are dropped and counted: nothing waits without bound, nothing within it is lost.

#![deny(unsafe_code)]

mod endpoint;
mod http;
mod spool;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use jtap_profile::Profile;
use jtap_protocol::options::Options;

pub use endpoint::Endpoint;
use endpoint::{Auth, Payload};
use http::{Client, Refusal};
use spool::{Backlog, Item, Spool};

/// Periods handed to the push thread and not yet taken by it, at most; and without a spool,
/// the periods waiting in memory for the server, at most.
pub const QUEUED: usize = 4;
/// Request labels pushed as series of their own, at most (the heaviest): a label of many
/// values (a URI with ids in it) must not make a series per request.
pub const MOST_SERIES: usize = 16;
/// `push-spool-max=` unless given.
const SPOOL_MAX: u64 = 256 << 20;
/// The first pause after a refused period, doubled at each refusal up to [`LONGEST_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(500);
/// The longest pause between two tries of a server that is away.
const LONGEST_PAUSE: Duration = Duration::from_secs(30);

/// One period's recording.
pub struct Period {
    /// Start and end, Unix seconds.
    pub from: u64,
    /// See `from`.
    pub until: u64,
    /// What it holds, as [`Pusher::takes_jfr`] asks.
    pub contents: Contents,
}

/// A period's results.
pub enum Contents {
    /// Rendered as JFR, for a Pyroscope endpoint: one recording per request label pushed as
    /// a series of its own, and one (None) of the rest.
    Jfr(Vec<(Option<String>, Vec<u8>)>),
    /// Its profiles, one per event, for an OTLP endpoint: the push thread renders them.
    Profiles(Vec<Profile>),
}

/// A pusher: its queue and counters, shared with its thread.
pub struct Pusher {
    shared: Arc<Shared>,
}

struct Shared {
    client: Client,
    /// Where the backlog is, for status: `memory` or the spool directory.
    backlog_place: String,
    queue: Mutex<Queue>,
    wake: Condvar,
    sent: AtomicU64,
    dropped: AtomicU64,
    rejected: AtomicU64,
    failures: AtomicU64,
    waiting: AtomicU64,
    waiting_bytes: AtomicU64,
}

#[derive(Default)]
struct Queue {
    periods: VecDeque<Period>,
    closed: bool,
}

impl Pusher {
    /// Starts the sending thread of `options`' `push=` and its settings. Err (one line) on a
    /// bad URL, an unreadable CA or token file, or a spool directory that cannot be written.
    pub fn start(options: &Options) -> Result<Pusher, String> {
        let url = options.push.as_deref().ok_or("push= not given")?;
        let app = options.app.as_deref().unwrap_or("jtap");
        let endpoint = Endpoint::parse(url, app, &options.label_pairs())?;
        let auth = Auth::of(&endpoint, options)?;
        let client = Client::new(endpoint, auth, options.push_ca.as_deref())?;
        let backlog = match &options.push_spool {
            Some(dir) => Backlog::Disk(Spool::open(
                dir,
                options.push_spool_max.unwrap_or(SPOOL_MAX),
            )?),
            None => Backlog::Memory {
                periods: VecDeque::new(),
                max: QUEUED,
            },
        };
        let shared = Arc::new(Shared {
            client,
            backlog_place: options.push_spool.clone().unwrap_or("memory".into()),
            queue: Mutex::new(Queue::default()),
            wake: Condvar::new(),
            sent: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            waiting: AtomicU64::new(0),
            waiting_bytes: AtomicU64::new(0),
        });
        let worker = shared.clone();
        std::thread::Builder::new()
            .name("jtap-push".into())
            .spawn(move || {
                crate::thread::mark_own_thread();
                worker.run(backlog)
            })
            .map_err(|e| format!("cannot start the push thread: {e}"))?;
        Ok(Pusher { shared })
    }

    /// Whether periods come as JFR (a Pyroscope endpoint), else as profiles (OTLP).
    pub fn takes_jfr(&self) -> bool {
        self.shared.client.payload() == Payload::PyroscopeJfr
    }

    /// Hands a period to the push thread; the oldest one not yet taken is dropped when
    /// [`QUEUED`] already wait for it.
    pub fn push(&self, period: Period) {
        let mut queue = self.shared.lock();
        if queue.periods.len() >= QUEUED {
            queue.periods.pop_front();
            self.shared.dropped.fetch_add(1, Ordering::Relaxed);
        }
        queue.periods.push_back(period);
        self.shared.wake.notify_one();
    }

    /// `pushed N periods, dropped N, N failed attempts, N waiting (B bytes) in PLACE`, and
    /// `rejected N` when the server refused some for good.
    pub fn summary(&self) -> String {
        let shared = &self.shared;
        let count = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let mut text = format!(
            "pushed {} periods, dropped {}, {} failed attempts, {} waiting ({} bytes) in {}",
            count(&shared.sent),
            count(&shared.dropped),
            count(&shared.failures),
            count(&shared.waiting),
            count(&shared.waiting_bytes),
            shared.backlog_place,
        );
        if count(&shared.rejected) > 0 {
            text.push_str(&format!(", rejected {}", count(&shared.rejected)));
        }
        text
    }
}

impl Drop for Pusher {
    /// The thread tries once more what waits, then ends (a spool keeps what it could not send).
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.wake.notify_one();
    }
}

/// When to try the server again.
struct Retry {
    /// None: the server took the last period.
    next: Option<Instant>,
    pause: Duration,
}

impl Retry {
    fn refused(&mut self) {
        let jitter = 0.75 + fastrand::f64() / 2.0;
        self.next = Some(Instant::now() + self.pause.mul_f64(jitter));
        self.pause = (self.pause * 2).min(LONGEST_PAUSE);
    }

    fn taken(&mut self) {
        self.next = None;
        self.pause = FIRST_PAUSE;
    }

    fn is_due(&self) -> bool {
        self.next.is_some_and(|at| Instant::now() >= at)
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The push thread: sends new periods while the server takes them, else adds them to
    /// the backlog, which it sends oldest first whenever a retry is due.
    fn run(&self, mut backlog: Backlog) {
        let mut retry = Retry {
            // Periods left by an earlier recording in the spool: try them at once.
            next: (!backlog.is_empty()).then(Instant::now),
            pause: FIRST_PAUSE,
        };
        self.publish(&backlog);
        loop {
            let (incoming, closed) = self.wait_for_work(retry.next);
            for period in incoming {
                for (label, payload) in self.render(period.contents) {
                    let item = Item {
                        name: self.client.name_for(label.as_deref()),
                        from: period.from,
                        until: period.until,
                        payload,
                    };
                    // While periods wait, new ones wait behind them: the server gets them in
                    // order.
                    let waiting = retry.next.is_some() || !backlog.is_empty();
                    if waiting || !self.deliver(&item, &mut retry) {
                        self.keep(&mut backlog, item);
                    }
                }
            }
            if retry.is_due() || (closed && !backlog.is_empty()) {
                self.drain(&mut backlog, &mut retry);
            }
            self.publish(&backlog);
            if closed {
                if let Backlog::Memory { .. } = backlog {
                    let (left, _) = backlog.size();
                    self.dropped.fetch_add(left as u64, Ordering::Relaxed);
                }
                return;
            }
        }
    }

    /// A period's bodies, each with the request label of its series: JFR as it came,
    /// profiles as one OTLP message (where labels are sample attributes).
    fn render(&self, contents: Contents) -> Vec<(Option<String>, Vec<u8>)> {
        match contents {
            Contents::Jfr(series) => series,
            Contents::Profiles(profiles) => {
                let profiles: Vec<&Profile> = profiles.iter().collect();
                let message =
                    jtap_profile::export::otlp::render_for(&profiles, self.client.resource());
                vec![(None, message)]
            }
        }
    }

    /// The periods handed over since the last call, waiting for some until `deadline`; and
    /// whether the pusher is closed.
    fn wait_for_work(&self, deadline: Option<Instant>) -> (Vec<Period>, bool) {
        let mut queue = self.lock();
        while queue.periods.is_empty() && !queue.closed {
            match deadline {
                None => queue = self.wake.wait(queue).unwrap_or_else(|e| e.into_inner()),
                Some(at) => {
                    let Some(left) = at.checked_duration_since(Instant::now()) else {
                        break;
                    };
                    queue = self
                        .wake
                        .wait_timeout(queue, left)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
            }
        }
        (queue.periods.drain(..).collect(), queue.closed)
    }

    /// One try of one period: true when it is done with (taken, or rejected for good).
    fn deliver(&self, item: &Item, retry: &mut Retry) -> bool {
        match self.client.send(item) {
            Ok(()) => {
                self.sent.fetch_add(1, Ordering::Relaxed);
                retry.taken();
                true
            }
            Err(Refusal::Rejected(e)) => {
                log!("push to {}: {e}: period dropped", self.client.target());
                self.rejected.fetch_add(1, Ordering::Relaxed);
                true
            }
            Err(Refusal::Retry(e)) => {
                log!("push to {}: {e}", self.client.target());
                self.failures.fetch_add(1, Ordering::Relaxed);
                retry.refused();
                false
            }
        }
    }

    /// Sends the backlog oldest first until the server refuses one.
    fn drain(&self, backlog: &mut Backlog, retry: &mut Retry) {
        let mut unreadable = 0;
        while let Some(item) = backlog.oldest(&mut unreadable) {
            let done = self.deliver(&item, retry);
            backlog.settle(item, done);
            if !done {
                break;
            }
            self.publish(backlog);
        }
        self.dropped.fetch_add(unreadable, Ordering::Relaxed);
    }

    fn keep(&self, backlog: &mut Backlog, item: Item) {
        let dropped = backlog.add(item);
        self.dropped.fetch_add(dropped, Ordering::Relaxed);
    }

    /// The backlog's size, for status.
    fn publish(&self, backlog: &Backlog) {
        let (periods, bytes) = backlog.size();
        self.waiting.store(periods as u64, Ordering::Relaxed);
        self.waiting_bytes.store(bytes, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests;
