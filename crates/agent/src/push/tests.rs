//! The push thread against local servers: one that is down, one that goes away and comes
//! back, one behind TLS with a CA of the test's own.

use super::*;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::AtomicBool;

fn period(from: u64) -> Period {
    Period {
        from,
        until: from + 1,
        contents: Contents::Jfr(vec![(None, vec![0; 1000])]),
    }
}

fn options(url: &str) -> Options {
    Options {
        push: Some(url.to_string()),
        ..Options::default()
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Reads one request; returns its head (request line and headers).
fn read_request(stream: &mut impl Read) -> String {
    let mut request = Vec::new();
    let mut buffer = [0u8; 8192];
    let mut wanted = usize::MAX;
    while request.len() < wanted {
        let n = stream.read(&mut buffer).unwrap_or(0);
        if n == 0 {
            break;
        }
        request.extend_from_slice(&buffer[..n]);
        if let Some(end) = request.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&request[..end]).to_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length: "))
                .and_then(|n| n.trim().parse::<usize>().ok())
                .unwrap_or(0);
            wanted = end + 4 + length;
        }
    }
    let end = request.windows(4).position(|w| w == b"\r\n\r\n");
    String::from_utf8_lossy(&request[..end.unwrap_or(request.len())]).into_owned()
}

/// A plain HTTP ingest server on `port` until `stop` is set: the `from=` of each request.
fn serve(port: u16, stop: Arc<AtomicBool>, got: Arc<Mutex<Vec<u64>>>) {
    let listener = TcpListener::bind(("127.0.0.1", port)).unwrap();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            let Ok((mut stream, _)) = listener.accept() else {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            };
            stream.set_nonblocking(false).unwrap();
            let head = read_request(&mut stream);
            let from = head
                .split(['?', '&', ' '])
                .find_map(|kv| kv.strip_prefix("from="))
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            got.lock().unwrap().push(from);
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
        }
    });
}

fn wait_until(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_server_that_is_down_costs_a_bounded_queue() {
    let pusher = Pusher::start(&options(&format!("http://127.0.0.1:{}", free_port()))).unwrap();
    for from in 0..10 {
        pusher.push(period(from));
    }
    wait_until("all taken", || pusher.shared.lock().periods.is_empty());
    assert!(pusher.shared.waiting.load(Ordering::Relaxed) <= QUEUED as u64);
    assert!(
        pusher.summary().contains("in memory"),
        "{}",
        pusher.summary()
    );
    let dropped = pusher.shared.dropped.load(Ordering::Relaxed);
    assert!(dropped >= 10 - 2 * QUEUED as u64, "{}", pusher.summary());
}

#[test]
fn a_spool_keeps_what_a_server_missed_and_sends_it_in_order_when_it_is_back() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let got = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    serve(port, stop.clone(), got.clone());
    let mut settings = options(&format!("http://127.0.0.1:{port}"));
    settings.push_spool = Some(dir.path().join("spool").display().to_string());
    let pusher = Pusher::start(&settings).unwrap();
    pusher.push(period(1));
    wait_until("the first period", || got.lock().unwrap().len() == 1);
    // The server goes away for ten periods, more than the memory backlog holds.
    stop.store(true, Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(50));
    for from in 2..12 {
        pusher.push(period(from));
        std::thread::sleep(Duration::from_millis(20));
    }
    wait_until("ten periods spooled", || {
        pusher.shared.waiting.load(Ordering::Relaxed) == 10
    });
    serve(port, Arc::new(AtomicBool::new(false)), got.clone());
    pusher.push(period(12));
    wait_until("the spool sent", || got.lock().unwrap().len() == 12);
    assert_eq!(*got.lock().unwrap(), (1..=12).collect::<Vec<u64>>());
    let summary = pusher.summary();
    assert!(
        summary.starts_with("pushed 12 periods, dropped 0"),
        "{summary}"
    );
    assert!(summary.contains("0 waiting (0 bytes)"), "{summary}");
}

#[test]
fn https_with_a_private_ca_carries_the_bearer_token() {
    let dir = tempfile::tempdir().unwrap();
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, certified.cert.pem()).unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "t0ken\n").unwrap();
    let server = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![certified.cert.der().clone()],
        rustls::pki_types::PrivateKeyDer::Pkcs8(certified.signing_key.serialize_der().into()),
    )
    .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let heads = Arc::new(Mutex::new(Vec::new()));
    let store = heads.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let connection = rustls::ServerConnection::new(Arc::new(server.clone())).unwrap();
            let mut tls = rustls::StreamOwned::new(connection, stream.unwrap());
            let head = read_request(&mut tls);
            if head.is_empty() {
                continue; // a client that did not trust the certificate
            }
            store.lock().unwrap().push(head);
            let _ = tls.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
            tls.conn.send_close_notify();
            let _ = tls.flush();
        }
    });
    let mut settings = options(&format!("https://localhost:{port}/api/ingest"));
    settings.push_ca = Some(ca.display().to_string());
    settings.push_token_file = Some(token.display().to_string());
    let pusher = Pusher::start(&settings).unwrap();
    pusher.push(period(1));
    wait_until("the period over TLS", || !heads.lock().unwrap().is_empty());
    let head = heads.lock().unwrap()[0].clone();
    assert!(
        head.starts_with("POST /api/ingest?name=jtap%7B%7D&from=1&until=2"),
        "{head}"
    );
    assert!(
        head.contains("\r\nAuthorization: Bearer t0ken\r\n"),
        "{head}"
    );
    assert!(
        head.contains(&format!("\r\nHost: localhost:{port}\r\n")),
        "{head}"
    );
    wait_until("counted", || pusher.summary().starts_with("pushed 1 "));
    // Without the CA the server's certificate is refused.
    settings.push_ca = None;
    let untrusting = Pusher::start(&settings).unwrap();
    untrusting.push(period(2));
    wait_until("refused", || {
        untrusting.shared.failures.load(Ordering::Relaxed) > 0
    });
    assert_eq!(heads.lock().unwrap().len(), 1);
}

#[test]
fn bad_settings_fail_the_start_with_one_line() {
    let mut settings = options("https://localhost:1");
    settings.push_ca = Some("/nonexistent/ca.pem".into());
    for (settings, says) in [
        (options("ftp://x"), "http://, https://, otlp:// or otlps://"),
        (settings, "/nonexistent/ca.pem"),
        (
            Options {
                push_spool: Some("/proc/version/spool".into()),
                ..options("http://localhost:1")
            },
            "push-spool=/proc/version/spool",
        ),
    ] {
        let error = Pusher::start(&settings).err().unwrap();
        assert!(error.contains(says) && !error.contains('\n'), "{error}");
    }
}
