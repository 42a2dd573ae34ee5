//! hank's egress proxy for a sandboxed agent: a listener on 127.0.0.1 (its own threads, std
//! only) that takes `CONNECT host:port` and plain `http://` requests and lets through only the
//! allowed `host:port` entries. Every refusal is kept with the host and the time.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// The longest request head read (request line and headers).
const MAX_HEAD: usize = 16 * 1024;
/// Most headers a request head may carry (more: a 400).
const MAX_HEADERS: usize = 100;
/// A client that sends no complete head within this long is dropped.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
/// Refusals kept per proxy (the first ones; later ones are counted only).
const MAX_DENIED: usize = 200;

/// One refused connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied {
    /// `host:port` the agent asked for.
    pub host: String,
    /// When, as an RFC 3339 UTC time.
    pub at: String,
}

#[derive(Default)]
struct Shared {
    allowed: Mutex<Vec<String>>,
    denied: Mutex<Vec<Denied>>,
    stop: AtomicBool,
    /// The listening sockets agents' network namespaces handed over ([`Proxy::listen_unix`]),
    /// until their call ends ([`Proxy::end_call`]).
    handed: Mutex<Vec<TcpListener>>,
    /// The run's listener, handed over once by the namespace holder, until the proxy stops.
    held: Mutex<Vec<TcpListener>>,
}

/// A connection the proxy serves: TCP on 127.0.0.1 (its own listener, or one an agent's
/// network namespace handed over).
trait Conn: Read + Write + Send + Sized + 'static {
    fn try_clone(&self) -> io::Result<Self>;
    fn shutdown(&self, how: Shutdown) -> io::Result<()>;
    fn set_read_timeout(&self, limit: Option<Duration>) -> io::Result<()>;
}

impl Conn for TcpStream {
    fn try_clone(&self) -> io::Result<Self> {
        TcpStream::try_clone(self)
    }
    fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        TcpStream::shutdown(self, how)
    }
    fn set_read_timeout(&self, limit: Option<Duration>) -> io::Result<()> {
        TcpStream::set_read_timeout(self, limit)
    }
}

/// The running proxy; dropped, it stops accepting.
pub struct Proxy {
    port: u16,
    shared: Arc<Shared>,
    /// Its Unix socket, when it listens on one ([`Proxy::listen_unix`]).
    socket: Option<PathBuf>,
}

impl Proxy {
    /// Listens on 127.0.0.1 (a free port) and serves until dropped.
    ///
    /// # Errors
    /// The listener cannot be opened.
    pub fn start(allowed: Vec<String>) -> io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0))?;
        let port = listener.local_addr()?.port();
        let shared = Arc::new(Shared {
            allowed: Mutex::new(allowed),
            ..Shared::default()
        });
        accept_all("hank-egress", Arc::clone(&shared), move || {
            listener.accept().map(|(c, _)| c)
        })?;
        Ok(Self {
            port,
            shared,
            socket: None,
        })
    }

    /// Also takes, on a Unix socket made at `path` (in a folder only hank may write), the
    /// listening socket an agent's network namespace hands over ([`super::netns::hand_over`]):
    /// its 127.0.0.1:PORT, on which the proxy then accepts the agent's connections from here,
    /// until [`Proxy::end_call`].
    ///
    /// # Errors
    /// The socket cannot be made.
    pub fn listen_unix(&mut self, path: &Path) -> io::Result<()> {
        let listener = UnixListener::bind(path)?;
        let shared = Arc::clone(&self.shared);
        thread::Builder::new()
            .name("hank-egress-handover".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if shared.stop.load(Ordering::Relaxed) {
                        break;
                    }
                    if let Ok(conn) = conn {
                        // A hand-over that is not a listening loopback socket is refused.
                        let _ = take_listener(conn, &shared);
                    }
                }
            })?;
        self.socket = Some(path.to_path_buf());
        Ok(())
    }

    /// The call is over: the listening sockets handed over for it are shut (their accept loops
    /// end, and the namespace they hold goes with its last process).
    pub fn end_call(&self) {
        let handed = self
            .shared
            .handed
            .lock()
            .map(|mut h| std::mem::take(&mut *h))
            .unwrap_or_default();
        for listener in handed {
            // Shutting a listening socket wakes its blocked accept() (EINVAL on Linux).
            let _ = rustix::net::shutdown(&listener, rustix::net::Shutdown::Both);
        }
    }

    /// Its Unix socket, when it listens on one.
    #[must_use]
    pub fn socket(&self) -> Option<&Path> {
        self.socket.as_deref()
    }

    /// The port on 127.0.0.1.
    #[must_use]
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Replaces the allowed `host:port` entries (the next call's agent).
    pub fn set_allowed(&self, allowed: Vec<String>) {
        if let Ok(mut a) = self.shared.allowed.lock() {
            *a = allowed;
        }
    }

    /// The refusals since the last take.
    #[must_use]
    pub fn take_denied(&self) -> Vec<Denied> {
        self.shared
            .denied
            .lock()
            .map(|mut d| std::mem::take(&mut *d))
            .unwrap_or_default()
    }

    /// `http://127.0.0.1:PORT`, for the agent's proxy variables.
    #[must_use]
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        self.end_call();
        let held = (self.shared.held.lock())
            .map(|mut h| std::mem::take(&mut *h))
            .unwrap_or_default();
        for listener in held {
            let _ = rustix::net::shutdown(&listener, rustix::net::Shutdown::Both);
        }
        // Wake the accept loops so that they see the stop.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(socket) = &self.socket {
            let _ = UnixStream::connect(socket);
        }
    }
}

/// The client side of one proxied connection: the stream and what was read past the last
/// request head or body.
struct Client<C> {
    conn: C,
    buf: Vec<u8>,
}

impl<C: Conn> Client<C> {
    /// More bytes into `buf`; false at the end of the stream or on an error.
    fn fill(&mut self) -> bool {
        let mut chunk = [0u8; 8192];
        match self.conn.read(&mut chunk) {
            Ok(0) | Err(_) => false,
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                true
            }
        }
    }

    /// The next request head, up to the blank line (taken from `buf`): [`Stop::End`] at the end
    /// of the stream, on an error or a head longer than [`MAX_HEAD`].
    fn head(&mut self) -> Result<Head, Stop> {
        loop {
            match Head::parse(&self.buf) {
                Parsed::Head(head, n) => {
                    self.buf.drain(..n);
                    return Ok(head);
                }
                Parsed::Malformed => return Err(Stop::Malformed),
                Parsed::Partial => {}
            }
            if self.buf.len() > MAX_HEAD || !self.fill() {
                return Err(Stop::End);
            }
        }
    }

    /// Copies exactly `n` more bytes of the client's stream to `out`.
    fn copy_exact(&mut self, mut n: u64, out: &mut impl Write) -> bool {
        while n > 0 {
            if self.buf.is_empty() && !self.fill() {
                return false;
            }
            let take = usize::try_from(n).unwrap_or(usize::MAX).min(self.buf.len());
            if out.write_all(&self.buf[..take]).is_err() {
                return false;
            }
            self.buf.drain(..take);
            n -= take as u64;
        }
        true
    }

    /// One CRLF-ended line of the client's stream copied to `out`; the line.
    fn copy_line(&mut self, out: &mut impl Write) -> Option<String> {
        loop {
            if let Some(end) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line: Vec<u8> = self.buf.drain(..end + 2).collect();
                out.write_all(&line).ok()?;
                return Some(String::from_utf8_lossy(&line).into_owned());
            }
            if self.buf.len() > MAX_HEAD || !self.fill() {
                return None;
            }
        }
    }

    /// A chunked body (chunks, the last one, trailers) copied to `out` as it is.
    fn copy_chunked(&mut self, out: &mut impl Write) -> bool {
        loop {
            let Some(size) = self.copy_line(out) else {
                return false;
            };
            let hex = size.trim().split(';').next().unwrap_or("").trim();
            let Ok(n) = u64::from_str_radix(hex, 16) else {
                return false;
            };
            if n == 0 {
                // Trailers up to the blank line.
                loop {
                    match self.copy_line(out) {
                        Some(l) if l == "\r\n" => return true,
                        Some(_) => {}
                        None => return false,
                    }
                }
            }
            if !self.copy_exact(n + 2, out) {
                return false;
            }
        }
    }
}

/// Why no request head was read.
#[derive(Debug, PartialEq, Eq)]
enum Stop {
    /// The stream ended, failed, or sent a head longer than [`MAX_HEAD`].
    End,
    /// Not an HTTP/1.x request head.
    Malformed,
}

/// A request head as `httparse` read it.
#[derive(Debug)]
struct Head {
    method: String,
    /// The request target as sent (`host:port` for `CONNECT`, `http://…` when proxied).
    uri: String,
    /// `x` of `HTTP/1.x`.
    minor: u8,
    /// The headers as sent (names as written, values as bytes).
    headers: Vec<(String, Vec<u8>)>,
}

/// What the start of a buffer holds.
enum Parsed {
    /// A head, and the bytes it took.
    Head(Head, usize),
    /// The start of a head.
    Partial,
    Malformed,
}

impl Head {
    /// The head at the start of `buf` (pure).
    fn parse(buf: &[u8]) -> Parsed {
        let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut slots);
        match req.parse(buf) {
            Ok(httparse::Status::Complete(n)) => Parsed::Head(
                Self {
                    method: req.method.unwrap_or_default().to_string(),
                    uri: req.path.unwrap_or_default().to_string(),
                    minor: req.version.unwrap_or(1),
                    headers: req
                        .headers
                        .iter()
                        .map(|h| (h.name.to_string(), h.value.to_vec()))
                        .collect(),
                },
                n,
            ),
            Ok(httparse::Status::Partial) => Parsed::Partial,
            Err(_) => Parsed::Malformed,
        }
    }
}

/// Where a request goes: `CONNECT h:p` (a tunnel) or `METHOD http://h[:p]/path` (forwarded
/// with the path alone, the request line returned). `None` for anything else (pure).
fn target(head: &Head) -> Option<(bool, String, String)> {
    let (method, uri) = (head.method.as_str(), head.uri.as_str());
    if method.eq_ignore_ascii_case("CONNECT") {
        let host = super::host_port(uri)?;
        return Some((true, host, String::new()));
    }
    let rest = uri.strip_prefix("http://")?;
    let host = super::host_port(uri)?;
    let path = rest.find('/').map_or("/", |i| &rest[i..]);
    Some((
        false,
        host,
        format!("{method} {path} HTTP/1.{}", head.minor),
    ))
}

/// How the body after a request head is framed (pure): `Some(n)` bytes, or chunked (`None`).
fn body_framing(head: &Head) -> Option<u64> {
    let mut length = 0;
    for (name, value) in &head.headers {
        let value = String::from_utf8_lossy(value);
        let value = value.trim();
        if name.eq_ignore_ascii_case("transfer-encoding")
            && value.to_ascii_lowercase().contains("chunked")
        {
            return None;
        }
        if name.eq_ignore_ascii_case("content-length") {
            length = value.parse().unwrap_or(0);
        }
    }
    Some(length)
}

/// The request again in origin form (`line`), its proxy headers left out (pure).
fn origin_form(line: &str, head: &Head) -> Vec<u8> {
    let mut out = format!("{line}\r\n").into_bytes();
    for (name, value) in &head.headers {
        if !name.to_ascii_lowercase().starts_with("proxy-") {
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
        }
    }
    out.extend_from_slice(b"\r\n");
    out
}

impl Shared {
    /// Whether `host` may be reached; a refusal is kept with the time.
    fn admits(&self, host: &str) -> bool {
        if self
            .allowed
            .lock()
            .is_ok_and(|a| a.iter().any(|h| h == host))
        {
            return true;
        }
        if let Ok(mut d) = self.denied.lock()
            && d.len() < MAX_DENIED
        {
            d.push(Denied {
                host: host.to_string(),
                at: jiff::Timestamp::now()
                    .round(jiff::Unit::Second)
                    .map_or_else(|_| jiff::Timestamp::now().to_string(), |t| t.to_string()),
            });
        }
        false
    }
}

/// Receives the listening socket a namespace hands over on `conn` (one `SCM_RIGHTS` socket
/// with [`super::netns::HAND_OVER`]), checks that it is a TCP socket listening on loopback,
/// accepts the agent's connections on it (each served on a thread of its own) until it is
/// shut, and says [`super::netns::TAKEN`].
fn take_listener(mut conn: UnixStream, shared: &Arc<Shared>) -> io::Result<()> {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, recvmsg};
    use std::mem::MaybeUninit;
    conn.set_read_timeout(Some(super::netns::HAND_OVER_TIMEOUT))?;
    let mut byte = [0u8; 1];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let got = recvmsg(
        &conn,
        &mut [io::IoSliceMut::new(&mut byte)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )?;
    let mut fds = Vec::new();
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(received) = message {
            fds.extend(received);
        }
    }
    let refused = |why: &str| io::Error::new(io::ErrorKind::InvalidData, why.to_string());
    let for_the_run = byte == *super::netns::HAND_OVER_HELD;
    if got.bytes != 1 || !(byte == *super::netns::HAND_OVER || for_the_run) || fds.len() != 1 {
        return Err(refused("not a hand-over"));
    }
    let Some(fd) = fds.pop() else {
        return Err(refused("no socket"));
    };
    if !rustix::net::sockopt::socket_acceptconn(&fd)? {
        return Err(refused("not a listening socket"));
    }
    let listener = TcpListener::from(fd);
    if !listener.local_addr()?.ip().is_loopback() {
        return Err(refused("not on loopback"));
    }
    let keep = listener.try_clone()?;
    let serving = Arc::clone(shared);
    thread::Builder::new()
        .name("hank-egress-netns".into())
        .spawn(move || {
            loop {
                match listener.accept() {
                    Ok((c, _)) if !serving.stop.load(Ordering::Relaxed) => {
                        let serving = Arc::clone(&serving);
                        let _ = thread::Builder::new()
                            .name("hank-egress-conn".into())
                            .spawn(move || serve(c, &serving));
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    // Shut at the call's end ([`Proxy::end_call`]), or the proxy stopped.
                    _ => break,
                }
            }
        })?;
    // The run's listener (the namespace holder's) is served until the proxy stops; a call's
    // is shut at the call's end.
    let list = if for_the_run {
        &shared.held
    } else {
        &shared.handed
    };
    if let Ok(mut list) = list.lock() {
        list.push(keep);
    }
    conn.write_all(super::netns::TAKEN)
}

/// Takes connections from `accept` on a thread named `name` until the proxy stops, each
/// served on a thread of its own (the TCP listener on 127.0.0.1).
fn accept_all<C: Conn + Send + 'static>(
    name: &str,
    shared: Arc<Shared>,
    mut accept: impl FnMut() -> io::Result<C> + Send + 'static,
) -> io::Result<()> {
    thread::Builder::new().name(name.into()).spawn(move || {
        loop {
            let conn = accept();
            if shared.stop.load(Ordering::Relaxed) {
                break;
            }
            let Ok(conn) = conn else { continue };
            let shared = Arc::clone(&shared);
            let _ = thread::Builder::new()
                .name("hank-egress-conn".into())
                .spawn(move || serve(conn, &shared));
        }
    })?;
    Ok(())
}

fn serve<C: Conn>(conn: C, shared: &Shared) {
    let _ = conn.set_read_timeout(Some(HEAD_TIMEOUT));
    let mut client = Client {
        conn,
        buf: Vec::new(),
    };
    let head = match client.head() {
        Ok(head) => Some(head),
        Err(Stop::Malformed) => None,
        Err(Stop::End) => return,
    };
    let Some((tunnel, host, line)) = head.as_ref().and_then(target) else {
        let _ = client
            .conn
            .write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        return;
    };
    if !shared.admits(&host) {
        let body =
            format!("hank's sandbox refuses {host} (not an allowed host: SANDBOX_ALLOW_HOSTS)\n");
        let _ = client.conn.write_all(
            format!(
                "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        );
        return;
    }
    let (name, port) = host.rsplit_once(':').unwrap_or((host.as_str(), "443"));
    let name = name.trim_start_matches('[').trim_end_matches(']');
    let Ok(mut upstream) = port
        .parse::<u16>()
        .map_err(io::Error::other)
        .and_then(|p| TcpStream::connect((name, p)))
    else {
        let _ = client
            .conn
            .write_all(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n");
        return;
    };
    let _ = client.conn.set_read_timeout(None);
    if tunnel {
        if client
            .conn
            .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            .is_err()
            || upstream.write_all(&client.buf).is_err()
        {
            return;
        }
        relay(client.conn, upstream);
        return;
    }
    if let Some(head) = head {
        forward(client, upstream, shared, &host, head, line);
    }
}

/// Plain HTTP on a kept-alive connection: each request's head is read, checked (the same
/// allowed host: another one ends the connection) and sent upstream in origin form, its body
/// copied as framed; the answers flow back as they come.
fn forward<C: Conn>(
    mut client: Client<C>,
    mut upstream: TcpStream,
    shared: &Shared,
    host: &str,
    mut head: Head,
    mut line: String,
) {
    let (Ok(mut u_read), Ok(mut c_write)) = (upstream.try_clone(), client.conn.try_clone()) else {
        return;
    };
    let down = thread::Builder::new()
        .name("hank-egress-down".into())
        .spawn(move || {
            let _ = io::copy(&mut u_read, &mut c_write);
            let _ = c_write.shutdown(Shutdown::Both);
        });
    loop {
        let sent = upstream.write_all(&origin_form(&line, &head)).is_ok()
            && match body_framing(&head) {
                Some(n) => client.copy_exact(n, &mut upstream),
                None => client.copy_chunked(&mut upstream),
            };
        if !sent {
            break;
        }
        let Ok(next) = client.head() else { break };
        match target(&next) {
            Some((false, h, l)) if h == host => {
                if !shared.admits(&h) {
                    break;
                }
                (head, line) = (next, l);
            }
            Some((_, h, _)) => {
                // Another host on this connection: refused when it is not allowed, and the
                // client opens a new connection for an allowed one.
                let _ = shared.admits(&h);
                break;
            }
            None => break,
        }
    }
    let _ = upstream.shutdown(Shutdown::Write);
    if let Ok(down) = down {
        let _ = down.join();
    }
    let _ = client.conn.shutdown(Shutdown::Both);
}

/// Copies both ways until either side ends.
fn relay<C: Conn>(conn: C, upstream: TcpStream) {
    let (Ok(mut c_read), Ok(mut u_write)) = (conn.try_clone(), upstream.try_clone()) else {
        return;
    };
    let up = thread::Builder::new()
        .name("hank-egress-up".into())
        .spawn(move || {
            let _ = io::copy(&mut c_read, &mut u_write);
            let _ = u_write.shutdown(Shutdown::Write);
        });
    let (mut u_read, mut c_write) = (upstream, conn);
    let _ = io::copy(&mut u_read, &mut c_write);
    let _ = c_write.shutdown(Shutdown::Both);
    if let Ok(up) = up {
        let _ = up.join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_of_request_lines() {
        let cases = [
            (
                "CONNECT api.anthropic.com:443 HTTP/1.1",
                Some((true, "api.anthropic.com:443", "")),
            ),
            (
                "GET http://127.0.0.1:8080/v1/x?y=1 HTTP/1.1",
                Some((false, "127.0.0.1:8080", "GET /v1/x?y=1 HTTP/1.1")),
            ),
            (
                "POST http://Example.com HTTP/1.1",
                Some((false, "example.com:80", "POST / HTTP/1.1")),
            ),
            ("GET /relative HTTP/1.1", None),
            ("garbage", None),
            ("GET http://a.example/ HTTP/1.1\r\nNo colon here", None),
            ("GET http://a.example/ HTTP/2.0", None),
        ];
        for (line, want) in cases {
            let got = parsed(&format!("{line}\r\n\r\n")).as_ref().and_then(target);
            let want = want.map(|(t, h, l)| (t, h.to_string(), l.to_string()));
            assert_eq!(got, want, "{line}");
        }
    }

    /// The head `text` starts with (`None` when it holds none).
    fn parsed(text: &str) -> Option<Head> {
        match Head::parse(text.as_bytes()) {
            Parsed::Head(head, _) => Some(head),
            Parsed::Partial | Parsed::Malformed => None,
        }
    }

    fn ask(port: u16, request: &str) -> String {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    }

    /// A namespace's listening socket handed over: the proxy serves the agent's connections on
    /// it (a refusal recorded like any other), refuses anything else sent to its Unix socket,
    /// and shuts it when the call ends.
    #[test]
    fn a_handed_over_listener_is_served_until_the_call_ends() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("proxy.sock");
        let mut proxy = Proxy::start(Vec::new()).unwrap();
        proxy.listen_unix(&socket).unwrap();
        // Not a hand-over: a plain request is dropped unanswered.
        let mut plain = UnixStream::connect(&socket).unwrap();
        plain.write_all(b"CONNECT x:1 HTTP/1.1\r\n\r\n").unwrap();
        let mut answer = Vec::new();
        let _ = plain.read_to_end(&mut answer);
        assert!(answer.is_empty(), "{answer:?}");
        let listener = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        super::super::netns::send_listener(&listener, &socket).unwrap();
        drop(listener);
        let answer = ask(port, "CONNECT evil.example:443 HTTP/1.1\r\n\r\n");
        assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
        assert_eq!(proxy.take_denied()[0].host, "evil.example:443");
        proxy.end_call();
        // The port is closed once the accept loop has let go of it.
        let closed = (0..200).any(|_| {
            let refused = TcpStream::connect(("127.0.0.1", port)).is_err();
            if !refused {
                thread::sleep(Duration::from_millis(10));
            }
            refused
        });
        assert!(closed, "the handed-over port still accepts after the call");
    }

    #[test]
    fn body_framing_of_heads() {
        let cases = [
            ("POST / HTTP/1.1\r\nContent-Length: 12\r\n", Some(12)),
            ("POST / HTTP/1.1\r\ntransfer-encoding: Chunked\r\n", None),
            ("GET / HTTP/1.1\r\nHost: x\r\n", Some(0)),
        ];
        for (head, want) in cases {
            let parsed = parsed(&format!("{head}\r\n")).unwrap();
            assert_eq!(body_framing(&parsed), want, "{head}");
        }
    }

    /// Requests kept alive on one connection (a length-framed body, then a chunked one) each
    /// reach the upstream in origin form.
    #[test]
    fn kept_alive_requests_are_each_rewritten() {
        let upstream = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let up_port = upstream.local_addr().unwrap().port();
        let server = thread::spawn(move || {
            let (mut c, _) = upstream.accept().unwrap();
            let mut seen = Vec::new();
            let mut buf = [0u8; 4096];
            while !String::from_utf8_lossy(&seen).contains("0\r\n\r\n") {
                let n = c.read(&mut buf).unwrap();
                assert!(n > 0, "{}", String::from_utf8_lossy(&seen));
                seen.extend_from_slice(&buf[..n]);
            }
            c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
                .unwrap();
            String::from_utf8_lossy(&seen).into_owned()
        });
        let proxy = Proxy::start(vec![format!("127.0.0.1:{up_port}")]).unwrap();
        let url = format!("http://127.0.0.1:{up_port}");
        let answer = ask(
            proxy.port(),
            &format!(
                "POST {url}/a HTTP/1.1\r\nContent-Length: 5\r\n\r\nhelloPOST {url}/b HTTP/1.1\r\nTransfer-Encoding: chunked\r\nProxy-Connection: keep-alive\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
            ),
        );
        assert!(answer.ends_with("ok"), "{answer}");
        let seen = server.join().unwrap();
        assert_eq!(
            seen,
            "POST /a HTTP/1.1\r\nContent-Length: 5\r\n\r\nhelloPOST /b HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
        );
        assert!(proxy.take_denied().is_empty());
    }

    #[test]
    fn forwards_allowed_hosts_and_records_refused_ones() {
        let upstream = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let up_port = upstream.local_addr().unwrap().port();
        let server = thread::spawn(move || {
            let (mut c, _) = upstream.accept().unwrap();
            let mut buf = [0u8; 1024];
            let n = c.read(&mut buf).unwrap();
            let got = String::from_utf8_lossy(&buf[..n]).into_owned();
            c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
                .unwrap();
            got
        });
        let proxy = Proxy::start(vec![format!("127.0.0.1:{up_port}")]).unwrap();
        let answer = ask(
            proxy.port(),
            &format!(
                "GET http://127.0.0.1:{up_port}/v1/m HTTP/1.1\r\nHost: x\r\nProxy-Authorization: a\r\n\r\n"
            ),
        );
        assert!(answer.ends_with("ok"), "{answer}");
        let seen = server.join().unwrap();
        assert!(seen.starts_with("GET /v1/m HTTP/1.1\r\n"), "{seen}");
        assert!(!seen.contains("Proxy-Authorization"), "{seen}");
        assert!(proxy.take_denied().is_empty());

        let refused = ask(proxy.port(), "CONNECT evil.example:443 HTTP/1.1\r\n\r\n");
        assert!(refused.starts_with("HTTP/1.1 403"), "{refused}");
        // A head httparse does not read as HTTP/1.x is answered 400, and nothing is recorded.
        for bad in [
            "GET http://evil.example/ HTTP/1.1\r\nno colon\r\n\r\n",
            "CONNECT evil.example:443 HTTP/9.9\r\n\r\n",
        ] {
            let answer = ask(proxy.port(), bad);
            assert!(answer.starts_with("HTTP/1.1 400"), "{bad:?}: {answer}");
        }
        let denied = proxy.take_denied();
        assert_eq!(denied.len(), 1);
        assert_eq!(denied[0].host, "evil.example:443");
        assert!(denied[0].at.ends_with('Z'), "{}", denied[0].at);
    }
}
