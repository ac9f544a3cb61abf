//! Where periods go: `push=`'s URL (`http[s]://[user:password@]host[:port][/path]` for a
//! Pyroscope ingest endpoint, `otlp[s]://...` for an OTLP/HTTP profiles receiver) and the
//! credentials each request carries (the URL's, or `push-user=` and `push-token-file=`).

use jtap_protocol::options::Options;

/// Whether the connection is TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// Plain TCP.
    Http,
    /// TLS over TCP (rustls).
    Https,
}

/// What a period is sent as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payload {
    /// JFR in a multipart form, to a Pyroscope `/ingest` endpoint.
    PyroscopeJfr,
    /// An OTLP `ExportProfilesServiceRequest`, protobuf, to an OTLP/HTTP receiver.
    Otlp,
}

/// Where periods go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub(super) scheme: Scheme,
    pub(super) payload: Payload,
    pub(super) host: String,
    pub(super) port: u16,
    /// Path of the ingest endpoint, `/ingest` unless the URL says otherwise.
    pub(super) path: String,
    /// The application's name and its `k=v` labels: the ingest name is `app{k=v,...}`.
    pub(super) app: String,
    pub(super) pairs: Vec<String>,
    /// OTLP's resource attributes: `service.name` (the app) and the labels.
    pub(super) resource: Vec<(String, String)>,
    /// User and password of the URL (`https://user:password@host`), percent-decoded.
    pub(super) userinfo: Option<(String, String)>,
}

impl Endpoint {
    /// From `push=http[s]|otlp[s]://[user:password@]host[:port][/path]`, the application's
    /// name and `k=v` labels.
    pub fn parse(url: &str, app: &str, labels: &[(String, String)]) -> Result<Endpoint, String> {
        let schemes = [
            ("http://", Scheme::Http, Payload::PyroscopeJfr),
            ("https://", Scheme::Https, Payload::PyroscopeJfr),
            ("otlp://", Scheme::Http, Payload::Otlp),
            ("otlps://", Scheme::Https, Payload::Otlp),
        ];
        let Some((scheme, payload, rest)) = schemes
            .iter()
            .find_map(|(prefix, s, p)| Some((*s, *p, url.strip_prefix(prefix)?)))
        else {
            return Err(format!(
                "push={url}: expected an http://, https://, otlp:// or otlps:// URL"
            ));
        };
        let default_path = match payload {
            Payload::PyroscopeJfr => "/ingest",
            Payload::Otlp => "/v1development/profiles",
        };
        let (authority, path) = match rest.find(['/', '?']) {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, default_path),
        };
        if path.contains(['?', '#']) {
            return Err(format!("push={url}: no query or fragment in the URL"));
        }
        if path.contains(|c: char| c.is_whitespace() || c.is_control()) {
            return Err(format!(
                "push={url}: a space or control character in the path"
            ));
        }
        let path = if path == "/" { default_path } else { path };
        let (userinfo, hostport) = match authority.rsplit_once('@') {
            Some((info, hostport)) => {
                let (user, password) = info.split_once(':').unwrap_or((info, ""));
                let decoded = (percent_decode(user), percent_decode(password));
                match decoded {
                    (Some(user), Some(password)) if !user.is_empty() => {
                        (Some((user, password)), hostport)
                    }
                    _ => return Err(format!("push={url}: bad user:password before @")),
                }
            }
            None => (None, authority),
        };
        let default_port = match (payload, scheme) {
            (Payload::Otlp, _) => 4318,
            (_, Scheme::Http) => 80,
            (_, Scheme::Https) => 443,
        };
        let (host, port) = split_host_port(hostport)
            .ok_or_else(|| format!("push={url}: bad host {hostport:?}"))?;
        let port = match port {
            Some(port) => port
                .parse()
                .map_err(|_| format!("push={url}: bad port {port:?}"))?,
            None => default_port,
        };
        if host.is_empty() || host.contains(|c: char| c.is_whitespace() || c.is_control()) {
            return Err(format!("push={url}: no host"));
        }
        let pairs: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let service = ("service.name".to_string(), app.to_string());
        Ok(Endpoint {
            scheme,
            payload,
            host: host.to_string(),
            port,
            path: path.to_string(),
            app: app.to_string(),
            pairs,
            resource: std::iter::once(service)
                .chain(labels.iter().cloned())
                .collect(),
            userinfo,
        })
    }

    /// The ingest name, `app{k=v,...}` URL-encoded, with `label=VALUE` last for a request
    /// label's series (the characters that delimit the name's parts replaced by `_`).
    pub(super) fn name_for(&self, label: Option<&str>) -> String {
        let mut pairs = self.pairs.clone();
        if let Some(value) = label {
            let value: String = value
                .chars()
                .map(|c| match c {
                    '{' | '}' | ',' | '=' => '_',
                    c => c,
                })
                .collect();
            pairs.push(format!("label={value}"));
        }
        url_encode(&format!("{}{{{}}}", self.app, pairs.join(",")))
    }

    /// `Host:`'s value: the port only when it is not the scheme's own.
    pub(super) fn host_header(&self) -> String {
        let host = match self.host.contains(':') {
            true => format!("[{}]", self.host),
            false => self.host.clone(),
        };
        match (self.scheme, self.port) {
            (Scheme::Http, 80) | (Scheme::Https, 443) => host,
            (_, port) => format!("{host}:{port}"),
        }
    }
}

/// `host[:port]` or `[v6]:port`: the host and the port if given.
fn split_host_port(text: &str) -> Option<(&str, Option<&str>)> {
    match text.strip_prefix('[') {
        Some(bracketed) => {
            let (host, after) = bracketed.split_once(']')?;
            match after {
                "" => Some((host, None)),
                port => Some((host, Some(port.strip_prefix(':')?))),
            }
        }
        None => Some(match text.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (text, None),
        }),
    }
}

/// The credentials of each request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    /// None.
    Anonymous,
    /// `Authorization: Basic`, the password given or read from a file at each push.
    Basic { user: String, password: Secret },
    /// `Authorization: Bearer`, the token read from a file at each push.
    Bearer(Secret),
}

/// A password or token: given (in the URL) or the contents of a file, read at each push so
/// that a rotated token is picked up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Secret {
    /// Given as is.
    Given(String),
    /// `push-token-file=`: a file holding it (surrounding whitespace ignored).
    File(String),
}

impl Secret {
    /// Its value now; Err when its file cannot be read or holds no usable value.
    pub(super) fn value(&self) -> Result<String, String> {
        let text = match self {
            Secret::Given(text) => return Ok(text.clone()),
            Secret::File(path) => {
                std::fs::read_to_string(path).map_err(|e| format!("push-token-file={path}: {e}"))?
            }
        };
        let token = text.trim();
        match token.is_empty() || token.contains(|c: char| c.is_control()) {
            true => Err(format!(
                "push-token-file={}: expected one line holding the secret",
                self.path()
            )),
            false => Ok(token.to_string()),
        }
    }

    fn path(&self) -> &str {
        match self {
            Secret::Given(_) => "",
            Secret::File(path) => path,
        }
    }
}

impl Auth {
    /// From the URL's user and password, `push-user=` and `push-token-file=`; checks that the
    /// token file reads.
    pub fn of(endpoint: &Endpoint, options: &Options) -> Result<Auth, String> {
        let token = options.push_token_file.clone().map(Secret::File);
        let auth = match (&endpoint.userinfo, &options.push_user, token) {
            (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
                return Err("push=: give basic auth in the URL or with push-user= and push-token-file=, not both".into())
            }
            (Some((user, password)), None, None) => Auth::Basic {
                user: user.clone(),
                password: Secret::Given(password.clone()),
            },
            (None, Some(_), None) => {
                return Err("push-user=: give its password with push-token-file=".into())
            }
            (None, Some(user), _) if user.contains(|c: char| c == ':' || c.is_control()) => {
                return Err(format!("push-user={user}: a user name has no ':'"))
            }
            (None, Some(user), Some(password)) => Auth::Basic {
                user: user.clone(),
                password,
            },
            (None, None, Some(token)) => Auth::Bearer(token),
            (None, None, None) => Auth::Anonymous,
        };
        auth.header()?;
        Ok(auth)
    }

    /// The `Authorization:` header line (with its CRLF), empty when anonymous.
    pub(super) fn header(&self) -> Result<String, String> {
        Ok(match self {
            Auth::Anonymous => String::new(),
            Auth::Basic { user, password } => {
                let credentials = format!("{user}:{}", password.value()?);
                format!(
                    "Authorization: Basic {}\r\n",
                    base64(credentials.as_bytes())
                )
            }
            Auth::Bearer(token) => format!("Authorization: Bearer {}\r\n", token.value()?),
        })
    }
}

/// Standard base64 with padding (RFC 4648 §4).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            match i <= chunk.len() {
                true => out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char),
                false => out.push('='),
            }
        }
    }
    out
}

/// Percent-encodes everything but unreserved characters.
pub(super) fn url_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `%XX` sequences decoded; None when one is malformed or the result is not UTF-8 text.
fn percent_decode(text: &str) -> Option<String> {
    let mut out = Vec::with_capacity(text.len());
    let mut bytes = text.bytes();
    while let Some(b) = bytes.next() {
        match b {
            b'%' => {
                let hex = [bytes.next()?, bytes.next()?];
                out.push(u8::from_str_radix(std::str::from_utf8(&hex).ok()?, 16).ok()?);
            }
            other => out.push(other),
        }
    }
    String::from_utf8(out)
        .ok()
        .filter(|s| !s.contains(|c: char| c.is_control()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse_with_name_and_labels() {
        let labels = [("env".to_string(), "prod".to_string())];
        let e = Endpoint::parse("http://pyro:4040", "shop", &labels).unwrap();
        assert_eq!(
            (e.scheme, e.host.as_str(), e.port, e.path.as_str()),
            (Scheme::Http, "pyro", 4040, "/ingest")
        );
        assert_eq!(e.name_for(None), "shop%7Benv%3Dprod%7D");
        assert_eq!(
            e.name_for(Some("GET /a,b")),
            "shop%7Benv%3Dprod%2Clabel%3DGET%20%2Fa_b%7D"
        );
        assert_eq!(e.host_header(), "pyro:4040");
        let e = Endpoint::parse("https://u%40x:p%3Aw@pyro/api/ingest", "a", &[]).unwrap();
        assert_eq!(
            (e.scheme, e.port, e.path.as_str(), e.host_header()),
            (Scheme::Https, 443, "/api/ingest", "pyro".to_string())
        );
        assert_eq!(e.userinfo, Some(("u@x".into(), "p:w".into())));
        let e = Endpoint::parse("https://[::1]:8443", "a", &[]).unwrap();
        assert_eq!((e.host.as_str(), e.port), ("::1", 8443));
        let e = Endpoint::parse("otlps://collector", "shop", &labels).unwrap();
        assert_eq!(
            (e.scheme, e.payload, e.port, e.path.as_str()),
            (
                Scheme::Https,
                Payload::Otlp,
                4318,
                "/v1development/profiles"
            )
        );
        assert_eq!(e.resource[0], ("service.name".into(), "shop".into()));
        assert_eq!(e.resource[1], ("env".into(), "prod".into()));
        for bad in [
            "ftp://pyro",
            "pyro:4040",
            "http://pyro:x",
            "https://",
            "https://:443",
            "http://pyro/ingest?x=1",
            "https://u:%zz@pyro",
            "http://pyro/a b",
        ] {
            assert!(Endpoint::parse(bad, "a", &[]).is_err(), "{bad}");
        }
    }

    #[test]
    fn credentials_come_from_the_url_or_a_file_read_at_each_push() {
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "s3cret\n").unwrap();
        let token = token.to_str().unwrap().to_string();
        let endpoint = Endpoint::parse("https://pyro", "a", &[]).unwrap();
        let with = |user: Option<&str>, file: Option<&str>| {
            let options = Options {
                push_user: user.map(str::to_string),
                push_token_file: file.map(str::to_string),
                ..Options::default()
            };
            Auth::of(&endpoint, &options).and_then(|a| a.header())
        };
        assert_eq!(with(None, None).unwrap(), "");
        assert_eq!(
            with(None, Some(&token)).unwrap(),
            "Authorization: Bearer s3cret\r\n"
        );
        // "123456:s3cret"
        assert_eq!(
            with(Some("123456"), Some(&token)).unwrap(),
            "Authorization: Basic MTIzNDU2OnMzY3JldA==\r\n"
        );
        assert!(with(Some("123456"), None).is_err());
        assert!(with(Some("a:b"), Some(&token)).is_err());
        assert!(with(None, Some("/nonexistent/token"))
            .unwrap_err()
            .contains("/nonexistent"));
        std::fs::write(&token, "two\nlines").unwrap();
        assert!(with(None, Some(&token)).is_err());
        let in_url = Endpoint::parse("https://user:pass@pyro", "a", &[]).unwrap();
        let header = Auth::of(&in_url, &Options::default()).unwrap().header();
        assert_eq!(header.unwrap(), "Authorization: Basic dXNlcjpwYXNz\r\n");
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
    }
}
