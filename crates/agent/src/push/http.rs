//! One POST of a period to the ingest endpoint, over TCP or TLS.
//!
//! The HTTP/1.1 client is hand-written: one request per connection is all it does. TLS is
//! rustls with the ring provider (no process-wide default provider is installed: the JVM may
//! hold other TLS users), trusting webpki-roots' public roots and `push-ca=`'s certificates.
//! Its cost stays on the push thread: the configuration is built once when the recording
//! starts, each push does one handshake.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};

use super::endpoint::{Auth, Endpoint, Payload, Scheme};
use super::spool::Item;

/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one read or write may wait.
const IO_TIMEOUT: Duration = Duration::from_secs(20);
/// The multipart boundary; JFR recordings never hold it after a CRLF.
const BOUNDARY: &str = "jtap-period-boundary-7f3a";

/// Why a period was not taken.
#[derive(Debug)]
pub enum Refusal {
    /// The server is away or busy (no connection, 5xx, 408, 429, 401, 403): try it later.
    Retry(String),
    /// The server answered that this request is wrong (other 4xx): trying again would not help.
    Rejected(String),
}

/// Sends periods to one endpoint.
pub struct Client {
    endpoint: Endpoint,
    auth: Auth,
    /// Present for `https://`.
    tls: Option<Arc<ClientConfig>>,
}

impl Client {
    /// A client of `endpoint`; `ca_file` (PEM) adds trusted certificates for `https://`.
    pub fn new(endpoint: Endpoint, auth: Auth, ca_file: Option<&str>) -> Result<Client, String> {
        let tls = match (endpoint.scheme, ca_file) {
            (Scheme::Https, ca_file) => Some(tls_config(ca_file)?),
            (Scheme::Http, Some(_)) => {
                return Err("push-ca= goes with an https:// push= URL".into());
            }
            (Scheme::Http, None) => None,
        };
        Ok(Client {
            endpoint,
            auth,
            tls,
        })
    }

    /// The endpoint, as logs name it: `host:port`.
    pub fn target(&self) -> String {
        format!("{}:{}", self.endpoint.host, self.endpoint.port)
    }

    /// The ingest name (`app{labels}`, URL-encoded) of new periods, with `label=VALUE` for
    /// a request label's series.
    pub fn name_for(&self, label: Option<&str>) -> String {
        self.endpoint.name_for(label)
    }

    /// What periods are sent as.
    pub fn payload(&self) -> Payload {
        self.endpoint.payload
    }

    /// OTLP's resource attributes.
    pub fn resource(&self) -> &[(String, String)] {
        &self.endpoint.resource
    }

    /// One POST of a period; Ok on a 2xx reply.
    pub fn send(&self, item: &Item) -> Result<(), Refusal> {
        let tcp = self.connect().map_err(Refusal::Retry)?;
        let status = match &self.tls {
            None => self.exchange(tcp, item),
            Some(config) => {
                let server = ServerName::try_from(self.endpoint.host.clone())
                    .map_err(|e| Refusal::Rejected(format!("TLS server name: {e}")))?;
                let connection = ClientConnection::new(config.clone(), server)
                    .map_err(|e| Refusal::Retry(format!("TLS: {e}")))?;
                self.exchange(StreamOwned::new(connection, tcp), item)
            }
        }
        .map_err(Refusal::Retry)?;
        match status {
            200..=299 => Ok(()),
            401 | 403 | 408 | 429 | 500..=599 => Err(Refusal::Retry(format!("HTTP {status}"))),
            other => Err(Refusal::Rejected(format!("HTTP {other}"))),
        }
    }

    /// A connection to the first of the host's addresses that answers.
    fn connect(&self) -> Result<TcpStream, String> {
        let addresses = (self.endpoint.host.as_str(), self.endpoint.port)
            .to_socket_addrs()
            .map_err(|e| format!("resolving {}: {e}", self.endpoint.host))?;
        let mut last = format!("resolving {}: no address", self.endpoint.host);
        for address in addresses {
            match TcpStream::connect_timeout(&address, CONNECT_TIMEOUT) {
                Ok(stream) => {
                    stream
                        .set_read_timeout(Some(IO_TIMEOUT))
                        .and_then(|()| stream.set_write_timeout(Some(IO_TIMEOUT)))
                        .map_err(|e| e.to_string())?;
                    return Ok(stream);
                }
                Err(e) => last = format!("connecting to {address}: {e}"),
            }
        }
        Err(last)
    }

    /// Writes the request, reads the reply's status code.
    fn exchange(&self, mut stream: impl Read + Write, item: &Item) -> Result<u16, String> {
        // Pyroscope: the JFR recording as the `jfr` part of a multipart form, the period in
        // the query; OTLP: the message as the body.
        let (target, kind, part_head, part_tail) = match self.endpoint.payload {
            Payload::PyroscopeJfr => (
                format!(
                    "{}?name={}&from={}&until={}&format=jfr&spyName=jtap",
                    self.endpoint.path, item.name, item.from, item.until
                ),
                format!("multipart/form-data; boundary={BOUNDARY}"),
                format!("--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"jfr\"; filename=\"jfr\"\r\nContent-Type: application/octet-stream\r\n\r\n"),
                format!("\r\n--{BOUNDARY}--\r\n"),
            ),
            Payload::Otlp => (
                self.endpoint.path.clone(),
                "application/x-protobuf".to_string(),
                String::new(),
                String::new(),
            ),
        };
        let length = part_head.len() + item.payload.len() + part_tail.len();
        let head = format!(
            "POST {target} HTTP/1.1\r\nHost: {}\r\nUser-Agent: jtap/{}\r\n{}Content-Type: {kind}\r\nContent-Length: {length}\r\nConnection: close\r\n\r\n",
            self.endpoint.host_header(),
            jtap_protocol::VERSION,
            self.auth.header()?,
        );
        let parts = [
            head.as_bytes(),
            part_head.as_bytes(),
            &item.payload,
            part_tail.as_bytes(),
        ];
        parts
            .iter()
            .try_for_each(|bytes| stream.write_all(bytes))
            .and_then(|()| stream.flush())
            .map_err(|e| format!("sending: {e}"))?;
        status_of(&mut stream)
    }
}

/// The status code of an HTTP reply's first line.
fn status_of(stream: &mut impl Read) -> Result<u16, String> {
    let mut reply = Vec::with_capacity(128);
    let mut buffer = [0u8; 128];
    while !reply.windows(2).any(|w| w == b"\r\n") && reply.len() < 1024 {
        match stream.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => reply.extend_from_slice(&buffer[..n]),
            Err(e) if reply.is_empty() => return Err(format!("reading the reply: {e}")),
            Err(_) => break,
        }
    }
    std::str::from_utf8(&reply)
        .ok()
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|code| code.parse::<u16>().ok())
        .ok_or_else(|| "no HTTP status in the reply".to_string())
}

/// TLS 1.2 and 1.3 with ring, trusting the public roots and `ca_file`'s certificates.
fn tls_config(ca_file: Option<&str>) -> Result<Arc<ClientConfig>, String> {
    let mut roots = RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    if let Some(path) = ca_file {
        let certificates = CertificateDer::pem_file_iter(path)
            .and_then(|certificates| certificates.collect::<Result<Vec<_>, _>>())
            .map_err(|e| format!("push-ca={path}: {e}"))?;
        if certificates.is_empty() {
            return Err(format!("push-ca={path}: no PEM certificate in it"));
        }
        for certificate in certificates {
            roots
                .add(certificate)
                .map_err(|e| format!("push-ca={path}: {e}"))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_file_must_hold_certificates() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let https = Endpoint::parse("https://pyro", "a", &[]).unwrap();
        let client = |ca: &str| Client::new(https.clone(), Auth::Anonymous, Some(ca)).err();
        assert!(client("/nonexistent.pem")
            .unwrap()
            .contains("/nonexistent.pem"));
        assert!(client(empty.to_str().unwrap()).unwrap().contains("no PEM"));
        let ca = rcgen::generate_simple_self_signed(vec!["pyro".into()]).unwrap();
        let good = dir.path().join("ca.pem");
        std::fs::write(&good, ca.cert.pem()).unwrap();
        assert!(client(good.to_str().unwrap()).is_none());
        let http = Endpoint::parse("http://pyro", "a", &[]).unwrap();
        assert!(Client::new(http, Auth::Anonymous, Some("/ca.pem")).is_err());
    }

    #[test]
    fn replies_give_their_status() {
        let status = |reply: &[u8]| status_of(&mut &reply[..]);
        assert_eq!(status(b"HTTP/1.1 204 No Content\r\n\r\n").unwrap(), 204);
        assert_eq!(status(b"HTTP/1.0 503").unwrap(), 503);
        assert!(status(b"").is_err());
        assert!(status(b"garbage\r\n").is_err());
    }
}
