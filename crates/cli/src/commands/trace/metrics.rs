//! `jtap monitor --serve [HOST]:PORT`: the monitored methods' calls as Prometheus metrics
//! (text exposition format 0.0.4) at `http://HOST:PORT/metrics`: a latency histogram
//! (`jtap_method_duration_seconds`, buckets from 1 µs to 10 s) and a counter of the calls
//! that threw (`jtap_method_errors_total`) per method (and with `--by`, per method and
//! request label: a `label` label), cumulative since the session began and updated at each
//! interval (`-i`) the agent reports.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use jtap_protocol::records::{MonitorInterval, LATENCY_BOUNDS_NS};

/// The totals served, by series: its labels as the exposition writes them,
/// `method="...",label="..."`.
#[derive(Default)]
pub struct Metrics {
    methods: Mutex<BTreeMap<String, Totals>>,
}

/// One series' calls since the session began.
#[derive(Default)]
struct Totals {
    calls: u64,
    errors: u64,
    sum_ns: u128,
    buckets: [u64; LATENCY_BOUNDS_NS.len()],
}

impl Metrics {
    /// Listens on `address` (`:9400` for every interface, `127.0.0.1:9400`, `[::1]:9400`)
    /// and answers scrapes on a thread of its own; returns the address it listens on.
    pub fn serve(address: &str) -> anyhow::Result<(Arc<Metrics>, SocketAddr)> {
        let bind = match address.strip_prefix(':') {
            Some(port) => format!("0.0.0.0:{port}"),
            None => address.to_string(),
        };
        let listener = TcpListener::bind(&bind)
            .with_context(|| format!("--serve {address}: cannot listen on {bind}"))?;
        let local = listener.local_addr()?;
        let metrics = Arc::new(Metrics::default());
        let served = metrics.clone();
        std::thread::Builder::new()
            .name("jtap-metrics".into())
            .spawn(move || {
                for stream in listener.incoming().flatten() {
                    // A client that fails mid-request only loses its own answer.
                    let _ = served.answer(stream);
                }
            })
            .context("cannot start the metrics thread")?;
        Ok((metrics, local))
    }

    /// Adds an interval's calls to the totals.
    pub fn add(&self, interval: &MonitorInterval) {
        let mut methods = self.methods.lock().unwrap_or_else(|e| e.into_inner());
        for row in &interval.rows {
            let mut series = format!("method=\"{}\"", escape(&row.method));
            if let Some(label) = &row.label {
                let _ = write!(series, ",label=\"{}\"", escape(label));
            }
            let totals = methods.entry(series).or_default();
            let stats = &row.stats;
            totals.calls += stats.calls;
            totals.errors += stats.errors;
            totals.sum_ns += u128::from(stats.mean_ns) * u128::from(stats.calls);
            for (total, n) in totals.buckets.iter_mut().zip(stats.buckets) {
                *total += n;
            }
        }
    }

    /// The exposition text.
    fn render(&self) -> String {
        let methods = self.methods.lock().unwrap_or_else(|e| e.into_inner());
        let mut text = String::from(
            "# HELP jtap_method_duration_seconds Duration of the monitored method's calls.\n\
             # TYPE jtap_method_duration_seconds histogram\n",
        );
        for (series, totals) in methods.iter() {
            let mut cumulative = 0;
            for (bound, n) in LATENCY_BOUNDS_NS.iter().zip(totals.buckets) {
                cumulative += n;
                let le = *bound as f64 / 1e9;
                let _ = writeln!(
                    text,
                    "jtap_method_duration_seconds_bucket{{{series},le=\"{le}\"}} {cumulative}"
                );
            }
            let _ = writeln!(
                text,
                "jtap_method_duration_seconds_bucket{{{series},le=\"+Inf\"}} {}\n\
                 jtap_method_duration_seconds_sum{{{series}}} {}\n\
                 jtap_method_duration_seconds_count{{{series}}} {}",
                totals.calls.max(cumulative),
                totals.sum_ns as f64 / 1e9,
                totals.calls.max(cumulative)
            );
        }
        text.push_str(
            "# HELP jtap_method_errors_total Calls of the monitored method that threw.\n\
             # TYPE jtap_method_errors_total counter\n",
        );
        for (series, totals) in methods.iter() {
            let _ = writeln!(
                text,
                "jtap_method_errors_total{{{series}}} {}",
                totals.errors
            );
        }
        text
    }

    /// Answers one request: `GET /metrics`, or 404.
    fn answer(&self, mut stream: TcpStream) -> std::io::Result<()> {
        stream.set_read_timeout(Some(Duration::from_secs(5)))?;
        let mut request = Vec::new();
        let mut buffer = [0u8; 1024];
        while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < 16 * 1024 {
            let n = stream.read(&mut buffer)?;
            if n == 0 {
                break;
            }
            request.extend_from_slice(&buffer[..n]);
        }
        let line = String::from_utf8_lossy(&request);
        let mut words = line.split_whitespace();
        let (status, kind, body) = match (words.next(), words.next()) {
            (Some("GET"), Some(path)) if path.split('?').next() == Some("/metrics") => (
                "200 OK",
                "text/plain; version=0.0.4; charset=utf-8",
                self.render(),
            ),
            _ => (
                "404 Not Found",
                "text/plain; charset=utf-8",
                "jtap monitor serves GET /metrics\n".to_string(),
            ),
        };
        write!(
            stream,
            "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )?;
        stream.flush()
    }
}

/// A label value escaped as the exposition format wants: backslash, quote and newline.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use jtap_protocol::records::{CallStats, MethodStats};

    fn interval(calls: u64, bucket: usize) -> MonitorInterval {
        labelled(calls, bucket, None)
    }

    fn labelled(calls: u64, bucket: usize, label: Option<&str>) -> MonitorInterval {
        let mut buckets = [0; LATENCY_BOUNDS_NS.len()];
        buckets[bucket] = calls;
        MonitorInterval {
            time_ns: 0,
            interval_ns: 1_000_000_000,
            rows: vec![MethodStats {
                method: "app.Shop.buy(\"x\")".into(),
                label: label.map(Into::into),
                stats: CallStats {
                    calls,
                    errors: 1,
                    mean_ns: 2_000_000,
                    buckets,
                    ..CallStats::default()
                },
            }],
        }
    }

    #[test]
    fn intervals_add_up_to_cumulative_histograms() {
        let metrics = Metrics::default();
        metrics.add(&interval(3, 10)); // within 2.5 ms
        metrics.add(&interval(2, 0)); // within 1 µs
        let text = metrics.render();
        let method = r#"method="app.Shop.buy(\"x\")""#;
        for line in [
            format!("jtap_method_duration_seconds_bucket{{{method},le=\"0.000001\"}} 2"),
            format!("jtap_method_duration_seconds_bucket{{{method},le=\"0.001\"}} 2"),
            format!("jtap_method_duration_seconds_bucket{{{method},le=\"0.0025\"}} 5"),
            format!("jtap_method_duration_seconds_bucket{{{method},le=\"10\"}} 5"),
            format!("jtap_method_duration_seconds_bucket{{{method},le=\"+Inf\"}} 5"),
            format!("jtap_method_duration_seconds_sum{{{method}}} 0.01"),
            format!("jtap_method_duration_seconds_count{{{method}}} 5"),
            format!("jtap_method_errors_total{{{method}}} 2"),
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in\n{text}");
        }
    }

    #[test]
    fn request_labels_make_series_of_their_own() {
        let metrics = Metrics::default();
        metrics.add(&labelled(3, 10, Some("/a\"b")));
        metrics.add(&labelled(2, 10, Some("/c")));
        metrics.add(&interval(1, 10));
        let text = metrics.render();
        let method = r#"method="app.Shop.buy(\"x\")""#;
        for line in [
            format!("jtap_method_duration_seconds_count{{{method},label=\"/a\\\"b\"}} 3"),
            format!("jtap_method_duration_seconds_count{{{method},label=\"/c\"}} 2"),
            format!("jtap_method_duration_seconds_count{{{method}}} 1"),
            format!("jtap_method_errors_total{{{method},label=\"/c\"}} 1"),
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in\n{text}");
        }
    }

    #[test]
    fn scrapes_get_the_metrics_and_other_paths_404() {
        let (metrics, address) = Metrics::serve("127.0.0.1:0").unwrap();
        metrics.add(&interval(1, 3));
        let get = |path: &str| {
            let mut stream = TcpStream::connect(address).unwrap();
            write!(stream, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
            let mut reply = String::new();
            stream.read_to_string(&mut reply).unwrap();
            reply
        };
        let reply = get("/metrics");
        assert!(reply.starts_with("HTTP/1.1 200 OK\r\n"), "{reply}");
        assert!(
            reply.contains("Content-Type: text/plain; version=0.0.4"),
            "{reply}"
        );
        assert!(
            reply.contains("jtap_method_duration_seconds_count{"),
            "{reply}"
        );
        assert!(get("/").starts_with("HTTP/1.1 404"));
        let port = address.port();
        let error = Metrics::serve(&format!("127.0.0.1:{port}")).err().unwrap();
        assert!(format!("{error:#}").contains("cannot listen"), "{error:#}");
    }
}
