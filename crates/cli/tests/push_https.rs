//! `--push https://` (issue #38, ready for a fleet): a looping recording pushes each period
//! over TLS, trusting a CA the test generates (`--push-ca`), with basic auth (`--push-user`,
//! `--push-token-file`); the server stops mid-recording and comes back, and with
//! `--push-spool` no period is lost. Bad settings fail `profile start` with one line.

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{agent_library, jtap};
use jtap_testkit::{jdks, JavaProcess};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// One POST as the server got it.
struct Ingest {
    /// The query string.
    query: String,
    /// The `Authorization:` header's value.
    authorization: String,
    /// The `jfr` part of the multipart body.
    jfr: Vec<u8>,
}

type Received = Arc<Mutex<Vec<Ingest>>>;

/// A CA of the test's own (PEM) and a server certificate for `localhost` signed by it.
fn certificates() -> (String, Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let server = CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    let key = PrivateKeyDer::Pkcs8(key.serialize_der().into());
    (ca.pem(), vec![server.der().clone()], key)
}

/// An HTTPS ingest server on `port` until `stop` is set: answers 200 to each POST and keeps
/// what came.
fn serve(port: u16, config: Arc<rustls::ServerConfig>, stop: Arc<AtomicBool>, store: Received) {
    let listener = TcpListener::bind(("127.0.0.1", port)).unwrap();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            let Ok((stream, _)) = listener.accept() else {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            };
            stream.set_nonblocking(false).unwrap();
            stream
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            let connection = rustls::ServerConnection::new(config.clone()).unwrap();
            let mut tls = rustls::StreamOwned::new(connection, stream);
            if let Some(ingest) = read_ingest(&mut tls) {
                store.lock().unwrap().push(ingest);
                let _ = tls.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
                tls.conn.send_close_notify();
                let _ = tls.flush();
            }
        }
    });
}

/// One request: its head, then Content-Length bytes of multipart body.
fn read_ingest(stream: &mut impl Read) -> Option<Ingest> {
    let mut request = Vec::new();
    let mut buffer = [0u8; 65536];
    let mut wanted = None;
    while wanted.is_none_or(|w| request.len() < w) {
        let n = stream.read(&mut buffer).ok().filter(|&n| n > 0)?;
        request.extend_from_slice(&buffer[..n]);
        if let Some(end) = request.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&request[..end]).to_string();
            let length: usize = header(&head, "content-length")?.parse().ok()?;
            wanted = Some(end + 4 + length);
        }
    }
    let end = request.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&request[..end]).to_string();
    let body = &request[end + 4..];
    let start = body.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let stop = body.windows(4).rposition(|w| w == b"\r\n--")?;
    Some(Ingest {
        query: head
            .split_whitespace()
            .nth(1)?
            .split_once('?')?
            .1
            .to_string(),
        authorization: header(&head, "authorization").unwrap_or_default(),
        jfr: body[start..stop.max(start)].to_vec(),
    })
}

/// A header's value, its name in any case.
fn header(head: &str, name: &str) -> Option<String> {
    head.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.eq_ignore_ascii_case(name)
            .then(|| value.trim().to_string())
    })
}

fn param(query: &str, key: &str) -> u64 {
    query
        .split('&')
        .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {query}"))
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// `jtap status`'s push line.
fn push_status(pid: &str) -> String {
    let status = jtap(["status", pid]).ok();
    status
        .lines()
        .find(|l| l.contains("pushed "))
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn wait_until(what: &str, seconds: u64, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    while !done() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn periods_pushed_over_tls_survive_a_server_restart_in_the_spool() {
    agent_library();
    let dir = tempfile::tempdir().unwrap();
    let (ca, chain, key) = certificates();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca).unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "s3cret\n").unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .unwrap();
    let config = Arc::new(config);
    let port = free_port();
    let received: Received = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    serve(port, config.clone(), stop.clone(), received.clone());

    let jdk = jdks()
        .iter()
        .find(|j| j.version == 17)
        .unwrap_or(&jdks()[0]);
    let mut jvm = JavaProcess::start(jdk, "workloads.Mixed");
    let pid = jvm.pid().to_string();
    let spool = dir.path().join("spool");
    let start = jtap([
        "profile",
        "start",
        &pid,
        "-e",
        "cpu",
        "--loop",
        "1s",
        "--push",
        &format!("https://localhost:{port}"),
        "--push-ca",
        ca_file.to_str().unwrap(),
        "--push-user",
        "123456",
        "--push-token-file",
        token_file.to_str().unwrap(),
        "--push-spool",
        spool.to_str().unwrap(),
        "--app",
        "shop",
    ]);
    assert_eq!(start.code, 0, "{start:?}");
    wait_until("two periods pushed", 60, || {
        received.lock().unwrap().len() >= 2
    });
    // The server goes away for about eight periods, more than the four the agent would keep
    // in memory without a spool.
    stop.store(true, Ordering::Relaxed);
    std::thread::sleep(Duration::from_secs(8));
    let away = push_status(&pid);
    let spooled = std::fs::read_dir(&spool).unwrap().count();
    serve(
        port,
        config,
        Arc::new(AtomicBool::new(false)),
        received.clone(),
    );
    wait_until("the spool emptied", 60, || {
        push_status(&pid).contains(" 0 waiting")
    });
    let stop = jtap(["profile", "stop", &pid, "--format", "summary"]);
    assert_eq!(stop.code, 0, "{stop:?}");
    std::thread::sleep(Duration::from_millis(1500)); // the last period's push
    eprintln!("while the server was away: {away} ({spooled} files spooled)");
    assert!(spooled >= 6, "{away}");
    assert!(away.contains("dropped 0"), "{away}");

    let received = received.lock().unwrap();
    let mut previous_until = None;
    for (i, ingest) in received.iter().enumerate() {
        // "123456:s3cret"
        assert_eq!(
            ingest.authorization, "Basic MTIzNDU2OnMzY3JldA==",
            "period {i}"
        );
        let (from, until) = (param(&ingest.query, "from"), param(&ingest.query, "until"));
        // Each period begins when the one before ended: no gap, so none lost.
        if let Some(previous) = previous_until {
            assert!(
                from < until && from <= previous && from + 1 >= previous,
                "period {i}: {from}..{until} after {previous}"
            );
        }
        previous_until = Some(until);
        let profiles =
            jtap_profile::import::read(&ingest.jfr, Path::new("push.jfr"), &Default::default())
                .unwrap_or_else(|e| panic!("period {i}: {e}"));
        assert!(profiles[0].total_samples() > 0, "period {i}");
    }
    assert!(received.len() >= 8, "{} periods", received.len());
    assert_eq!(std::fs::read_dir(&spool).unwrap().count(), 0);
    assert!(jvm.is_running());
}

#[test]
fn bad_push_settings_fail_the_start_with_one_line() {
    agent_library();
    let jdk = &jdks()[0];
    let mut jvm = JavaProcess::start(jdk, "workloads.Mixed");
    let pid = jvm.pid().to_string();
    let start = |extra: &[&str]| {
        let mut args = vec!["profile", "start", &pid, "-e", "cpu", "--loop", "1s"];
        args.extend_from_slice(extra);
        jtap(args)
    };
    let cases: [(&[&str], &str); 4] = [
        (&["--push", "ftp://pyro"], "expected an http://, https://"),
        (
            &[
                "--push",
                "https://localhost:1",
                "--push-ca",
                "/nonexistent/ca.pem",
            ],
            "push-ca=/nonexistent/ca.pem",
        ),
        (
            &[
                "--push",
                "https://localhost:1",
                "--push-token-file",
                "/nonexistent/t",
            ],
            "push-token-file=/nonexistent/t",
        ),
        (
            &[
                "--push",
                "http://localhost:1",
                "--push-spool",
                "/proc/version/x",
            ],
            "push-spool=/proc/version/x",
        ),
    ];
    for (extra, says) in cases {
        let run = start(extra);
        assert_ne!(run.code, 0, "{extra:?}: {run:?}");
        let message = run.stderr.trim_end();
        assert!(
            message.contains(says) && !message.contains('\n') && !message.contains("panic"),
            "{extra:?}: {run:?}"
        );
    }
    // Settings without --push are refused before attaching.
    let run = start(&["-o", "/tmp/x-%n.jfr", "--push-spool", "/tmp/spool"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(jtap(["status", &pid]).ok().contains("recordings: none"));
    assert!(jvm.is_running());
}
