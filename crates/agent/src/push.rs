//! `push=`: each period of a looping recording goes, as JFR, to a Grafana Pyroscope-compatible
//! ingest endpoint (`POST /ingest?name=app{labels}&from=&until=&format=jfr`, the recording as
//! the `jfr` part of a multipart form). A thread of its own sends; a server that is down costs
//! the application nothing: each period is tried three times with growing pauses, at most
//! [`QUEUED`] periods wait, and older ones are dropped (and counted) rather than kept without
//! bound.
//!
//! The HTTP/1.1 client is hand-written: one POST over a TCP stream is all it does, and an
//! HTTP crate would bring TLS and connection pools into every JVM the agent is loaded in.
//! Only `http://` endpoints; a TLS-terminating proxy serves `https`.

#![deny(unsafe_code)]

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// Periods waiting to be sent at most.
pub const QUEUED: usize = 4;
/// Attempts per period.
const ATTEMPTS: u32 = 3;
/// How long one attempt may take to connect, write and read the reply.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Where periods go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    host: String,
    port: u16,
    /// Path of the ingest endpoint, `/ingest` unless the URL says otherwise.
    path: String,
    /// `app{k=v,...}`, URL-encoded.
    name: String,
}

impl Endpoint {
    /// From `push=http://host:port[/path]`, the application's name and `k=v` labels.
    pub fn parse(url: &str, app: &str, labels: &[(String, String)]) -> Result<Endpoint, String> {
        let rest = url.strip_prefix("http://").ok_or_else(|| {
            format!("push={url}: only http:// endpoints (put a TLS proxy in front for https)")
        })?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/ingest"),
        };
        let path = if path == "/" { "/ingest" } else { path };
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, port)) => (
                host,
                port.parse()
                    .map_err(|_| format!("push={url}: bad port {port:?}"))?,
            ),
            None => (authority, 80),
        };
        if host.is_empty() {
            return Err(format!("push={url}: no host"));
        }
        let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        Ok(Endpoint {
            host: host.to_string(),
            port,
            path: path.to_string(),
            name: url_encode(&format!("{app}{{{}}}", labels.join(","))),
        })
    }
}

/// One period's recording.
pub struct Period {
    /// Start and end, Unix seconds.
    pub from: u64,
    /// See `from`.
    pub until: u64,
    /// The JFR recording.
    pub jfr: Vec<u8>,
}

/// A pusher: its queue and counters, shared with its thread.
pub struct Pusher {
    shared: Arc<Shared>,
}

struct Shared {
    endpoint: Endpoint,
    queue: Mutex<Queue>,
    wake: Condvar,
    sent: AtomicU64,
    dropped: AtomicU64,
    failures: AtomicU64,
}

#[derive(Default)]
struct Queue {
    periods: VecDeque<Period>,
    closed: bool,
}

impl Pusher {
    /// Starts the sending thread.
    pub fn start(endpoint: Endpoint) -> Result<Pusher, String> {
        let shared = Arc::new(Shared {
            endpoint,
            queue: Mutex::new(Queue::default()),
            wake: Condvar::new(),
            sent: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            failures: AtomicU64::new(0),
        });
        let worker = shared.clone();
        std::thread::Builder::new()
            .name("jtap-push".into())
            .spawn(move || {
                crate::thread::mark_own_thread();
                worker.run()
            })
            .map_err(|e| format!("cannot start the push thread: {e}"))?;
        Ok(Pusher { shared })
    }

    /// Queues a period; the oldest waiting one is dropped when [`QUEUED`] already wait.
    pub fn push(&self, period: Period) {
        let mut queue = self.shared.lock();
        if queue.periods.len() >= QUEUED {
            queue.periods.pop_front();
            self.shared.dropped.fetch_add(1, Ordering::Relaxed);
        }
        queue.periods.push_back(period);
        self.shared.wake.notify_one();
    }

    /// `sent N, dropped N, failed attempts N`.
    pub fn summary(&self) -> String {
        format!(
            "pushed {} periods, dropped {}, {} failed attempts",
            self.shared.sent.load(Ordering::Relaxed),
            self.shared.dropped.load(Ordering::Relaxed),
            self.shared.failures.load(Ordering::Relaxed)
        )
    }
}

impl Drop for Pusher {
    /// The thread sends what waits, then ends.
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.wake.notify_one();
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn run(&self) {
        loop {
            let period = {
                let mut queue = self.lock();
                loop {
                    if let Some(period) = queue.periods.pop_front() {
                        break period;
                    }
                    if queue.closed {
                        return;
                    }
                    queue = self.wake.wait(queue).unwrap_or_else(|e| e.into_inner());
                }
            };
            let mut pause = Duration::from_millis(500);
            for attempt in 1..=ATTEMPTS {
                match send(&self.endpoint, &period) {
                    Ok(()) => {
                        self.sent.fetch_add(1, Ordering::Relaxed);
                        break;
                    }
                    Err(e) => {
                        self.failures.fetch_add(1, Ordering::Relaxed);
                        log!("push to {}:{}: {e}", self.endpoint.host, self.endpoint.port);
                        if attempt == ATTEMPTS {
                            self.dropped.fetch_add(1, Ordering::Relaxed);
                        } else {
                            std::thread::sleep(pause);
                            pause *= 4;
                        }
                    }
                }
            }
        }
    }
}

/// One POST; Ok on a 2xx reply.
fn send(endpoint: &Endpoint, period: &Period) -> Result<(), String> {
    let address = (endpoint.host.as_str(), endpoint.port)
        .to_socket_addrs()
        .map_err(|e| format!("resolving: {e}"))?
        .next()
        .ok_or("resolving: no address")?;
    let mut stream =
        TcpStream::connect_timeout(&address, TIMEOUT).map_err(|e| format!("connecting: {e}"))?;
    stream
        .set_read_timeout(Some(TIMEOUT))
        .map_err(|e| e.to_string())?;
    stream
        .set_write_timeout(Some(TIMEOUT))
        .map_err(|e| e.to_string())?;
    let boundary = "jtap-period-boundary-7f3a";
    let mut body = Vec::with_capacity(period.jfr.len() + 256);
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"jfr\"; filename=\"jfr\"\r\nContent-Type: application/octet-stream\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(&period.jfr);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let head = format!(
        "POST {}?name={}&from={}&until={}&format=jfr&spyName=jtap HTTP/1.1\r\nHost: {}:{}\r\nUser-Agent: jtap/{}\r\nContent-Type: multipart/form-data; boundary={boundary}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        endpoint.path,
        endpoint.name,
        period.from,
        period.until,
        endpoint.host,
        endpoint.port,
        jtap_protocol::VERSION,
        body.len()
    );
    stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.write_all(&body))
        .map_err(|e| format!("sending: {e}"))?;
    let mut reply = [0u8; 64];
    let n = stream
        .read(&mut reply)
        .map_err(|e| format!("reading the reply: {e}"))?;
    let status = std::str::from_utf8(&reply[..n])
        .ok()
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|code| code.parse::<u16>().ok())
        .ok_or("no HTTP status in the reply")?;
    match status {
        200..=299 => Ok(()),
        other => Err(format!("HTTP {other}")),
    }
}

/// Percent-encodes everything but unreserved characters.
fn url_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn endpoints_parse_with_name_and_labels() {
        let labels = [("env".to_string(), "prod".to_string())];
        let e = Endpoint::parse("http://pyro:4040", "shop", &labels).unwrap();
        assert_eq!(
            (e.host.as_str(), e.port, e.path.as_str()),
            ("pyro", 4040, "/ingest")
        );
        assert_eq!(e.name, "shop%7Benv%3Dprod%7D");
        assert!(Endpoint::parse("https://pyro", "a", &[])
            .unwrap_err()
            .contains("http://"));
        assert!(Endpoint::parse("http://pyro:x", "a", &[]).is_err());
    }

    #[test]
    fn a_server_that_is_down_costs_a_bounded_queue() {
        // A port nothing listens on: every attempt fails at once.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let pusher =
            Pusher::start(Endpoint::parse(&format!("http://127.0.0.1:{port}"), "a", &[]).unwrap())
                .unwrap();
        for _ in 0..10 {
            pusher.push(Period {
                from: 1,
                until: 2,
                jfr: vec![0; 1000],
            });
        }
        assert!(pusher.shared.lock().periods.len() <= QUEUED);
        assert!(pusher.shared.dropped.load(Ordering::Relaxed) >= 10 - QUEUED as u64 - 1);
    }
}
